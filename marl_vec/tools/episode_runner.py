"""A PyMARL-style episode runner: E complete episodes as one padded batch.

Value-based MARL trainers (QMIX, VDN, ...) learn from whole episodes stored as
``(E, T, A, ...)`` arrays with a ``filled`` mask, the way PyMARL's
``EpisodeBatch`` does. [`EpisodeRunner`][marl_vec.tools.episode_runner.EpisodeRunner] fills such a batch from a VecEnv in
the ``one_episode`` autoreset mode: every env plays exactly one episode, envs that
finish early are no longer stepped, and the batch stops as soon as all are done.

Layout, for E envs, A agents and ``max_steps`` = T (the env's episode limit unless
given):

- ``obs`` (E, T+1, A, *obs_shape), ``state`` (E, T+1, *state_shape) or None (state="none"),
  ``avail_actions`` (E, T+1, A, n_actions) or None, ``agent_mask`` (E, T+1, A):
  index t is what the agents saw before step t; index ``lengths[e]`` is the last
  observation of env e's episode.
- ``actions`` (E, T, A, *action_shape), ``reward`` (E, T, A), ``terminated`` and
  ``truncated`` (E, T, A): what step t did.
- ``filled`` (E, T) bool: step t belongs to env e's episode. Everything after an
  episode's end is zero (PyMARL's padding).
- ``lengths`` (E,), ``returns`` (E,) team returns, ``complete`` (E,): the episode
  ended within T steps (False: it was cut at T).

Keep ``terminated`` and ``truncated`` apart when building targets: a time-limit
end (truncated) is not a terminal state and should be bootstrapped.

Examples:
    >>> import marl_vec as mv
    >>> venv = mv.make("mpe/simple_spread", num_envs=4, autoreset="one_episode")
    >>> runner = EpisodeRunner(venv)
    >>> batch = runner.run()                      # uniform random policy
    >>> batch.obs.shape, batch.filled.shape
    ((4, 26, 3, 18), (4, 25))
    >>> venv.close()
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Callable, cast

import numpy as np

from marl_vec.core.episode import AutoresetMode
from marl_vec.tools.rollout import RandomPolicy
from marl_vec.core.spec import TreeAction
from marl_vec.vec.base import StepResult, VecEnv

Policy = Callable[[StepResult, int], Any]


@dataclass
class EpisodeBatch:
    """E padded episodes; see the module docstring for the layout."""

    obs: np.ndarray
    state: np.ndarray | None  # None with state="none"
    avail_actions: np.ndarray | None
    agent_mask: np.ndarray
    actions: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    filled: np.ndarray
    lengths: np.ndarray
    returns: np.ndarray
    complete: np.ndarray

    @property
    def num_episodes(self) -> int:
        return int(self.filled.shape[0])

    @property
    def max_steps(self) -> int:
        return int(self.filled.shape[1])

    def copy(self) -> "EpisodeBatch":
        return EpisodeBatch(**cast("dict[str, Any]", {f.name: None if getattr(self, f.name) is None
                                                      else getattr(self, f.name).copy() for f in fields(self)}))


class EpisodeRunner:
    """Collects one episode per env of ``venv`` into a padded [`EpisodeBatch`][marl_vec.tools.episode_runner.EpisodeBatch].

    Args:
        venv: a VecEnv made with ``autoreset="one_episode"``.
        max_steps: T, the padded episode length; default the spec's ``episode_limit``.
            Episodes longer than T are cut there (``complete`` False).

    The batch arrays are allocated once; ``run`` returns a copy unless ``copy=False``
    (then the next ``run`` overwrites it).
    """

    def __init__(self, venv: VecEnv, max_steps: int | None = None):
        if venv.autoreset is not AutoresetMode.ONE_EPISODE:
            raise ValueError(
                f"EpisodeRunner needs a VecEnv with autoreset='one_episode', got autoreset="
                f"'{venv.autoreset.value}'; make it with mv.make(..., autoreset='one_episode')"
            )
        spec = venv.spec
        T = spec.episode_limit if max_steps is None else max_steps
        if T is None:
            raise ValueError(
                f"the env declares no episode_limit; pass max_steps, the padded episode length "
                f"(agents: {', '.join(spec.agents)})"
            )
        if int(T) < 1:
            raise ValueError(f"max_steps must be >= 1, got {T}")
        self.venv, self.spec, self.max_steps = venv, spec, int(T)
        E, A = venv.num_envs, spec.n_agents
        T = self.max_steps
        action = spec.action
        if isinstance(action, TreeAction):
            raise TypeError(f"EpisodeRunner keeps actions in one array; the action space {spec.single_agent_action_space} "
                            "is a Dict/Tuple tree; step the VecEnv directly")
        if spec.obs_is_tree:
            raise TypeError(
                f"EpisodeRunner keeps observations in one array per field; the observation space "
                f"{spec.single_agent_observation_space} is a tree: flatten it (gymnasium.wrappers.FlattenObservation)"
            )
        mask_shape = action.mask_shape
        avail = None if mask_shape is None else np.zeros((E, T + 1, A, *mask_shape), bool)
        self.batch = EpisodeBatch(
            obs=np.zeros((E, T + 1, A, *spec.obs_shape), spec.obs_dtype),
            state=np.zeros((E, T + 1, *spec.state_shape), spec.state_dtype) if spec.has_state else None,
            avail_actions=avail,
            agent_mask=np.zeros((E, T + 1, A), bool),
            actions=np.zeros((E, T, A, *spec.action_shape), spec.action.dtype),
            reward=np.zeros((E, T, A), spec.reward_dtype),
            terminated=np.zeros((E, T, A), bool),
            truncated=np.zeros((E, T, A), bool),
            filled=np.zeros((E, T), bool),
            lengths=np.zeros(E, np.int64),
            returns=np.zeros(E, np.float64),
            complete=np.zeros(E, bool),
        )
        self._random: RandomPolicy | None = None

    def _write_obs(self, t: int, r: StepResult) -> None:
        b = self.batch
        b.obs[:, t] = r.obs
        if b.state is not None:
            b.state[:, t] = r.state
        b.agent_mask[:, t] = r.agent_mask
        if b.avail_actions is not None:
            b.avail_actions[:, t] = r.avail_actions

    def run(self, policy: Policy | None = None, seed: int | None = None, copy: bool = True) -> EpisodeBatch:
        """Reset every env, play one episode each, return the padded batch.

        Args:
            policy: ``policy(result, t) -> actions`` of shape (E, A, ...); default uniform
                random over the available actions. Actions of finished envs are ignored.
            seed: passed to ``venv.reset`` (env i gets ``seed + i``); None continues
                each env's random stream (the first reset uses the VecEnv's env_seed).
        """
        if policy is None:
            if self._random is None:
                self._random = RandomPolicy(self.spec, self.venv.num_envs, seed=0)
            random = self._random
            policy = lambda result, t: random(result)  # noqa: E731
        b, T = self.batch, self.max_steps
        for f in fields(b):
            value = getattr(b, f.name)
            if value is not None:
                value.fill(0)
        r = self.venv.reset(seed=seed)
        self._write_obs(0, r)
        running = np.ones(self.venv.num_envs, bool)  # envs whose episode has not ended yet
        for t in range(T):
            b.actions[:, t] = policy(r, t)
            r = self.venv.step(b.actions[:, t])
            b.filled[:, t] = running
            b.reward[:, t] = r.reward
            b.terminated[:, t] = r.terminated
            b.truncated[:, t] = r.truncated
            self._write_obs(t + 1, r)
            b.lengths += running
            b.complete |= r.done & running
            np.logical_and(running, ~r.done, out=running)
            if not running.any():
                break
        # PyMARL padding: zero everything after each episode's end. Finished envs
        # repeated their last observation, and the policy still chose actions for them.
        for e, length in enumerate(b.lengths.tolist()):
            for arr in (b.actions, b.reward, b.terminated, b.truncated):
                arr[e, length:] = 0
            for obs_arr in (b.obs, b.state, b.agent_mask, b.avail_actions):
                if obs_arr is not None:
                    obs_arr[e, length + 1:] = 0
        b.returns[:] = (b.reward.sum(axis=1, dtype=np.float64)).mean(axis=-1)
        return b.copy() if copy else b

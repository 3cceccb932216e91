"""Rows of a marl_vec batch as RLlib's per-env multi-agent dicts, and back.

RLlib's ``MultiAgentEnvRunner`` reads, for each env of its vector env, five dicts
keyed by agent id (observations, rewards, terminateds, truncateds, infos) and
sends one dict of actions per env. [`Translator`][marl_vec.compat.rllib.translate.Translator]
turns rows of a ``StepResult`` into those dicts and action dicts into the
``(n, A, ...)`` action rows marl_vec takes. It keeps what a row alone does not
say: who was alive before the step, the turn-based reward not yet handed out, and
which envs finished and so reset at their next step. Rows are addressed by env
id, so the same translator serves whole-batch steps and the async pool's subsets.

The conventions are those of RLlib's own PettingZoo wrappers:

- Simultaneous moves (``ParallelPettingZooEnv``): the observation dict holds the
  agents alive before the step (each with its last observation, also at the step
  it dies) and those alive after it (a respawned agent); rewards and flags are
  those of the agents that acted. A dead agent is absent from every dict after it
  died.
- Turn-based games (``PettingZooEnv``): only the agent to move is in the
  observation dict, with the reward it got since its last turn; when the game
  ends every agent of the game is in it, with its final observation, reward and
  flags.
- ``"__all__"`` in terminateds/truncateds: True when the env's episode ended;
  terminated when every reported agent terminated, else truncated.
- The step after an episode ended is the next episode's reset (marl_vec's
  ``next_step`` autoreset): its observation dict and infos, a zero reward and False
  flags for every possible agent and ``"__all__": False``, as ``SyncVectorMultiAgentEnv``
  gives them (RLlib's runner reads only the observations and infos of that step).

Examples:
    >>> import numpy as np
    >>> from marl_vec.core.spec import DiscreteAction, EnvSpec
    >>> spec = EnvSpec(agents=("a", "b"), obs_shape=(1,), obs_dtype=np.dtype(np.float32),
    ...                state_shape=(2,), state_dtype=np.dtype(np.float32), action=DiscreteAction(3))
    >>> t = Translator(spec, num_envs=1)
    >>> t.write_actions([{"a": 2, "b": 1}], [0]).tolist()
    [[2, 1]]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from marl_vec.core import spaces
from marl_vec.core.spec import EnvSpec
from marl_vec.vec.results import StepResult

ALL = "__all__"


class Translator:
    """StepResult rows <-> RLlib's per-env dicts for one batch of ``num_envs`` envs.

    Args:
        spec: the batch's spec.
        num_envs: the batch's size (rows are addressed by env id).
        action_mask: observations as RLlib's action-masking modules read them,
            ``{"action_mask": float32 (n_actions,), "observations": obs}`` (discrete actions only).
        global_state: put the env's global state (``StepResult.state``) in each
            reported agent's infos under ``"state"``, for centralised critics.
        obs_dtype: cast (Box) observations to this dtype, e.g. ``"float32"`` for RLlib's
            default encoders, which do not take integer boards (None: the env's own).
        agent_ids: the env's own agent ids, in ``spec.agents``' order (``spec.agents`` holds
            their ``str``; RLlib's ``MultiAgentCartPole`` has agents ``0, 1``); the dicts are
            keyed by them. None: ``spec.agents``.
    """

    def __init__(self, spec: EnvSpec, num_envs: int, action_mask: bool = False, global_state: bool = False,
                 obs_dtype: Any = None, agent_ids: Sequence[Any] | None = None):
        if action_mask and not spec.discrete:
            raise ValueError(f"action_mask=True needs Discrete actions; this env's actions are "
                             f"{spec.single_agent_action_space}")
        if global_state and not spec.has_state:
            raise ValueError("global_state=True needs a batch that keeps the state (state='auto', 'env' or "
                             "'concat'), not state='none'")
        if obs_dtype is not None and spec.obs_is_tree:
            raise ValueError(f"obs_dtype applies to array observations only, not {spec.single_agent_observation_space}")
        self.obs_dtype = None if obs_dtype is None else np.dtype(obs_dtype)
        self.spec = spec
        if agent_ids is not None and [str(a) for a in agent_ids] != list(spec.agents):
            raise ValueError(f"agent_ids {list(agent_ids)} are not the env's agents {list(spec.agents)}")
        self.agents: list[Any] = list(spec.agents if agent_ids is None else agent_ids)
        self.turn_based = bool(spec.turn_based)
        self.action_mask = action_mask
        self.global_state = global_state
        self._index = {agent: a for a, agent in enumerate(self.agents)}
        self._tree = spec.obs_is_tree
        E, A = num_envs, len(self.agents)
        self._alive = np.zeros((E, A), dtype=bool)  # agent_mask of each env's last result: who acts next
        self._owed = np.zeros((E, A), dtype=np.float64)  # turn-based: reward since the agent's last turn
        self._finished = np.zeros(E, dtype=bool)  # the env's last result ended its episode
        self._acting = np.zeros((E, A), dtype=bool)  # turn-based: who moves next
        action = spec.action
        self._action_shape = tuple(spec.action_shape)
        self._action_dtype = np.dtype(np.int64) if spec.discrete else np.dtype(action.dtype)
        # What an agent that does not act gets: marl_vec ignores it (dead, not to move, resetting).
        self._idle = getattr(action, "start", 0) if spec.discrete else 0

    # -- results -> dicts ----------------------------------------------------------------

    def reset_rows(self, r: StepResult, env_ids: Sequence[int]) -> tuple[list[dict], list[dict]]:
        """The observation and info dicts of freshly reset rows ``r`` (row k is env ``env_ids[k]``)."""
        obs_out, info_out = [], []
        for k, i in enumerate(env_ids):
            present = r.acting[k] if self.turn_based else r.agent_mask[k]
            obs_out.append(self._obs(r, k, present))
            info_out.append(self._infos(r, k, present))
            self._alive[i] = r.agent_mask[k]
            if self.turn_based:
                self._acting[i] = r.acting[k]
            self._owed[i] = 0.0
            self._finished[i] = False
        return obs_out, info_out

    def step_rows(self, r: StepResult, env_ids: Sequence[int]) -> tuple[list[dict], ...]:
        """The five dicts of each stepped row of ``r`` (row k is env ``env_ids[k]``)."""
        obs_out: list[dict] = []
        rew_out: list[dict] = []
        term_out: list[dict] = []
        trunc_out: list[dict] = []
        info_out: list[dict] = []
        for k, i in enumerate(env_ids):
            if self._finished[i]:
                # next_step autoreset: this row is the next episode's reset.
                (obs,), (infos,) = self.reset_rows(_row(r, k), [i])
                obs_out.append(obs)
                info_out.append(infos)
                rew_out.append(dict.fromkeys(self.agents, 0.0))
                term_out.append({**dict.fromkeys(self.agents, False), ALL: False})
                trunc_out.append({**dict.fromkeys(self.agents, False), ALL: False})
                continue
            done = bool(r.done[k])
            before = self._alive[i]
            if self.turn_based:
                owed = self._owed[i]
                owed += r.reward[k]
                present = (before | r.agent_mask[k] | r.acting[k]) if done else r.acting[k]
                rewarded = present
                rewards = owed
            else:
                present = before | r.agent_mask[k]
                rewarded = before
                rewards = r.reward[k]
            ids = np.flatnonzero(rewarded)
            agents = self.agents
            reward = {agents[a]: float(rewards[a]) for a in ids}
            terminated = {agents[a]: bool(r.terminated[k, a]) for a in ids}
            truncated = {agents[a]: bool(r.truncated[k, a]) for a in ids}
            if self.turn_based:
                self._owed[i, ids] = 0.0
            every_terminated = done and all(terminated.values())
            terminated[ALL] = every_terminated
            truncated[ALL] = done and not every_terminated
            obs_out.append(self._obs(r, k, present))
            rew_out.append(reward)
            term_out.append(terminated)
            trunc_out.append(truncated)
            info_out.append(self._infos(r, k, present))
            self._alive[i] = r.agent_mask[k]
            if self.turn_based:
                self._acting[i] = r.acting[k]
            self._finished[i] = done
        return obs_out, rew_out, term_out, trunc_out, info_out

    def step_rows_same_step(self, r: StepResult, env_ids: Sequence[int]) -> tuple[list[tuple], list]:
        """Rows of a ``same_step`` batch (the async pool's mode): each row's five dicts of
        the step, built from ``final_*`` where the row's episode ended, and for those
        rows the next episode's ``(obs, infos)`` (None for the others).

        At an episode's end marl_vec keeps no final ``agent_mask``: the agents reported
        are those alive before the step (turn-based: and the agents of ``final_acting``).
        """
        steps, resets = [], []
        for k, i in enumerate(env_ids):
            if r.done[k]:
                five = self.step_rows(_final_row(r, k), [i])
                (obs,), (infos,) = self.reset_rows(_reset_row(r, k), [i])
                resets.append((obs, infos))
            else:
                five = self.step_rows(_row(r, k), [i])
                resets.append(None)
            steps.append(tuple(part[0] for part in five))
        return steps, resets

    def expect_resets(self, env_ids: Sequence[int]) -> None:
        """The next row of each of ``env_ids`` is a reset's (a ``reset()`` whose rows come later)."""
        self._finished[np.asarray(env_ids, dtype=np.int64)] = True

    def _obs(self, r: StepResult, k: int, present: np.ndarray) -> dict[str, Any]:
        out = {}
        for a in np.flatnonzero(present):
            value = spaces.tree_map(lambda x, a=a: x[k, a], r.obs) if self._tree else r.obs[k, a]
            if self.obs_dtype is not None:
                value = value.astype(self.obs_dtype)
            if self.action_mask:
                value = {"action_mask": r.avail_actions[k, a].astype(np.float32), "observations": value}
            out[self.agents[a]] = value
        return out

    def _infos(self, r: StepResult, k: int, present: np.ndarray) -> dict[str, Any]:
        own = r.infos[k].get("agents") or {}
        out = {}
        for a in np.flatnonzero(present):
            agent = self.agents[a]
            info = dict(own.get(agent) or {})
            if self.global_state:
                info["state"] = r.state[k]
            out[agent] = info
        return out

    # -- dicts -> actions ----------------------------------------------------------------

    def write_actions(self, actions: Sequence[dict[str, Any]], env_ids: Sequence[int]) -> np.ndarray:
        """The ``(len(env_ids), A, *action_shape)`` action rows from one action dict per env.

        An agent left out of its env's dict gets a placeholder that marl_vec ignores
        (it is dead, not to move, or its env resets at this step); an agent that must
        act and has no action is an error.
        """
        if len(actions) != len(env_ids):
            raise ValueError(f"expected {len(env_ids)} action dicts (one per env), got {len(actions)}")
        out = np.full((len(env_ids), len(self.agents), *self._action_shape), self._idle, dtype=self._action_dtype)
        for k, (i, given) in enumerate(zip(env_ids, actions)):
            for agent, value in given.items():
                a = self._index.get(agent)
                if a is None:
                    raise ValueError(f"env {i}: action for unknown agent {agent!r}; agents are {self.agents}")
                out[k, a] = value
            if not self._finished[i]:
                must = self._must_act(i)
                missing = [self.agents[a] for a in np.flatnonzero(must) if self.agents[a] not in given]
                if missing:
                    raise ValueError(f"env {i}: no action for agents {missing}, which are to act at this step")
        return out

    def _must_act(self, i: int) -> np.ndarray:
        return self._acting[i] if self.turn_based else self._alive[i]


def _slicer(k: int) -> Any:
    """A function taking rows ``k:k+1`` of an array, a Dict/Tuple tree of arrays, or None."""
    def take(x: Any) -> Any:
        if x is None:
            return None
        if isinstance(x, (dict, tuple)):
            return spaces.tree_map(lambda leaf: leaf[k:k + 1], x)
        return x[k:k + 1]
    return take


def _row(r: StepResult, k: int) -> StepResult:
    """Row ``k`` of ``r`` as a one-row StepResult (the fields the translator reads)."""
    take = _slicer(k)
    obs = take(r.obs)
    return StepResult(obs=obs, state=take(r.state), avail_actions=take(r.avail_actions),
                      agent_mask=take(r.agent_mask), reward=take(r.reward), terminated=take(r.terminated),
                      truncated=take(r.truncated), done=take(r.done), infos=[r.infos[k]],
                      acting=take(r.acting))


def _final_row(r: StepResult, k: int) -> StepResult:
    """The step that ended row ``k``'s episode, from ``final_*`` (``same_step`` mode)."""
    take = _slicer(k)
    obs = take(r.final_obs)
    infos = {key: value for key, value in r.infos[k].items() if key != "reset_info"}
    return StepResult(obs=obs, state=take(r.final_state), avail_actions=take(r.final_avail_actions),
                      agent_mask=np.zeros_like(r.agent_mask[k:k + 1]), reward=take(r.reward),
                      terminated=take(r.terminated), truncated=take(r.truncated), done=take(r.done), infos=[infos],
                      acting=take(r.final_acting))


def _reset_row(r: StepResult, k: int) -> StepResult:
    """Row ``k`` as the next episode's reset (``same_step`` mode: its infos are ``reset_info``)."""
    row = _row(r, k)
    row.infos = [r.infos[k].get("reset_info") or {}]
    return row

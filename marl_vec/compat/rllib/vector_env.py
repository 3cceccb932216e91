"""MarlVecMultiAgentEnv: a marl_vec VecEnv as RLlib's ``VectorMultiAgentEnv``.

RLlib's ``MultiAgentEnvRunner`` steps a ``VectorMultiAgentEnv``: ``reset(seed=)``
gives one observation dict and one info dict per env, ``step(actions)`` takes one
action dict per env and gives five lists of per-env dicts; an env whose episode
ended is reset at its next step (``next_step`` autoreset, as
``SyncVectorMultiAgentEnv`` does it). This face does that over any marl_vec batch
(DummyVecEnv, SubprocVecEnv, RayVecEnv) built with ``autoreset="next_step"``: the
batch steps all envs at once, and
[`Translator`][marl_vec.compat.rllib.translate.Translator] writes the dicts.

The runner also reads ``envs[i].unwrapped`` of a vector env for each env's agents
and spaces: ``envs`` holds one [`Seat`][marl_vec.compat.rllib.vector_env.Seat] per env,
a ``MultiAgentEnv`` that describes env i and refuses to step on its own.

Spaces are RLlib's dicts: ``single_observation_spaces`` / ``single_action_spaces``
map each agent id (the env's own) to one agent's space (marl_vec's padded space, the
same for every agent), and ``single_observation_space`` / ``single_action_space``
are the ``gymnasium.spaces.Dict`` of them.

Examples:
    >>> from functools import partial
    >>> import marl_vec as mv
    >>> from mpe2 import simple_spread_v3
    >>> venv = mv.DummyVecEnv([partial(simple_spread_v3.parallel_env, max_cycles=5)] * 2, autoreset="next_step")
    >>> env = MarlVecMultiAgentEnv(venv)
    >>> obs, infos = env.reset(seed=0)
    >>> len(obs), sorted(obs[0]), obs[0]["agent_0"].shape
    (2, ['agent_0', 'agent_1', 'agent_2'], (18,))
    >>> env.close()
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym

from marl_vec.compat.rllib.translate import Translator
from marl_vec.core.spec import ContinuousAction
from marl_vec.core.episode import AutoresetMode
from marl_vec.vec.base import VecEnv

try:
    from ray.rllib.env.multi_agent_env import MultiAgentEnv
    from ray.rllib.env.vector.vector_multi_agent_env import VectorMultiAgentEnv
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError("marl_vec.compat.rllib needs RLlib: pip install 'marl_vec[rllib]'") from error


def native_agent_ids(venv: VecEnv) -> list[Any]:
    """The env's own agent ids in ``spec.agents``' order (which holds their ``str``): the native
    env's ``possible_agents`` where it has them (RLlib and PettingZoo envs), else ``spec.agents``."""
    names = list(venv.spec.agents)
    try:
        native = list(venv.get_attr("possible_agents", indices=[0])[0] or ())
    except AttributeError:  # a gymnasium env or a marl_vec adapter: its ids are spec.agents
        return names
    by_name = {str(agent): agent for agent in native}
    if len(by_name) != len(native) or sorted(by_name) != sorted(names):
        return names  # the adapter renamed the agents: the spec's names are the only ids it knows
    return [by_name[name] for name in names]


def agent_spaces(translator: Translator) -> tuple[dict[str, gym.Space], dict[str, gym.Space]]:
    """Each agent's observation and action space, as RLlib sees them."""
    spec = translator.spec
    obs_space = spec.single_agent_observation_space
    if translator.obs_dtype is not None:
        dtype = translator.obs_dtype
        obs_space = gym.spaces.Box(obs_space.low.astype(dtype), obs_space.high.astype(dtype), obs_space.shape, dtype)
    if translator.action_mask:
        mask = gym.spaces.Box(0.0, 1.0, shape=(spec.n_actions,), dtype="float32")
        obs_space = gym.spaces.Dict({"action_mask": mask, "observations": obs_space})
    if isinstance(spec.action, ContinuousAction):  # each agent's own bounds: agents' Boxes may differ
        index = {agent: a for a, agent in enumerate(translator.agents)}
        action_spaces = {agent: spec.action.agent_space(index[agent], spec.n_agents) for agent in translator.agents}
    else:
        action_spaces = dict.fromkeys(translator.agents, spec.single_agent_action_space)
    return {agent: obs_space for agent in translator.agents}, action_spaces


class Seat(MultiAgentEnv):
    """Env ``index`` of a batch, as RLlib's runner reads it: agents and spaces.

    It is stepped only through the batch (its vector env's ``step``).
    """

    def __init__(self, index: int, agents: list[Any], observation_spaces: dict[str, gym.Space],
                 action_spaces: dict[str, gym.Space]):
        super().__init__()
        self.index = index
        self.possible_agents = list(agents)
        self.agents = list(agents)
        self.observation_spaces = observation_spaces
        self.action_spaces = action_spaces
        self.observation_space = gym.spaces.Dict(observation_spaces)
        self.action_space = gym.spaces.Dict(action_spaces)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> Any:
        raise RuntimeError(f"env {self.index} of a marl_vec batch is reset through its vector env "
                           "(MarlVecMultiAgentEnv.reset), not on its own")

    def step(self, action_dict: dict) -> Any:
        raise RuntimeError(f"env {self.index} of a marl_vec batch is stepped through its vector env "
                           "(MarlVecMultiAgentEnv.step), not on its own")


class MarlVecMultiAgentEnv(VectorMultiAgentEnv):
    """A marl_vec batch (``autoreset="next_step"``) as RLlib's ``VectorMultiAgentEnv``.

    A ``same_step`` batch is taken too, for
    [`MarlVecAsyncEnvRunner`][marl_vec.compat.rllib.async_runner.MarlVecAsyncEnvRunner], which samples it
    through its pool (``pooled``); ``reset``/``step`` then refuse.

    Args:
        venv: the batch; the face owns it and closes it.
        action_mask: observations ``{"action_mask", "observations"}`` for RLlib's
            action-masking modules (discrete actions).
        global_state: the env's global state in each reported agent's infos under
            ``"state"`` (for centralised critics).
        obs_dtype: cast observations to this dtype (e.g. ``"float32"``; None: the env's own).
    """

    def __init__(self, venv: VecEnv, action_mask: bool = False, global_state: bool = False,
                 obs_dtype: Any = None):
        super().__init__()
        # Until it is built, it has nothing to close: RLlib's ``__del__`` closes an env
        # that is not ``closed``, and a refused batch stays the caller's.
        self.closed = True
        self.pooled = venv.autoreset is AutoresetMode.SAME_STEP and hasattr(venv, "recv")
        if venv.autoreset is not AutoresetMode.NEXT_STEP and not self.pooled:
            raise ValueError(f"RLlib's runners reset a finished env at its next step: build the batch with "
                             f"autoreset='next_step', not {venv.autoreset.value!r} (or 'same_step' for "
                             f"MarlVecAsyncEnvRunner, which samples through the async pool)")
        self.venv = venv
        self.num_envs = venv.num_envs
        self.translator = Translator(venv.spec, venv.num_envs, action_mask=action_mask, global_state=global_state,
                                     obs_dtype=obs_dtype, agent_ids=native_agent_ids(venv))
        obs_spaces, action_spaces = agent_spaces(self.translator)
        self.single_observation_spaces = obs_spaces
        self.single_action_spaces = action_spaces
        self.single_observation_space = gym.spaces.Dict(obs_spaces)
        self.single_action_space = gym.spaces.Dict(action_spaces)
        self.envs = [Seat(i, self.translator.agents, obs_spaces, action_spaces) for i in range(venv.num_envs)]
        self.metadata = {"autoreset_mode": "next_step"}
        self._all = list(range(venv.num_envs))
        self.closed = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[list, list]:
        """Reset every env; env i gets ``seed + i`` (as ``SyncVectorMultiAgentEnv``)."""
        self._check_not_pooled("reset")
        if options:
            raise ValueError(f"reset options {sorted(options)} are not supported (marl_vec's reset passes none)")
        if seed is not None and not isinstance(seed, int):
            raise ValueError(f"seed must be an int (env i gets seed + i) or None, got {seed!r}")
        super().reset(seed=seed)
        r = self.venv.reset(seed=seed)
        return self.translator.reset_rows(r, self._all)

    def step(self, actions: Sequence[dict[str, Any]]) -> tuple[list, list, list, list, list]:
        """One step of every env: ``actions[i]`` maps env i's acting agents to their actions."""
        self._check_not_pooled("step")
        r = self.venv.step(self.translator.write_actions(actions, self._all))
        return self.translator.step_rows(r, self._all)

    def _check_not_pooled(self, call: str) -> None:
        if self.pooled:
            raise RuntimeError(f"{call}(): this same_step batch is sampled through its async pool "
                               "(MarlVecAsyncEnvRunner), not by whole-batch steps")

    def render(self) -> tuple[Any, ...]:
        return tuple(self.venv.render())

    def close_extras(self, **kwargs: Any) -> None:
        self.venv.close()

    def __repr__(self) -> str:
        return f"MarlVecMultiAgentEnv({self.venv!r})"

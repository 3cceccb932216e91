"""Parallel envs born as AEC envs, stepped through the AEC env below PettingZoo's wrappers.

Most PettingZoo parallel envs outside magent2 (every mpe2 env, sisl's, butterfly's)
are an AEC env behind ``aec_to_parallel_wrapper``. Its ``step`` plays one cycle of
turns, and on the way:

- every read of ``agents``, ``rewards``, ``agent_selection``... goes through each
  wrapper's ``__getattr__`` (on mpe2 about a fifth of a step);
- every move goes through ``OrderEnforcingWrapper`` (a reset check) and, for
  Discrete actions, ``AssertOutOfBoundsWrapper`` (``space.contains`` per agent);
- ``last()`` computes the observation of the agent about to move and throws it away.

`AECParallelAdapter` makes the wrapper's calls to the AEC env in its order,
with the same arguments, but reads the env's state from the raw env (see
`state_holder`), moves below those two check
wrappers (the Discrete bounds are checked here, once per step, before any agent
moves) and skips the discarded observation where the env's ``observe`` is known
to change nothing (mpe2's). Other wrappers (``ClipOutOfBoundsWrapper``, a user's)
stay in the way of moves. Resets go through the parallel env as they are.

Results are bit for bit the generic adapter's (tests/families/test_fast_paths.py) and a
plain loop's (tests/families/test_breadth_pettingzoo.py). On mpe2 simple_spread a step
costs about two thirds of the plain parallel loop's.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from marl_vec.envs.pettingzoo.parallel import PettingZooAdapter
from marl_vec.envs.pettingzoo.aec import state_holder
from marl_vec.core.spec import DiscreteAction


def aec_parallel_applies(env: Any) -> bool:
    """Whether ``env`` is exactly PettingZoo's ``aec_to_parallel_wrapper`` (a subclass may
    step differently)."""
    try:
        from pettingzoo.utils.conversions import aec_to_parallel_wrapper
    except ImportError:
        return False
    return type(env) is aec_to_parallel_wrapper


def _below(aec: Any, passable: tuple[type, ...]) -> Any:
    """The first env under ``aec`` that is not exactly one of ``passable``."""
    obj = aec
    while type(obj) in passable:
        obj = obj.env
    return obj


def _observe_changes_nothing(raw: Any) -> bool:
    """Whether ``raw.observe`` only reads the env: mpe2's, with a scenario of mpe2's own
    (every mpe2 scenario's ``observation`` reads positions and messages)."""
    try:
        from mpe2._mpe_utils.simple_env import SimpleEnv
    except ImportError:
        return False
    if not isinstance(raw, SimpleEnv) or type(raw).observe is not SimpleEnv.observe:
        return False
    observation = getattr(type(getattr(raw, "scenario", None)), "observation", None)
    return str(getattr(observation, "__module__", "")).startswith("mpe2.")


class AECParallelAdapter(PettingZooAdapter):
    """An ``aec_to_parallel_wrapper`` env (see `aec_parallel_applies`); same results as
    `PettingZooAdapter`.

    Examples:
        >>> from mpe2 import simple_spread_v3
        >>> import marl_vec as mv
        >>> with mv.DummyVecEnv([simple_spread_v3.parallel_env]) as venv:
        ...     type(venv.group.adapters[0]).__name__, venv.reset().obs.shape
        ('AECParallelAdapter', (1, 3, 18))
    """

    def __init__(self, env: Any):
        super().__init__(env)
        action = self.spec.action
        # Discrete bounds are checked here (what AssertOutOfBoundsWrapper's contains() checks).
        self._bounds = None
        if isinstance(action, DiscreteAction) and self._nvec is None:
            self._bounds = {agent: (action.start, action.start + n) for agent, n in zip(self.agent_ids, self._n_native)}
        self._find_the_way_in()

    def _find_the_way_in(self) -> None:
        """Where the AEC env's state is read, moves and observations go (again after set_attr)."""
        from pettingzoo.utils.wrappers import AssertOutOfBoundsWrapper, ClipOutOfBoundsWrapper, OrderEnforcingWrapper

        aec = self.env.aec_env
        self._raw = state_holder(aec)  # where agents, rewards, flags and infos are read
        checks: tuple[type, ...] = (OrderEnforcingWrapper,)
        if self._bounds is not None:
            checks += (AssertOutOfBoundsWrapper,)
        self._move = _below(aec, checks).step
        # Observing passes through every wrapper PettingZoo itself applies (none changes it).
        self._observe = _below(aec, (OrderEnforcingWrapper, AssertOutOfBoundsWrapper, ClipOutOfBoundsWrapper)).observe
        # The observation last() computes before each move, which the wrapper discards.
        self._observe_before_move = not _observe_changes_nothing(self.env.unwrapped)

    def set_native_attr(self, name: str, value: Any) -> None:
        super().set_native_attr(name, value)
        self._find_the_way_in()  # the value may be a new AEC env or wrapper under the parallel one

    def _check_bounds(self, native: dict[str, Any]) -> None:
        bounds = self._bounds
        assert bounds is not None
        for agent, action in native.items():
            low, high = bounds[agent]
            if not (isinstance(action, int) and low <= action < high):
                raise ValueError(f"{self.name}: action {action!r} for agent {agent!r} is not in its action space; "
                                 f"allowed: integers {low}..{high - 1}")

    def _step_observations(self, agents: list[str]) -> dict[str, Any] | None:
        """The observations of ``agents`` after the cycle (None: written to the row already)."""
        observe = self._observe
        return {agent: observe(agent) for agent in agents}

    def step(self, actions: Any) -> dict[str, Any]:
        acted, acted_array = self._live, self._live_array
        native = self._native_actions(actions)
        if self._bounds is not None:
            self._check_bounds(native)
        raw, move, observe = self._raw, self._move, self._observe
        observe_first = self._observe_before_move
        # aec_to_parallel_wrapper.step, call for call.
        rewards: defaultdict[str, Any] = defaultdict(int)
        for agent in raw.agents:
            if agent != raw.agent_selection:
                _raise_out_of_cycle(raw, agent)
            if observe_first:
                observe(agent)
            move(native[agent])
            for other in raw.agents:
                rewards[other] += raw.rewards[other]
        terminations = dict(**raw.terminations)
        truncations = dict(**raw.truncations)
        infos = dict(**raw.infos)
        obs = self._step_observations(list(raw.agents))
        while raw.agents and (raw.terminations[raw.agent_selection] or raw.truncations[raw.agent_selection]):
            move(None)
        self.env.agents = raw.agents
        return self._record_step(acted, acted_array, obs, rewards, terminations, truncations, infos)


def _raise_out_of_cycle(raw: Any, agent: str) -> None:
    """aec_to_parallel_wrapper's errors for an env whose agents do not move in one cycle."""
    if raw.terminations[agent] or raw.truncations[agent]:
        raise AssertionError(
            f"expected agent {agent} got termination or truncation agent {raw.agent_selection}. "
            "Parallel environment wrapper expects all agent death (setting an agent's "
            "self.terminations or self.truncations entry to True) to happen only at the end of a cycle."
        )
    raise AssertionError(
        f"expected agent {agent} got agent {raw.agent_selection}, Parallel environment wrapper "
        "expects agents to step in a cycle."
    )

"""What every env slot of one VMAS scenario shares: the spec, the agents' sizes, and VMAS's random state.

One idea: a VMAS scenario (with its options) seen from our contract, and the
private random state each VMAS batch runs on.

- `Model`: built once per process and (id, kwargs) from a VMAS env of one
  env: agents in VMAS's order, each agent's observation size (zero-padded to the
  largest), each agent's action size (continuous: its Box, padded to the largest
  with -inf/+inf bounds; discrete: its number of actions, the extra ones of
  smaller agents unavailable). The state is the agents' observations concatenated
  (``state_is_obs``): VMAS has no global state of its own. ``episode_limit`` is
  ``max_steps``.
- `RandomState` / `own_random_state`: VMAS keeps ONE random state
  (torch's, numpy's and Python's generators) for every ``vmas.Environment`` of a
  process, swapped in around each call. Each batch of ours keeps its own and
  swaps it in around its calls, so that two batches (or our batch and VMAS
  used by hand) in one process do not draw from each other's stream.
  `RandomState.installed` with `raw_calls` swaps it in ONCE around a
  step and all its resets: VMAS's own swap costs ~0.3 ms a call (numpy's
  ``get_state``/``set_state`` are slow), and ``Environment.seed`` another
  0.15 ms (``torch.manual_seed`` also queues CUDA, MPS and XPU seeds).

May import: numpy, torch and vmas (lazily), ``marl_vec.core.spec``, ``marl_vec.envs.vmas.catalog``.

Examples:
    >>> model = model_of("balance", {"continuous_actions": False, "max_steps": 100})
    >>> model.spec.n_agents, model.spec.n_actions, model.spec.episode_limit
    (3, 9, 100)
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from marl_vec.envs.vmas.catalog import import_vmas, make_native, resolve, split_options
from marl_vec.core.spec import ContinuousAction, DiscreteAction, EnvSpec


class RandomState:
    """A private copy of VMAS's process-wide random state (see the module doc)."""

    def __init__(self, device: str = "cpu") -> None:
        self.saved: list[Any] = list(_shared_state())
        # On a CUDA device VMAS draws from that device's generator too: its state, swapped in
        # by `installed` beside the CPU ones (VMAS's own swap keeps none).
        self.cuda = _cuda_index(device)
        self.cuda_saved: Any = None if self.cuda is None else _cuda_state(self.cuda)

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """Run VMAS calls on this state; the process's shared VMAS state is left as it was."""
        shared = _shared_state()
        outside = list(shared)
        shared[:] = self.saved
        try:
            yield
        finally:
            self.saved = list(shared)
            shared[:] = outside

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """This state in the process's global generators, as VMAS's ``local_seed`` puts it around
        each of its calls, for `raw_calls`'s calls; saved back and the outside state restored after
        (also after an error).

        Examples:
            >>> import torch
            >>> state = RandomState()
            >>> with state.installed():
            ...     seed_installed(7)
            >>> torch.equal(state.saved[0], torch.Generator().manual_seed(7).get_state())
            True
        """
        outside = _global_state()
        _set_global_state(self.saved)
        cuda = self.cuda
        if cuda is not None:
            import torch

            outside_cuda = torch.cuda.get_rng_state(cuda)
            torch.cuda.set_rng_state(self.cuda_saved, cuda)
        try:
            yield
        finally:
            self.saved = _global_state()
            _set_global_state(outside)
            if cuda is not None:
                self.cuda_saved = torch.cuda.get_rng_state(cuda)
                torch.cuda.set_rng_state(outside_cuda, cuda)


def seed_installed(word: int, cuda: int | None = None) -> None:
    """What ``vmas.Environment.seed(word)`` does to the generators VMAS draws from on the CPU
    (torch's CPU generator, numpy's and Python's), without ``torch.manual_seed``'s queueing of
    CUDA, MPS and XPU seeds, which VMAS's saved state never holds; ``cuda``: the index of the
    CUDA device VMAS runs on, whose generator is seeded too."""
    import torch

    torch.default_generator.manual_seed(word)
    np.random.seed(word)
    random.seed(word)
    if cuda is not None:
        torch.cuda.default_generators[cuda].manual_seed(word)


def _cuda_index(device: str) -> int | None:
    """The index of a CUDA device name (``"cuda"``: the current one); None off CUDA."""
    import torch

    dev = torch.device(device)
    if dev.type != "cuda":
        return None
    return torch.cuda.current_device() if dev.index is None else dev.index


def _cuda_state(index: int) -> Any:
    import torch

    return torch.cuda.get_rng_state(index)


def _global_state() -> list[Any]:
    import torch

    return [torch.random.get_rng_state(), np.random.get_state(), random.getstate()]


def _set_global_state(state: list[Any]) -> None:
    import torch

    torch.random.set_rng_state(state[0])
    np.random.set_state(state[1])
    random.setstate(state[2])


@dataclasses.dataclass(frozen=True)
class RawCalls:
    """``vmas.Environment``'s methods without their ``local_seed`` decorator (call them inside
    `RandomState.installed`): ``step(env, actions)``, ``reset_at(env, index, ...)``,
    ``get_from_scenario(env, ...)``, ``reset(env, seed=...)`` (VMAS's own undecorated ``_reset_at``,
    ``_get_from_scenario`` and ``_reset``; ``step`` has none, so the decorator's ``__wrapped__``). vmas is pinned
    (1.5.2); tests/families/test_vmas_*.py compare against VMAS's public, decorated calls."""

    step: Callable[..., Any]
    reset: Callable[..., Any]
    reset_at: Callable[..., Any]
    get_from_scenario: Callable[..., Any]


def raw_calls() -> RawCalls:
    import_vmas()
    from vmas.simulator.environment import Environment

    return RawCalls(step=Environment.step.__wrapped__, reset=Environment._reset,  # type: ignore[attr-defined]
                    reset_at=Environment._reset_at, get_from_scenario=Environment._get_from_scenario)


def _shared_state() -> list[Any]:
    """``vmas.Environment.vmas_random_state``: the list that VMAS's ``local_seed`` swaps in and
    out around each call (mutated in place, so replacing its items redirects VMAS)."""
    import_vmas()
    from vmas.simulator.environment import Environment

    return Environment.vmas_random_state


@contextlib.contextmanager
def own_random_state(state: RandomState | None) -> Iterator[None]:
    """``state.active()``, or nothing when ``state`` is None."""
    if state is None:
        yield
    else:
        with state.active():
            yield


@dataclasses.dataclass(frozen=True)
class Model:
    """One scenario with its options, as every slot of a block of it sees it."""

    key: tuple[str, str]  # (our id, repr of its kwargs): equal models make one block
    scenario: str
    options: dict[str, Any]
    scenario_kwargs: dict[str, Any]
    spec: EnvSpec
    obs_sizes: tuple[int, ...]
    action_sizes: tuple[int, ...]  # continuous: each agent's Box size; discrete: its number of actions

    @property
    def continuous(self) -> bool:
        return bool(self.options["continuous_actions"])

    def native(self, num_envs: int, state: RandomState | None = None) -> Any:
        """A ``vmas.Environment`` of ``num_envs`` envs of this scenario (made on ``state``)."""
        with own_random_state(state):
            return make_native(self.scenario, num_envs, self.options, self.scenario_kwargs)


def _action(env: Any, scenario: str, continuous: bool) -> tuple[Any, tuple[int, ...], bool]:
    """(our action spec, each agent's size, padded?) from VMAS's per-agent action spaces."""
    spaces = list(env.action_space.spaces)
    if not continuous:
        sizes = tuple(int(s.n) for s in spaces)
        return DiscreteAction(max(sizes), dtype=np.dtype(np.int64)), sizes, len(set(sizes)) > 1
    sizes = tuple(int(s.shape[0]) for s in spaces)
    width = max(sizes)
    low = np.full((len(spaces), width), -np.inf, dtype=np.float64)
    high = np.full((len(spaces), width), np.inf, dtype=np.float64)
    for a, (space, size) in enumerate(zip(spaces, sizes)):
        low[a, :size], high[a, :size] = space.low, space.high
    padded = len(set(sizes)) > 1
    if not padded and all(np.array_equal(low[0], low[a]) and np.array_equal(high[0], high[a]) for a in range(len(spaces))):
        return ContinuousAction((width,), low[0].astype(np.float32), high[0].astype(np.float32)), sizes, False
    return (ContinuousAction((width,), low, high, np.dtype(np.float32), agent_shapes=tuple((s,) for s in sizes)),
            sizes, padded)


def _model(env_id: str, kwargs: dict[str, Any]) -> Model:
    scenario = resolve(env_id)
    options, scenario_kwargs = split_options(env_id, kwargs)
    with RandomState().active():  # the process's VMAS random state is left untouched
        env = make_native(scenario, 1, options, scenario_kwargs, device="cpu")  # the spec, whatever the device
        obs = env.get_from_scenario(get_observations=True, get_rewards=False, get_infos=False, get_dones=False)[0]
    agents = tuple(str(agent.name) for agent in env.agents)
    for agent, o in zip(agents, obs):
        if not hasattr(o, "shape") or len(o.shape) != 2:
            raise ValueError(f"VMAS scenario {env_id!r}: agent {agent!r} observes {type(o).__name__}"
                             f"{getattr(o, 'shape', '')}; the family serves one flat observation per agent")
    obs_sizes = tuple(int(o.shape[1]) for o in obs)
    action, action_sizes, actions_padded = _action(env, scenario, bool(options["continuous_actions"]))
    width = max(obs_sizes)
    spec = EnvSpec(
        agents=agents,
        obs_shape=(width,),
        obs_dtype=np.dtype(np.float32),
        state_shape=(len(agents) * width,),
        state_dtype=np.dtype(np.float32),
        action=action,
        episode_limit=options["max_steps"],
        obs_padded=len(set(obs_sizes)) > 1,
        actions_padded=actions_padded,
        state_is_obs=True,
        env_name=f"vmas/{scenario}",
        device=None if options["device"] == "cpu" else options["device"],
    )
    return Model(key=(env_id, repr(sorted(kwargs.items()))), scenario=scenario, options=options,
                 scenario_kwargs=scenario_kwargs, spec=spec, obs_sizes=obs_sizes, action_sizes=action_sizes)


_MODELS: dict[tuple[str, str], Model] = {}


def model_of(env_id: str, kwargs: dict[str, Any]) -> Model:
    """The shared `Model` of an id and its kwargs (made once per process, from a VMAS env of
    one env). Kwargs are told apart by their repr (they may be lists)."""
    key = (env_id, repr(sorted(kwargs.items())))
    if key not in _MODELS:
        _MODELS[key] = _model(env_id, dict(kwargs))
    return _MODELS[key]

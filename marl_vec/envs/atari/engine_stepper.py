"""The group stepper of a native Atari engine (`EngineStepper`), and the registry of engine kinds.

An `EngineStepper` owns the engine of its group and steps every env of
the group in one native call; each engine kind subclasses it
(`AleVectorStepper`,
`EnvPoolStepper`) and registers itself in
`ENGINE_KINDS`.

May import: ``marl_vec.core.buffers``, ``marl_vec.core.adapter``, ``marl_vec.envs.atari.engine_config``.

Examples:
    >>> stepper_class(config)
    <class 'marl_vec.envs.atari.ale_vector_engine.AleVectorStepper'>
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from marl_vec.core.buffers import RowViews
from marl_vec.envs.atari.engine_config import SUPPORTED_AUTORESET, EngineConfig
from marl_vec.core.adapter import GroupStepper, MultiAgentEnv

# Engine kind -> (engine class, its group stepper). ale_vector is registered by
# marl_vec.envs.atari.ale_vector_engine, envpool by marl_vec.envs.atari.envpool_engine,
# which the package imports (so this module, their base, never imports them back).
ENGINE_KINDS: dict[str, tuple[Any, Any]] = {}


def make_engine(config: EngineConfig, k: int) -> Any:
    """The engine of a group of ``k`` slots: `AleEngine` or an EnvPool one."""
    return ENGINE_KINDS[config.kind][0](config, k)


def stepper_class(config: EngineConfig) -> type[EngineStepper]:
    """The group stepper of an engine kind."""
    return ENGINE_KINDS[config.kind][1]


class EngineStepper(GroupStepper):
    """Owns the group's engine and steps every env of the group in one native call.

    Runs: the engine steps all its slots at once, so a run that is not the whole
    group (``next_step``/``one_episode`` leave finished envs out) raises; the
    group refuses those modes at construction (``autoreset_error``). Subclasses
    implement `step_group` for their engine.
    """

    def __init__(self, adapters: Sequence[MultiAgentEnv], rows: Sequence[RowViews], block: RowViews,
                 engine: Any = None):
        super().__init__(adapters, rows, block)
        slots: list[Any] = list(adapters)  # AleVectorAtariAdapters (marl_vec.envs.atari.engine)
        k = len(slots)
        self.kind = slots[0].config.kind
        # auto, in a mode the engine cannot serve: the python path, env by env (a rebuilt
        # adapter, restart_on_error, joins its neighbours there).
        self.on_python = any(a.python is not None for a in slots)
        if self.on_python:
            for adapter in slots:
                adapter.use_python()
            self.engine = None
            return
        if engine is None:
            # A rebuilt adapter (restart_on_error) joins the engine its neighbours share.
            shared = {id(a.engine): a.engine for a in slots if a.engine is not None and not a._private}
            engine = next(iter(shared.values())) if len(shared) == 1 else None
            if engine is None or engine.k != k or any(
                a.engine is engine and a.slot != j for j, a in enumerate(slots)
            ):
                configs = {a.config for a in slots}
                if len(configs) != 1:
                    raise ValueError(f"the envs of one {slots[0].config.kind} group must have the same options; "
                                     f"got {len(configs)} kinds")
                engine = make_engine(slots[0].config, k)
            for j, adapter in enumerate(slots):
                adapter._attach(engine, j)
        self.engine = engine
        self._actions = block.actions[:, 0]
        self._obs = block.obs[:, 0]
        self._reward = block.reward[:, 0]
        self._terminated = block.terminated[:, 0]
        self._truncated = block.truncated[:, 0]
        self._clip = engine.config.opts.clip_rewards

    def steps_single_envs(self) -> bool:
        return self.on_python

    def autoreset_error(self, mode: str) -> str | None:
        if mode in SUPPORTED_AUTORESET or self.on_python:
            return None
        if all(a.fallback is not None for a in self.adapters):  # auto: the python path serves it
            self.engine.close()
            for adapter in self.adapters:
                adapter.use_python()  # type: ignore[attr-defined]
            self.on_python = True
            return None
        why = ("it needs per-env snapshots, which the engine does not expose" if mode == "fast"
               else "it leaves finished envs out of a step, and the engine steps every env of its group in one call")
        return (f"autoreset={mode!r} is not supported by the {self.kind} Atari engine: {why}; "
                f"allowed: {', '.join(SUPPORTED_AUTORESET)}, or set engine: python")

    def step(self, first: int, stop: int, infos: list[dict[str, Any]]) -> None:
        if self.on_python:
            GroupStepper.step(self, first, stop, infos)
            return
        if first != 0 or stop != self.engine.k:
            self.failed_at = first
            raise RuntimeError(self.autoreset_error("next_step"))
        self.step_group(infos)

    def step_group(self, infos: list[dict[str, Any]]) -> None:
        """Step every env of the group; writes what the adapters' ``step`` would, ``infos`` included."""
        raise NotImplementedError

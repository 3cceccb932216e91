"""Atari on a C++ engine (ale-py's ``AtariVectorEnv`` or EnvPool): a whole EnvGroup stepped in one native call.

One idea: `AleVectorAtariAdapter` is one env slot of a native vector
engine (C++ threads, preprocessing in C++), and an `EngineStepper` is
the `GroupStepper` that owns that engine for the
group (`AleVectorStepper` here, EnvPool's in ``envpool_engine``): one
native step per group step, then a handful of whole-group numpy writes into the
batch buffers (no per-env Python unless an episode ended). Each group (a
DummyVecEnv, a SubprocVecEnv worker's block, a Ray actor's block) builds its own
engine over its envs, with its own threads, when the group is built; an adapter
reset outside a group gets a private engine of one. Both engines keep the frame
stacks; ale-py pads a reset stack with zeros, which its stepper replaces with
the reset frame (as on the python path) for the first steps of an episode;
EnvPool pads as we do.

How our contract maps onto the engines:

- ``ale_vector`` runs in its ``SameStep`` autoreset mode: an env that ends is
  reset at once, its last stack in ``info["final_obs"]``. The stepper writes that
  last stack into the row (what a step writes) and keeps the reset frame; the
  group's autoreset then calls the adapter's ``reset``, which writes it.
  ``reset`` with a seed, or of an env that did not just end, resets the slot in
  the engine (seed -1 continues the slot's own random stream).
- ``envpool`` autoresets only at the next step: a step where envs ended resets
  them in one partial reset, and the group's autoreset hands each its reset
  stack (see `marl_vec.envs.atari.envpool_engine`, which also covers its
  seeding: the pool fixes each env's seed when it is made).
- Env ``i`` is seeded ``env_seed + i`` by the group, one slot at a time.
- Rewards: the engine returns raw rewards (its clipping is off); the stepper adds
  them to the raw score (``infos[i]["episode"]["score"]``) and writes their sign
  when ``clip_rewards`` is set.
- Truncation at ``max_episode_steps`` (agent steps) is counted here for ale_vector
  and by EnvPool itself; ale_vector's
  ``max_num_frames_per_episode`` truncates by emulator frames (noops included, as
  on the python path); EnvPool counts that limit in agent steps.
  Terminated and truncated come apart from the engine.
- Autoreset modes: ``same_step`` and ``disabled``. ``next_step`` and
  ``one_episode`` leave finished envs out of a step, which a single native call
  over every env cannot do, and ``fast`` needs per-env snapshots the engines do
  not expose: those raise `ValueError` at construction, naming
  ``engine: python``.

This module is the adapter and its factory; the rest, one idea a module:
`engine_config` (which engine runs what, and its
`EngineConfig`), `engine_stepper` (the group
stepper every engine shares, and the registry of engine kinds),
`ale_vector_engine` (ale-py's engine) and
`envpool_engine` (EnvPool's).

May import: numpy, ale-py, envpool and gymnasium (lazily, via ``require``),
``marl_vec.core.buffers``, ``marl_vec.core.spec``, ``marl_vec.core.adapter``,
``marl_vec.envs.registry``, ``marl_vec.envs.atari.chain`` and the engine modules above.

Examples:
    >>> import marl_vec as mv
    >>> fn = lambda: make_ale_vector_atari("ALE/Pong-v5", engine_threads=2)
    >>> venv = mv.DummyVecEnv([fn] * 8)          # one AtariVectorEnv of 8 envs
    >>> venv.reset().obs.shape
    (8, 1, 4, 84, 84)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from marl_vec.core.buffers import RowViews
from marl_vec.envs.atari.ale_vector_engine import AleEngine, AleVectorStepper
from marl_vec.envs.atari.chain import Preprocessing
from marl_vec.envs.atari.engine_config import (ENGINES, SUPPORTED_AUTORESET, EngineConfig, _game_of, _n_actions,
                                               engine_unsupported_reason, envpool_task, fastest_engine)
from marl_vec.envs.atari.engine_stepper import ENGINE_KINDS, EngineStepper, make_engine, stepper_class
from marl_vec.core.adapter import GroupStepper, MultiAgentEnv, one_agent_spec
from marl_vec.envs.extras import require
from marl_vec.core.spec import DiscreteAction

__all__ = ["ENGINES", "ENGINE_KINDS", "SUPPORTED_AUTORESET", "AleEngine", "AleVectorAtariAdapter", "AleVectorStepper",
           "EngineConfig", "EngineStepper", "engine_unsupported_reason", "envpool_task", "fastest_engine",
           "make_ale_vector_atari", "make_engine", "stepper_class"]


class AleVectorAtariAdapter(MultiAgentEnv):
    """One slot of a group's `AtariVectorEnv`; see the module docstring.

    Built cheaply (no emulator) so that a backend may build one to read the spec;
    the engine comes with the group's `EngineStepper`.

    ``fallback`` (``engine: auto``): builds the python path's adapter, which this one
    becomes (delegating every call to it) in a group whose autoreset mode the engine
    cannot serve; the spec then also offers snapshots (``fast``).
    """

    def __init__(self, config: EngineConfig, agent_id: str = "agent_0",
                 fallback: Callable[[], MultiAgentEnv] | None = None):
        self.config = config
        self.fallback = fallback
        self.python: MultiAgentEnv | None = None  # the fallback's adapter, once in use
        self.preprocessing = config.opts
        self._clip = config.opts.clip_rewards
        obs_shape = config.opts.obs_shape()
        limit = config.step_limit()
        self.spec = one_agent_spec(
            agent_id, obs_shape, np.dtype(np.uint8), DiscreteAction(_n_actions(config.game, config.full_action_space)),
            episode_limit=limit,
            stats=("score",),
            snapshots=fallback is not None,  # auto: fast mode runs on the python path
            reward_dtype=np.dtype(np.float64),  # as the python engine's: one spec whichever engine steps
        )
        self.engine: Any = None  # an AleEngine or EnvPoolEngine
        self.slot = 0
        self._private = False
        self._alone: EngineStepper | None = None

    def use_python(self) -> None:
        """Become the python path's adapter (auto, in a mode the engine cannot serve)."""
        assert self.fallback is not None
        if self.python is None:
            self.python = self.fallback()
            self.python.bind(self.row)
        if self._private and self.engine is not None:
            self.engine.close()
        self.engine, self._alone = None, None

    def bind(self, row: RowViews) -> None:
        super().bind(row)
        self._obs = row.obs[0]
        row.agent_mask[:] = True
        assert row.avail_actions is not None  # discrete actions: the buffers have avail_actions
        row.avail_actions[:] = True

    @classmethod
    def group_stepper(
        cls, adapters: Sequence[MultiAgentEnv], rows: Sequence[RowViews], block: RowViews
    ) -> GroupStepper:
        return stepper_class(adapters[0].config)(adapters, rows, block)  # type: ignore[attr-defined]

    def _attach(self, engine: Any, slot: int, private: bool = False) -> None:
        self.engine, self.slot, self._private = engine, slot, private

    def reset(self, seed: int | None = None) -> dict[str, Any]:
        if self.python is not None:
            return self.python.reset(seed)
        if self.engine is None:  # used outside a group: an engine of one
            self._attach(make_engine(self.config, 1), 0, private=True)
        assert self.engine is not None
        self.engine.reset_slot(self.slot, seed, self._obs)
        return {}

    def step(self, actions: np.ndarray) -> dict[str, Any]:
        """Only for an adapter outside a group (its engine of one); a group steps its engine whole."""
        if self.python is not None:
            return self.python.step(actions)
        if not self._private:
            raise RuntimeError(f"an {self.config.kind} Atari env is stepped by its group's stepper, not one at a time")
        if self._alone is None:
            # The row's views with a leading env axis of one: the group's block layout.
            row = self.row
            block = RowViews(**{f.name: None if getattr(row, f.name) is None else getattr(row, f.name)[None]
                                for f in dataclasses.fields(RowViews)})
            assert self.engine is not None
            self._alone = stepper_class(self.config)([self], [row], block, engine=self.engine)
        infos: list[dict[str, Any]] = [{}]
        self._alone.step(0, 1, infos)
        return infos[0]

    def episode_stats(self, info: dict[str, Any]) -> dict[str, float]:
        if self.python is not None:
            return self.python.episode_stats(info)
        assert self.engine is not None
        return {"score": float(self.engine.score[self.slot])}

    def snapshot(self) -> Any:
        if self.python is None:
            raise NotImplementedError(f"the {self.config.kind} Atari engine has no per-env snapshots; use engine: python")
        return self.python.snapshot()

    def restore(self, snapshot: Any) -> dict[str, Any]:
        if self.python is None:
            raise NotImplementedError(f"the {self.config.kind} Atari engine has no per-env snapshots; use engine: python")
        return self.python.restore(snapshot)

    def get_native_attr(self, name: str) -> Any:
        return self.python.get_native_attr(name) if self.python is not None else super().get_native_attr(name)

    def render(self) -> Any:
        return self.python.render() if self.python is not None else super().render()

    def close(self) -> None:
        if self.python is not None:
            self.python.close()
        if self._private and self.engine is not None:
            self.engine.close()
        self.engine, self._alone = None, None


def make_ale_vector_atari(env_id: str, engine_threads: int = 0, engine: str = "ale_vector",
                          fallback: Callable[[], MultiAgentEnv] | None = None, **kwargs: Any) -> AleVectorAtariAdapter:
    """An ``ALE/...`` game on the ale_vector engine, preprocessed (``preprocess=True`` implied).

    Args:
        env_id: a gymnasium ALE id; its registered sticky actions and frame limit are kept
            (``ALE/Pong-v5``: ``repeat_action_probability=0.25``, 108000 frames).
        engine_threads: the engine's threads per group (0: ale-py's choice).
        engine: ``ale_vector`` or ``envpool``.
        fallback: (``engine: auto``) builds the python path's adapter for the autoreset
            modes the engine cannot serve; see `AleVectorAtariAdapter`.
        kwargs: the preprocessing options and ``repeat_action_probability``,
            ``full_action_space``, ``max_num_frames_per_episode``, ``max_episode_steps``.
    """
    kwargs = dict(kwargs)
    kwargs.pop("preprocess", None)
    reason = engine_unsupported_reason(env_id, True, kwargs)
    if reason is not None:
        raise ValueError(f"engine {engine!r} cannot run {env_id!r}: {reason}; use engine: python")
    game_and_kwargs = _game_of(env_id)
    assert game_and_kwargs is not None  # checked by engine_unsupported_reason
    game, registered = game_and_kwargs
    opts = Preprocessing.from_kwargs(True, kwargs)
    assert opts is not None
    if int(engine_threads) < 0:
        raise ValueError(f"engine_threads must be an integer >= 0 (0: ale-py's choice), got {engine_threads!r}")
    limit = kwargs.get("max_episode_steps")
    config = EngineConfig(
        game=game,
        opts=opts,
        repeat_action_probability=float(kwargs.get("repeat_action_probability",
                                                   registered.get("repeat_action_probability", 0.25))),
        full_action_space=bool(kwargs.get("full_action_space", registered.get("full_action_space", False))),
        max_num_frames_per_episode=int(kwargs.get("max_num_frames_per_episode",
                                                  registered.get("max_num_frames_per_episode") or 0)),
        max_episode_steps=None if limit is None else int(limit),
        threads=int(engine_threads),
        kind=engine,
    )
    if engine == "envpool":
        envpool = require("envpool", "envpool", "the envpool Atari engine")
        if opts.noop_max < 1:
            raise ValueError("engine 'envpool' needs noop_max >= 1 (EnvPool 1.2 crashes without noop starts); "
                             "use engine: ale_vector or python for noop_max 0")
        if config.kind == "envpool" and envpool_task(game) not in envpool.list_all_envs():
            raise ValueError(f"EnvPool has no Atari game {envpool_task(game)!r} for {env_id!r}; use engine: ale_vector or python")
    return AleVectorAtariAdapter(config, fallback=fallback)

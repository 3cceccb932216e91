"""Atari on a C++ engine (ale-py's ``AtariVectorEnv`` or EnvPool): a whole EnvGroup stepped in one native call.

One idea: :class:`AleVectorAtariAdapter` is one env slot of a native vector
engine (C++ threads, preprocessing in C++), and an :class:`EngineStepper` is
the :class:`~marl_vec.envs.base.GroupStepper` that owns that engine for the
group (:class:`AleVectorStepper` here, EnvPool's in ``envpool_engine``): one
native step per group step, then a handful of whole-group numpy writes into the
batch buffers (no per-env Python unless an episode ended). Each group (a
DummyVecEnv, a SubprocVecEnv worker's block, a Ray actor's block) builds its own
engine over its envs, with its own threads, when the group is built; an adapter
reset outside a group gets a private engine of one. ale-py pads a reset stack
with zeros, so it is asked for single frames and the stacks are kept here,
padded with the reset frame as on the python path; EnvPool pads as we do and
keeps the stacks itself.

How our contract maps onto the engines:

- ``ale_vector`` runs in its ``SameStep`` autoreset mode: an env that ends is
  reset at once, its last frame in ``info["final_obs"]``. The stepper writes that
  last frame into the row (what a step writes) and keeps the reset one; the
  group's autoreset then calls the adapter's ``reset``, which writes it.
  ``reset`` with a seed, or of an env that did not just end, resets the slot in
  the engine (seed -1 continues the slot's own random stream).
- ``envpool`` autoresets only at the next step: a step where envs ended resets
  them in one partial reset, and the group's autoreset hands each its reset
  stack (see :mod:`marl_vec.envs.atari.envpool_engine`, which also covers its
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
  not expose: those raise :class:`ValueError` at construction, naming
  ``engine: python``.

May import: numpy, ale-py, envpool and gymnasium (lazily, via ``require``),
``marl_vec.buffers``, ``marl_vec.spec``, ``marl_vec.envs.base``,
``marl_vec.envs.registry``, ``marl_vec.envs.atari.chain``.

Example:
    >>> import marl_vec as mv
    >>> fn = lambda: make_ale_vector_atari("ALE/Pong-v5", engine_threads=2)
    >>> venv = mv.DummyVecEnv([fn] * 8)          # one AtariVectorEnv of 8 envs
    >>> venv.reset().obs.shape
    (8, 1, 4, 84, 84)
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from marl_vec.buffers import RowViews
from marl_vec.envs.atari.chain import Preprocessing, gymnasium_with_ale, steps_within
from marl_vec.envs.base import GroupStepper, MultiAgentEnv
from marl_vec.envs.extras import require
from marl_vec.spec import DiscreteAction, EnvSpec

ENGINES = ("python", "ale_vector", "envpool", "auto")

# gymnasium.make options the engine takes (besides the preprocessing options).
_ENGINE_KWARGS = ("repeat_action_probability", "full_action_space", "max_num_frames_per_episode", "max_episode_steps")

SUPPORTED_AUTORESET = ("same_step", "disabled")


def engine_unsupported_reason(env_id: str, preprocess: bool, kwargs: dict[str, Any]) -> str | None:
    """Why the ``ale_vector`` engine cannot run these options (None: it can)."""
    if env_id.startswith("pettingzoo."):
        return "multi-player Atari runs on the PettingZoo path only"
    if not preprocess:
        return "it always preprocesses; raw frames need preprocess=True off the engine"
    if kwargs.get("terminal_on_life_loss"):
        return "terminal_on_life_loss resets the game at a life loss on the python path; the engine's episodic life does not"
    others = sorted(set(kwargs) - set(_ENGINE_KWARGS) - set(Preprocessing.__dataclass_fields__) - {"engine_threads"})
    if others:
        return f"it does not take the options {others}; it takes {sorted(_ENGINE_KWARGS)} and the preprocessing options"
    import importlib.util

    if importlib.util.find_spec("ale_py") is None or importlib.util.find_spec("ale_py.vector_env") is None:
        return "it needs ale-py >= 0.12 (ale_py.vector_env): pip install -U 'ale-py>=0.12'"
    if _game_of(env_id) is None:
        return f"{env_id!r} is not an ALE game id of gymnasium's registry"
    return None


def fastest_engine(env_id: str, preprocess: bool, kwargs: dict[str, Any]) -> str:
    """``engine: auto``'s choice (the default): ``ale_vector`` where it takes the options, else ``python``.

    ``envpool`` is never chosen: through a VecEnv, ale-py's engine steps faster
    (it autoresets within its threaded step, where EnvPool needs a partial reset
    after it; see README "Engines"), it ships with ale-py, our Atari dependency, so
    the choice does not depend on what else is installed, and it reseeds single envs.

    The autoreset mode is the group's, unknown here: an engine adapter made by ``auto``
    falls back to the python path in a group whose mode the engine cannot serve."""
    if engine_unsupported_reason(env_id, preprocess, kwargs) is not None:
        return "python"
    return "ale_vector"


@functools.lru_cache(maxsize=None)
def _game_of(env_id: str) -> tuple[str, dict[str, Any]] | None:
    """ALE's ROM name of a gymnasium ALE id, and the id's registered kwargs (sticky actions, frame limit)."""
    gymnasium = gymnasium_with_ale()
    try:
        spec = gymnasium.spec(env_id)
    except gymnasium.error.Error:
        return None
    game = spec.kwargs.get("game")
    if not game or spec.kwargs.get("obs_type", "rgb") == "ram":
        return None
    return str(game), dict(spec.kwargs)


@functools.lru_cache(maxsize=None)
def _n_actions(game: str, full_action_space: bool) -> int:
    """The game's action count, from a throwaway ALE (the engine itself is built per group)."""
    ale_py = require("ale_py", "atari", "Atari games")
    ale = ale_py.ALEInterface()
    ale.setLoggerMode(ale_py.LoggerMode.Error)
    ale.loadROM(ale_py.roms.get_rom_path(game))
    return len(ale.getLegalActionSet() if full_action_space else ale.getMinimalActionSet())


@dataclass(frozen=True)
class EngineConfig:
    """What an :class:`AtariVectorEnv` is built from; equal configs can share one engine."""

    game: str
    opts: Preprocessing
    repeat_action_probability: float
    full_action_space: bool
    max_num_frames_per_episode: int
    max_episode_steps: int | None
    threads: int
    kind: str = "ale_vector"  # or "envpool"

    def build(self, num_envs: int, seeds: list[int] | None = None) -> Any:
        if self.kind == "envpool":
            return self._build_envpool(num_envs, seeds or list(range(num_envs)))
        ale_py = require("ale_py", "atari", "Atari games")
        from ale_py.vector_env import AtariVectorEnv

        ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
        opts = self.opts
        return AtariVectorEnv(
            self.game,
            num_envs,
            num_threads=self.threads,
            max_num_frames_per_episode=self.max_num_frames_per_episode,
            repeat_action_probability=self.repeat_action_probability,
            full_action_space=self.full_action_space,
            autoreset_mode="SameStep",
            img_height=opts.screen_size,
            img_width=opts.screen_size,
            grayscale=opts.grayscale,
            stack_num=1,  # stacked here, padded with the reset frame as on the python path
            frameskip=opts.frame_skip,
            maxpool=opts.frame_skip > 1,  # as AtariPreprocessing: no pooling without a skip
            noop_max=opts.noop_max,
            episodic_life=False,
            reward_clipping=False,  # clipped here, so that the raw score is kept
            use_fire_reset=False,  # as AtariPreprocessing
        )

    def step_limit(self) -> int | None:
        """The limit in agent steps (``spec.episode_limit``)."""
        limit = steps_within(self.max_num_frames_per_episode, self.opts.frame_skip) \
            if self.max_num_frames_per_episode > 0 else None
        if self.max_episode_steps is not None:
            limit = self.max_episode_steps if limit is None else min(limit, self.max_episode_steps)
        return limit

    def _build_envpool(self, num_envs: int, seeds: list[int]) -> Any:
        envpool = require("envpool", "envpool", "the envpool Atari engine")
        opts = self.opts
        limit = self.step_limit()
        return envpool.make(
            envpool_task(self.game),
            env_type="gymnasium",
            num_envs=num_envs,
            batch_size=num_envs,
            num_threads=self.threads,
            env_seed=seeds,
            # EnvPool counts agent steps, noops not included: the frame limit becomes a step limit.
            max_episode_steps=limit if limit is not None else 2**31 - 1,
            repeat_action_probability=self.repeat_action_probability,
            full_action_space=self.full_action_space,
            img_height=opts.screen_size,
            img_width=opts.screen_size,
            gray_scale=opts.grayscale,
            stack_num=opts.frame_stack,  # padded with the reset frame, as on the python path
            frame_skip=opts.frame_skip,
            noop_max=opts.noop_max,  # drawn in [1, noop_max] as AtariPreprocessing; 0 is refused (it crashes)
            episodic_life=False,
            reward_clip=False,
            use_fire_reset=False,
            use_inter_area_resize=True,
        )


# Engine kind -> (engine class, its group stepper). ale_vector is registered below;
# envpool by marl_vec.envs.atari.envpool_engine, which the package imports (so this
# module, its base, never imports it back).
ENGINE_KINDS: dict[str, tuple[Any, Any]] = {}


def make_engine(config: EngineConfig, k: int) -> Any:
    """The engine of a group of ``k`` slots: :class:`AleEngine` or an EnvPool one."""
    return ENGINE_KINDS[config.kind][0](config, k)


class AleEngine:
    """One AtariVectorEnv over ``k`` slots, with the per-slot state of our contract."""

    envpool = False

    def __init__(self, config: EngineConfig, k: int):
        self.config = config
        self.env = config.build(k)
        self.ale = self.env.ale
        self.k = k
        self.score = np.zeros(k, dtype=np.float64)
        self.elapsed = np.zeros(k, dtype=np.int64)
        opts = config.opts
        frame = opts.frame_shape()
        # The frame stacks live here, not in the buffer rows: a caller writing into a
        # copy=False result cannot corrupt the next observation. (ale-py pads a reset
        # stack with zeros, the python path with the reset frame: the engine gives single frames.)
        # A ring: each step writes one frame per slot at ``newest`` instead of shifting the
        # whole stack (a shift of overlapping memory costs numpy a temporary copy).
        self.ring = np.zeros((k, opts.frame_stack, *frame), dtype=np.uint8)
        self.newest = opts.frame_stack - 1  # the ring position of every slot's newest frame
        self.reset_frame = np.zeros((k, *frame), dtype=np.uint8)  # an ended slot's reset frame
        self.has_reset_frame = np.zeros(k, dtype=bool)
        self.paddle = np.ones(k, dtype=np.float32)
        self._started = False

    def reset_slot(self, slot: int, seed: int | None, out: np.ndarray) -> None:
        """Write slot's reset observation into ``out``: from the frame the engine's
        autoreset made when the slot just ended and no seed is given, else from a
        native reset. The stack is padded with the reset frame."""
        ring = self.ring[slot]
        if seed is None and self.has_reset_frame[slot]:
            ring[...] = self.reset_frame[slot]
        else:
            ring[...] = self._native_reset(slot, seed)
        out[...] = ring.reshape(out.shape)  # every frame is the reset frame: the ring's order does not matter
        self.has_reset_frame[slot] = False
        self.score[slot] = 0.0
        self.elapsed[slot] = 0

    def _native_reset(self, slot: int, seed: int | None) -> np.ndarray:
        """Reset one slot in the engine; its reset frame."""
        if not self._started:  # the engine's partial resets need one full reset first
            self.ale.reset(np.arange(self.k, dtype=np.int64), np.full(self.k, -1, dtype=np.int64))
            self._started = True
        obs, info = self.ale.reset(np.array([slot], dtype=np.int64),
                                   np.array([-1 if seed is None else int(seed)], dtype=np.int64))
        return obs[int(np.flatnonzero(info["env_id"] == slot)[0]), 0]

    def close(self) -> None:
        self.env.close()


class AleVectorAtariAdapter(MultiAgentEnv):
    """One slot of a group's :class:`AtariVectorEnv`; see the module docstring.

    Built cheaply (no emulator) so that a backend may build one to read the spec;
    the engine comes with the group's :class:`EngineStepper`.

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
        self.spec = EnvSpec(
            agents=(agent_id,),
            obs_shape=obs_shape,
            obs_dtype=np.dtype(np.uint8),
            state_shape=obs_shape,
            state_dtype=np.dtype(np.uint8),
            action=DiscreteAction(_n_actions(config.game, config.full_action_space)),
            episode_limit=limit,
            stats=("score",),
            snapshots=fallback is not None,  # auto: fast mode runs on the python path
            state_is_obs=True,
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


def stepper_class(config: EngineConfig) -> type[EngineStepper]:
    """The group stepper of an engine kind."""
    return ENGINE_KINDS[config.kind][1]


class EngineStepper(GroupStepper):
    """Owns the group's engine and steps every env of the group in one native call.

    Runs: the engine steps all its slots at once, so a run that is not the whole
    group (``next_step``/``one_episode`` leave finished envs out) raises; the
    group refuses those modes at construction (``autoreset_error``). Subclasses
    implement :meth:`step_group` for their engine.
    """

    def __init__(self, adapters: Sequence[MultiAgentEnv], rows: Sequence[RowViews], block: RowViews,
                 engine: Any = None):
        super().__init__(adapters, rows, block)
        slots: list[AleVectorAtariAdapter] = list(adapters)  # type: ignore[arg-type]
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


class AleVectorStepper(EngineStepper):
    """Steps a group's :class:`AleEngine` (ale-py's ``AtariVectorEnv``) whole."""

    def __init__(self, adapters: Sequence[MultiAgentEnv], rows: Sequence[RowViews], block: RowViews,
                 engine: AleEngine | None = None):
        super().__init__(adapters, rows, block, engine)
        if self.on_python:
            return
        engine = self.engine
        self._send, self._recv = engine.ale.send, engine.ale.recv
        self._limit = engine.config.max_episode_steps
        self._action_buffer = np.zeros(engine.k, dtype=np.int32)
        self._done = np.zeros(engine.k, dtype=bool)
        self._at_limit = np.zeros(engine.k, dtype=bool)
        self._stack_size = engine.config.opts.frame_stack
        self._obs_stack = self._obs.reshape(engine.ring.shape)  # the rows with the stack axis
        assert np.shares_memory(self._obs_stack, self._obs), "the rows' stack view must not be a copy"

    def step_group(self, infos: list[dict[str, Any]]) -> None:
        engine = self.engine
        actions = self._action_buffer
        np.copyto(actions, self._actions, casting="unsafe")  # validated by the VecEnv: in range
        self._send(actions, engine.paddle)
        obs, reward, terminated, truncated, info = self._recv()
        frames, ring = obs[:, 0], engine.ring
        newest = engine.newest = (engine.newest + 1) % self._stack_size
        ring[:, newest] = frames
        engine.score += reward
        if self._clip:
            np.sign(reward, out=self._reward, casting="unsafe")
        else:
            self._reward[...] = reward
        self._terminated[...] = terminated
        done = self._done
        if self._limit is not None:
            engine.elapsed += 1
            np.greater_equal(engine.elapsed, self._limit, out=self._at_limit)
            np.logical_or(truncated, self._at_limit, out=self._truncated)
        else:
            self._truncated[...] = truncated
        np.logical_or(terminated, truncated, out=done)  # ale_vector reset these slots itself
        engine.has_reset_frame.fill(False)
        if np.count_nonzero(done):
            ended = np.flatnonzero(done)
            engine.reset_frame[ended] = frames[ended]
            engine.has_reset_frame[ended] = True
            ring[ended, newest] = info["final_obs"][ended, 0]  # the step's frame; the reset one waits for reset()
        # Oldest frame first: the ring after the newest, then the ring up to it.
        older = self._stack_size - 1 - newest
        self._obs_stack[:, :older] = ring[:, newest + 1:]
        self._obs_stack[:, older:] = ring[:, :newest + 1]
        infos[:] = map(dict, itertools.repeat((), engine.k))  # k fresh empty dicts, at C speed


def envpool_task(game: str) -> str:
    """EnvPool's id of an ALE ROM name: ``space_invaders`` -> ``SpaceInvaders-v5``."""
    return "".join(part.capitalize() for part in game.split("_")) + "-v5"


def make_ale_vector_atari(env_id: str, engine_threads: int = 0, engine: str = "ale_vector",
                          fallback: Callable[[], MultiAgentEnv] | None = None, **kwargs: Any) -> AleVectorAtariAdapter:
    """An ``ALE/...`` game on the ale_vector engine, preprocessed (``preprocess=True`` implied).

    Args:
        env_id: a gymnasium ALE id; its registered sticky actions and frame limit are kept
            (``ALE/Pong-v5``: ``repeat_action_probability=0.25``, 108000 frames).
        engine_threads: the engine's threads per group (0: ale-py's choice).
        engine: ``ale_vector`` or ``envpool``.
        fallback: (``engine: auto``) builds the python path's adapter for the autoreset
            modes the engine cannot serve; see :class:`AleVectorAtariAdapter`.
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


ENGINE_KINDS["ale_vector"] = (AleEngine, AleVectorStepper)

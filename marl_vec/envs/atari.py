"""Atari: ALE games as one-agent envs, and PettingZoo's multi-player Atari.

``make_atari("ALE/Pong-v5")`` gives the raw emulator frames ``(210, 160, 3)``
uint8, exactly as ``gymnasium.make`` does. ``preprocess=True`` adds the
standard DQN pipeline, built on gymnasium's ``AtariPreprocessing`` and
``FrameStackObservation``: noop starts, frame skip with max-pooling of the
last two frames, grayscale, resize to 84x84, a stack of 4 frames, optional
loss-of-life terminals and reward clipping (sign). Observations stay uint8
from the emulator to the batch buffer; nothing in the step path converts to float.

``make_atari("pettingzoo.atari.pong_v3")`` gives a multi-player game (package
``multi-agent-ale-py``, whose ROMs come from ale-py) with one agent per player
and the same preprocessing options. Every player sees the same screen, so the
state is that screen once.

Both adapters can snapshot and restore the emulator and the preprocessing
state, for ``autoreset="fast"``: every episode after the first starts from the
exact state of the first reset (no random noops, no reset cost).

Example:
    >>> env = make_atari("ALE/Pong-v5", preprocess=True)
    >>> env.spec.obs_shape, env.spec.obs_dtype, env.spec.n_actions
    ((4, 84, 84), dtype('uint8'), 6)
    >>> make_atari("pettingzoo.atari.pong_v3", preprocess=True).spec.agents
    ('first_0', 'second_0')
"""

from __future__ import annotations

import collections
import os
import pkgutil
import re
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from marl_vec.buffers import RowViews
from marl_vec.envs.base import MultiAgentEnv, NativeEnvAdapter
from marl_vec.envs.registry import require
from marl_vec.spec import DiscreteAction, EnvSpec

# The standard DQN preprocessing (Mnih et al. 2015; Machado et al. 2018 for sticky actions).
PREPROCESS_DEFAULTS: dict[str, Any] = {
    "noop_max": 30,
    "frame_skip": 4,
    "screen_size": 84,
    "grayscale": True,
    "frame_stack": 4,
    "terminal_on_life_loss": False,
    "clip_rewards": True,
}


@dataclass(frozen=True)
class Preprocessing:
    """Validated preprocessing options; see :data:`PREPROCESS_DEFAULTS`."""

    noop_max: int
    frame_skip: int
    screen_size: int
    grayscale: bool
    frame_stack: int
    terminal_on_life_loss: bool
    clip_rewards: bool

    @classmethod
    def from_kwargs(cls, preprocess: bool, kwargs: dict[str, Any]) -> "Preprocessing | None":
        """Pop the preprocessing options out of ``kwargs``; None when ``preprocess`` is False."""
        given = {k: kwargs.pop(k) for k in list(kwargs) if k in PREPROCESS_DEFAULTS}
        if not preprocess:
            if given:
                raise ValueError(
                    f"atari options {sorted(given)} need preprocess=True; raw frames take none of "
                    f"{', '.join(PREPROCESS_DEFAULTS)}"
                )
            return None
        opts = cls(**{**PREPROCESS_DEFAULTS, **given})
        for name in ("frame_skip", "screen_size", "frame_stack"):
            value = getattr(opts, name)
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
                raise ValueError(f"atari option {name} must be an integer >= 1, got {value!r}")
        if not isinstance(opts.noop_max, (int, np.integer)) or isinstance(opts.noop_max, bool) or opts.noop_max < 0:
            raise ValueError(f"atari option noop_max must be an integer >= 0, got {opts.noop_max!r}")
        return opts

    def frame_shape(self) -> tuple[int, ...]:
        size = (self.screen_size, self.screen_size)
        return size if self.grayscale else (*size, 3)

    def obs_shape(self) -> tuple[int, ...]:
        frame = self.frame_shape()
        return frame if self.frame_stack == 1 else (self.frame_stack, *frame)


def ale_rom_dir() -> str:
    """Where ale-py keeps its ROMs (multi-agent-ale-py ships none)."""
    ale_py = require("ale_py", "atari", "Atari games")
    assert ale_py.__file__ is not None  # a regular package, not a namespace one
    return os.path.join(os.path.dirname(ale_py.__file__), "roms")


def _gymnasium_with_ale() -> Any:
    import gymnasium

    ale_py = require("ale_py", "atari", "Atari games")
    gymnasium.register_envs(ale_py)
    return gymnasium


# -- single-agent: a gymnasium chain ---------------------------------------------


def atari_gym_env(
    env_id: str, preprocess: bool = False, stack_frames: bool = True, **kwargs: Any
) -> tuple[Any, Preprocessing | None]:
    """The gymnasium env chain of an ALE game, and its preprocessing options.

    With ``stack_frames`` False the chain leaves out ``FrameStackObservation``:
    :class:`AtariAdapter` stacks frames itself, in place, without the wrapper's
    per-step concatenate and deepcopy.

    ``kwargs`` besides the preprocessing options go to ``gymnasium.make``
    (``repeat_action_probability`` for sticky actions, ``full_action_space``,
    ``render_mode``, ...). ``max_episode_steps`` counts agent steps: with
    preprocessing it wraps the whole chain, so frame skip and noops do not count.
    Reward clipping is done by the adapter, so that it can still report the raw
    game score.
    """
    gymnasium = _gymnasium_with_ale()
    kwargs = dict(kwargs)
    opts = Preprocessing.from_kwargs(preprocess, kwargs)
    if opts is None:
        return gymnasium.make(env_id, **kwargs), None
    if opts.terminal_on_life_loss or opts.frame_skip > 1 or opts.screen_size != 210:
        require("cv2", "atari", "Atari preprocessing (opencv-python-headless)")
    from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

    # AtariPreprocessing skips frames itself and reads the screen straight from ALE,
    # so the emulator env must not skip, and need not render RGB frames it throws away.
    # A time limit counts agent steps, outside the frame skip and noops (gymnasium.make
    # would count emulator frames, noops included).
    limit = kwargs.pop("max_episode_steps", None)
    for key in ("frameskip", "obs_type"):
        if key in kwargs:
            raise ValueError(f"atari option {key!r} is set by preprocess=True; use frame_skip / grayscale instead")
    env = gymnasium.make(env_id, frameskip=1, obs_type="grayscale" if opts.grayscale else "rgb", **kwargs)
    env = AtariPreprocessing(
        env,
        noop_max=opts.noop_max,
        frame_skip=opts.frame_skip,
        screen_size=opts.screen_size,
        terminal_on_life_loss=opts.terminal_on_life_loss,
        grayscale_obs=opts.grayscale,
    )
    if opts.frame_stack > 1 and stack_frames:
        env = FrameStackObservation(env, opts.frame_stack)
    if limit is not None:
        env = gymnasium.wrappers.TimeLimit(env, int(limit))
    return env, opts


def _wrapper_savers() -> dict[type, tuple[Any, Any]]:
    """Wrapper type -> (save, load) of its per-episode state, for snapshots.

    Wrappers not listed here and not known to be stateless make the chain
    unsnapshottable (``spec.snapshots`` False) rather than silently wrong.
    """
    from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation, TimeLimit

    def save_pre(w: Any) -> Any:
        return ([b.copy() for b in w.obs_buffer], w.lives, w.game_over)

    def load_pre(w: Any, s: Any) -> None:
        for buf, saved in zip(w.obs_buffer, s[0]):
            buf[...] = saved
        w.lives, w.game_over = s[1], s[2]

    def save_stack(w: Any) -> Any:
        return [np.array(o, copy=True) for o in w.obs_queue]

    def load_stack(w: Any, s: Any) -> None:
        w.obs_queue = collections.deque((o.copy() for o in s), maxlen=w.stack_size)

    def save_limit(w: Any) -> Any:
        return w._elapsed_steps

    def load_limit(w: Any, s: Any) -> None:
        w._elapsed_steps = s

    return {
        AtariPreprocessing: (save_pre, load_pre),
        FrameStackObservation: (save_stack, load_stack),
        TimeLimit: (save_limit, load_limit),
    }


def _stateless_wrappers() -> tuple[type, ...]:
    from gymnasium.wrappers.common import OrderEnforcing, PassiveEnvChecker

    return (OrderEnforcing, PassiveEnvChecker)


class AtariAdapter(NativeEnvAdapter):
    """One ALE game (a gymnasium env chain from :func:`atari_gym_env`) as one agent.

    The state is the observation. ``clip_rewards`` writes the sign of the reward;
    ``infos[i]["episode"]["score"]`` is the raw game score either way.
    ``frame_stack`` > 1 stacks the chain's last frames (padded with the reset
    frame, as gymnasium's ``FrameStackObservation``).
    """

    def __init__(
        self, env: Any, preprocessing: Preprocessing | None = None, agent_id: str = "agent_0", frame_stack: int = 1
    ):
        import gymnasium

        self.env = env
        self.preprocessing = preprocessing
        self._clip = bool(preprocessing and preprocessing.clip_rewards)
        space = env.observation_space
        if not isinstance(space, gymnasium.spaces.Box):
            raise TypeError(f"Atari observation space {space} is not supported; allowed: Box (rgb, grayscale, ram)")
        self._ale = env.unwrapped.ale
        # Snapshot support: every wrapper of the chain must be known.
        savers, stateless = _wrapper_savers(), _stateless_wrappers()
        self._savers: list[tuple[Any, Any, Any]] = []
        snapshots, layer, limit = True, env, None
        while isinstance(layer, gymnasium.Wrapper):
            if isinstance(layer, gymnasium.wrappers.TimeLimit) and limit is None:
                limit = int(layer._max_episode_steps)  # the outermost one counts this adapter's steps
            if type(layer) in savers:
                self._savers.append((layer, *savers[type(layer)]))
            elif not isinstance(layer, stateless):
                snapshots = False
            layer = layer.env
        obs_shape = tuple(space.shape) if frame_stack == 1 else (frame_stack, *space.shape)
        # The stack lives here, not in the buffer row: a caller writing into a
        # copy=False result cannot corrupt the next observation.
        self._stack = np.zeros(obs_shape, dtype=space.dtype) if frame_stack > 1 else None
        self.spec = EnvSpec(
            agents=(agent_id,),
            obs_shape=obs_shape,
            obs_dtype=space.dtype,
            state_shape=obs_shape,
            state_dtype=space.dtype,
            action=DiscreteAction(int(env.action_space.n)),
            episode_limit=limit,
            stats=("score",),
            snapshots=snapshots,
            state_is_obs=True,  # the buffers' state is the observation: no second frame copy
            reward_dtype=np.dtype(np.float64),  # a gymnasium env: its rewards as gymnasium's vector envs give them
        )
        self._score = 0.0

    def bind(self, row: RowViews) -> None:
        super().bind(row)
        self._obs = row.obs[0]
        self._reward = row.reward
        self._terminated = row.terminated
        self._truncated = row.truncated
        row.agent_mask[:] = True
        assert row.avail_actions is not None  # discrete actions: the buffers have avail_actions
        row.avail_actions[:] = True

    def reset(self, seed: int | None = None) -> dict[str, Any]:
        obs, info = self.env.reset(seed=seed)
        stack = self._stack
        if stack is not None:
            stack[...] = obs  # every slot holds the reset frame
            obs = stack
        self._obs[...] = obs
        self._score = 0.0
        return info

    def step(self, actions: np.ndarray) -> dict[str, Any]:
        obs, reward, terminated, truncated, info = self.env.step(int(actions[0]))
        stack = self._stack
        if stack is not None:
            stack[:-1] = stack[1:]  # numpy buffers the overlapping shift
            stack[-1] = obs
            obs = stack
        self._obs[...] = obs
        self._score += reward
        # np.sign of a Python float, without allocating an array.
        self._reward[0] = (reward > 0) - (reward < 0) if self._clip else reward
        self._terminated[0] = terminated
        self._truncated[0] = truncated
        return info

    def episode_stats(self, info: dict[str, Any]) -> dict[str, float]:
        return {"score": float(self._score)}

    def snapshot(self) -> Any:
        if not self.spec.snapshots:
            raise NotImplementedError(f"this Atari env chain has wrappers marl_vec cannot snapshot: {self.env}")
        # Without the RNG: sticky actions keep drawing from the env's own stream.
        return (
            self._ale.cloneState(),
            [save(w) for w, save, _ in self._savers],
            self._obs.copy(),
        )

    def restore(self, snapshot: Any) -> dict[str, Any]:
        ale_state, wrapper_states, obs = snapshot
        self._ale.restoreState(ale_state)
        for (w, _, load), state in zip(self._savers, wrapper_states):
            load(w, state)
        if self._stack is not None:
            self._stack[...] = obs
        self._obs[...] = obs
        self._score = 0.0
        return {}


# -- multi-player: PettingZoo's Atari --------------------------------------------


class _FramePipeline:
    """AtariPreprocessing's frame path for one shared screen: max-pool, resize, stack.

    Mirrors gymnasium's ``AtariPreprocessing`` + ``FrameStackObservation``
    (cv2 INTER_AREA resize; the stack is padded with the reset frame).
    """

    def __init__(self, opts: Preprocessing, screen_hw: tuple[int, int]):
        import cv2

        self._cv2 = cv2
        self.opts = opts
        raw = screen_hw if opts.grayscale else (*screen_hw, 3)
        self.pool = [np.zeros(raw, np.uint8), np.zeros(raw, np.uint8)]
        self.stack = np.zeros((opts.frame_stack, *opts.frame_shape()), np.uint8)
        self._size = (opts.screen_size, opts.screen_size)

    def _frame_into(self, out: np.ndarray) -> None:
        if self.opts.frame_skip > 1:
            np.maximum(self.pool[0], self.pool[1], out=self.pool[0])
        # dst: cv2 resizes straight into the stack slot, allocating nothing.
        self._cv2.resize(self.pool[0], self._size, dst=out, interpolation=self._cv2.INTER_AREA)

    def push_reset(self) -> None:
        self.pool[1].fill(0)
        self._frame_into(self.stack[-1])
        self.stack[:-1] = self.stack[-1]  # padded with the reset frame

    def push(self) -> None:
        # Shift by one (numpy buffers overlapping copies) and append the new frame.
        self.stack[:-1] = self.stack[1:]
        self._frame_into(self.stack[-1])

    def view(self) -> np.ndarray:
        return self.stack if self.opts.frame_stack > 1 else self.stack[0]


class MultiAgentAtariAdapter(NativeEnvAdapter):
    """A PettingZoo multi-player Atari game, one agent per player.

    Args:
        env: the ``ParallelAtariEnv`` of ``pettingzoo.atari`` (not its AEC wrapper).
        preprocessing: options as for single-agent games (``terminal_on_life_loss``
            is not supported: players' lives are per player).

    A player whose lives run out leaves the game: mask False, zero observation and
    reward, only action 0 available. Truncation comes from PettingZoo's ``max_cycles``,
    counted in emulator frames (``frame_skip`` per step) after the noop start.
    """

    def __init__(self, env: Any, preprocessing: Preprocessing | None = None):
        self.env = env
        self.preprocessing = preprocessing
        if preprocessing is not None and preprocessing.terminal_on_life_loss:
            raise ValueError("terminal_on_life_loss is not supported for multi-player Atari; allowed: False")
        self._clip = bool(preprocessing and preprocessing.clip_rewards)
        self.agent_ids = tuple(env.possible_agents)
        n_actions = {int(env.action_space(a).n) for a in self.agent_ids}
        if len(n_actions) != 1:
            raise TypeError(f"players of {env.metadata.get('name')} have different action sets {n_actions}")
        self._ale = env.ale
        width, height = self._ale.getScreenDims()
        self._screen_hw = (int(height), int(width))
        if preprocessing is None:
            obs_shape = tuple(env.observation_space(self.agent_ids[0]).shape)
            if env.obs_type == "grayscale_image":
                obs_shape = obs_shape[:2]  # drop the channel axis of 1, as gymnasium's grayscale
            self._pipeline: _FramePipeline | None = None
        else:
            obs_shape = preprocessing.obs_shape()
            self._pipeline = _FramePipeline(preprocessing, self._screen_hw)
        self.spec = EnvSpec(
            agents=self.agent_ids,
            obs_shape=obs_shape,
            obs_dtype=np.dtype(np.uint8),
            state_shape=obs_shape,
            state_dtype=np.dtype(np.uint8),
            action=DiscreteAction(n_actions.pop()),
            episode_limit=None,
            stats=("score",),
            snapshots=True,
        )
        self._frame_skip = preprocessing.frame_skip if preprocessing else 1
        self._noop_max = preprocessing.noop_max if preprocessing else 0
        A = len(self.agent_ids)
        self._score = np.zeros(A, dtype=np.float64)
        self._native_actions = dict.fromkeys(self.agent_ids, 0)
        self._rng: np.random.Generator | None = None

    def bind(self, row: RowViews) -> None:
        super().bind(row)
        self._index = {a: i for i, a in enumerate(self.agent_ids)}
        assert row.avail_actions is not None  # discrete actions: the buffers have avail_actions
        self._avail: np.ndarray = row.avail_actions

    def _grab(self, slot: int) -> None:
        pool = self._pipeline.pool[slot]  # type: ignore[union-attr]
        if self.preprocessing.grayscale:  # type: ignore[union-attr]
            self._ale.getScreenGrayscale(pool)
        else:
            self._ale.getScreenRGB(pool)

    def _write(self, screen: np.ndarray | None) -> None:
        row, live = self.row, self.env.agents
        # Without a pipeline, the caller always passes the screen.
        image = (self._pipeline.view() if self._pipeline is not None
                 else cast(np.ndarray, screen).reshape(self.spec.obs_shape))
        row.state[...] = image
        for i, agent in enumerate(self.agent_ids):
            alive = agent in live
            row.agent_mask[i] = alive
            if alive:
                row.obs[i] = image
                self._avail[i] = True
            else:
                row.obs[i] = 0
                self._avail[i] = False
                self._avail[i, 0] = True

    def reset(self, seed: int | None = None) -> dict[str, Any]:
        obs, _ = self.env.reset(seed=seed)
        screen = obs[self.agent_ids[0]]
        if seed is not None or self._rng is None:
            # Our own stream: PettingZoo's Atari reset(seed=None) reseeds its np_random
            # from the OS, which would make noop starts differ between identical runs.
            self._rng = np.random.default_rng(seed)
        if self._noop_max:
            noop = dict.fromkeys(self.agent_ids, 0)
            for _ in range(int(self._rng.integers(1, self._noop_max + 1))):
                obs = self.env.step(noop)[0]
                if not self.env.agents:
                    obs, _ = self.env.reset()
            screen = obs.get(self.agent_ids[0], screen)
            # Noops do not count towards max_cycles, as gymnasium's TimeLimit does not count them.
            self.env.frame = 0
        if self._pipeline is not None:
            self._grab(0)
            self._pipeline.push_reset()
        self._score.fill(0.0)
        self._write(screen)
        return {}

    def step(self, actions: np.ndarray) -> dict[str, Any]:
        row, index, env = self.row, self._index, self.env
        native = self._native_actions
        native.clear()
        for agent in env.agents:
            native[agent] = int(actions[index[agent]])
        acting = list(native)
        row.reward.fill(0.0)
        skip = self._frame_skip
        terms: dict[str, bool] = {}
        truncs: dict[str, bool] = {}
        obs: dict[str, np.ndarray] = {}
        ended = False
        for t in range(skip):
            obs, rewards, terms, truncs, _ = env.step(native)
            for agent, r in rewards.items():
                row.reward[index[agent]] += r
            if not env.agents or any(terms.values()) or any(truncs.values()):
                ended = True
                break
            if self._pipeline is not None and t >= skip - 2:
                self._grab(0 if t == skip - 1 else 1)
        screen = None
        if self._pipeline is not None:
            if ended:
                # The episode ended mid-skip: the current screen, not pooled with a stale one.
                self._grab(0)
                self._pipeline.pool[1][...] = self._pipeline.pool[0]
            self._pipeline.push()
        else:
            screen = next(iter(obs.values()))
        self._score += row.reward
        if self._clip:
            np.sign(row.reward, out=row.reward)
        for agent in acting:
            i = index[agent]
            row.terminated[i] = bool(terms.get(agent, False))
            row.truncated[i] = bool(truncs.get(agent, False))
        if not env.agents:
            # The game ended: a player it never flagged was cut off with it.
            np.logical_or(row.truncated, ~(row.terminated | row.truncated), out=row.truncated)
        self._write(screen)
        return {}

    def episode_stats(self, info: dict[str, Any]) -> dict[str, float]:
        stats = {"score": float(self._score.mean())}
        stats.update({f"score_{a}": float(s) for a, s in zip(self.agent_ids, self._score)})
        return stats

    def snapshot(self) -> Any:
        env = self.env
        pipe = self._pipeline
        return (
            self._ale.cloneState(),
            env.frame,
            list(env.agents),
            dict(env.terminations),
            None if pipe is None else ([p.copy() for p in pipe.pool], pipe.stack.copy()),
            self.row.obs.copy(),
            self.row.state.copy(),
            self.row.agent_mask.copy(),
            self._avail.copy(),
        )

    def restore(self, snapshot: Any) -> dict[str, Any]:
        ale_state, frame, agents, terminations, pipe_state, obs, state, mask, avail = snapshot
        env = self.env
        self._ale.restoreState(ale_state)
        env.frame, env.agents, env.terminations = frame, list(agents), dict(terminations)
        if pipe_state is not None:
            pipe = self._pipeline
            for p, saved in zip(pipe.pool, pipe_state[0]):  # type: ignore[union-attr]
                p[...] = saved
            pipe.stack[...] = pipe_state[1]  # type: ignore[union-attr]
        row = self.row
        row.obs[...] = obs
        row.state[...] = state
        row.agent_mask[...] = mask
        self._avail[...] = avail
        self._score.fill(0.0)
        return {}


def _parallel_atari_env(module_name: str, kwargs: dict[str, Any]) -> Any:
    require("multi_agent_ale_py", "atari", "multi-player Atari (multi-agent-ale-py)")
    games_pkg = require("pettingzoo.atari", "atari", "multi-player Atari")
    # A misspelt game is a bad id, not a missing extra: name the games there are.
    games = sorted(m.name for m in pkgutil.iter_modules(games_pkg.__path__) if re.search(r"_v\d+$", m.name))
    game = module_name[len("pettingzoo.atari."):]
    if game not in games:
        raise ValueError(f"unknown PettingZoo Atari game {game!r}; allowed: {', '.join(games)}")
    module = require(module_name, "atari", f"the PettingZoo Atari game {module_name!r}")
    if not hasattr(module, "raw_env"):
        raise ValueError(f"{module_name!r} is not a PettingZoo Atari game module; e.g. pettingzoo.atari.pong_v3")
    kwargs.setdefault("auto_rom_install_path", ale_rom_dir())
    aec = module.raw_env(**kwargs)
    # raw_env is parallel_to_aec(ParallelAtariEnv): step the parallel env itself.
    return getattr(aec, "env", aec)


def make_atari(env_id: str, preprocess: bool = False, **kwargs: Any) -> MultiAgentEnv:
    """The ``atari`` family.

    Args:
        env_id: a gymnasium ALE id (``ALE/Pong-v5``: one agent) or a PettingZoo Atari
            module (``pettingzoo.atari.pong_v3``: one agent per player).
        preprocess: apply the standard preprocessing; its options (``noop_max``,
            ``frame_skip``, ``screen_size``, ``grayscale``, ``frame_stack``,
            ``terminal_on_life_loss``, ``clip_rewards``) default to :data:`PREPROCESS_DEFAULTS`.
        kwargs: the rest goes to ``gymnasium.make`` or the PettingZoo game
            (``repeat_action_probability``, ``full_action_space``, ``num_players``, ``max_cycles``, ...).
    """
    if env_id.startswith("pettingzoo.atari."):
        kwargs = dict(kwargs)
        opts = Preprocessing.from_kwargs(preprocess, kwargs)
        if opts is not None:
            require("cv2", "atari", "Atari preprocessing (opencv-python-headless)")
            if "obs_type" in kwargs:
                raise ValueError("atari option 'obs_type' is set by preprocess=True; use grayscale instead")
            kwargs["obs_type"] = "grayscale_image" if opts.grayscale else "rgb_image"
        return MultiAgentAtariAdapter(_parallel_atari_env(env_id, kwargs), opts)
    if env_id.startswith("pettingzoo."):
        raise ValueError(f"{env_id!r} is not an Atari game; use the 'pettingzoo' family for other PettingZoo envs")
    env, opts = atari_gym_env(env_id, preprocess, stack_frames=False, **kwargs)
    return AtariAdapter(env, opts, frame_stack=opts.frame_stack if opts else 1)


__all__ = [
    "PREPROCESS_DEFAULTS",
    "Preprocessing",
    "AtariAdapter",
    "MultiAgentAtariAdapter",
    "atari_gym_env",
    "make_atari",
    "ale_rom_dir",
]

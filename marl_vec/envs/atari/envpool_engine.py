"""EnvPool's Atari under our contract: one pool per EnvGroup, stepped in one call, no per-env Python.

One idea: `EnvPoolEngine` owns one EnvPool (synchronous, ``batch_size ==
num_envs``) over a group's ``k`` slots, and `EnvPoolStepper` steps it
whole. What a group step costs beyond EnvPool's own step:

- EnvPool's raw C++ calls (``_send``/``_recv``/``_reset``) with argument lists
  built once: its Python wrapper (action conversion, a dict and a pytree per
  step, ``terminated = done & ~trunc``) is skipped. Should a later EnvPool lack
  them, the public ``send``/``recv``/``reset`` serve instead.
- EnvPool keeps the frame stacks (``stack_num = frame_stack``; it pads a reset
  stack with the reset frame, as the python path does), so the observations
  reach the batch with one whole-group copy (a transposed one for colour
  frames: EnvPool's are channel-first).
- Reward clipping (the raw score is kept), the flags and the score are
  whole-group numpy calls with preallocated outputs.
- EnvPool autoresets at the next step; our ``same_step`` mode resets at once. A
  step where envs ended resets them all in one partial reset (``_reset`` of
  their ids, EnvPool's async API in sync mode) and keeps their reset stacks;
  the group's autoreset then hands each env its stack (`reset_slot`).
  A step where no env ended runs no per-env Python.

Seeding: EnvPool fixes each env's seed when the pool is made; the pool is made
at the first reset, and again at each seeded reset of slot 0 (the group seeds
slot 0 first, then slot j with ``seed + j``). A seeded reset of part of the group
(an env's first reset is seeded too) is refused before anything is reset
(`EnvPoolStepper.reset_error`): remaking the pool would end the other
envs' episodes.
EnvPool counts the episode limit itself (``max_episode_steps``, agent steps).

May import: numpy, envpool (via the config's ``build``), ``marl_vec.envs.atari.engine_config``,
``marl_vec.envs.atari.engine_stepper``.

Examples:
    >>> fn = lambda: make_atari("ALE/Pong-v5", preprocess=True, engine="envpool", engine_threads=2)
    >>> venv = mv.DummyVecEnv([fn] * 8)          # one EnvPool of 8 envs
    >>> venv.reset().obs.shape
    (8, 1, 4, 84, 84)
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from marl_vec.core.buffers import RowViews
from marl_vec.envs.atari.engine_config import EngineConfig
from marl_vec.envs.atari.engine_stepper import ENGINE_KINDS, EngineStepper
from marl_vec.core.adapter import MultiAgentEnv

# EnvPool's raw calls take and return arrays by these names (EnvPool 1.2).
_ACTION_KEYS = {"env_id", "players.env_id", "action"}
_STATE_KEYS = ("obs", "reward", "done", "trunc", "info:env_id")
# Tests set this False to run the public-API path (what a later EnvPool without the raw calls gets).
USE_RAW_CALLS = True


def reseed_error(slot: int, seed: int) -> ValueError:
    return ValueError(
        f"EnvPool fixes each env's seed when its pool is made: env slot {slot} cannot be reseeded "
        f"with {seed} alone; reset every env of the group with a seed (reset(seed=...)), reset it "
        f"without one, or use engine: ale_vector"
    )


def reseed_part_error(k: int) -> str:
    return (
        f"engine: envpool cannot reseed part of a group: EnvPool takes each env's seed only when its pool "
        f"is made, and making it anew would end the other envs' episodes. A seeded reset (reset(seed=...), or "
        f"an env's first reset, seeded env_seed + index) must name all {k} envs of the group (a worker's block) "
        f"or none (reset(seed=...)); what works: reset(env_ids=...) without a seed once the envs were reset, "
        f"a seeded reset of every env, or engine: ale_vector, which reseeds single envs"
    )


class EnvPoolEngine:
    """One EnvPool over ``k`` slots, made at the first reset, and the per-slot state of our contract."""

    envpool = True

    def __init__(self, config: EngineConfig, k: int):
        self.config = config
        self.k = k
        self.env: Any = None
        self.score = np.zeros(k, dtype=np.float64)  # raw rewards since each slot's reset
        self.actions = np.zeros(k, dtype=np.int32)  # what EnvPool reads the actions from
        opts = config.opts
        self.obs_shape = opts.obs_shape()
        # Reset observations waiting for reset_slot: made by the pool's first reset or the
        # partial reset of a step where slots ended.
        self.reset_obs = np.zeros((k, *self.obs_shape), dtype=np.uint8)
        self.has_reset_obs = np.zeros(k, dtype=bool)
        self.cached = False  # some has_reset_obs is set
        self._pool_seeds: list[int] = []
        self.unclaimed: set[int] = set()  # slots whose first-reset observation no reset() has taken yet
        self._all_ids = np.arange(k, dtype=np.int32)

    # -- EnvPool's calls ---------------------------------------------------------------

    def _make_pool(self, base_seed: int) -> None:
        if self.env is not None:
            self.env.close()
        self._pool_seeds = [base_seed + j for j in range(self.k)]
        self.env = env = self.config.build(self.k, seeds=self._pool_seeds)
        state_keys = list(getattr(env, "_state_keys", ()))
        raw = (USE_RAW_CALLS and all(hasattr(env, name) for name in ("_send", "_recv", "_reset"))
               and set(getattr(env, "_action_keys", ())) == _ACTION_KEYS
               and all(key in state_keys for key in _STATE_KEYS))
        if raw:
            named = {"env_id": self._all_ids, "players.env_id": self._all_ids, "action": self.actions}
            self._send_args = [named[key] for key in env._action_keys]
            self._raw_send, self._raw_recv, self._raw_reset = env._send, env._recv, env._reset
            self._index = [state_keys.index(key) for key in _STATE_KEYS]
            self.step = self._step_raw
            self._reset_ids = self._reset_ids_raw
        else:
            self.step = self._step_public
            self._reset_ids = self._reset_ids_public
        self._reset_ids(self._all_ids)
        self.unclaimed = set(range(self.k))

    def step(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Step every slot with `actions`: EnvPool's obs (its layout), raw rewards, done, trunc."""
        raise RuntimeError("the EnvPool engine steps after its first reset")

    def _step_raw(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        self._raw_send(self._send_args)
        state = self._raw_recv()
        obs, reward, done, trunc, _ = (state[i] for i in self._index)
        return obs, reward, done, trunc

    def _step_public(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        obs, reward, terminated, truncated, _ = self.env.step(self.actions)
        return obs, reward, terminated | truncated, truncated

    def _reset_ids(self, ids: np.ndarray) -> None:
        raise RuntimeError("the EnvPool engine resets after its first reset")

    def _reset_ids_raw(self, ids: np.ndarray) -> None:
        """Reset slots ``ids`` in one call (EnvPool's async API); keep their reset observations."""
        self._raw_reset(ids)
        state = self._raw_recv()
        obs, env_id = state[self._index[0]], state[self._index[4]]
        self._keep_reset(env_id, obs)

    def _reset_ids_public(self, ids: np.ndarray) -> None:
        obs, info = self.env.reset(ids)
        self._keep_reset(info["env_id"], obs)

    def _keep_reset(self, env_id: np.ndarray, obs: np.ndarray) -> None:
        self.reset_obs[env_id] = self.ours(obs)
        self.has_reset_obs[env_id] = True
        self.cached = True

    def ours(self, obs: np.ndarray) -> np.ndarray:
        """A view of EnvPool's observations ``(n, stack * channels, h, w)`` in our layout."""
        n = obs.shape[0]
        if self.config.opts.grayscale:
            return obs.reshape((n, *self.obs_shape))
        stack, size = self.config.opts.frame_stack, self.config.opts.screen_size
        return obs.reshape(n, stack, 3, size, size).transpose(0, 1, 3, 4, 2).reshape((n, *self.obs_shape))

    # -- our contract ----------------------------------------------------------------

    def reset_ended(self, done: np.ndarray) -> None:
        """Slots that ended this step start their next episode now, in one call (same_step)."""
        self._reset_ids(np.flatnonzero(done).astype(np.int32))

    def forget_reset_obs(self) -> None:
        """A step moved every slot on: the kept reset observations are stale."""
        self.has_reset_obs.fill(False)
        self.cached = False

    def reset_slot(self, slot: int, seed: int | None, out: np.ndarray) -> None:
        """Write slot's reset observation into ``out``: the one kept from the pool's making or
        from the slot's end, else from a partial reset. A seeded reset of slot 0 makes the pool
        anew with ``seed + j`` for slot j; the other slots then take its observations."""
        if self.env is None or (seed is not None and slot == 0):
            base = int(seed) - slot if seed is not None else int(np.random.SeedSequence().generate_state(1)[0] >> 2)
            self._make_pool(base)
        if slot in self.unclaimed:
            if seed is not None and seed != self._pool_seeds[slot]:
                raise reseed_error(slot, seed)
            self.unclaimed.discard(slot)
        elif seed is not None:
            raise reseed_error(slot, seed)
        if not self.has_reset_obs[slot]:
            self._reset_ids(self._all_ids[slot:slot + 1])
        out[...] = self.reset_obs[slot]
        self.has_reset_obs[slot] = False
        self.score[slot] = 0.0

    def close(self) -> None:
        if self.env is not None:
            self.env.close()
            self.env = None


class EnvPoolStepper(EngineStepper):
    """Steps a group's `EnvPoolEngine` whole; see the module docstring."""

    def __init__(self, adapters: Sequence[MultiAgentEnv], rows: Sequence[RowViews], block: RowViews,
                 engine: EnvPoolEngine | None = None):
        super().__init__(adapters, rows, block, engine)

    def reset_error(self, local_ids: Sequence[int], seeded: bool) -> str | None:
        """A seeded reset of part of the group is refused before anything is reset: EnvPool
        takes seeds only when its pool is made, and making it anew would end the other
        envs' episodes."""
        if not seeded or self.on_python:
            return None
        return reseed_part_error(self.engine.k)

    def step_group(self, infos: list[dict[str, Any]]) -> None:
        engine: EnvPoolEngine = self.engine  # type: ignore[assignment]
        if engine.unclaimed:  # slots never reset (a partial first reset with env_seed=None)
            self.failed_at = 0
            raise ValueError(
                f"engine: envpool steps every env of its group in one call, and env slots {sorted(engine.unclaimed)} "
                f"of this group were never reset: reset them first (reset(env_ids=...)), or reset the whole batch"
            )
        if engine.cached:
            engine.forget_reset_obs()
        np.copyto(engine.actions, self._actions, casting="unsafe")  # validated by the VecEnv: in range
        obs, reward, done, trunc = engine.step()
        self._obs[...] = engine.ours(obs)
        engine.score += reward
        if self._clip:
            np.sign(reward, out=self._reward, casting="unsafe")
        else:
            self._reward[...] = reward
        np.greater(done, trunc, out=self._terminated)  # done and not truncated
        self._truncated[...] = trunc
        if np.count_nonzero(done):
            engine.reset_ended(done)
        infos[:] = map(dict, itertools.repeat((), engine.k))  # k fresh empty dicts, at C speed


ENGINE_KINDS["envpool"] = (EnvPoolEngine, EnvPoolStepper)

"""SB3VecEnv: a Stable-Baselines3 ``VecEnv`` over a single-agent marl_vec VecEnv.

A real subclass of ``stable_baselines3.common.vec_env.VecEnv``, so SB3 uses it
as it is (anything else it wraps in its own DummyVecEnv). It behaves as SB3's
``DummyVecEnv([lambda: Monitor(env_fn())...])`` over the same envs:

- same-step autoreset: the VecEnv must use ``autoreset="same_step"`` (or ``"fast"``);
  where an episode ended, ``infos[i]["terminal_observation"]`` holds its last
  observation and ``reset_infos[i]`` the reset's info;
- ``infos[i]["TimeLimit.truncated"]`` is ``truncated and not terminated``, every step;
- at an episode's end ``infos[i]["episode"]`` is ``{"r", "l", "t"}`` as SB3's
  ``Monitor`` gives: return rounded to 6 decimals, length, and seconds since the
  face was made, rounded to 6 (``monitor=False``: no ``"episode"`` added; an env
  wrapped in its own Monitor keeps its own, whatever this option);
- rewards float32 and dones bool, as SB3's DummyVecEnv;
- Dict observations (a dict of (E, ...) arrays, for SB3's ``MultiInputPolicy``;
  nested Dict observations too, which SB3's own vec envs refuse: a superset) and
  MultiDiscrete / MultiBinary actions as SB3 gives them (MultiBinary as ints, bools or
  float 0./1., as SB3's PPO and A2C send them); Dict / Tuple actions, which SB3 does
  not take, are refused with ``ValueError``, and so are actions of the wrong shape;
- ``seed(seed)`` seeds the next ``reset()`` (env i with ``seed + i``); reset options
  (``set_options``) are not supported;
- ``step()`` before any ``reset()`` steps, as SB3's vec envs do: the face resets the
  batch first (the core needs it), with the seeds ``seed()`` set;
- ``get_attr``/``set_attr``/``env_method`` reach through gymnasium wrappers, take
  indices as the batch does (an int, ints, negative ones, or a boolean mask), and
  a missing attribute is an ``AttributeError`` on every backend (so ``has_attr``
  works); ``env_is_wrapped`` looks at each env's wrapper chain; ``envs`` is the
  list of env objects where they live in this process (DummyVecEnv).

SB3's own test suite runs on this face: ``scripts/ci/run_sb3_suite.sh`` (docs/faces/stable_baselines3.md).

Examples:
    >>> import gymnasium as gym
    >>> import marl_vec as mv
    >>> from marl_vec.compat import SB3VecEnv
    >>> env = SB3VecEnv(mv.DummyVecEnv([lambda: gym.make("CartPole-v1")] * 4, env_seed=None))
    >>> env.seed(0)
    [0, 1, 2, 3]
    >>> env.reset().shape, env.get_attr("render_mode")
    ((4, 4), [None, None, None, None])
    >>> env.close()
"""

from __future__ import annotations

import time
from typing import Any, Sequence

import gymnasium
import numpy as np

from marl_vec.compat.gym.batching import FinalObs, _env_info, agent_zero
from marl_vec.compat.gym.spaces import _attr_or_none, _native_action_space, observation_space_of
from marl_vec.compat.opponent import Opponent, OpponentSeat, serve_seat
from marl_vec.envs.extras import missing_extra_message
from marl_vec.core.spec import TreeAction
from marl_vec.vec.base import VecEnv as MarlVecEnv
from marl_vec.vec.dummy import DummyVecEnv as MarlDummyVecEnv

try:
    from stable_baselines3.common.env_util import is_wrapped
    from stable_baselines3.common.vec_env import VecEnv as SB3BaseVecEnv
    from stable_baselines3.common.vec_env.base_vec_env import VecEnvIndices, VecEnvObs, VecEnvStepReturn
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(missing_extra_message("stable_baselines3", "sb3", "SB3VecEnv", exc)) from exc


class SB3VecEnv(SB3BaseVecEnv):
    """Wraps a single-agent marl_vec ``VecEnv`` with same-step autoreset as an SB3 ``VecEnv``.

    Args:
        venv: the batch; this face owns it and closes it. For SB3's unseeded first
            ``reset()`` build it with ``env_seed=None`` (marl_vec's default seeds env i with i).
        monitor: add SB3 Monitor's ``infos[i]["episode"]`` at episode ends.
        opponent: for a turn-based game (``spec.turn_based``), served as single-agent:
            ``opponent(obs, avail) -> moves`` plays every seat but ``seat`` (default: a
            random legal move); see `marl_vec.compat.opponent`. ``env_method("action_masks")``
            then gives the learner's legal moves (sb3-contrib's MaskablePPO).
        seat: the learner's agent in a turn-based game, an index or an id.
    """

    def __init__(self, venv: MarlVecEnv, monitor: bool = True, opponent: Opponent | None = None,
                 seat: int | str = 0):
        venv = serve_seat(venv, opponent, seat, "SB3VecEnv", "SB3's VecEnv")
        spec = venv.spec
        if not venv.autoreset.keeps_final:
            raise ValueError(
                f"SB3VecEnv needs same-step autoreset (SB3 resets an env in the step that ends it), "
                f"got autoreset={venv.autoreset.value!r}; allowed: same_step, fast"
            )
        self.venv = venv
        self.monitor = monitor
        native_action = _native_action_space(spec, _attr_or_none(venv, "action_space", [0])[0])
        if isinstance(spec.action, TreeAction):
            raise ValueError(
                f"SB3VecEnv: action space {native_action} is a Dict/Tuple; SB3 takes Box, Discrete, "
                "MultiDiscrete or MultiBinary actions"
            )
        start = np.asarray(getattr(native_action, "start", 0))  # Discrete: a scalar, MultiDiscrete: one per axis
        if start.any():
            raise ValueError(f"SB3VecEnv: action space {native_action} starts at {start}; SB3 needs 0")
        observation_space = observation_space_of(spec, _attr_or_none(venv, "observation_space", [0])[0])
        super().__init__(venv.num_envs, observation_space, native_action)
        self._action_shape = (venv.num_envs, 1, *spec.action_shape)
        self._final_obs = FinalObs(venv)  # terminal_observation of the env's own leaf types
        self._t_start = time.time()
        self._actions: np.ndarray | None = None

    # -- SB3 VecEnv API -------------------------------------------------------------

    def reset(self) -> VecEnvObs:
        """Reset every env with the seeds of [`seed`][marl_vec.compat.tianshou.TianshouVectorEnv.seed] (then forgotten), or continuing its stream."""
        if any(self._options):
            raise ValueError("SB3VecEnv: reset options are not supported (marl_vec passes no options to envs)")
        r = None
        by_offset: dict[int | None, list[int]] = {}
        for i, seed in enumerate(self._seeds):
            by_offset.setdefault(None if seed is None else int(seed) - i, []).append(i)
        if isinstance(self.venv, OpponentSeat):
            # The per-env seeds in one call: the seat's openings step the whole batch.
            r = self.venv.reset(seed=list(self._seeds))
            by_offset.clear()
            for i in range(self.num_envs):
                self.reset_infos[i] = r.infos[i]
        for offset, ids in by_offset.items():  # marl_vec seeds env i with seed + i
            r = self.venv.reset(seed=offset, env_ids=None if len(ids) == self.num_envs else ids)
            for i in ids:
                self.reset_infos[i] = r.infos[i]
        assert r is not None
        self._reset_seeds()
        self._reset_options()
        return agent_zero(r.obs)

    def step_async(self, actions: np.ndarray) -> None:
        actions = np.asarray(actions)
        if actions.size != np.prod(self._action_shape, dtype=np.int64):
            # SB3's DummyVecEnv hands env i row i whatever its shape; marl_vec checks every action.
            raise ValueError(
                f"SB3VecEnv: actions must have shape {(self.num_envs, *self._action_shape[2:])} "
                f"(one action of the action space {self.action_space} per env), got shape {actions.shape}"
            )
        self._actions = actions.reshape(self._action_shape)

    def step_wait(self) -> VecEnvStepReturn:
        if self._actions is None:
            raise RuntimeError("step_wait() called without step_async()")
        actions, self._actions = self._actions, None
        if not self.venv._has_reset:
            # SB3's vec envs step envs that were never reset; marl_vec's batch needs a reset
            # first: this one (seeded as seed() asked), whose observation SB3 would not see.
            self.reset()
        r = self.venv.step(actions)
        terminated, truncated = r.terminated[:, 0], r.truncated[:, 0]
        infos: list[dict[str, Any]] = []
        for i, info in enumerate(r.infos):
            out = dict(_env_info(info)) if info else {}
            done = bool(r.done[i])
            if done and self.monitor and "episode" in info and "episode" not in out:
                out["episode"] = self._monitor_episode(info["episode"])
            out["TimeLimit.truncated"] = bool(truncated[i]) and not bool(terminated[i])
            if done:
                # as the env returned it (SB3's DummyVecEnv keeps the env's own object)
                out["terminal_observation"] = self._final_obs(r.final_obs, i, copy=True)
                self.reset_infos[i] = info.get("reset_info", {})
            infos.append(out)
        return agent_zero(r.obs), r.reward[:, 0].astype(np.float32), r.done.copy(), infos

    def close(self) -> None:
        self.venv.close()

    @property
    def envs(self) -> list[Any]:
        """The env objects, as SB3's DummyVecEnv's ``envs`` (each as its env_fn returned it).

        Only where they live in this process (a marl_vec DummyVecEnv); elsewhere an
        ``AttributeError`` (so ``hasattr(env, "envs")`` is False) saying what to use instead.
        """
        if isinstance(self.venv, MarlDummyVecEnv):
            return [adapter.native for adapter in self.venv.group.adapters]
        raise AttributeError(
            f"envs: the envs of a {type(self.venv).__name__} live in its worker processes; "
            "use get_attr, set_attr or env_method"
        )

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        return self.venv.get_attr(attr_name, indices=self._ids(indices))

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        ids = self._ids(indices)
        self.venv.set_attr(attr_name, [value] * len(ids), indices=ids)

    def env_method(self, method_name: str, *method_args: Any, indices: VecEnvIndices = None, **method_kwargs: Any) -> list[Any]:
        return self.venv.call(method_name, *method_args, indices=self._ids(indices), **method_kwargs)

    def env_is_wrapped(self, wrapper_class: type[gymnasium.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        """Whether each env's wrapper chain holds ``wrapper_class``.

        In this process (DummyVecEnv) by ``isinstance`` on the envs; across processes
        by the class names in each env's ``str`` (gymnasium prints its chain there).
        """
        ids = self._ids(indices)
        if isinstance(self.venv, MarlDummyVecEnv):
            return [is_wrapped(self.venv.group.adapters[i].native, wrapper_class) for i in ids]
        return [f"<{wrapper_class.__name__}<" in text for text in self.venv.call("__str__", indices=ids)]

    def get_images(self) -> Sequence[np.ndarray | None]:
        if self.render_mode != "rgb_array":
            return [None] * self.num_envs
        return self.venv.render()

    def _ids(self, indices: VecEnvIndices) -> list[int]:
        """As the batch reads them: None, an int (negative from the end), ints, or a boolean mask."""
        return self.venv._check_indices(indices, negative=True)

    def _monitor_episode(self, summary: dict[str, Any]) -> dict[str, Any]:
        """marl_vec's summary as SB3's Monitor writes it."""
        return {
            "r": round(float(summary["return"]), 6),
            "l": int(summary["length"]),
            "t": round(time.time() - self._t_start, 6),
        }

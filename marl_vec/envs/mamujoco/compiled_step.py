"""CompiledStep: a MaMuJoCo step with its observation and action maps planned once.

gymnasium-robotics builds every agent's observation anew at each step in Python
(``obsk.build_obs``: a loop over joints and bodies, ``tolist``, one ``np.clip`` per
body) and maps the agents' actions into the robot's with a loop and two NaN
checks. On Ant/2x4 that is a third of a step; MuJoCo's own physics is the rest.
Both maps are fixed by the agent split, so they are planned here once, as
index arrays, and done per step with a handful of numpy calls:

- observations: the MuJoCo arrays the agents read (``qpos``, ``qvel``, ``cfrc_ext``,
  ...) are copied into one float64 source vector, and every agent's (padded) row is
  one ``np.take`` from it. What the library computes rather than reads (a body's
  ``body_fn``, a joint's ``extra_obs``) is computed the same way: the library's own
  ``clip(x, -1, 1)`` body function as one ``np.clip`` over the whole array, any other
  function called as the library calls it, its result put in the source vector;
- actions: one ``np.take`` of the padded action rows into the robot's action
  vector, refused as the library refuses it (``AssertionError``) when an entry is NaN;
- state: the robot's observation that its own ``step`` returned (the library's
  ``state()`` computes the same function of the same data again).

The result is the library's bit for bit: ``plan`` gives up (None, and the adapter
steps through the library) on anything it cannot map exactly, and the adapter checks
the plan against the library's own observations at every reset
(tests/families/test_mamujoco.py compares with the library stepped by hand).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import gymnasium as gym
import numpy as np

# The body function of the library's Ant, Humanoid, ... bodies (obsk.get_parts_and_edges),
# recognised by its code: the same expression compiles to the same code object contents.
_LIBRARY_CLIP = lambda _id, x: np.clip(x, -1, 1).tolist()  # noqa: E731
# Arrays of MjData that build_obs reads per body (one row per body) and per joint.
_BODY_ARRAYS = ("cvel", "cinert", "cfrc_ext")
_JOINT_ARRAYS = {"qpos": "qpos_ids", "qvel": "qvel_ids", "qfrc_actuator": "qvel_ids"}
# Wrappers of the robot's env that leave its observation as the robot made it.
_OBS_KEEPING_WRAPPERS = (gym.wrappers.TimeLimit, gym.wrappers.OrderEnforcing, gym.wrappers.PassiveEnvChecker)


def _same_code(fn: Any, reference: Callable) -> bool:
    code, ref = getattr(fn, "__code__", None), reference.__code__
    return (code is not None and code.co_code == ref.co_code and code.co_consts == ref.co_consts
            and code.co_names == ref.co_names and getattr(fn, "__globals__", {}).get("np") is np)


class _Unmappable(Exception):
    """The split holds something the plan cannot reproduce exactly: the library's path is used."""


@dataclasses.dataclass
class _Source:
    """The float64 vector every observation entry is taken from; entry 0 is the padding's 0.0."""

    size: int = 1
    arrays: list[tuple[str, slice]] = dataclasses.field(default_factory=list)  # MjData arrays, copied
    clipped: list[tuple[str, slice]] = dataclasses.field(default_factory=list)  # clip(-1, 1) of them
    calls: list[tuple[Callable, slice]] = dataclasses.field(default_factory=list)  # computed entries
    _offsets: dict[tuple[str, str], int] = dataclasses.field(default_factory=dict)

    def offset(self, data: Any, name: str, clip: bool) -> int:
        """Where MjData array ``name`` (raveled, clipped or not) starts in the vector."""
        key = ("clip" if clip else "copy", name)
        if key not in self._offsets:
            size = int(np.asarray(getattr(data, name)).size)
            self._offsets[key] = self.size
            (self.clipped if clip else self.arrays).append((name, slice(self.size, self.size + size)))
            self.size += size
        return self._offsets[key]

    def joint(self, data: Any, name: str, ids: Any) -> int:
        """The entry of ``data.<name>[ids]`` (ids one int, negative from the end as numpy reads it)."""
        i, size = _int_id(ids), int(np.asarray(getattr(data, name)).size)
        if not -size <= i < size:
            raise _Unmappable(f"data.{name}[{i}] is out of range")
        return self.offset(data, name, clip=False) + i % size

    def call(self, fn: Callable, size: int) -> list[int]:
        """Entries for a function of the data computed at each step."""
        start = self.size
        self.calls.append((fn, slice(start, start + size)))
        self.size += size
        return list(range(start, start + size))


def _call_size(fn: Callable, data: Any) -> int:
    value = np.asarray(fn(data))
    if value.ndim > 1 or value.dtype.kind not in "fiub":
        raise _Unmappable(f"an extra observation of shape {value.shape} and dtype {value.dtype}")
    return int(value.size)


def _int_id(ids: Any) -> int:
    if isinstance(ids, (int, np.integer)) and not isinstance(ids, bool):
        return int(ids)
    raise _Unmappable(f"joint ids {ids!r} are not one int")


def _body_entries(source: _Source, data: Any, node: Any, category: str, seen: dict[str, set]) -> list[int]:
    """build_obs's body branch: each body of ``node`` once per category, through its body_fn."""
    out: list[int] = []
    array = np.asarray(getattr(data, category))
    if array.ndim not in (1, 2):
        raise _Unmappable(f"data.{category} has {array.ndim} dimensions")
    width = 1 if array.ndim == 1 else int(array.shape[1])
    for body in node.bodies:
        _int_id(body)
        if not -len(array) <= body < len(array):
            raise _Unmappable(f"data.{category}[{body}] is out of range")
        if body in seen.setdefault(category, set()):
            continue
        seen[category].add(body)
        if node.body_fn is None or _same_code(node.body_fn, _LIBRARY_CLIP):
            start = source.offset(data, category, clip=node.body_fn is not None) + (body % len(array)) * width
            out += range(start, start + width)
        else:
            fn, b = node.body_fn, body
            out += source.call(lambda d, fn=fn, name=category, b=b: fn(b, getattr(d, name)[b].tolist()), width)
    return out


def _agent_entries(source: _Source, data: Any, k_dict: dict, local: list[list[str]], globals_: list,
                   global_categories: tuple[str, ...]) -> list[int]:
    """One agent's observation as entries of the source vector, in build_obs's order."""
    out: list[int] = []
    seen: dict[str, set] = {}
    for k in sorted(k_dict):
        for node in k_dict[k]:
            for category in local[k]:
                if category in node.extra_obs:
                    fn = node.extra_obs[category]
                    out += source.call(fn, _call_size(fn, data))
                elif category in _JOINT_ARRAYS:
                    out.append(source.joint(data, category, getattr(node, _JOINT_ARRAYS[category])))
                elif category in _BODY_ARRAYS:
                    out += _body_entries(source, data, node, category, seen)
    seen = {}
    for category in global_categories:
        for joint in globals_:
            if category in joint.extra_obs:
                fn = joint.extra_obs[category]
                out += source.call(fn, _call_size(fn, data))
            elif category in _JOINT_ARRAYS:
                out.append(source.joint(data, category, getattr(joint, _JOINT_ARRAYS[category])))
            else:
                out += _body_entries(source, data, joint, category, seen)
    return out


def _action_map(env: Any, width: int) -> np.ndarray:
    """For each entry of the robot's action: its place in the (A, width) action rows."""
    size = int(env.single_agent_env.action_space.shape[0])
    where = np.full(size, -1, dtype=np.intp)
    for agent, partition in enumerate(env.agent_action_partitions):
        for index, node in enumerate(partition):
            act = _int_id(node.act_ids)
            if not -size <= act < size or where[act % size] >= 0:
                raise _Unmappable(f"action {act} is mapped twice or out of range")
            act %= size
            if index >= width:
                raise _Unmappable(f"agent {agent} has more actions than its row's {width}")
            where[act] = agent * width + index
    if (where < 0).any():
        raise _Unmappable("an action of the robot belongs to no agent")
    return where


def _keeps_observation(env: Any) -> bool:
    while isinstance(env, gym.Wrapper):
        if not isinstance(env, _OBS_KEEPING_WRAPPERS):
            return False
        env = env.env
    return True


class CompiledStep:
    """One MaMuJoCo env's step with planned maps; `plan` makes one or says it cannot (None)."""

    def __init__(self, env: Any, source: _Source, index: np.ndarray, actions: np.ndarray):
        self.env = env
        self.robot = env.single_agent_env
        self.data = self.robot.unwrapped.data
        self._source = np.zeros(source.size, dtype=np.float64)
        self._copies = [(getattr(self.data, name).reshape(-1), self._source[s]) for name, s in source.arrays]
        self._clips = [(getattr(self.data, name).reshape(-1), self._source[s]) for name, s in source.clipped]
        self._calls = [(fn, self._source[s]) for fn, s in source.calls]
        self.index = index  # (A, padded obs size) entries of the source vector
        self._action_index = actions
        self._action = np.empty(actions.shape, dtype=np.float64)  # the library's: float64
        self._gathered = np.empty(actions.shape, dtype=np.float32)  # the rows' dtype (np.take keeps it)
        self.agents = list(env.possible_agents)

    @classmethod
    def plan(cls, env: Any, obs_width: int, action_width: int) -> tuple[CompiledStep | None, str]:
        """A compiled step for ``env`` (its rows ``obs_width`` and ``action_width`` wide), or
        (None, why) where the split holds what cannot be mapped exactly."""
        if env.agent_obsk is None:
            return None, "the one-agent form passes its action as given and sees the robot's observation"
        if not _keeps_observation(env.single_agent_env):
            return None, "a wrapper of the robot's env may change its observation"
        data = env.single_agent_env.unwrapped.data
        source = _Source()
        try:
            rows = [_agent_entries(source, data, k_dict, env.local_categories, env.mujoco_globals,
                                   tuple(env.global_categories)) for k_dict in env.k_dicts]
            actions = _action_map(env, action_width)
        except _Unmappable as exc:
            return None, str(exc)
        if max(len(r) for r in rows) > obs_width:
            return None, "an observation is wider than its row"
        index = np.zeros((len(rows), obs_width), dtype=np.intp)  # entry 0: the padding's 0.0
        for i, row in enumerate(rows):
            index[i, :len(row)] = row
        # The data arrays MuJoCo writes in place: planned on the live arrays, so a model
        # rebuilt with other data (a reload) would not be seen; checked at each reset.
        return cls(env, source, index, actions), ""

    def observations(self, out: np.ndarray) -> None:
        """Every agent's observation row, as the library builds it, into ``out`` (A, width)."""
        for src, dst in self._copies:
            dst[...] = src
        for src, dst in self._clips:
            np.clip(src, -1, 1, out=dst)
        for fn, dst in self._calls:
            dst[...] = fn(self.data)
        if out.dtype == np.float64 and out.flags.c_contiguous:
            np.take(self._source, self.index, out=out)
        else:
            out[...] = self._source[self.index]

    def robot_action(self, actions: np.ndarray) -> np.ndarray:
        """The robot's action from (A, width) action rows: the library's global action,
        refused as the library refuses it where an entry is NaN."""
        action, gathered = self._action, self._gathered
        if gathered.dtype != actions.dtype:
            gathered = self._gathered = np.empty(gathered.shape, dtype=actions.dtype)
        np.take(actions, self._action_index, out=gathered)
        action[...] = gathered
        if np.isnan(action.min()):  # min propagates NaN; a scalar, where isnan(action) would allocate
            raise AssertionError("FATAL: At least one gym_env action is undefined!")  # the library's check
        return action

    def step(self, actions: np.ndarray, obs_out: np.ndarray) -> tuple[np.ndarray, Any, bool, bool, dict]:
        """The library's ``step`` over (A, width) action rows, observations into ``obs_out``:
        (the robot's observation = the state, reward, terminated, truncated, info)."""
        state, reward, terminated, truncated, info = self.robot.step(self.robot_action(actions))
        if terminated or truncated:
            self.env.agents = []
        self.observations(obs_out)
        return state, reward, bool(terminated), bool(truncated), info

    def matches(self, obs: np.ndarray) -> bool:
        """Whether the planned observations equal ``obs``, the library's own (A, width) rows."""
        mine = np.empty_like(obs, dtype=np.float64)
        self.observations(mine)
        return bool(np.array_equal(mine, obs, equal_nan=True))

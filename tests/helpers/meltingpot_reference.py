"""Melting Pot references: what the real substrate returned, recorded where it ran.

Melting Pot substrates are not reproducible from their seed (two builds with the same
Lab2d seed and settings gave different worlds for 48 of the 49 substrates, in one process
or in two; see docs/families/meltingpot.md). So the batch cannot be compared with a
second, independent plain loop. Instead each env of the batch is the family's adapter
with a log (`Recorder`): in its own worker it keeps a digest of every timestep its
real substrate returned and the Lab2d seed of every world it built. The tests compare
each row of the batch, bit for bit (by digest), with the timestep its own substrate
returned, on every backend; and the seeds with those of a plain loop
(``random.seed(s); substrate.build(...)``), which draws the same Lab2d seeds.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any, Sequence

import numpy as np

from marl_vec.envs.meltingpot import WORLD, MeltingPotAdapter, import_substrate

_seeds: list[int] = []  # Lab2d seeds of this process's builds, in order (see spy_lab2d_seeds)


def spy_lab2d_seeds() -> list[int]:
    """Make this process's ``dmlab2d.Lab2d`` note each world's seed (its ``env_seed`` setting); the list."""
    import dmlab2d

    if not getattr(dmlab2d.Lab2d, "_marl_vec_spy", False):
        base = dmlab2d.Lab2d

        class Lab2d(base):  # type: ignore[misc, valid-type]
            _marl_vec_spy = True

            def __init__(self, runfiles: str, settings: dict) -> None:
                _seeds.append(int(settings["env_seed"]))
                super().__init__(runfiles, settings)

        dmlab2d.Lab2d = Lab2d
    return _seeds


def digest(keys: Sequence[str], obs: dict[str, np.ndarray], reward: np.ndarray | None, ended: bool,
           world: np.ndarray | None) -> str:
    """A digest of one env's row: each observation key (players stacked), the rewards as float32
    (None: a reset, whose reward the batch does not show), whether the episode ended, WORLD.RGB."""
    h = hashlib.sha1()
    for key in keys:
        h.update(key.encode())
        h.update(np.ascontiguousarray(obs[key]).tobytes())
    if reward is not None:
        h.update(np.asarray(reward, dtype=np.float32).tobytes())
    h.update(b"end" if ended else b"on")
    if world is not None:
        h.update(np.ascontiguousarray(world).tobytes())
    return h.hexdigest()


def native_digest(keys: Sequence[str], timestep: Any, with_world: bool, reset: bool) -> str:
    """`digest` of a substrate's own timestep (from its reset or its step)."""
    players = timestep.observation
    obs = {key: np.stack([np.asarray(p[key]) for p in players]) for key in keys}
    return digest(keys, obs, None if reset else np.asarray(timestep.reward), bool(timestep.last()),
                  players[0][WORLD] if with_world else None)


def row_digest(keys: Sequence[str], r: Any, i: int, kind: str) -> str:
    """`digest` of env ``i`` of a StepResult. ``kind``: ``step`` (a step that did not end an episode:
    obs), ``final`` (one that did: final_obs, final_state) or ``reset`` (obs after a reset). The
    state is WORLD.RGB where the batch has it (state='env')."""
    final = kind == "final"
    obs = r.final_obs if final else r.obs
    state = r.final_state if final else r.state
    world = state[i] if isinstance(state, np.ndarray) else None
    ended = bool(r.terminated[i].any() or r.truncated[i].any()) and final
    return digest(keys, {k: obs[k][i] for k in keys}, None if kind == "reset" else r.reward[i], ended, world)


class Recorder(MeltingPotAdapter):
    """The family's adapter that logs, where it runs, a `native_digest` per timestep and the Lab2d
    seed of each world it built (every reset builds one)."""

    def __init__(self, name: str, with_world: bool = False, **kwargs: Any):
        super().__init__(name, **kwargs)
        self.with_world = with_world
        self.log: list[str] = []
        self.seeds: list[int] = []
        spy_lab2d_seeds()

    def reset(self, seed: int | None = None) -> dict[str, Any]:
        info = super().reset(seed)
        self.seeds.append(_seeds[-1])  # envs of a worker reset one after another: the last world is this one's
        self.log.append(native_digest(self._keys, self.timestep, self.with_world, reset=True))
        return info

    def step(self, actions: np.ndarray) -> dict[str, Any]:
        info = super().step(actions)
        self.log.append(native_digest(self._keys, self.timestep, self.with_world, reset=False))
        return info

    def get_native_attr(self, name: str) -> Any:
        if name in ("log", "seeds"):
            return list(getattr(self, name))
        return super().get_native_attr(name)


class RecorderFn:
    """A picklable env_fn making a `Recorder`."""

    def __init__(self, name: str, **kwargs: Any):
        self.name, self.kwargs = name, kwargs

    def __call__(self) -> Recorder:
        return Recorder(self.name, **self.kwargs)


def plain_loop_seeds(name: str, seed: int, resets: int, roles: Sequence[str] | None = None) -> list[int]:
    """The Lab2d seeds of a plain loop: ``random.seed(seed); substrate.build(...)``, then ``resets``
    more resets of that substrate (each rebuilds its world)."""
    substrate = import_substrate()
    config = substrate.get_config(name)
    seeds = spy_lab2d_seeds()
    first = len(seeds)
    saved = random.getstate()
    random.seed(seed)
    try:
        env = substrate.build(name, roles=roles or config.default_player_roles)
    finally:
        random.setstate(saved)
    try:
        for _ in range(resets + 1):
            env.reset()
    finally:
        env.close()
    return seeds[first:]


def actions_for(n_actions: int, n_agents: int, env: int, t: int) -> np.ndarray:
    """Env ``env``'s actions at its step ``t``: the same on every backend and in every order."""
    return np.random.default_rng([env, t]).integers(n_actions, size=n_agents)

"""Every PettingZoo parallel env the installed packages ship, against a plain loop.

mpe2 (every env, discrete and continuous actions), butterfly, sisl, magent2 and a
few multi-player Atari games: DummyVecEnv and SubprocVecEnv each equal a plain
loop over the native envs (tests/helpers/reference.py) with the same seeds and actions,
bit for bit: observations, state (``state="auto"``), rewards, terminated and
truncated, done, final observations and states, and the agent mask. Deaths are
exercised (knights_archers_zombies, battle with attack-biased actions, gather,
combined_arms) and asserted to happen.

The default run takes few steps per env, every env on DummyVecEnv and one of each library on
SubprocVecEnv; the other rows are ``matrix`` and the ``slow`` cases run a few hundred steps
(both in the long tier).
"""

from __future__ import annotations

import functools
import importlib
import os
import pkgutil
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

import marl_vec as mv
from tests.helpers.reference import pettingzoo_reference

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::RuntimeWarning",
                                        "ignore::UserWarning")


@dataclass
class Case:
    module: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    steps: int = 30
    num_envs: int = 2
    attack_from: int | None = None  # discrete actions >= this are drawn 80% of the time (attacks)
    deaths: bool = False  # some agent must leave env.agents before the episode's end
    state_fails: bool = False  # the env's state() must raise on some step (state="auto" gives zeros)
    marks: tuple = ()

    @property
    def id(self) -> str:
        extra = ",".join(f"{k}={v}" for k, v in self.kwargs.items() if k not in ("max_cycles", "auto_rom_install_path"))
        return self.module.rsplit(".", 1)[-1] + (f"[{extra}]" if extra else "")

    def env_fn(self):
        module = importlib.import_module(self.module)
        return functools.partial(module.parallel_env, **self.kwargs)


def mpe2_cases() -> list:
    try:
        import mpe2
    except ImportError:
        return []
    names = sorted(m.name for m in pkgutil.iter_modules(mpe2.__path__) if m.name.endswith(tuple(f"_v{i}" for i in range(10))))
    cases = []
    for name in names:
        for continuous in (False, True):
            # simple_speaker_listener and simple_world_comm with continuous actions: agents
            # have Box action spaces of different sizes, padded to the largest.
            cases.append(Case(f"mpe2.{name}", {"continuous_actions": continuous, "max_cycles": 12}, steps=30))
    return cases


def atari_cases() -> list:
    try:
        import ale_py
        import multi_agent_ale_py  # noqa: F401
    except ImportError:
        return []
    roms = os.path.dirname(ale_py.__file__)
    return [Case(f"pettingzoo.atari.{game}", {"auto_rom_install_path": roms, "max_cycles": 40}, steps=12)
            for game in ("pong_v3", "boxing_v2", "space_invaders_v2", "tennis_v3")]


CASES = [
    *mpe2_cases(),
    Case("pettingzoo.butterfly.cooperative_pong_v6", {"max_cycles": 20}, steps=25),
    Case("pettingzoo.butterfly.knights_archers_zombies_v11",
         {"spawn_delay": 2, "max_zombies": 20, "line_death": True, "max_cycles": 200}, steps=150, deaths=True),
    Case("pettingzoo.butterfly.pistonball_v6", {"n_pistons": 4, "continuous": False, "max_cycles": 10}, steps=12),
    Case("pettingzoo.butterfly.pistonball_v6", {"n_pistons": 4, "continuous": True, "max_cycles": 10}, steps=12),
    Case("pettingzoo.sisl.multiwalker_v9", {"n_walkers": 3, "max_cycles": 60}, steps=120, state_fails=True),
    Case("pettingzoo.sisl.pursuit_v5", {"max_cycles": 20}, steps=25),
    Case("magent2.environments.adversarial_pursuit_v4", {"map_size": 10, "max_cycles": 15}, steps=20),
    Case("magent2.environments.battle_v4", {"map_size": 15, "max_cycles": 60}, steps=60, attack_from=13),
    Case("magent2.environments.battlefield_v5", {"map_size": 46, "max_cycles": 15}, steps=20, attack_from=13),
    Case("magent2.environments.combined_arms_v6", {"map_size": 16, "max_cycles": 300}, steps=200, attack_from=9,
         deaths=True, state_fails=True),
    Case("magent2.environments.gather_v5", {"max_cycles": 15}, steps=20, attack_from=13, deaths=True),
    Case("magent2.environments.tiger_deer_v4", {"map_size": 10, "max_cycles": 300}, steps=110, state_fails=True),
    # magent2's optional observation features (tiled after the view; extra_features also in the state).
    Case("magent2.environments.battle_v4", {"map_size": 15, "max_cycles": 60, "minimap_mode": True,
                                            "extra_features": True}, steps=60, attack_from=13),
    Case("magent2.environments.adversarial_pursuit_v4", {"map_size": 10, "max_cycles": 15, "minimap_mode": True},
         steps=20),
    Case("magent2.environments.gather_v5", {"max_cycles": 15, "extra_features": True}, steps=20, attack_from=13),
    *atari_cases(),
]

SLOW_CASES = [
    Case("magent2.environments.battle_v4", {"map_size": 18, "max_cycles": 300}, steps=320, attack_from=13, deaths=True),
    Case("magent2.environments.gather_v5", {"max_cycles": 300}, steps=320, attack_from=13, deaths=True),
    Case("pettingzoo.sisl.multiwalker_v9", {"n_walkers": 3, "max_cycles": 500}, steps=300, num_envs=3),
    Case("pettingzoo.butterfly.knights_archers_zombies_v11", {"max_cycles": 900}, steps=300, num_envs=3, deaths=True),
    Case("magent2.environments.combined_arms_v6", {"max_cycles": 300}, steps=300, attack_from=9, deaths=True),
]


def params(cases, *extra_marks):
    return [pytest.param(c, id=c.id, marks=(*c.marks, *extra_marks)) for c in cases]


# The default selection runs every case on DummyVecEnv and one case of each library on
# SubprocVecEnv (the same comparison through worker processes); the other SubprocVecEnv rows
# and the slowest cases are `matrix` (the long tier, run by .ci/run's second pass). Slowest:
# gather_v5 (20-30 s a row on 2 busy cores, ~2 min with extra_features) and the multi-player
# Atari games beyond pong (an emulator per agent).
SUBPROC_FAST = {"simple_spread_v3[continuous_actions=False]", "simple_world_comm_v3[continuous_actions=True]",
                "knights_archers_zombies_v11[spawn_delay=2,max_zombies=20,line_death=True]",
                "multiwalker_v9[n_walkers=3]", "combined_arms_v6[map_size=16]", "pong_v3"}
MATRIX_ONLY = {"gather_v5", "gather_v5[extra_features=True]", "boxing_v2", "space_invaders_v2", "tennis_v3"}


def backend_params(cases) -> list:
    """(case, backend) rows, ids ``<case>-<backend>``; those outside the fast selection marked ``matrix``."""
    out = []
    for c in cases:
        for backend in ("dummy", "subproc"):
            fast = c.id not in MATRIX_ONLY and (backend == "dummy" or c.id in SUBPROC_FAST)
            out.append(pytest.param(c, backend, id=f"{c.id}-{backend}",
                                    marks=(*c.marks, *(() if fast else (pytest.mark.matrix,)))))
    return out


def actions_for(spec, case: Case) -> np.ndarray:
    rng = np.random.default_rng(7)
    E, A, T = case.num_envs, spec.n_agents, case.steps
    if not spec.discrete:
        # Per agent (padded Box actions have each agent's bounds, +-inf on its padding:
        # zeros there, which the adapter ignores).
        shape = (A, *spec.action_shape)
        low, high = np.broadcast_to(spec.action.low, shape), np.broadcast_to(spec.action.high, shape)
        low, high = np.where(np.isfinite(low), low, 0.0), np.where(np.isfinite(high), high, 0.0)
        return rng.uniform(low, high, size=(T, E, *shape)).astype(spec.action.dtype)
    # Padded actions are never available: each agent draws from its own native actions.
    n = np.array([spec.n_actions] * A)
    return _draw(rng, n, case, (T, E, A))


def _draw(rng, n: np.ndarray, case: Case, shape) -> np.ndarray:
    any_action = rng.integers(0, n, size=shape)
    if case.attack_from is None:
        return any_action
    attack = rng.integers(np.minimum(case.attack_from, n - 1), n, size=shape)
    return np.where(rng.random(shape) < 0.8, attack, any_action)


def native_actions(venv, case) -> np.ndarray:
    """Actions within each agent's own (unpadded) range."""
    spec = venv.spec
    if not spec.discrete:
        return actions_for(spec, case)
    first = venv.reset()
    n_native = first.avail_actions[0].sum(-1) if first.avail_actions is not None else None
    # Every agent alive at reset may take every native action: their count is the row sum.
    n = np.maximum(n_native, 1)
    return _draw(np.random.default_rng(7), n, case, (case.steps, case.num_envs, spec.n_agents))


def compare(case: Case, backend: str):
    fn = case.env_fn()
    fns = [fn] * case.num_envs
    seed = 3
    with mv.make_vec(fns, backend=backend, env_seed=seed) as venv:
        actions = native_actions(venv, case)
        first = venv.reset(seed=seed)
        results = [venv.step(a) for a in actions]
        spec = venv.spec
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = pettingzoo_reference(fns, seed, actions, spec.obs_shape, spec.state_shape)
    np.testing.assert_array_equal(first.obs, ref["first_obs"])
    np.testing.assert_array_equal(first.state, ref["first_state"])
    for t, r in enumerate(results):
        for name, key in (("obs", "obs"), ("state", "state"), ("reward", "reward"), ("terminated", "terminated"),
                          ("truncated", "truncated"), ("done", "done"), ("agent_mask", "mask")):
            np.testing.assert_array_equal(getattr(r, name), ref[key][t], err_msg=f"{name} at step {t}")
        for i in np.flatnonzero(r.done):
            np.testing.assert_array_equal(r.final_obs[i], ref["final_obs"][t][i], err_msg=f"final_obs at step {t}")
            np.testing.assert_array_equal(r.final_state[i], ref["final_state"][t][i], err_msg=f"final_state at {t}")
    return ref, results


@pytest.mark.parametrize(("case", "backend"), backend_params(CASES))
def test_equals_plain_loop(case, backend):
    ref, results = compare(case, backend)
    if case.deaths:
        died = any((~r.agent_mask & ~r.done[:, None]).any() for r in results)
        assert died, "some agent died before its episode's end"
    assert ref["respawns"] == 0, "no installed env respawns agents (tests/core/test_respawn.py covers respawns)"
    failed = sum(bool(info.get("state_unavailable")) for r in results for info in r.infos)
    if case.state_fails:
        assert failed, "state() raised on some step: a plain loop calling it would crash here"


@pytest.mark.slow
@pytest.mark.parametrize("case", params(SLOW_CASES))
def test_long_runs_equal_plain_loop(case):
    ref, results = compare(case, "dummy")
    assert ref["done"].any() or case.steps < 300
    if case.deaths:
        assert any((~r.agent_mask & ~r.done[:, None]).any() for r in results)

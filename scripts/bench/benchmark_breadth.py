#!/usr/bin/env python
"""Many-agent PettingZoo envs: DummyVecEnv and SubprocVecEnv against a plain loop.

    python scripts/bench/benchmark_breadth.py                # a few minutes
    python scripts/bench/benchmark_breadth.py --seconds 4    # steadier
    python scripts/bench/benchmark.py --suite breadth        # the same, from the main benchmark

Envs (their default settings, 4 copies): MAgent2 battle, gather, battlefield,
adversarial_pursuit, tiger_deer and combined_arms, pistonball, cooperative_pong,
knights_archers_zombies, multiwalker, pursuit, waterworld; and the gymnasium
Tuple-agent families: Level-Based Foraging (8x8-2p-2f-coop, 15x15-4p-3f) and the
Multi-Robot Warehouse (tiny-2ag, small-4ag), whose plain loop steps the env with a
list of actions and resets it at ``done`` (they have no ``state()``: the rows are
Dummy/plain with the observations concatenated as the batch's state).

The plain loop does the work a batch does: builds each env's action dict from
an array, steps it, calls ``state()`` (all of these envs have a state space, so
``state="auto"`` calls it; a ``state()`` that raises gives zeros, as in the
batch) and resets finished envs. Each row is measured by process CPU time
(``time.process_time``), so load from other programs does not count:

- ``Dummy/plain``: DummyVecEnv (defaults: copies returned, actions validated)
  against the plain loop with ``state()``;
- ``none/plain-nostate``: DummyVecEnv ``state="none"`` against the plain loop
  without ``state()``;
- ``Subproc/plain (wall)``: SubprocVecEnv with 2 workers against the plain loop
  with ``state()``, by wall time (only meaningful on an idle machine; shown
  where a plain env step costs more than 1 ms).

Actions: uniform over each agent's native actions (Box: over the box), the same
for every candidate; dead agents' actions are ignored by both.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))

import marl_vec as mv  # noqa: E402
from benchmark import Candidate, candidate, measure, plain_gym_loop  # noqa: E402

ENVS: list[tuple[str, str, dict[str, Any]]] = [
    ("battle", "magent2.environments.battle_v4", {}),
    ("gather", "magent2.environments.gather_v5", {}),
    ("battlefield", "magent2.environments.battlefield_v5", {}),
    ("adversarial_pursuit", "magent2.environments.adversarial_pursuit_v4", {}),
    ("tiger_deer", "magent2.environments.tiger_deer_v4", {}),
    ("combined_arms", "magent2.environments.combined_arms_v6", {}),
    ("pistonball", "pettingzoo.butterfly.pistonball_v6", {}),
    ("cooperative_pong", "pettingzoo.butterfly.cooperative_pong_v6", {}),
    ("knights_archers_zombies", "pettingzoo.butterfly.knights_archers_zombies_v11", {}),
    ("multiwalker", "pettingzoo.sisl.multiwalker_v9", {}),
    ("pursuit", "pettingzoo.sisl.pursuit_v5", {}),
    ("waterworld", "pettingzoo.sisl.waterworld_v4", {}),
]
# Gymnasium envs with a Tuple of agents (families lbf, rware): label, family, id, kwargs.
TUPLE_ENVS: list[tuple[str, str, str, dict[str, Any]]] = [
    ("lbf 8x8-2p-2f-coop", "lbf", "Foraging-8x8-2p-2f-coop-v3", {}),
    ("lbf 15x15-4p-3f", "lbf", "Foraging-15x15-4p-3f-v3", {}),
    ("rware tiny-2ag", "rware", "rware-tiny-2ag-v2", {}),
    ("rware small-4ag", "rware", "rware-small-4ag-v2", {}),
]
NUM_ENVS = 4


def plain_loop(name: str, make_env: Callable, n: int, actions: np.ndarray, call_state: bool) -> Candidate:
    """What a user writes without a vector env, with ``state()`` where asked."""

    def build():
        envs = [make_env() for _ in range(n)]
        for i, env in enumerate(envs):
            env.reset(seed=i)
        agents = list(envs[0].possible_agents)
        index = {a: j for j, a in enumerate(agents)}
        discrete = actions.dtype.kind in "iu"
        shape = envs[0].state_space.shape if call_state else None

        def step_batch(a: np.ndarray) -> None:
            for i, env in enumerate(envs):
                row = a[i].tolist() if discrete else a[i]
                env.step({agent: row[index[agent]] for agent in env.agents})
                if call_state:
                    try:
                        env.state()
                    except Exception:  # noqa: BLE001 - as state="auto": zeros where it fails
                        np.zeros(shape)
                if not env.agents:
                    env.reset()
        return step_batch, lambda: [e.close() for e in envs]

    return candidate(name, build, actions)


def venv_candidate(name: str, make_venv: Callable[[], mv.VecEnv], actions: np.ndarray) -> Candidate:
    def build():
        venv = make_venv()
        venv.reset()
        return venv.step, venv.close

    return candidate(name, build, actions)


def random_actions(make_env: Callable, n: int) -> np.ndarray:
    env = make_env()
    agents = env.possible_agents
    rng = np.random.default_rng(0)
    space = env.action_space(agents[0])
    if hasattr(space, "n"):
        sizes = np.array([env.action_space(a).n for a in agents])
        out = rng.integers(0, sizes, size=(64, n, len(agents)))
    else:
        out = rng.uniform(space.low, space.high, size=(64, n, len(agents), *space.shape)).astype(space.dtype)
    env.close()
    return out


def bench_env(label: str, module: str, kwargs: dict, seconds: float) -> list[str]:
    make_env = functools.partial(importlib.import_module(module).parallel_env, **kwargs)
    actions = random_actions(make_env, NUM_ENVS)
    fns = [make_env] * NUM_ENVS
    cpu = [
        plain_loop("plain loop + state()", make_env, NUM_ENVS, actions, call_state=True),
        venv_candidate("DummyVecEnv", lambda: mv.DummyVecEnv(fns), actions),
        plain_loop("plain loop", make_env, NUM_ENVS, actions, call_state=False),
        venv_candidate("DummyVecEnv state=none", lambda: mv.DummyVecEnv(fns, state="none"), actions),
    ]
    measure(cpu, NUM_ENVS, seconds, clock=time.process_time)
    rate = {c.name: c.best for c in cpu}
    step_ms = 1000 / rate["plain loop + state()"]
    line = (f"{label:<24} {step_ms:7.2f} ms  Dummy/plain {rate['DummyVecEnv'] / rate['plain loop + state()']:5.2f}x"
            f"  none/plain-nostate {rate['DummyVecEnv state=none'] / rate['plain loop']:5.2f}x")
    if step_ms > 1.0:
        wall = [
            plain_loop("plain loop + state()", make_env, NUM_ENVS, actions, call_state=True),
            venv_candidate("SubprocVecEnv", lambda: mv.SubprocVecEnv(fns, num_workers=2), actions),
        ]
        measure(wall, NUM_ENVS, seconds, clock=time.perf_counter)
        line += f"  Subproc/plain (wall) {wall[1].best / wall[0].best:5.2f}x"
    print(line, flush=True)
    return [line]


def bench_tuple_env(label: str, family: str, env_id: str, kwargs: dict, seconds: float) -> list[str]:
    import gymnasium as gym

    from marl_vec.envs.registry import make_env_fn
    from marl_vec.envs.pettingzoo.tuple_agents import LBF, RWARE

    importlib.import_module({"lbf": LBF, "rware": RWARE}[family].module)  # registers the family's ids
    fn = make_env_fn(family, env_id, kwargs)
    make_env = functools.partial(gym.make, env_id, disable_env_checker=True, **kwargs)
    probe = make_env()
    n_agents, n_actions = len(probe.action_space.spaces), int(probe.action_space.spaces[0].n)
    probe.close()
    actions = np.random.default_rng(0).integers(0, n_actions, size=(64, NUM_ENVS, n_agents))
    fns = [fn] * NUM_ENVS
    cpu = [
        # The env takes each env's row of agent actions (an (A,) array) and ends at `done`: the gym loop.
        plain_gym_loop(make_env, NUM_ENVS, actions[:, :, None]),
        venv_candidate("DummyVecEnv", lambda: mv.DummyVecEnv(fns), actions),
        venv_candidate("DummyVecEnv state=none", lambda: mv.DummyVecEnv(fns, state="none"), actions),
    ]
    return report(label, cpu, seconds)


def report(label: str, cpu: list[Candidate], seconds: float) -> list[str]:
    """Measure ``cpu`` (a plain loop, DummyVecEnv, DummyVecEnv state=none) by CPU time; print a row."""
    measure(cpu, NUM_ENVS, seconds, clock=time.process_time)
    plain, dummy, nostate = (c.best for c in cpu)
    line = (f"{label:<24} {1000 / plain:7.2f} ms  Dummy/plain {dummy / plain:5.2f}x"
            f"  none/plain-nostate {nostate / plain:5.2f}x")
    print(line, flush=True)
    return [line]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=1.5, help="time per candidate per case (split over 5 rounds)")
    parser.add_argument("envs", nargs="*", help="labels of envs to run (default: all)")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    print(f"breadth suite: {NUM_ENVS} envs each; load average {os.getloadavg()[0]:.2f} "
          f"on {os.cpu_count()} cores (ratios by CPU time; the wall-clock column needs an idle machine)", flush=True)
    print(f"{'env':<24} {'plain step':>10}", flush=True)
    for label, module, kwargs in ENVS:
        if args.envs and label not in args.envs:
            continue
        try:
            bench_env(label, module, kwargs, args.seconds)
        except ImportError as exc:
            print(f"{label:<24} skipped: {exc}", flush=True)
    for label, family, env_id, kwargs in TUPLE_ENVS:
        if args.envs and label not in args.envs:
            continue
        try:
            bench_tuple_env(label, family, env_id, kwargs, args.seconds)
        except ImportError as exc:
            print(f"{label:<24} skipped: {exc}", flush=True)
    print(f"load average at the end {os.getloadavg()[0]:.2f}", flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python
"""Throughput of marl_vec against a plain Python loop over the same envs, as ratios in one run.

    python scripts/bench/benchmark.py                 # the core suite: DummyVecEnv
    python scripts/bench/benchmark.py --suite all     # every suite whose dependencies are installed
    python scripts/bench/benchmark.py --seconds 2     # longer, steadier measurements
    python scripts/bench/benchmark.py --clock cpu --rounds 21 --seconds 8 --case "CartPole-v1 x 64"   # one case

The machines are shared and noisy, so each case runs its candidates in turns
(round-robin, several rounds) and reports the median over the rounds and the
spread of the per-round ratios; only ratios within one run are meaningful. Other suites live beside this file as
``benchmark_<suite>.py`` with a ``main(argv)``.

Core suite: CartPole with 1, 8 and 64 envs (plain loop, gymnasium SyncVectorEnv,
DummyVecEnv) and mpe2 simple_spread with 1, 8 and 32 envs (plain loop, DummyVecEnv).
"DummyVecEnv" uses the defaults (copies returned, actions validated); "lean" is
``copy=False, validate=False``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

import marl_vec as mv  # noqa: E402

SUITES = ("core", "subproc", "atari", "football", "ray", "sc2", "breadth")
CLOCK = time.perf_counter  # --clock cpu: time.process_time, for the in-process core suite


# -- measuring -------------------------------------------------------------------

class Candidate:
    """``setup()`` builds it and returns ``run(steps)``; ``teardown`` frees it."""

    def __init__(self, name: str, setup: Callable[[], Callable[[int], None]]):
        self.name, self.setup = name, setup
        self.teardown: Callable[[], object] | None = None
        self.best = 0.0
        self.rates: list[float] = []  # env-steps/s of each round


def measure(cases: list[Candidate], num_envs: int, seconds: float, rounds: int = 5,
            clock: Callable[[], float] = time.perf_counter) -> None:
    """Round-robin ``rounds`` times; each candidate keeps each round's env-steps/s
    (``rates``) and its best.

    ``clock``: wall time by default. Candidates that run wholly in this process
    may pass ``time.process_time``: CPU time is not inflated by other programs
    taking the cores, which on a shared machine is most of the noise.
    """
    runners = [(c, c.setup()) for c in cases]
    for c, run in runners:
        run(5)  # warm-up: first resets, caches
    for r in range(rounds):
        # Every candidate once per round, in reverse order every other round, so that a
        # load that drifts during a round favours none.
        for c, run in runners if r % 2 == 0 else runners[::-1]:
            steps, start = 0, clock()
            while True:
                run(20)
                steps += 20
                elapsed = clock() - start
                if elapsed >= seconds / rounds:
                    break
            c.rates.append(steps * num_envs / elapsed)
            c.best = max(c.best, c.rates[-1])
    for c, _ in runners:
        if c.teardown:
            c.teardown()


def report(title: str, cases: list[Candidate], baseline: str = "plain loop") -> list[str]:
    """Each candidate's median env-steps/s over the rounds, and its ratio to the baseline
    within each round (the load a round saw is shared): the median and the spread."""
    base = next(c for c in cases if c.name == baseline)
    lines = [f"{title}   (load {os.getloadavg()[0]:.2f}; ratio: median of {len(base.rates)} rounds [min-max])"]
    for c in cases:
        ratios = np.array(c.rates) / np.array(base.rates)
        lines.append(f"  {c.name:<28} {np.median(c.rates):>12,.0f} env-steps/s   {np.median(ratios):5.3f}x "
                     f"[{ratios.min():.2f}-{ratios.max():.2f}]")
    print("\n".join(lines), flush=True)
    return lines


# -- candidates ----------------------------------------------------------------

def candidate(name: str, build: Callable[[], tuple[Callable[[np.ndarray], None], Callable[[], None]]],
              actions: np.ndarray) -> Candidate:
    """``build()`` returns (step one batch with these actions, close); actions cycle through ``actions``."""
    def setup() -> Callable[[int], None]:
        step_batch, close = build()
        cand.teardown = close
        t = [0]

        def run(steps: int) -> None:
            for _ in range(steps):
                step_batch(actions[t[0] % len(actions)])
                t[0] += 1
        return run

    cand = Candidate(name, setup)
    return cand


def plain_gym_loop(make_env: Callable, n: int, actions: np.ndarray) -> Candidate:
    """What a user writes without a vector env: step each env, reset it when it ends."""
    def build():
        envs = [make_env() for _ in range(n)]
        for i, env in enumerate(envs):
            env.reset(seed=i)

        def step_batch(a: np.ndarray) -> None:
            for i, env in enumerate(envs):
                _, _, term, trunc, _ = env.step(a[i, 0])
                if term or trunc:
                    env.reset()
        return step_batch, lambda: [e.close() for e in envs]

    return candidate("plain loop", build, actions)


def plain_parallel_loop(make_env: Callable, n: int, actions: np.ndarray) -> Candidate:
    """The same for PettingZoo ParallelEnvs."""
    def build():
        envs = [make_env() for _ in range(n)]
        for i, env in enumerate(envs):
            env.reset(seed=i)
        agents = list(envs[0].possible_agents)

        def step_batch(a: np.ndarray) -> None:
            for i, env in enumerate(envs):
                env.step({agent: int(a[i, j]) for j, agent in enumerate(agents) if agent in env.agents})
                if not env.agents:
                    env.reset()
        return step_batch, lambda: [e.close() for e in envs]

    return candidate("plain loop", build, actions)


def gym_vector(name: str, make_vector_env: Callable, actions: np.ndarray) -> Candidate:
    """A gymnasium VectorEnv (SyncVectorEnv, AsyncVectorEnv); drops the agent axis of the actions."""
    def build():
        venv = make_vector_env()
        venv.reset(seed=0)
        return (lambda a: venv.step(a[:, 0])), venv.close

    return candidate(name, build, actions)


def gym_sync(make_env: Callable, n: int, actions: np.ndarray) -> Candidate:
    import gymnasium as gym

    return gym_vector("gymnasium SyncVectorEnv", lambda: gym.vector.SyncVectorEnv([make_env] * n), actions)


def marl_vec_candidate(name: str, make_venv: Callable[[], mv.VecEnv], actions: np.ndarray) -> Candidate:
    def build():
        venv = make_venv()
        venv.reset()
        return venv.step, venv.close

    return candidate(name, build, actions)


# -- the core suite ------------------------------------------------------------

def core(seconds: float, rounds: int = 5, case: str | None = None) -> list[str]:
    """``case``: run only the cases whose title contains it (e.g. ``"CartPole-v1 x 64"``)."""
    import functools

    import gymnasium as gym
    from mpe2 import simple_spread_v3

    lines: list[str] = []
    rng = np.random.default_rng(0)
    cartpole = functools.partial(gym.make, "CartPole-v1")
    for n in (1, 8, 64):
        actions = rng.integers(0, 2, size=(256, n, 1))
        if case is not None and case not in f"CartPole-v1 x {n}":
            continue
        cases = [
            plain_gym_loop(cartpole, n, actions),
            gym_sync(cartpole, n, actions),
            marl_vec_candidate("DummyVecEnv", lambda n=n: mv.DummyVecEnv([cartpole] * n), actions),
            marl_vec_candidate("DummyVecEnv lean", lambda n=n: mv.DummyVecEnv([cartpole] * n, copy=False, validate=False), actions),
        ]
        measure(cases, n, seconds, rounds, clock=CLOCK)
        lines += report(f"CartPole-v1 x {n}", cases)
    spread = functools.partial(simple_spread_v3.parallel_env, N=3, max_cycles=25, continuous_actions=False)
    for n in (1, 8, 32):
        actions = rng.integers(1, 5, size=(256, n, 3))
        if case is not None and case not in f"mpe2 simple_spread x {n}":
            continue
        cases = [
            plain_parallel_loop(spread, n, actions),
            marl_vec_candidate("DummyVecEnv", lambda n=n: mv.DummyVecEnv([spread] * n), actions),
            marl_vec_candidate("DummyVecEnv lean", lambda n=n: mv.DummyVecEnv([spread] * n, copy=False, validate=False), actions),
        ]
        measure(cases, n, seconds, rounds, clock=CLOCK)
        lines += report(f"mpe2 simple_spread x {n}", cases)
    return lines


def run_suite(name: str, seconds: float, rounds: int = 5, case: str | None = None) -> None:
    if name == "core":
        core(seconds, rounds, case)
        return
    path = HERE / f"benchmark_{name}.py"
    if not path.exists():
        print(f"[{name}] no {path.name}; skipped", flush=True)
        return
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}", path)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    try:
        module.main(["--seconds", str(seconds)])
    except mv.envs.MissingExtraError as exc:
        print(f"[{name}] skipped: {exc}", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", choices=(*SUITES, "all"), default="core")
    parser.add_argument("--seconds", type=float, default=1.5, help="time per candidate per case (split over the rounds)")
    parser.add_argument("--rounds", type=int, default=5, help="core suite: interleaved rounds per case")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="core suite only: cpu measures this process's CPU time, steadier on a busy machine")
    parser.add_argument("--case", default=None,
                        help='core suite only: the cases whose title contains this, e.g. "CartPole-v1 x 64"')
    args = parser.parse_args(argv)
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    for name in SUITES if args.suite == "all" else (args.suite,):
        run_suite(name, args.seconds, args.rounds, args.case)


if __name__ == "__main__":
    main()

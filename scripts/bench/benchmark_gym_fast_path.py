#!/usr/bin/env python
"""CartPole x 64 in one process: the gym fast path (below gymnasium's check-only wrappers) on and off.

    python scripts/bench/benchmark_gym_fast_path.py --rounds 24          # interleaved A/B, thread CPU time
    valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \\
        python scripts/bench/benchmark_gym_fast_path.py --only default --steps 350   # machine instructions

The A/B runs the plain loop, DummyVecEnv and its lean form (``copy=False,
validate=False``), each with the fast path and with it switched off
(``marl_vec.envs.gym.fast_chain`` returning None: every chain stepped whole, as before
it), in blocks of 300 batch steps, in turns, the order reversed every other round. It
prints each candidate's median CPU time per env-step and the median [min-max] of its
per-round ratio to the plain loop, and in how many rounds that ratio reached 0.95.

``--only NAME --steps N`` runs one candidate for N batch steps after the setup and
prints nothing: run it under valgrind for N = 50 and N = 350 and divide the difference
of the instruction counts ("I refs") by 300 x 64 for instructions per env-step, a
figure that other jobs on a shared machine do not move (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import gymnasium as gym  # noqa: E402

import marl_vec as mv  # noqa: E402
from marl_vec.envs.gym import group_stepper as gym_stepper  # noqa: E402

N = 64
ACTIONS = np.random.default_rng(0).integers(0, 2, size=(256, N, 1))
CARTPOLE = functools.partial(gym.make, "CartPole-v1")


def plain_loop() -> Callable[[int], None]:
    envs = [CARTPOLE() for _ in range(N)]
    for i, env in enumerate(envs):
        env.reset(seed=i)

    def run(steps: int) -> None:
        for s in range(steps):
            a = ACTIONS[s % 256]
            for i, env in enumerate(envs):
                _, _, terminated, truncated, _ = env.step(a[i, 0])
                if terminated or truncated:
                    env.reset()
    return run


def dummy(lean: bool, fast: bool) -> Callable[[int], None]:
    real = gym_stepper.fast_chain
    if not fast:  # the stepper asks when it is built
        gym_stepper.fast_chain = lambda env: None
    try:
        venv = mv.DummyVecEnv([CARTPOLE] * N, **(dict(copy=False, validate=False) if lean else {}))
    finally:
        gym_stepper.fast_chain = real
    venv.reset()

    def run(steps: int) -> None:
        step = venv.step
        for s in range(steps):
            step(ACTIONS[s % 256])
    return run


CANDIDATES: dict[str, Callable[[], Callable[[int], None]]] = {
    "plain loop": plain_loop,
    "default": functools.partial(dummy, False, True),
    "lean": functools.partial(dummy, True, True),
    "default (fast path off)": functools.partial(dummy, False, False),
    "lean (fast path off)": functools.partial(dummy, True, False),
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--only", choices=list(CANDIDATES), help="run one candidate (for valgrind), print nothing")
    parser.add_argument("--steps", type=int, default=300, help="batch steps per candidate per round (--only: in all)")
    args = parser.parse_args(argv)
    if args.only:
        run = CANDIDATES[args.only]()
        run(5)
        run(args.steps)
        return
    runs = {name: make() for name, make in CANDIDATES.items()}
    for run in runs.values():
        run(10)
    times: dict[str, list[float]] = {name: [] for name in runs}
    load = os.getloadavg()[0]
    for r in range(args.rounds):
        for name, run in runs.items() if r % 2 == 0 else list(runs.items())[::-1]:
            start = time.thread_time_ns()
            run(args.steps)
            times[name].append((time.thread_time_ns() - start) / (args.steps * N) / 1e3)
    print(f"CartPole-v1 x {N}, thread CPU time, {args.rounds} rounds, load {load:.2f} -> {os.getloadavg()[0]:.2f}")
    base = np.array(times["plain loop"])
    for name, values in times.items():
        ratios = base / np.array(values)
        print(f"  {name:<26} {np.median(values):6.3f} us/env-step  {np.median(ratios):.3f}x "
              f"[{ratios.min():.2f}-{ratios.max():.2f}]  >= 0.95 in {np.mean(ratios >= 0.95):.0%} of rounds")


if __name__ == "__main__":
    main()

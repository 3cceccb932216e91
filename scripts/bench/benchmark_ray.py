#!/usr/bin/env python
"""RayVecEnv against SubprocVecEnv, DummyVecEnv and a plain loop, as ratios in one run.

    python scripts/bench/benchmark_ray.py               # about a minute, most of it Ray's start
    python scripts/bench/benchmark_ray.py --seconds 3   # steadier
    python scripts/bench/benchmark.py --suite ray       # the same, from the main benchmark

Cases, on a local cluster of this machine (``ray.init(num_cpus=4)``, logical CPUs so
that both RayVecEnv candidates can be placed at once):

- mpe2 simple_spread x 32: plain loop, DummyVecEnv, SubprocVecEnv (2 workers,
  skipped with a note when marl_vec.vec.subproc.vec_env is missing), RayVecEnv (2 actors)
  with each transport: ``auto`` (actors on this machine step over shared memory,
  what a one-machine run uses) and ``ray`` (every step through Ray calls, what
  actors on other machines use). The goal: RayVecEnv >= 0.8x SubprocVecEnv.
- the per-step cost of reaching the actors: simple_spread x 2 as one env per actor,
  against DummyVecEnv x 2; the difference per step is what a round trip costs.

Candidates run in turns (round-robin, best round kept, see ``benchmark.measure``)
because the machine is shared; only ratios within one run mean something.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))

import marl_vec as mv  # noqa: E402
from benchmark import Candidate, marl_vec_candidate, measure, plain_parallel_loop, report  # noqa: E402
from marl_vec.envs import make_env_fn  # noqa: E402
from marl_vec.envs.registry import require  # noqa: E402
from marl_vec.vec.ray.vec_env import TRANSPORTS  # noqa: E402


def main(argv: list[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=1.5, help="time per candidate per case (split over 5 rounds)")
    parser.add_argument("--num-envs", type=int, default=32)
    args = parser.parse_args(argv)
    ray = require("ray", "ray", "the Ray benchmark")
    from mpe2 import simple_spread_v3

    # One session for every candidate: starting Ray (~5 s) is not a per-step cost.
    temp_dir = tempfile.mkdtemp(prefix="mvray", dir="/tmp")
    # Logical CPUs, for placement only: both RayVecEnvs (2 actors of 1 CPU each) live at once.
    ray.init(num_cpus=4, include_dashboard=False, _temp_dir=temp_dir, log_to_driver=False)
    lines: list[str] = []
    try:
        spread = functools.partial(simple_spread_v3.parallel_env, N=3, max_cycles=25, continuous_actions=False)
        # The picklable env_fn the config path uses, for the process and Ray backends.
        spread_fn = make_env_fn("pettingzoo", "mpe2.simple_spread_v3", {"N": 3, "max_cycles": 25, "continuous_actions": False})
        rng = np.random.default_rng(0)

        n = args.num_envs
        actions = rng.integers(1, 5, size=(256, n, 3))
        cases: list[Candidate] = [
            plain_parallel_loop(spread, n, actions),
            marl_vec_candidate("DummyVecEnv", lambda: mv.DummyVecEnv([spread_fn] * n), actions),
        ]
        if importlib.util.find_spec("marl_vec.vec.subproc.vec_env") is not None:
            cases.append(marl_vec_candidate("SubprocVecEnv 2 workers",
                                            lambda: mv.SubprocVecEnv([spread_fn] * n, num_workers=2), actions))
        else:
            print("[ray] marl_vec.vec.subproc.vec_env is not available: SubprocVecEnv skipped", flush=True)
        for transport in TRANSPORTS:
            cases.append(marl_vec_candidate(
                f"RayVecEnv 2 actors, {transport}",
                lambda transport=transport: mv.RayVecEnv([spread_fn] * n, num_workers=2, transport=transport),
                actions,
            ))
        measure(cases, n, args.seconds)
        lines += report(f"mpe2 simple_spread x {n}", cases)
        by_name = {c.name: c.best for c in cases}
        if "SubprocVecEnv 2 workers" in by_name:
            for transport in TRANSPORTS:
                ratio = by_name[f"RayVecEnv 2 actors, {transport}"] / by_name["SubprocVecEnv 2 workers"]
                line = f"  RayVecEnv ({transport}) / SubprocVecEnv: {ratio:.2f}x (goal >= 0.80x)"
                print(line, flush=True)
                lines.append(line)

        actions2 = rng.integers(1, 5, size=(256, 2, 3))
        small = [marl_vec_candidate("DummyVecEnv", lambda: mv.DummyVecEnv([spread_fn] * 2), actions2)]
        for transport in TRANSPORTS:
            small.append(marl_vec_candidate(
                f"RayVecEnv 2 actors, {transport}",
                lambda transport=transport: mv.RayVecEnv([spread_fn] * 2, num_workers=2, transport=transport),
                actions2,
            ))
        measure(small, 2, args.seconds)
        lines += report("mpe2 simple_spread x 2, one env per actor", small, baseline="DummyVecEnv")
        dummy_ms = 2e3 / small[0].best
        for transport, c in zip(TRANSPORTS, small[1:]):
            ray_ms = 2e3 / c.best
            # Two actors step in parallel: the round trip is what exceeds one env's step.
            line = (f"  per step: DummyVecEnv {dummy_ms:.3f} ms, RayVecEnv ({transport}) {ray_ms:.3f} ms; "
                    f"round trip ~{ray_ms - dummy_ms / 2:.3f} ms")
            print(line, flush=True)
            lines.append(line)
    finally:
        ray.shutdown()
        shutil.rmtree(temp_dir, ignore_errors=True)
    return lines


if __name__ == "__main__":
    main()

"""Melting Pot: SubprocVecEnv against a plain loop, env-steps/s, their ratio, the load; and PSS against num_envs.

- plain: ``--num-envs`` substrates from ``substrate.build(name, roles=default_player_roles)``
  stepped one after another in this process with the same random actions, reset at each
  episode's end: what a trainer without marl_vec writes (it reads the timesteps, copies nothing);
- subproc: ``SubprocVecEnv`` over the ``meltingpot`` family with ``--workers`` processes
  (each builds its substrates itself; results in shared memory), with ``copy=True`` (the
  default: every result a fresh copy, 1.3 MB per step for commons_harvest__open x8) and
  ``copy=False`` (views into the shared buffers).

Rounds are interleaved (``--rounds`` of ``--seconds`` each, after a warm-up); the median
env-steps/s of each, each round's values, the ratio's spread and the load average before
and after are printed. Then the memory of the whole process tree (PSS, from /proc) of a
SubprocVecEnv of ``--workers`` processes for each of ``--pss-envs``: each Lab2d instance
holds its own world.

    python scripts/bench/benchmark_meltingpot.py                 # commons_harvest__open and clean_up, x8, 2 workers
    python scripts/bench/benchmark_meltingpot.py --subs clean_up --num-envs 16 --rounds 5
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from typing import Callable

import numpy as np

import marl_vec as mv
from marl_vec.envs.meltingpot import import_substrate
from marl_vec.envs.registry import make_env_fn
from marl_vec.tools.tree_usage import cpu_seconds, memory, tree_pids


def action_pool(n_actions: int, n_envs: int, n_agents: int, pool: int = 16) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.integers(n_actions, size=(n_envs, n_agents)) for _ in range(pool)]


def plain(name: str, n_envs: int, pool: list[np.ndarray]) -> tuple[Callable[[int], None], Callable[[], None]]:
    substrate = import_substrate()
    roles = substrate.get_config(name).default_player_roles
    envs = []
    for i in range(n_envs):
        random.seed(i)
        envs.append(substrate.build(name, roles=roles))
        envs[-1].reset()

    def run(n: int) -> None:
        for t in range(n):
            batch = pool[t % len(pool)]
            for i, env in enumerate(envs):
                timestep = env.step(batch[i].tolist())
                if timestep.last():
                    env.reset()

    return run, lambda: [env.close() for env in envs]


def subproc(name: str, n_envs: int, workers: int,
            copy: bool = True) -> tuple[Callable[[int], None], Callable[[], None], list]:
    venv = mv.SubprocVecEnv([make_env_fn("meltingpot", name)] * n_envs, num_workers=workers, env_seed=0, copy=copy)
    venv.reset()
    pool = action_pool(venv.spec.n_actions, n_envs, venv.spec.n_agents)

    def run(n: int) -> None:
        for t in range(n):
            r = venv.step(pool[t % len(pool)])
            r.obs, r.reward, r.done  # noqa: B018 (read, as a trainer would)

    return run, venv.close, pool


def rate(run: Callable[[int], None], n_envs: int, seconds: float) -> tuple[float, float]:
    """Env-steps/s of ``run``, and the CPU time of the whole process tree per env-step (µs):
    the second does not depend on how busy the machine is."""
    pids = tree_pids()
    steps, cpu, started = 0, cpu_seconds(pids), time.perf_counter()
    while time.perf_counter() - started < seconds:
        run(10)
        steps += 10
    wall, cpu = time.perf_counter() - started, cpu_seconds(pids) - cpu
    return steps * n_envs / wall, cpu / (steps * n_envs) * 1e6


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def speed(name: str, args: argparse.Namespace) -> None:
    load_before = load()
    run_sub, close_sub, pool = subproc(name, args.num_envs, args.workers)
    run_view, close_view, _ = subproc(name, args.num_envs, args.workers, copy=False)
    run_plain, close_plain = plain(name, args.num_envs, pool)
    run_sub(5), run_view(5), run_plain(5)  # warm-up
    rows, cpus = [], []
    for _ in range(args.rounds):
        measured = [rate(run, args.num_envs, args.seconds) for run in (run_plain, run_sub, run_view)]
        rows.append(tuple(m[0] for m in measured))
        cpus.append(tuple(m[1] for m in measured))
    close_sub(), close_view(), close_plain()
    print(f"{name} x{args.num_envs}, {args.workers} workers, {args.rounds} rounds of {args.seconds:g} s, "
          f"{os.cpu_count()} CPUs")
    for k, (p, s, v) in enumerate(rows):
        print(f"  round {k}: plain {p:7.0f}   subproc {s:7.0f} ({s / p:.2f}x)   subproc copy=False {v:7.0f} "
              f"({v / p:.2f}x) env-steps/s")
    med = [statistics.median(r[c] for r in rows) for c in range(3)]
    cpu = [statistics.median(r[c] for r in cpus) for c in range(3)]
    for label, c in (("subproc", 1), ("subproc copy=False", 2)):
        ratios = [r[c] / r[0] for r in rows]
        print(f"  median {label}: {med[c]:.0f} env-steps/s against plain {med[0]:.0f}: {med[c] / med[0]:.2f}x "
              f"(rounds {min(ratios):.2f}-{max(ratios):.2f}x)")
    # On W idle cores the workers could at best run W times the plain loop's rate, less the extra CPU they spend.
    print(f"  CPU time of the process tree per env-step: plain {cpu[0]:.0f} us, subproc {cpu[1]:.0f} us "
          f"({cpu[1] / cpu[0]:.2f}x), copy=False {cpu[2]:.0f} us ({cpu[2] / cpu[0]:.2f}x); on {args.workers} idle "
          f"cores at best {args.workers * cpu[0] / cpu[1]:.2f}x and {args.workers * cpu[0] / cpu[2]:.2f}x")
    print(f"  load average before {load_before}, after {load()}")


def pss(name: str, args: argparse.Namespace) -> None:
    base, kind = memory(tree_pids())
    print(f"{name}: {kind} of the process tree, SubprocVecEnv of {args.workers} workers (this process alone: "
          f"{base / 2**20:.0f} MB)")
    for n in args.pss_envs:
        with mv.SubprocVecEnv([make_env_fn("meltingpot", name)] * n, num_workers=args.workers, env_seed=0) as venv:
            venv.reset()
            pool = action_pool(venv.spec.n_actions, n, venv.spec.n_agents)
            for t in range(20):
                venv.step(pool[t % len(pool)])
            size, _ = memory(tree_pids())
            print(f"  num_envs {n:3d}: {size / 2**20:6.0f} MB ({(size - base) / 2**20 / n:5.1f} MB per env "
                  f"beyond this process)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subs", nargs="+", default=["commons_harvest__open", "clean_up"])
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--pss-envs", type=int, nargs="*", default=[2, 8, 16])
    args = parser.parse_args()
    started = time.perf_counter()
    for name in args.subs:
        speed(name, args)
    if args.pss_envs:
        pss(args.subs[0], args)
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()

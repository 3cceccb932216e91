#!/usr/bin/env python
"""SubprocVecEnv against a plain loop and other process backends, as ratios in one run.

    python scripts/bench/benchmark_subproc.py               # about a minute
    python scripts/bench/benchmark_subproc.py --seconds 3   # steadier
    python scripts/bench/benchmark.py --suite subproc       # the same, from the main benchmark

Cases (ratios are to the plain sequential loop over the native envs; with two
cores a process backend can reach about 2.0x of DummyVecEnv's rate, which is
itself above the plain loop's where the adapter steps an env more cheaply than
its public API does, as on mpe2: see marl_vec/envs/pettingzoo/aec_parallel.py):

- mpe2 simple_spread x 32: plain loop, DummyVecEnv, SubprocVecEnv (2 workers),
  SuperSuit ``concat_vec_envs_v1`` (2 processes), and the memory (PSS) of each
  process tree;
- CartPole-v1 x 64: plain loop, SubprocVecEnv (2 workers), gymnasium ``AsyncVectorEnv``;
- ``--cases pool``: the async pool (``send``/``recv``, batches of 8 of 16 envs) against
  synchronous steps, with a policy that costs as much CPU as the step (mpe2), and on
  Football academy_3_vs_1_with_keeper (when gfootball is installed);
- ALE Pong x 8 (standard preprocessing): plain loop, SubprocVecEnv (2 workers),
  ``AsyncVectorEnv``; only when ``marl_vec.envs.atari`` and ale-py are installed.

Candidates run in turns (round-robin, best round kept, see ``benchmark.measure``)
because the machine is shared; only ratios within one run mean something.

On a loaded machine (other jobs on the same cores) wall-clock ratios of process
backends mostly measure the share of CPU each one wins, so every case also
prints the CPU time one batch step costs in each process, which does not depend
on the load: ``main`` (the trainer's process), the busiest worker, and the sum.
Stepping is synchronous, so on C idle cores a step takes about
main + max(busiest worker, workers' sum / C); ``idle estimate`` is the plain
loop's CPU time divided by that (psutil's CPU clock ticks every 10 ms: a rough figure).
"""

from __future__ import annotations

import argparse
import functools
import gc
import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))

import marl_vec as mv  # noqa: E402
from benchmark import (  # noqa: E402
    Candidate,
    candidate,
    gym_vector,
    marl_vec_candidate,
    measure,
    plain_gym_loop,
    plain_parallel_loop,
    report,
)


def tree_pss_mb(pid: int | None = None) -> float:
    """PSS of a process and all its descendants, in MB (shared pages counted once overall)."""
    import psutil

    root = psutil.Process(pid)
    total = 0
    for proc in [root, *root.children(recursive=True)]:
        try:
            total += proc.memory_full_info().pss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return total / 2**20


def tracked(candidate: Candidate, memory: dict[str, float]) -> Candidate:
    """Record the process tree's PSS while ``candidate`` is alive (after its warm-up steps)."""
    setup = candidate.setup

    def setup_and_measure():
        run = setup()
        run(5)
        memory[candidate.name] = tree_pss_mb()
        return run

    candidate.setup = setup_and_measure
    return candidate


def alone(candidate: Candidate) -> tuple[Candidate, float]:
    """Build one candidate with nothing else alive, read the tree's PSS, free it."""
    run = candidate.setup()
    run(5)
    pss = tree_pss_mb()
    if candidate.teardown:
        candidate.teardown()
    return candidate, pss


def _cpu(proc: Any) -> float:
    times = proc.cpu_times()
    return times.user + times.system


def cpu_profile(candidate: Candidate, steps: int) -> tuple[float, float, float]:
    """CPU seconds per batch step: (this process, busiest child, whole tree)."""
    return cpu_profiles([candidate], steps, rounds=1)[0]


def cpu_profiles(cases: list[Candidate], steps: int, rounds: int = 5) -> list[tuple[float, float, float]]:
    """CPU seconds per batch step of each candidate: (this process, busiest child, whole
    tree), each the least over ``rounds`` interleaved windows of ``steps // rounds`` steps.

    Other jobs on the machine only ever add CPU time to a window (cache and core
    contention): the least of several is the robust figure on a shared machine."""
    import psutil

    me = psutil.Process()
    built = []
    try:
        for case in cases:
            before = {p.pid for p in me.children(recursive=True)}
            run = case.setup()
            run(10)
            mine = [p for p in me.children(recursive=True) if p.pid not in before]
            built.append((case, run, [me, *mine]))
        per = max(1, steps // rounds)
        best: list[list[float]] = [[float("inf")] * len(procs) for _, _, procs in built]
        for _ in range(rounds):
            for k, (_, run, procs) in enumerate(built):
                start = [_cpu(p) for p in procs]
                run(per)
                for j, p in enumerate(procs):
                    try:
                        best[k][j] = min(best[k][j], (_cpu(p) - start[j]) / per)
                    except psutil.NoSuchProcess:
                        pass
    finally:
        for case, _, _ in built:
            if case.teardown:
                case.teardown()
        gc.collect()
    out = []
    for used in best:
        children = [u for u in used[1:] if u != float("inf")]
        out.append((used[0], max(children, default=0.0), used[0] + sum(children)))
    return out


def cpu_report(title: str, makers: list[Callable[[], Candidate]], steps: int) -> list[str]:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    lines = [f"{title}: CPU ms per batch step, least of 5 interleaved windows (idle estimate for {cores} cores)",
             f"  {'':<28} {'main':>8} {'busiest':>8} {'total':>8}   idle estimate"]
    cases = []
    for make in makers:
        try:
            cases.append(make())
        except ImportError:
            continue
    plain = None
    for candidate, (main, busiest, total) in zip(cases, cpu_profiles(cases, steps)):
        plain = plain if plain is not None else total
        if "+ main" in candidate.name:  # this process steps a block beside the workers: in parallel
            critical = max(main, busiest, total / cores)
        else:
            critical = main + max(busiest, (total - main) / cores)
        estimate = plain / critical if critical > 0 else float("nan")
        lines.append(f"  {candidate.name:<28} {main * 1e3:8.2f} {busiest * 1e3:8.2f} {total * 1e3:8.2f}   {estimate:5.2f}x")
    print("\n".join(lines), flush=True)
    return lines


# -- other libraries -----------------------------------------------------------

def supersuit_concat(make_env: Callable, n: int, actions: np.ndarray, num_cpus: int = 2) -> Candidate:
    import supersuit as ss

    def build():
        venv = ss.concat_vec_envs_v1(
            ss.pettingzoo_env_to_vec_env_v1(make_env()), n, num_cpus=num_cpus, base_class="gymnasium"
        )
        venv.reset(seed=0)
        # One "env" per agent: (n, agents) actions flattened.
        return (lambda a: venv.step(a.reshape(-1))), venv.close

    return candidate(f"SuperSuit concat ({num_cpus} procs)", build, actions)


def gym_async(make_env: Callable, n: int, actions: np.ndarray) -> Candidate:
    import gymnasium as gym

    return gym_vector("gymnasium AsyncVectorEnv", lambda: gym.vector.AsyncVectorEnv([make_env] * n), actions)


def subproc(fns: list, workers: int = 2, **kwargs: Any) -> Callable[[], mv.VecEnv]:
    return lambda: mv.SubprocVecEnv(fns, num_workers=workers, **kwargs)


def process_candidates(fns: list, actions: np.ndarray) -> list[Candidate]:
    """SubprocVecEnv as 2 workers and as 1 worker + this process (``step_in_main``), each
    with its defaults and lean (``copy=False, validate=False``), 2 workers that poll
    100 us for the next command before sleeping (``spin_us=100``), and 1 worker + this
    process both polling 300 us before they sleep (the tuner's candidate, ``spin_us=300``:
    this process has a core of its own, so it spins too)."""
    lean = {"copy": False, "validate": False}
    return [
        marl_vec_candidate("SubprocVecEnv (2 workers)", subproc(fns), actions),
        marl_vec_candidate("SubprocVecEnv lean", subproc(fns, **lean), actions),
        marl_vec_candidate("2 workers, spin_us=100", subproc(fns, spin_us=100), actions),
        marl_vec_candidate("1 worker + main", subproc(fns, 1, step_in_main=True), actions),
        marl_vec_candidate("1 worker + main, lean", subproc(fns, 1, step_in_main=True, **lean), actions),
        marl_vec_candidate("1 worker + main, spin_us=300", subproc(fns, 1, step_in_main=True, spin_us=300), actions),
    ]


def measure_rounds(cases: list[Candidate], num_envs: int, seconds: float, rounds: int = 7) -> dict[str, list[float]]:
    """Interleaved rounds (each candidate in turn, every round); env-steps/s of each round.

    Also sets each candidate's ``best`` (its fastest round), as ``benchmark.measure`` does."""
    runners = [(c, c.setup()) for c in cases]
    rates: dict[str, list[float]] = {c.name: [] for c in cases}
    try:
        for _, run in runners:
            run(5)  # warm-up: first resets, caches
        for _ in range(rounds):
            for c, run in runners:
                steps, start = 0, time.perf_counter()
                while True:
                    run(10)
                    steps += 10
                    elapsed = time.perf_counter() - start
                    if elapsed >= seconds / rounds:
                        break
                rates[c.name].append(steps * num_envs / elapsed)
                c.best = max(c.best, rates[c.name][-1])
    finally:
        for c, _ in runners:
            if c.teardown:
                c.teardown()
        gc.collect()  # or workers forked later inherit the garbage (SuperSuit's __del__ then fails in them)
    return rates


def report_rounds(title: str, rates: dict[str, list[float]], baseline: str = "plain loop") -> list[str]:
    """Median env-steps/s, the median of the per-round ratios to ``baseline`` and their spread."""
    base = rates[baseline]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines = [f"{title} ({len(base)} interleaved rounds; load average {load:.2f}; ratio: median [min-max] of rounds)"]
    for name, rs in rates.items():
        ratios = sorted(r / b for r, b in zip(rs, base))
        lines.append(f"  {name:<28} {float(np.median(rs)):>12,.0f} env-steps/s   {float(np.median(ratios)):5.2f}x "
                     f"[{ratios[0]:.2f}-{ratios[-1]:.2f}]")
    print("\n".join(lines), flush=True)
    return lines


# -- cases ---------------------------------------------------------------------

def simple_spread(seconds: float, lines: list[str], sizes: tuple[int, ...] = (8, 32)) -> None:
    from mpe2 import simple_spread_v3

    spread = functools.partial(simple_spread_v3.parallel_env, N=3, max_cycles=25, continuous_actions=False)
    for n in sizes:
        actions = np.random.default_rng(0).integers(1, 5, size=(256, n, 3))
        fns = [spread] * n
        cases = [
            plain_parallel_loop(spread, n, actions),
            marl_vec_candidate("DummyVecEnv", lambda: mv.DummyVecEnv(fns), actions),
            *process_candidates(fns, actions),
        ]
        try:
            cases.append(supersuit_concat(spread, n, actions))
        except ImportError as exc:
            print(f"  (SuperSuit not installed: {exc}; pip install supersuit)", flush=True)
        lines += report_rounds(f"mpe2 simple_spread x {n}", measure_rounds(cases, n, seconds))
        lines += cpu_report(f"mpe2 simple_spread x {n}", [
            lambda: plain_parallel_loop(spread, n, actions),
            lambda: marl_vec_candidate("DummyVecEnv", lambda: mv.DummyVecEnv(fns), actions),
            *[functools.partial(lambda c: c, c) for c in process_candidates(fns, actions)],
            lambda: supersuit_concat(spread, n, actions),
        ], steps=max(50, int(100 * seconds * 32 / n)))
    n = sizes[-1]

    # Memory: each candidate alone in a fresh interpreter, so that neither another
    # candidate nor this benchmark's own imports count in its tree's PSS.
    mem = [f"PSS of the whole process tree, simple_spread x {n} (each alone in a fresh process, after 5 steps)"]
    for name in MEMORY_CANDIDATES:
        out = subprocess.run([sys.executable, __file__, "--memory-of", name, "--num-envs", str(n)],
                             capture_output=True, text=True, timeout=300)
        if out.returncode != 0:
            mem.append(f"  {name:<28} failed: {out.stderr.strip().splitlines()[-1:]}")
            continue
        mem.append(f"  {name:<28} {float(out.stdout.split()[-1]):>9.0f} MB")
    print("\n".join(mem), flush=True)
    lines += mem


MEMORY_CANDIDATES = ("plain loop", "DummyVecEnv", "SubprocVecEnv (2 workers)", "1 worker + main",
                     "SuperSuit concat (2 procs)")


def memory_of(name: str, n: int) -> float:
    """Build one simple_spread candidate in this (fresh) process; the tree's PSS after 5 steps."""
    from mpe2 import simple_spread_v3

    spread = functools.partial(simple_spread_v3.parallel_env, N=3, max_cycles=25, continuous_actions=False)
    actions = np.random.default_rng(0).integers(1, 5, size=(16, n, 3))
    make = {
        "plain loop": lambda: plain_parallel_loop(spread, n, actions),
        "DummyVecEnv": lambda: marl_vec_candidate("DummyVecEnv", lambda: mv.DummyVecEnv([spread] * n), actions),
        "SubprocVecEnv (2 workers)": lambda: marl_vec_candidate("SubprocVecEnv (2 workers)", subproc([spread] * n), actions),
        "1 worker + main": lambda: marl_vec_candidate("1 worker + main", subproc([spread] * n, 1, step_in_main=True),
                                                      actions),
        "SuperSuit concat (2 procs)": lambda: supersuit_concat(spread, n, actions),
    }[name]
    _, pss = alone(make())
    return pss


def cartpole(seconds: float, lines: list[str]) -> None:
    import gymnasium as gym

    n = 64
    make = functools.partial(gym.make, "CartPole-v1")
    actions = np.random.default_rng(0).integers(0, 2, size=(256, n, 1))
    cases = [
        plain_gym_loop(make, n, actions),
        marl_vec_candidate("DummyVecEnv", lambda: mv.DummyVecEnv([make] * n), actions),
        *process_candidates([make] * n, actions),
        gym_async(make, n, actions),
    ]
    lines += report_rounds(f"CartPole-v1 x {n}", measure_rounds(cases, n, seconds))
    lines += cpu_report(f"CartPole-v1 x {n}", [
        lambda: plain_gym_loop(make, n, actions),
        *[functools.partial(lambda c: c, c) for c in process_candidates([make] * n, actions)],
        lambda: gym_async(make, n, actions),
    ], steps=max(500, int(2000 * seconds)))


def pong(seconds: float, lines: list[str]) -> None:
    if importlib.util.find_spec("marl_vec.envs.atari") is None:
        print("ALE Pong x 8: skipped (marl_vec.envs.atari is not in this version)", flush=True)
        return
    try:
        from marl_vec.envs.atari import atari_gym_env

        atari_gym_env("ALE/Pong-v5", preprocess=True)[0].close()
    except (ImportError, mv.envs.MissingExtraError) as exc:
        print(f"ALE Pong x 8: skipped ({exc})", flush=True)
        return
    from marl_vec.envs.registry import make_env_fn

    n = 8
    native = _AtariMaker("ALE/Pong-v5")
    fns = [make_env_fn("atari", "ALE/Pong-v5", {"preprocess": True})] * n
    actions = np.random.default_rng(0).integers(0, 6, size=(256, n, 1))
    cases = [
        plain_gym_loop(native, n, actions),
        marl_vec_candidate("SubprocVecEnv (2 workers)", subproc(fns), actions),
        gym_async(native, n, actions),
    ]
    measure(cases, n, seconds)
    lines += report(f"ALE Pong-v5 x {n} (84x84x4 preprocessing)", cases)
    lines += cpu_report(f"ALE Pong-v5 x {n}", [
        lambda: plain_gym_loop(native, n, actions),
        lambda: marl_vec_candidate("SubprocVecEnv (2 workers)", subproc(fns), actions),
        lambda: gym_async(native, n, actions),
    ], steps=max(20, int(50 * seconds)))


def busy(cpu_seconds: float) -> None:
    """A policy's cost: spin for ``cpu_seconds`` of this process's CPU time."""
    end = time.process_time() + cpu_seconds
    while time.process_time() < end:
        pass


def pool_step_cost(fns: list, steps: int = 50) -> float:
    """CPU seconds one step of one env costs, measured in this process."""
    with mv.DummyVecEnv(fns[:4]) as venv:
        venv.reset()
        zeros = np.zeros((4, venv.spec.n_agents), dtype=np.int64)
        start = time.process_time()
        for _ in range(steps):
            venv.step(zeros)
        return (time.process_time() - start) / (steps * 4)


def pool_candidates(fns: list, batch: int, policy_cost: float, actions: np.ndarray) -> list[Candidate]:
    """Synchronous SubprocVecEnv against the async pool, both paying ``policy_cost`` CPU s
    per env per step for the policy; one "batch step" is len(fns) env-steps in both."""
    n = len(fns)

    def sync_build():
        venv = mv.SubprocVecEnv(fns, num_workers=2)
        venv.reset()

        def step(a):
            busy(policy_cost * n)
            venv.step(a)
        return step, venv.close

    def pool_build():
        venv = mv.SubprocVecEnv(fns, num_workers=2, batch_size=batch)
        venv.reset()

        def step(a):
            for _ in range(n // batch):
                r = venv.recv()
                busy(policy_cost * batch)  # the other blocks step meanwhile
                venv.send(a[r.env_ids], r.env_ids)
        return step, venv.close

    return [candidate("SubprocVecEnv sync", sync_build, actions),
            candidate(f"SubprocVecEnv pool (batch {batch})", pool_build, actions)]


def pool_cpu_report(title: str, cases: list[Candidate], steps: int) -> list[str]:
    """CPU ms per batch step of the synchronous SubprocVecEnv and of the pool, and the ratio
    they would reach on idle cores (load-independent, unlike wall time on a shared machine).

    Synchronous: the policy runs while the workers wait, so a step takes about
    main + max(busiest worker, workers' sum / C). Pool: everything overlaps, so about
    max(main, busiest worker, whole tree / C). Averages over the run: per-step
    imbalance between workers (what the pool also saves) is not counted.
    """
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    out = [f"{title}: CPU ms per batch step (load-independent; idle estimate for {cores} cores)",
           f"  {'':<28} {'main':>8} {'busiest':>8} {'total':>8}   idle estimate"]
    critical: list[float] = []
    for case in cases:
        main, busiest, total = cpu_profile(case, steps)
        if "pool" in case.name:
            critical.append(max(main, busiest, total / cores))
        else:
            critical.append(main + max(busiest, (total - main) / cores))
        out.append(f"  {case.name:<28} {main * 1e3:8.2f} {busiest * 1e3:8.2f} {total * 1e3:8.2f}   "
                   f"{critical[0] / critical[-1]:5.2f}x")
    print("\n".join(out), flush=True)
    return out


def worker_busy(candidate: Candidate, seconds: float) -> float:
    """The mean fraction of wall time the candidate's workers spend on a CPU.

    What bounds the pool's gain when the trainer costs nothing (Football): the pool
    can only fill the time the synchronous workers wait (for the slowest env of the
    other worker, for the next command), so on idle cores the pool / sync ratio is
    at most about pool busy / sync busy.
    """
    import psutil

    run = candidate.setup()
    run(10)
    workers = psutil.Process().children()  # the workers (and the resource tracker, which idles)
    before = [_cpu(p) for p in workers]
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        run(5)
    wall = time.perf_counter() - start
    busy = sorted(((_cpu(p) - b) / wall for p, b in zip(workers, before)), reverse=True)
    if candidate.teardown:
        candidate.teardown()
    return sum(busy[:2]) / 2  # the two workers: the busiest two children


def pool(seconds: float, lines: list[str]) -> None:
    """The async pool (send/recv) against synchronous steps when the policy costs as much
    as the step: mpe2 simple_spread x 16, 2 workers, batches of 8."""
    from mpe2 import simple_spread_v3

    n, batch = 16, 8
    spread = functools.partial(simple_spread_v3.parallel_env, N=3, max_cycles=25, continuous_actions=False)
    fns = [spread] * n
    cost = pool_step_cost(fns)
    actions = np.random.default_rng(0).integers(1, 5, size=(256, n, 3))
    cases = pool_candidates(fns, batch, cost, actions)
    measure(cases, n, seconds)
    lines += report(f"async pool: mpe2 simple_spread x {n}, 2 workers, policy {cost * 1e6:.0f} us CPU per env "
                    f"(= one env step), load {os.getloadavg()[0]:.2f}", cases, baseline="SubprocVecEnv sync")
    lines += pool_cpu_report(f"async pool: mpe2 simple_spread x {n}", pool_candidates(fns, batch, cost, actions),
                             steps=max(100, int(100 * seconds)))
    if importlib.util.find_spec("gfootball") is None:
        print("async pool, Football: skipped (gfootball is not installed)", flush=True)
        return
    from marl_vec.envs.registry import make_env_fn

    football = [make_env_fn("football", "academy_3_vs_1_with_keeper", {})] * n
    from marl_vec.envs.registry import as_adapter

    probe = as_adapter(football[0]())
    agents, n_actions = probe.spec.n_agents, probe.spec.n_actions
    probe.close()
    cost = 0.0
    actions = np.random.default_rng(0).integers(0, n_actions, size=(64, n, agents))
    cases = pool_candidates(football, batch, cost, actions)
    measure(cases, n, seconds)
    lines += report(f"async pool: Football academy_3_vs_1_with_keeper x {n}, 2 workers, no policy cost, "
                    f"load {os.getloadavg()[0]:.2f}", cases, baseline="SubprocVecEnv sync")
    sync_busy, pool_busy = (worker_busy(case, max(2.0, seconds)) for case in pool_candidates(football, batch, cost, actions))
    out = (f"async pool: Football: workers on a CPU {sync_busy:.0%} of the time in sync steps, {pool_busy:.0%} in "
           f"the pool, so the pool can gain about {pool_busy / sync_busy:.2f}x here, at most "
           f"{1 / sync_busy:.2f}x with its workers always busy (load {os.getloadavg()[0]:.2f})")
    print(out, flush=True)
    lines.append(out)


class _AtariMaker:
    """A picklable maker of the same gymnasium chain the atari adapter wraps."""

    def __init__(self, env_id: str):
        self.env_id = env_id

    def __call__(self) -> Any:
        from marl_vec.envs.atari import atari_gym_env

        return atari_gym_env(self.env_id, preprocess=True)[0]


def main(argv: list[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=2.0, help="time per candidate per case (split over 5 rounds)")
    parser.add_argument("--cases", default="spread,cartpole,pong",
                        help="comma-separated subset of spread,cartpole,pong,pool (pool: the async pool, send/recv)")
    parser.add_argument("--memory-of", choices=MEMORY_CANDIDATES, help=argparse.SUPPRESS)
    parser.add_argument("--num-envs", type=int, default=32, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_of:
        print(memory_of(args.memory_of, args.num_envs))
        return []
    lines: list[str] = []
    chosen = set(args.cases.split(","))
    for name, case in (("spread", simple_spread), ("cartpole", cartpole), ("pong", pong), ("pool", pool)):
        if name in chosen:
            case(args.seconds, lines)
    return lines


if __name__ == "__main__":
    main()

"""Multi-Agent MuJoCo: SubprocVecEnv against a plain loop, env-steps/s, their ratio, the machine's load.

- plain: ``--num-envs`` envs of gymnasium-robotics' ``mamujoco_v1.parallel_env``
  stepped one after another in this process with dict actions (each agent's own
  part of the same random actions), reset at each episode's end: what a trainer
  without marl_vec writes;
- dummy: ``DummyVecEnv`` over the ``mamujoco`` family in this process: the
  family's own per-env cost against the library's (its compiled step, see
  docs/families/mamujoco.md#speed; ``--library-step`` steps through the library);
- subproc: ``SubprocVecEnv`` over the ``mamujoco`` family with ``--workers``
  processes (results in shared memory, ``copy=True``, the default);
- ceiling: ``--workers`` processes, each running the plain loop over its share of
  the envs at the same time, with no marl_vec and nothing between them: what this
  machine gives ``--workers`` processes of the library's loop at best.
  ``ceiling / plain`` is the machine's (cores, caches, other jobs); ``subproc /
  ceiling`` is what marl_vec adds or costs on top of it (above 1 where its step
  is cheaper than the library's, ``dummy / plain``).

Rounds are interleaved (``--rounds`` of ``--seconds`` each, after a warm-up);
the median env-steps/s of each, each round's values, the ratio's spread and the
load average before and after (``os.getloadavg``) are printed.

    python scripts/bench/benchmark_mamujoco.py                       # Ant/2x4 x16, 2 workers
    python scripts/bench/benchmark_mamujoco.py --env HalfCheetah/6x1 --rounds 5 --seconds 3
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import time
from typing import Any, Callable

import numpy as np

import marl_vec as mv
from marl_vec.envs.registry import make_env_fn


def actions_of(spec: mv.EnvSpec, n_envs: int, pool: int = 16) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    low = np.where(np.isfinite(spec.action.low), spec.action.low, 0.0)
    high = np.where(np.isfinite(spec.action.high), spec.action.high, 0.0)
    shape = (n_envs, spec.n_agents, *spec.action.shape)
    return [rng.uniform(np.broadcast_to(low, shape[1:]), np.broadcast_to(high, shape[1:]), shape).astype(np.float32)
            for _ in range(pool)]


def plain(env_id: str, n_envs: int, pool: list[np.ndarray]) -> tuple[Callable[[int], None], Callable[[], None]]:
    from gymnasium_robotics import mamujoco_v1

    scenario, _, conf = env_id.partition("/")
    envs = [mamujoco_v1.parallel_env(scenario, conf or None) for _ in range(n_envs)]
    for i, env in enumerate(envs):
        env.reset(seed=i)
    agents = envs[0].possible_agents
    sizes = [envs[0].action_space(a).shape[0] for a in agents]

    def run(n: int) -> None:
        for t in range(n):
            batch = pool[t % len(pool)]
            for i, env in enumerate(envs):
                obs, rewards, terms, truncs, _ = env.step({a: batch[i, j, :k] for j, (a, k) in
                                                           enumerate(zip(agents, sizes))})
                state = env.state()  # noqa: F841 (read, as a trainer with a critic would)
                if not env.agents:
                    env.reset()

    return run, lambda: [env.close() for env in envs]


def _ceiling_worker(conn: Any, env_id: str, n_envs: int, pool: list[np.ndarray]) -> None:
    run, close = plain(env_id, n_envs, pool)
    run(5)
    conn.send("ready")
    while True:
        seconds = conn.recv()
        if seconds is None:
            break
        steps, started = 0, time.perf_counter()
        while time.perf_counter() - started < seconds:
            run(20)
            steps += 20
        conn.send(steps * n_envs)
    close()


def ceiling(env_id: str, n_envs: int, workers: int, pool: list[np.ndarray]) -> tuple[Callable[[float], float],
                                                                                  Callable[[], None]]:
    """``workers`` plain loops in as many processes at once; env-steps/s of them all together."""
    ctx = mp.get_context("spawn")
    share = n_envs // workers
    pipes, procs = [], []
    for w in range(workers):
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_ceiling_worker, args=(child, env_id, share, [a[w * share:(w + 1) * share]
                                                                              for a in pool]), daemon=True)
        proc.start()
        pipes.append(parent)
        procs.append(proc)
    for parent in pipes:
        assert parent.recv() == "ready"

    def measure(seconds: float) -> float:
        started = time.perf_counter()
        for parent in pipes:
            parent.send(seconds)
        total = sum(parent.recv() for parent in pipes)
        return total / (time.perf_counter() - started)

    def close() -> None:
        for parent in pipes:
            parent.send(None)
        for proc in procs:
            proc.join(10)

    return measure, close


def dummy(env_id: str, n_envs: int, options: dict[str, Any],
          pool: list[np.ndarray]) -> tuple[Callable[[int], None], Callable[[], None]]:
    venv = mv.DummyVecEnv([make_env_fn("mamujoco", env_id, options)] * n_envs, env_seed=0)
    venv.reset()

    def run(n: int) -> None:
        for t in range(n):
            r = venv.step(pool[t % len(pool)])
            r.obs, r.state, r.reward, r.done  # noqa: B018 (read, as a trainer would)

    return run, venv.close


def subproc(env_id: str, n_envs: int, workers: int, options: dict[str, Any], in_main: bool = False,
            spin_us: float = 0.0) -> tuple[Callable[[int], None], Callable[[], None], list]:
    # in_main: one block stepped in this process and workers - 1 worker processes (the
    # tuner's "N-1 workers + main" layout): as many processes step envs as the ceiling's.
    layout = {"num_workers": workers - 1, "step_in_main": True} if in_main else {"num_workers": workers}
    venv = mv.SubprocVecEnv([make_env_fn("mamujoco", env_id, options)] * n_envs, env_seed=0, spin_us=spin_us,
                            **layout)
    venv.reset()
    pool = actions_of(venv.spec, n_envs)

    def run(n: int) -> None:
        for t in range(n):
            r = venv.step(pool[t % len(pool)])
            r.obs, r.state, r.reward, r.done  # noqa: B018 (read, as a trainer would)

    return run, venv.close, pool


def rate(run: Callable[[int], None], n_envs: int, seconds: float) -> float:
    steps, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        run(20)
        steps += 20
    return steps * n_envs / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="Ant/2x4")
    parser.add_argument("--num-envs", type=int, default=16)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--step-in-main", action="store_true",
                        help="subproc steps one block in this process and --workers - 1 worker processes")
    parser.add_argument("--spin-us", type=float, default=0.0, help="SubprocVecEnv's spin_us (default 0)")
    parser.add_argument("--library-step", action="store_true",
                        help="the family steps through the library's env.step (compiled=False)")
    args = parser.parse_args()
    load_before = os.getloadavg()
    options = {"compiled": not args.library_step}
    run_sub, close_sub, pool = subproc(args.env, args.num_envs, args.workers, options, args.step_in_main,
                                       args.spin_us)
    run_plain, close_plain = plain(args.env, args.num_envs, pool)
    run_dummy, close_dummy = dummy(args.env, args.num_envs, options, pool)
    measure_ceiling, close_ceiling = ceiling(args.env, args.num_envs, args.workers, pool)
    run_sub(5), run_plain(5), run_dummy(5)  # warm-up
    rows, loads = [], []
    for _ in range(args.rounds):
        rows.append((rate(run_plain, args.num_envs, args.seconds), rate(run_dummy, args.num_envs, args.seconds),
                     rate(run_sub, args.num_envs, args.seconds), measure_ceiling(args.seconds)))
        loads.append(os.getloadavg()[0])
    close_sub(), close_plain(), close_dummy(), close_ceiling()
    ratios = [s / p for p, _, s, _ in rows]
    of_ceiling = [s / c for _, _, s, c in rows]
    in_process = [d / p for p, d, _, _ in rows]
    p_med, d_med, s_med, c_med = (statistics.median(r[i] for r in rows) for i in range(4))
    layout = f"{args.workers - 1} workers + main" if args.step_in_main else f"{args.workers} workers"
    step = "library step" if args.library_step else "compiled step"
    print(f"{args.env} x{args.num_envs}, {layout}, spin_us={args.spin_us:g}, {step}, {args.rounds} rounds of {args.seconds:g} s, "
          f"{os.cpu_count()} CPUs")
    for k, (p, d, s, c) in enumerate(rows):
        print(f"  round {k}: plain {p:6.0f}  dummy {d:6.0f}  subproc {s:6.0f}  ceiling {c:6.0f} env-steps/s   "
              f"dummy/plain {d / p:.2f}x  subproc/plain {s / p:.2f}x  ceiling/plain {c / p:.2f}x  "
              f"subproc/ceiling {s / c:.2f}  (1-min load {loads[k]:.1f})")
    print(f"median: plain {p_med:.0f}, dummy {d_med:.0f}, subproc {s_med:.0f}, ceiling {c_med:.0f} env-steps/s; "
          f"dummy/plain {d_med / p_med:.2f}x (rounds {min(in_process):.2f}-{max(in_process):.2f}x), "
          f"subproc/plain {s_med / p_med:.2f}x (rounds {min(ratios):.2f}-{max(ratios):.2f}x), "
          f"ceiling/plain {c_med / p_med:.2f}x, subproc/ceiling {statistics.median(of_ceiling):.2f} "
          f"(rounds {min(of_ceiling):.2f}-{max(of_ceiling):.2f})")
    print(f"load average before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, "
          f"after {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()

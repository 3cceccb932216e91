"""Google Research Football: batch throughput against a plain loop, and reset vs set_state.

Everything is measured in one run and reported as ratios, so a busy machine
slows every side alike:

    python scripts/bench/benchmark_football.py                 # academy_3_vs_1_with_keeper x 8
    python scripts/bench/benchmark_football.py --seconds 10 --num-envs 4 --scenario academy_counterattack_hard

1. plain: ``num_envs`` gfootball envs (create_environment) stepped in turn by a
   Python loop, reset at episode ends: what a user writes without marl_vec.
2. dummy: DummyVecEnv in this process (the batching overhead).
3. subproc: SubprocVecEnv with ``--workers`` worker processes (default 2), with
   the default autoreset and with ``autoreset="fast"``.
4. reset vs set_state: ``env.reset()`` against restoring a ``get_state()``
   snapshot (what ``autoreset="fast"`` does), per call.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import marl_vec as mv  # noqa: E402
from benchmark import Candidate, candidate, marl_vec_candidate, measure, report  # noqa: E402
from marl_vec.envs.registry import make_env_fn  # noqa: E402

AGENTS = {"academy_3_vs_1_with_keeper": 3, "academy_counterattack_hard": 4, "5_vs_5": 4, "11_vs_11_stochastic": 11}


def plain_loop(scenario: str, n_agents: int, n: int, actions: np.ndarray) -> Candidate:
    """A plain sequential loop over gfootball envs, reset at episode ends."""
    def build():
        with contextlib.redirect_stderr(io.StringIO()):  # old gym's notice to migrate to gymnasium
            import gfootball.env as football

        envs = [
            football.create_environment(
                env_name=scenario, representation="simple115v2", number_of_left_players_agent_controls=n_agents,
                other_config_options={"game_engine_random_seed": i},
            )
            for i in range(n)
        ]
        for env in envs:
            env.reset()

        def step_batch(a: np.ndarray) -> None:
            for i, env in enumerate(envs):
                _, _, done, _ = env.step(a[i])
                if done:
                    env.reset()
        return step_batch, lambda: [e.close() for e in envs]

    return candidate("plain gfootball loop", build, actions)


def reset_vs_restore(scenario: str, n_agents: int, repeats: int) -> tuple[float, float]:
    """Seconds per reset() and per restore() of one adapter."""
    from marl_vec.core.buffers import BatchBuffers

    env = make_env_fn("football", scenario, {"left_agents": n_agents})()
    buffers = BatchBuffers(env.spec, 1)
    env.bind(buffers.row(0))
    env.reset(seed=0)
    snapshot = env.snapshot()
    idle = np.zeros(n_agents, dtype=np.int64)
    timings = {"reset": 0.0, "restore": 0.0}
    for _ in range(repeats):
        for kind in timings:
            for _ in range(5):  # leave the first state, as an episode would
                env.step(idle)
            start = time.perf_counter()
            env.reset() if kind == "reset" else env.restore(snapshot)
            timings[kind] += time.perf_counter() - start
    env.close()
    return timings["reset"] / repeats, timings["restore"] / repeats


def main(argv: list[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scenario", default="academy_3_vs_1_with_keeper", choices=sorted(AGENTS))
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=6.0, help="wall seconds per candidate, over 5 rounds")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--resets", type=int, default=20)
    args = parser.parse_args(argv)
    n, n_agents = args.num_envs, AGENTS[args.scenario]
    actions = np.random.default_rng(0).integers(0, 19, size=(256, n, n_agents))
    fns = [make_env_fn("football", args.scenario, {"left_agents": n_agents})] * n
    cases = [
        plain_loop(args.scenario, n_agents, n, actions),
        marl_vec_candidate("DummyVecEnv", lambda: mv.DummyVecEnv(fns), actions),
        marl_vec_candidate(f"SubprocVecEnv, {args.workers} workers",
                           lambda: mv.SubprocVecEnv(fns, num_workers=args.workers), actions),
        marl_vec_candidate("SubprocVecEnv, fast autoreset",
                           lambda: mv.SubprocVecEnv(fns, num_workers=args.workers, autoreset="fast"), actions),
    ]
    measure(cases, n, args.seconds)
    lines = report(f"{args.scenario} x {n}, {n_agents} agents, random actions (wall time)", cases,
                   baseline="plain gfootball loop")
    reset_s, restore_s = reset_vs_restore(args.scenario, n_agents, args.resets)
    lines += [f"  reset()                {reset_s * 1e3:8.2f} ms",
              f"  restore (set_state)    {restore_s * 1e3:8.2f} ms   reset/restore = {reset_s / restore_s:.1f}x"]
    print("\n".join(lines[-2:]), flush=True)
    return lines


if __name__ == "__main__":
    main()

"""Google Research Football: batch throughput against a plain loop, and reset vs set_state.

Everything is measured in one run and reported as ratios, so a busy machine
slows every side alike:

    python scripts/benchmark_football.py                 # academy_3_vs_1_with_keeper x 8, 250 steps, 2 rounds
    python scripts/benchmark_football.py --steps 100 --num-envs 4 --scenario academy_counterattack_hard

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
import time

import numpy as np

import marl_vec as mv
from marl_vec.envs.registry import make_env_fn

AGENTS = {"academy_3_vs_1_with_keeper": 3, "academy_counterattack_hard": 4, "5_vs_5": 4, "11_vs_11_stochastic": 11}


def plain_loop(scenario: str, n_agents: int, actions: np.ndarray, seed: int) -> float:
    """Steps per second of a plain sequential loop over gfootball envs."""
    with contextlib.redirect_stderr(io.StringIO()):  # old gym's notice to migrate to gymnasium
        import gfootball.env as football

    envs = [
        football.create_environment(
            env_name=scenario, representation="simple115v2", number_of_left_players_agent_controls=n_agents,
            other_config_options={"game_engine_random_seed": seed + i},
        )
        for i in range(actions.shape[1])
    ]
    obs = [env.reset() for env in envs]
    start = time.perf_counter()
    for step in actions:
        for i, env in enumerate(envs):
            obs[i], _, done, _ = env.step(step[i])
            if done:
                obs[i] = env.reset()
    elapsed = time.perf_counter() - start
    for env in envs:
        env.close()
    return actions.shape[0] * actions.shape[1] / elapsed


def batched(venv: mv.VecEnv, actions: np.ndarray) -> float:
    with venv:
        venv.reset()
        venv.step(actions[0])  # warm-up: workers are up and buffers touched
        start = time.perf_counter()
        for step in actions[1:]:
            venv.step(step)
        elapsed = time.perf_counter() - start
    return (actions.shape[0] - 1) * actions.shape[1] / elapsed


def reset_vs_restore(scenario: str, n_agents: int, repeats: int) -> tuple[float, float]:
    """Seconds per reset() and per restore() of one adapter."""
    from marl_vec.buffers import BatchBuffers

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scenario", default="academy_3_vs_1_with_keeper", choices=sorted(AGENTS))
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--steps", type=int, default=250, help="steps of the batch (each env steps this often)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--resets", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=2, help="rounds of plain/dummy/subproc; the best of each is kept")
    args = parser.parse_args()
    n_agents = AGENTS[args.scenario]
    actions = np.random.default_rng(0).integers(0, 19, size=(args.steps, args.num_envs, n_agents))
    fns = [make_env_fn("football", args.scenario, {"left_agents": n_agents})] * args.num_envs

    # Interleaved rounds, best of each: a neighbour's burst of load hits one round, not one side.
    plain = dummy = subproc = fast = 0.0
    for _ in range(args.repeats):
        plain = max(plain, plain_loop(args.scenario, n_agents, actions, seed=0))
        dummy = max(dummy, batched(mv.DummyVecEnv(fns, env_seed=0), actions))
        subproc = max(subproc, batched(mv.SubprocVecEnv(fns, env_seed=0, num_workers=args.workers), actions))
        fast = max(fast, batched(mv.SubprocVecEnv(fns, env_seed=0, num_workers=args.workers, autoreset="fast"), actions))
    reset_s, restore_s = reset_vs_restore(args.scenario, n_agents, args.resets)

    print(f"{args.scenario} x {args.num_envs}, {args.steps} steps, {n_agents} agents, random actions, "
          f"best of {args.repeats} rounds")
    print(f"  plain gfootball loop   {plain:8.0f} env-steps/s   1.00x")
    print(f"  DummyVecEnv            {dummy:8.0f} env-steps/s   {dummy / plain:.2f}x")
    print(f"  SubprocVecEnv ({args.workers} wkr)  {subproc:8.0f} env-steps/s   {subproc / plain:.2f}x")
    print(f"  SubprocVecEnv, fast    {fast:8.0f} env-steps/s   {fast / plain:.2f}x   (autoreset='fast')")
    print(f"  reset()                {reset_s * 1e3:8.2f} ms")
    print(f"  restore (set_state)    {restore_s * 1e3:8.2f} ms   reset/restore = {reset_s / restore_s:.2f}x")


if __name__ == "__main__":
    main()

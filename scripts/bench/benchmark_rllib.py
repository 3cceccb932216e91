"""RLlib's sampling throughput on MPE simple_spread: env-steps/s of ``EnvRunner.sample``.

Three runners, each with ``num_envs`` envs and the same tiny PPO module (one shared
module, CPU, exploration on), built directly (no Algorithm, no learner):

- ``native``: RLlib's ``MultiAgentEnvRunner`` over its own ``SyncVectorMultiAgentEnv``
  of ``ParallelPettingZooEnv``s (RLlib's multi-agent vectorization, a Python loop);
- ``face-subproc``: ``MarlVecEnvRunner`` (RLlib's sampling loop) on a SubprocVecEnv;
- ``async-subproc``: ``MarlVecAsyncEnvRunner`` on the SubprocVecEnv's first-ready pool
  (``batch_size = num_envs // 2``).

Rounds interleave the runners (so a change of machine load hits all of them), each
``sample(num_timesteps=steps_per_env * num_envs)``; the first round is a warm-up. The
load (``os.getloadavg``) is printed before and after each size; the ratios to native
are of the medians. Torch runs one thread (an env runner's CPU).

    python scripts/bench/benchmark_rllib.py --sizes 32 128 --rounds 4

Run from the repo root (``PYTHONPATH=.``). Keep it short: the 2-core machines are shared.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from functools import partial

import torch
from mpe2 import simple_spread_v3
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
from ray.rllib.env.multi_agent_env_runner import MultiAgentEnvRunner
from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv
from ray.tune.registry import register_env

from marl_vec.compat.rllib import ENV_NAME, MarlVecAsyncEnvRunner, MarlVecEnvRunner

SIMPLE_SPREAD = partial(simple_spread_v3.parallel_env, N=3, max_cycles=25)


def native_env(config: dict) -> ParallelPettingZooEnv:
    return ParallelPettingZooEnv(SIMPLE_SPREAD())


def build(kind: str, num_envs: int, workers: int) -> MultiAgentEnvRunner:
    config = (
        PPOConfig()
        .framework("torch")
        .multi_agent(policies={"shared"}, policy_mapping_fn=lambda agent_id, episode, **kw: "shared")
        .rl_module(model_config=DefaultModelConfig(fcnet_hiddens=[64, 64]))
        .env_runners(num_env_runners=0, num_envs_per_env_runner=num_envs)
        .debugging(seed=0)
    )
    if kind == "native":
        return MultiAgentEnvRunner(config=config.environment("bench_native_simple_spread"))
    backend_kwargs = {"num_workers": workers}
    cls = MarlVecEnvRunner
    if kind == "async-subproc":
        backend_kwargs["batch_size"] = num_envs // 2
        cls = MarlVecAsyncEnvRunner
    config = config.environment(ENV_NAME, env_config={"env_fn": SIMPLE_SPREAD, "backend": "subproc",
                                                      "backend_kwargs": backend_kwargs})
    return cls(config=config.env_runners(env_runner_cls=cls))


def env_steps(episodes: list) -> int:
    return sum(len(episode) for episode in episodes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[32, 128])
    parser.add_argument("--rounds", type=int, default=4, help="timed rounds per runner (after one warm-up)")
    parser.add_argument("--steps-per-env", type=int, default=10, help="env steps per env in one sample() call")
    parser.add_argument("--workers", type=int, default=2, help="SubprocVecEnv worker processes")
    args = parser.parse_args()
    register_env("bench_native_simple_spread", native_env)
    # One torch thread, as an env runner on one CPU has: on a loaded 2-core machine more
    # threads make a 96-row forward pass take tens of ms.
    torch.set_num_threads(1)
    kinds = ("native", "face-subproc", "async-subproc")
    print(f"cpus={os.cpu_count()} rounds={args.rounds} steps/env/round={args.steps_per_env} workers={args.workers}")
    for n in args.sizes:
        print(f"\n== {n} envs per runner; load before {os.getloadavg()}")
        runners = {kind: build(kind, n, args.workers) for kind in kinds}
        rates: dict[str, list[float]] = {kind: [] for kind in kinds}
        for round_ in range(args.rounds + 1):
            for kind, runner in runners.items():
                start = time.perf_counter()
                steps = env_steps(runner.sample(num_timesteps=args.steps_per_env * n))
                if round_:
                    rates[kind].append(steps / (time.perf_counter() - start))
        for runner in runners.values():
            runner.stop()
        native = statistics.median(rates["native"])
        for kind in kinds:
            r = rates[kind]
            print(f"{kind:>14}: median {statistics.median(r):8.0f} env-steps/s  (rounds {min(r):.0f}..{max(r):.0f})"
                  f"  x{statistics.median(r) / native:.2f} native")
        print(f"load after {os.getloadavg()}")


if __name__ == "__main__":
    main()

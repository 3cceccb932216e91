"""RLlib's sampling with 2 remote env runners on a local two-node Ray cluster: native vs the face.

Issue 35's cluster case. ``ray.cluster_utils.Cluster`` starts two Ray nodes on this
machine (a head and a worker node, one CPU each), so each of the two env runners (Ray
actors of one CPU) lands on its own node, as on two machines. Two PPO algorithms on
MPE simple_spread, each with 2 remote runners of ``num_envs`` envs:

- ``native``: RLlib's ``MultiAgentEnvRunner`` over its ``SyncVectorMultiAgentEnv``;
- ``face``: ``MarlVecEnvRunner`` over a marl_vec ``DummyVecEnv`` in each runner (one CPU
  per node: a SubprocVecEnv's workers would compete with the runner for that CPU).

Each round asks both runners of one algorithm for ``steps_per_env * num_envs`` env steps
at once (``foreach_env_runner``) and counts the env steps they return; the first round is a
warm-up. The cluster has one CPU per node, so the two algorithms' four runners cannot all
live at once (the second would wait for CPUs forever): they run one after the other, native
first, each stopped before the next is built. The load (``os.getloadavg``) is printed
before and after each.

    PYTHONPATH=. python scripts/bench/benchmark_rllib_cluster.py --envs 32 --rounds 4

Keep it short: the 2-core machines are shared.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from functools import partial

import ray
from mpe2 import simple_spread_v3
from ray.cluster_utils import Cluster
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv
from ray.tune.registry import register_env

from marl_vec.compat.rllib import ENV_NAME, MarlVecEnvRunner

SIMPLE_SPREAD = partial(simple_spread_v3.parallel_env, N=3, max_cycles=25)
NATIVE = "bench_cluster_simple_spread"


def native_env(config: dict) -> ParallelPettingZooEnv:
    return ParallelPettingZooEnv(SIMPLE_SPREAD())


def build(kind: str, num_envs: int):
    config = (
        PPOConfig()
        .framework("torch")
        .multi_agent(policies={"shared"}, policy_mapping_fn=lambda agent_id, episode, **kw: "shared")
        .rl_module(model_config=DefaultModelConfig(fcnet_hiddens=[64, 64]))
        .env_runners(num_env_runners=2, num_envs_per_env_runner=num_envs, num_cpus_per_env_runner=1)
        .learners(num_learners=0, num_cpus_per_learner=0)
        .debugging(seed=0)
    )
    if kind == "native":
        return config.environment(NATIVE).build_algo()
    config = config.environment(ENV_NAME, env_config={"env_fn": SIMPLE_SPREAD, "backend": "dummy"})
    return config.env_runners(env_runner_cls=MarlVecEnvRunner).build_algo()


def sample_both(algo, timesteps: int) -> tuple[int, list[str]]:
    """Both remote runners sample at once; their env steps in all, and the nodes they ran on."""
    answers = algo.env_runner_group.foreach_env_runner(
        lambda runner: (sum(len(e) for e in runner.sample(num_timesteps=timesteps)), ray.get_runtime_context().get_node_id()),
        local_env_runner=False)
    return sum(steps for steps, _ in answers), [node for _, node in answers]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--envs", type=int, default=32, help="envs per env runner")
    parser.add_argument("--rounds", type=int, default=4, help="timed rounds per algorithm (after one warm-up)")
    parser.add_argument("--steps-per-env", type=int, default=10, help="env steps per env in one sample() call")
    args = parser.parse_args()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    cluster.add_node(num_cpus=1)
    ray.init(address=cluster.address, include_dashboard=False)
    try:
        register_env(NATIVE, native_env)
        print(f"cpus={os.cpu_count()} nodes={len(ray.nodes())} envs/runner={args.envs} rounds={args.rounds}")
        print(f"load before {os.getloadavg()}")
        rates: dict[str, list[float]] = {"native": [], "face": []}
        for kind in rates:
            algo = build(kind, args.envs)
            for round_ in range(args.rounds + 1):
                start = time.perf_counter()
                steps, nodes = sample_both(algo, args.steps_per_env * args.envs)
                if round_:
                    rates[kind].append(steps / (time.perf_counter() - start))
                elif len(set(nodes)) != 2:
                    print(f"warning: {kind}'s two runners share a node ({nodes})")
            algo.stop()
            print(f"{kind} done, load {os.getloadavg()}")
        native = statistics.median(rates["native"])
        for kind, r in rates.items():
            print(f"{kind:>7}: median {statistics.median(r):8.0f} env-steps/s  (rounds {min(r):.0f}..{max(r):.0f})"
                  f"  x{statistics.median(r) / native:.2f} native")
        print(f"load after {os.getloadavg()}")
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    main()

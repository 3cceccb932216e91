"""Short RLlib PPO runs (new API stack, torch, CPU, local env runner) on MPE simple_spread,
natively or through marl_vec's RLlib face, recording what they sampled and learned.

A run returns every sampled episode chunk (per agent: observations, actions, rewards,
flags, the action log-probabilities) and the learned parameters, so two runs can be
compared value for value.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
from mpe2 import simple_spread_v3
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv
from ray.tune.registry import register_env

from marl_vec.compat.rllib import ENV_NAME, MarlVecEnvRunner

SIMPLE_SPREAD = partial(simple_spread_v3.parallel_env, N=3, max_cycles=25)
NATIVE = "native_simple_spread"

_SAMPLED: list[Any] = []


def record_samples(*, samples: list, **kwargs: Any) -> None:
    """An ``on_sample_end`` callback: keep what each ``sample()`` returned, comparably."""
    for episode in samples:
        chunk = [episode.env_t_started, episode.env_t, episode.is_terminated, episode.is_truncated]
        for agent, sa in sorted(episode.agent_episodes.items()):
            chunk.append((agent, np.asarray(sa.get_observations()), np.asarray(sa.get_actions()),
                          np.asarray(sa.get_rewards()), sa.is_terminated, sa.is_truncated,
                          np.asarray(sa.get_extra_model_outputs("action_logp"))))
        _SAMPLED.append(chunk)


def ppo_config(env: str, num_envs: int = 1, backend: str = "dummy", env_fn: Callable = SIMPLE_SPREAD,
               seed: int = 7, fragment: int = 100) -> PPOConfig:
    """A tiny PPO: one shared module, ``num_envs`` envs on the local runner, ``fragment`` steps each."""
    config = (
        PPOConfig()
        .framework("torch")
        .multi_agent(policies={"shared"}, policy_mapping_fn=lambda agent_id, episode, **kw: "shared")
        .training(train_batch_size=fragment * num_envs, minibatch_size=fragment * num_envs // 2, num_epochs=2,
                  lr=1e-3)
        .rl_module(model_config=DefaultModelConfig(fcnet_hiddens=[16]))
        .callbacks(on_sample_end=record_samples)
        .debugging(seed=seed)
    )
    runners = {"num_env_runners": 0, "num_envs_per_env_runner": num_envs, "rollout_fragment_length": fragment}
    if env == "face":
        return (config.environment(ENV_NAME, env_config={"env_fn": env_fn, "backend": backend})
                .env_runners(env_runner_cls=MarlVecEnvRunner, **runners))
    # Registered at each call, not at import: Tune's registry keeps a name in the Ray cluster
    # running when it is registered (or the next one started), and an earlier test module's
    # cluster, shut down since, would take it away with it.
    register_env(NATIVE, lambda config: ParallelPettingZooEnv(SIMPLE_SPREAD()))
    return config.environment(NATIVE).env_runners(**runners)


# The sampling counts an env runner reports (RLlib's _increase_sampled_metrics logs them).
COUNTS = ("num_env_steps_sampled", "num_env_steps_sampled_lifetime", "num_episodes", "num_episodes_lifetime",
          "num_agent_steps_sampled", "num_agent_steps_sampled_lifetime", "num_module_steps_sampled",
          "num_module_steps_sampled_lifetime")


def train(config: PPOConfig, iterations: int = 3,
          counts: list | None = None) -> tuple[list, dict[str, np.ndarray], list[float]]:
    """Run ``iterations`` training iterations; return the sampled chunks, the learned
    parameters (learner's module) and each iteration's mean episode return. ``counts``:
    each iteration's sampling counts (`COUNTS`) are appended to it."""
    _SAMPLED.clear()
    algo = config.build_algo()
    try:
        returns = []
        for _ in range(iterations):
            runners = algo.train()["env_runners"]
            returns.append(runners.get("episode_return_mean", np.nan))
            if counts is not None:
                counts.append({k: runners.get(k) for k in COUNTS})
        params = {k: v.detach().cpu().numpy().copy() for k, v in algo.get_module("shared").state_dict().items()}
    finally:
        algo.stop()
    return list(_SAMPLED), params, returns


def assert_same_runs(ours: tuple, theirs: tuple) -> None:
    """Same sampled chunks (every value), same parameters, same returns."""
    sampled_o, params_o, returns_o = ours
    sampled_t, params_t, returns_t = theirs
    assert len(sampled_o) == len(sampled_t) > 0
    for c, (a, b) in enumerate(zip(sampled_o, sampled_t)):
        assert a[:4] == b[:4], f"chunk {c}: (env_t_started, env_t, terminated, truncated) {a[:4]} != {b[:4]}"
        assert [x[0] for x in a[4:]] == [x[0] for x in b[4:]], f"chunk {c}: agents differ"
        for x, y in zip(a[4:], b[4:]):
            for field, u, v in zip(("obs", "actions", "rewards", "terminated", "truncated", "action_logp"),
                                   x[1:], y[1:]):
                np.testing.assert_array_equal(u, v, err_msg=f"chunk {c} agent {x[0]}: {field}")
    assert sorted(params_o) == sorted(params_t)
    for name in params_t:
        np.testing.assert_array_equal(params_o[name], params_t[name], err_msg=name)
    np.testing.assert_array_equal(returns_o, returns_t)

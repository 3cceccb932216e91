"""MarlVecEnvRunner: RLlib's ``MultiAgentEnvRunner`` sampling a marl_vec batch.

RLlib 2.60's ``MultiAgentEnvRunner.make_env`` always builds its vector env with
``ray.rllib.env.vector.registration.make_vec``, which makes a
``SyncVectorMultiAgentEnv`` (a Python loop over the envs) and refuses any other
vectorize mode ("For `MultiAgentEnv` only synchronous environment vectorization is
implemented"). No setting swaps that vector env; the runner class is the hook RLlib
documents (``config.env_runners(env_runner_cls=...)``). This subclass overrides
``make_env`` only: it builds a
[`MarlVecMultiAgentEnv`][marl_vec.compat.rllib.vector_env.MarlVecMultiAgentEnv] over a marl_vec
batch of ``num_envs_per_env_runner`` envs, described by ``config.environment("marl_vec",
env_config={...})`` (keys in `marl_vec.compat.rllib.batch`). Sampling, episodes,
connectors, callbacks, metrics and checkpoints are RLlib's own code, unchanged.

Examples:
    ```python
    from functools import partial
    from mpe2 import simple_spread_v3
    from ray.rllib.algorithms.ppo import PPOConfig
    from marl_vec.compat.rllib import ENV_NAME, MarlVecEnvRunner

    config = (
        PPOConfig()
        .environment(ENV_NAME, env_config={"env_fn": partial(simple_spread_v3.parallel_env, N=3),
                                           "backend": "subproc"})
        .env_runners(env_runner_cls=MarlVecEnvRunner, num_env_runners=0, num_envs_per_env_runner=8)
        .multi_agent(policies={"shared"}, policy_mapping_fn=lambda agent_id, episode, **kw: "shared")
    )
    ```
"""

from __future__ import annotations

import logging

from ray.rllib.callbacks.utils import make_callback
from ray.rllib.env.env_context import EnvContext
from ray.rllib.env.multi_agent_env_runner import MultiAgentEnvRunner

from marl_vec.compat.rllib.batch import parse_env_config
from marl_vec.compat.rllib.vector_env import MarlVecMultiAgentEnv

logger = logging.getLogger(__name__)

ENV_NAME = "marl_vec"


class MarlVecEnvRunner(MultiAgentEnvRunner):
    """RLlib's ``MultiAgentEnvRunner`` whose vector env is a marl_vec batch (``autoreset="next_step"``)."""

    _autoreset = "next_step"  # the mode RLlib's sampling loop assumes

    def make_env(self) -> None:
        """Build the marl_vec batch that ``config.env_config`` describes (replacing any earlier one)."""
        if self.env is not None:
            try:
                self.env.close()
            except Exception as error:  # noqa: BLE001 - a broken batch must not stop building the new one
                logger.warning("closing the old marl_vec batch failed: %r", error)
            self.env = None
        if self.config.env != ENV_NAME:
            raise ValueError(
                f"MarlVecEnvRunner samples marl_vec batches: configure them with "
                f"config.environment({ENV_NAME!r}, env_config={{'env_fn': ..., 'backend': ...}}), "
                f"not env={self.config.env!r}")
        env_ctx = self.config.env_config
        if not isinstance(env_ctx, EnvContext):
            env_ctx = EnvContext(env_ctx, worker_index=self.worker_index, num_workers=self.config.num_env_runners,
                                 remote=self.config.remote_worker_envs)
        options = parse_env_config(dict(env_ctx))
        venv = options.make(self.config.num_envs_per_env_runner, autoreset=self._autoreset)
        self.env = MarlVecMultiAgentEnv(venv, action_mask=options.action_mask, global_state=options.global_state,
                                        obs_dtype=options.obs_dtype)
        self.num_envs = self.env.num_envs
        self._needs_initial_reset = True
        make_callback(
            "on_environment_created",
            callbacks_objects=self._callbacks,
            callbacks_functions=self.config.callbacks_on_environment_created,
            kwargs=dict(env_runner=self, metrics_logger=self.metrics, env=self.env.unwrapped, env_context=env_ctx),
        )

"""MarlVecEnvRunner: RLlib's ``MultiAgentEnvRunner`` sampling a marl_vec batch.

RLlib 2.60's ``MultiAgentEnvRunner.make_env`` always builds its vector env with
``ray.rllib.env.vector.registration.make_vec``, which makes a
``SyncVectorMultiAgentEnv`` (a Python loop over the envs) and refuses any other
vectorize mode ("For `MultiAgentEnv` only synchronous environment vectorization is
implemented"). No setting swaps that vector env; the runner class is the hook RLlib
documents (``config.env_runners(env_runner_cls=...)``). This subclass overrides
``make_env`` only: it builds a
[`MarlVecMultiAgentEnv`][marl_vec.compat.rllib.vector_env.MarlVecMultiAgentEnv] over a marl_vec
batch of ``num_envs_per_env_runner`` envs. Sampling, episodes, connectors, callbacks,
metrics and checkpoints are RLlib's own code, unchanged.

The envs are either RLlib's own env spec, unchanged (a registered name, a
``MultiAgentEnv`` class or a creator, with its ``env_config``: a config changes only its
``env_runner_cls``; the batch's options come from
[`with_batch`][marl_vec.compat.rllib.env_runner.MarlVecEnvRunner.with_batch]), or
``config.environment("marl_vec", env_config={...})`` with any env marl_vec takes (keys in
`marl_vec.compat.rllib.batch`).

Examples:
    ```python
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.examples.envs.classes.multi_agent import MultiAgentCartPole
    from marl_vec.compat.rllib import MarlVecEnvRunner

    config = (
        PPOConfig()
        .environment(MultiAgentCartPole, env_config={"num_agents": 2})
        .env_runners(env_runner_cls=MarlVecEnvRunner.with_batch(backend="subproc"), num_envs_per_env_runner=8)
        .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=lambda agent_id, episode, **kw: f"p{agent_id}")
    )
    ```

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
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from ray.rllib.callbacks.utils import make_callback
from ray.rllib.env.env_context import EnvContext
from ray.rllib.env.multi_agent_env_runner import MultiAgentEnvRunner
from ray.rllib.env.utils import _gym_env_creator
from ray.tune.registry import ENV_CREATOR, _global_registry

from marl_vec.compat.rllib.batch import parse_env_config
from marl_vec.compat.rllib.vector_env import MarlVecMultiAgentEnv

logger = logging.getLogger(__name__)

ENV_NAME = "marl_vec"


class MarlVecEnvRunner(MultiAgentEnvRunner):
    """RLlib's ``MultiAgentEnvRunner`` whose vector env is a marl_vec batch (``autoreset="next_step"``).

    ``config.env`` is RLlib's own env spec, unchanged: a name registered with
    ``ray.tune.registry.register_env``, a ``MultiAgentEnv`` class or a creator taking
    ``env_config``; each env of the batch is made as RLlib's runner makes it, and wrapped by
    [`RLlibAdapter`][marl_vec.envs.rllib.RLlibAdapter]. The batch's own options (backend, ...)
    are then this class's ``batch_options`` (see [`with_batch`][marl_vec.compat.rllib.env_runner.MarlVecEnvRunner.with_batch]).
    ``config.env == "marl_vec"`` instead takes every option, ``env_fn`` included, from
    ``env_config`` (`marl_vec.compat.rllib.batch`).
    """

    _autoreset = "next_step"  # the mode RLlib's sampling loop assumes
    # The batch's options where config.env is RLlib's env spec (keys of env_config for "marl_vec", env_fn aside).
    batch_options: Mapping[str, Any] = {}

    @classmethod
    def with_batch(cls, **options: Any) -> type[MarlVecEnvRunner]:
        """This runner class with the batch options ``options`` (``backend``, ``backend_kwargs``,
        ``reward_dtype``, ...: the keys of `marl_vec.compat.rllib.batch` but ``env_fn``) for RLlib's
        own env specs; checked now.

        Examples:
            >>> runner_cls = MarlVecEnvRunner.with_batch(backend="subproc", backend_kwargs={"num_workers": 2})
            >>> runner_cls.batch_options["backend"]
            'subproc'
        """
        if "env_fn" in options:
            raise ValueError("with_batch() takes the batch's options; the env is config.environment(...)'s own")
        parse_env_config({**options, "env_fn": _check_only})
        return type(cls.__name__, (cls,), {"batch_options": dict(options), "__module__": cls.__module__})

    def make_env(self) -> None:
        """Build the marl_vec batch that ``config.env`` and ``config.env_config`` describe (replacing any earlier one)."""
        if self.env is not None:
            try:
                self.env.close()
            except Exception as error:  # noqa: BLE001 - a broken batch must not stop building the new one
                logger.warning("closing the old marl_vec batch failed: %r", error)
            self.env = None
        env_ctx = self.config.env_config
        if not isinstance(env_ctx, EnvContext):
            env_ctx = EnvContext(env_ctx, worker_index=self.worker_index, num_workers=self.config.num_env_runners,
                                 remote=self.config.remote_worker_envs)
        if self.config.env == ENV_NAME:
            options = parse_env_config(dict(env_ctx))
        else:
            options = parse_env_config({**self.batch_options, "env_fn": rllib_env_fn(self.config.env, env_ctx)})
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


def _check_only() -> None:
    """A stand-in env_fn for checking batch options (never called)."""


def rllib_env_fn(env: Any, env_ctx: EnvContext) -> Callable[[], Any]:
    """A picklable zero-argument env_fn making one env of RLlib's env spec ``env``, as RLlib's
    ``MultiAgentEnvRunner.make_env`` makes it: a registered name's creator, else RLlib's
    ``_gym_env_creator`` (a class or creator called with ``env_ctx``; a gymnasium id made)."""
    if not env:
        raise ValueError("config.env is not set: give config.environment() RLlib's env (a name registered with "
                         "ray.tune.registry.register_env, a MultiAgentEnv class or a creator), or 'marl_vec' with "
                         "env_config={'env_fn': ...}")
    if isinstance(env, str) and _global_registry.contains(ENV_CREATOR, env):
        # Resolved here: a process backend's workers do not see this process's registry.
        return partial(_global_registry.get(ENV_CREATOR, env), env_ctx)
    if not isinstance(env, str) and not callable(env):
        raise TypeError(f"config.env must be a registered env name, a MultiAgentEnv class or a creator, not {env!r}")
    return partial(_gym_env_creator, env_context=env_ctx, env_descriptor=env)

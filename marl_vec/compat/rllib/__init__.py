"""marl_vec as RLlib's multi-agent vector env (extra ``rllib``; imports ray.rllib).

- [`MarlVecMultiAgentEnv`][marl_vec.compat.rllib.vector_env.MarlVecMultiAgentEnv]: a marl_vec batch
  (any backend, ``autoreset="next_step"``) as RLlib's ``VectorMultiAgentEnv``.
- [`MarlVecEnvRunner`][marl_vec.compat.rllib.env_runner.MarlVecEnvRunner]: RLlib's
  ``MultiAgentEnvRunner`` with that vector env (``config.env_runners(env_runner_cls=...)``),
  over RLlib's own env spec unchanged (a registered name, a ``MultiAgentEnv`` class or a
  creator, with ``env_config``; batch options from ``MarlVecEnvRunner.with_batch``) or
  ``config.environment(ENV_NAME, env_config={...})`` (keys in `marl_vec.compat.rllib.batch`).
- [`MarlVecAsyncEnvRunner`][marl_vec.compat.rllib.async_runner.MarlVecAsyncEnvRunner]: the same on
  marl_vec's async pool (``send``/``recv``, first-ready batches; ``subproc``/``ray`` backends).
- [`Translator`][marl_vec.compat.rllib.translate.Translator]: batch rows <-> RLlib's per-env dicts.

See docs/faces/rllib.md.
"""

from marl_vec.compat.rllib.async_runner import MarlVecAsyncEnvRunner
from marl_vec.compat.rllib.batch import BatchOptions, parse_env_config
from marl_vec.compat.rllib.env_runner import ENV_NAME, MarlVecEnvRunner
from marl_vec.compat.rllib.translate import Translator
from marl_vec.compat.rllib.vector_env import MarlVecMultiAgentEnv, Seat

__all__ = ["ENV_NAME", "BatchOptions", "MarlVecAsyncEnvRunner", "MarlVecEnvRunner", "MarlVecMultiAgentEnv", "Seat",
           "Translator", "parse_env_config"]

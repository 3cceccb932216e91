"""RLlib's new API stack imports and builds on gymnasium 1.4: the `rllib` extra installs
ray[rllib]'s runtime dependencies without its `gymnasium==1.2.2` pin (issue 35, packaging)."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("ray", reason="the rllib extra is not installed: pip install 'marl_vec[rllib]'")

PROBE = """
import gymnasium
assert gymnasium.__version__.startswith("1.4"), gymnasium.__version__
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.env.multi_agent_env import MultiAgentEnv
from ray.rllib.env.multi_agent_env_runner import MultiAgentEnvRunner
from ray.rllib.env.multi_agent_episode import MultiAgentEpisode
from ray.rllib.env.vector.sync_vector_multi_agent_env import SyncVectorMultiAgentEnv
from ray.rllib.env.vector.vector_multi_agent_env import VectorMultiAgentEnv
from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv
assert issubclass(SyncVectorMultiAgentEnv, VectorMultiAgentEnv)
config = PPOConfig().environment("CartPole-v1").framework("torch")
assert config.enable_rl_module_and_learner, "the new API stack is the default"
print("ok")
"""


def test_rllib_new_api_stack_imports_on_gymnasium_1_4():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().endswith("ok")

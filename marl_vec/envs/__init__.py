"""Adapters: one module per env family; see `marl_vec.envs.registry`."""

from marl_vec.envs.base import MultiAgentEnv
from marl_vec.envs.registry import FAMILIES, MissingExtraError, as_adapter, make_env, make_env_fn

__all__ = ["MultiAgentEnv", "FAMILIES", "MissingExtraError", "as_adapter", "make_env", "make_env_fn"]

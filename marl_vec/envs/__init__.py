"""Adapters: one module per env family; see `marl_vec.envs.registry`.

The adapter contract itself lives in the core (`marl_vec.core.adapter`); its names are
public here too, so that an adapter written for marl_vec imports them from one place.
"""

from marl_vec.core.adapter import GroupStepper, MultiAgentEnv, NativeEnvAdapter, one_agent_spec
from marl_vec.envs.registry import (FAMILIES, AdapterFn, MissingExtraError, adapter_fns, as_adapter, make_env,
                                    make_env_fn)

__all__ = ["MultiAgentEnv", "NativeEnvAdapter", "GroupStepper", "one_agent_spec", "FAMILIES", "MissingExtraError",
           "AdapterFn", "adapter_fns", "as_adapter", "make_env", "make_env_fn"]

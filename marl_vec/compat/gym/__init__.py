"""The gymnasium face: ``vector`` (GymVectorEnv), with ``spaces`` (the single-env spaces it
shows) and ``batching`` (how a batch's trees become gymnasium's batched arrays)."""

from marl_vec.compat.gym.vector import (AUTORESET_MODES, GymVectorEnv, action_space_of, agent_zero, final_obs_of,
                                        gym_batch, object_column, observation_space_of)

__all__ = ["GymVectorEnv", "AUTORESET_MODES", "observation_space_of", "action_space_of", "agent_zero", "final_obs_of",
           "gym_batch", "object_column"]

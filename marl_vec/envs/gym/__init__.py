"""Any single-agent gymnasium env as a one-agent env (family ``gym``).

Its modules, one idea each: ``actions`` (which action spaces are taken, as action
specs; the PettingZoo adapters use it for each agent's), ``adapter`` (``GymAdapter``,
``make_gym``), ``group_stepper`` (a group of gymnasium envs stepped in one loop) and
``wrapper_chain`` (which of ``gym.make``'s wrappers only check, and the step below
them). See docs/families/gymnasium.md.
"""

from marl_vec.envs.gym.actions import ALLOWED_ACTIONS, ALLOWED_GYM_ACTIONS, action_spec_of
from marl_vec.envs.gym.adapter import GymAdapter, episode_limit_of, make_gym
from marl_vec.envs.gym.group_stepper import _GymGroupStepper, _write_flags, _write_rewards

__all__ = ["ALLOWED_ACTIONS", "ALLOWED_GYM_ACTIONS", "GymAdapter", "action_spec_of", "episode_limit_of", "make_gym",
           "_GymGroupStepper", "_write_flags", "_write_rewards"]

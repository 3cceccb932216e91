"""Multi-Agent MuJoCo (family ``mamujoco``): gymnasium-robotics' ``mamujoco_v1`` scenarios.

Its modules, one idea each: ``family`` (the ids, their splits and ``make_mamujoco``),
``adapter`` (the PettingZoo adapter with the state, episode limit and step of a
MaMuJoCo env) and ``compiled_step`` (the library's step with its observation and
action maps planned once). See docs/families/mamujoco.md.
"""

from marl_vec.envs.mamujoco.adapter import MaMuJoCoAdapter
from marl_vec.envs.mamujoco.family import SPLITS, ant_8x1, make_mamujoco, parse_id

__all__ = ["MaMuJoCoAdapter", "SPLITS", "ant_8x1", "make_mamujoco", "parse_id"]

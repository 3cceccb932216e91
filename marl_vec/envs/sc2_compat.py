"""Where ``import_pysc2`` used to live: now `marl_vec.envs.starcraft2.pysc2_shim`.

Kept so that ``from marl_vec.envs.sc2_compat import import_pysc2`` (scripts,
older code) keeps working. Imports that module only.
"""

from marl_vec.envs.starcraft2.pysc2_shim import import_pysc2, install_shim, legacy_shuffle

__all__ = ["import_pysc2", "install_shim", "legacy_shuffle"]

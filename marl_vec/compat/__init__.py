"""Faces of marl_vec for other ecosystems.

- [`GymVectorEnv`][marl_vec.compat.gym.vector.GymVectorEnv]: a ``gymnasium.vector.VectorEnv`` over any single-agent
  marl_vec VecEnv, so gymnasium-based trainers (CleanRL style) run unchanged.
- [`BatchOfOne`][marl_vec.compat.batch_of_one.BatchOfOne]: one ``gymnasium.Env`` as a batch of size 1, with
  gymnasium's next-step autoreset.
- [`SB3VecEnv`][marl_vec.compat.sb3.SB3VecEnv]: a Stable-Baselines3 ``VecEnv`` (extra ``sb3``; imported on first use).
- [`TorchRLEnv`][marl_vec.compat.torchrl.TorchRLEnv]: a TorchRL multi-agent ``EnvBase`` (extra ``torchrl``), and
  ``marl_vec.compat.benchmarl.MarlVecTask``: any marl_vec config as a BenchMARL task
  (extra ``benchmarl``); not re-exported here, because it builds its envs from
  marl_vec configs, a layer above the faces.
- [`XuanCeVecEnv`][marl_vec.compat.xuance.XuanCeVecEnv]: XuanCe's multi-agent vec env (``DummyVecMultiAgentEnv``) over any
  marl_vec VecEnv (extra ``xuance``, in its own venv: numpy<2, gymnasium<1.3).
- [`OpponentSeat`][marl_vec.compat.opponent.OpponentSeat]: a turn-based game seen from one seat against a fixed opponent
  (what SB3VecEnv and GymVectorEnv serve a turn-based batch through; ``opponent=``).
- [`AgileRLVecEnv`][marl_vec.compat.agilerl.AgileRLVecEnv]: AgileRL's multi-agent ``PettingZooVecEnv`` (extra ``agilerl``, in a
  venv of its own; imported on first use).
- [`TianshouVectorEnv`][marl_vec.compat.tianshou.TianshouVectorEnv]: a Tianshou ``BaseVectorEnv`` (extra ``tianshou``, in a venv of
  its own: scripts/install/install_tianshou_venv.sh; imported on first use).
- ``marl_vec.compat.pymarl``: the PyMARL school's env face (``PyMARLEnv``) and runner face
  (``MarlVecRunner``), put into pymarlzooplus's / EPyMARL's registries by ``register()``
  (in .venv-pymarl: scripts/install/install_pymarl_venv.sh); not re-exported here, because they
  build their envs from marl_vec configs, a layer above the faces.

Examples:
    >>> import gymnasium as gym
    >>> import marl_vec as mv
    >>> from marl_vec.compat import GymVectorEnv
    >>> envs = GymVectorEnv(mv.DummyVecEnv([lambda: gym.make("CartPole-v1")] * 2))
    >>> obs, infos = envs.reset(seed=0)
    >>> obs.shape, envs.single_action_space
    ((2, 4), Discrete(2))
    >>> envs.close()
"""

from marl_vec.compat.batch_of_one import BatchOfOne
from marl_vec.compat.gym.vector import GymVectorEnv
from marl_vec.compat.opponent import OpponentSeat, RandomLegal
from marl_vec.compat.xuance import XuanCeVecEnv

__all__ = ["GymVectorEnv", "BatchOfOne", "OpponentSeat", "RandomLegal", "SB3VecEnv", "TorchRLEnv", "XuanCeVecEnv",
           "AgileRLVecEnv", "TianshouVectorEnv"]


def __getattr__(name: str) -> object:
    # SB3VecEnv imports stable_baselines3 (and torch): only when asked for.
    if name == "SB3VecEnv":
        from marl_vec.compat.sb3 import SB3VecEnv

        return SB3VecEnv
    if name == "TorchRLEnv":  # imports torch and torchrl
        from marl_vec.compat.torchrl import TorchRLEnv

        return TorchRLEnv
    if name == "AgileRLVecEnv":
        from marl_vec.compat.agilerl import AgileRLVecEnv

        return AgileRLVecEnv
    if name == "TianshouVectorEnv":  # imports tianshou (and torch)
        from marl_vec.compat.tianshou import TianshouVectorEnv

        return TianshouVectorEnv
    raise AttributeError(f"module 'marl_vec.compat' has no attribute {name!r}")

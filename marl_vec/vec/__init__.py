"""Backends: where the EnvGroups of a batch run."""

from marl_vec.vec.base import ClosedEnvError, StepResult, VecEnv
from marl_vec.vec.dummy import DummyVecEnv

__all__ = ["ClosedEnvError", "StepResult", "VecEnv", "DummyVecEnv"]

"""SubprocVecEnv: EnvGroups in worker processes over shared memory.

The parts: ``vec_env`` (the class), ``lifecycle`` (start, attach, close), ``transport``
(signals over pipes, the shared block), ``local`` (the block this process steps itself),
``pool`` (send/recv) and ``faults`` (dead or failing workers).
"""

from marl_vec.vec.subproc.vec_env import (PoolNotReadyError, PoolStepResult, SubprocVecEnv, WorkerDiedError,
                                          WorkerError, default_start_method)

__all__ = ["SubprocVecEnv", "PoolStepResult", "PoolNotReadyError", "WorkerError", "WorkerDiedError",
           "default_start_method"]

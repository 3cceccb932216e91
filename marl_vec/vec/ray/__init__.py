"""RayVecEnv: EnvGroups in Ray actors, for batches larger than one machine.

The parts: ``vec_env`` (the class), ``actor`` (what runs in each actor), ``transport`` and
``link`` (how blocks travel), ``session`` (the cluster it started or joined), ``pool``
(send/recv), ``faults`` (dead actors) and ``options`` (actor resources).
"""

from marl_vec.vec.ray.vec_env import TRANSPORTS, RayVecEnv, RayWorkerError

__all__ = ["RayVecEnv", "RayWorkerError", "TRANSPORTS"]

"""marl_vec: many copies of a multi-agent environment as one batch.

```python
import marl_vec as mv
venv = mv.make("mpe/simple_spread", num_envs=4)
```
"""

from marl_vec import envs
from marl_vec.core.episode import AutoresetMode
from marl_vec.core.errors import PoolNotReadyError, SetupError
from marl_vec.tools.episode_runner import EpisodeBatch, EpisodeRunner
from marl_vec.core.group import EnvFinishedError
from marl_vec.core.spec import ContinuousAction, DiscreteAction, EnvSpec, SpecMismatchError
from marl_vec.vec.base import ClosedEnvError, StepResult, VecEnv
from marl_vec.vec.dummy import DummyVecEnv
from marl_vec.vec.factory import make_vec
from marl_vec.vec.turns import WAIT

__version__ = "0.1.0"

__all__ = [
    "envs",
    "make",
    "make_vec",
    "load_config",
    "ConfigError",
    "SetupError",
    "AutoresetMode",
    "EpisodeRunner",
    "EpisodeBatch",
    "EnvFinishedError",
    "ClosedEnvError",
    "PoolNotReadyError",
    "EnvSpec",
    "SpecMismatchError",
    "DiscreteAction",
    "ContinuousAction",
    "StepResult",
    "VecEnv",
    "DummyVecEnv",
    "SubprocVecEnv",
    "RayVecEnv",
    "WAIT",
    "tune",
]


def __getattr__(name: str):
    # The config layer (pydantic, yaml: ~6 MB) loads on first use too: a trainer that
    # builds its VecEnv from env_fns, and every worker process it forks, never holds it.
    if name in ("ConfigError", "load_config", "make"):
        from marl_vec.tools import config

        return getattr(config, name)
    if name == "tune":  # the tuner loads on first use, as the backends do
        from marl_vec.tools.tuner import tune

        return tune
    # Process and Ray backends load on first use: importing marl_vec stays cheap.
    if name in ("SubprocVecEnv", "RayVecEnv"):
        from marl_vec.vec.factory import backend_class

        return backend_class({"SubprocVecEnv": "subproc", "RayVecEnv": "ray"}[name])
    raise AttributeError(f"module 'marl_vec' has no attribute {name!r}")

"""MarlVecTask: any marl_vec config as a BenchMARL task (extra ``benchmarl``).

BenchMARL builds its envs from a `benchmarl.environments.TaskClass`; this one
builds a [`marl_vec.compat.torchrl.TorchRLEnv`][marl_vec.compat.torchrl.TorchRLEnv] over ``marl_vec.make(config)``:

- ``num_envs`` from BenchMARL (its ``n_envs_per_worker`` / ``evaluation_episodes``)
  becomes ``vec.num_envs``; ``seed`` becomes ``vec.env_seed``: env i is seeded ``seed + i``.
  Env 0 is seeded as BenchMARL's native PettingZoo task seeds its env. With 2 or more
  envs per worker the native batching (a ``SerialEnv`` of envs each made with ``seed``)
  gives every env the same seed, so they play copies of one episode stream; here each env
  has its own (tests/faces/test_benchmarl.py checks both rules).
  ``vec.autoreset`` is ``same_step`` (or ``fast``, task config key ``autoreset``); the
  backend is the config's.
- Continuous or discrete actions: where the config's ``env.kwargs`` has a
  ``continuous_actions`` key (MPE), both are supported and BenchMARL's choice is
  written there; otherwise the env's own action type is the only one.
- ``max_steps`` is the env's ``episode_limit`` (or ``max_steps`` in the task config);
  groups (task config key ``group_map``): by default the native task's, so that native
  checkpoints load: for the ``pettingzoo`` family ``"prefix"`` (TorchRL's
  ``PettingZooWrapper`` groups ``agent_0..2`` as ``"agent"``), for the other families one
  group ``"agents"`` (as BenchMARL's VMAS and SMACv2 tasks); or ``"prefix"``,
  ``"agents"`` (one group) or a dict ``{group: [agent ids]}``; specs split as BenchMARL's
  PettingZoo task splits them, without the env axis (as its VMAS task).

Task config keys: ``config`` (a YAML path, a shipped config name such as
``"mpe/simple_spread"``, or a config dict; required), ``group_map``, ``max_steps``,
``backend`` (overrides ``vec.backend``), ``autoreset`` (``same_step``, the default, or
``fast``: Football restores a snapshot instead of resetting), ``render`` (BenchMARL may call ``render()``;
default False).

Examples:
    >>> from benchmarl.algorithms import MappoConfig
    >>> from benchmarl.experiment import Experiment, ExperimentConfig
    >>> from benchmarl.models import MlpConfig
    >>> from marl_vec.compat.benchmarl import MarlVecTask
    >>> task = MarlVecTask.from_config("mpe/simple_spread")  # groups as native: {"agent": [agent_0..2]}
    >>> experiment = Experiment(task=task, algorithm_config=MappoConfig.get_from_yaml(),
    ...     model_config=MlpConfig.get_from_yaml(), critic_model_config=MlpConfig.get_from_yaml(),
    ...     seed=0, config=ExperimentConfig.get_from_yaml())
    >>> experiment.run()
"""

from __future__ import annotations

import copy
import os
import re
from typing import Any, Callable, Mapping

from marl_vec.envs.extras import missing_extra_message

try:
    import torch
    from benchmarl.environments.common import TaskClass
    from torchrl.data import Composite
    from torchrl.envs import DoubleToFloat, EnvBase, FlattenObservation, Transform
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(missing_extra_message("benchmarl", "benchmarl", "MarlVecTask", exc)) from exc

from marl_vec.compat.torchrl import TorchRLEnv
from marl_vec.tools.config import Config, load_config, make_from_config

_KEYS = frozenset(("config", "group_map", "max_steps", "backend", "autoreset", "render"))
# TorchRLEnv needs the next episode's start in the same step: these two modes give it.
# The probe that reads the action type: one env in this process, without the config's
# process-only options (a subproc config's num_workers would be refused by DummyVecEnv).
_PROBE = {"vec.num_envs": 1, "vec.backend": "dummy", "vec.num_workers": None, "vec.start_method": None,
          "vec.step_in_main": False, "vec.spin_us": 0.0, "vec.batch_size": None}
_AUTORESETS = ("same_step", "fast")


class MarlVecTask(TaskClass):
    """A BenchMARL task over a marl_vec config; see the module docstring.

    Args:
        name: the task's name (BenchMARL uses it in folder and logger names): letters,
            digits, ``_`` and ``-`` only (no ``/``).
        config: the task config: ``{"config": <marl_vec config>, ...}``.
    """

    def __init__(self, name: str, config: Mapping[str, Any]):
        if not re.fullmatch(r"[A-Za-z0-9_\-]+", name or ""):
            raise ValueError(f"task name must be letters, digits, '_' or '-' (no '/'), got {name!r}")
        config = dict(config or {})
        unknown = set(config) - _KEYS
        if unknown:
            raise ValueError(f"unknown MarlVecTask config keys {sorted(unknown)}; allowed: {sorted(_KEYS)}")
        if "config" not in config:
            raise ValueError("MarlVecTask config needs 'config': a marl_vec YAML path, shipped name or dict")
        if config.get("autoreset", "same_step") not in _AUTORESETS:
            raise ValueError(f"MarlVecTask autoreset must be one of {list(_AUTORESETS)}, got {config['autoreset']!r}")
        source = config["config"]
        if isinstance(source, os.PathLike):
            config["config"] = source = os.fspath(source)
        # Validate now (a misspelt key fails here, not in the middle of BenchMARL's setup).
        self._cfg: Config = load_config(source)
        super().__init__(name=name, config=config)
        self._discrete: bool | None = None

    @classmethod
    def from_config(cls, source: Any, name: str | None = None, **task_config: Any) -> "MarlVecTask":
        """The task for a marl_vec config; its name defaults to the env id, made path-safe.

        ```pycon
        >>> MarlVecTask.from_config("mpe/simple_spread").name
        'mpe2_simple_spread_v3'
        ```
        """
        cfg = load_config(source)
        if name is None:
            name = re.sub(r"[^A-Za-z0-9_\-]+", "_", cfg.env.id).strip("_") or "marl_vec"
        return cls(name, {"config": source, **task_config})

    # -- building envs ---------------------------------------------------------------------

    def _has_action_switch(self) -> bool:
        return "continuous_actions" in (self._cfg.env.kwargs or {})

    def _env_config(self, num_envs: int, seed: int | None, continuous_actions: bool | None) -> Config:
        overrides: dict[str, Any] = {"vec.num_envs": num_envs,
                                     "vec.autoreset": self.config.get("autoreset", "same_step")}
        if seed is not None:
            overrides["vec.env_seed"] = seed
        if "backend" in self.config:
            overrides["vec.backend"] = self.config["backend"]
        if continuous_actions is not None and self._has_action_switch():
            overrides["env.kwargs.continuous_actions"] = continuous_actions
        return load_config(self.config["config"], overrides)

    def get_env_fun(self, num_envs: int, continuous_actions: bool, seed: int | None,
                    device: Any) -> Callable[[], EnvBase]:
        cfg = self._env_config(num_envs, seed, continuous_actions)
        group_map = self._group_map()
        return lambda: TorchRLEnv(make_from_config(cfg), group_map=group_map, seed=seed, device=device)

    def _group_map(self) -> Any:
        """TorchRLEnv's group_map for the task config's: None (the native task's), "agents", "prefix" or a dict."""
        group_map = copy.deepcopy(self.config.get("group_map"))
        if group_map is None:  # the native task's groups, so that its checkpoints load
            return "prefix" if self._cfg.env.family == "pettingzoo" else None
        return None if group_map == "agents" else group_map

    def _action_is_discrete(self) -> bool:
        if self._discrete is None:
            # Known only from the env itself: build one copy in this process, once.
            probe = make_from_config(load_config(self.config["config"], _PROBE))
            try:
                self._discrete = probe.spec.discrete
            finally:
                probe.close()
        return self._discrete

    def supports_continuous_actions(self) -> bool:
        return self._has_action_switch() or not self._action_is_discrete()

    def supports_discrete_actions(self) -> bool:
        return self._has_action_switch() or self._action_is_discrete()

    def get_env_transforms(self, env: EnvBase) -> list[Transform]:
        """float64 observations or state (MaMuJoCo's, gymnasium's MuJoCo) as float32, and a Dict
        observation's matrix leaves (Melting Pot's ``INTERACTION_INVENTORIES``) flattened to vectors,
        as BenchMARL's own MeltingPot task does: its models are float32, and its CNN takes images
        (H, W, C) and vectors only."""
        spec = env.full_observation_spec_unbatched
        leaves = spec.values(include_nested=True, leaves_only=True)
        transforms: list[Transform] = [DoubleToFloat()] if any(leaf.dtype == torch.float64 for leaf in leaves) else []
        matrices = [key for key, leaf in spec.items(include_nested=True, leaves_only=True)
                    if isinstance(key, tuple) and len(key) > 2 and key[1] == "observation" and leaf.ndim == 3]
        if matrices:  # (A, rows, cols) per group: flattened to (A, rows * cols)
            transforms.append(FlattenObservation(in_keys=matrices, first_dim=-2, last_dim=-1))
        return transforms

    def has_render(self, env: EnvBase) -> bool:
        return bool(self.config.get("render", False))

    def max_steps(self, env: EnvBase) -> int:
        if self.config.get("max_steps") is not None:
            return int(self.config["max_steps"])
        limit = _base_env(env).venv.spec.episode_limit
        if limit is None:
            raise ValueError(f"task {self.name}: the env declares no episode limit; give 'max_steps' in the task config")
        return int(limit)

    def group_map(self, env: EnvBase) -> dict[str, list[str]]:
        return _base_env(env).group_map

    # -- specs, split as BenchMARL's PettingZoo task splits them ---------------------------

    def _group_entries(self, env: EnvBase, keep: str) -> Composite:
        spec = env.full_observation_spec_unbatched.clone()
        for group in self.group_map(env):
            group_spec = spec[group]
            for key in list(group_spec.keys()):
                if key != keep:
                    del group_spec[key]
            if group_spec.is_empty():
                del spec[group]
        if "state" in spec.keys():
            del spec["state"]
        return spec

    def observation_spec(self, env: EnvBase) -> Composite:
        return self._group_entries(env, "observation")

    def action_mask_spec(self, env: EnvBase) -> Composite | None:
        spec = self._group_entries(env, "action_mask")
        return None if spec.is_empty() else spec

    def info_spec(self, env: EnvBase) -> Composite | None:
        return None  # marl_vec's infos are per-env dicts, not tensors

    def state_spec(self, env: EnvBase) -> Composite | None:
        spec = env.full_observation_spec_unbatched
        if "state" in spec.keys():
            return Composite({"state": spec["state"].clone()})
        return None

    def action_spec(self, env: EnvBase) -> Composite:
        return env.full_action_spec_unbatched

    @staticmethod
    def env_name() -> str:
        return "marl_vec"

    def __getstate__(self) -> dict[str, Any]:
        # BenchMARL pickles the task; the validated config is rebuilt from the source.
        state = dict(self.__dict__)
        state.pop("_cfg", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._cfg = load_config(self.config["config"])


def _base_env(env: EnvBase) -> TorchRLEnv:
    """The TorchRLEnv under BenchMARL's transforms."""
    while not isinstance(env, TorchRLEnv):
        inner = getattr(env, "base_env", None)
        if inner is None or inner is env:
            raise TypeError(f"expected a TorchRLEnv (possibly transformed), got {type(env).__name__}")
        env = inner
    return env

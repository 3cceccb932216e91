"""pymarlzooplus's own training loop (``run.run_sequential``), driven by the tests of the PyMARL faces.

:func:`train` builds the trainer's config as ``pymarlzooplus.main`` does (default.yaml,
then the algorithm's yaml, then overrides), seeds numpy and torch as ``main.my_main``
does, runs ``run_sequential`` (the whole of their trainer but for sacred, wandb and the
plots) and returns the learned parameters, read from the models the trainer saves at
its last episode (``save_model``).

Native LBF needs a patch for the comparison (:class:`TimeLimitInfoGymma`): pymarlzooplus's
gymma wrapper returns an empty info, so a time-limit end is stored as a terminal state;
marl_vec's faces say ``info["episode_limit"]`` there, as SMAC does, and the trainer
then bootstraps it. The patched wrapper adds exactly that flag.
"""

from __future__ import annotations

import logging
import os
import pathlib
import random
import types
from typing import Any

import numpy as np
import torch as th
import yaml
from pymarlzooplus.envs import REGISTRY as ENVS
from pymarlzooplus.envs.gym_wrapper import _GymmaWrapper
from pymarlzooplus.run import args_sanity_check, run_sequential

import pymarlzooplus

CONFIG_DIR = pathlib.Path(pymarlzooplus.__file__).parent / "config"
NATIVE_LBF = "lbforaging:Foraging-8x8-2p-2f-coop-v3"
NATIVE_MPE = "mpe:SimpleSpread-3-v0"


class TimeLimitInfoGymma(_GymmaWrapper):
    """pymarlzooplus's gymma env, plus ``info["episode_limit"]`` when an LBF episode ends
    at its step limit with food left (the one change; everything else is theirs)."""

    def step(self, actions: Any) -> tuple[float, bool, dict]:
        reward, done, info = super().step(actions)
        unwrapped = self._env.unwrapped
        if done and hasattr(unwrapped, "field") and int(unwrapped.field.sum()) != 0:
            info = {**info, "episode_limit": True}
        return reward, done, info


def _patched(**kwargs: Any) -> TimeLimitInfoGymma:
    return TimeLimitInfoGymma(**kwargs)


ENVS.setdefault("gymma_limit", _patched)


def config(alg: str, **overrides: Any) -> dict[str, Any]:
    """The trainer's config dict: default.yaml, the algorithm's yaml, then ``overrides``."""
    cfg = yaml.safe_load((CONFIG_DIR / "default.yaml").read_text())
    cfg.update(yaml.safe_load((CONFIG_DIR / "algs" / f"{alg}.yaml").read_text()))
    cfg.update(overrides)
    return cfg


def train(alg: str, results: pathlib.Path, seed: int = 3, t_max: int = 300, **overrides: Any) -> dict[str, th.Tensor]:
    """Train ``alg`` with pymarlzooplus's ``run_sequential``; the learned parameters
    (agent, mixer/critic, optimiser-free) by ``<file>/<name>``."""
    cfg = config(alg, seed=seed, t_max=t_max, save_model=True, save_model_interval=10**9, use_cuda=False,
                 use_cuda_cnn_modules=False, test_interval=10**9, log_interval=10**9, runner_log_interval=100,
                 learner_log_interval=10**9, **overrides)
    cfg["env_args"] = {**cfg["env_args"], "seed": seed}
    log = logging.getLogger("pymarl-test")
    cfg = args_sanity_check(cfg, log)
    args = types.SimpleNamespace(**cfg)
    args.device = args.device_cnn_modules = "cpu"
    args.results_path = str(results)
    args.unique_token = "test"
    # What pymarlzooplus.main.my_main seeds; `random` too, which nothing of theirs should use.
    random.seed(seed)
    np.random.seed(seed)
    th.manual_seed(seed)
    from pymarlzooplus.utils.logging_setup import Logger

    run_sequential(args=args, logger=Logger(log))
    saved = sorted((results / "models").iterdir(), key=lambda p: int(p.name))
    first, last = saved[0], saved[-1]
    params, initial = _load(last), _load(first)
    assert len(saved) >= 2 and any(not th.equal(params[k], initial[k]) for k in params), \
        "the trainer learned nothing in this run: make it longer"
    params["t_env"] = th.tensor(int(last.name))
    return params


def _load(folder: pathlib.Path) -> dict[str, th.Tensor]:
    """The modules' parameters the trainer saved in ``folder`` (not its optimisers' state)."""
    params: dict[str, th.Tensor] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for name, item in value.items():
                walk(f"{prefix}/{name}", item)
        elif isinstance(value, th.Tensor):
            params[prefix] = value

    for path in sorted(folder.glob("*.th")):
        if not path.name.startswith("opt"):
            walk(path.stem, th.load(path, map_location="cpu"))
    assert params, f"no parameters saved under {folder}"
    return params


def assert_identical(a: dict[str, th.Tensor], b: dict[str, th.Tensor]) -> None:
    """Bit-identical parameters, name by name."""
    assert sorted(a) == sorted(b)
    for name in a:
        assert th.equal(a[name], b[name]), f"{name} differs (max |diff| {(a[name] - b[name]).abs().max():g})"


def deterministic() -> None:
    th.use_deterministic_algorithms(True)
    th.set_num_threads(1)
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

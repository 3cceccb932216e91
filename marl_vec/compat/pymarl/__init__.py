"""The PyMARL school's faces (PyMARL, EPyMARL, pymarlzooplus): [`register`][marl_vec.compat.pymarl.register].

Their trainers build envs from a module-level registry (``envs.REGISTRY``) and step
them with a runner from ``runners.REGISTRY``. One call puts marl_vec into both:

- the env face [`PyMARLEnv`][marl_vec.compat.pymarl.env.PyMARLEnv] (``env=marl_vec``): any
  marl_vec config as a PyMARL ``MultiAgentEnv``, under the trainer's own runners;
- the runner face [`MarlVecRunner`][marl_vec.compat.pymarl.runner.MarlVecRunner]
  (``runner=marl_vec``): a marl_vec VecEnv of ``batch_size_run`` envs in the
  ``one_episode`` mode, filling the trainer's ``EpisodeBatch`` itself, in place of
  the ``parallel`` runner's Pipe-per-env workers.

``env_args.key`` names the marl_vec config (see `marl_vec.compat.pymarl.env`).
pymarlzooplus 1.1.0 pins numpy<2 and pettingzoo==1.24.3: it lives in .venv-pymarl
(``bash scripts/install/install_pymarl_venv.sh``). docs/faces/pymarl.md has a whole run.

Examples:
    >>> from marl_vec.compat.pymarl import register
    >>> register()
    >>> from pymarlzooplus import pymarlzooplus
    >>> pymarlzooplus({"config": "qmix", "runner": "marl_vec", "env_args": {"key": "lbf/8x8-2p-2f-coop"},
    ...                "env-config": "marl_vec"})
"""

from __future__ import annotations

import functools
import importlib
from typing import Any, MutableMapping

from marl_vec.compat.pymarl.env import INSTALL, PyMARLEnv

__all__ = ["register", "PyMARLEnv", "MarlVecRunner"]

# The trainer's own env names: register() refuses to replace them.
NATIVE_ENVS = ("sc2", "sc2wrapped", "gymma", "pettingzoo", "overcooked", "pressureplate", "capturetarget",
               "boxpushing", "smaclite", "smacv2")
NATIVE_RUNNERS = ("episode", "parallel")


def register(envs_registry: MutableMapping[str, Any] | None = None,
             runners_registry: MutableMapping[str, Any] | None = None,
             key: str = "marl_vec", runner: str | None = "marl_vec", episode_batch: Any = None) -> None:
    """Put the env face into ``envs_registry[key]`` and the runner face into
    ``runners_registry[runner]`` (``runner=None``: only the env face). ``episode_batch``:
    the trainer's ``EpisodeBatch`` class, which the runner fills (default pymarlzooplus's).

    Default registries: pymarlzooplus's ``envs.REGISTRY`` and ``runners.REGISTRY``;
    EPyMARL/PyMARL users pass their clone's. Then ``env=<key>`` with
    ``env_args.key=<config>`` runs under any runner, and ``runner=<runner>`` is marl_vec's.

    ```pycon
    >>> registry = {}
    >>> register(registry, runner=None)
    >>> sorted(registry)
    ['marl_vec']
    ```
    """
    for name, what in ((key, "key"), (runner, "runner")):
        if name is None and what == "runner":
            continue
        if not isinstance(name, str) or not name:
            raise ValueError(f"register(): {what} must be a non-empty string, got {name!r}")
        if name in (NATIVE_ENVS if what == "key" else NATIVE_RUNNERS):
            raise ValueError(f"register(): {what}={name!r} would replace the trainer's own "
                             f"{'env' if what == 'key' else 'runner'}; pick another name (default 'marl_vec')")
    if envs_registry is None:
        envs_registry = _pymarlzooplus("envs").REGISTRY
        _lbforaging_ids_win()
    envs_registry[key] = PyMARLEnv
    if runner is None:
        return
    from marl_vec.compat.pymarl.runner import MarlVecRunner

    if runners_registry is None:
        runners_registry = _pymarlzooplus("runners").REGISTRY
    runners_registry[runner] = functools.partial(MarlVecRunner, env_key=key, episode_batch=episode_batch)


def _lbforaging_ids_win() -> None:
    """Give lbforaging's own gymnasium ids back to lbforaging.

    Importing ``pymarlzooplus.envs`` registers some of lbforaging's ``-v3`` ids again with
    other levels (``Foraging-8x8-2p-2f-coop-v3``: players and food at level 3, where
    lbforaging has players 1-2). Which one an id means then depends on import order: in
    their own runs lbforaging is imported after them and wins, also in their ``parallel``
    runner's spawned workers and in marl_vec's worker processes. Where lbforaging was
    imported first, this process would build their variant and the workers lbforaging's;
    registering lbforaging's ids again makes every process build the same env.
    """
    import sys
    import warnings

    module = sys.modules.get("lbforaging")
    if module is not None:
        with warnings.catch_warnings():  # gymnasium warns once per id it registers again
            warnings.simplefilter("ignore")
            importlib.reload(module)


def _pymarlzooplus(module: str) -> Any:
    try:
        return importlib.import_module(f"pymarlzooplus.{module}")
    except ImportError as exc:
        raise ImportError(
            f"marl_vec.compat.pymarl.register() needs pymarlzooplus 1.1.0 ({exc}); it pins numpy<2 and "
            f"pettingzoo==1.24.3, so it lives in a venv of its own: {INSTALL}. EPyMARL/PyMARL users pass "
            "their clone's registries: register(envs.REGISTRY, runners.REGISTRY)"
        ) from exc


def __getattr__(name: str) -> Any:
    if name == "MarlVecRunner":  # imports torch: only when asked for
        from marl_vec.compat.pymarl.runner import MarlVecRunner

        return MarlVecRunner
    raise AttributeError(f"module 'marl_vec.compat.pymarl' has no attribute {name!r}")

"""Import pysc2 4.0.0 on Python 3.11+.

pysc2's ``lib/colors.py`` calls ``random.shuffle(palette, lambda: 0.5)``; the
second argument was removed in Python 3.11, so the call raises ``TypeError``
both when pysc2 is imported and later, when it builds palettes. This module
gives ``pysc2.lib.colors`` its own ``random`` (a thin proxy whose ``shuffle``
accepts the old form) and leaves the real ``random.shuffle`` alone: nobody
else's calls change. Imports: `marl_vec.envs.extras` only (pysc2 when
asked). ``marl_vec.envs.sc2_compat``, its former home, re-exports it.

Examples:
    >>> from marl_vec.envs.starcraft2.pysc2_shim import import_pysc2
    >>> sc2_env = import_pysc2()           # the pysc2.env.sc2_env module
    >>> sc2_env.Race.terran.name
    'terran'
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import math
import random as _random
import sys
import threading
from types import ModuleType
from typing import Any, Callable, MutableSequence

from marl_vec.envs.extras import require

_COLORS = "pysc2.lib.colors"
_lock = threading.Lock()


def legacy_shuffle(x: MutableSequence[Any], random: Callable[[], float] | None = None) -> None:
    """``random.shuffle`` with Python 3.10's optional ``random`` argument.

    The two-argument form is the exact algorithm Python <= 3.10 used, so pysc2's
    fixed palette order is unchanged.
    """
    if random is None:
        _random.shuffle(x)
        return
    for i in reversed(range(1, len(x))):
        j = math.floor(random() * (i + 1))
        x[i], x[j] = x[j], x[i]


class _LegacyRandom(ModuleType):
    """The ``random`` module as pysc2.lib.colors sees it: everything forwarded, but ``shuffle``."""

    shuffle = staticmethod(legacy_shuffle)

    def __getattr__(self, name: str) -> Any:
        return getattr(_random, name)


class _ColorsLoader(importlib.abc.Loader):
    """Runs pysc2/lib/colors.py with ``random`` bound to the proxy.

    ``import random`` inside the module would rebind the global, so the module's
    code runs with a ``__builtins__.__import__`` that hands it the proxy for
    exactly that one name.
    """

    def __init__(self, inner: importlib.abc.Loader):
        self.inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        import builtins

        proxy = _LegacyRandom("random")
        real_import = builtins.__import__

        def _import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
            if name == "random" and level == 0 and not fromlist:
                return proxy
            return real_import(name, globals, locals, fromlist, level)

        module_builtins = dict(vars(builtins))
        module_builtins["__import__"] = _import
        module.__dict__["__builtins__"] = module_builtins
        code = self.inner.get_code(module.__name__)  # type: ignore[attr-defined]
        exec(code, module.__dict__)


class _ColorsFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != _COLORS:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "get_code"):
                spec.loader = _ColorsLoader(spec.loader)
                return spec
        return None


def install_shim() -> None:
    """Make the next import of pysc2.lib.colors use the legacy shuffle. Idempotent."""
    with _lock:
        colors = sys.modules.get(_COLORS)
        if colors is not None:
            # Already imported (e.g. by a caller who patched random itself): rebind its name.
            if not isinstance(getattr(colors, "random", None), _LegacyRandom):
                colors.random = _LegacyRandom("random")  # type: ignore[attr-defined]
            return
        if not any(isinstance(f, _ColorsFinder) for f in sys.meta_path):
            sys.meta_path.insert(0, _ColorsFinder())


def import_pysc2(module: str = "pysc2.env.sc2_env") -> ModuleType:
    """Import a pysc2 module with the shim applied; a missing pysc2 names the extra.

    Raises:
        MissingExtraError: pysc2 (or a dependency such as s2clientprotocol) is missing.
    """
    install_shim()
    require("pysc2", "sc2", "StarCraft II (then run scripts/install/install_sc2.sh)")
    imported = require(module, "sc2", "StarCraft II (then run scripts/install/install_sc2.sh)")
    _use_flag_defaults()
    return imported


def _use_flag_defaults() -> None:
    """pysc2 reads absl flags (``--sc2_run_config``, ``--sc2_version``, ...) when it
    launches the game; outside ``absl.app.run`` nobody parses them and every read
    raises ``UnparsedFlagAccessError``. Mark them parsed, so their defaults apply;
    a program that runs under ``absl.app.run`` has parsed them already."""
    from absl import flags

    if not flags.FLAGS.is_parsed():
        flags.FLAGS.mark_as_parsed()

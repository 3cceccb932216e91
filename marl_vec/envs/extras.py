"""Optional dependencies: import one, or fail naming the pip extra that installs it.

Every env family (and the Ray backend, the GIF and plot helpers) imports its
library through `require`, so that a missing library costs nothing until
it is used and then says what to install. A family whose id names a module
(PettingZoo's ``mpe2.simple_spread_v3``) imports it with `import_env_module`,
which tells a misspelt id ([`UnknownEnvError`][marl_vec.envs.extras.UnknownEnvError], with close matches) from a
missing package ([`MissingExtraError`][marl_vec.envs.extras.MissingExtraError]). This module sits at the bottom of
``marl_vec.envs``: it imports only `marl_vec.core.errors` from marl_vec, and the
registry and every family may import it.

Example::

    numpy = require("numpy", None)
    require("no_such_module", "atari", "Atari games")
    # MissingExtraError: no_such_module is needed for Atari games but cannot be
    # imported (...); install it with: pip install 'marl_vec[atari]'
    import_env_module("mpe2.simple_sprd_v3", "pettingzoo", "a PettingZoo env")
    # UnknownEnvError: no env 'mpe2.simple_sprd_v3' in mpe2; close matches: mpe2.simple_spread_v3
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
import sys
from types import ModuleType
from typing import Iterable

from marl_vec.core.errors import SetupError


class MissingExtraError(SetupError, ImportError):
    """An optional dependency of an env family (or backend) is not installed."""


class UnknownEnvError(SetupError, ValueError):
    """An env id that its family's package does not have (a typo, most often).

    ```pycon
    >>> str(UnknownEnvError(no_env_message("mpe2.simple_sprd_v3", "mpe2", ["mpe2.simple_spread_v3"])))
    "no env 'mpe2.simple_sprd_v3' in mpe2; close matches: mpe2.simple_spread_v3"
    ```
    """


def require(module: str, extra: str | None, what: str = "") -> ModuleType:
    """Import ``module``; if it is missing, say which extra installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(missing_extra_message(module, extra, what, exc)) from exc


def missing_extra_message(module: str, extra: str | None, what: str, exc: ImportError) -> str:
    """What to say when ``module`` cannot be imported: what needs it, and the pip extra that installs it.

    ```pycon
    >>> missing_extra_message("torchrl", "torchrl", "TorchRLEnv", ImportError("No module named 'torchrl'"))
    "torchrl is needed for TorchRLEnv but cannot be imported (No module named 'torchrl'); install it with: pip install 'marl_vec[torchrl]'"
    ```
    """
    for_what = f" for {what}" if what else ""
    hint = f"pip install 'marl_vec[{extra}]'" if extra else "pip install marl_vec"
    return f"{module} is needed{for_what} but cannot be imported ({exc}); install it with: {hint}"


def no_env_message(env_id: str, package: str, known: Iterable[str], missing: str | None = None) -> str:
    """"no env ID in PACKAGE", with the ``known`` ids closest to ``missing`` (default: ``env_id``).

    Names are compared by their last dotted part: the package prefix they share says nothing.
    """
    known = sorted(set(known))
    by_tail = {name.rpartition(".")[2]: name for name in known}
    tail = (missing or env_id).rpartition(".")[2]
    close = [by_tail[t] for t in difflib.get_close_matches(tail, list(by_tail), n=3, cutoff=0.75)]
    if close:
        return f"no env {env_id!r} in {package}; close matches: {', '.join(close)}"
    shown = ", ".join(known[:12]) + (", ..." if len(known) > 12 else "")
    return f"no env {env_id!r} in {package}; no close match among: {shown or '(nothing)'}"


def import_env_module(env_id: str, extra: str | None, what: str = "") -> ModuleType:
    """Import the module an env id names (``mpe2.simple_spread_v3``).

    A package that is missing (``mpe2``, or a library the env module imports) is a
    missing extra; a package that imports but lacks the module is an unknown id.
    """
    try:
        return importlib.import_module(env_id)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        package = missing.rpartition(".")[0]
        # The id itself (or a part of it below the top package) is missing from a package that imported.
        if package and (env_id == missing or env_id.startswith(missing + ".")) and sys.modules.get(package) is not None:
            path = getattr(sys.modules[package], "__path__", None) or []
            known = [f"{package}.{m.name}" for m in pkgutil.iter_modules(path) if not m.name.startswith("_")]
            raise UnknownEnvError(no_env_message(env_id, package, known, missing)) from exc
        raise MissingExtraError(missing_extra_message(env_id, extra, what, exc)) from exc
    except ImportError as exc:
        raise MissingExtraError(missing_extra_message(env_id, extra, what, exc)) from exc

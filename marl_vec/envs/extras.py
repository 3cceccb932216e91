"""Optional dependencies: import one, or fail naming the pip extra that installs it.

Every env family (and the Ray backend, the GIF and plot helpers) imports its
library through :func:`require`, so that a missing library costs nothing until
it is used and then says what to install. This module sits at the bottom of
``marl_vec.envs``: it imports nothing from marl_vec, and the registry and every
family may import it.

Example::

    numpy = require("numpy", None)
    require("no_such_module", "atari", "Atari games")
    # MissingExtraError: no_such_module is needed for Atari games but cannot be
    # imported (...); install it with: pip install 'marl_vec[atari]'
"""

from __future__ import annotations

import importlib
from types import ModuleType


class MissingExtraError(ImportError):
    """An optional dependency of an env family (or backend) is not installed."""


def require(module: str, extra: str | None, what: str = "") -> ModuleType:
    """Import ``module``; if it is missing, say which extra installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(missing_extra_message(module, extra, what, exc)) from exc


def missing_extra_message(module: str, extra: str | None, what: str, exc: ImportError) -> str:
    """What to say when ``module`` cannot be imported: what needs it, and the pip extra that installs it.

    >>> missing_extra_message("torchrl", "torchrl", "TorchRLEnv", ImportError("No module named 'torchrl'"))
    "torchrl is needed for TorchRLEnv but cannot be imported (No module named 'torchrl'); install it with: pip install 'marl_vec[torchrl]'"
    """
    for_what = f" for {what}" if what else ""
    hint = f"pip install 'marl_vec[{extra}]'" if extra else "pip install marl_vec"
    return f"{module} is needed{for_what} but cannot be imported ({exc}); install it with: {hint}"

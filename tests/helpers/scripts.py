"""A script of scripts/ imported as a module, for the tests of the training examples."""

from __future__ import annotations

import importlib.util
import sys
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, Iterator

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts" / "train"


@contextmanager
def script_module(name: str, torch: Any = None) -> Iterator[ModuleType]:
    """``scripts/train/<name>.py`` as module ``name`` while the block runs. With ``torch``, it runs
    with one torch thread (bit-identical runs), the thread count restored after."""
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    threads = None if torch is None else torch.get_num_threads()
    try:
        spec.loader.exec_module(module)
        if torch is not None:
            torch.set_num_threads(1)
        yield module
    finally:
        if threads is not None:
            torch.set_num_threads(threads)
        sys.modules.pop(name, None)

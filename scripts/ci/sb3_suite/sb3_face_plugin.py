"""A pytest plugin that runs Stable-Baselines3's own tests on marl_vec's SB3 face.

Loaded into a pytest run over the ``tests/`` folder of SB3's sdist (see
``scripts/ci/run_sb3_suite.sh``). It does three things, the way gymnasium's
``tests/vector`` suite is run against another vector env:

1. Substitution. Before SB3's test modules are imported, every
   ``DummyVecEnv`` / ``SubprocVecEnv`` name inside ``stable_baselines3`` (the
   classes themselves, ``make_vec_env``'s default, the wrap SB3's algorithms,
   ``evaluate_policy``, ``EvalCallback`` and ``check_env`` make) becomes a class
   of the same name that is :class:`marl_vec.compat.SB3VecEnv` over a marl_vec
   backend. ``MARL_VEC_SB3_BACKEND`` chooses it:

   - ``dummy``: SB3's DummyVecEnv -> our DummyVecEnv, SB3's SubprocVecEnv -> our SubprocVecEnv;
   - ``subproc``: both -> our SubprocVecEnv (SB3's DummyVecEnv: all its envs in one worker process);
   - ``native``: nothing substituted (SB3 as shipped: the selection must all pass).

2. Selection. SB3's vec-env tests (``tests/test_vec_*.py``) and every other test
   whose code (its own body, or a module-level helper it calls) builds a
   ``DummyVecEnv``, ``SubprocVecEnv`` or ``make_vec_env``. The rest is deselected.

3. Expected failures. ``expected_failures.txt`` (beside this file) lists the tests
   that may fail on a backend, each with its reason. They are marked
   ``xfail(strict=True)``: any other failure fails the run, and so does an
   expected failure that passes (the list must be kept exact). An entry that
   matches no selected test is an error too.

Example (what the runner script does)::

    MARL_VEC_SB3_BACKEND=dummy python -m pytest -p sb3_face_plugin <sb3 sdist>/tests
"""

from __future__ import annotations

import ast
import fnmatch
import inspect
import os
import re
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

import pytest

BACKENDS = ("native", "dummy", "subproc")
BUILDERS = re.compile(r"\b(DummyVecEnv|SubprocVecEnv|make_vec_env)\b")
# MARL_VEC_SB3_EXPECTED: another list (the plugin's own tests use one).
EXPECTED_FAILURES = Path(os.environ.get("MARL_VEC_SB3_EXPECTED", Path(__file__).with_name("expected_failures.txt")))


def _backend() -> str:
    backend = os.environ.get("MARL_VEC_SB3_BACKEND", "dummy")
    if backend not in BACKENDS:
        raise pytest.UsageError(f"MARL_VEC_SB3_BACKEND={backend!r}; allowed: {', '.join(BACKENDS)}")
    return backend


def _face_classes(backend: str) -> dict[str, type]:
    """SB3's two class names, each an SB3VecEnv over the marl_vec backend ``backend`` picks."""
    import marl_vec as mv
    from marl_vec.compat import SB3VecEnv

    def subproc(env_fns: list[Callable[[], Any]], start_method: str | None = None, workers: int = 0) -> Any:
        # SB3's SubprocVecEnv: one env per worker
        return mv.SubprocVecEnv(env_fns, env_seed=None, num_workers=workers or len(env_fns), start_method=start_method)

    def dummy(env_fns: list[Callable[[], Any]]) -> Any:
        # SB3's DummyVecEnv: every env in one process (with "subproc", one worker process)
        return subproc(env_fns, workers=1) if backend == "subproc" else mv.DummyVecEnv(env_fns, env_seed=None)

    # monitor=False: SB3's vec envs add no "episode" info (make_vec_env's Monitor does, and it is kept)
    class DummyVecEnv(SB3VecEnv):
        """SB3's ``DummyVecEnv(env_fns)`` signature, served by the face."""

        def __init__(self, env_fns: Sequence[Callable[[], Any]]):
            super().__init__(dummy(list(env_fns)), monitor=False)

    class SubprocVecEnv(SB3VecEnv):
        """SB3's ``SubprocVecEnv(env_fns, start_method=None)`` signature, served by the face."""

        def __init__(self, env_fns: Sequence[Callable[[], Any]], start_method: str | None = None):
            super().__init__(subproc(list(env_fns), start_method), monitor=False)

    return {"DummyVecEnv": DummyVecEnv, "SubprocVecEnv": SubprocVecEnv}


def _substitute(backend: str) -> None:
    """Puts the face classes wherever stable_baselines3's modules hold SB3's own."""
    import importlib

    import stable_baselines3  # noqa: F401
    from stable_baselines3.common import vec_env

    for name in ("base_class", "callbacks", "env_checker", "env_util", "evaluation",
                 "vec_env.vec_video_recorder"):
        importlib.import_module(f"stable_baselines3.common.{name}")
    originals = {"DummyVecEnv": vec_env.DummyVecEnv, "SubprocVecEnv": vec_env.SubprocVecEnv}
    faces = _face_classes(backend)
    for module_name, module in list(sys.modules.items()):
        if module is None or not module_name.startswith("stable_baselines3"):
            continue
        for name, original in originals.items():
            if getattr(module, name, None) is original:
                setattr(module, name, faces[name])


def _mentions_builder(function: Any, module: Any) -> bool:
    """Whether ``function``'s source, or a module-level function it names (transitively), builds a vec env."""
    seen: set[str] = set()
    todo = [function]
    while todo:
        fn = inspect.unwrap(todo.pop())
        try:
            source = inspect.getsource(fn)
        except (OSError, TypeError):
            continue
        if BUILDERS.search(source):
            return True
        for node in ast.walk(ast.parse(inspect.cleandoc("\n" + source) if source[0].isspace() else source)):
            if isinstance(node, ast.Name) and node.id not in seen:
                seen.add(node.id)
                helper = getattr(module, node.id, None)
                if inspect.isfunction(helper) and helper.__module__ == module.__name__:
                    todo.append(helper)
    return False


def _read_expected(backend: str) -> list[tuple[str, str]]:
    """(nodeid pattern, reason) for ``backend`` from expected_failures.txt."""
    out = []
    for number, line in enumerate(EXPECTED_FAILURES.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        head, sep, reason = line.partition("|")
        parts = head.split()
        if not sep or len(parts) != 2 or not reason.strip() or parts[0] not in BACKENDS:
            raise pytest.UsageError(
                f"{EXPECTED_FAILURES}:{number}: expected '<backend> <nodeid pattern> | <reason>', got {line!r}"
            )
        if parts[0] == backend:
            out.append((parts[1], reason.strip()))
    return out


def pytest_configure(config: pytest.Config) -> None:
    backend = _backend()
    config.stash[_BACKEND] = backend
    if backend != "native":
        _substitute(backend)


_BACKEND = pytest.StashKey[str]()


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    selected, deselected = [], []
    for item in items:
        module = getattr(item, "module", None)
        function = getattr(item, "function", None)
        keep = module is not None and (
            Path(str(module.__file__)).name.startswith("test_vec_")
            or (function is not None and _mentions_builder(function, module))
        )
        (selected if keep else deselected).append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = selected
    expected = _read_expected(config.stash[_BACKEND])
    matched: set[str] = set()
    for item in items:
        for pattern, reason in expected:
            if fnmatch.fnmatchcase(item.nodeid, pattern.replace("[", "[[]")):  # only * and ? are wildcards
                item.add_marker(pytest.mark.xfail(reason=reason, strict=True))
                matched.add(pattern)
                break
    # An entry for a collected file that names no test there is stale (unless -k / -m narrowed the run).
    files = {item.nodeid.split("::")[0] for item in items}
    stale = sorted(p for p, _ in expected if p not in matched and p.split("::")[0] in files)
    if stale and not config.getoption("keyword") and not config.getoption("markexpr"):
        raise pytest.UsageError(
            f"{EXPECTED_FAILURES}: entries for backend {config.stash[_BACKEND]!r} that match no selected test "
            f"(remove them): {stale}"
        )

"""Where ``marl-vec tune`` keeps its results, and what ``backend: auto`` makes of them.

A result is kept per config and machine: the key hashes the config without the
keys the tuner chooses (``vec.backend``, ``vec.num_workers``, ``vec.step_in_main``,
``vec.spin_us``, a family's ``env.kwargs.engine``) and without its ``run`` section, so that a config tuned
with ``backend: dummy`` is found again with ``backend: auto``; and the machine's
cpu count, platform and the marl_vec version. The files are JSON under
``~/.cache/marl_vec/tune/`` (``$MARL_VEC_TUNE_CACHE`` moves them, tests use it).

Works on plain dicts (a config's ``model_dump(by_alias=True)``), so that
`marl_vec.tools.config` can use it without importing the tuner.

Examples:
    >>> data = {"env": {"family": "gym", "id": "CartPole-v1", "kwargs": {}},
    ...         "vec": {"num_envs": 4, "backend": "dummy", "num_workers": None}, "run": {"steps": 10}}
    >>> other = {**data, "vec": {**data["vec"], "backend": "auto"}, "run": {"steps": 99}}
    >>> config_key(data) == config_key(other)  # the tuned keys and the run section do not count
    True
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any, Mapping

CACHE_ENV = "MARL_VEC_TUNE_CACHE"
# The vec keys the tuner chooses; a config's other vec keys are part of what it measures
# (and so is an engine the config names: the tuner tries engines only where it names none or auto).
TUNED_VEC_KEYS = ("backend", "num_workers", "step_in_main", "spin_us")
ENGINE_KEY = "engine"  # env.kwargs.engine, for families that offer engines (registry's Family.engines)
# `backend: auto` without a tune result: one process, no workers. On a cheap env (most MARL
# envs step in microseconds) workers only add messaging, and dummy needs no cores to itself.
AUTO_DEFAULT: dict[str, Any] = {"backend": "dummy", "num_workers": None}
FORMAT = 1  # of the cache files; a file of another format is ignored


def _version() -> str:
    # The package's version, looked up rather than imported: the package sits above this module.
    return str(getattr(sys.modules.get("marl_vec"), "__version__", "unknown"))


def machine() -> dict[str, Any]:
    """What makes a result hold on another machine too: cores, platform, marl_vec version."""
    return {"cpu_count": os.cpu_count() or 1, "platform": f"{sys.platform}-{platform.machine()}",
            "python": platform.python_version(), "marl_vec": _version()}


def tuned_part(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` without the keys the tuner chooses and without the run section."""
    data = copy.deepcopy(dict(data))
    data.pop("run", None)
    vec = dict(data.get("vec") or {})
    for key in TUNED_VEC_KEYS:
        vec.pop(key, None)
    data["vec"] = vec
    env = dict(data.get("env") or {})
    kwargs = dict(env.get("kwargs") or {})
    if kwargs.get(ENGINE_KEY) in (None, "auto"):
        kwargs.pop(ENGINE_KEY, None)
    env["kwargs"] = kwargs
    data["env"] = env
    return data


def _digest(obj: Any) -> str:
    text = json.dumps(obj, sort_keys=True, default=repr, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def config_key(data: Mapping[str, Any]) -> str:
    """The config's part of the cache key (16 hex digits)."""
    return _digest(tuned_part(data))


def cache_dir() -> Path:
    """``$MARL_VEC_TUNE_CACHE``, else ``$XDG_CACHE_HOME/marl_vec/tune``, else ``~/.cache/marl_vec/tune``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "marl_vec" / "tune"


def cache_path(data: Mapping[str, Any]) -> Path:
    """The file that holds (or would hold) the tune result of this config on this machine."""
    return cache_dir() / f"{config_key(data)}-{_digest(machine())}.json"


def load(data: Mapping[str, Any]) -> dict[str, Any] | None:
    """The cached tune result of this config on this machine, or None (none, unreadable, or another format)."""
    path = cache_path(data)
    try:
        result = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(result, dict) or result.get("format") != FORMAT or not _valid_choice(result.get("choice")):
        return None
    return result


def _valid_choice(choice: Any) -> bool:
    """A choice the tuner makes: dummy, or subproc or ray with a worker count (and maybe an engine
    name); or subproc with a block in this process (``step_in_main``) and both sides spinning
    (``spin_us`` in (0, 1e6]), the two together."""
    if not isinstance(choice, dict) or choice.get("backend") not in ("dummy", "subproc", "ray"):
        return False
    workers = choice.get("num_workers")
    if (choice["backend"] == "dummy") != (workers is None):
        return False
    if "step_in_main" in choice or "spin_us" in choice:
        spin = choice.get("spin_us")
        if (choice["backend"] != "subproc" or choice.get("step_in_main") is not True or isinstance(spin, bool)
                or not isinstance(spin, (int, float)) or not 0 < spin <= 1e6):
            return False
    return (workers is None or (isinstance(workers, int) and workers >= 1)) and isinstance(choice.get("engine", ""), str)


def save(data: Mapping[str, Any], result: Mapping[str, Any]) -> Path:
    """Keep ``result`` (a JSON-able dict with a ``choice``) for this config and machine; returns the file."""
    path = cache_path(data)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps({**result, "format": FORMAT, "machine": machine()}, indent=1))
    os.replace(tmp, path)  # whole or not at all, also with two tuners at once
    return path


def describe_choice(choice: Mapping[str, Any]) -> str:
    """``subproc, 2 workers`` / ``dummy`` / ``dummy, engine ale_vector`` / ``subproc, 1 worker + main, spin_us=300``.

    ```pycon
    >>> describe_choice({"backend": "subproc", "num_workers": 2, "engine": "python"})
    'subproc, 2 workers, engine python'
    >>> describe_choice({"backend": "subproc", "num_workers": 1, "step_in_main": True, "spin_us": 300})
    'subproc, 1 worker + main, spin_us=300'
    ```
    """
    text = str(choice["backend"])
    if choice.get("num_workers"):
        text += f", {choice['num_workers']} worker{'s' if choice['num_workers'] != 1 else ''}"
    if choice.get("step_in_main"):
        text += " + main"
    if choice.get("spin_us"):
        text += f", spin_us={choice['spin_us']:g}"
    if choice.get("engine"):
        text += f", engine {choice['engine']}"
    return text


# Options that only worker processes take: `auto` without a tune result honours them.
PROCESS_OPTIONS = ("num_workers", "start_method", "batch_size", "step_in_main", "spin_us")


def resolve_auto(data: Mapping[str, Any]) -> tuple[dict[str, Any], str, bool]:
    """What ``backend: auto`` becomes for this config: ``(choice, message, tuned)``.

    ``choice`` has ``backend`` and ``num_workers`` (and ``engine``, ``step_in_main``,
    ``spin_us`` where the tuner chose them): the cached tune result for this config on this machine (``tuned`` True), else
    `AUTO_DEFAULT`, or ``subproc`` where the config sets an option only worker
    processes take (``num_workers``, ``batch_size``, ...). The message says which.
    """
    cached = load(data)
    if cached is not None:
        choice = dict(cached["choice"])
        when = cached.get("when", "?")
        return choice, (f"marl_vec: backend auto -> {describe_choice(choice)} "
                        f"(the fastest in `marl-vec tune` on this machine, {when}; {cache_path(data)})"), True
    vec = data.get("vec") or {}
    asked = [key for key in PROCESS_OPTIONS if vec.get(key)]
    if asked:
        choice = {"backend": "subproc", "num_workers": vec.get("num_workers"),
                  "step_in_main": bool(vec.get("step_in_main")), "spin_us": vec.get("spin_us") or 0.0}
        return choice, (f"marl_vec: backend auto -> {describe_choice(choice)} (no tune result for this config on "
                        f"this machine; vec.{asked[0]} asks for worker processes)"), False
    return dict(AUTO_DEFAULT), ("marl_vec: backend auto -> dummy (no tune result for this config on this machine, "
                                "so the default; `marl-vec tune CONFIG` measures the choices)"), False

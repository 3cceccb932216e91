"""RayVecEnv's options: merging keywords with a ``ray_config`` mapping, and how many actors.

Examples:
    >>> _block_count(num_envs=10, num_workers=None, envs_per_worker=4, default=8)
    3
    >>> _merge_options(dict(_DEFAULTS), {"num_workers": 2})["num_workers"]
    2
"""

from __future__ import annotations

import math
from typing import Any, Mapping

TRANSPORTS = ("auto", "ray")
_RAY_OPTIONS = ("address", "num_workers", "envs_per_worker", "num_cpus_per_worker", "resources_per_worker",
                "temp_dir", "timeout", "transport")
_DEFAULTS: dict[str, Any] = {"address": None, "num_workers": None, "envs_per_worker": None, "num_cpus_per_worker": 1.0,
                             "resources_per_worker": None, "temp_dir": None, "timeout": 600.0, "transport": "auto"}


def _merge_options(explicit: dict[str, Any], ray_config: Mapping[str, Any] | None) -> dict[str, Any]:
    """Keyword options, overridden by ``ray_config`` where a keyword was left at its default."""
    if not ray_config:
        return explicit
    unknown = sorted(set(ray_config) - set(_RAY_OPTIONS))
    if unknown:
        raise ValueError(f"unknown ray_config keys {unknown}; allowed: {', '.join(_RAY_OPTIONS)}")
    defaults = _DEFAULTS
    merged = dict(explicit)
    for key, value in ray_config.items():
        if explicit[key] != defaults[key] and value != defaults[key] and value != explicit[key]:
            raise ValueError(f"ray option {key!r} given both as a keyword ({explicit[key]!r}) and in ray_config ({value!r})")
        if value is not None and explicit[key] == defaults[key]:
            merged[key] = value
    return merged


def _block_count(num_envs: int, num_workers: int | None, envs_per_worker: int | None, default: int) -> int:
    """How many actors: from envs_per_worker, num_workers, or the default; never more than envs."""
    if num_workers is not None and num_workers < 1:
        raise ValueError(f"num_workers must be >= 1, got {num_workers}")
    if envs_per_worker is not None:
        if envs_per_worker < 1:
            raise ValueError(f"envs_per_worker must be >= 1, got {envs_per_worker}")
        workers = math.ceil(num_envs / envs_per_worker)
        if num_workers is not None and num_workers != workers:
            raise ValueError(
                f"num_workers={num_workers} and envs_per_worker={envs_per_worker} disagree for {num_envs} envs "
                f"(that would be {workers} workers); give one of them"
            )
        return workers
    if num_workers is not None:
        if num_workers > num_envs:
            raise ValueError(f"num_workers={num_workers} is more than num_envs={num_envs}; allowed: 1..{num_envs}")
        return num_workers
    return max(1, min(num_envs, default))

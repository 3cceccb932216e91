"""The reward array's dtype: ``float32`` or ``float64``, chosen per VecEnv or left to the family.

Examples:
    >>> parse_reward_dtype("float64")
    dtype('float64')
    >>> parse_reward_dtype(None) is None
    True
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from marl_vec.core.spec import EnvSpec

REWARD_DTYPES = ("float32", "float64")


def parse_reward_dtype(value: Any) -> np.dtype | None:
    """``"float32"``/``"float64"`` (or those numpy dtypes) as a dtype; None stays None."""
    if value is None:
        return None
    try:
        dtype = np.dtype(value)
    except TypeError:
        dtype = None
    if dtype is None or dtype.name not in REWARD_DTYPES:
        raise ValueError(f"reward_dtype must be one of {', '.join(REWARD_DTYPES)} (or None: the family's), "
                         f"got {value!r}")
    return dtype


def with_reward_dtype(spec: EnvSpec, reward_dtype: Any) -> EnvSpec:
    """``spec`` with its reward dtype overridden (None: as the adapter says)."""
    dtype = parse_reward_dtype(reward_dtype)
    return spec if dtype is None or dtype == spec.reward_dtype else replace(spec, reward_dtype=dtype)

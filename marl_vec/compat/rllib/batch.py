"""What ``config.environment("marl_vec", env_config={...})`` holds, and the batch it builds.

The keys of ``env_config`` (any other key is an error that names the allowed ones):

- ``env_fn`` (required): a zero-argument callable making one env: a PettingZoo
  ``ParallelEnv`` or AEC env, a marl_vec ``MultiAgentEnv``, a ``gymnasium.Env``.
  Picklable for the ``subproc`` and ``ray`` backends (``functools.partial`` is).
- ``backend``: ``"dummy"`` (default), ``"subproc"`` or ``"ray"``.
- ``backend_kwargs``: more arguments for the backend (``num_workers``,
  ``start_method``, ``batch_size`` for the async pool, ...).
- ``env_seed``: marl_vec's ``env_seed`` (default None: the envs are seeded by
  RLlib's first ``reset(seed=...)``, from ``config.debugging(seed=...)``, env i with
  ``seed + i``, as RLlib's own ``SyncVectorMultiAgentEnv`` seeds them).
- ``reward_dtype``: ``"float64"`` (default: PettingZoo's Python floats, exactly)
  or ``"float32"``.
- ``action_mask``: observations ``{"action_mask", "observations"}`` (default False).
- ``obs_dtype``: cast observations to this dtype (default None: the env's own);
  ``"float32"`` for integer boards, which RLlib's default encoders do not take.
- ``global_state``: the env's global state in each agent's infos under ``"state"``
  (default False); ``state`` (marl_vec's option, default ``"auto"``) says which.

Examples:
    >>> from mpe2 import simple_spread_v3
    >>> options = parse_env_config({"env_fn": simple_spread_v3.parallel_env, "backend": "dummy"})
    >>> options.backend, options.reward_dtype
    ('dummy', 'float64')
    >>> parse_env_config({"env_fn": simple_spread_v3.parallel_env, "backnd": "dummy"})
    Traceback (most recent call last):
    ...
    ValueError: env_config key 'backnd' is not one of marl_vec's: action_mask, backend, backend_kwargs, env_fn, env_seed, global_state, obs_dtype, reward_dtype, state
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from marl_vec.vec.base import VecEnv
from marl_vec.vec.factory import make_vec

BACKENDS = ("dummy", "subproc", "ray")


@dataclass(frozen=True)
class BatchOptions:
    """The parsed ``env_config`` (see the module's docstring for each key)."""

    env_fn: Callable[[], Any]
    backend: str = "dummy"
    backend_kwargs: Mapping[str, Any] = field(default_factory=dict)
    env_seed: int | None = None
    reward_dtype: str = "float64"
    action_mask: bool = False
    global_state: bool = False
    state: str = "auto"
    obs_dtype: str | None = None

    def make(self, num_envs: int, autoreset: str = "next_step") -> VecEnv:
        """The marl_vec batch of ``num_envs`` envs these options describe."""
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        return make_vec([self.env_fn] * num_envs, backend=self.backend, env_seed=self.env_seed,
                        autoreset=autoreset, state=self.state, reward_dtype=self.reward_dtype,
                        **dict(self.backend_kwargs))


def parse_env_config(env_config: Mapping[str, Any]) -> BatchOptions:
    """Check ``env_config`` and return its options; a mistake names the key and what is allowed."""
    allowed = sorted(f.name for f in fields(BatchOptions))
    for key in env_config:
        if key not in allowed:
            raise ValueError(f"env_config key {key!r} is not one of marl_vec's: {', '.join(allowed)}")
    if "env_fn" not in env_config:
        raise ValueError("env_config needs 'env_fn': a zero-argument callable that makes one env "
                         "(e.g. functools.partial(simple_spread_v3.parallel_env, N=3))")
    if not callable(env_config["env_fn"]):
        raise TypeError(f"env_config['env_fn'] must be a zero-argument callable, got {env_config['env_fn']!r}")
    backend = env_config.get("backend", "dummy")
    if backend not in BACKENDS:
        raise ValueError(f"env_config['backend'] must be one of {', '.join(BACKENDS)}, got {backend!r}")
    kwargs = env_config.get("backend_kwargs") or {}
    if not isinstance(kwargs, Mapping):
        raise TypeError(f"env_config['backend_kwargs'] must be a dict, got {kwargs!r}")
    for flag in ("action_mask", "global_state"):
        if not isinstance(env_config.get(flag, False), bool):
            raise TypeError(f"env_config[{flag!r}] must be True or False, got {env_config[flag]!r}")
    return BatchOptions(**{key: env_config[key] for key in env_config if key != "backend_kwargs"},
                        backend_kwargs=dict(kwargs))

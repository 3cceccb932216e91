"""What every slot of one JaxMARL env id shares: the native env, its view and its EnvSpec.

One idea: the model of an env id, made once per process (a block of 1,024 slots builds one
native env) and read by both forms of a JaxMARL batch: the stateful family
(`marl_vec.envs.jaxmarl.engine`) and the functional batch (``marl_vec.jax``), so that their
shapes, dtypes and padding are the same.

May import: numpy, jax (lazily), ``marl_vec.core.spec``, ``marl_vec.envs.extras``,
``marl_vec.envs.jaxmarl.{catalog,views}``.

Examples:
    >>> model = model_of("smax/3m", {})
    >>> model.spec.obs_shape, model.spec.state_shape, model.spec.n_actions
    ((75,), (72,), 8)
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from marl_vec.core.spec import ContinuousAction, DiscreteAction, EnvSpec
from marl_vec.envs.extras import require
from marl_vec.envs.jaxmarl.catalog import make_native, parse_device, resolve
from marl_vec.envs.jaxmarl.views import View, view_class


@dataclasses.dataclass(frozen=True)
class Model:
    """What every slot of one env id shares: the native env, its view, the spec."""

    key: tuple[str, str]  # (our id, repr of its kwargs): equal models make one block
    label: str
    env: Any
    view: View
    spec: EnvSpec
    device: str | None = None  # the option device= (`catalog.parse_device`); None: JAX's default device


def _n_actions(space: Any, make_id: str, agent: str) -> int:
    n = getattr(space, "num_categories", None)
    if n is None:
        n = getattr(space, "n", None)
    if n is None or getattr(space, "shape", ()) not in ((), None):
        raise ValueError(f"JaxMARL env {make_id!r}: agent {agent!r} has actions {type(space).__name__}"
                         f"{getattr(space, 'shape', '')}; this family serves Discrete actions only")
    return int(n)


def _box_action(spaces: list[Any], make_id: str) -> tuple[ContinuousAction, list[int]]:
    """Box actions per agent: flat ones, padded to the largest agent's (padding ignored)."""
    sizes = []
    for agent, space in spaces:
        shape = tuple(getattr(space, "shape", ()) or ())
        if len(shape) != 1:
            raise ValueError(f"JaxMARL env {make_id!r}: agent {agent!r} has Box actions of shape {shape}; "
                             "only flat ones (one axis) are served")
        sizes.append(shape[0])
    width = max(sizes)
    low = np.full((len(sizes), width), -np.inf, dtype=np.float64)
    high = np.full((len(sizes), width), np.inf, dtype=np.float64)
    for a, ((_, space), size) in enumerate(zip(spaces, sizes)):
        low[a, :size] = np.broadcast_to(np.asarray(space.low, dtype=np.float64), (size,))
        high[a, :size] = np.broadcast_to(np.asarray(space.high, dtype=np.float64), (size,))
    if len(set(sizes)) == 1 and (low == low[0]).all() and (high == high[0]).all():
        return ContinuousAction((width,), low[0].astype(np.float32), high[0].astype(np.float32)), sizes
    return ContinuousAction((width,), low, high, np.dtype(np.float32), agent_shapes=tuple((s,) for s in sizes)), sizes


def _is_box(space: Any) -> bool:
    return type(space).__name__ == "Box"


_MODELS: dict[tuple[str, str], Model] = {}


def _model(env_id: str, given: dict[str, Any]) -> Model:
    jax = require("jax", "jax", "JaxMARL envs")

    make_id, implied = resolve(env_id)
    given = dict(given)
    device = parse_device(given.pop("device", None))  # ours, not jaxmarl.make's
    kwargs = {**implied, **given}
    env = make_native(make_id, kwargs)
    obs, _ = jax.eval_shape(env.reset, jax.ShapeDtypeStruct((2,), np.uint32))
    if not isinstance(obs, dict) or any(a not in obs for a in env.agents):
        raise ValueError(f"JaxMARL env {make_id!r} does not return a dict of observations per agent")
    agents = list(env.agents)
    shapes = [tuple(obs[a].shape) for a in agents]
    dtype = np.result_type(*[np.dtype(obs[a].dtype) for a in agents])
    spaces = [(str(a), env.action_space(a)) for a in agents]
    if any(_is_box(space) for _, space in spaces):
        if not all(_is_box(space) for _, space in spaces):
            raise ValueError(f"JaxMARL env {make_id!r} mixes Box and Discrete actions across agents; not served")
        action, action_dims = _box_action(spaces, make_id)
        n_actions: list[int] = []
    else:
        n_actions = [_n_actions(space, make_id, agent) for agent, space in spaces]
        action_dims = None
        action = DiscreteAction(max(n_actions), dtype=np.dtype(np.int32))
    view = view_class(make_id)(env, shapes, dtype, n_actions, action_dims)
    size = len(agents) * int(np.prod(view.obs_shape))
    state_shape = tuple(obs["world_state"].shape) if view.has_state else (size,)
    limit = getattr(env, "max_steps", getattr(env, "episode_length", None))
    spec = EnvSpec(
        agents=tuple(str(a) for a in agents),
        obs_shape=view.obs_shape,
        obs_dtype=view.obs_dtype,
        state_shape=state_shape,
        state_dtype=np.dtype(np.float32) if view.has_state else view.obs_dtype,
        action=action,
        episode_limit=None if limit is None else int(limit),
        obs_padded=view.obs_padded,
        actions_padded=(len(set(action_dims)) > 1) if action_dims else len(set(n_actions)) > 1,
        stats=view.stats,
        state_is_obs=not view.has_state,
        device=device,
        env_name=f"jaxmarl/{env_id}",
    )
    scenario = kwargs.get("scenario")
    label = make_id + (f"({scenario})" if isinstance(scenario, str) else "")
    key = (env_id, repr(sorted(given.items())) + ("" if device is None else f" on {device}"))
    return Model(key=key, label=label, env=env, view=view, spec=spec, device=device)


def model_of(env_id: str, kwargs: dict[str, Any]) -> Model:
    """The shared `Model` of an id and its kwargs (made once per process: a block of
    1,024 slots builds one native env). Kwargs are told apart by their repr (they may be lists)."""
    key = (env_id, repr(sorted(kwargs.items())))
    if key not in _MODELS:
        _MODELS[key] = _model(env_id, dict(kwargs))
    return _MODELS[key]

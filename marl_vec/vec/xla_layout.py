"""What `VecEnv.xla()`'s functions hand to XLA: the result's fields as flat arrays of fixed shapes.

`XlaResult` is the pytree a jitted ``step``/``recv``/``reset`` returns. Its structure
is fixed for a batch: a field the batch does not have (``state`` with
``state="none"``, ``avail_actions`` for continuous actions, ``final_*`` outside the
same_step and fast modes, ``env_ids`` outside ``recv``) is None at every call, so a
``lax.scan`` carries the same tree at every step.

`XlaLayout` turns a [`StepResult`][marl_vec.vec.results.StepResult] into the flat
list of numpy arrays an ``io_callback`` returns, in the dtypes JAX holds (with
``jax_enable_x64`` off, float64 becomes float32 and int64 int32, as
``jax.numpy.asarray`` would make them), and says what shapes to expect
(``jax.ShapeDtypeStruct``). Single-agent batches (``single_agent``) drop the
agent axis, as EnvPool lays out its results: obs ``(E, *obs_shape)``, reward,
terminated and truncated ``(E,)``.

Examples:
    >>> import gymnasium as gym, numpy as np
    >>> import marl_vec as mv
    >>> from marl_vec.vec.xla_layout import XlaLayout
    >>> with mv.DummyVecEnv([lambda: gym.make("CartPole-v1")] * 2, env_seed=0) as venv:
    ...     layout = XlaLayout(venv.buffers, single_agent=True, keeps_final=True)
    ...     arrays = layout.arrays(venv.reset())
    >>> [a.shape for a in arrays[:2]]
    [(2, 4), (2, 4)]
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from marl_vec.core import spaces
from marl_vec.core.buffers import BatchBuffers

__all__ = ["XlaResult", "XlaLayout", "FIELDS"]


class XlaResult(NamedTuple):
    """One batched step (or reset) as JAX arrays, from a jitted ``step``, ``recv`` or ``reset``.

    The fields of [`StepResult`][marl_vec.vec.results.StepResult] with the same
    shapes (agent axis dropped for single-agent batches), less ``infos``; plus
    ``episode_return`` (E,) float32 and ``episode_length`` (E,) int32, the ended
    episode's team return and length where an episode ended at this step (zeros elsewhere), and ``env_ids``
    (the rows' envs; ``recv`` only).
    """

    obs: Any
    state: Any
    avail_actions: Any
    agent_mask: Any
    acting: Any
    reward: Any
    terminated: Any
    truncated: Any
    done: Any
    final_obs: Any = None
    final_state: Any = None
    final_avail_actions: Any = None
    final_acting: Any = None
    episode_return: Any = None
    episode_length: Any = None
    env_ids: Any = None


FIELDS = XlaResult._fields
# Fields with an agent axis right after the env axis (dropped for single-agent batches).
_AGENT_AXIS = frozenset({"obs", "avail_actions", "agent_mask", "acting", "reward", "terminated", "truncated",
                         "final_obs", "final_avail_actions", "final_acting"})


def jax_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype JAX holds ``dtype`` in (64-bit types narrow unless ``jax_enable_x64``)."""
    import jax

    return np.dtype(jax.dtypes.canonicalize_dtype(dtype))


class XlaLayout:
    """The flat arrays of a batch's results, and their shapes and dtypes for XLA.

    Args:
        buffers: the batch's buffers (shapes, dtypes and which fields exist).
        single_agent: drop the agent axis (a batch of one agent, EnvPool's layout).
        keeps_final: the autoreset mode fills ``final_*`` (same_step, fast).
    """

    def __init__(self, buffers: BatchBuffers, single_agent: bool, keeps_final: bool):
        self.single_agent = single_agent
        self.num_envs = int(buffers.done.shape[0])
        # field -> template leaves (None: field absent); trees keep their structure.
        self.fields: dict[str, Any] = {}
        self._plan: list[tuple[str, bool]] | None = None
        for name in FIELDS:
            if name in ("episode_return", "episode_length"):
                self.fields[name] = np.zeros(self.num_envs, np.float32 if name == "episode_return" else np.int32)
                continue
            if name == "env_ids":
                self.fields[name] = None  # recv adds them
                continue
            if name.startswith("final_") and not keeps_final:
                self.fields[name] = None
                continue
            value = buffers.movers() if name == "acting" else getattr(buffers, name)
            if value is not None:
                for leaf in spaces.tree_leaves(value):
                    if leaf.dtype.hasobject:
                        raise TypeError(f"VecEnv.xla() cannot hand {name!r} to XLA: it holds Python objects "
                                        f"(dtype object, e.g. Text or Graph spaces); XLA takes numeric arrays only")
            self.fields[name] = value

    def _shape(self, name: str, shape: tuple[int, ...], rows: int) -> tuple[int, ...]:
        if self.single_agent and name in _AGENT_AXIS:
            return (rows,) + tuple(shape[2:])
        return (rows,) + tuple(shape[1:])

    def shapes(self, rows: int | None = None, env_ids: bool = False) -> tuple[list[Any], Any]:
        """``jax.ShapeDtypeStruct`` of every leaf (for ``rows`` rows; default every env), and
        a function that builds the `XlaResult` from the flat leaves."""
        import jax

        rows = self.num_envs if rows is None else rows
        structs: list[Any] = []
        builders: list[tuple[str, Any, int]] = []  # (field, treedef, number of leaves)
        for name, value in self.fields.items():
            if name == "env_ids" and env_ids:
                value = np.zeros(rows, np.int32)
            if value is None:
                builders.append((name, None, 0))
                continue
            leaves, treedef = jax.tree_util.tree_flatten(value)
            structs += [jax.ShapeDtypeStruct(self._shape(name, leaf.shape, rows), jax_dtype(leaf.dtype))
                        for leaf in leaves]
            builders.append((name, treedef, len(leaves)))

        def build(flat: list[Any]) -> XlaResult:
            out: dict[str, Any] = {}
            at = 0
            for name, treedef, count in builders:
                out[name] = None if treedef is None else jax.tree_util.tree_unflatten(treedef, flat[at:at + count])
                at += count
            return XlaResult(**out)

        return structs, build

    def write(self, result: Any, outs: list[np.ndarray], env_ids: np.ndarray | None = None) -> None:
        """Write ``result`` (a StepResult, views or copies) into ``outs``, the flat arrays of
        `shapes`, one copy per array (narrowed to JAX's dtype on the way). ``final_*`` rows of
        envs not done become zeros, as ``step()`` with ``copy=True`` gives them."""
        if self._plan is None:
            self._plan = self._make_plan(result)
        done = result.done
        not_done: Any = None  # which final_* rows to blank: all (no env done), or a mask
        at = 0
        for name, is_tree in self._plan:
            if name == "env_ids":
                if env_ids is not None:
                    outs[at][...] = env_ids
                    at += 1
                continue
            if name in ("episode_return", "episode_length"):
                _episode_field(result, name, outs[at])
                at += 1
                continue
            value = getattr(result, name)
            for leaf in (_leaves(value) if is_tree else (value,)):
                out = outs[at]
                at += 1
                np.copyto(out, np.asarray(leaf).reshape(out.shape), casting="unsafe")
                if name[0] == "f":  # final_*: blank the rows of envs not done
                    if not_done is None:
                        not_done = ~np.asarray(done, bool) if done.any() else ...
                    out[not_done] = 0

    def _make_plan(self, result: Any) -> list[tuple[str, bool]]:
        """(field, is a tree) in the order of `shapes`, fields the batch lacks left out."""
        plan = []
        for name, template in self.fields.items():
            if name == "env_ids":
                plan.append((name, False))
            elif template is not None:
                plan.append((name, not isinstance(template, np.ndarray)))
        return plan

    def arrays(self, result: Any, env_ids: np.ndarray | None = None) -> list[np.ndarray]:
        """The flat leaves of ``result`` (a StepResult) in the order of `shapes`, as new arrays."""
        outs = [np.empty(s.shape, s.dtype) for s in self.shapes(len(result.done), env_ids is not None)[0]]
        self.write(result, outs, env_ids)
        return outs


def _leaves(tree: Any) -> list[Any]:
    import jax

    return jax.tree_util.tree_leaves(tree)


def _episode_field(result: Any, name: str, out: np.ndarray) -> None:
    """Team return or length of the episodes that ended at this step, into ``out``; zeros elsewhere."""
    key = "return" if name == "episode_return" else "length"
    out[...] = 0
    infos = result.infos
    for i in np.flatnonzero(result.done).tolist():
        episode = infos[i].get("episode") if i < len(infos) else None
        if episode is not None:
            out[i] = episode[key]


def expand_actions(actions: Any, single_agent: bool) -> Any:
    """Actions as the batch takes them: a single-agent batch's ``(E, ...)`` gets its agent axis back."""
    if not single_agent:
        return actions
    import jax

    return jax.tree_util.tree_map(_with_agent_axis, actions)


def _with_agent_axis(leaf: Any) -> np.ndarray:
    leaf = np.asarray(leaf)
    return leaf.reshape(leaf.shape[:1] + (1,) + leaf.shape[1:])


"""The gymnasium face over a torch or JAX batch: gymnasium's own array conventions.

A `GymVectorEnv` over a VecEnv built with ``array_backend="torch"`` (or ``"jax"``)
returns what gymnasium's ``NumpyToTorch(SyncVectorEnv(...))`` (resp.
``ArrayConversion(SyncVectorEnv(...), env_xp=numpy, target_xp=jax.numpy)``; gymnasium
ships no ``NumpyToJax``) returns over the same envs, seeds and actions:

- ``obs``, ``reward``, ``terminated``, ``truncated``: the VecEnv's own tensors / arrays
  with the agent axis squeezed, on the VecEnv's device: nothing goes through numpy.
- infos: converted as gymnasium's ``array_conversion`` converts them (numbers with
  ``xp.asarray``: a Python float is a float32 tensor; numpy arrays by DLPack, ``_key``
  masks included; dicts, lists and tuples leaf by leaf), on the VecEnv's device.
- Where gymnasium's wrappers raise, the face serves: object arrays
  (``infos["final_obs"]`` in same-step mode, unknown info values) stay numpy object
  arrays whose items are converted (``NumpyToTorch`` raises ``BufferError`` on them),
  and strings are kept. A final observation is the VecEnv's row on the device,
  cast to the dtype gymnasium would give the env's own value (Python and numpy
  scalars, e.g. Discrete observations, are read from the host, one value per ended
  episode).
- Actions: torch tensors / JAX arrays of the batched shape go to the VecEnv as they
  are (it reads CPU ones without a copy); numpy and anything else as before.

Examples:
    >>> import torch
    >>> to_backend({"x": 1.5, "_x": np.array([True, False])}, "torch", None)
    {'x': tensor(1.5000), '_x': tensor([ True, False])}
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np

from marl_vec.core.obs_types import as_native
from marl_vec.vec.device_arrays import host_array, is_host_device

# What the face serves: numpy (gymnasium's SyncVectorEnv), torch (NumpyToTorch's) and JAX arrays.
FACE_BACKENDS = ("numpy", "torch", "jax")


def to_backend(value: Any, xp: str, device: Any) -> Any:
    """``value`` (an info tree) as gymnasium's ``array_conversion(value, xp, device)`` gives
    it, for ``xp`` ``"torch"`` or ``"jax"``; where that raises (object arrays, strings) items
    converted one by one, strings kept (see the module doc)."""
    if value is None or isinstance(value, (str, bytes)):
        return value
    if isinstance(value, Mapping):
        return type(value)((key, to_backend(v, xp, device)) for key, v in value.items())
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            out = np.empty(value.shape, dtype=object)
            for index, item in np.ndenumerate(value):
                out[index] = to_backend(item, xp, device)
            return out
        return _from_numpy(value, xp, device)
    if isinstance(value, (numbers.Number, np.generic)):
        return _asarray(value, xp, device)
    if _is_native(value, xp):
        return value
    if hasattr(value, "_make"):  # a namedtuple, as gymnasium keeps them
        return type(value)._make(to_backend(v, xp, device) for v in value)
    if isinstance(value, (list, tuple)):
        return type(value)(to_backend(v, xp, device) for v in value)
    return value  # anything else (an object in an object array) as it is


def _asarray(value: Any, xp: str, device: Any) -> Any:
    """A Python or numpy scalar as ``xp.asarray`` makes it (torch: a Python float is float32)."""
    if xp == "torch":
        import torch

        return torch.asarray(value, device=device)
    import jax.numpy as jnp

    return jnp.asarray(value, device=device)


def _from_numpy(array: np.ndarray, xp: str, device: Any) -> Any:
    """A numpy array by DLPack, as gymnasium converts it (read-only ones copied first), then
    moved to ``device``."""
    if not array.flags.writeable:
        array = array.copy()  # DLPack refuses read-only buffers; gymnasium copies them too
    if xp == "torch":
        import torch

        tensor = torch.from_dlpack(array)
        return tensor if is_host_device(device) else tensor.to(device)
    import jax
    import jax.numpy as jnp

    out = jnp.from_dlpack(array)
    return out if is_host_device(device) else jax.device_put(out, device)


def _is_native(value: Any, xp: str) -> bool:
    """Whether ``value`` is already a torch tensor (``xp`` torch) or a JAX array (``xp`` jax)."""
    module = type(value).__module__
    if xp == "torch":
        return module.startswith("torch")
    return module.startswith("jax")


class FaceArrays:
    """What the face does differently over a torch or JAX VecEnv (see the module doc).

    Args:
        venv: the batch, with ``array_backend`` ``"torch"`` or ``"jax"`` and its ``device``.
        action_shape: the batched action shape the face takes, ``(E, *action_shape)``.
        discrete: whether actions are integers (floats refused with ``TypeError``).
    """

    def __init__(self, venv: Any, action_shape: tuple[int, ...], discrete: bool):
        self.xp = venv.array_backend
        self.device = venv.device
        self.action_shape = action_shape
        self.discrete = discrete

    def squeeze(self, tree: Any) -> Any:
        """(E, 1, ...) tensors / arrays -> (E, ...), the agent axis squeezed."""
        return tree[:, 0]

    def flags(self, reward: Any, terminated: Any, truncated: Any, copy: bool) -> tuple[Any, Any, Any]:
        """Rewards and flags (E,), cloned where ``copy`` (torch; JAX arrays never change)."""
        out = reward[:, 0], terminated[:, 0], truncated[:, 0]
        if copy and self.xp == "torch":
            return out[0].clone(), out[1].clone(), out[2].clone()
        return out

    def final_obs(self, final_obs: Any, env: int, kind: Any, copy: bool) -> Any:
        """Env ``env``'s final observation as gymnasium converts the env's own value: the
        device row for an array (cast to the env's dtype), the host for a scalar kind."""
        row = final_obs[env, 0]
        if isinstance(kind, tuple) and len(kind) == 2 and kind[0] != "array":
            # A Python or numpy scalar: gymnasium's xp.asarray of it (torch: float -> float32).
            return _asarray(as_native(host_array(row), kind, copy=True), self.xp, self.device)
        if isinstance(kind, tuple) and len(kind) == 2:
            row = self._cast(row, np.dtype(kind[1]))
        return row.clone() if copy and self.xp == "torch" else row

    def _cast(self, row: Any, dtype: np.dtype) -> Any:
        """``row`` in ``dtype`` (a numpy dtype), as DLPack of the env's array would give it."""
        if self.xp == "torch":
            import torch

            target = torch.from_numpy(np.empty(0, dtype)).dtype
            return row if row.dtype == target else row.to(target)
        import jax.numpy as jnp

        target = jnp.empty(0, dtype).dtype  # JAX's own (float64 is float32 without jax_enable_x64)
        return row if row.dtype == target else row.astype(target)

    def infos(self, infos: dict[str, Any]) -> dict[str, Any]:
        """The face's numpy infos as gymnasium's wrappers convert them."""
        return to_backend(infos, self.xp, self.device) if infos else infos

    def actions(self, actions: Any) -> Any:
        """Torch / JAX actions of the batched shape as the VecEnv's ``(E, 1, ...)``, as they are;
        None for anything else (numpy, lists, trees: the numpy path takes them, after
        `host_array` for tensors of another shape)."""
        if not _is_native(actions, self.xp) or tuple(actions.shape) != self.action_shape:
            return None
        if self.discrete and not _is_integer(actions):
            raise TypeError(f"discrete actions must be integers, got dtype {actions.dtype}; a cast would change them")
        return actions.reshape((actions.shape[0], 1, *actions.shape[1:]))


def _is_integer(array: Any) -> bool:
    """Whether a torch tensor or JAX array holds integers (bool is not one)."""
    dtype = array.dtype
    if hasattr(dtype, "is_floating_point"):  # torch
        return not (dtype.is_floating_point or dtype.is_complex or str(dtype) == "torch.bool")
    return np.dtype(dtype).kind in "iu"


def refuse(venv: Any, turn_based: bool) -> str:
    """``venv.array_backend`` checked for the face: one of `FACE_BACKENDS`; a turn-based
    game (served against an opponent, which reads numpy) only as numpy."""
    backend = getattr(venv, "array_backend", "numpy")
    if backend not in FACE_BACKENDS:
        raise ValueError(f"GymVectorEnv: array_backend={backend!r} is not served; allowed: {', '.join(FACE_BACKENDS)}")
    if backend != "numpy" and turn_based:
        raise ValueError(f"GymVectorEnv: a turn-based game (served against opponent=) needs array_backend='numpy', "
                         f"got {backend!r}; allowed with 'torch'/'jax': single-agent VecEnvs")
    return backend

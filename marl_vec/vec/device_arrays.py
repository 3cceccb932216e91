"""Results as torch tensors or JAX arrays (``array_backend=``), and actions taken as either.

One idea: what `DummyVecEnv`'s ``array_backend`` and ``device`` do to a
`StepResult` and to the actions it is given. See docs/backends/device_arrays.md.

- ``"numpy"`` (default): nothing here runs.
- ``"torch"``: every field of the result is a ``torch.Tensor`` with the buffers'
  ``(E, A, ...)`` layout and dtypes. On ``device="cpu"`` the tensors ARE the batch
  buffers (``torch.from_numpy``, made once): ``copy=False`` hands them out (the same
  ``data_ptr`` at every step), ``copy=True`` hands out clones. On another device
  (``"cuda:0"``) the tensors are preallocated there once, and each step writes them
  in place (``Tensor.copy_``): one host-to-device copy per field per step. Where the
  envs' engine writes on the device itself (VMAS: `use_outputs`), the tensors are its
  outputs, preallocated once, and nothing is copied (nor read from the host).
- ``"jax"``: ``jax.Array``s. On the CPU, ``copy=False`` hands out DLPack views of the
  buffers (64-byte aligned, so JAX takes them without a copy: the same
  ``unsafe_buffer_pointer`` at every step); ``copy=True`` one fresh array per field.
  On another device, one fresh array per field per step (``jax.device_put``).

Actions may be numpy arrays, torch tensors or JAX arrays: CPU ones are read without a
copy (``Tensor.numpy()``, ``numpy.from_dlpack``), device ones are brought to the host
once, except for an engine that steps on the device (VMAS), which takes torch tensors
there (`marl_vec.vec.device_actions`).

May import: numpy, torch and jax (lazily), ``marl_vec.core.buffers``.

Examples:
    >>> import gymnasium as gym, torch
    >>> import marl_vec as mv
    >>> venv = mv.DummyVecEnv([lambda: gym.make("CartPole-v1")] * 2, array_backend="torch")
    >>> r = venv.reset()
    >>> type(r.obs).__name__, tuple(r.obs.shape), r.done.dtype
    ('Tensor', (2, 1, 4), torch.bool)
    >>> r = venv.step(torch.zeros((2, 1), dtype=torch.int64))
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from marl_vec.core.buffers import BatchBuffers
from marl_vec.core.devices import torch_device

ARRAY_BACKENDS = ("numpy", "torch", "jax")
# StepResult's array fields, each with the buffers' attribute it is made of.
FIELDS = ("obs", "state", "avail_actions", "agent_mask", "reward", "terminated", "truncated", "done",
          "final_obs", "final_state", "final_avail_actions", "acting", "final_acting")
# The observation spaces a torch / JAX batch serves (one numeric array each), for the error messages.
_ARRAY_SPACES = "Box, Discrete, MultiDiscrete, MultiBinary observations"
FINALS = ("final_obs", "final_state", "final_avail_actions", "final_acting")


def parse_array_backend(value: Any) -> str:
    """``value`` checked: one of `ARRAY_BACKENDS`.

    Examples:
        >>> parse_array_backend("torch")
        'torch'
    """
    if value not in ARRAY_BACKENDS:
        raise ValueError(f"array_backend must be one of {', '.join(ARRAY_BACKENDS)}; got {value!r}")
    return str(value)


def is_host_device(device: Any) -> bool:
    """Whether ``device`` (None, a string, a ``torch.device`` or a JAX device) is the CPU."""
    if device is None:
        return True
    platform = getattr(device, "platform", None)  # a JAX device
    if platform is not None:
        return platform == "cpu"
    return str(device).split(":")[0] == "cpu"


def refuse_device(backend: str, array_backend: Any, device: Any) -> None:
    """The process and Ray backends keep results in host memory: a device (or a torch/jax
    ``array_backend``) is refused there, naming DummyVecEnv."""
    if array_backend not in (None, "numpy") or not is_host_device(device):
        raise ValueError(f"{backend} returns numpy arrays on the host (array_backend={array_backend!r}, "
                         f"device={device!r} asked); use DummyVecEnv for torch or JAX results on a device")


class HostOnlyError(ValueError):
    """A process or Ray backend given envs that compute on a device (``spec.device``: VMAS's or
    JaxMARL's ``device="cuda:0"``): their results cross processes through host memory."""


def refuse_env_device(backend: str, spec: Any) -> None:
    """Raise `HostOnlyError` where ``spec.device`` is off the CPU, naming DummyVecEnv."""
    device = getattr(spec, "device", None)
    if not is_host_device(device):
        raise HostOnlyError(f"{backend} keeps results in host memory, but the envs ({spec.env_name or 'this env'}) "
                            f"compute on device {device!r}; use DummyVecEnv(array_backend='torch') for device results "
                            "(or 'jax', for a JAX engine: JaxMARL), or the env's device='cpu'")


class DeviceArrays:
    """The torch or JAX face of a batch's buffers (see the module doc).

    Args:
        buffers: the batch buffers (allocated ``aligned=True`` for JAX).
        array_backend: ``"torch"`` or ``"jax"``.
        device: where results live (None or ``"cpu"``: the host; ``"cuda:0"``, a ``torch.device``
            or a JAX device).
    """

    def __init__(self, buffers: BatchBuffers, array_backend: str, device: Any = None):
        self.array_backend = parse_array_backend(array_backend)
        if buffers.spec.obs_space is not None and not isinstance(buffers.obs, np.ndarray):
            raise ValueError(f"array_backend={array_backend!r} needs one observation array, got a Dict/Tuple "
                             f"observation space; allowed with {array_backend!r}: {_ARRAY_SPACES}; Dict/Tuple "
                             "observations need array_backend='numpy'")
        if any(getattr(buffers, name) is not None and getattr(buffers, name).dtype.hasobject
               for name in ("obs", "state")):
            raise ValueError(f"array_backend={array_backend!r}: object observations (Text, Graph, Sequence, OneOf, "
                             f"custom spaces) have no tensor form; allowed with {array_backend!r}: {_ARRAY_SPACES}; "
                             "object observations need array_backend='numpy'")
        self.buffers = buffers
        self.host = is_host_device(device)
        if array_backend == "torch":
            import torch

            self.torch = torch
            if torch.device("cpu" if device is None else device).type == "cuda" and not torch.cuda.is_available():
                raise ValueError(f"device={device!r}: torch {torch.__version__} has no CUDA here; available: cpu")
            self.device = torch_device(device)  # "cuda" as "cuda:0": the device its tensors report
            self.views = {name: torch.from_numpy(array) for name, array in self._host_fields()}
            # Off the host: preallocated once on the device (at the first result), written in place each step.
            self.tensors = self.views if self.host else {}
        else:
            import jax

            self.jax = jax
            wide = [name for name, array in self._host_fields() if array.dtype.itemsize == 8]
            if wide and not jax.config.jax_enable_x64:
                raise ValueError(f"array_backend='jax': {', '.join(wide)} are 64-bit, which JAX keeps only with "
                                 "jax_enable_x64; turn it on, or pass reward_dtype='float32' where it is the reward")
            self.device = jax.devices("cpu")[0] if device is None else (
                device if hasattr(device, "platform") else _jax_device(jax, str(device)))
            if self.host:
                self.views = {name: jax.dlpack.from_dlpack(array) for name, array in self._host_fields()}

    def use_outputs(self, outputs: Any) -> None:
        """Hand out ``outputs``' tensors (a `marl_vec.core.device_outputs.DeviceOutputs` that the
        envs' engine writes on the device) instead of the host buffers: no copy per step. Or
        ``outputs``' JAX arrays (a `marl_vec.core.jax_device.JaxOutputs`, new at each step): as they
        are (``"jax"``) or as torch tensors over their memory (``"torch"``, DLPack)."""
        self.outputs = outputs
        self.tensors = None if hasattr(outputs, "result_arrays") else outputs.result_fields()

    outputs: Any = None

    def _host_fields(self) -> list[tuple[str, np.ndarray]]:
        buf = self.buffers
        out = []
        for name in FIELDS:
            array = buf.movers() if name == "acting" else getattr(buf, name)
            if array is not None:
                out.append((name, array))
        return out

    def result(self, numpy_result: Any, copy: bool) -> Any:
        """``numpy_result`` (the buffers' StepResult, copy=False: their views) with every array
        field on the device; ``copy``: fresh arrays, else the preallocated ones."""
        if self.outputs is not None and self.tensors is None:  # a JAX engine's arrays
            # copy: one jitted call makes fresh arrays (final_* blanked); torch takes them by DLPack,
            # so a torch result shares memory with nothing the engine keeps.
            arrays = self.outputs.result_arrays(copy)
            if self.array_backend == "torch":
                arrays = {name: self._buffer_dtype(name, jax_to_torch(arrays[name])) for name in FIELDS
                          if getattr(numpy_result, name) is not None}
            return dataclasses.replace(numpy_result, **{name: arrays[name] for name in FIELDS
                                                        if getattr(numpy_result, name) is not None})
        changes: dict[str, Any] = {}
        for name in FIELDS:
            if getattr(numpy_result, name) is None:
                continue
            changes[name] = self._field(name, copy)
        if copy:  # as numpy's copies: final_* rows of envs not done are zeros
            done = changes["done"]
            for name in FINALS:
                if name in changes:
                    changes[name] = self._blank(changes[name], done)
        return dataclasses.replace(numpy_result, **changes)

    def rows_of_host(self, numpy_rows: Any) -> Any:
        """The async pool's rows (``numpy_rows``: a `PoolStepResult` of fresh host copies, a family
        stepped on the host) in this batch's array type, on its device."""
        changes: dict[str, Any] = {}
        for name in FIELDS:
            rows = getattr(numpy_rows, name)
            if rows is None:
                continue
            if self.array_backend == "torch":
                tensor = self.torch.from_numpy(rows)  # fresh rows: nothing else holds them
                changes[name] = tensor if self.host else tensor.to(self.device)
            else:
                changes[name] = self.jax.device_put(rows, self.device)
        return dataclasses.replace(numpy_rows, **changes)

    def rows_of_outputs(self, ids: np.ndarray, names: list[str]) -> dict[str, Any]:
        """The async pool's rows of envs ``ids`` (fields ``names``) from the device outputs the
        engine wrote (`use_outputs`): copies, made on the device, ``final_*`` rows of envs not
        done zeroed, as numpy mode's pool rows; torch tensors or JAX arrays as the batch's results."""
        if self.tensors is not None:  # torch outputs, written in place: index_select copies the rows
            index = self.torch.as_tensor(ids, device=self.device)
            rows = {name: self.tensors[name].index_select(0, index) for name in names}
        else:  # a JAX engine's current arrays
            import jax

            current = self.outputs.result_arrays(False)
            index = jax.device_put(ids, self.outputs.device)
            rows = {name: current[name][index] for name in names}
            if self.array_backend == "torch":  # torch mode: by DLPack, in the batch's dtypes
                rows = {name: self._buffer_dtype(name, jax_to_torch(value)) for name, value in rows.items()}
        done = rows["done"]
        for name in FINALS:
            if name in rows:  # out of place: a torch row may be a JAX array's memory (DLPack)
                array = rows[name]
                keep = done.reshape(tuple(done.shape) + (1,) * (array.ndim - 1))
                if isinstance(array, self.torch_tensor_type()):
                    rows[name] = array.masked_fill(~keep, 0)
                else:
                    rows[name] = self.jax.numpy.where(keep, array, self.jax.numpy.zeros((), array.dtype))
        return rows

    def torch_tensor_type(self) -> type:
        """``torch.Tensor`` in torch mode; in JAX mode a type nothing is (torch need not be there)."""
        return self.torch.Tensor if self.array_backend == "torch" else type(None)

    def _buffer_dtype(self, name: str, tensor: Any) -> Any:
        """``tensor`` in the dtype of the buffers' field ``name``. JAX without x64 makes 64-bit
        values 32-bit (a float64 ``reward_dtype``): torch, which has float64, gets the batch's
        dtype back (the float32 values widened, exactly as numpy mode stores them)."""
        dtypes = self.__dict__.get("_torch_dtypes")
        if dtypes is None:
            torch = self.torch
            dtypes = self._torch_dtypes = {field: torch.from_numpy(np.zeros(0, array.dtype)).dtype
                                           for field, array in self._host_fields()}
        dtype = dtypes[name]
        return tensor if tensor.dtype == dtype else tensor.to(dtype)

    def _blank(self, array: Any, done: Any) -> Any:
        shape = tuple(done.shape) + (1,) * (array.ndim - 1)
        if self.array_backend == "torch":
            return array.masked_fill_(~done.reshape(shape), 0)
        import jax.numpy as jnp

        return jnp.where(done.reshape(shape), array, jnp.zeros((), array.dtype))

    def _field(self, name: str, copy: bool) -> Any:
        host = self.buffers.movers() if name == "acting" else getattr(self.buffers, name)
        if self.outputs is not None:  # the engine wrote these on the device
            tensor = self.tensors[name]
            return tensor.clone() if copy else tensor
        if self.array_backend == "torch":
            if self.host:
                return self.views[name].clone() if copy else self.views[name]
            tensor = self.tensors.get(name)
            if tensor is None:
                view = self.views[name]
                tensor = self.tensors[name] = self.torch.empty(view.shape, dtype=view.dtype, device=self.device)
            tensor.copy_(self.views[name])  # host buffer -> preallocated device tensor, in place
            return tensor.clone() if copy else tensor
        jax = self.jax
        if self.host and not copy:
            return self.views[name]
        return jax.device_put(host.copy() if self.host else host, self.device)

    def to_host(self, actions: Any) -> Any:
        """``actions`` (numpy, torch or JAX) as something `ActionWriter` reads: numpy. CPU tensors
        and arrays without a copy; device ones once to the host."""
        return host_array(actions)


def host_array(value: Any) -> Any:
    """A torch tensor or JAX array as numpy (CPU: zero-copy; a device: one copy to the host);
    anything else as it is (a dict/tuple of them leaf by leaf).

    Examples:
        >>> import torch
        >>> host_array(torch.arange(3)).tolist()
        [0, 1, 2]
    """
    if isinstance(value, dict):
        return {key: host_array(v) for key, v in value.items()}
    if isinstance(value, tuple):
        return tuple(host_array(v) for v in value)
    module = type(value).__module__
    if module.startswith("torch"):
        tensor = value.detach()
        if tensor.device.type != "cpu":
            tensor = tensor.cpu()
        return tensor.resolve_conj().resolve_neg().numpy()
    if module.startswith("jax") or module.startswith("jaxlib"):
        devices = value.devices() if hasattr(value, "devices") else set()
        if all(getattr(d, "platform", "cpu") == "cpu" for d in devices):
            return np.from_dlpack(value)
        import jax

        return np.from_dlpack(jax.device_put(value, jax.devices("cpu")[0]))
    return value


def torch_to_jax(tensor: Any) -> Any:
    """A torch tensor as a JAX array over the same memory (DLPack, no copy)."""
    import jax

    return jax.dlpack.from_dlpack(tensor)


def jax_to_torch(array: Any) -> Any:
    """A JAX array as a torch tensor over the same memory (DLPack, no copy)."""
    import torch

    return torch.from_dlpack(array)


def jax_default_device() -> Any:
    """JAX's default device (where a JAX engine built without ``device=`` runs)."""
    import jax

    return jax.devices()[0]


def device_name(device: Any) -> str:
    """``device`` (a string, a ``torch.device`` or a JAX device) as ``"cpu:0"``, ``"cuda:1"``, ...

    Examples:
        >>> device_name("cpu"), device_name("gpu"), device_name("cuda:1")
        ('cpu:0', 'cuda:0', 'cuda:1')
    """
    platform = getattr(device, "platform", None)
    if platform is not None:  # a JAX device: its index among its platform's devices
        import jax

        index = [d.id for d in jax.devices(platform)].index(device.id)
        kind = "cuda" if platform == "gpu" else platform
        return f"{kind}:{index}"
    kind, _, index = str(device).partition(":")
    return f"{'cuda' if kind == 'gpu' else kind}:{index or 0}"


def same_device(engine_device: Any, results_device: Any) -> bool:
    """Whether a JAX engine's device (None: JAX's default) is where results are asked to live."""
    engine = jax_default_device() if engine_device is None else engine_device
    return device_name(engine) == device_name(results_device)


def _jax_device(jax: Any, name: str) -> Any:
    """``"cuda:1"`` / ``"gpu:0"`` / ``"tpu"`` -> that JAX device; the error names the ones there are."""
    kind, _, index = name.partition(":")
    platform = {"cuda": "gpu"}.get(kind, kind)
    try:
        return jax.devices(platform)[int(index or 0)]
    except (RuntimeError, IndexError) as exc:
        raise ValueError(f"device {name!r}: JAX has no such device; it has "
                         f"{', '.join(str(d) for d in jax.devices())}") from exc

"""DummyVecEnv: every env in this process, stepped in turn.

The backend for debugging and for envs so cheap that processes do not pay.
``step_async`` does the work at once; ``step_wait`` only returns it. The async pool
(``send``/``recv``, `marl_vec.vec.pool`) is here too, synchronous: ``send``
steps its envs at once and ``recv`` returns them in the order sent, so a caller
written for the pool (a face that steps a subset of envs) runs on every backend.
A natively batched family (VMAS, JaxMARL) is one block there, stepped once every
env is sent, as a worker steps it (`marl_vec.vec.worker.pool_outcomes`); ``recv``
returns torch tensors or JAX arrays where ``array_backend`` asks for them.

Examples:
    >>> import gymnasium as gym, numpy as np
    >>> import marl_vec as mv
    >>> with mv.DummyVecEnv([lambda: gym.make("CartPole-v1")] * 2, env_seed=0) as venv:
    ...     r = venv.reset()
    ...     r = venv.step(np.ones((2, 1), dtype=np.int64))
    ...     r.obs.shape
    (2, 1, 4)
"""

from __future__ import annotations

from collections import deque
from typing import Any, Callable, Sequence

import numpy as np

from marl_vec.core.buffers import BatchBuffers
from marl_vec.envs.registry import as_adapter
from marl_vec.core.episode import AutoresetMode
from marl_vec.core.device_group import DeviceGroup, DeviceGroupBase
from marl_vec.core.device_outputs import DeviceOutputs
from marl_vec.core.group import EnvFinishedError, EnvGroup
from marl_vec.core.jax_device import JaxDeviceGroup, JaxOutputs
from marl_vec.vec.base import VecEnv, check_backend_args
from marl_vec.vec.device_actions import DeviceActions, JaxDeviceActions, device_masks_on_host
from marl_vec.vec.device_arrays import (FIELDS, DeviceArrays, host_array, is_host_device, jax_default_device,
                                        parse_array_backend, same_device)
from marl_vec.vec.pool import AsyncPool, PoolStepResult
from marl_vec.vec.results import StepResult
from marl_vec.vec.worker import pool_outcomes


class DummyVecEnv(AsyncPool, VecEnv):
    """Runs ``len(env_fns)`` envs in this process.

    Args:
        env_fns: zero-argument callables returning an adapter, a ``gymnasium.Env``
            or a PettingZoo ``ParallelEnv``.
        env_seed: env i is first reset with ``env_seed + i`` (None: unseeded).
        autoreset: ``same_step`` (default), ``next_step``, ``disabled``, ``one_episode``, ``fast``.
        copy: return copies of the buffers (False: views that the next call overwrites).
        validate: check actions' shape, range and availability.
        stats_window: how many of the last finished episodes ``episode_statistics()`` averages over.
        restart_on_error: per-env budget of rebuilds after an env raises (see
            `EnvGroup`); 0 lets the error propagate.
        reward_dtype: ``"float32"`` or ``"float64"`` for the reward array; None
            (default): the family's (float64 for gymnasium envs, else float32).
        state: what the state holds: ``auto`` (default), ``env``, ``concat`` or ``none``
            (see `marl_vec.core.state`).
        batch_size: envs per `recv` of the (synchronous) async pool (default ``num_envs``; a
            natively batched family, stepped as one block, takes only ``num_envs``).
        array_backend: what results hold: ``"numpy"`` (default), ``"torch"`` (tensors) or
            ``"jax"`` (arrays); actions may come as any of them. See
            `marl_vec.vec.device_arrays` and docs/backends/device_arrays.md.
        device: where torch/JAX results live (None: the CPU, or for torch the envs' own
            device where their spec names one, as VMAS's ``device=``; ``"cuda:0"``, a
            ``torch.device`` or a JAX device). Most envs step on the host: off the CPU that is
            one host-to-device copy per field per step. An engine that steps on torch (VMAS)
            writes its torch results in place on the device instead, and takes torch actions
            there (`marl_vec.core.device_group`): no host memory on the way. A JAX engine
            (JaxMARL) on that device makes its results there as JAX arrays (torch tensors by
            DLPack), and takes JAX (torch) actions there (`marl_vec.core.jax_device`).
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], Any]],
        env_seed: int | None = 0,
        autoreset: AutoresetMode | str = AutoresetMode.SAME_STEP,
        copy: bool = True,
        validate: bool = True,
        stats_window: int = 100,
        restart_on_error: int = 0,
        reward_dtype: str | None = None,
        state: str = "auto",
        batch_size: int | None = None,
        array_backend: str = "numpy",
        device: Any = None,
    ):
        self.array_backend = parse_array_backend(array_backend)
        if self.array_backend == "numpy" and device is not None and not is_host_device(device):
            raise ValueError(f"device={device!r} needs array_backend='torch' or 'jax'; numpy arrays live on the host")
        env_fns, mode = check_backend_args("DummyVecEnv", env_fns, state, autoreset, restart_on_error, reward_dtype)
        adapters = [as_adapter(fn()) for fn in env_fns]
        self._device_group: DeviceGroupBase | None = None
        try:
            super().__init__(adapters[0].spec, len(adapters), mode, copy, validate, stats_window, reward_dtype)
            if device is None and self.array_backend != "numpy":
                device = self.spec.device  # the envs' own device (VMAS's, JaxMARL's device=), else the CPU
            self.buffers = BatchBuffers(self.spec, len(adapters), aligned=self.array_backend == "jax")
            self.group = EnvGroup(  # first: an engine on a device checks that device (VMAS)
                env_fns, self.buffers, 0, self.autoreset, env_seed, adapters=adapters, restart_on_error=restart_on_error
            )
            self._device_arrays = (None if self.array_backend == "numpy"
                                   else DeviceArrays(self.buffers, self.array_backend, device))
            if self.array_backend == "torch" and DeviceGroup.refusal(self.group) is None:
                self._use_device_group()
            elif self.array_backend != "numpy" and JaxDeviceGroup.refusal(self.group) is None \
                    and same_device(self.group._stepper.engine.device, self._device_arrays.device):
                self._use_jax_device_group()
        except BaseException:
            for adapter in adapters:
                adapter.close()
            raise
        self._infos: list[dict[str, Any]] = []
        if self._device_arrays is None:
            self.group.run_while_stepping(self._prepare_result)  # a native engine's threads step meanwhile
        self.timeout = None  # the pool never waits here: send() steps its envs at once
        # A native engine (VMAS, JaxMARL, Atari's ale_vector) steps its whole group in one call: the
        # pool's one block, sent whole (send() holds envs until every env of it is sent).
        whole = None if self.group.steps_single_envs else (
            f"these envs' engine ({type(adapters[0]).__name__}) steps the whole batch in one call")
        self._init_pool(batch_size, self.num_envs, [(0, self.num_envs)], whole)
        self._pool_errors: deque[BaseException] = deque()  # raised by the next recv(), in order

    @property
    def device(self) -> Any:
        """Where results live: a ``torch.device`` (array_backend ``"torch"``), a JAX device
        (``"jax"``), or None for numpy arrays on the host."""
        return None if self._device_arrays is None else self._device_arrays.device

    def _use_device_group(self) -> None:
        """The group's engine writes torch results on the device itself (see `DeviceGroup`)."""
        arrays = self._device_arrays
        assert arrays is not None
        outputs = DeviceOutputs.allocate(self.buffers, arrays.device)
        self._device_group = DeviceGroup(self.group, outputs)
        arrays.use_outputs(outputs)
        self._device_actions = DeviceActions(self, outputs)

    def _use_jax_device_group(self) -> None:
        """The group's JAX engine makes the results on the device itself (see `JaxDeviceGroup`)."""
        arrays = self._device_arrays
        assert arrays is not None
        outputs = JaxOutputs(self.buffers, self.group._stepper.engine.device or jax_default_device())
        self._device_group = JaxDeviceGroup(self.group, outputs)
        arrays.use_outputs(outputs)
        self._device_actions = JaxDeviceActions(self, outputs)  # type: ignore[assignment]

    def _reset(self, seed: int | None, env_ids: list[int] | None) -> list[dict[str, Any]]:
        self._fresh_obs = None
        infos = (self.group if self._device_group is None else self._device_group).reset(seed, env_ids)
        self._pool_restart(env_ids)
        if env_ids is None:
            return infos
        out: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        for i, info in zip(env_ids, infos):
            out[i] = info
        return out

    def _check_not_finished(self) -> None:
        if self._device_group is None:
            super()._check_not_finished()
        elif self.group.finished:  # the host buffers' done is not written on the device path
            raise EnvFinishedError.for_env(min(self.group.finished))

    def _write_actions(self, actions: Any) -> None:
        if self._device_group is not None:
            self._device_actions.write(actions)
            return
        if self._device_arrays is not None:
            actions = host_array(actions)
        super()._write_actions(actions)

    def _result(self, infos: list[dict[str, Any]], any_done: bool | None = None) -> StepResult:
        arrays = self._device_arrays
        if arrays is None:
            return super()._result(infos, any_done)
        copy, self.copy = self.copy, False  # the buffers' views, then torch/JAX ones of them
        try:
            result = super()._result(infos, any_done)
        finally:
            self.copy = copy
        return arrays.result(result, copy)

    def _step_async(self) -> None:
        self._infos = self.group.step() if self._device_group is None else self._device_block_step()
        if self.copy and self._device_arrays is None:
            self._fresh_obs = self.group.take_obs()  # for the result; None where it must copy
        self._pool_restart(step=True)

    # -- the async pool, synchronous (marl_vec.vec.pool) ------------------------------

    def _pool_go(self, w: int, local_ids: list[int]) -> None:
        """Step ``local_ids`` as a worker would (`pool_outcomes`): env by env, or the whole block
        (on the device path: the device group's step, its actions from the host rows send() wrote)."""
        step_block = None
        if self._device_group is not None:
            self._device_actions.upload(self.buffers.actions)
            step_block = self._device_block_step
        for _, outcomes in pool_outcomes(self.group, local_ids, step_block):
            raised = None
            for _, outcome in outcomes:
                if not isinstance(outcome, Exception):
                    self._pool_complete(w, outcome)
                    continue
                self._pool_fail(w)
                if outcome is not raised:  # named to the caller by the next recv(); a block's error once
                    self._pool_errors.append(outcome)
                    raised = outcome

    def _device_block_step(self) -> list[dict[str, Any]]:
        """The device group's step, its ended envs marked in the host buffers' ``done`` (a list of
        ints the step reads anyway; the results come from the device): the async pool reads them
        there (autoreset='disabled' refusals, episode statistics), after step() too."""
        assert self._device_group is not None
        infos = self._device_group.step()
        done = self.group.done
        done.fill(False)
        done[self.group.ended] = True
        return infos

    def _write_action_rows(self, actions: Any, env_ids: list[int]) -> None:
        """send()'s actions, torch or JAX ones too, checked on the host (numpy mode's checks and
        messages); on the device path against the device's current avail and mask."""
        if self._device_arrays is None:
            super()._write_action_rows(actions, env_ids)
            return
        actions = host_array(actions)
        if self._device_group is None:
            super()._write_action_rows(actions, env_ids)
            return
        with device_masks_on_host(self, self._device_arrays.outputs):
            super()._write_action_rows(actions, env_ids)

    def _pool_rows(self, ids: np.ndarray, infos: list[dict[str, Any]]) -> PoolStepResult:
        """`recv`'s rows in the batch's array type: from the device outputs on the device path,
        else the host rows converted."""
        arrays = self._device_arrays
        if arrays is None:
            return super()._pool_rows(ids, infos)
        if self._device_group is None:
            return arrays.rows_of_host(super()._pool_rows(ids, infos))
        buf, keeps = self.buffers, self._keeps_final
        names = [name for name in FIELDS if (buf.movers() if name == "acting" else getattr(buf, name)) is not None
                 and (keeps or not name.startswith("final_"))]
        rows = arrays.rows_of_outputs(ids, names)
        return PoolStepResult(**{name: rows.get(name) for name in FIELDS}, infos=infos, env_ids=ids)

    def recv(self, timeout: float | None = None) -> PoolStepResult:
        if self._pool_errors:
            raise self._pool_errors.popleft()
        return super().recv(timeout)

    def _step_wait(self) -> list[dict[str, Any]]:
        infos, self._infos = self._infos, []
        return infos

    def _finished_envs(self) -> list[int]:
        return self.group.ended  # the group's envs are the batch's, in order

    def _call(self, name: str, args: tuple, kwargs: dict, indices: list[int]) -> list[Any]:
        return self.group.call(name, args, kwargs, indices)

    def _get_attr(self, name: str, indices: list[int]) -> list[Any]:
        return self.group.get_attr(name, indices)

    def _set_attr(self, name: str, values: list[Any], indices: list[int]) -> None:
        self.group.set_attr(name, values, indices)

    def _render(self) -> list[Any]:
        return self.group.render()

    def _close(self) -> None:
        group = getattr(self, "group", None)
        if group is not None:
            group.close()

"""JaxOutputs and JaxDeviceGroup: a batch's results as JAX arrays that a JAX engine makes on its device.

One idea: the JAX twin of `marl_vec.core.device_outputs` and
`marl_vec.core.device_group`, for an engine whose compiled step runs on a JAX
device (`GroupStepper.device_framework` ``"jax"``: JaxMARL). JAX arrays are
immutable, so nothing is preallocated and written in place: `JaxOutputs` keeps the
batch's CURRENT array of each field (``(E, A, ...)``, the buffers' dtypes) and
replaces them, all fields at once, by small jitted functions on the device:

- ``step``: the engine's compiled step's outputs merged in (the TRUE last views
  where an episode ended, as numpy mode writes them), ``done`` computed as the group
  computes it; it returns a (2, E) bool array: ``done`` and the engine's own ended
  flags, the step's ONE read to the host (which envs ended: the autoreset needs it);
  with same_step, ``final_*`` kept where ``done`` and those rows given the reset views the
  step made, in the same call (what the group's finals and the envs' resets would write);
- ``write_rows`` / ``clear_rows``: reset views into some rows, or their reward and
  flags zeroed (a reset);
- ``copies``: a ``copy=True`` result: one fresh array per field, ``final_*`` rows of
  envs not done zeroed (as numpy mode's copies).

Where the state is the observations, ``state`` is ``obs`` reshaped, made in the same
calls. Nothing is donated: an array handed out (``copy=False``: the current ones)
is never deleted or changed by a later step; the next step makes new ones.

Episode returns are float64 sums (numpy mode's `EpisodeTracker`), which JAX without
x64 does not have on a device: `PendingEpisodeTracker` keeps each step's reward array
on the device and reads them to the host (one ``jax.device_get``) only where an
episode ends or a reset clears a return, or every `SYNC_STEPS` steps; there they are
added in order, in float64, as numpy mode adds them (bit for bit the same returns).

May import: numpy, jax (lazily), ``marl_vec.core.{buffers,device_group,episode,group}``.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from marl_vec.core.buffers import BatchBuffers
from marl_vec.core.device_group import DeviceGroupBase
from marl_vec.core.episode import EpisodeTracker
from marl_vec.core.group import EnvGroup

# What a JAX engine makes (the rest stays as the buffers began: fixed avail, all-True mask).
VIEWS = ("obs", "state", "avail_actions", "agent_mask")
FLAGS = ("reward", "terminated", "truncated", "done")
FINALS = {"final_obs": "obs", "final_state": "state", "final_avail_actions": "avail_actions",
          "final_acting": "agent_mask"}
SYNC_STEPS = 64  # rewards kept on the device at most this many steps before they are summed on the host


class JaxOutputs:
    """The batch's current fields as JAX arrays on ``device`` (see the module doc)."""

    def __init__(self, buffers: BatchBuffers, device: Any):
        import jax

        spec = buffers.spec
        if spec.turn_based or not isinstance(buffers.obs, np.ndarray) or not isinstance(buffers.actions, np.ndarray):
            raise ValueError("device outputs serve one observation array, array actions and simultaneous moves")
        self.device = device
        self.jax = jax
        self.state_from_obs = spec.state_is_obs and buffers.state is not None
        self.state_shape = None if buffers.state is None else tuple(buffers.state.shape)
        # The buffers as they are now (zeros, the fixed avail and mask): the device's start.
        self.arrays: dict[str, Any] = {}
        for name in (*VIEWS, *FLAGS, *FINALS):
            array = getattr(buffers, name)
            if array is not None:
                self.arrays[name] = jax.device_put(np.array(array), device)
        self.actions: Any = None  # the step's actions on the device (set by DeviceActions' JAX twin)
        # Set by the group before its first step: same_step's finals and resets made by `step` itself.
        self.autoreset = False
        self._step = jax.jit(self._step_update)
        self._write = jax.jit(self._write_rows)
        self._clear = jax.jit(self._clear_rows)
        self._copies = jax.jit(self._copy_fields)

    def __getattr__(self, name: str) -> Any:
        """A field's current array (``obs``, ``reward``, ...), or None where the batch has none."""
        if name in VIEWS or name in FLAGS or name in FINALS:
            return self.__dict__["arrays"].get(name)
        raise AttributeError(name)

    # -- the jitted updates (pure functions of the arrays) -------------------------------

    def _derive(self, a: dict[str, Any]) -> dict[str, Any]:
        if self.state_from_obs:
            a["state"] = a["obs"].reshape(self.state_shape)
            if "final_obs" in a:
                a["final_state"] = a["final_obs"].reshape(self.state_shape)
        return a

    @staticmethod
    def _rows(mask: Any, like: Any) -> Any:
        return mask.reshape(mask.shape + (1,) * (like.ndim - 1))

    def _step_update(self, a: dict[str, Any], following: dict[str, Any], last: dict[str, Any], reward: Any,
                     terminated: Any, truncated: Any, ended: Any) -> tuple[dict[str, Any], Any]:
        import jax.numpy as jnp

        a = dict(a)
        ended = ended.astype(jnp.bool_)
        for name, value in following.items():  # where an episode ended: its true last views
            a[name] = jnp.where(self._rows(ended, value), last[name], value).astype(a[name].dtype)
        a["reward"] = reward.astype(a["reward"].dtype)
        a["terminated"] = terminated.astype(jnp.bool_)
        a["truncated"] = truncated.astype(jnp.bool_)
        done = a["done"] = jnp.all(a["terminated"] | a["truncated"], axis=1)  # the group's done
        if self.autoreset:
            # same_step, in this one call: what the group's _keep_finals and the ended envs'
            # resets (the reset views the step made, `following`) would write row by row.
            a = self._derive(a)
            for final, current in FINALS.items():
                if final in a and current in a and not (self.state_from_obs and final == "final_state"):
                    a[final] = jnp.where(self._rows(done, a[final]), a[current], a[final])
            for name, value in following.items():
                a[name] = jnp.where(self._rows(done & ended, value), value.astype(a[name].dtype), a[name])
        return self._derive(a), jnp.stack([done, ended])

    def _write_rows(self, a: dict[str, Any], values: dict[str, Any], rows: Any) -> dict[str, Any]:
        import jax.numpy as jnp

        a = dict(a)
        for name, value in values.items():
            a[name] = jnp.where(self._rows(rows, value), value, a[name]).astype(a[name].dtype)
        return self._derive(a)

    def _clear_rows(self, a: dict[str, Any], rows: Any) -> dict[str, Any]:
        import jax.numpy as jnp

        a = dict(a)
        for name in FLAGS:
            a[name] = jnp.where(self._rows(rows, a[name]), jnp.zeros((), a[name].dtype), a[name])
        return a

    def _copy_fields(self, a: dict[str, Any]) -> dict[str, Any]:
        import jax.numpy as jnp

        out = {name: jnp.copy(value) for name, value in a.items()}
        for final in FINALS:
            if final in a:
                out[final] = jnp.where(self._rows(a["done"], a[final]), a[final], jnp.zeros((), a[final].dtype))
        out["acting"] = jnp.copy(a["agent_mask"])
        return out

    # -- what the engine and the group call ---------------------------------------------

    def step(self, following: dict[str, Any], last: dict[str, Any], reward: Any, terminated: Any, truncated: Any,
             ended: Any) -> Any:
        """Merge a compiled step's outputs in; returns the (2, E) bool flags (done, the engine's ended).
        With ``autoreset`` (same_step) the rows where both hold get ``final_*`` and their reset views
        at once: the engine then leaves them out of `write_rows` (their reset is written)."""
        self.arrays, flags = self._step(self.arrays, following, last, reward, terminated, truncated, ended)
        return flags

    def write_rows(self, values: dict[str, Any], rows: np.ndarray) -> None:
        self.arrays = self._write(self.arrays, values, rows)

    def clear_rows(self, rows: np.ndarray) -> None:
        self.arrays = self._clear(self.arrays, rows)

    def result_arrays(self, copy: bool) -> dict[str, Any]:
        """StepResult's fields: the current arrays (``copy=False``) or fresh copies (``copies`` in the module doc)."""
        if copy:
            return self._copies(self.arrays)
        return {**self.arrays, "acting": self.arrays["agent_mask"]}


class PendingEpisodeTracker(EpisodeTracker):
    """`EpisodeTracker` fed device reward arrays: summed on the host when they are needed (module doc)."""

    def __init__(self, num_envs: int, n_agents: int):
        super().__init__(num_envs, n_agents)
        self.pending: list[Any] = []

    def add_step(self, reward: Any) -> None:
        self.pending.append(reward)
        self.steps += 1
        if len(self.pending) >= SYNC_STEPS:
            self.sync()

    def sync(self) -> None:
        """Add the kept rewards to the float64 returns, step by step (numpy mode's order)."""
        if not self.pending:
            return
        import jax

        rewards, self.pending = jax.device_get(self.pending), []
        for reward in rewards:
            self.returns += reward

    def add_env_step(self, i: int, reward: Any) -> None:
        self.sync()
        super().add_env_step(i, np.asarray(reward))

    def clear(self, i: int) -> None:
        self.sync()
        super().clear(i)

    def end(self, ids: list[int]) -> list[dict[str, Any]]:
        self.sync()
        return super().end(ids)


class JaxDeviceGroup(DeviceGroupBase):
    """Steps and resets ``group`` (the whole batch: one group) with its results in ``outputs``,
    made by its JAX engine on the device. Build it before the group's first reset."""

    def __init__(self, group: EnvGroup, outputs: JaxOutputs):
        refusal = self.refusal(group)
        if refusal is not None:
            raise ValueError(refusal)
        self.group, self.out = group, outputs
        group.episodes = PendingEpisodeTracker(len(group), group.buffers.spec.n_agents)
        outputs.autoreset = group._keeps_final
        group._stepper.bind_device(outputs)

    @staticmethod
    def refusal(group: EnvGroup) -> str | None:
        """Why ``group`` cannot step on a JAX device (None: it can)."""
        stepper = group._stepper
        if not stepper.supports_device() or stepper.device_framework() != "jax":
            return f"{type(group.adapters[0]).__name__}'s stepper makes no JAX results on a device"
        if group.start != 0 or len(group) != group.buffers.obs.shape[0]:
            return "JAX device results serve one group over the whole batch"
        return DeviceGroupBase.served(group)

    def reset(self, seed: int | None = None, env_ids: Sequence[int] | None = None) -> list[dict[str, Any]]:
        """`EnvGroup.reset`, the reset envs' views written and reward and flags cleared on the device."""
        infos = self.group.reset(seed, env_ids)
        self.group._stepper.engine.commit()
        rows = np.ones(len(self.group), dtype=bool)
        if env_ids is not None:
            rows[:] = False
            rows[list(env_ids)] = True
        self.out.clear_rows(rows)
        return infos

    def _end_episodes(self, ended: list[int], infos: list[dict[str, Any]]) -> None:
        """The summaries and autoresets (same_step's finals and reset views are made already, in
        `JaxOutputs.step`), then the autoreset envs' new episodes committed in one call."""
        super()._end_episodes(ended, infos)
        self.group._stepper.engine.commit()

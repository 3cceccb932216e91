"""DeviceGroup: `EnvGroup`'s step and reset for a group whose stepper writes its outputs on a device.

One idea: the group's loop (autoreset, final observations, episode bookkeeping)
over `DeviceOutputs` instead of the host buffers, for a native engine that steps the
whole group in one call on a torch device (`GroupStepper.supports_device`: VMAS).
It reuses the `EnvGroup`'s own resets, episode ends and finished-env rules; what
differs is where the numbers live:

- the stepper's ``step_device()`` writes obs, reward, terminated, truncated and done
  into the device rows and names the envs that ended (its one device-to-host read: a
  list of ints, which the autoreset needs anyway);
- ``same_step``: the ended envs' rows are copied to ``final_*`` on the device before
  their reset writes the new episode's start;
- episode returns are summed on the device (float64, as `EpisodeTracker`), read to
  the host (``Tensor.tolist``) only for the envs that ended.

Served: autoreset ``same_step`` and ``disabled`` (what the block engines serve),
no ``restart_on_error``; `refusal` says why otherwise. `DeviceGroupBase` is the
loop itself, shared with the JAX twin (`marl_vec.core.jax_device.JaxDeviceGroup`).

May import: numpy, torch (lazily), ``marl_vec.core.{device_outputs,episode,group}``.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from marl_vec.core.device_outputs import DeviceOutputs
from marl_vec.core.episode import AutoresetMode, EpisodeTracker
from marl_vec.core.group import EnvFinishedError, EnvGroup


class DeviceEpisodeTracker(EpisodeTracker):
    """`EpisodeTracker` whose running returns are a (k, A) float64 tensor on ``device``."""

    def __init__(self, num_envs: int, n_agents: int, device: Any):
        import torch

        super().__init__(num_envs, n_agents)
        self.returns = torch.zeros((num_envs, n_agents), dtype=torch.float64, device=device)
        self._return_rows = list(self.returns)  # row views

    def clear(self, i: int) -> None:
        self._return_rows[i].zero_()
        self._began[i] = self.steps

    def end(self, ids: list[int]) -> list[dict[str, Any]]:
        steps, began, rows, restarts = self.steps, self._began, self._return_rows, self._episode_restarts
        every = self.returns[ids].tolist()  # the ended envs' returns: one read for all of them
        summaries: list[dict[str, Any]] = []
        for i, per_agent in zip(ids, every):
            summary: dict[str, Any] = {
                "return": sum(per_agent) / len(per_agent),
                "agent_returns": np.array(per_agent, dtype=np.float64),
                "length": steps - began[i],
            }
            if restarts[i]:
                summary["restarts"] = restarts[i]
                restarts[i] = 0
            summaries.append(summary)
            rows[i].zero_()
            began[i] = steps
        return summaries


class DeviceGroupBase:
    """What the torch and JAX device groups share: `EnvGroup.step`'s loop over a stepper that
    steps the whole group on the device (`step`), and the modes they serve (`served`).
    A subclass says what happens where episodes ended (`_end_episodes`: torch keeps the
    finals first, JAX commits the autoreset after) and how a reset clears the device rows."""

    group: EnvGroup
    out: Any  # the device outputs: the stepper writes them, ``out.reward`` is the step's reward

    @staticmethod
    def served(group: EnvGroup) -> str | None:
        """Why ``group``'s mode or options do not fit a batch stepped in one call (None: they do)."""
        if group.mode not in (AutoresetMode.SAME_STEP, AutoresetMode.DISABLED):
            return f"autoreset={group.mode.value!r}: device outputs serve same_step and disabled"
        if group.restart_on_error:
            return "restart_on_error: an env restarted alone does not fit a batch stepped in one call"
        return None

    def step(self) -> list[dict[str, Any]]:
        """`EnvGroup.step` on the device: the stepper's step, then the ended envs' finals,
        summaries and autoresets (as the group makes them)."""
        group = self.group
        if group.finished:
            raise EnvFinishedError.for_env(group.start + min(group.finished))
        ended = group._stepper.step_device()
        group.episodes.add_step(self.out.reward)
        infos: list[dict[str, Any]] = [{} for _ in range(len(group))]
        group.ended = ended
        if ended:
            self._end_episodes(ended, infos)
        return infos

    def _end_episodes(self, ended: list[int], infos: list[dict[str, Any]]) -> None:
        """The ended envs' summaries into ``infos`` and their autoresets (the group's own
        `_end_episode`); subclasses add what their device needs around it."""
        group = self.group
        for j, summary in zip(ended, group.episodes.end(ended)):
            infos[j] = group._end_episode(j, infos[j], summary)


class DeviceGroup(DeviceGroupBase):
    """Steps and resets ``group`` with its outputs in ``outputs`` (the whole batch's; the
    group's rows are taken here). Build it before the group's first reset."""

    def __init__(self, group: EnvGroup, outputs: DeviceOutputs):
        refusal = self.refusal(group)
        if refusal is not None:
            raise ValueError(refusal)
        self.group = group
        self.out = out = outputs.rows(group._first, group._last)
        group.episodes = DeviceEpisodeTracker(len(group), group.buffers.spec.n_agents, out.device)
        group._stepper.bind_device(out)
        # (final, current) pairs kept at an episode's end (same_step): final_state is final_obs's memory
        # where the state is the observations.
        names = ["obs", *([] if out.final_state is None or group._state_is_obs else ["state"]), "avail_actions"]
        self._finals = [(getattr(out, "final_" + n), getattr(out, n)) for n in names if getattr(out, n) is not None]
        self._finals.append((out.final_acting, out.acting))

    @staticmethod
    def refusal(group: EnvGroup) -> str | None:
        """Why ``group`` cannot step on a device (None: it can)."""
        if not group._stepper.supports_device():
            return f"{type(group.adapters[0]).__name__}'s stepper writes host buffers only"
        if group._stepper.device_framework() != "torch":  # JAX engines: marl_vec.core.jax_device
            return f"{type(group.adapters[0]).__name__}'s stepper makes {group._stepper.device_framework()} arrays"
        return DeviceGroupBase.served(group)

    def reset(self, seed: int | None = None, env_ids: Sequence[int] | None = None) -> list[dict[str, Any]]:
        """`EnvGroup.reset`, the reset envs' reward and flags cleared on the device."""
        infos = self.group.reset(seed, env_ids)
        out = self.out
        rows: Any = slice(None) if env_ids is None else list(env_ids)
        for tensor in (out.reward, out.terminated, out.truncated, out.done):
            tensor[rows] = 0
        return infos

    def _end_episodes(self, ended: list[int], infos: list[dict[str, Any]]) -> None:
        """same_step: the ended envs' rows copied to ``final_*`` before their resets overwrite them."""
        if self.group._keeps_final:
            self._keep_finals(ended)
        super()._end_episodes(ended, infos)

    def _keep_finals(self, ended: list[int]) -> None:
        if len(ended) == 1:
            j = ended[0]
            for final, current in self._finals:
                final[j].copy_(current[j])
            return
        for final, current in self._finals:
            final[ended] = current[ended]

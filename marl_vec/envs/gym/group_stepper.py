"""The gymnasium family's group stepper: one loop over a group of `GymAdapter`s' native envs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from marl_vec.core.buffers import RowViews
from marl_vec.core.adapter import GroupStepper, MultiAgentEnv
from marl_vec.core.obs_types import REWARD_KIND_ATTR, reward_kind
from marl_vec.envs.gym.wrapper_chain import FastChain, fast_chain


class _GymGroupStepper(GroupStepper):
    """Steps a group of `GymAdapter`s in one loop over their native envs.

    For cheap envs such as CartPole (~6 us a step) the adapter's method call and
    its three one-element numpy writes per env are a tenth of the step. Here each
    env's step result goes straight into its observation view and into Python
    lists; reward and flags then reach the group's ``(k, 1)`` columns with one
    numpy assignment each per run. The actions an env sees are those of
    ``GymAdapter.step``: numpy integers (gymnasium checks Python ints more
    slowly) or the row's action array. Dict/Tuple observations are written leaf
    by leaf through their `TreeView`.

    Below the check-only wrappers: when every env's chain is ``gym.make``'s (see
    `marl_vec.envs.gym.wrapper_chain`) and its checks are done (after the first two
    steps), each env is stepped below ``OrderEnforcing`` and ``PassiveEnvChecker``
    and its ``TimeLimit`` is applied here, on the wrapper's own step count: the same
    results, half a microsecond less per step on CartPole. ``VecEnv.call``,
    ``get_attr`` and ``set_attr`` may change a chain: the next step goes through the
    whole chains again and looks at them anew.
    """

    def __init__(self, adapters: Sequence[MultiAgentEnv], rows: Sequence[RowViews], block: RowViews):
        super().__init__(adapters, rows, block)
        gyms: list[Any] = list(adapters)  # GymAdapters: GymAdapter.group_stepper checked (its module imports this one)
        self._gyms = gyms
        self._env_steps = [adapter.env.step for adapter in gyms]  # bound once: a rebuilt env gets a new stepper
        self._obs_views = [adapter._obs for adapter in gyms]
        # Discrete and scalar Box: the (k,) column of agent 0's actions, read at each step
        # as numpy scalars (GymAdapter.step's `actions[0]`); other Box: each env's action
        # array, a view of its row. (`row.actions[0]` of a scalar Box is a numpy scalar
        # copied here once, not a view: every step would send that first value.)
        self._by_column = gyms[0].spec.discrete or gyms[0].spec.action_shape == ()
        self._action_column = block.actions[:, 0]
        self._action_rows = [row.actions[0] for row in rows]
        self._reward_column = block.reward[:, 0]
        self._terminated_column = block.terminated[:, 0]
        self._truncated_column = block.truncated[:, 0]
        k = len(gyms)
        self._rewards: list[Any] = [0.0] * k
        self._terminated: list[Any] = [False] * k
        self._truncated: list[Any] = [False] * k
        self._progress = 0  # the env a loop was at when it raised
        # Set by the adapters' get_native_attr/set_native_attr (VecEnv.call, get_attr,
        # set_attr): the chains are looked at anew before the next step.
        self._touched = [False]
        for adapter in gyms:
            adapter._touched = self._touched
        # How many envs have no reward kind yet: each is recorded once, at its first step, so the
        # first round (one env per step, the async pool's) costs one look per env, not per env pair.
        self._kinds_missing = sum(adapter._reward_kind is None for adapter in gyms)
        self._look_again()

    def _look_again(self) -> None:
        """Step through the whole chains until every one is known to be only checks past
        their checks (`fast_chain`)."""
        self._touched[0] = False
        for adapter in self._gyms:
            adapter._reset_below = None
        self._chains = [fast_chain(adapter.env) for adapter in self._gyms]
        limits = [chain.limit is None for chain in self._chains if chain is not None]
        # Every chain of one kind (all with a TimeLimit, or none): one loop serves them.
        self._eligible = len(limits) == len(self._chains) and limits.count(limits[0]) == len(limits)
        self._below: tuple[list[Any], list[Any] | None] | None = None
        self._ready_upto = 0  # chains before this one are past their checks (they stay so)

    def _chains_ready(self) -> bool:
        """Whether every chain is past its checks. Resumes at the first chain that was not:
        an env that is not stepped (finished, in ``one_episode`` mode) costs one look a step."""
        chains: list[FastChain] = self._chains  # type: ignore[assignment]  # eligible: none is None
        j = self._ready_upto
        while j < len(chains) and chains[j].ready():
            j += 1
        self._ready_upto = j
        return j == len(chains)

    def step(self, first: int, stop: int, infos: list[dict[str, Any]]) -> None:
        if self._touched[0]:
            self._look_again()
        done = stop
        try:
            below = self._below
            if below is not None:
                if below[1] is not None:
                    self._step_below_limit(first, stop, infos, below[0], below[1])
                else:
                    self._step_loop(first, stop, infos, below[0])
            else:
                self._step_loop(first, stop, infos, self._env_steps)
        except BaseException as exc:
            done = self._progress  # envs first..done-1 finished their step
            if isinstance(exc, Exception):
                self.failed_at = done
            raise
        finally:
            self._write_columns(first, done)
            if self._kinds_missing:
                self._record_reward_kinds(first, done, infos)
        if self._below is None and self._eligible and self._chains_ready():
            chains: list[FastChain] = self._chains  # type: ignore[assignment]  # eligible: none is None
            limits = [chain.limit for chain in chains]
            self._below = ([chain.raw_step for chain in chains], None if limits[0] is None else limits)
            for adapter, chain in zip(self._gyms, chains):
                adapter._reset_below = (chain.raw.reset, chain.limit)

    def _record_reward_kinds(self, first: int, stop: int, infos: list[dict[str, Any]]) -> None:
        """Each env's reward kind (GymAdapter.step's), from the rewards of its first step. Only
        envs first..stop-1 are looked at: once the whole group has stepped (or a kind was set
        outside, by ``GymAdapter.step``: the count is then exact after the next whole step), none is."""
        missing = self._kinds_missing
        for j in range(first, stop):
            adapter = self._gyms[j]
            if adapter._reward_kind is None:
                adapter._reward_kind = reward_kind(self._rewards[j])
                missing -= 1
                if adapter._report_kind:
                    infos[j] = {**infos[j], REWARD_KIND_ATTR: adapter._reward_kind}
        self._kinds_missing = 0 if first == 0 and stop == len(self._gyms) else max(missing, 0)

    def _step_loop(self, first: int, stop: int, infos: list[dict[str, Any]], env_steps: list[Any]) -> None:
        """Step envs first..stop-1 with ``env_steps`` (the chains' or the raw envs' steps)."""
        obs_views = self._obs_views
        rewards, terminated, truncated = self._rewards, self._terminated, self._truncated
        actions: Any = self._action_column if self._by_column else self._action_rows
        j = first
        try:
            # zip: one iterator step per env instead of three list lookups by index.
            for j, env_step, obs_view, action in zip(range(first, stop), env_steps[first:stop],
                                                     obs_views[first:stop], actions[first:stop]):
                obs, rewards[j], terminated[j], truncated[j], infos[j] = env_step(action)
                obs_view[...] = obs
        except BaseException:
            self._progress = j
            raise

    def _step_below_limit(self, first: int, stop: int, infos: list[dict[str, Any]],
                          raw_steps: list[Any], limits: list[Any]) -> None:
        """`_step_loop` of the raw envs, with each TimeLimit's work done as
        ``TimeLimit.step`` does it: count the step on the wrapper, truncate at its limit."""
        obs_views = self._obs_views
        rewards, terminated, truncated = self._rewards, self._terminated, self._truncated
        actions: Any = self._action_column if self._by_column else self._action_rows
        j = first
        try:
            for j, raw_step, limit, obs_view, action in zip(range(first, stop), raw_steps[first:stop],
                                                            limits[first:stop], obs_views[first:stop],
                                                            actions[first:stop]):
                obs, rewards[j], terminated[j], trunc, infos[j] = raw_step(action)
                elapsed = limit._elapsed_steps + 1
                limit._elapsed_steps = elapsed
                truncated[j] = True if elapsed >= limit._max_episode_steps else trunc
                obs_view[...] = obs
        except BaseException:
            self._progress = j
            raise

    def _write_columns(self, first: int, j: int) -> None:
        """Reward and flags of envs first..j-1 (all of the run unless env j raised) into the
        group's columns."""
        rewards, terminated, truncated = self._rewards, self._terminated, self._truncated
        if first == 0 and j == len(rewards):  # the whole group: no slices to make
            _write_rewards(self._reward_column, rewards)
            _write_flags(self._terminated_column, terminated)
            _write_flags(self._truncated_column, truncated)
        elif first < j:
            _write_rewards(self._reward_column[first:j], rewards[first:j])
            _write_flags(self._terminated_column[first:j], terminated[first:j])
            _write_flags(self._truncated_column[first:j], truncated[first:j])


# Converting a Python list to a numpy column costs a few hundred instructions per
# item (dtype discovery, packing); these shortcuts cover the usual steps of many
# cheap envs: one reward for all (CartPole's 1.0) and few or no flags set.

def _write_rewards(column: np.ndarray, rewards: list[Any]) -> None:
    """``column[...] = rewards``; ``list.count`` compares by identity first, so a
    shared reward object is recognized at C speed."""
    if rewards.count(rewards[0]) == len(rewards):
        column.fill(rewards[0])
    else:
        column[...] = rewards


def _write_flags(column: np.ndarray, flags: list[Any]) -> None:
    """``column[...] = flags`` (as bools); cheap when at most a few are set."""
    unset = flags.count(False)
    if unset == len(flags):
        column.fill(False)
        return
    if unset >= len(flags) - 8:
        # Clear, then find the set ones with list.index (a C loop); a flag that is
        # neither == False nor == True (2, None) is not found: convert the list instead.
        column.fill(False)
        j = -1
        try:
            for _ in range(len(flags) - unset):
                j = flags.index(True, j + 1)
                column[j] = True
            return
        except ValueError:
            pass
    column[...] = flags

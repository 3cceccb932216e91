"""The device-path pool machine: VMAS balance on ``DummyVecEnv(array_backend="torch")``, on the CPU.

The batch's engine writes its torch results itself (`marl_vec.core.device_group`), so this
drives the async pool where ``recv()`` must serve rows from the device outputs (issue 49:
it handed out zeros). Rules: a full ``reset()`` (unseeded: the episodes go on), ``step``
with torch actions, and a pool round: ``send``/``recv`` of every env (the batch is one
block), sent in a drawn order in one or two calls (the first envs wait for the rest),
torch actions; ``recv()``'s rows in the order it returns them. After each call every row
(every field a ``torch.Tensor``) equals VMAS stepped by hand with the same seeds and actions
(`tests.helpers.vmas_reference.Reference`): obs, reward, flags, ``done``, ``final_obs``;
and ``episode_statistics()`` counts every episode that ended.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import settings, strategies as st
from hypothesis.extra.numpy import arrays
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

from tests.fuzz.machine import tracked

torch = pytest.importorskip("torch")
pytest.importorskip("vmas", reason="the vmas extra is not installed: pip install 'marl_vec[vmas]'")

import marl_vec as mv  # noqa: E402
from marl_vec.envs.registry import make_env_fn  # noqa: E402
from tests.helpers.vmas_reference import Reference  # noqa: E402

K, SEED, N_ACTIONS = 4, 3, 5  # balance: 5 discrete moves per agent
KWARGS = {"max_steps": 4, "continuous_actions": False}  # episodes end every 4 steps (and when the package falls)


class DeviceCache:
    """The one batch, kept across examples (each example starts with a seeded reset)."""

    def __init__(self) -> None:
        self.venv: Any = None

    def get(self) -> Any:
        if self.venv is None:
            fn = make_env_fn("vmas", "balance", KWARGS)
            self.venv = mv.DummyVecEnv([fn] * K, env_seed=SEED, array_backend="torch")
            assert self.venv._device_group is not None  # the device path, not host buffers and copies
        return self.venv

    def drop(self) -> None:
        if self.venv is not None:
            self.venv.close()
            self.venv = None


class DevicePoolMachine(RuleBasedStateMachine):
    cache: DeviceCache

    def __init__(self) -> None:
        super().__init__()
        self.ok, self.owed, self.episodes = True, False, 0

    @initialize()
    @tracked
    def start(self) -> None:
        self.venv = self.cache.get()
        self.ref = Reference("balance", KWARGS, [K], SEED)
        self.before = self.venv.episode_statistics().get("episodes", 0)
        r = self.venv.reset(seed=SEED)  # episodes counted from 0 again, as the reference's
        self.want = {"obs": self.ref.reset(), "done": np.zeros(K, bool)}
        self.n_agents = self.want["obs"].shape[1]
        self._check(r, "reset(seed)", None)

    def teardown(self) -> None:
        if not self.ok:
            self.cache.drop()

    def _check(self, r: Any, what: str, ids: Any) -> None:
        order = list(range(K)) if ids is None else [int(i) for i in ids]
        for name in ("obs", "reward", "terminated", "truncated", "done", "final_obs", "agent_mask"):
            value = getattr(r, name)
            assert isinstance(value, torch.Tensor), f"{what}: {name} is a {type(value).__name__}"
        want, done = self.want, self.want["done"][order]
        np.testing.assert_array_equal(r.done.numpy(), done, err_msg=f"{what}: done")
        np.testing.assert_array_equal(r.obs.numpy(), want["obs"][order], err_msg=f"{what}: obs")
        for name in ("reward", "terminated", "truncated"):
            expected = want[name][order] if name in want else np.zeros(r.reward.shape)
            np.testing.assert_array_equal(getattr(r, name).numpy(), expected, err_msg=f"{what}: {name}")
        finals = r.final_obs.numpy()
        for k, i in enumerate(order):
            expected = want["final_obs"][i] if done[k] else np.zeros_like(finals[k])  # blanks where not done
            np.testing.assert_array_equal(finals[k], expected, err_msg=f"{what}: final_obs of env {i}")
        ended = [info["episode"] for info in r.infos if "episode" in info]
        assert len(ended) == int(done.sum()), f"{what}: {len(ended)} summaries for {int(done.sum())} ends"
        counted = self.venv.episode_statistics().get("episodes", 0)
        assert counted == self.before + self.episodes, f"{what}: {counted} episodes counted"

    def _stepped(self, actions: np.ndarray) -> None:
        self.want = self.ref.step(actions)
        self.episodes += int(self.want["done"].sum())

    @rule()
    @tracked
    def reset(self) -> None:
        self.owed = False
        r = self.venv.reset()
        self.want = {"obs": self.ref.reset(), "done": np.zeros(K, bool)}
        self._check(r, "reset()", None)

    @rule(data=st.data())
    @tracked
    def step(self, data: st.DataObject) -> None:
        actions = data.draw(arrays(np.int64, (K, self.n_agents), elements=st.integers(0, N_ACTIONS - 1)),
                            label="actions")
        self.owed = False
        r = self.venv.step(torch.from_numpy(actions))
        self._stepped(actions)
        self._check(r, f"step({actions.tolist()})", None)

    @rule(data=st.data())
    @tracked
    def pool_round(self, data: st.DataObject) -> None:
        venv = self.venv
        if not self.owed:  # a new round: every env's current rows, in env order, no summaries
            r = venv.recv()
            assert r.env_ids.tolist() == list(range(K)), r.env_ids
            self._check_fresh(r)
            self.owed = True
        order = [int(i) for i in data.draw(st.permutations(range(K)), label="send order")]
        actions = data.draw(arrays(np.int64, (K, self.n_agents), elements=st.integers(0, N_ACTIONS - 1)),
                            label="actions")
        cut = data.draw(st.integers(0, K - 1), label="first send")
        for part in (order[:cut], order[cut:]):
            if part:
                venv.send(torch.from_numpy(actions[part]), part)
        r = venv.recv()
        assert sorted(r.env_ids.tolist()) == list(range(K)), r.env_ids
        self._stepped(actions)
        self._check(r, f"send({actions[order].tolist()}, {order}) then recv()", r.env_ids)

    def _check_fresh(self, r: Any) -> None:
        """A new round's rows: the batch as the last reset or step left it; no summaries (they
        were the step's), but the step's rows (and done, final_obs) as the step returned them."""
        infos = r.infos
        assert all(isinstance(getattr(r, name), torch.Tensor) for name in ("obs", "done")), (type(r.obs), type(r.done))
        assert all("episode" not in info for info in infos), infos
        np.testing.assert_array_equal(r.obs.numpy(), self.want["obs"], err_msg="recv() of a new round: obs")
        np.testing.assert_array_equal(r.done.numpy(), self.want["done"], err_msg="recv() of a new round: done")


def device_pool_test(cache: DeviceCache, max_examples: int) -> type:
    machine = type("DevicePool", (DevicePoolMachine,), {"cache": cache})
    case = machine.TestCase
    case.settings = settings(stateful_step_count=10, max_examples=max_examples)
    return case

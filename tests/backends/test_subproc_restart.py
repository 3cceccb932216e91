"""restart_on_error: a failing env is rebuilt from its env_fn inside EnvGroup, for every backend.

Its episode ends as truncated with ``infos[i]["restarted"]``; restarts are counted in
the episode summary; the budget is per env; Dummy and Subproc agree bitwise.
"""

from __future__ import annotations

import numpy as np
import pytest

import marl_vec as mv
from marl_vec.core.errors import WorkerError
from marl_vec.vec.subproc.vec_env import SubprocVecEnv
from tests.helpers.scripted_envs import DyingAgentEnv, FailingEnv
from tests.backends.test_subproc_parity import assert_same_result, random_available


class FailingBuilds:
    """An env_fn whose first ``bad`` builds make envs that raise at their step ``fail_at``.

    The env_fn itself counts its builds, so a rebuilt env is a good one; each env of a
    batch needs its own instance (in a worker, the worker's copy counts).
    """

    def __init__(self, bad: int = 1, fail_at: int = 2, episode_len: int = 6):
        self.bad, self.fail_at, self.episode_len = bad, fail_at, episode_len
        self.builds = 0

    def __call__(self):
        self.builds += 1
        if self.builds <= self.bad:
            return FailingEnv(fail_at=self.fail_at, episode_len=self.episode_len)
        return DyingAgentEnv(episode_len=self.episode_len)


class ResetFailsFirst(DyingAgentEnv):
    """Raises in its first reset when built first by :class:`ResetFailingBuilds`."""

    def __init__(self, fail: bool):
        super().__init__()
        self.fail = fail

    def reset(self, seed=None, options=None):
        if self.fail:
            raise ConnectionError("Connection already closed. SC2 probably crashed")
        return super().reset(seed, options)


class ResetFailingBuilds:
    def __init__(self):
        self.builds = 0

    def __call__(self):
        self.builds += 1
        return ResetFailsFirst(fail=self.builds == 1)


def same_through_restarts(a: mv.StepResult, b: mv.StepResult, where: str) -> None:
    """Bitwise equal; a restart's traceback text may differ in marl_vec's own frames
    (the group takes a different loop when some env awaits its reset), so only its
    last line, the env's exception, is compared."""
    for result in (a, b):
        for info in result.infos:
            if "error" in info:
                info["error"] = info["error"].strip().splitlines()[-1]
    assert_same_result(a, b, where)


def make(backend: str, fns, **kwargs) -> mv.VecEnv:
    if backend == "subproc":
        return SubprocVecEnv(fns, num_workers=2, **kwargs)
    return mv.DummyVecEnv(fns, **kwargs)


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
def test_failed_step_ends_the_episode_as_truncated_and_rebuilds(backend):
    fns = [DyingAgentEnv, FailingBuilds(bad=1, fail_at=2), DyingAgentEnv]
    with make(backend, fns, env_seed=0, restart_on_error=1) as venv:
        r0 = venv.reset()
        r1 = venv.step(random_available(r0, np.random.default_rng(0)))
        r2 = venv.step(random_available(r1, np.random.default_rng(1)))
        # Env 1 raised in its second step: its episode ends here, cut short.
        assert r2.done.tolist() == [False, True, False]
        assert r2.truncated[1].tolist() == [True, True, True]
        assert r2.terminated[1].tolist() == [False, False, False]
        assert r2.reward[1].tolist() == [0.0, 0.0, 0.0]
        info = r2.infos[1]
        assert info["restarted"] is True
        assert "RuntimeError: scripted failure at step 2" in info["error"]
        assert info["episode"]["restarts"] == 1 and info["episode"]["length"] == 2
        # same_step: final_obs is the last observation the failed env gave (step 1) ...
        np.testing.assert_array_equal(r2.final_obs[1], r1.obs[1])
        # ... and obs is the first of the rebuilt env's episode.
        assert r2.obs[1, :, 0].tolist() == [0.0, 0.0, 0.0]
        assert r2.agent_mask[1].all()
        # The others went on untouched.
        assert r2.obs[0, 0, 0] == 2.0 and r2.obs[2, 0, 0] == 2.0
        r3 = venv.step(random_available(r2, np.random.default_rng(2)))
        assert r3.obs[:, 0, 0].tolist() == [3.0, 1.0, 3.0]
        assert not r3.infos[1].get("restarted")
        assert venv.episode_statistics()["restarts"] == 1.0


@pytest.mark.parametrize("autoreset", ["same_step", "next_step", "disabled", "one_episode"])
def test_dummy_and_subproc_agree_bitwise_through_restarts(autoreset):
    def fns():
        return [DyingAgentEnv, FailingBuilds(bad=2, fail_at=3), DyingAgentEnv, FailingBuilds(bad=1, fail_at=1)]

    rng = np.random.default_rng(5)
    with make("dummy", fns(), env_seed=3, autoreset=autoreset, restart_on_error=2) as dummy, \
            make("subproc", fns(), env_seed=3, autoreset=autoreset, restart_on_error=2) as sub:
        a, b = dummy.reset(), sub.reset()
        same_through_restarts(a, b, "reset")
        restarted = 0
        for t in range(16):
            if autoreset == "disabled" and a.done.any():
                ids = np.flatnonzero(a.done).tolist()
                a, b = dummy.reset(env_ids=ids), sub.reset(env_ids=ids)
                same_through_restarts(a, b, f"reset {ids}")
            actions = random_available(a, rng)
            a, b = dummy.step(actions), sub.step(actions)
            same_through_restarts(a, b, f"step {t}")
            restarted += sum(bool(info.get("restarted")) for info in a.infos)
        # Env 1: two bad builds then a good one; env 3: one bad build.
        assert restarted == (3 if autoreset != "one_episode" else 2)


def test_rebuilt_env_is_seeded_reproducibly():
    def run():
        with mv.DummyVecEnv([FailingBuilds(bad=1, fail_at=1)], env_seed=9, restart_on_error=1) as venv:
            r = venv.step(random_available(venv.reset(), np.random.default_rng(0)))
            assert r.infos[0]["restarted"]
            return r.obs.copy()

    first, second = run(), run()
    np.testing.assert_array_equal(first, second)
    # A seed of its own: not the first episode's observation again.
    with mv.DummyVecEnv([DyingAgentEnv], env_seed=9) as venv:
        assert venv.reset().obs[0, 0, 2] != first[0, 0, 2]


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
def test_budget_used_up_raises_naming_the_env(backend):
    # Every build fails at its first step: one restart is allowed, the second failure raises.
    fns = [DyingAgentEnv, FailingBuilds(bad=99, fail_at=1)]
    with make(backend, fns, restart_on_error=1) as venv:
        r = venv.step(random_available(venv.reset(), np.random.default_rng(0)))
        assert r.infos[1]["restarted"]
        error = WorkerError if backend == "subproc" else RuntimeError
        with pytest.raises(error, match="scripted failure at step 1") as caught:
            venv.step(random_available(r, np.random.default_rng(1)))
    if backend == "subproc":
        assert caught.value.env_index == 1 and caught.value.worker == 1
        assert "marl_vec: raised by env 1 in step after 1 restart(s)" in str(caught.value)
    else:
        assert caught.value.marl_vec_env_index == 1
        assert "marl_vec: raised by env 1 in step after 1 restart(s)" in caught.value.__notes__[0]


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
def test_failed_reset_is_rebuilt_too(backend):
    with make(backend, [DyingAgentEnv, ResetFailingBuilds()], restart_on_error=1) as venv:
        r = venv.reset()
        assert r.infos[1]["restarted"] is True
        assert "ConnectionError: Connection already closed. SC2 probably crashed" in r.infos[1]["error"]
        assert r.agent_mask.all() and r.obs[:, 0, 0].tolist() == [0.0, 0.0]
        venv.step(random_available(r, np.random.default_rng(0)))


def test_without_budget_the_original_exception_propagates_unchanged():
    """DummyVecEnv keeps the env's own exception type; a note names the env."""
    with mv.DummyVecEnv([DyingAgentEnv, FailingBuilds(bad=1, fail_at=1)]) as venv:
        with pytest.raises(RuntimeError, match="^scripted failure at step 1") as caught:
            venv.step(random_available(venv.reset(), np.random.default_rng(0)))
    assert caught.value.marl_vec_env_index == 1
    assert caught.value.__notes__ == ["marl_vec: raised by env 1 in step"]


def test_negative_budget_is_refused():
    with pytest.raises(ValueError, match="restart_on_error must be an integer >= 0, got -2"):
        mv.DummyVecEnv([DyingAgentEnv], restart_on_error=-2)

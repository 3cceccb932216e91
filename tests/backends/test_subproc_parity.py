"""SubprocVecEnv gives bitwise the same results as DummyVecEnv: every autoreset mode,
several envs per worker, uneven blocks, every start method, and the non-step API."""

from __future__ import annotations

import functools

import gymnasium as gym
import numpy as np
import pytest

import marl_vec as mv
from marl_vec.core.errors import WorkerError
from marl_vec.vec.subproc.vec_env import SubprocVecEnv, default_start_method
from tests.helpers.scripted_envs import DyingAgentEnv

MODES = ["same_step", "next_step", "disabled", "one_episode"]
FIELDS = ["obs", "state", "avail_actions", "agent_mask", "reward", "terminated", "truncated", "done",
          "final_obs", "final_state", "final_avail_actions"]

cartpole = functools.partial(gym.make, "CartPole-v1")
dying = functools.partial(DyingAgentEnv, die_at=2, episode_len=4)


def spread():
    from mpe2 import simple_spread_v3

    return simple_spread_v3.parallel_env(N=3, max_cycles=7, continuous_actions=False)


def assert_same_info(a, b, where):
    """Infos equal key by key, arrays by value."""
    assert isinstance(a, dict) and isinstance(b, dict), where
    assert a.keys() == b.keys(), f"{where}: info keys {sorted(a)} != {sorted(b)}"
    for key in a:
        x, y = a[key], b[key]
        if isinstance(x, dict):
            assert_same_info(x, y, f"{where}[{key!r}]")
        elif isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            np.testing.assert_array_equal(x, y, err_msg=f"{where}[{key!r}]")
        else:
            assert x == y, f"{where}[{key!r}]: {x!r} != {y!r}"


def assert_same_result(a: mv.StepResult, b: mv.StepResult, where: str) -> None:
    for name in FIELDS:
        x, y = getattr(a, name), getattr(b, name)
        if x is None or y is None:
            assert x is None and y is None, f"{where}: {name} is None on one backend only"
            continue
        assert x.dtype == y.dtype and x.shape == y.shape, f"{where}: {name} {x.dtype}{x.shape} != {y.dtype}{y.shape}"
        np.testing.assert_array_equal(x, y, err_msg=f"{where}: {name}")
    assert len(a.infos) == len(b.infos)
    for i, (x, y) in enumerate(zip(a.infos, b.infos)):
        assert_same_info(x, y, f"{where}: infos[{i}]")


def random_available(result: mv.StepResult, rng: np.random.Generator) -> np.ndarray:
    """A random available action for every agent (0 for agents without one)."""
    avail = result.avail_actions
    scores = rng.random(avail.shape) * avail
    return scores.argmax(axis=2).astype(np.int64)


def run_both(env_fn, num_envs, steps, autoreset="same_step", num_workers=2, start_method=None, seed=11, **kwargs):
    """Step a DummyVecEnv and a SubprocVecEnv side by side with the same actions; compare every result.
    ``kwargs`` go to the SubprocVecEnv (``step_in_main=True``, ...)."""
    fns = [env_fn] * num_envs
    rng = np.random.default_rng(seed)
    with mv.DummyVecEnv(fns, env_seed=seed, autoreset=autoreset) as dummy, \
            SubprocVecEnv(fns, env_seed=seed, autoreset=autoreset, num_workers=num_workers,
                          start_method=start_method, **kwargs) as sub:
        assert sub.num_workers == num_workers and len(sub.worker_pids) == num_workers
        a, b = dummy.reset(), sub.reset()
        assert_same_result(a, b, "reset")
        episodes = 0
        for t in range(steps):
            if autoreset == "disabled" and a.done.any():
                ids = np.flatnonzero(a.done).tolist()
                a, b = dummy.reset(env_ids=ids), sub.reset(env_ids=ids)
                assert_same_result(a, b, f"reset(env_ids={ids}) before step {t}")
            actions = random_available(a, rng)
            a, b = dummy.step(actions), sub.step(actions)
            assert_same_result(a, b, f"step {t} ({autoreset})")
            episodes += int(a.done.sum())
        assert dummy.episode_statistics() == sub.episode_statistics()
    return episodes


@pytest.mark.parametrize("autoreset", MODES)
def test_dying_agent_env_every_mode(autoreset):
    # 5 envs on 2 workers: blocks of 3 and 2; episodes of 4 steps, an agent dies at 2.
    episodes = run_both(dying, 5, 14, autoreset)
    assert episodes >= 5  # every env finished at least one episode, so autoreset was exercised


@pytest.mark.parametrize("autoreset", MODES)
def test_cartpole_every_mode(autoreset):
    episodes = run_both(cartpole, 6, 60, autoreset, num_workers=2)
    assert episodes > 0


@pytest.mark.parametrize("autoreset", ["same_step", "next_step"])
def test_simple_spread(autoreset):
    episodes = run_both(spread, 4, 16, autoreset, num_workers=2)
    assert episodes == 8  # max_cycles=7: every env ends at steps 7 and 14


def test_one_worker_and_one_env_per_worker():
    run_both(dying, 3, 6, num_workers=1)
    run_both(dying, 3, 6, num_workers=3)


@pytest.mark.parametrize("start_method", ["spawn", "forkserver"])
def test_other_start_methods(start_method):
    run_both(dying, 3, 6, start_method=start_method)


def test_same_as_plain_loop_over_native_envs():
    """Not only equal to DummyVecEnv: equal to the native env stepped by hand."""
    from tests.helpers.reference import pettingzoo_plain_loop

    fns = [spread] * 3
    actions = np.random.default_rng(3).integers(0, 5, size=(10, 3, 3))
    ref = pettingzoo_plain_loop(fns, 5, actions)
    with SubprocVecEnv(fns, env_seed=5, num_workers=2) as venv:
        first = venv.reset()
        np.testing.assert_array_equal(first.obs, ref["first_obs"])
        for t in range(10):
            r = venv.step(actions[t])
            np.testing.assert_array_equal(r.obs, ref["obs"][t])
            np.testing.assert_array_equal(r.reward, ref["reward"][t])
            np.testing.assert_array_equal(r.done, ref["done"][t])


def test_seeded_reset_and_partial_reset():
    fns = [dying] * 4
    with mv.DummyVecEnv(fns) as dummy, SubprocVecEnv(fns, num_workers=2) as sub:
        assert_same_result(dummy.reset(seed=100), sub.reset(seed=100), "reset(seed=100)")
        actions = np.ones((4, 3), dtype=np.int64)
        assert_same_result(dummy.step(actions), sub.step(actions), "step")
        # env 3 lives in worker 1, env 0 in worker 0; order given is kept.
        a, b = dummy.reset(seed=7, env_ids=[3, 0]), sub.reset(seed=7, env_ids=[3, 0])
        assert_same_result(a, b, "reset(seed=7, env_ids=[3, 0])")
        assert b.obs[1, 0, 0] == 1.0  # env 1 was not reset: still at t=1
        assert b.obs[0, 0, 0] == 0.0 and b.obs[3, 0, 0] == 0.0


def test_results_are_copies_unless_copy_false():
    with SubprocVecEnv([dying] * 2, num_workers=2) as venv:
        first = venv.reset()
        kept = first.obs.copy()
        venv.step(np.ones((2, 3), dtype=np.int64))
        np.testing.assert_array_equal(first.obs, kept)
    with SubprocVecEnv([dying] * 2, num_workers=2, copy=False) as venv:
        first = venv.reset()
        venv.step(np.ones((2, 3), dtype=np.int64))
        assert first.obs[0, 0, 0] == 1.0  # a view into shared memory: the step wrote t=1


def test_call_get_attr_set_attr_render_across_processes():
    with SubprocVecEnv([functools.partial(DyingAgentEnv, render_mode="rgb_array")] * 5, num_workers=2) as venv:
        venv.reset()
        assert venv.get_attr("die_at") == [3] * 5
        venv.set_attr("die_at", [10, 11, 12, 13, 14])
        assert venv.get_attr("die_at", indices=[4, 0, 2]) == [14, 10, 12]
        venv.set_attr("episode_len", 9, indices=[1, 3])
        assert venv.get_attr("episode_len") == [6, 9, 6, 9, 6]
        assert venv.call("observation_space", "a0", indices=[3])[0].shape == (3,)
        # A non-callable attribute is read by call() too.
        assert venv.call("possible_agents", indices=[0]) == [["a0", "a1", "a2"]]
        venv.step(np.ones((5, 3), dtype=np.int64))
        frames = venv.render()
        assert len(frames) == 5 and all(f.shape == (4, 6, 3) and f[0, 0, 0] == 1 for f in frames)


def test_non_step_api_errors_arrive_with_their_message():
    with SubprocVecEnv([dying] * 2, num_workers=2) as venv:
        venv.reset()
        # A missing attribute is an AttributeError, as in this process (tests/core/test_env_attributes.py).
        with pytest.raises(AttributeError, match=r"^env 1 has no attribute 'no_such_thing' \(.*DyingAgentEnv"):
            venv.get_attr("no_such_thing", indices=[1])
        # An error raised inside a method that exists stays the backend's error.
        with pytest.raises(WorkerError, match=r"^worker 1 failed in call: KeyError\("):
            venv.call("_mask", "no such agent", indices=[1])
        with pytest.raises(IndexError, match=r"env indices \[7\] out of range \[-2, 2\)"):
            venv.get_attr("t", indices=[7])
        # Still usable afterwards.
        assert venv.get_attr("t") == [0, 0]


def test_step_async_returns_before_the_workers_finish():
    """step_async only signals; the trainer can compute while the workers step."""
    import time

    slow = functools.partial(SlowEnv, delay=0.3)
    with SubprocVecEnv([slow] * 2, num_workers=2) as venv:
        venv.reset()
        start = time.perf_counter()
        venv.step_async(np.ones((2, 3), dtype=np.int64))
        returned = time.perf_counter() - start
        r = venv.step_wait()
        total = time.perf_counter() - start
    assert r.obs[0, 0, 0] == 1.0
    # Not a speed test: only that step_async did not wait for the 0.3 s step.
    assert returned < total and returned < 0.25, (returned, total)


class SlowEnv(DyingAgentEnv):
    def __init__(self, delay: float = 0.3, **kwargs):
        super().__init__(**kwargs)
        self.delay = delay

    def step(self, actions):
        import time

        time.sleep(self.delay)
        return super().step(actions)


def test_default_start_method_and_workers():
    assert default_start_method() in ("fork", "forkserver", "spawn")
    with SubprocVecEnv([dying] * 3) as venv:
        assert venv.num_workers == min(3, len(__import__("os").sched_getaffinity(0)))
        assert venv.start_method == default_start_method()


def test_make_vec_and_config_select_subproc():
    with mv.make("mpe/simple_spread", num_envs=3, backend="subproc", num_workers=2, restart_on_error=1) as venv:
        assert type(venv).__name__ == "SubprocVecEnv" and venv.num_workers == 2
        r = venv.reset()
        assert r.obs.shape == (3, 3, 18)
    with mv.make_vec([dying] * 2, backend="subproc", num_workers=1) as venv:
        assert isinstance(venv, mv.SubprocVecEnv)


def test_cli_run_with_subproc_backend(capsys):
    from marl_vec.tools.cli import main

    code = main(["run", "mpe/simple_spread", "--no-progress", "-o", "vec.backend=subproc", "-o", "vec.num_envs=4",
                 "-o", "vec.num_workers=2", "-o", "run.steps=60"])
    out = capsys.readouterr().out
    assert code == 0
    assert "4 envs on subproc" in out


def test_continuous_actions():
    from mpe2 import simple_spread_v3

    fn = functools.partial(simple_spread_v3.parallel_env, N=2, max_cycles=5, continuous_actions=True)
    rng = np.random.default_rng(4)
    with mv.DummyVecEnv([fn] * 3, env_seed=2) as dummy, SubprocVecEnv([fn] * 3, env_seed=2, num_workers=2) as sub:
        a, b = dummy.reset(), sub.reset()
        assert b.avail_actions is None
        assert_same_result(a, b, "reset")
        for t in range(8):
            actions = rng.uniform(0.0, 1.0, size=(3, 2, *sub.spec.action_shape)).astype(np.float32)
            assert_same_result(dummy.step(actions), sub.step(actions), f"step {t}")


def test_atari_fast_autoreset_restores_snapshots_in_workers():
    pytest.importorskip("ale_py")
    from marl_vec.envs.registry import make_env_fn

    fn = make_env_fn("atari", "ALE/Pong-v5", {"preprocess": True, "max_episode_steps": 6})
    rng = np.random.default_rng(0)
    with mv.DummyVecEnv([fn] * 2, env_seed=1, autoreset="fast") as dummy, \
            SubprocVecEnv([fn] * 2, env_seed=1, autoreset="fast", num_workers=2) as sub:
        assert_same_result(dummy.reset(), sub.reset(), "reset")
        ended = 0
        for t in range(14):
            actions = rng.integers(0, 6, size=(2, 1))
            a, b = dummy.step(actions), sub.step(actions)
            assert_same_result(a, b, f"step {t}")
            ended += int(a.done.sum())
        assert ended == 4  # each env ended twice, and restarted from its snapshot


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_workers_see_environment_variables_set_after_earlier_workers(method, monkeypatch):
    # A forkserver is started once; its children would otherwise keep the
    # environment it had then, not the parent's now.
    first = mv.SubprocVecEnv([EnvVarEnv] * 2, num_workers=2, start_method=method)
    first.close()
    monkeypatch.setenv("MARL_VEC_TEST_VARIABLE", "set later")
    with mv.SubprocVecEnv([EnvVarEnv] * 2, num_workers=2, start_method=method) as venv:
        assert venv.get_attr("seen") == ["set later", "set later"]


class EnvVarEnv(gym.Env):
    observation_space = gym.spaces.Box(0, 1, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self):
        import os

        self.seen = os.environ.get("MARL_VEC_TEST_VARIABLE")

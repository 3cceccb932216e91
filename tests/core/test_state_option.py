"""The ``state`` option: auto | env | concat | none, on every backend and from configs."""

from __future__ import annotations

import functools
import warnings

import gymnasium as gym
import numpy as np
import pytest

import marl_vec as mv
from marl_vec.tools.config import ConfigError, load_config
from marl_vec.envs.pettingzoo.parallel import StateUnavailableError
from marl_vec.core.errors import WorkerError
from tests.helpers.backends import make_backend, ray_cluster  # noqa: F401 - ray_cluster: the module's Ray fixture
from tests.helpers.scripted_envs import DyingAgentEnv

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

BACKENDS = ["dummy", "subproc"]


def multiwalker(**kw):
    pytest.importorskip("Box2D", reason="pettingzoo[sisl] not installed: pip install 'marl_vec[pettingzoo]'")
    from pettingzoo.sisl import multiwalker_v9

    return functools.partial(multiwalker_v9.parallel_env, n_walkers=3, **kw)


def tiger_deer():
    pytest.importorskip("magent2", reason="magent2 not installed: pip install 'marl_vec[pettingzoo]'")
    from magent2.environments import tiger_deer_v4

    # The tigers starve at step 100 on this map, ending the episode; state() then raises
    # ValueError (an empty group), which crashes a plain loop that calls it.
    return functools.partial(tiger_deer_v4.parallel_env, map_size=10, max_cycles=300)


def walker_actions(steps: int, num_envs: int) -> np.ndarray:
    return np.random.default_rng(0).uniform(-1, 1, (steps, num_envs, 3, 4)).astype(np.float32)


def run(venv, actions):
    results = [venv.reset()]
    results += [venv.step(a) for a in actions]
    return results


# -- auto: never a crash ----------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_auto_multiwalker_runs_past_a_fallen_walker(backend):
    # The plain loop that calls state() crashes here (AttributeError once a walker fell).
    fn = multiwalker()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with mv.make_vec([fn] * 2, backend=backend) as venv:
            assert venv.spec.state_shape == (75,) and venv.spec.has_state
            results = run(venv, walker_actions(200, 2))
    flagged = [(t, i) for t, r in enumerate(results) for i, info in enumerate(r.infos) if info.get("state_unavailable")]
    assert flagged, "a walker falls within 200 random steps"
    for t, i in flagged:
        r = results[t]
        # multiwalker ends its episode when a walker falls: the final state is the zeros row.
        assert r.done[i] and not r.final_state[i].any()
        assert r.state[i].any(), "after the reset the env's own state again"
    if backend == "dummy":
        # Warned with the env's name and the error, once, not at every fall.
        messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
        assert len(messages) <= 1  # an earlier test of this process may have warned already
        for m in messages:
            assert "multiwalker_v9: env.state() raised AttributeError" in m and "state='concat'" in m


def test_auto_warns_once_naming_env_and_error(monkeypatch):
    from marl_vec.envs.pettingzoo import parallel as pz

    monkeypatch.setattr(pz, "_warned_state", set())
    with pytest.warns(RuntimeWarning, match=r"multiwalker_v9: env.state\(\) raised AttributeError: 'NoneType'") as rec:
        with mv.DummyVecEnv([multiwalker()] * 2) as venv:
            run(venv, walker_actions(200, 2))
    assert sum("env.state() raised" in str(w.message) for w in rec) == 1


def test_auto_tiger_deer_runs_when_a_group_is_empty():
    with mv.DummyVecEnv([tiger_deer()] * 2, env_seed=0) as venv:
        r = venv.reset()
        unavailable = 0
        for t in range(150):
            r = venv.step(np.zeros((2, venv.spec.n_agents), dtype=np.int64))
            for i, info in enumerate(r.infos):
                if info.get("state_unavailable"):
                    unavailable += 1
                    assert not (r.final_state[i] if r.done[i] else r.state[i]).any()
                else:
                    assert r.state[i].any()
        assert unavailable == 2  # each env's episode ends at step 100, when its tigers starved


# -- env: raises, naming the env and the way out -------------------------------------

def test_env_mode_raises_naming_env_and_hint():
    with mv.DummyVecEnv([multiwalker()] * 2, state="env") as venv:
        venv.reset()
        with pytest.raises(StateUnavailableError, match=r"state='env' was asked\. Use state='auto'.*or state='concat'") as err:
            run(venv, walker_actions(200, 2))
    assert err.value.marl_vec_env_index in (0, 1)
    assert any("raised by env" in note for note in getattr(err.value, "__notes__", []))
    assert isinstance(err.value.__cause__, AttributeError)


def test_env_mode_subproc_names_env():
    with mv.SubprocVecEnv([multiwalker()] * 2, state="env", num_workers=2) as venv:
        venv.reset()
        with pytest.raises(WorkerError, match=r"env [01] \(worker [01]\) failed in step: StateUnavailableError"):
            run(venv, walker_actions(200, 2))


def test_env_mode_refuses_env_without_state():
    with pytest.raises(ValueError, match=r"state='env': .* has no state_space.*allowed here: auto, concat"):
        mv.DummyVecEnv([DyingAgentEnv], state="env")
    with pytest.raises(ValueError, match=r"state='env': GymAdapter has no state of its own"):
        mv.DummyVecEnv([lambda: gym.make("CartPole-v1")], state="env")


def test_env_mode_equals_auto_where_state_works():
    fn = multiwalker(max_cycles=30)
    actions = walker_actions(25, 2) * 0  # standing still: no walker falls
    with mv.DummyVecEnv([fn] * 2, state="env") as a, mv.DummyVecEnv([fn] * 2) as b:
        for ra, rb in zip(run(a, actions), run(b, actions)):
            np.testing.assert_array_equal(ra.state, rb.state)
            np.testing.assert_array_equal(ra.obs, rb.obs)


# -- concat and none ---------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_concat_is_the_observations(backend):
    with mv.make_vec([multiwalker()] * 2, backend=backend, state="concat") as venv:
        assert venv.spec.state_shape == (3 * 31,) and venv.spec.state_is_obs
        for r in run(venv, walker_actions(120, 2)):
            np.testing.assert_array_equal(r.state, r.obs.reshape(2, -1))
            assert not any(info.get("state_unavailable") for info in r.infos)
            if r.done.any():
                np.testing.assert_array_equal(r.final_state, r.final_obs.reshape(2, -1))


class CountingState(DyingAgentEnv):
    """DyingAgentEnv with a state_space whose state() counts its calls."""

    calls = 0

    @property
    def state_space(self):
        return gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)

    def state(self):
        type(self).calls += 1
        return np.array([1.0, 2.0], np.float32)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("autoreset", ["same_step", "next_step"])
def test_none_has_no_state_and_same_rest(backend, autoreset):
    fn = multiwalker(max_cycles=40)
    actions = walker_actions(90, 2)
    with mv.make_vec([fn] * 2, backend=backend, state="none", autoreset=autoreset) as venv, \
            mv.make_vec([fn] * 2, backend=backend, autoreset=autoreset) as ref:
        spec = venv.spec
        assert not spec.has_state and spec.state_shape == (0,)
        assert venv.env_info()["state_shape"] == 0
        assert venv.buffers.state is None and venv.buffers.final_state is None
        assert "state" not in dict(venv.buffers.arrays()) and "final_state" not in dict(venv.buffers.arrays())
        assert "state          none" in spec.describe()
        for r, q in zip(run(venv, actions), run(ref, actions)):
            assert r.state is None and r.final_state is None
            for name in ("obs", "reward", "terminated", "truncated", "done", "agent_mask"):
                np.testing.assert_array_equal(getattr(r, name), getattr(q, name), err_msg=name)
            if autoreset == "same_step":
                np.testing.assert_array_equal(r.final_obs, q.final_obs)


def test_none_never_calls_state():
    CountingState.calls = 0
    with mv.DummyVecEnv([CountingState] * 2, state="none") as venv:
        r = venv.reset()
        for _ in range(8):
            r = venv.step(r.avail_actions.argmax(-1))
    assert CountingState.calls == 0
    with mv.DummyVecEnv([CountingState] * 2) as venv:
        venv.reset()
    assert CountingState.calls == 2


def test_none_copy_false_and_other_families():
    with mv.DummyVecEnv([lambda: gym.make("CartPole-v1")] * 2, state="none", copy=False) as venv:
        assert venv.reset().state is None
        r = venv.step(np.zeros((2, 1), np.int64))
        assert r.state is None and r.final_state is None and venv.spec.has_state is False
    with mv.DummyVecEnv([lambda: gym.make("CartPole-v1")] * 2, state="concat") as venv:
        assert venv.spec.state_is_obs and venv.reset().state.shape == (2, 4)


def test_unknown_state_mode():
    with pytest.raises(ValueError, match=r"unknown state mode 'global'; allowed: auto, env, concat, none"):
        mv.DummyVecEnv([DyingAgentEnv], state="global")
    with pytest.raises(ValueError, match=r"unknown state mode 'x'"):
        mv.make_vec([DyingAgentEnv], state="x")


# -- config ------------------------------------------------------------------------------

def test_config_key_vec_state():
    cfg = load_config("sisl/multiwalker", {"vec.state": "none", "vec.num_envs": 2})
    assert cfg.vec.state == "none"
    with mv.make(cfg) as venv:
        assert venv.reset().state is None
    assert load_config("sisl/multiwalker").vec.state == "auto"
    with pytest.raises(ConfigError, match=r"vec.state: 'global' is not allowed"):
        load_config("sisl/multiwalker", {"vec.state": "global"})
    with mv.make("mpe/simple_spread", num_envs=2, state="concat") as venv:
        assert venv.spec.state_shape == (54,)


@pytest.mark.parametrize("mode", ["none", "concat"])
def test_family_with_own_state_writes_it_aside(mode):
    # Multi-player Atari computes its state itself (the screen): under none/concat it
    # writes it to a private row; the batch's obs are those of state="auto".
    pytest.importorskip("multi_agent_ale_py", reason="multi-player Atari not installed: pip install 'marl_vec[atari]'")
    actions = np.random.default_rng(0).integers(0, 6, (12, 2, 2))
    with mv.make("atari/pong_2p", num_envs=2, state=mode) as venv, mv.make("atari/pong_2p", num_envs=2) as ref:
        assert venv.spec.has_state is (mode == "concat")
        for r, q in zip(run(venv, actions), run(ref, actions)):
            np.testing.assert_array_equal(r.obs, q.obs)
            np.testing.assert_array_equal(r.reward, q.reward)
            if mode == "none":
                assert r.state is None
            else:
                np.testing.assert_array_equal(r.state, r.obs.reshape(2, -1))


@pytest.mark.slow
@pytest.mark.parametrize("transport", ["auto", "ray"])
def test_none_on_ray_equals_dummy(transport):
    pytest.importorskip("ray", reason="ray not installed: pip install 'marl_vec[ray]'")
    fn = multiwalker(max_cycles=40)
    actions = walker_actions(90, 2)
    with mv.make_vec([fn] * 2, backend="ray", state="none",
                     ray_config={"num_workers": 2, "transport": transport}) as venv, \
            mv.DummyVecEnv([fn] * 2, state="none") as ref:
        for r, q in zip(run(venv, actions), run(ref, actions)):
            assert r.state is None and r.final_state is None
            for name in ("obs", "reward", "terminated", "truncated", "done", "agent_mask", "final_obs"):
                np.testing.assert_array_equal(getattr(r, name), getattr(q, name), err_msg=name)


@pytest.mark.parametrize("backend", ["ray-auto", "ray-ray"])
@pytest.mark.parametrize("mode", ["none", "concat"])
def test_ray_constructor_takes_state(backend, mode, request):
    fn = multiwalker(max_cycles=20)
    actions = walker_actions(30, 2)
    with make_backend(backend, [fn] * 2, request, state=mode) as venv, mv.DummyVecEnv([fn] * 2, state=mode) as ref:
        assert isinstance(venv, mv.RayVecEnv)
        assert venv.spec.has_state is (mode == "concat") and venv.spec.state_shape == ref.spec.state_shape
        for r, q in zip(run(venv, actions), run(ref, actions)):
            for name in ("obs", "state", "final_obs", "final_state", "reward", "done", "agent_mask"):
                np.testing.assert_array_equal(getattr(r, name), getattr(q, name), err_msg=name)
            assert (r.state is None) is (mode == "none")


def test_ray_refuses_an_unknown_state_mode_before_starting_a_cluster(monkeypatch):
    import marl_vec.vec.ray.vec_env as ray_backend

    def no_cluster(*args, **kwargs):
        raise AssertionError("a cluster was started")

    monkeypatch.setattr(ray_backend, "acquire_session", no_cluster)
    with pytest.raises(ValueError, match=r"unknown state mode 'global'; allowed: auto, env, concat, none"):
        mv.RayVecEnv([DyingAgentEnv], state="global")


def test_none_in_episode_batches():
    from mpe2 import simple_spread_v3

    fn = functools.partial(simple_spread_v3.parallel_env, N=3, max_cycles=10)
    with mv.DummyVecEnv([fn] * 2, autoreset="one_episode", state="none") as venv:
        batch = mv.EpisodeRunner(venv).run()
    assert batch.state is None and batch.obs.shape == (2, 11, 3, 18)
    assert batch.copy().state is None

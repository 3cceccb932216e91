"""RayVecEnv on a local Ray cluster: same results as DummyVecEnv and a plain loop,
env errors, restarts, a killed actor, a hung actor, options.

One cluster serves the whole module (starting Ray costs ~5 s); RayVecEnv finds the
session already open and leaves it open. Cleanup of a cluster that RayVecEnv starts
itself is in tests/backends/test_ray_cleanup.py.
"""

from __future__ import annotations

import functools
import os
import signal
import time

import gymnasium as gym
import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="the ray extra is not installed: pip install 'marl_vec[ray]'")

import marl_vec as mv  # noqa: E402
from marl_vec.vec.ray.vec_env import RayVecEnv, RayWorkerError  # noqa: E402
from tests.helpers.reference import pettingzoo_plain_loop  # noqa: E402
from tests.helpers.scripted_envs import DyingAgentEnv, FailingEnv  # noqa: E402

FIELDS = ("obs", "state", "avail_actions", "agent_mask", "reward", "terminated", "truncated", "done")


@pytest.fixture(scope="module", autouse=True)
def cluster(tmp_path_factory):
    if ray.is_initialized():  # pragma: no cover - another module left one open
        ray.shutdown()
    temp_dir = str(tmp_path_factory.mktemp("ray"))
    # Workers import test helpers by module name (tests.helpers.scripted_envs): give them the repo root.
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ray.init(num_cpus=2, include_dashboard=False, _temp_dir=temp_dir, runtime_env={"env_vars": {"PYTHONPATH": root}})
    yield
    ray.shutdown()


@pytest.fixture(params=["auto", "ray"])
def transport(request):
    """Both ways of reaching an actor: "auto" links same-node actors over shared memory
    (every actor here), "ray" sends everything through Ray calls (what crosses machines)."""
    return request.param


def spread_fn(max_cycles: int = 10):
    from mpe2 import simple_spread_v3

    return functools.partial(simple_spread_v3.parallel_env, N=3, max_cycles=max_cycles, continuous_actions=False)


def pick_available(avail: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A random available action per (env, agent); the same rng draws on every backend."""
    return np.argmax(avail * rng.random(avail.shape), axis=-1).astype(np.int64)


def assert_same(r, d, t) -> None:
    for name in FIELDS:
        np.testing.assert_array_equal(getattr(r, name), getattr(d, name), err_msg=f"{name} at step {t}")
    for i in np.flatnonzero(d.done):
        if d.final_obs is not None:
            np.testing.assert_array_equal(r.final_obs[i], d.final_obs[i], err_msg=f"final_obs[{i}] at step {t}")
            np.testing.assert_array_equal(r.final_state[i], d.final_state[i])
            np.testing.assert_array_equal(r.final_avail_actions[i], d.final_avail_actions[i])
    assert len(r.infos) == len(d.infos)
    for i, (ri, di) in enumerate(zip(r.infos, d.infos)):
        assert ri.keys() == di.keys(), (t, i)
        if "episode" in di:
            assert ri["episode"]["return"] == di["episode"]["return"]
            assert ri["episode"]["length"] == di["episode"]["length"]
            np.testing.assert_array_equal(ri["episode"]["agent_returns"], di["episode"]["agent_returns"])


def run_both(fns, steps: int, seed: int, autoreset: str = "same_step", cls=RayVecEnv, **ray_kwargs):
    """Step a RayVecEnv and a DummyVecEnv with the same actions; assert every step equal."""
    rng = np.random.default_rng(3)
    with cls(fns, env_seed=seed, autoreset=autoreset, **ray_kwargs) as rv, \
            mv.DummyVecEnv(fns, env_seed=seed, autoreset=autoreset) as dv:
        r, d = rv.reset(), dv.reset()
        assert_same(r, d, -1)
        actions, dones = [], 0
        for t in range(steps):
            a = pick_available(d.avail_actions, rng)
            actions.append(a)
            r, d = rv.step(a), dv.step(a)
            assert_same(r, d, t)
            dones += int(d.done.sum())
            if autoreset == "disabled" and d.done.any():
                ids = np.flatnonzero(d.done).tolist()
                r, d = rv.reset(env_ids=ids), dv.reset(env_ids=ids)
                assert_same(r, d, t)
        assert rv.episode_statistics() == dv.episode_statistics()
    return np.stack(actions), dones


def test_simple_spread_equals_dummy_and_plain_loop(transport):
    fns = [spread_fn()] * 6
    # Blocks of 4 and 2: uneven blocks and a global seed offset in the second actor.
    actions, dones = run_both(fns, steps=25, seed=11, envs_per_worker=4, transport=transport)
    assert dones == 6 * 2
    ref = pettingzoo_plain_loop(fns, 11, actions)
    with RayVecEnv(fns, env_seed=11, num_workers=2, transport=transport) as rv:
        assert rv.linked == [transport == "auto"] * 2
        first = rv.reset()
        np.testing.assert_array_equal(first.obs, ref["first_obs"])
        for t, a in enumerate(actions):
            r = rv.step(a)
            np.testing.assert_array_equal(r.obs, ref["obs"][t], err_msg=f"obs at step {t}")
            np.testing.assert_array_equal(r.reward, ref["reward"][t], err_msg=f"reward at step {t}")
            np.testing.assert_array_equal(r.truncated, ref["truncated"][t])
            for i in np.flatnonzero(r.done):
                np.testing.assert_array_equal(r.final_obs[i], ref["final_obs"][t][i])


@pytest.mark.parametrize("autoreset", ["same_step", "next_step", "one_episode", "disabled"])
def test_dying_agents_every_autoreset_mode_equals_dummy(autoreset, transport):
    fns = [functools.partial(DyingAgentEnv, die_at=2, episode_len=4)] * 3
    _, dones = run_both(fns, steps=10, seed=5, autoreset=autoreset, num_workers=2, transport=transport)
    assert dones > 0


class FirstActorLocal(RayVecEnv):
    """As on a cluster of two machines: only actor 0 counts as on the driver's machine."""

    def _local_actors(self, workers):
        return [w for w in super()._local_actors(workers) if w == 0]


@pytest.mark.parametrize("autoreset", ["same_step", "next_step"])
def test_linked_and_ray_called_actors_mixed_equal_dummy(autoreset):
    fns = [functools.partial(DyingAgentEnv, die_at=2, episode_len=4)] * 5
    with FirstActorLocal(fns, num_workers=2) as rv:
        assert rv.linked == [True, False] and rv.buffers.shm_name is not None
    run_both(fns, steps=10, seed=5, autoreset=autoreset, cls=FirstActorLocal, num_workers=2)


def test_partial_reset_call_attrs_render_and_config(transport):
    fns = [functools.partial(DyingAgentEnv, render_mode="rgb_array")] * 5
    with RayVecEnv(fns, env_seed=0, num_workers=2, transport=transport) as rv, mv.DummyVecEnv(fns, env_seed=0) as dv:
        rv.reset(), dv.reset()
        rng = np.random.default_rng(0)
        for t in range(2):
            a = pick_available(dv.buffers.avail_actions, rng)
            assert_same(rv.step(a), dv.step(a), t)
        r, d = rv.reset(seed=40, env_ids=[4, 1]), dv.reset(seed=40, env_ids=[4, 1])
        assert_same(r, d, "partial reset")
        # Indices across both actors, out of order: answers come back in the order asked.
        assert rv.get_attr("t", indices=[4, 0, 3]) == dv.get_attr("t", indices=[4, 0, 3]) == [0, 2, 2]
        rv.set_attr("episode_len", [7, 8], indices=[3, 1])
        assert rv.get_attr("episode_len") == [6, 8, 6, 7, 6]
        masks = rv.call("_mask", "a2", indices=[2, 0])  # positional args reach the env
        assert [m.tolist() for m in masks] == [[1, 1, 0], [1, 1, 0]]
        frames = rv.render()
        assert len(frames) == 5 and all(np.array_equal(f, g) for f, g in zip(frames, dv.render()))
    cfg = {"env": {"family": "pettingzoo", "id": "mpe2.simple_spread_v3", "kwargs": {"N": 2, "max_cycles": 5}},
           "vec": {"num_envs": 3, "backend": "ray", "num_workers": 2}}
    with mv.make(cfg) as venv:
        assert type(venv).__name__ == "RayVecEnv" and [len(b) for b in venv.blocks] == [1, 2]
        assert venv.reset().obs.shape == (3, 2, *venv.spec.obs_shape)


def test_env_error_names_actor_env_and_traceback(transport):
    fns = [functools.partial(DyingAgentEnv)] * 3 + [functools.partial(FailingEnv, fail_at=2)]
    with RayVecEnv(fns, env_seed=0, num_workers=2, transport=transport) as rv:
        r = rv.reset()
        rng = np.random.default_rng(0)
        rv.step(pick_available(r.avail_actions, rng))
        with pytest.raises(RayWorkerError, match="scripted failure at step 2") as info:
            rv.step(pick_available(rv.buffers.avail_actions, rng))
        err = info.value
        assert err.worker == 1 and err.env_ids == range(2, 4) and err.env_index == 3
        assert "Ray actor 1 (envs 2..3), env 3, raised during step" in str(err)
        # The remote traceback, down to the line that raised, without Ray's colour codes.
        assert 'scripted_envs.py", line' in str(err) and "\x1b[" not in str(err)
        # The actor is alive: a reset brings the batch back.
        assert rv.reset().obs.shape[0] == 4


def test_restart_on_error_rebuilds_the_env_in_its_actor(transport):
    fns = [functools.partial(DyingAgentEnv)] * 3 + [functools.partial(FailingEnv, fail_at=2)]
    with RayVecEnv(fns, env_seed=0, num_workers=2, restart_on_error=1, transport=transport) as rv, \
            mv.DummyVecEnv(fns, env_seed=0) as dv:
        r = rv.reset()
        rng = np.random.default_rng(0)
        rv.step(pick_available(r.avail_actions, rng))
        r = rv.step(pick_available(rv.buffers.avail_actions, rng))
        assert r.done.tolist() == [False, False, False, True]
        assert r.truncated[3].all() and not r.terminated[3].any()
        assert r.infos[3]["restarted"] is True and "scripted failure at step 2" in r.infos[3]["error"]
        assert r.infos[3]["episode"]["restarts"] == 1
        assert dv  # the same fns without restarts: DummyVecEnv raises the error itself
        dv.reset()
        dv.step(pick_available(dv.buffers.avail_actions, np.random.default_rng(0)))
        with pytest.raises(RuntimeError, match="scripted failure"):
            dv.step(pick_available(dv.buffers.avail_actions, np.random.default_rng(1)))


class PidEnv(gym.Env):
    """CartPole that tells which process it runs in, and can be made to hang."""

    def __init__(self, hang: float = 0.0):
        self._env = gym.make("CartPole-v1")
        self.observation_space, self.action_space = self._env.observation_space, self._env.action_space
        self.pid = os.getpid()
        self.hang = hang

    def reset(self, *, seed=None, options=None):
        return self._env.reset(seed=seed)

    def step(self, action):
        if self.hang:
            time.sleep(self.hang)
        return self._env.step(action)


def test_killed_actor_is_reported_without_hanging(transport):
    with RayVecEnv([PidEnv] * 4, env_seed=0, num_workers=2, transport=transport) as rv:
        rv.reset()
        pid = rv.get_attr("pid", indices=[3])[0]
        assert pid != os.getpid()
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(RayWorkerError, match=r"Ray actor 1 \(envs 2..3\) died during step") as info:
            rv.step(np.zeros((4, 1), dtype=np.int64))
        assert info.value.worker == 1
        # Later calls fail at once with the same diagnosis, never waiting on the dead actor.
        with pytest.raises(RayWorkerError, match="the actor is gone"):
            rv.step(np.zeros((4, 1), dtype=np.int64))
        with pytest.raises(RayWorkerError, match="died"):
            rv.reset()
    assert rv.closed


def test_a_killed_actor_is_named_while_another_is_still_stepping(transport):
    """ray.get fails at the dead actor's ref at once; actor 0, still in its 1 s step, is not
    late (it was reported as 'did not answer step within 600 s', a race seen in CI)."""
    fns = [functools.partial(PidEnv, hang=1.0)] * 2 + [PidEnv] * 2
    with RayVecEnv(fns, env_seed=0, num_workers=2, transport=transport) as rv:
        rv.reset()
        os.kill(rv.get_attr("pid", indices=[3])[0], signal.SIGKILL)
        with pytest.raises(RayWorkerError, match=r"Ray actor 1 \(envs 2..3\) died during step") as info:
            rv.step(np.zeros((4, 1), dtype=np.int64))
        assert info.value.worker == 1


def test_restart_on_error_replaces_a_killed_actor(transport):
    with RayVecEnv([PidEnv] * 4, env_seed=0, num_workers=2, restart_on_error=1, transport=transport) as rv:
        rv.reset()
        before = rv.step(np.zeros((4, 1), dtype=np.int64))
        pid = rv.get_attr("pid", indices=[2])[0]
        os.kill(pid, signal.SIGKILL)
        r = rv.step(np.zeros((4, 1), dtype=np.int64))
        # Actor 1's envs end their episode as truncated; actor 0's step normally.
        assert r.done[2:].all() and r.truncated[2:].all() and not r.terminated[2:].any()
        assert (r.reward[2:] == 0).all()
        assert all(r.infos[i]["restarted"] and r.infos[i]["actor_restarts"] == 1 for i in (2, 3))
        assert "died during step" in r.infos[2]["error"]
        # final_obs: the last observation this process saw; obs: the new episode's first.
        np.testing.assert_array_equal(r.final_obs[2:], before.obs[2:])
        assert (np.abs(r.obs[2:]) <= 0.05).all()  # CartPole's reset range
        assert rv.get_attr("pid", indices=[3])[0] not in (pid, os.getpid())
        assert rv.linked == [transport == "auto"] * 2  # the new actor is linked like the old one
        rv.step(np.zeros((4, 1), dtype=np.int64))
        os.kill(rv.get_attr("pid", indices=[3])[0], signal.SIGKILL)
        with pytest.raises(RayWorkerError, match="after 1 replacement"):
            rv.step(np.zeros((4, 1), dtype=np.int64))


def test_hung_actor_times_out(transport):
    fns = [PidEnv, functools.partial(PidEnv, hang=30.0)]
    rv = RayVecEnv(fns, env_seed=0, num_workers=2, transport=transport)  # actors may take a while to start on a busy machine
    rv.reset()
    rv.timeout = 1.0
    begin = time.monotonic()
    with pytest.raises(RayWorkerError, match=r"Ray actor 1 \(envs 1..1\) did not answer step within 1 s"):
        rv.step(np.zeros((2, 1), dtype=np.int64))
    rv.close()  # kills the stuck actor instead of waiting for it
    assert time.monotonic() - begin < 10


def test_bad_options_are_named():
    fns = [PidEnv] * 3
    with pytest.raises(ValueError, match="num_workers=4 is more than num_envs=3"):
        RayVecEnv(fns, num_workers=4)
    with pytest.raises(ValueError, match="num_workers=3 and envs_per_worker=2 disagree"):
        RayVecEnv(fns, num_workers=3, envs_per_worker=2)
    with pytest.raises(ValueError, match="unknown ray_config keys \\['num_gpus'\\]"):
        RayVecEnv(fns, ray_config={"num_gpus": 1})
    with pytest.raises(ValueError, match="unknown transport 'shm'; allowed: 'auto' .* or 'ray'"):
        RayVecEnv(fns, transport="shm")
    with pytest.raises(ValueError, match="'num_workers' given both as a keyword"):
        RayVecEnv(fns, num_workers=1, ray_config={"num_workers": 2})
    with pytest.raises(RayWorkerError, match="did not answer start within 2 s .*cluster resources"):
        RayVecEnv(fns, num_workers=1, timeout=2.0, resources_per_worker={"sc2": 1})
    with pytest.raises(RayWorkerError, match=r"(?s)Ray actor 1 \(envs 1..2\) died during start.*NoSuchEnvHere. doesn.t exist"):
        RayVecEnv([PidEnv, PidEnv, functools.partial(gym.make, "NoSuchEnvHere-v0")], num_workers=2)
    with pytest.raises(mv.ConfigError, match="start_method applies to the subproc backend"):
        mv.make({"env": {"family": "gym", "id": "CartPole-v1"}, "vec": {"backend": "ray", "start_method": "fork"}})


def test_same_node_link_steps_in_shared_memory_and_leaves_nothing_behind():
    fns = [spread_fn()] * 4
    rv = RayVecEnv(fns, env_seed=0, num_workers=2)
    shm, sockets = rv.buffers.shm_name, rv._socket_dir
    assert rv.linked == [True, True] and shm is not None
    assert os.path.exists(f"/dev/shm/{shm}")
    rv.reset()
    rv.step(np.ones((4, 3), dtype=np.int64))
    rv.close()
    assert not os.path.exists(f"/dev/shm/{shm}") and not os.path.exists(sockets)
    cfg = {"env": {"family": "pettingzoo", "id": "mpe2.simple_spread_v3", "kwargs": {"N": 2, "max_cycles": 5}},
           "vec": {"num_envs": 2, "backend": "ray", "num_workers": 2, "ray": {"transport": "ray"}}}
    with mv.make(cfg) as venv:
        assert venv.linked == [False, False] and venv.buffers.shm_name is None


def _interrupt(*_):
    raise KeyboardInterrupt


def test_interrupted_step_leaves_no_answer_behind():
    """Ctrl-C in step_wait: the linked actors' answers still on their way are discarded,
    never read as the next command's (the envs did take the interrupted step)."""
    fns = [PidEnv, functools.partial(PidEnv, hang=1.0)]
    a = np.zeros((2, 1), dtype=np.int64)
    with RayVecEnv(fns, env_seed=0, num_workers=2) as rv, mv.DummyVecEnv([PidEnv] * 2, env_seed=0) as dv:
        assert rv.linked == [True, True]
        rv.reset(), dv.reset()
        old = signal.signal(signal.SIGALRM, _interrupt)
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        try:
            with pytest.raises(KeyboardInterrupt):
                rv.step(a)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
        dv.step(a)
        for _ in range(2):
            r, d = rv.step(a), dv.step(a)
            np.testing.assert_array_equal(r.obs, d.obs)
            assert rv.get_attr("hang") == [0.0, 1.0]


def test_tree_observations_and_float64_rewards_equal_dummy(transport):
    """Dict observations and Dict actions travel leaf by leaf (shared memory over the
    link, arrays over Ray calls); gymnasium rewards stay float64."""
    from marl_vec.core import spaces
    from tests.core.test_spaces import NESTED, _actions, _fns

    action_space = gym.spaces.Dict({"pick": gym.spaces.MultiDiscrete([3, 4], start=[1, -1]),
                                    "aim": gym.spaces.Box(-1.0, 1.0, (2,), np.float32)})
    fns = _fns(NESTED, action_space)
    actions = _actions(action_space, 3, 20)
    with RayVecEnv(fns, env_seed=2, num_workers=2, transport=transport) as venv, \
            mv.DummyVecEnv(fns, env_seed=2) as dummy:
        results = [(venv.reset(), dummy.reset())]
        for a in actions:
            a = spaces.tree_map(lambda x: x[:, None], a)  # (E, 1, ...) leaves
            results.append((venv.step(a), dummy.step(a)))
    assert any(d.done.any() for _, d in results)
    for t, (r, d) in enumerate(results):
        assert r.reward.dtype == np.float64
        np.testing.assert_array_equal(r.reward, d.reward)
        for name in ("obs", "state", "final_obs", "final_state"):
            for leaf_r, leaf_d in zip(spaces.tree_leaves(getattr(r, name)), spaces.tree_leaves(getattr(d, name))):
                np.testing.assert_array_equal(leaf_r, leaf_d, err_msg=f"{name} at step {t}")
                assert leaf_r.dtype == leaf_d.dtype


def test_envs_on_a_device_are_refused_naming_dummyvecenv():
    """VMAS with device="cuda:0" (no CUDA needed: the actors refuse before building the envs' engine)."""
    pytest.importorskip("vmas")
    from marl_vec.envs.registry import make_env_fn
    from marl_vec.vec.device_arrays import HostOnlyError

    fn = make_env_fn("vmas", "balance", {"max_steps": 5, "device": "cuda:0"})
    with pytest.raises(HostOnlyError, match=r"^RayVecEnv keeps results in host memory, but the envs \(vmas/balance\) "
                                            r"compute on device 'cuda:0'; use DummyVecEnv\(array_backend='torch'\)"):
        RayVecEnv([fn] * 2, ray_config={"num_workers": 1})

"""The Tianshou face keeps the parts of Tianshou's vector-env contract that its own
test suite (test/base/test_env.py, not shipped in its sdist) checks, each against
Tianshou's DummyVectorEnv or SubprocVectorEnv over the same envs:

- ``set_env_attr`` of a new attribute reaches the env itself (``env.unwrapped``);
- rewards come in the dtype the envs' own values give (Python ints: int64);
- ``reset(env_id, options=...)`` hands the options to each env's reset;
- a ``set_env_attr`` between an episode's end and ``reset(env_id)`` reaches the next episode;
- ``timeout`` with ``wait_num``: a step returns the envs ready by then;
- Dict observations, as Tianshou stacks them (one dict per env) and its Collector stores them.

Runs in .venv-tianshou (scripts/install/install_tianshou_venv.sh).
"""

from __future__ import annotations

import time

import gymnasium as gym
import numpy as np
import pytest

import marl_vec as mv

pytest.importorskip("tianshou", reason="tianshou runs in its own venv: bash scripts/install/install_tianshou_venv.sh")

import tianshou as ts  # noqa: E402
from tianshou.algorithm.algorithm_base import Policy  # noqa: E402
from tianshou.data import Batch, CollectStats  # noqa: E402
from tianshou.env import DummyVectorEnv, SubprocVectorEnv  # noqa: E402

from marl_vec.compat.tianshou import TianshouVectorEnv  # noqa: E402


class Walk(gym.Env):
    """Walk right to ``goal``. Reward: ``kind(at the goal)`` plus ``bonus`` where set (a new
    attribute); ``options["start"]`` (else the attribute ``start``) is where an episode starts."""

    def __init__(self, goal: int = 3, kind: type = int, sleep: float = 0.0, tree: bool = False,
                 obs_dtype: type = np.float32):
        self.goal, self.kind, self.sleep, self.tree, self.obs_dtype = goal, kind, sleep, tree, obs_dtype
        self.start = 0
        self.action_space = gym.spaces.Discrete(2)
        box = gym.spaces.Box(0, 100, (2,), np.float32)
        self.observation_space = gym.spaces.Dict({
            "pos": box, "extra": gym.spaces.Dict({"noise": gym.spaces.Box(0, 1, (3,), np.float64),
                                                  "pair": gym.spaces.Tuple((gym.spaces.Discrete(4), box))}),
        }) if tree else box

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.pos = (options or {}).get("start", self.start)
        return self._obs(), {"start": self.pos}

    def step(self, action):
        if self.sleep:
            time.sleep(self.sleep)
        self.pos = self.pos + 1 if action == 1 else max(self.pos - 1, 0)
        done = self.pos >= self.goal
        reward = self.kind(done)
        if hasattr(self, "bonus"):
            reward += self.bonus
        return self._obs(), reward, done, False, {"pos": self.pos}

    def _obs(self):
        pos = np.full(2, self.pos, self.obs_dtype)  # (an int array under the float32 Box too)
        if not self.tree:
            return pos
        return {"pos": pos, "extra": {"noise": self.np_random.random(3), "pair": (self.pos % 4, pos * 2)}}


def walk(**kwargs):
    """A Walk behind wrappers, as gym.make gives envs: the attribute rules must see through them."""
    return lambda: gym.wrappers.OrderEnforcing(gym.wrappers.TimeLimit(Walk(**kwargs), 50))


def both(n: int, backend: str = "dummy", kw_of=lambda i: {}, fns=None, autoreset="same_step", **face_kwargs):
    fns = fns or [walk(**kw_of(i)) for i in range(n)]
    extra = {"num_workers": min(n, 4)} if backend == "subproc" else {}
    venv = mv.make_vec(fns, backend=backend, env_seed=None, autoreset=autoreset, **extra)
    ours = TianshouVectorEnv(venv, **face_kwargs)
    theirs = (SubprocVectorEnv if backend == "subproc" else DummyVectorEnv)(fns, **face_kwargs)
    return ours, theirs


def assert_same_step(got, want, what: str) -> None:
    (o, r, t, u, i), (o2, r2, t2, u2, i2) = got, want
    for name, a, b in (("obs", o, o2), ("rew", r, r2), ("terminated", t, t2), ("truncated", u, u2)):
        np.testing.assert_array_equal(a, b, err_msg=f"{what}: {name}")
        assert a.dtype == b.dtype, f"{what}: {name} dtype {a.dtype} != {b.dtype}"
    assert [x["env_id"] for x in i] == [x["env_id"] for x in i2], what


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
def test_set_env_attr_of_a_new_attribute_reaches_the_env_itself(backend):
    ours, theirs = both(3, backend)
    for envs in (ours, theirs):
        envs.seed(0)
        envs.reset()
        envs.set_env_attr("bonus", 5, id=[1, 2])
    # (Tianshou's SubprocVectorEnv reads attributes on the outermost wrapper: None here.)
    assert ours.get_env_attr("bonus", [1, 2]) == [5, 5]
    assert_same_step(ours.step([1, 1, 1]), theirs.step([1, 1, 1]), "after set_env_attr")
    _, rew, *_ = ours.step([0, 0, 0])
    assert rew.tolist() == [0, 5, 5]  # the env's own step adds it
    ours.close(), theirs.close()


@pytest.mark.parametrize("kind, dtype", [(int, np.int64), (float, np.float64), (np.float32, np.float32),
                                         (bool, np.bool_)])
@pytest.mark.parametrize("backend", ["dummy", "subproc"])
def test_rewards_come_in_the_dtype_of_the_envs_own_values(backend, kind, dtype):
    ours, theirs = both(3, backend, kw_of=lambda i: {"kind": kind, "goal": 2 + i})
    for envs in (ours, theirs):
        envs.seed(3)
    rng = np.random.default_rng(0)
    for t in range(30):
        ids = sorted(rng.choice(3, size=int(rng.integers(1, 4)), replace=False).tolist())
        act = rng.integers(0, 2, size=len(ids))
        got, want = ours.step(act, ids), theirs.step(act, ids)
        assert_same_step(got, want, f"step {t} ids {ids}")
        assert got[1].dtype == dtype
        ended = [i for i, x, y in zip(ids, want[2], want[3]) if x or y]
        if ended:
            np.testing.assert_array_equal(ours.reset(ended)[0], theirs.reset(ended)[0])
    ours.close(), theirs.close()


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
def test_observations_come_in_the_dtype_the_envs_return(backend):
    ours, theirs = both(2, backend, kw_of=lambda i: {"obs_dtype": np.int64})
    for envs in (ours, theirs):
        envs.seed(0)
    (obs, _), (obs2, _) = ours.reset(), theirs.reset()
    assert obs.dtype == obs2.dtype == np.int64  # under a float32 Box: Tianshou stacks the env's arrays
    for t in range(6):
        got, want = ours.step([1, 1], [1, 0]), theirs.step([1, 1], [1, 0])
        assert_same_step(got, want, f"step {t}")
        if want[2].any():
            np.testing.assert_array_equal(ours.reset([0, 1])[0], theirs.reset([0, 1])[0])
    ours.close(), theirs.close()


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
def test_reset_options_reach_each_envs_reset(backend):
    ours, theirs = both(3, backend)
    for envs in (ours, theirs):
        envs.seed(1)
    for call in ({"env_id": [2, 0], "options": {"start": 2}}, {"options": {"start": 1}},
                 {"env_id": 1, "options": {"start": 5}, "seed": 4}):
        (obs, info), (obs2, info2) = ours.reset(**call), theirs.reset(**call)
        np.testing.assert_array_equal(obs, obs2, err_msg=str(call))
        assert [i["start"] for i in info] == [i["start"] for i in info2], call
        assert_same_step(ours.step([1, 1, 1]), theirs.step([1, 1, 1]), f"step after {call}")
    (obs, _), (obs2, _) = ours.reset(), theirs.reset()  # the options were for one reset only
    np.testing.assert_array_equal(obs, obs2)
    assert obs[:, 0].tolist() == [0, 0, 0]
    ours.close(), theirs.close()


def test_reset_options_are_refused_where_the_envs_take_none():
    envs = TianshouVectorEnv(mv.make("mpe/simple_spread", num_envs=2, env_seed=None), agents="axis")
    envs.reset()
    with pytest.raises(TypeError, match=r"take no reset options \(marl_vec passes them to gymnasium envs only\)"):
        envs.reset(options={"start": 1})
    with pytest.raises(TypeError, match=r"reset\(\) got flavour; the envs' reset takes seed and options"):
        envs.reset(flavour=1)
    envs.close()


@pytest.mark.parametrize("autoreset", ["same_step", "disabled"])
@pytest.mark.parametrize("backend", ["dummy", "subproc"])
def test_set_env_attr_after_an_episode_ends_reaches_the_next_episode(backend, autoreset):
    ours, theirs = both(2, backend, autoreset=autoreset)
    for envs in (ours, theirs):
        envs.seed(0)
        envs.reset()
        for _ in range(3):  # env 0 reaches its goal
            _, _, term, _, _ = envs.step([1], [0])
        assert term[0]
        envs.set_env_attr("start", 7, id=0)
    (obs, info), (obs2, info2) = ours.reset([0]), theirs.reset([0])
    np.testing.assert_array_equal(obs, obs2)
    assert obs.tolist() == [[7, 7]] and info[0]["start"] == info2[0]["start"] == 7
    assert_same_step(ours.step([0, 1]), theirs.step([0, 1]), "the next episode")
    ours.close(), theirs.close()


def cartpole():
    return gym.make("CartPole-v1", max_episode_steps=20)


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
def test_with_autoreset_disabled_resets_happen_at_reset_env_id_as_in_tianshou(backend):
    """autoreset='disabled': an ended env is reset by reset(env_id), then: its random start
    state, and what set_env_attr changed in between, are exactly Tianshou's. (With
    same_step the VecEnv began the next episode at the end: a set_env_attr makes the face
    reset again, so the env's random stream is one reset further than Tianshou's.)"""
    n = 4
    ours, theirs = both(n, backend, fns=[cartpole] * n, autoreset="disabled")
    assert ours.seed(3) == [[3], [4], [5], [6]]
    theirs.seed(3)  # (its SubprocVectorEnv returns None for envs without a seed method)
    rng = np.random.default_rng(4)
    ended: set[int] = set()
    for t in range(150):
        live = [i for i in range(n) if i not in ended]
        ids = sorted(rng.choice(live, size=int(rng.integers(1, len(live) + 1)), replace=False).tolist())
        act = rng.integers(0, 2, size=len(ids))
        got, want = ours.step(act, ids), theirs.step(act, ids)
        assert_same_step(got, want, f"step {t} ids {ids}")
        ended |= {i for i, x, y in zip(ids, want[2], want[3]) if x or y}
        if ended:
            with pytest.raises(RuntimeError, match="finished their episode"):
                ours.step([0] * len(ended), sorted(ended))
        if ended and (rng.random() < 0.5 or len(ended) == n):
            which = sorted(ended)
            if rng.random() < 0.5:
                for envs in (ours, theirs):
                    envs.set_env_attr("length", 0.25, id=which)  # CartPole's pole, between end and reset
            (obs, _), (obs2, _) = ours.reset(which), theirs.reset(which)
            np.testing.assert_array_equal(obs, obs2, err_msg=f"reset {which} at {t}")
            ended.clear()
    ours.close(), theirs.close()


def test_timeout_returns_the_envs_ready_by_then():
    # Envs 0 and 1 take 20 ms a step, envs 2 and 3 two seconds: with wait_num=3 and a
    # timeout of 0.3 s a step returns the two fast ones, as Tianshou's SubprocVectorEnv does.
    ours, theirs = both(4, "subproc", kw_of=lambda i: {"sleep": 0.02 if i < 2 else 2.0}, wait_num=3, timeout=0.3)
    for envs in (ours, theirs):
        assert envs.is_async
        envs.seed(0)
        envs.reset()
        began = time.monotonic()
        *_, info = envs.step([1, 1, 1, 1])
        assert sorted(i["env_id"] for i in info) == [0, 1]
        assert time.monotonic() - began < 1.5
        assert sorted(envs.waiting_id) == [2, 3]
        # The slow ones, once ready (those of the first window of 0.3 s in which one is).
        late = [i["env_id"] for i in envs.step(None)[-1]]
        if len(late) == 1:
            late += [i["env_id"] for i in envs.step(None)[-1]]
        assert sorted(late) == [2, 3] and not envs.waiting_id
    ours.close(), theirs.close()
    with pytest.raises(ValueError, match="timeout is -1, it should be a positive number of seconds"):
        TianshouVectorEnv(mv.DummyVecEnv([walk()], env_seed=None), timeout=-1)


def assert_same_tree(a, b, what: str) -> None:
    if isinstance(b, dict):
        assert list(a) == list(b), what
        for key in b:
            assert_same_tree(a[key], b[key], f"{what}.{key}")
    elif isinstance(b, tuple):
        assert isinstance(a, tuple) and len(a) == len(b), what
        for k, (x, y) in enumerate(zip(a, b)):
            assert_same_tree(x, y, f"{what}[{k}]")
    else:
        np.testing.assert_array_equal(a, b, err_msg=what)


class RandomPolicy(Policy):
    def __init__(self, space):
        super().__init__(action_space=space, observation_space=None, action_scaling=False, action_bound_method=None)

    def forward(self, batch, state=None, **kwargs):
        return Batch(act=np.array([self.action_space.sample() for _ in range(len(batch.obs))]), state=state)


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
def test_dict_observations_come_as_tianshou_gives_them(backend):
    ours, theirs = both(3, backend, kw_of=lambda i: {"tree": True, "goal": 2 + i})
    for envs in (ours, theirs):
        envs.seed(5)
    (obs, _), (obs2, _) = ours.reset(), theirs.reset()
    assert obs.dtype == obs2.dtype == object and obs.shape == obs2.shape == (3,)
    for k in range(3):
        assert_same_tree(obs[k], obs2[k], f"reset env {k}")
    rng = np.random.default_rng(2)
    for t in range(20):
        act = rng.integers(0, 2, size=3)
        got, want = ours.step(act), theirs.step(act)
        for k in range(3):
            assert_same_tree(got[0][k], want[0][k], f"step {t} env {k}")
        ended = np.flatnonzero(want[2] | want[3])
        if len(ended):
            for k, (x, y) in enumerate(zip(ours.reset(ended)[0], theirs.reset(ended)[0])):
                assert_same_tree(x, y, f"reset {ended} at {t}")
    # Tianshou's Collector stores them as a Batch, the same from both.
    buffers = []
    for envs in (ours, theirs):
        envs.seed(9)
        space = envs.action_space[0]
        space.seed(0)
        collector = ts.data.Collector[CollectStats](RandomPolicy(space), envs, ts.data.VectorReplayBuffer(60, 3))
        collector.reset()
        collector.collect(n_step=30)
        buffers.append(collector.buffer)
    got, want = (buf[np.arange(len(buf))] for buf in buffers)
    assert isinstance(got.obs, Batch) and set(got.obs.keys()) == {"pos", "extra"}
    for key in ("pos",):
        np.testing.assert_array_equal(got.obs[key], want.obs[key])
    np.testing.assert_array_equal(got.obs.extra.noise, want.obs.extra.noise)
    np.testing.assert_array_equal(got.obs_next.pos, want.obs_next.pos)
    np.testing.assert_array_equal(got.rew, want.rew)
    ours.close(), theirs.close()


def test_tuple_observations_are_refused_as_tianshou_refuses_them():
    class TupleWalk(Walk):
        def __init__(self):
            super().__init__()
            self.observation_space = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Discrete(3)))

    with pytest.raises(TypeError, match="Tuple observation space is not supported, as in Tianshou"):
        TianshouVectorEnv(mv.DummyVecEnv([TupleWalk], env_seed=None))

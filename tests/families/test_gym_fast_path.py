"""gymnasium envs made by ``gym.make`` step below their check-only wrappers, with the same results.

marl_vec/envs/gym/wrapper_chain.py decides which wrapper chains qualify (only ``OrderEnforcing``,
``PassiveEnvChecker`` and at most one ``TimeLimit``, exact types); the group stepper in
marl_vec/envs/gym/group_stepper.py then steps and resets the raw env once the checkers are past their
checks, and does the TimeLimit's counting on the wrapper itself. Here: which chains take
that path and which do not, and that every field of every result equals the generic path's
(the whole chain, every step) and a plain gymnasium loop's at the same seeds and actions,
across terminations and TimeLimit truncations, in each autoreset mode, on DummyVecEnv,
its async pool and SubprocVecEnv; and that ``call``/``get_attr``/``set_attr`` see and
change the wrappers as in the plain loop.
"""

from __future__ import annotations

import sys
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.envs.classic_control import CartPoleEnv
from gymnasium.envs.registration import EnvSpec

import marl_vec as mv
from marl_vec.envs.gym import group_stepper as gym_stepper
from marl_vec.envs.gym.wrapper_chain import fast_chain
from tests.core.test_object_spaces import as_tree

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")

T = 90
N = 4


class Probe(gym.Env):
    """Dict observations, Box actions, random terminations; counts the steps that came
    through gymnasium's wrappers and those called from below them."""

    observation_space = gym.spaces.Dict({"pos": gym.spaces.Box(-10, 10, (3,), np.float32),
                                         "phase": gym.spaces.Discrete(4)})
    action_space = gym.spaces.Box(-1, 1, (3,), np.float32)

    def __init__(self, fail_at: int = -1):
        self.through = self.below = 0
        self.fail_at = fail_at

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.pos = self.np_random.uniform(-1, 1, 3).astype(np.float32)
        self.t = 0
        return self._obs(), {"start": float(self.pos[0])}

    def _obs(self) -> dict[str, Any]:
        return {"pos": self.pos.copy(), "phase": self.t % 4}

    def step(self, action):
        if sys._getframe(1).f_globals.get("__name__", "").startswith("gymnasium"):
            self.through += 1
        else:
            self.below += 1
        if self.below + self.through == self.fail_at:
            raise RuntimeError("probe failed")
        self.pos = np.clip(self.pos + action, -10, 10).astype(np.float32)
        self.t += 1
        terminated = bool(self.np_random.random() < 0.08)
        return self._obs(), float(self.pos.sum()), terminated, False, {"t": self.t}


def make_probe(**kwargs: Any) -> gym.Env:
    return gym.make(EnvSpec("MarlVecProbe-v0", entry_point=Probe, max_episode_steps=9), **kwargs)


class FlipAction(gym.ActionWrapper):
    """A user's wrapper that changes every action: the chain must be stepped whole."""

    def action(self, action):
        return 1 - action


# (name, env_fn, action kind): Discrete n or a Box shape.
ENVS = {
    "cartpole": (lambda: gym.make("CartPole-v1", max_episode_steps=20), 2),
    "cartpole_no_checker": (lambda: gym.make("CartPole-v1", max_episode_steps=20, disable_env_checker=True), 2),
    "cartpole_time_limit_only": (lambda: gym.wrappers.TimeLimit(CartPoleEnv(), 20), 2),
    "mountaincar": (lambda: gym.make("MountainCar-v0", max_episode_steps=15), 3),
    "acrobot": (lambda: gym.make("Acrobot-v1", max_episode_steps=10), 3),
    "pendulum": (lambda: gym.make("Pendulum-v1", max_episode_steps=12), (1,)),
    "blackjack": (lambda: gym.make("Blackjack-v1"), 2),  # no TimeLimit; Tuple observations
    "probe": (make_probe, (3,)),
}
FAST = set(ENVS)
SLOW = {
    "flip_action": (lambda: FlipAction(gym.make("CartPole-v1", max_episode_steps=20)), 2),
    "clip_action": (lambda: gym.wrappers.ClipAction(gym.make("Pendulum-v1", max_episode_steps=12)), (1,)),
    "transform_reward": (lambda: gym.wrappers.TransformReward(gym.make("CartPole-v1", max_episode_steps=20),
                                                              lambda r: 2 * r), 2),
    "two_time_limits": (lambda: gym.wrappers.TimeLimit(gym.make("CartPole-v1", max_episode_steps=20), 7), 2),
}
ALL = {**ENVS, **SLOW}


def actions_for(kind: Any, steps: int = T, n: int = N, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if isinstance(kind, int):
        return rng.integers(0, kind, size=(steps, n, 1))
    return rng.uniform(-1, 1, size=(steps, n, 1, *kind)).astype(np.float32)


def generic(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every chain stepped whole in this process, as before the fast path."""
    monkeypatch.setattr(gym_stepper, "fast_chain", lambda env: None)


def run(venv: mv.VecEnv, actions: np.ndarray, seed: int = 5) -> list[mv.StepResult]:
    with venv:
        results = [venv.reset(seed=seed)]
        results += [venv.step(a) for a in actions]
    return results


def assert_same(a: Any, b: Any, where: str) -> None:
    """Equal values of equal types, arrays of equal dtypes, dicts and sequences element by element."""
    assert type(a) is type(b), f"{where}: {type(a)} != {type(b)}"
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, f"{where}: {a.dtype}{a.shape} != {b.dtype}{b.shape}"
        np.testing.assert_array_equal(a, b, err_msg=where)
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), f"{where}: keys {sorted(a)} != {sorted(b)}"
        for key in a:
            assert_same(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for k, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{k}]")
    elif isinstance(a, float) and np.isnan(a):
        assert np.isnan(b), where
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def assert_same_results(ours: list[mv.StepResult], theirs: list[mv.StepResult]) -> None:
    assert len(ours) == len(theirs)
    for t, (r, s) in enumerate(zip(ours, theirs)):
        for name, value in vars(r).items():
            assert_same(value, getattr(s, name), f"step {t} {name}")


def _check_obs(ours: Any, native: Any, where: str) -> None:
    if isinstance(native, dict):
        for key in native:
            _check_obs(ours[key], native[key], f"{where}[{key}]")
    elif isinstance(native, tuple):
        for k, value in enumerate(native):
            _check_obs(ours[k], value, f"{where}[{k}]")
    else:
        np.testing.assert_array_equal(ours, native, err_msg=where)


def assert_equals_plain_loop(results: list[mv.StepResult], env_fn: Any, actions: np.ndarray, seed: int = 5,
                             elapsed: list[list[Any]] | None = None) -> dict[str, int]:
    """Every field against a plain loop over the native envs (same_step autoreset); counts
    the endings by kind. ``elapsed``: the TimeLimit counts marl_vec's wrappers showed after
    each step, checked against the loop's."""
    envs = [env_fn() for _ in range(N)]
    endings = {"terminated": 0, "truncated": 0}
    for i, env in enumerate(envs):
        obs, info = env.reset(seed=seed + i)
        _check_obs(as_tree(results[0].obs, i), obs, f"reset env {i}")
        assert results[0].infos[i] == info
    returns, lengths = [0.0] * N, [0] * N
    for t, a in enumerate(actions, start=1):
        r = results[t]
        for i, env in enumerate(envs):
            obs, reward, terminated, truncated, info = env.step(a[i, 0])
            where = f"step {t} env {i}"
            returns[i] += reward
            lengths[i] += 1
            assert r.reward[i, 0] == reward and r.reward.dtype == np.float64, where
            assert (r.terminated[i, 0], r.truncated[i, 0], r.done[i]) == (terminated, truncated,
                                                                          terminated or truncated), where
            ours = dict(r.infos[i])
            if terminated or truncated:
                endings["terminated" if terminated else "truncated"] += 1
                _check_obs(as_tree(r.final_obs, i), obs, where + " final_obs")
                episode = ours.pop("episode")
                assert episode["length"] == lengths[i] and episode["return"] == pytest.approx(returns[i], abs=1e-9)
                returns[i], lengths[i] = 0.0, 0
                obs, reset_info = env.reset()
                assert ours.pop("reset_info", {}) == reset_info, where
            assert ours == info, where
            _check_obs(as_tree(r.obs, i), obs, where)
            if elapsed is not None and elapsed[t - 1][i] is not None:  # after the autoreset, as ours
                assert elapsed[t - 1][i] == env.get_wrapper_attr("_elapsed_steps"), where
    for env in envs:
        env.close()
    return endings


# -- which chains step below their wrappers ------------------------------------------------

@pytest.mark.parametrize("name", sorted(ALL))
def test_only_chains_of_check_only_wrappers_and_one_time_limit_step_below_them(name):
    env_fn, kind = ALL[name]
    actions = actions_for(kind, steps=4)
    with mv.DummyVecEnv([env_fn] * N) as venv:
        venv.reset()
        stepper = venv.group._stepper
        assert stepper._below is None  # the checkers' first checks run through the chain
        for a in actions:
            venv.step(a)
        assert (stepper._below is not None) is (name in FAST)
        below = [adapter._reset_below is not None for adapter in venv.group.adapters]
        assert below == [name in FAST] * N


def test_subclasses_and_instance_steps_are_not_taken_for_the_known_wrappers():
    class MyLimit(gym.wrappers.TimeLimit):
        pass

    assert fast_chain(MyLimit(gym.make("CartPole-v1"), 10)) is None
    env = gym.make("CartPole-v1")
    env.env.step = env.env.env.step  # an OrderEnforcing whose step is its instance's
    assert fast_chain(env) is None
    env = gym.make("CartPole-v1")
    env.reset = env.env.reset  # a TimeLimit whose reset is its instance's
    assert fast_chain(env) is None
    assert fast_chain(gym.wrappers.TimeLimit(gym.make("CartPole-v1").unwrapped, 5)) is not None  # no checker
    assert fast_chain(gym.make("CartPole-v1").unwrapped) is None  # no wrapper: nothing to pass
    chain = fast_chain(gym.make("CartPole-v1", disable_env_checker=True))
    assert chain is not None and len(chain.checkers) == 1


# -- same results: the generic path and a plain loop -----------------------------------------

@pytest.mark.parametrize("name", sorted(ALL))
def test_every_field_equals_the_generic_path_and_a_plain_loop(name, monkeypatch):
    env_fn, kind = ALL[name]
    actions = actions_for(kind)
    elapsed: list[list[Any]] = []
    with mv.DummyVecEnv([env_fn] * N) as venv:
        results = [venv.reset(seed=5)]
        for a in actions:
            results.append(venv.step(a))
            elapsed.append([getattr(adapter.env, "_elapsed_steps", None) for adapter in venv.group.adapters])
        assert (venv.group._stepper._below is not None) is (name in FAST)
    endings = assert_equals_plain_loop(results, env_fn, actions, elapsed=elapsed)
    assert endings["terminated"] + endings["truncated"] >= 8, endings
    if name in ("cartpole", "probe"):
        assert endings["terminated"] >= 4 and endings["truncated"] >= 4, endings
    generic(monkeypatch)
    assert_same_results(results, run(mv.DummyVecEnv([env_fn] * N), actions))


@pytest.mark.parametrize("mode", ["same_step", "next_step", "one_episode", "disabled"])
@pytest.mark.parametrize("name", ["cartpole", "probe"])
def test_each_autoreset_mode_equals_the_generic_path(name, mode, monkeypatch):
    env_fn, kind = ENVS[name]
    actions = actions_for(kind, steps=40)

    def play() -> tuple[list[mv.StepResult], list[Any]]:
        results = []
        with mv.DummyVecEnv([env_fn] * N, autoreset=mode, copy=False) as venv:
            results.append(_copy(venv.reset(seed=2)))
            for a in actions:
                if mode == "disabled" and venv.buffers.done.any():  # reset the finished envs by hand
                    results.append(_copy(venv.reset(env_ids=np.flatnonzero(venv.buffers.done).tolist())))
                results.append(_copy(venv.step(a)))
            counts = [getattr(adapter.env, "_elapsed_steps", None) for adapter in venv.group.adapters]
        return results, counts

    fast = play()
    generic(monkeypatch)
    slow = play()
    assert_same_results(fast[0], slow[0])
    assert fast[1] == slow[1]


def _copy(result: mv.StepResult) -> mv.StepResult:
    """A copy=False result, kept: its arrays are the buffers, which the next step overwrites."""
    def keep(value: Any) -> Any:
        if isinstance(value, np.ndarray):
            return value.copy()
        if isinstance(value, dict):
            return {k: keep(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(keep(v) for v in value)
        return value
    return mv.StepResult(**{name: keep(value) for name, value in vars(result).items()})


def test_the_async_pool_equals_the_generic_path(monkeypatch):
    env_fn, kind = ENVS["probe"]
    actions = actions_for(kind, steps=60)

    def play() -> list[Any]:
        out = []
        with mv.DummyVecEnv([env_fn] * N, batch_size=2) as venv:
            venv.reset(seed=1)
            for a in actions:
                r = venv.recv()
                out.append((r.env_ids.copy(), r.obs["pos"].copy(), r.reward.copy(), r.done.copy(),
                            [dict(info) for info in r.infos]))
                venv.send(a[:2], r.env_ids)
        return out

    fast = play()
    generic(monkeypatch)
    assert_same(fast, play(), "pool")


def test_subproc_steps_below_the_wrappers_and_equals_a_plain_loop():
    env_fn, kind = ENVS["probe"]
    actions = actions_for(kind)
    with mv.SubprocVecEnv([env_fn] * N, num_workers=2) as venv:
        results = [venv.reset(seed=5)] + [venv.step(a) for a in actions]
        through, below = venv.get_attr("through"), venv.get_attr("below")
    # The checker's first check and its data-reuse check went through the chain; no other step did.
    assert through == [2] * N and all(b == T - 2 for b in below), (through, below)
    assert_equals_plain_loop(results, env_fn, actions)
    assert_same_results(results, run(mv.DummyVecEnv([env_fn] * N), actions))


# -- the wrappers stay what the user sees ---------------------------------------------------

def test_get_attr_and_set_attr_see_and_change_the_time_limit_as_in_a_plain_loop():
    env_fn, kind = ENVS["probe"]
    actions = actions_for(kind, steps=40)
    plain = [env_fn() for _ in range(N)]
    for i, env in enumerate(plain):
        env.reset(seed=i)
    with mv.DummyVecEnv([env_fn] * N, env_seed=0) as venv:
        venv.reset()
        for t, a in enumerate(actions):
            if t == 10:  # a shorter limit, set on the wrapper
                venv.set_attr("_max_episode_steps", 3)
                for env in plain:
                    env.set_wrapper_attr("_max_episode_steps", 3)
            r = venv.step(a)
            for i, env in enumerate(plain):
                obs, reward, terminated, truncated, _ = env.step(a[i, 0])
                assert (r.terminated[i, 0], r.truncated[i, 0]) == (terminated, truncated), (t, i)
                np.testing.assert_array_equal(r.final_obs["pos"][i, 0] if r.done[i] else r.obs["pos"][i, 0],
                                              obs["pos"])
                if terminated or truncated:
                    env.reset()
            if t % 7 == 0:  # reading it: the next step goes through the chains, then below again
                assert venv.get_attr("_elapsed_steps") == [env.get_wrapper_attr("_elapsed_steps") for env in plain]
                assert venv.group._stepper._touched[0]
        assert venv.get_attr("_max_episode_steps") == [3] * N
        through = venv.get_attr("through")
    # Steps through the chain: the checker's two (t=0, 1), the step after each get_attr
    # (t=1, 8, 15, 22, 29, 36) and the one after the set_attr (t=10).
    assert through == [8] * N, through
    for env in plain:
        env.close()


def test_an_env_that_raises_below_the_wrappers_is_named_or_restarted(monkeypatch):
    def failing() -> gym.Env:
        return make_probe(fail_at=6)

    actions = actions_for((3,), steps=12)
    with mv.DummyVecEnv([env_fn for env_fn in [make_probe, failing, make_probe, make_probe]]) as venv:
        venv.reset(seed=0)
        with pytest.raises(RuntimeError, match="probe failed") as info:
            for a in actions:
                venv.step(a)
        assert info.value.marl_vec_env_index == 1
    fns = [make_probe, failing, make_probe, make_probe]

    def play() -> list[mv.StepResult]:
        results = run(mv.DummyVecEnv(fns, restart_on_error=2), actions)
        for r in results:  # the traceback's frames differ by path; its last line does not
            for info in r.infos:
                for d in (info, info.get("reset_info", {})):
                    if "error" in d:
                        d["error"] = d["error"].strip().splitlines()[-1]
        return results

    fast = play()
    assert any(info.get("restarted") for r in fast for info in r.infos)
    generic(monkeypatch)
    assert_same_results(fast, play())

"""GymVectorEnv behaves as gymnasium's SyncVectorEnv, one concern at a time.

Every test runs the face and ``SyncVectorEnv`` on the same env_fns, seeds and
actions and compares what a gymnasium user sees: infos layout, seeding of the
spaces, reset seeds, render mode, attribute access through wrappers, the
exceptions of bad input and the types of final observations.
"""

from __future__ import annotations

from typing import Any, Callable

import re

import gymnasium as gym

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode as GymAutoreset
from gymnasium.wrappers import RecordEpisodeStatistics

import marl_vec as mv
from marl_vec.compat import GymVectorEnv
from tests.helpers.backends import BACKENDS, make_backend, ray_cluster  # noqa: F401

MODES = ["same_step", "next_step", "disabled"]


def face_and_sync(fns: list[Callable[[], gym.Env]], mode: str = "next_step", backend: str = "dummy",
                  **face_kwargs: Any) -> tuple[GymVectorEnv, gym.vector.SyncVectorEnv]:
    """The face (unseeded VecEnv, as SyncVectorEnv) and SyncVectorEnv over the same env_fns."""
    venv_cls = mv.DummyVecEnv if backend == "dummy" else mv.SubprocVecEnv
    ours = GymVectorEnv(venv_cls(fns, env_seed=None, autoreset=mode), **face_kwargs)
    theirs = gym.vector.SyncVectorEnv(fns, autoreset_mode=GymAutoreset[mode.upper()])
    return ours, theirs


def assert_infos_equal(ours: Any, theirs: Any, where: str = "infos", skip: tuple[str, ...] = ()) -> None:
    """Equal keys, values, dtypes and element types (``skip``: keys whose values differ by nature, e.g. times)."""
    if isinstance(theirs, dict):
        assert isinstance(ours, dict) and set(ours) == set(theirs), f"{where}: {sorted(ours)} != {sorted(theirs)}"
        for key in theirs:
            if key not in skip:
                assert_infos_equal(ours[key], theirs[key], f"{where}[{key!r}]", skip)
    elif isinstance(theirs, np.ndarray) and theirs.dtype == object:
        assert ours.shape == theirs.shape, where
        for a, b in zip(ours, theirs):
            assert type(a) is type(b), f"{where}: element type {type(a)} != {type(b)}"
            if b is not None:
                np.testing.assert_array_equal(a, b, err_msg=where)
    else:
        np.testing.assert_array_equal(ours, theirs, err_msg=where)
        assert np.asarray(ours).dtype == np.asarray(theirs).dtype, f"{where} dtype"


def run_both(ours, theirs, actions: np.ndarray, seed: Any = 0, skip: tuple[str, ...] = ()) -> list[dict]:
    """Reset and step both with ``actions``; assert equal results; return the face's infos."""
    (obs_a, info_a), (obs_b, info_b) = ours.reset(seed=seed), theirs.reset(seed=seed)
    np.testing.assert_array_equal(obs_a, obs_b)
    assert_infos_equal(info_a, info_b, skip=skip)
    infos = []
    for a in actions:
        out_a, out_b = ours.step(a), theirs.step(a)
        for x, y, name in zip(out_a[:4], out_b[:4], ("obs", "reward", "terminated", "truncated")):
            # Rewards: SyncVectorEnv's float64 in the VecEnv's dtype (float32 until issue 12 bug 6 lands).
            np.testing.assert_array_equal(x, y.astype(x.dtype) if name == "reward" else y, err_msg=name)
            assert x.dtype == y.dtype or name == "reward", name
        assert_infos_equal(out_a[4], out_b[4], skip=skip)
        infos.append(out_a[4])
    return infos


def cartpole(max_episode_steps: int = 9, **kwargs: Any) -> Callable[[], gym.Env]:
    return lambda: gym.make("CartPole-v1", max_episode_steps=max_episode_steps, **kwargs)


def with_episode_statistics() -> gym.Env:
    return RecordEpisodeStatistics(gym.make("CartPole-v1", max_episode_steps=7))


ACTIONS = np.random.default_rng(0).integers(0, 2, size=(30, 3))


# -- infos layout -------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES[:2])
def test_infos_are_syncs_without_additions(mode):
    ours, theirs = face_and_sync([cartpole(), cartpole(12), cartpole()], mode)
    infos = run_both(ours, theirs, ACTIONS)
    if mode == "same_step":  # CartPole's infos are empty: only the final_* keys, where episodes ended
        ended = [i for i in infos if i]
        assert ended and all(set(i) == {"final_obs", "_final_obs", "final_info", "_final_info"} for i in ended)
    else:
        assert not any(infos)
    ours.close(), theirs.close()


@pytest.mark.parametrize("mode", MODES[:2])
def test_record_episode_statistics_inside_the_env_reaches_the_user(mode):
    ours, theirs = face_and_sync([with_episode_statistics] * 3, mode)
    # "t" is wall-clock time: present on both sides, equal only by chance.
    infos = run_both(ours, theirs, ACTIONS[:16], skip=("t",))
    episode = [i["final_info"] if mode == "same_step" else i for i in infos if i][0]["episode"]
    assert set(episode) == {"r", "l", "t", "_r", "_l", "_t"} and episode["l"].tolist() == [7, 7, 7]
    np.testing.assert_array_equal(episode["r"], [7.0, 7.0, 7.0])
    ours.close(), theirs.close()


def test_episode_info_option_adds_the_summary_and_keeps_the_envs_own():
    fns = [cartpole(5), with_episode_statistics]
    ours = GymVectorEnv(mv.DummyVecEnv(fns, env_seed=None, autoreset="next_step"), episode_info=True)
    ours.reset(seed=0)
    ones = np.ones(2, dtype=np.int64)
    for _ in range(4):
        assert ours.step(ones)[4] == {}
    infos = ours.step(ones)[4]  # env 0 ends (5 steps), env 1 not yet
    assert infos["_episode"].tolist() == [True, False] and infos["episode"]["l"][0] == 5
    assert infos["episode"]["r"][0] == 5.0 and set(infos["episode"]) == {"r", "l", "_r", "_l"}
    ours.step(ones)  # env 0 resets
    infos = ours.step(ones)[4]  # env 1 ends (7 steps): its RecordEpisodeStatistics' own, with "t"
    assert infos["_episode"].tolist() == [False, True]
    assert set(infos["episode"]) == {"r", "l", "t", "_r", "_l", "_t"} and infos["episode"]["l"][1] == 7
    ours.close()


def test_the_vec_env_keeps_the_envs_own_episode_info_beside_its_summary():
    with mv.DummyVecEnv([with_episode_statistics], env_seed=0) as venv:
        venv.reset()
        for _ in range(7):
            r = venv.step(np.ones((1, 1), dtype=np.int64))
        assert r.done[0] and r.infos[0]["episode"]["length"] == 7
        assert set(r.infos[0]["env_episode"]) == {"r", "l", "t"} and r.infos[0]["env_episode"]["l"] == 7


# -- spaces and their seeding -----------------------------------------------------------


def seeded_action_space(seed: int) -> Callable[[], gym.Env]:
    def make() -> gym.Env:
        env = gym.make("CartPole-v1")
        env.action_space.seed(seed)
        return env
    return make


def test_action_space_is_seeded_from_the_sub_envs_as_sync():
    fns = [seeded_action_space(7), seeded_action_space(8)]
    ours, theirs = face_and_sync(fns)
    assert ours.single_action_space == theirs.single_action_space
    samples = [(ours.action_space.sample(), theirs.action_space.sample()) for _ in range(20)]
    for a, b in samples:
        np.testing.assert_array_equal(a, b)
    run_both(ours, theirs, np.array([a for a, _ in samples]))
    ours.close(), theirs.close()


def test_sub_envs_with_different_box_bounds_are_refused_as_by_sync():
    fns = [lambda: gym.make("Pendulum-v1"), lambda: gym.wrappers.RescaleObservation(gym.make("Pendulum-v1"), -1.0, 1.0)]
    sync_words = ("SyncVectorEnv(..., observation_mode='same') however the sub-environments observation spaces "
                  "are not equivalent.")
    with pytest.raises(RuntimeError, match=re.escape(sync_words)):
        gym.vector.SyncVectorEnv(fns)
    venv = mv.DummyVecEnv(fns)
    with pytest.raises(RuntimeError, match=re.escape(sync_words) + r" single_observation_space=Box\(.*\), "
                                           r"sub-environment 1 observation_space=Box\(-1.0, 1.0, \(3,\), float32\). "
                                           r"If this is intentional, use `observation_mode='different'` instead."):
        GymVectorEnv(venv)
    venv.close()
    # Different action bounds: the VecEnv itself refuses them (one spec per batch), before any face exists,
    # with an error that is both marl_vec's ValueError and gymnasium's RuntimeError.
    fns = [lambda: gym.make("Pendulum-v1"), lambda: gym.wrappers.RescaleAction(gym.make("Pendulum-v1"), -1.0, 1.0)]
    with pytest.raises(RuntimeError, match="Sub-environment action space doesn't make the `single_action_space`"):
        gym.vector.SyncVectorEnv(fns)
    with pytest.raises(ValueError, match="env 1 has action=ContinuousAction.* every env of a batch must have the same spec"):
        mv.DummyVecEnv(fns)
    with pytest.raises(RuntimeError, match="env 1 has action=ContinuousAction"):
        mv.DummyVecEnv(fns)
    # The face's SyncVectorEnv-like constructor says it in gymnasium's words.
    with pytest.raises(RuntimeError, match=re.escape("Sub-environment action space doesn't make the "
                                                     "`single_action_space`, action_space=Box(-1.0, 1.0, (1,), "
                                                     "float32), single_action_space=Box(-2.0, 2.0, (1,), float32) "
                                                     "(sub-environment 1)")):
        GymVectorEnv.from_env_fns(fns)


def test_observation_mode_different_batches_each_envs_space_as_sync():
    fns = [lambda: gym.make("Pendulum-v1"), lambda: gym.wrappers.RescaleObservation(gym.make("Pendulum-v1"), -1.0, 1.0)]
    ours = GymVectorEnv(mv.DummyVecEnv(fns, env_seed=None), observation_mode="different")
    theirs = gym.vector.SyncVectorEnv(fns, observation_mode="different")
    assert ours.observation_space == theirs.observation_space
    assert ours.single_observation_space == theirs.single_observation_space
    ours.close(), theirs.close()


class ShiftedActions(gym.Env):
    """Actions Discrete(3, start=-1); the observation is the last action taken (Box), the reward its square."""

    action_space = gym.spaces.Discrete(3, start=-1)
    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(1, np.float32), {}

    def step(self, action):
        assert self.action_space.contains(action), f"{action!r} invalid"
        return np.array([action], np.float32), float(action) ** 2, False, False, {"action": int(action)}


def test_discrete_actions_with_a_start_are_the_envs_numbering():
    ours, theirs = face_and_sync([ShiftedActions] * 2)
    assert ours.single_action_space == theirs.single_action_space == gym.spaces.Discrete(3, start=-1)
    ours.single_action_space.seed(0), theirs.single_action_space.seed(0)
    run_both(ours, theirs, np.array([[-1, 1], [0, -1], [1, 1]]))
    for envs in (ours, theirs):  # out of range: the env's own check
        # (the env sees a Python int from marl_vec's adapter where SyncVectorEnv passes np.int64)
        with pytest.raises(AssertionError, match="2\\)? invalid"):
            envs.step(np.array([2, 0]))
    ours.close(), theirs.close()


# -- seeds --------------------------------------------------------------------------


def test_np_random_seed_is_a_per_env_tuple():
    ours, theirs = face_and_sync([cartpole()] * 3)
    ours.reset(seed=5), theirs.reset(seed=5)
    assert ours.np_random_seed == theirs.np_random_seed == (5, 6, 7)
    assert [g.bit_generator.state for g in ours.np_random] == [g.bit_generator.state for g in theirs.np_random]
    ours.close(), theirs.close()


@pytest.mark.parametrize("seed", [[0, 1, 0], [3, None, 3], [9, 2, 4]])
def test_reset_takes_one_seed_per_env(seed):
    ours, theirs = face_and_sync([cartpole()] * 3, "same_step")
    run_both(ours, theirs, ACTIONS[:1], seed=7)  # a None seed continues the env's stream
    run_both(ours, theirs, ACTIONS, seed=seed)
    assert ours.np_random_seed == theirs.np_random_seed
    with pytest.raises(ValueError, match="the length must match num_envs=3 but got length=2"):
        ours.reset(seed=[1, 2])
    ours.close(), theirs.close()


def test_reset_mask_errors_are_syncs():
    ours, theirs = face_and_sync([cartpole()] * 2)
    for mask, error in [([True, False], TypeError), (np.array([1, 0]), TypeError),
                        (np.array([True]), ValueError), (np.array([False, False]), ValueError)]:
        for envs in (ours, theirs):
            with pytest.raises(error, match="options\\['reset_mask'\\]"):
                envs.reset(options={"reset_mask": mask})
    ours.close(), theirs.close()


# -- render mode, metadata ----------------------------------------------------------


def test_render_mode_and_metadata_are_the_envs():
    ours, theirs = face_and_sync([cartpole(render_mode="rgb_array")] * 2)
    assert ours.render_mode == theirs.render_mode == "rgb_array"
    assert ours.metadata == theirs.metadata
    run_both(ours, theirs, ACTIONS[:3, :2])
    for a, b in zip(ours.render(), theirs.render()):
        np.testing.assert_array_equal(a, b)
    ours.close(), theirs.close()


# -- call, get_attr, set_attr through wrappers ----------------------------------------


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
def test_set_attr_reaches_the_unwrapped_env(backend):
    ours, theirs = face_and_sync([cartpole(50)] * 2, backend=backend)
    for envs in (ours, theirs):
        assert envs.get_attr("gravity") == (9.8, 9.8)
        envs.set_attr("gravity", [1.0, 30.0])
        assert envs.get_attr("gravity") == (1.0, 30.0)
        assert envs.call("get_wrapper_attr", "gravity") == (1.0, 30.0)
        assert envs.get_attr("spec")[0].id == "CartPole-v1"  # a wrapper's own attribute
    assert [env.unwrapped.gravity for env in theirs.envs] == [1.0, 30.0]
    run_both(ours, theirs, ACTIONS[:, :2])  # the new gravity acts on both
    with pytest.raises(ValueError, match="Got `3` values for 2 environments"):
        ours.set_attr("gravity", [1.0, 2.0, 3.0])
    ours.close(), theirs.close()


# -- validation -----------------------------------------------------------------------


def test_bad_actions_raise_syncs_exceptions():
    ours, theirs = face_and_sync([cartpole()] * 2)
    ours.reset(seed=0), theirs.reset(seed=0)
    for envs in (ours, theirs):
        with pytest.raises(TypeError, match="Unable to iterate over the following elements: 0"):
            envs.step(0)
    # Out of range: passed to the env, whose own check raises (gymnasium does not check).
    for envs in (ours, theirs):
        with pytest.raises(AssertionError, match=r"np.int64\(5\) \(<class 'numpy.int64'>\) invalid"):
            envs.step(np.array([0, 5]))
    ours.close(), theirs.close()


def test_out_of_range_continuous_actions_reach_the_env():
    ours, theirs = face_and_sync([lambda: gym.make("Pendulum-v1", max_episode_steps=5)] * 2)
    actions = np.array([[[3.0], [-7.5]], [[np.inf], [0.5]]] * 4, dtype=np.float32)  # Pendulum clips
    run_both(ours, theirs, actions)
    ours.close(), theirs.close()


# -- final observations ---------------------------------------------------------------


def test_final_obs_elements_have_the_envs_types():
    fns = [lambda: gym.make("FrozenLake-v1", max_episode_steps=4)] * 3  # Discrete observations: Python ints
    ours, theirs = face_and_sync(fns, "same_step")
    infos = run_both(ours, theirs, np.random.default_rng(3).integers(0, 4, size=(20, 3)))
    finals = [x for i in infos if "final_obs" in i for x in i["final_obs"] if x is not None]
    assert finals and all(type(x) is int for x in finals)
    ours.close(), theirs.close()


# -- rewards ----------------------------------------------------------------------------


def test_rewards_are_float64_and_unrounded_as_syncs():
    fns = [lambda: gym.wrappers.TransformReward(gym.make("CartPole-v1"), lambda r: r * 0.1)] * 2
    ours, theirs = face_and_sync(fns)
    ours.reset(seed=0), theirs.reset(seed=0)
    (_, ra, *_), (_, rb, *_) = ours.step(np.ones(2, dtype=np.int64)), theirs.step(np.ones(2, dtype=np.int64))
    assert ra.dtype == rb.dtype == np.float64 and ra.tolist() == rb.tolist() == [0.1, 0.1]
    ours.close(), theirs.close()


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
def test_from_env_fns_takes_sync_vector_envs_arguments(backend):
    fns = [lambda: gym.make("CartPole-v1")] * 3
    for mode in (GymAutoreset.NEXT_STEP, GymAutoreset.SAME_STEP, "SameStep"):
        ours = GymVectorEnv.from_env_fns(fns, copy=False, autoreset_mode=mode, backend=backend)
        theirs = gym.vector.SyncVectorEnv(fns, copy=False, autoreset_mode=mode)
        assert ours.metadata["autoreset_mode"] == theirs.metadata["autoreset_mode"]
        assert ours.venv.copy is False and ours.num_envs == 3
        # Unseeded by default, as gymnasium: reset(seed=...) then gives the same values.
        np.testing.assert_array_equal(ours.reset(seed=5)[0], theirs.reset(seed=5)[0])
        ours.close(), theirs.close()


def test_sub_envs_of_different_kinds_raise_sync_vector_envs_runtime_error():
    fns = [lambda: gym.make("CartPole-v1"), lambda: gym.make("FrozenLake-v1")]
    words = ("SyncVectorEnv(..., observation_mode='same') however the sub-environments observation spaces are not "
             "equivalent.")
    with pytest.raises(RuntimeError, match=re.escape(words)):
        gym.vector.SyncVectorEnv(fns)
    with pytest.raises(RuntimeError, match=re.escape(words) + r" single_observation_space=Box\(.*\), sub-environment "
                                           r"1 observation_space=Discrete\(16\)\..*env 1 has obs_shape=\(\) but env 0 "
                                           r"has obs_shape=\(4,\)"):
        GymVectorEnv.from_env_fns(fns)
    with pytest.raises(RuntimeError, match="observation spaces do not share a common shape and dtype"):
        GymVectorEnv.from_env_fns(fns, observation_mode="different")
    # Built by hand, the VecEnv's own error is a RuntimeError too (and marl_vec's ValueError).
    with pytest.raises(mv.SpecMismatchError, match=r"env 1 has obs_shape=\(\) but env 0 has obs_shape=\(4,\)") as error:
        mv.DummyVecEnv(fns)
    assert isinstance(error.value, RuntimeError) and isinstance(error.value, ValueError)
    assert (error.value.index, error.value.field) == (1, "obs_shape")


@pytest.mark.parametrize("backend", BACKENDS)
def test_envs_with_different_specs_raise_spec_mismatch_on_every_backend(backend, request):
    """Env 1 differs from env 0 within the first worker's block (two workers, two envs each)."""
    fns = [lambda: gym.make("CartPole-v1"), lambda: gym.make("FrozenLake-v1")] + [lambda: gym.make("CartPole-v1")] * 2
    with pytest.raises(mv.SpecMismatchError, match=r"env 1 has obs_shape=\(\) but env 0 has obs_shape=\(4,\)"):
        make_backend(backend, fns, request, env_seed=None)


def test_envs_are_the_sub_envs_of_a_dummy_vec_env():
    fns = [lambda: gym.make("CartPole-v1")] * 2
    ours = GymVectorEnv.from_env_fns(fns, autoreset_mode=GymAutoreset.SAME_STEP)
    assert [type(env.unwrapped).__name__ for env in ours.envs] == ["CartPoleEnv", "CartPoleEnv"]
    assert ours.envs[0] is ours.venv.group.adapters[0].env
    assert "autoreset_mode" not in ours.envs[0].metadata  # the face's metadata is its own copy
    ours.close()
    ours = GymVectorEnv.from_env_fns(fns, backend="subproc", num_workers=2)
    with pytest.raises(AttributeError, match="envs: the sub-envs of SubprocVecEnv are not gymnasium envs in this "
                                             "process"):
        ours.envs
    ours.close()

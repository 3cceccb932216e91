"""The gymnasium and SB3 faces with every space the core supports, against gymnasium and SB3 themselves.

Dict / Tuple / nested / MultiDiscrete / MultiBinary observations and MultiDiscrete /
MultiBinary / Dict actions: the face and ``SyncVectorEnv`` (or SB3's ``DummyVecEnv``)
run the same env_fns, seeds and actions and must return the same values, dtypes,
structures and element types, final observations included. The envs are gymnasium's
own (CartPole, Blackjack) with gymnasium's Transform wrappers giving them the spaces.
"""

from __future__ import annotations

from typing import Any, Callable

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.spaces import Box, Dict, Discrete, MultiBinary, MultiDiscrete, Tuple
from gymnasium.vector import AutoresetMode as GymAutoreset
from gymnasium.wrappers import TransformAction, TransformObservation

import marl_vec as mv
from marl_vec.compat import BatchOfOne, GymVectorEnv

E = 3
STEPS = 80


# -- envs: gymnasium's own, given tree spaces by gymnasium's wrappers -----------------------

NESTED = Dict({
    "pos": Box(-5, 5, (2,), np.float32),
    "rest": Tuple((Box(-np.inf, np.inf, (2,), np.float32),
                   Dict({"sign": Discrete(2, start=-1), "bits": MultiBinary(2), "md": MultiDiscrete([3, 4])}))),
})


def nested_obs(o: np.ndarray) -> dict[str, Any]:
    return {"pos": o[:2], "rest": (o[2:], {"sign": int(o[2] > 0) - 1, "bits": (o[:2] > 0).astype(np.int8),
                                           "md": np.array([int(o[1] > 0) + 1, int(o[3] > 0) * 3], np.int64)})}


def cartpole_nested() -> gym.Env:
    return TransformObservation(gym.make("CartPole-v1"), nested_obs, NESTED)


def cartpole_multibinary() -> gym.Env:
    return TransformObservation(gym.make("CartPole-v1"), lambda o: (o > 0).astype(np.int8), MultiBinary(4))


def cartpole_multidiscrete() -> gym.Env:
    return TransformObservation(gym.make("CartPole-v1"), lambda o: (np.sign(o) + 1).astype(np.int64),
                                MultiDiscrete([3, 3, 3, 3]))


def blackjack() -> gym.Env:  # Tuple(Discrete(32), Discrete(11), Discrete(2)): Python ints
    return gym.make("Blackjack-v1")


def cartpole_multidiscrete_action() -> gym.Env:
    return TransformAction(gym.make("CartPole-v1"), lambda a: int(a[0] + a[1]) % 2, MultiDiscrete([2, 3]))


def cartpole_multibinary_action() -> gym.Env:
    return TransformAction(gym.make("CartPole-v1"), lambda a: int(a[0] ^ a[2]), MultiBinary(3))


def cartpole_grid_multidiscrete() -> gym.Env:  # nvec of shape (2, 2)
    return TransformObservation(gym.make("CartPole-v1"), lambda o: (np.sign(o) + 1).astype(np.int64).reshape(2, 2),
                                MultiDiscrete(np.full((2, 2), 3)))


def cartpole_grid_multidiscrete_action() -> gym.Env:  # nvec of shape (2, 3), with starts
    space = MultiDiscrete(np.array([[2, 3, 4], [2, 2, 5]]), start=np.array([[0, -1, 2], [1, 0, 0]]))
    return TransformAction(gym.make("CartPole-v1"), lambda a: int(a.sum()) % 2, space)


DICT_ACTION = Dict({"push": Discrete(2), "bits": MultiBinary(3), "x": Box(-1, 1, (2,), np.float32)})


def cartpole_dict_action() -> gym.Env:
    return TransformAction(gym.make("CartPole-v1"), lambda a: int(a["push"]), DICT_ACTION)


OBSERVATION_ENVS = [cartpole_nested, blackjack, cartpole_multibinary, cartpole_multidiscrete,
                    cartpole_grid_multidiscrete]
ACTION_ENVS = [cartpole_multidiscrete_action, cartpole_multibinary_action, cartpole_dict_action,
               cartpole_grid_multidiscrete_action]


# -- comparison ------------------------------------------------------------------------------

def assert_same(ours: Any, theirs: Any, where: str = "") -> None:
    """Same structure (dict keys, tuple lengths), values bit for bit, dtypes and element types."""
    if isinstance(theirs, dict):
        assert isinstance(ours, dict) and set(ours) == set(theirs), f"{where}: {ours!r} vs {theirs!r}"
        for key in theirs:
            assert_same(ours[key], theirs[key], f"{where}[{key!r}]")
    elif isinstance(theirs, tuple):
        assert isinstance(ours, tuple) and len(ours) == len(theirs), f"{where}: {ours!r} vs {theirs!r}"
        for i, (a, b) in enumerate(zip(ours, theirs)):
            assert_same(a, b, f"{where}[{i}]")
    elif isinstance(theirs, np.ndarray) and theirs.dtype == object:
        assert isinstance(ours, np.ndarray) and ours.shape == theirs.shape, where
        for i, (a, b) in enumerate(zip(ours, theirs)):
            assert_same(a, b, f"{where}[{i}]")
    else:
        assert type(ours) is type(theirs), f"{where}: type {type(ours)} != {type(theirs)}"
        np.testing.assert_array_equal(ours, theirs, err_msg=where)
        if isinstance(theirs, np.ndarray):
            assert ours.dtype == theirs.dtype, f"{where}: dtype {ours.dtype} != {theirs.dtype}"


def face_and_sync(fn: Callable[[], gym.Env], mode: str, backend: str) -> tuple[GymVectorEnv, Any]:
    venv_cls = mv.DummyVecEnv if backend == "dummy" else mv.SubprocVecEnv
    ours = GymVectorEnv(venv_cls([fn] * E, env_seed=None, autoreset=mode))
    theirs = gym.vector.SyncVectorEnv([fn] * E, autoreset_mode=GymAutoreset[mode.upper()])
    return ours, theirs


def run_both(ours: GymVectorEnv, theirs: Any, seed: int = 1) -> int:
    """Reset and step both with the actions of their (equally seeded) action spaces; every
    output equal. Returns how many final observations were compared."""
    assert ours.single_observation_space == theirs.single_observation_space
    assert ours.observation_space == theirs.observation_space
    assert ours.single_action_space == theirs.single_action_space and ours.action_space == theirs.action_space
    (obs_a, info_a), (obs_b, info_b) = ours.reset(seed=seed), theirs.reset(seed=seed)
    assert_same(obs_a, obs_b, "reset obs")
    assert_same(info_a, info_b, "reset infos")
    ours.action_space.seed(seed), theirs.action_space.seed(seed)
    finals = 0
    for t in range(STEPS):
        action, action_b = ours.action_space.sample(), theirs.action_space.sample()
        assert_same(action, action_b, f"step {t} action_space.sample()")
        out_a, out_b = ours.step(action), theirs.step(action)
        for a, b, name in zip(out_a, out_b, ("obs", "reward", "terminated", "truncated", "infos")):
            assert_same(a, b, f"step {t} {name}")
        finals += int(out_b[4].get("_final_obs", np.zeros(1, bool)).sum())
    return finals


# -- GymVectorEnv ------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", ["dummy", "subproc"])
@pytest.mark.parametrize("mode", ["same_step", "next_step"])
@pytest.mark.parametrize("fn", OBSERVATION_ENVS, ids=lambda fn: fn.__name__)
def test_tree_and_multi_observations_equal_sync_vector_env(fn, mode, backend):
    ours, theirs = face_and_sync(fn, mode, backend)
    finals = run_both(ours, theirs)
    if mode == "same_step":
        assert finals >= 2  # final_obs compared, with their element types
    ours.close(), theirs.close()


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
@pytest.mark.parametrize("fn", ACTION_ENVS, ids=lambda fn: fn.__name__)
def test_multi_and_dict_actions_equal_sync_vector_env(fn, backend):
    ours, theirs = face_and_sync(fn, "same_step", backend)
    assert run_both(ours, theirs) >= 2
    ours.close(), theirs.close()


def test_final_obs_has_the_envs_own_element_types():
    ours, theirs = face_and_sync(blackjack, "same_step", "dummy")
    ours.reset(seed=0), theirs.reset(seed=0)
    for _ in range(10):
        infos = ours.step(np.ones(E, np.int64))[4]
        theirs.step(np.ones(E, np.int64))
        if "final_obs" in infos:
            break
    i = int(np.flatnonzero(infos["_final_obs"])[0])
    final = infos["final_obs"][i]
    assert type(final) is tuple and [type(x) for x in final] == [int, int, int]
    ours.close(), theirs.close()

    ours, theirs = face_and_sync(cartpole_nested, "same_step", "dummy")
    ours.reset(seed=0)
    while "final_obs" not in (infos := ours.step(np.zeros(E, np.int64))[4]):
        pass
    final = infos["final_obs"][int(np.flatnonzero(infos["_final_obs"])[0])]
    assert type(final) is dict and type(final["rest"]) is tuple and type(final["rest"][1]["sign"]) is int
    assert final["rest"][1]["sign"] in (-1, 0)  # Discrete(2, start=-1): in the env's numbering
    assert final["pos"].dtype == np.float32 and final["rest"][1]["md"].dtype == np.int64
    ours.close(), theirs.close()


def test_dict_actions_with_list_leaves_equal_array_leaves_and_per_env_dicts_are_refused_as_gymnasium_does():
    ours, theirs = face_and_sync(cartpole_dict_action, "same_step", "dummy")
    ours.reset(seed=0), theirs.reset(seed=0)
    theirs.action_space.seed(2)
    for _ in range(30):
        batched = theirs.action_space.sample()
        as_lists = {key: value.tolist() for key, value in batched.items()}
        for a, b in zip(ours.step(as_lists), theirs.step(batched)):
            assert_same(a, b)
    per_env = [{key: value[i] for key, value in batched.items()} for i in range(E)]
    with pytest.raises(TypeError):
        theirs.step(per_env)
    with pytest.raises(TypeError):
        ours.step(per_env)
    ours.close(), theirs.close()


@pytest.mark.parametrize("fn", ACTION_ENVS, ids=lambda fn: fn.__name__)
def test_bad_actions_raise_what_sync_vector_env_raises(fn):
    ours, theirs = face_and_sync(fn, "same_step", "dummy")
    ours.reset(seed=0), theirs.reset(seed=0)
    two = gym.vector.utils.batch_space(theirs.single_action_space, 2).sample()  # actions for 2 of 3 envs
    for bad in (0, two):
        with pytest.raises(Exception) as theirs_error:
            theirs.step(bad)
        with pytest.raises(type(theirs_error.value)):
            ours.step(bad)
    ours.close(), theirs.close()


def test_discrete_actions_reach_the_env_in_the_spaces_dtype_and_numbering():
    space = Discrete(2, start=1, dtype=np.int32)  # contains() refuses an np.int64 action
    seen: dict[str, list] = {"face": [], "sync": []}

    def make(key: str) -> Callable[[], gym.Env]:
        def record(a: Any) -> int:
            seen[key].append(a)
            return int(a) - 1
        return lambda: TransformAction(gym.make("CartPole-v1"), record, space)

    ours = GymVectorEnv(mv.DummyVecEnv([make("face")] * E, env_seed=None))
    theirs = gym.vector.SyncVectorEnv([make("sync")] * E)
    ours.reset(seed=0), theirs.reset(seed=0)
    for action in np.array([[1, 2, 1], [2, 2, 1], [1, 1, 2]], np.int32):
        for a, b in zip(ours.step(action), theirs.step(action)):
            assert_same(a, b)
    assert [(type(a), int(a)) for a in seen["face"]] == [(type(b), int(b)) for b in seen["sync"]]
    assert all(a in space and type(a) is np.int32 for a in seen["face"])
    ours.close(), theirs.close()


# -- BatchOfOne --------------------------------------------------------------------------------

def test_batch_of_one_with_a_nested_dict_env_equals_sync_vector_env_of_one():
    ours, theirs = BatchOfOne(cartpole_nested()), gym.vector.SyncVectorEnv([cartpole_nested])
    assert ours.observation_space == theirs.observation_space
    assert_same(ours.reset(seed=4), theirs.reset(seed=4))
    for _ in range(STEPS):
        action = np.array([1])
        for a, b, name in zip(ours.step(action), theirs.step(action), ("obs", "reward", "terminated", "truncated", "infos")):
            assert_same(a, b, name)
    ours.close(), theirs.close()


def test_batch_of_one_with_dict_actions_equals_sync_vector_env_of_one():
    ours, theirs = BatchOfOne(cartpole_dict_action()), gym.vector.SyncVectorEnv([cartpole_dict_action])
    assert_same(ours.reset(seed=4), theirs.reset(seed=4))
    theirs.action_space.seed(0)
    for _ in range(STEPS):
        action = theirs.action_space.sample()
        for a, b in zip(ours.step(action), theirs.step(action)):
            assert_same(a, b)
    ours.close(), theirs.close()


# -- final_obs leaves of the env's own types (issue 23, bug 7) ---------------------------------

SCALARS = Dict({"cell": Discrete(2), "level": Box(-np.inf, np.inf, (), np.float32),
                "pos": Box(-np.inf, np.inf, (2,), np.float32)})


def cartpole_numpy_scalars() -> gym.Env:  # np.int64, np.float32 and a float64 array under a float32 Box
    return TransformObservation(gym.make("CartPole-v1"), lambda o: {
        "cell": np.int64(o[0] > 0), "level": np.float32(o[1]), "pos": o[:2].astype(np.float64)}, SCALARS)


def cartpole_zero_d_arrays() -> gym.Env:  # 0-d arrays for the Discrete and the scalar Box leaves
    return TransformObservation(gym.make("CartPole-v1"), lambda o: {
        "cell": np.array(int(o[0] > 0)), "level": np.array(o[1], np.float32), "pos": o[:2]}, SCALARS)


def cartpole_discrete_int64() -> gym.Env:  # one Discrete observation, as np.int64 (FrozenLake's is an int)
    return TransformObservation(gym.make("CartPole-v1"), lambda o: np.int64(o[0] > 0), Discrete(2))


# -- SB3VecEnv -----------------------------------------------------------------------------------

FLAT_DICT = Dict({"pos": Box(-5, 5, (2,), np.float32), "vel": Box(-np.inf, np.inf, (2,), np.float32),
                  "sign": Discrete(2), "bits": MultiBinary(2)})


def flat_dict_obs(o: np.ndarray) -> dict[str, Any]:
    return {"pos": o[:2], "vel": o[2:], "sign": int(o[2] > 0), "bits": (o[:2] > 0).astype(np.int8)}


def cartpole_dict_obs_multidiscrete_action() -> gym.Env:
    """SB3's MultiInputPolicy takes flat Dict observations (not nested ones)."""
    env = TransformObservation(gym.make("CartPole-v1"), flat_dict_obs, FLAT_DICT)
    return TransformAction(env, lambda a: int(a[0] + a[1]) % 2, MultiDiscrete([2, 3]))


def cartpole_dict_obs_multibinary_action() -> gym.Env:
    env = TransformObservation(gym.make("CartPole-v1"), flat_dict_obs, FLAT_DICT)
    return TransformAction(env, lambda a: int(a[0] ^ a[2]), MultiBinary(3))


def sb3_pair(fn: Callable[[], gym.Env], backend: str = "dummy", n: int = E) -> tuple[Any, Any]:
    pytest.importorskip("stable_baselines3", reason="the sb3 extra")
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv as SB3DummyVecEnv

    from marl_vec.compat import SB3VecEnv

    venv_cls = mv.DummyVecEnv if backend == "dummy" else mv.SubprocVecEnv
    return SB3VecEnv(venv_cls([fn] * n, env_seed=None)), SB3DummyVecEnv([lambda: Monitor(fn())] * n)


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
@pytest.mark.parametrize("fn", [cartpole_dict_obs_multidiscrete_action, cartpole_dict_obs_multibinary_action,
                                # terminal_observation leaves of the env's own types (issue 23, bug 7)
                                cartpole_numpy_scalars, cartpole_zero_d_arrays],
                         ids=lambda fn: fn.__name__)
def test_sb3_dict_observations_and_multi_actions_equal_sb3_dummy_vec_env(fn, backend):
    ours, theirs = sb3_pair(fn, backend)
    assert ours.observation_space == theirs.observation_space and ours.action_space == theirs.action_space
    ours.seed(3), theirs.seed(3)
    assert_same(dict(ours.reset()), dict(theirs.reset()), "reset obs")
    theirs.action_space.seed(0)
    finals = 0
    for t in range(STEPS):
        action = np.stack([theirs.action_space.sample() for _ in range(E)])
        (obs_a, rew_a, done_a, infos_a), (obs_b, rew_b, done_b, infos_b) = ours.step(action), theirs.step(action)
        assert_same(dict(obs_a), dict(obs_b), f"step {t} obs")
        assert_same(rew_a, rew_b, f"step {t} reward")
        assert_same(done_a, done_b, f"step {t} dones")
        for a_info, b_info in zip(infos_a, infos_b):
            assert list(a_info) == list(b_info)
            if "terminal_observation" in b_info:
                assert_same(a_info["terminal_observation"], dict(b_info["terminal_observation"]), "terminal_observation")
                finals += 1
    assert finals >= 2
    ours.close(), theirs.close()


def test_sb3_refuses_dict_actions():
    pytest.importorskip("stable_baselines3", reason="the sb3 extra")
    from marl_vec.compat import SB3VecEnv

    venv = mv.DummyVecEnv([cartpole_dict_action])
    with pytest.raises(ValueError, match="is a Dict/Tuple; SB3 takes Box, Discrete, MultiDiscrete or MultiBinary actions"):
        SB3VecEnv(venv)
    venv.close()


def test_sb3_ppo_multi_input_policy_learns_bit_for_bit_what_it_learns_on_sb3_dummy_vec_env():
    pytest.importorskip("stable_baselines3", reason="the sb3 extra")
    torch = pytest.importorskip("torch", reason="the examples extra")
    from stable_baselines3 import PPO

    def parameters(env: Any) -> list[np.ndarray]:
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:  # Dict observations, MultiDiscrete actions: 4 envs x 64 steps x 2 rollouts
            model = PPO("MultiInputPolicy", env, n_steps=64, batch_size=64, n_epochs=2, seed=0, device="cpu")
            model.learn(total_timesteps=512)
            return [p.detach().numpy().copy() for p in model.policy.parameters()]
        finally:
            torch.set_num_threads(threads)
            env.close()

    ours, theirs = sb3_pair(cartpole_dict_obs_multidiscrete_action, n=4)
    mine, reference = parameters(ours), parameters(theirs)
    assert len(mine) == len(reference)
    for a, b in zip(mine, reference):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
@pytest.mark.parametrize("fn", [cartpole_numpy_scalars, cartpole_zero_d_arrays, cartpole_discrete_int64],
                         ids=lambda fn: fn.__name__)
def test_final_obs_leaves_are_the_envs_own_types_as_sync_vector_envs(fn, backend):
    ours, theirs = face_and_sync(fn, "same_step", backend)
    assert run_both(ours, theirs) >= 2  # assert_same compares each leaf's type and dtype
    ours.close(), theirs.close()


def cartpole_unsorted_dict() -> gym.Env:  # keys not in the sorted order of gymnasium's Dict space
    space = Dict({"vel": Box(-np.inf, np.inf, (2,), np.float32), "pos": Box(-np.inf, np.inf, (2,), np.float32)})
    return TransformObservation(gym.make("CartPole-v1"), lambda o: {"vel": o[2:], "pos": o[:2]}, space)


def test_final_obs_dicts_keep_the_envs_own_key_order():
    ours, theirs = face_and_sync(cartpole_unsorted_dict, "same_step", "dummy")
    ours.reset(seed=0), theirs.reset(seed=0)
    finals = []
    for envs in (ours, theirs):
        while "final_obs" not in (infos := envs.step(np.zeros(E, np.int64))[4]):
            pass
        finals.append(infos["final_obs"][int(np.flatnonzero(infos["_final_obs"])[0])])
    assert list(finals[0]) == list(finals[1]) == ["vel", "pos"]
    ours.close(), theirs.close()

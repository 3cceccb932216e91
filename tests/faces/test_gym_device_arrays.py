"""GymVectorEnv over a torch / JAX batch returns what gymnasium's own array wrappers return.

The reference is gymnasium itself over ``SyncVectorEnv`` of the same envs, seeds and
actions: ``NumpyToTorch`` for torch, ``ArrayConversion(env_xp=numpy, target_xp=jax.numpy)``
for JAX (gymnasium ships no ``NumpyToJax``). Every output is compared: values, dtypes,
devices, and the infos tree (``_key`` masks included). In same-step mode gymnasium's
wrappers raise ``BufferError`` on ``infos["final_obs"]`` (an object array); there the
reference converts that array item by item with gymnasium's ``array_conversion``, which is
what the face serves.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode as GymAutoreset
from gymnasium.vector import SyncVectorEnv

import marl_vec as mv
from marl_vec.compat import GymVectorEnv

torch = pytest.importorskip("torch", reason="the torch extra")

E = 3
STEPS = 60


class Infos(gym.Wrapper):
    """Infos of every kind gymnasium batches (Python and numpy scalars, arrays, a nested dict),
    on odd steps only, so that the ``_key`` masks vary."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.t = 0

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, _ = self.env.step(action)
        self.t += 1
        info = {} if self.t % 2 == 0 else {
            "x": 0.1 * self.t, "n": self.t, "b": bool(self.t % 3), "s": np.float64(self.t / 7),
            "a": np.arange(2, dtype=np.float32) * self.t, "nested": {"k": np.int32(self.t)},
        }
        return obs, reward, terminated, truncated, info


def cartpole() -> gym.Env:
    return Infos(gym.make("CartPole-v1"))


def pendulum() -> gym.Env:  # a Box action; short episodes for several time-outs
    return Infos(gym.make("Pendulum-v1", max_episode_steps=15))


def frozen_lake() -> gym.Env:  # Discrete observations: the env's own final obs is a Python int
    return gym.make("FrozenLake-v1")


def gym_wrappers() -> tuple[Any, Any, Any]:
    """gymnasium's ``array_conversion``, ``NumpyToTorch`` and vector ``ArrayConversion``; they
    need array-api-compat (the test extra), else the test that asks is skipped."""
    pytest.importorskip("array_api_compat", reason="gymnasium's array wrappers (gymnasium[array-api])")
    from gymnasium.wrappers.array_conversion import array_conversion
    from gymnasium.wrappers.vector import NumpyToTorch
    from gymnasium.wrappers.vector.array_conversion import ArrayConversion

    return array_conversion, NumpyToTorch, ArrayConversion


def to_reference(value: Any, xp: Any) -> Any:
    """gymnasium's ``array_conversion``, item by item inside object arrays (where it raises)."""
    array_conversion = gym_wrappers()[0]
    if isinstance(value, Mapping):
        return {key: to_reference(v, xp) for key, v in value.items()}
    if isinstance(value, np.ndarray) and value.dtype.hasobject:
        out = np.empty(value.shape, dtype=object)
        for i, item in enumerate(value):
            out[i] = None if item is None else array_conversion(item, xp)
        return out
    return array_conversion(value, xp)


def itemwise_conversion(sync: SyncVectorEnv, xp: Any) -> Any:
    """gymnasium's ArrayConversion with `to_reference` for the infos (same-step's final_obs)."""
    array_conversion, _, ArrayConversion = gym_wrappers()

    class ItemwiseConversion(ArrayConversion):
        def step(self, actions: Any) -> tuple[Any, ...]:
            obs, reward, terminated, truncated, info = self.env.step(array_conversion(actions, np))
            return (*(array_conversion(x, self._target_xp) for x in (obs, reward, terminated, truncated)),
                    to_reference(info, self._target_xp))

    return ItemwiseConversion(sync, np, xp)


def assert_same(ours: Any, theirs: Any, where: str) -> None:
    if isinstance(theirs, Mapping):
        assert isinstance(ours, dict) and list(ours) == list(theirs), (where, ours, theirs)
        for key in theirs:
            assert_same(ours[key], theirs[key], f"{where}.{key}")
    elif isinstance(theirs, np.ndarray):
        assert isinstance(ours, np.ndarray) and ours.dtype == theirs.dtype and ours.shape == theirs.shape, where
        for i, item in enumerate(theirs):
            assert_same(ours[i], item, f"{where}[{i}]")
    elif theirs is None:
        assert ours is None, where
    elif isinstance(theirs, tuple):  # what reset / step return
        assert isinstance(ours, tuple) and len(ours) == len(theirs), where
        for i, (a, b) in enumerate(zip(ours, theirs)):
            assert_same(a, b, f"{where}[{i}]")
    else:
        assert type(ours) is type(theirs), (where, type(ours), type(theirs))
        assert ours.dtype == theirs.dtype and tuple(ours.shape) == tuple(theirs.shape), (where, ours, theirs)
        assert getattr(ours, "device", None) == getattr(theirs, "device", None), where
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs), err_msg=where)


def make_pair(fn: Callable[[], gym.Env], mode: str, xp_name: str, copy: bool = True) -> tuple[GymVectorEnv, Any]:
    kwargs = {"reward_dtype": "float32"} if xp_name == "jax" else {}  # JAX has no float64 without x64
    ours = GymVectorEnv(mv.DummyVecEnv([fn] * E, env_seed=None, autoreset=mode, copy=copy, array_backend=xp_name,
                                       **kwargs))
    _, NumpyToTorch, ArrayConversion = gym_wrappers()
    sync = SyncVectorEnv([fn] * E, autoreset_mode=GymAutoreset[mode.upper()], copy=copy)
    if xp_name == "torch":
        theirs = NumpyToTorch(sync) if mode != "same_step" else itemwise_conversion(sync, torch)
    else:
        import jax.numpy as jnp

        theirs = ArrayConversion(sync, np, jnp) if mode != "same_step" else itemwise_conversion(sync, jnp)
    return ours, theirs


def actions_for(envs: GymVectorEnv, generator: Any, xp_name: str) -> Any:
    space = envs.single_action_space
    if isinstance(space, gym.spaces.Discrete):
        actions = torch.randint(0, int(space.n), (E,), generator=generator)
    else:
        actions = torch.rand((E, *space.shape), generator=generator) * 4 - 2
    if xp_name == "jax":
        import jax.numpy as jnp

        return jnp.asarray(actions.numpy())
    return actions


def run(fn: Callable[[], gym.Env], mode: str, xp_name: str, copy: bool = True) -> int:
    """Both sides over the same seeds and actions; returns the episodes that ended."""
    ours, theirs = make_pair(fn, mode, xp_name, copy)
    assert_same(ours.reset(seed=3), theirs.reset(seed=3), "reset")
    generator = torch.Generator().manual_seed(0)
    ends = 0
    for t in range(STEPS):
        actions = actions_for(ours, generator, xp_name)
        out_a, out_b = ours.step(actions), theirs.step(actions)
        for name, a, b in zip(("obs", "reward", "terminated", "truncated", "infos"), out_a, out_b):
            assert_same(a, b, f"step {t} {name}")
        done = np.logical_or(np.asarray(out_b[2]), np.asarray(out_b[3]))
        ends += int(done.sum())
        if mode == "disabled" and done.any():  # gymnasium's way: reset the finished envs by mask
            mask = torch.from_numpy(done) if xp_name == "torch" else out_b[2] | out_b[3]
            assert_same(ours.reset(options={"reset_mask": mask}), theirs.reset(options={"reset_mask": mask}),
                        f"reset at {t}")
    ours.close(), theirs.close()
    return ends


@pytest.mark.parametrize("mode", ["same_step", "next_step", "disabled"])
@pytest.mark.parametrize("fn", [cartpole, pendulum, frozen_lake], ids=lambda fn: fn.__name__)
def test_torch_face_equals_numpy_to_torch_over_sync_vector_env(fn, mode):
    assert run(fn, mode, "torch") >= 4


@pytest.mark.parametrize("mode", ["same_step", "next_step"])
def test_torch_face_with_copy_false_equals_numpy_to_torch(mode):
    assert run(cartpole, mode, "torch", copy=False) >= 4


@pytest.mark.parametrize("mode", ["same_step", "next_step", "disabled"])
@pytest.mark.parametrize("fn", [cartpole, pendulum], ids=lambda fn: fn.__name__)
def test_jax_face_equals_array_conversion_to_jax_over_sync_vector_env(fn, mode):
    pytest.importorskip("jax", reason="the jax extra")
    assert run(fn, mode, "jax") >= 4


def test_numpy_to_torch_itself_raises_on_same_step_final_obs():
    """Why the same-step reference converts final_obs item by item: gymnasium's wrapper cannot."""
    NumpyToTorch = gym_wrappers()[1]
    theirs = NumpyToTorch(SyncVectorEnv([cartpole] * E, autoreset_mode=GymAutoreset.SAME_STEP))
    theirs.reset(seed=3)
    with pytest.raises(BufferError):
        for _ in range(200):
            theirs.step(torch.ones(E, dtype=torch.int64))
    theirs.close()


def test_the_face_hands_out_the_batchs_own_tensors_without_conversions(monkeypatch):
    """copy=False: obs are the batch buffers' tensor (no copy), and no numpy -> torch conversion
    runs on a step (obs, reward and flags come from the VecEnv as tensors)."""
    ours = GymVectorEnv(mv.DummyVecEnv([lambda: gym.make("CartPole-v1")] * E, env_seed=None, copy=False,
                                       array_backend="torch"))
    obs, _ = ours.reset(seed=3)
    buffer = ours.venv._device_arrays.views["obs"]
    assert obs.data_ptr() == buffer.data_ptr()
    calls: list[str] = []
    for name in ("from_numpy", "from_dlpack", "as_tensor", "asarray", "tensor", "Tensor"):
        real = getattr(torch, name)
        monkeypatch.setattr(torch, name, lambda *a, _real=real, _name=name, **k: calls.append(_name) or _real(*a, **k))
    obs, reward, terminated, truncated, infos = ours.step(torch.ones(E, dtype=torch.int64))
    assert calls == [] and infos == {}
    assert obs.data_ptr() == buffer.data_ptr() and reward.dtype == torch.float64 and terminated.dtype == torch.bool
    monkeypatch.undo()
    ours.close()


def test_numpy_actions_and_reset_masks_still_work_on_a_torch_face():
    ours, theirs = make_pair(cartpole, "disabled", "torch")
    assert_same(ours.reset(seed=1), theirs.reset(seed=1), "reset")
    actions = np.ones(E, dtype=np.int64)
    assert_same(ours.step(actions), theirs.step(actions), "numpy actions")
    assert_same(ours.step([1] * E), theirs.step(torch.ones(E, dtype=torch.int64)), "a list of actions")
    mask = np.array([True, False, True])
    assert_same(ours.reset(options={"reset_mask": mask}), theirs.reset(options={"reset_mask": mask}), "numpy mask")
    ours.close(), theirs.close()


# -- what is not served, and the messages ---------------------------------------------------

def test_float_actions_for_a_discrete_space_are_refused():
    ours = GymVectorEnv(mv.DummyVecEnv([lambda: gym.make("CartPole-v1")] * E, array_backend="torch"))
    ours.reset(seed=0)
    with pytest.raises(TypeError, match="discrete actions must be integers, got dtype torch.float32"):
        ours.step(torch.ones(E))
    with pytest.raises(ValueError, match="expected 3 actions"):
        ours.step(torch.ones(E + 1, dtype=torch.int64))
    ours.close()


def test_object_and_dict_observations_name_what_torch_serves():
    from tests.helpers.object_space_envs import cartpole_dict_with_graph, cartpole_text

    with pytest.raises(ValueError, match=r"array_backend='torch': object observations \(Text, Graph.*allowed with "
                                         r"'torch': Box, Discrete, MultiDiscrete, MultiBinary observations"):
        GymVectorEnv(mv.DummyVecEnv([cartpole_text] * 2, array_backend="torch"))
    with pytest.raises(ValueError, match=r"got a Dict/Tuple observation space; allowed with 'jax': Box, Discrete"):
        GymVectorEnv(mv.DummyVecEnv([cartpole_dict_with_graph] * 2, array_backend="jax"))


def test_a_turn_based_game_is_served_as_numpy_only():
    from marl_vec.envs.registry import make_env_fn

    pytest.importorskip("pettingzoo.classic", reason="the classic extra")
    venv = mv.DummyVecEnv([make_env_fn("pettingzoo", "pettingzoo.classic.tictactoe_v3")] * 2, array_backend="torch")
    with pytest.raises(ValueError, match="a turn-based game .* needs array_backend='numpy', got 'torch'"):
        GymVectorEnv(venv)
    venv.close()


def test_from_env_fns_passes_array_backend_to_the_batch():
    envs = GymVectorEnv.from_env_fns([cartpole] * E, autoreset_mode=GymAutoreset.SAME_STEP, array_backend="torch")
    obs, _ = envs.reset(seed=0)
    assert isinstance(obs, torch.Tensor) and envs.venv.array_backend == "torch"
    with pytest.raises(ValueError, match="use DummyVecEnv for torch or JAX results"):
        GymVectorEnv.from_env_fns([cartpole] * E, backend="subproc", array_backend="torch")
    envs.close()

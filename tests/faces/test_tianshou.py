"""The Tianshou face (marl_vec.compat.tianshou), proven by Tianshou's own trainers.

Runs in .venv-tianshou (scripts/install/install_tianshou_venv.sh: Tianshou 2.0.1 pins
deepdiff<8); skipped where tianshou is not installed.

- Tianshou's own DQN and PPO on CartPole learn bit-identical parameters through
  the face (over DummyVecEnv and SubprocVecEnv) and through Tianshou's
  DummyVectorEnv, at the same seeds. Their test collectors gather more episodes
  than there are envs, so subsets of envs are stepped and reset.
- The calls a Collector makes, step by step against DummyVectorEnv: subsets in
  any order, resets of finished and unfinished envs, seeds (int, list, reset's).
- Async (wait_num): each env's trajectory equals its synchronous one, ready_id and
  waiting_id stay consistent, every info names its env. (Tianshou 2.0.1's own
  AsyncCollector fails on CartPole with its own SubprocVectorEnv(wait_num=2): an
  IndexError on an empty policy Batch; so the async face is tested at this level.)
- Attributes, render, close, and the errors.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import marl_vec as mv

pytest.importorskip("tianshou", reason="tianshou runs in its own venv: bash scripts/install/install_tianshou_venv.sh")
torch = pytest.importorskip("torch")

import tianshou as ts  # noqa: E402
from tianshou.algorithm.modelfree.dqn import DiscreteQLearningPolicy  # noqa: E402
from tianshou.algorithm.modelfree.reinforce import DiscreteActorPolicy  # noqa: E402
from tianshou.algorithm.optim import AdamOptimizerFactory  # noqa: E402
from tianshou.data import CollectStats  # noqa: E402
from tianshou.env import DummyVectorEnv  # noqa: E402
from tianshou.trainer import OffPolicyTrainerParams, OnPolicyTrainerParams  # noqa: E402
from tianshou.utils.net.common import Net  # noqa: E402
from tianshou.utils.net.discrete import DiscreteActor, DiscreteCritic  # noqa: E402

from marl_vec.compat.tianshou import TianshouVectorEnv  # noqa: E402

TASK = "CartPole-v1"


def cartpole() -> gym.Env:
    return gym.make(TASK)


def native(n: int, **kwargs) -> DummyVectorEnv:
    return DummyVectorEnv([cartpole] * n, **kwargs)


def face(n: int, backend: str = "dummy", **kwargs) -> TianshouVectorEnv:
    extra = {"num_workers": 2} if backend == "subproc" else {}
    return TianshouVectorEnv(mv.make_vec([cartpole] * n, backend=backend, env_seed=None, **extra), **kwargs)


# -- training: identical parameters ------------------------------------------------

def seeded_envs(make_envs, seed: int) -> tuple:
    """4 train and 3 test envs, seeded as Tianshou's examples seed them (torch and numpy too)."""
    torch.manual_seed(seed)
    np.random.seed(seed)
    train_envs, test_envs = make_envs(4), make_envs(3)
    train_envs.seed(seed)
    test_envs.seed(seed + 100)
    return train_envs, test_envs


def outcome(algorithm, result, train_collector, test_collector) -> dict:
    """What a training run must reproduce: every parameter, the best test return, the counts."""
    train_collector.close()
    test_collector.close()
    return {"params": {k: v.clone() for k, v in algorithm.state_dict().items() if torch.is_tensor(v)},
            "best_reward": result.best_reward, "train_steps": train_collector.collect_step,
            "test_episodes": test_collector.collect_episode}


def train_dqn(make_envs, seed: int = 3) -> dict:
    train_envs, test_envs = seeded_envs(make_envs, seed)
    env = cartpole()
    net = Net(state_shape=env.observation_space.shape, action_shape=env.action_space.n, hidden_sizes=[32, 32])
    policy = DiscreteQLearningPolicy(model=net, action_space=env.action_space, eps_training=0.2, eps_inference=0.05)
    algorithm = ts.algorithm.DQN(policy=policy, optim=AdamOptimizerFactory(lr=1e-3), gamma=0.9,
                                 n_step_return_horizon=3, target_update_freq=50)
    train_collector = ts.data.Collector[CollectStats](
        algorithm, train_envs, ts.data.VectorReplayBuffer(2000, 4), exploration_noise=True)
    test_collector = ts.data.Collector[CollectStats](algorithm, test_envs, exploration_noise=True)
    train_collector.reset()
    train_collector.collect(n_step=64, random=True)  # seeded action spaces: the same random actions
    result = algorithm.run_training(OffPolicyTrainerParams(
        training_collector=train_collector, test_collector=test_collector, max_epochs=2, epoch_num_steps=160,
        collection_step_num_env_steps=8, test_step_num_episodes=4, batch_size=32,
        update_step_num_gradient_steps_per_sample=0.25, verbose=False, show_progress=False))
    return outcome(algorithm, result, train_collector, test_collector)


def train_ppo(make_envs, seed: int = 5) -> dict:
    train_envs, test_envs = seeded_envs(make_envs, seed)
    env = cartpole()
    actor = DiscreteActor(preprocess_net=Net(state_shape=env.observation_space.shape, hidden_sizes=[32, 32]),
                          action_shape=env.action_space.n)
    critic = DiscreteCritic(preprocess_net=Net(state_shape=env.observation_space.shape, hidden_sizes=[32, 32]))
    policy = DiscreteActorPolicy(actor=actor, action_space=env.action_space)
    algorithm = ts.algorithm.PPO(policy=policy, critic=critic, optim=AdamOptimizerFactory(lr=3e-4), gamma=0.99)
    train_collector = ts.data.Collector[CollectStats](algorithm, train_envs, ts.data.VectorReplayBuffer(2000, 4))
    test_collector = ts.data.Collector[CollectStats](algorithm, test_envs)
    result = algorithm.run_training(OnPolicyTrainerParams(
        training_collector=train_collector, test_collector=test_collector, max_epochs=2, epoch_num_steps=128,
        collection_step_num_env_steps=128, test_step_num_episodes=4, batch_size=64,
        update_step_num_repetitions=2, verbose=False, show_progress=False))
    return outcome(algorithm, result, train_collector, test_collector)


def assert_same_training(got: dict, want: dict) -> None:
    assert got["params"].keys() == want["params"].keys() and got["params"]
    for name, value in want["params"].items():
        assert torch.equal(got["params"][name], value), f"parameter {name} differs"
    assert (got["best_reward"], got["train_steps"], got["test_episodes"]) == \
        (want["best_reward"], want["train_steps"], want["test_episodes"])


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["dummy", "subproc"])
@pytest.mark.parametrize("train", [train_dqn, train_ppo], ids=["dqn", "ppo"])
def test_learns_identical_parameters(train, backend):
    """Tianshou's DQN (off-policy, with a random warm-up) and PPO (on-policy)."""
    want = train(native)
    got = train(lambda n: face(n, backend))
    assert_same_training(got, want)
    assert want["test_episodes"] >= 8  # 4 test episodes per test, from 3 envs: subsets stepped


# -- the calls a Collector makes, against DummyVectorEnv ---------------------------------

def assert_same(got: tuple, want: tuple, what: str) -> None:
    for k, (g, w) in enumerate(zip(got, want)):
        if isinstance(w, np.ndarray) and w.dtype != object:
            np.testing.assert_array_equal(g, w, err_msg=f"{what}: item {k}")
            assert g.dtype == w.dtype, f"{what}: item {k} dtype {g.dtype} != {w.dtype}"
        else:
            assert list(g) == list(w), f"{what}: item {k}"


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
def test_subsets_resets_and_seeds_match_dummy_vector_env(backend):
    n = 5
    a, b = native(n), face(n, backend)
    assert a.seed(7) == b.seed(7)
    assert_same(b.reset(), a.reset(), "reset")
    rng = np.random.default_rng(0)
    finished: set[int] = set()
    for t in range(200):
        live = [i for i in range(n) if i not in finished]
        ids = list(rng.permutation(live)[: int(rng.integers(1, len(live) + 1))])
        act = rng.integers(0, 2, size=len(ids))
        got, want = b.step(act, ids), a.step(act, ids)
        assert_same(got, want, f"step {t} ids {ids}")
        finished |= {int(i) for i, t_, u in zip(ids, want[2], want[3]) if t_ or u}
        if finished and rng.random() < 0.5:  # reset some finished envs (and now and then a live one)
            reset = sorted(finished)[: int(rng.integers(1, len(finished) + 1))]
            if rng.random() < 0.2:
                reset.append(next(i for i in range(n) if i not in reset))
            seed = int(rng.integers(100)) if rng.random() < 0.1 else None
            kwargs = {} if seed is None else {"seed": seed}
            assert_same(b.reset(reset, **kwargs), a.reset(reset, **kwargs), f"reset {reset} at {t}")
            finished -= set(reset)
        if not [i for i in range(n) if i not in finished]:
            assert_same(b.reset(), a.reset(), "reset all")
            finished.clear()
    assert a.seed([3, 1, 4, 1, 5]) == b.seed([3, 1, 4, 1, 5])
    assert_same(b.reset(), a.reset(), "reset after a list of seeds")
    a.close()
    b.close()


def test_async_each_env_follows_its_synchronous_trajectory():
    n = 4
    sync, pool = face(n), face(n, "subproc", wait_num=2)
    assert pool.is_async and not sync.is_async
    for envs in (sync, pool):
        envs.seed(11)
        envs.reset()
    traj_sync: dict[int, list] = {i: [] for i in range(n)}
    traj_pool: dict[int, list] = {i: [] for i in range(n)}
    ready = list(range(n))
    for t in range(60):
        acts = np.array([(i + len(traj_pool[i])) % 2 for i in ready])
        obs, rew, term, trunc, info = pool.step(acts, ready)
        ready = [i["env_id"] for i in info]
        assert len(ready) == 2
        assert sorted(pool.ready_id + pool.waiting_id) == list(range(n))
        assert set(ready) <= set(pool.ready_id) and not set(ready) & set(pool.waiting_id)
        for k, i in enumerate(ready):
            traj_pool[i].append((obs[k].copy(), rew[k], term[k], trunc[k]))
        done = [i for k, i in enumerate(ready) if term[k] or trunc[k]]
        if done:
            pool.reset(done)
    for i in range(n):  # replay env i alone, synchronously, with the same actions
        for s in range(len(traj_pool[i])):
            obs, rew, term, trunc, info = sync.step(np.array([(i + s) % 2]), [i])
            traj_sync[i].append((obs[0], rew[0], term[0], trunc[0]))
            if term[0] or trunc[0]:
                sync.reset([i])
        for s, (x, y) in enumerate(zip(traj_pool[i], traj_sync[i])):
            np.testing.assert_array_equal(x[0], y[0], err_msg=f"env {i} step {s}")
            assert x[1:] == y[1:], f"env {i} step {s}"
    with pytest.raises(AssertionError, match="stepping now"):
        pool.reset(pool.waiting_id)
    pool.step(None)  # collects the envs still stepping
    sync.close()
    pool.close()


# -- attributes, render, close, errors ----------------------------------------------

def test_attributes_render_and_close():
    envs = TianshouVectorEnv(mv.DummyVecEnv([lambda: gym.make(TASK, render_mode="rgb_array")] * 3, env_seed=None))
    assert envs.env_num == len(envs) == 3 and envs.action_space == [gym.spaces.Discrete(2)] * 3
    assert envs.get_env_attr("render_mode", [0, 2]) == ["rgb_array", "rgb_array"]
    envs.set_env_attr("my_flag", 5, id=1)
    assert envs.get_env_attr("my_flag", 1) == [5]
    envs.reset()
    frames = envs.render()
    assert len(frames) == 3 and frames[0].shape[-1] == 3
    envs.close()
    envs.close()  # twice is fine
    with pytest.raises(AssertionError, match="after close"):
        envs.reset()


def test_errors():
    with pytest.raises(ValueError, match=r"autoreset='same_step' \(or 'fast'\), or disabled, got 'next_step'"):
        TianshouVectorEnv(mv.DummyVecEnv([cartpole] * 2, autoreset="next_step"))
    with pytest.raises(ValueError, match=r"autoreset='same_step' \(or 'fast'\), got 'disabled'"):
        TianshouVectorEnv(mv.make("classic/tictactoe", num_envs=2, autoreset="disabled"), agents="turns")
    with pytest.raises(ValueError, match="agents='axis'"):
        TianshouVectorEnv(mv.make("mpe/simple_spread", num_envs=2))
    with pytest.raises(ValueError, match="wait_num should be in"):
        face(2, wait_num=3)
    with pytest.raises(ValueError, match="timeout is 0, it should be a positive number of seconds"):
        face(2, wait_num=1, timeout=0)
    envs = face(3)
    with pytest.raises(RuntimeError, match="reset"):
        envs.step([0, 0, 0])
    envs.reset()
    with pytest.raises(IndexError, match="allowed: 0 to 2"):
        envs.step([0], [3])
    with pytest.raises(ValueError, match="2 actions for 1 envs"):
        envs.step([0, 1], [0])
    with pytest.raises(TypeError, match="reset takes seed and options"):
        envs.reset(flavour=1)
    for _ in range(500):  # run env 0 to its episode's end
        *_, term, trunc, _ = envs.step([1], [0])
        if term[0] or trunc[0]:
            break
    with pytest.raises(RuntimeError, match=r"envs \[0\] finished their episode"):
        envs.step([0], [0])
    envs.close()

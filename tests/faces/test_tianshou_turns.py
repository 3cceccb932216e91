"""The Tianshou face's turn-based layout (``agents="turns"``): Tianshou's own multi-agent
convention, that of its ``PettingZooEnv`` (one agent per step, obs ``{agent_id, obs, mask}``,
``MultiAgentPolicyManager``), over marl_vec's turn-based batch.

Runs in .venv-tianshou (scripts/install/install_tianshou_venv.sh); skipped where tianshou is
not installed.

- Tianshou's tic-tac-toe tutorial (tianshou 2.0.1's test/pettingzoo/tic_tac_toe.py, the
  program of its docs/02_deep_dives/L6_MARL.ipynb: a DQN learner as player 2 against
  Tianshou's masked random player, ``MultiAgentOffPolicyAlgorithm``, its trainer), run
  with only its vector envs swapped, learns identical parameters and collects identical
  data and stats on the face (over DummyVecEnv and SubprocVecEnv) and on its native
  ``DummyVectorEnv`` of ``PettingZooEnv``, at the same seed (a short run).
- Step by step, with random legal moves, subsets of envs and resets of finished games,
  the face returns what ``DummyVectorEnv`` of ``PettingZooEnv`` returns (tic-tac-toe
  and connect four): every dict of the observation, rewards, flags, infos.
- The errors: a simultaneous-move VecEnv given to ``agents="turns"``, a turn-based one
  given to ``"single"``/``"axis"``, a wrong action shape, stepping a finished game.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import marl_vec as mv

pytest.importorskip("tianshou", reason="tianshou runs in its own venv: bash scripts/install/install_tianshou_venv.sh")
torch = pytest.importorskip("torch")

from pettingzoo.classic import connect_four_v3, tictactoe_v3  # noqa: E402
from tianshou.algorithm import DQN, MARLRandomDiscreteMaskedOffPolicyAlgorithm  # noqa: E402
from tianshou.algorithm import MultiAgentOffPolicyAlgorithm  # noqa: E402
from tianshou.algorithm.modelfree.dqn import DiscreteQLearningPolicy  # noqa: E402
from tianshou.algorithm.optim import AdamOptimizerFactory  # noqa: E402
from tianshou.data import Batch, Collector, CollectStats, VectorReplayBuffer  # noqa: E402
from tianshou.env import DummyVectorEnv  # noqa: E402
from tianshou.env.pettingzoo_env import PettingZooEnv  # noqa: E402
from tianshou.trainer import OffPolicyTrainerParams  # noqa: E402

from marl_vec.compat.tianshou import TianshouVectorEnv  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
# Per-agent returns are (episodes, 2): Tianshou's stats flatten them and warn on every collect.
logging.getLogger("tianshou.data.stats").setLevel(logging.ERROR)
GAMES = {"tictactoe": tictactoe_v3, "connect_four": connect_four_v3}


def native(n: int, game: str = "tictactoe") -> DummyVectorEnv:
    return DummyVectorEnv([lambda: PettingZooEnv(GAMES[game].env())] * n)


def face(n: int, game: str = "tictactoe", backend: str = "dummy") -> TianshouVectorEnv:
    extra = {"num_workers": 2} if backend == "subproc" else {}
    return TianshouVectorEnv(mv.make(f"classic/{game}", num_envs=n, backend=backend, env_seed=None, **extra),
                             agents="turns")


# -- Tianshou's tic-tac-toe tutorial, its vector envs swapped ------------------------------

def tutorial_args(**short) -> SimpleNamespace:
    """The tutorial's arguments (its get_parser defaults), with ``short`` overrides."""
    args = SimpleNamespace(seed=1626, eps_test=0.05, eps_train=0.1, buffer_size=20000, lr=1e-4, gamma=0.9,
                           n_step=3, target_update_freq=320, epoch=50, epoch_num_steps=1000,
                           collection_step_num_env_steps=10, update_per_step=0.1, batch_size=64,
                           hidden_sizes=[128, 128, 128, 128], num_training_envs=10, num_test_envs=10,
                           win_rate=0.6, agent_id=2, device="cpu")
    for key, value in short.items():
        setattr(args, key, value)
    return args


def get_agents(args: SimpleNamespace) -> tuple[MultiAgentOffPolicyAlgorithm, list]:
    """The tutorial's get_agents (no resume or opponent paths): a DQN learner against
    Tianshou's masked random player, arranged by ``args.agent_id``."""
    from tianshou.utils.net.common import Net

    env = PettingZooEnv(tictactoe_v3.env())
    observation_space = env.observation_space.spaces["observation"]
    net = Net(state_shape=observation_space.shape, action_shape=int(env.action_space.n),
              hidden_sizes=args.hidden_sizes).to(args.device)
    learner = DQN(policy=DiscreteQLearningPolicy(model=net, action_space=env.action_space,
                                                 eps_training=args.eps_train, eps_inference=args.eps_test),
                  optim=AdamOptimizerFactory(lr=args.lr), n_step_return_horizon=args.n_step, gamma=args.gamma,
                  target_update_freq=args.target_update_freq)
    opponent = MARLRandomDiscreteMaskedOffPolicyAlgorithm(action_space=env.action_space)
    agents = [learner, opponent] if args.agent_id == 1 else [opponent, learner]
    return MultiAgentOffPolicyAlgorithm(algorithms=agents, env=env), env.agents


def train_agent(args: SimpleNamespace, make_envs, log_dir: Path) -> dict:
    """The tutorial's train_agent with ``make_envs(n)`` for its ``DummyVectorEnv([get_env] * n)``;
    returns what must be reproduced."""
    from torch.utils.tensorboard import SummaryWriter
    from tianshou.utils import TensorboardLogger

    training_envs, test_envs = make_envs(args.num_training_envs), make_envs(args.num_test_envs)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    training_envs.seed(args.seed)
    test_envs.seed(args.seed)
    marl_algorithm, agents = get_agents(args)
    training_collector = Collector[CollectStats](
        marl_algorithm, training_envs, VectorReplayBuffer(args.buffer_size, len(training_envs)),
        exploration_noise=True)
    test_collector = Collector[CollectStats](marl_algorithm, test_envs, exploration_noise=True)
    training_collector.reset()
    training_collector.collect(n_step=args.batch_size * args.num_training_envs)
    logger = TensorboardLogger(SummaryWriter(str(log_dir)))
    player = agents[args.agent_id - 1]

    def save_best_fn(algorithm) -> None:
        torch.save(algorithm.get_algorithm(player).state_dict(), log_dir / "policy.pth")

    result = marl_algorithm.run_training(OffPolicyTrainerParams(
        training_collector=training_collector, test_collector=test_collector, max_epochs=args.epoch,
        epoch_num_steps=args.epoch_num_steps, collection_step_num_env_steps=args.collection_step_num_env_steps,
        test_step_num_episodes=args.num_test_envs, batch_size=args.batch_size,
        stop_fn=lambda mean_rewards: mean_rewards >= args.win_rate, save_best_fn=save_best_fn,
        update_step_num_gradient_steps_per_sample=args.update_per_step, logger=logger, test_in_training=False,
        multi_agent_return_reduction=lambda rews: rews[:, args.agent_id - 1], show_progress=False))
    out = {
        "params": {k: v.clone() for k, v in marl_algorithm.state_dict().items() if torch.is_tensor(v)},
        "result": {k: v for k, v in vars(result).items() if k != "timing"},
        "buffer": flat(training_collector.buffer[np.arange(len(training_collector.buffer))]),
        "counts": (training_collector.collect_step, training_collector.collect_episode,
                   test_collector.collect_step, test_collector.collect_episode),
    }
    training_collector.close()
    test_collector.close()
    return out


def flat(batch: Batch, prefix: str = "") -> dict[str, np.ndarray]:
    """Every array of a (nested) Batch by its dotted key."""
    out: dict[str, np.ndarray] = {}
    for key, value in batch.items():
        if isinstance(value, Batch):
            out.update(flat(value, f"{prefix}{key}."))
        else:
            out[prefix + key] = np.asarray(value)
    return out


SHORT = {"epoch": 2, "epoch_num_steps": 200}  # a short run: two epochs, each ending with 10 test games


@pytest.fixture(scope="module")
def native_run(tmp_path_factory) -> dict:
    """The tutorial on its native DummyVectorEnv of PettingZooEnv, once for both backends."""
    return train_agent(tutorial_args(**SHORT), native, tmp_path_factory.mktemp("native"))


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["dummy", "subproc"])
def test_tic_tac_toe_tutorial_learns_identical_parameters(backend, native_run, tmp_path):
    want = native_run
    got = train_agent(tutorial_args(**SHORT), lambda n: face(n, backend=backend), tmp_path / "face")
    assert got["params"].keys() == want["params"].keys() and got["params"]
    for name, value in want["params"].items():
        assert torch.equal(got["params"][name], value), f"parameter {name} differs"
    assert got["result"] == want["result"]
    assert got["counts"] == want["counts"]
    assert got["buffer"].keys() == want["buffer"].keys()
    for key, value in want["buffer"].items():
        # PettingZooEnv stacks tic-tac-toe's Python int rewards (int64); the face's are floats.
        np.testing.assert_array_equal(got["buffer"][key], value, err_msg=key)
    assert want["result"]["update_step"] > 0 and want["counts"][3] >= 20  # it learned; test games were played
    assert (tmp_path / "face" / "policy.pth").exists()


# -- step by step against DummyVectorEnv of PettingZooEnv ----------------------------------

def assert_same_obs(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.dtype == object and got.shape == want.shape, what
    for k, (g, w) in enumerate(zip(got, want)):
        assert set(g) == set(w) == {"agent_id", "obs", "mask"}, what
        assert g["agent_id"] == w["agent_id"], f"{what}: env row {k}"
        np.testing.assert_array_equal(g["obs"], w["obs"], err_msg=f"{what}: env row {k}")
        assert g["obs"].dtype == w["obs"].dtype
        np.testing.assert_array_equal(g["mask"], np.asarray(w["mask"]), err_msg=f"{what}: env row {k}")


@pytest.mark.parametrize("game", ["tictactoe", "connect_four"])
def test_every_step_equals_pettingzoo_env(game):
    n = 4
    got_env, want_env = face(n, game), native(n, game)
    got_env.seed(3), want_env.seed(3)
    got, want = got_env.reset(), want_env.reset()
    assert_same_obs(got[0], want[0], "reset")
    assert list(got[1]) == list(want[1])
    current = want[0].copy()
    rng = np.random.default_rng(0)
    ends = 0
    for t in range(150):
        ids = sorted(rng.choice(n, size=int(rng.integers(1, n + 1)), replace=False).tolist())
        if t % 3 == 0:
            ids = ids[::-1]  # any order
        moves = np.array([rng.choice(np.flatnonzero(current[i]["mask"])) for i in ids])
        got, want = got_env.step(moves, ids), want_env.step(moves, ids)
        what = f"step {t} envs {ids}"
        assert_same_obs(got[0], want[0], what)
        for k in (1, 2, 3):
            np.testing.assert_array_equal(got[k], want[k], err_msg=what)
        assert got[1].shape == (len(ids), 2) and got[2].dtype == got[3].dtype == bool
        assert list(got[4]) == list(want[4]), what
        current[ids] = want[0]
        done = [i for i, d in zip(ids, want[2] | want[3]) if d]
        if done:
            ends += len(done)
            if t % 2:
                done = done[::-1]
            got, want = got_env.reset(done), want_env.reset(done)
            assert_same_obs(got[0], want[0], f"reset {done}")
            current[done] = want[0]
    assert ends >= 2 * n
    got_env.close()
    want_env.close()


def test_agents_and_spaces_as_on_pettingzoo_env():
    envs, one = face(2), PettingZooEnv(tictactoe_v3.env())
    assert envs.agents == one.agents and envs.agent_idx == one.agent_idx
    assert envs.action_space[0] == one.action_space
    assert envs.observation_space[0] == one.observation_space.spaces["observation"]
    # MultiAgentPolicyManager takes the face where it takes a PettingZooEnv.
    random = [MARLRandomDiscreteMaskedOffPolicyAlgorithm(action_space=one.action_space) for _ in range(2)]
    algorithm = MultiAgentOffPolicyAlgorithm(algorithms=random, env=envs)
    envs.seed(0)
    collector = Collector[CollectStats](algorithm, envs)
    stats = collector.collect(n_episode=4, reset_before_collect=True)
    assert stats.n_collected_episodes == 4 and np.asarray(stats.returns).shape == (4, 2)
    envs.close()


# -- errors -----------------------------------------------------------------------------------

def test_a_simultaneous_vecenv_is_refused_by_turns():
    venv = mv.make("mpe/simple_spread", num_envs=2, env_seed=None)
    with pytest.raises(ValueError, match=r"agents='turns' serves turn-based games .* move together: use agents='axis'"):
        TianshouVectorEnv(venv, agents="turns")
    venv.close()


@pytest.mark.parametrize("agents", ["single", "axis"])
def test_a_turn_based_vecenv_needs_turns(agents):
    venv = mv.make("classic/tictactoe", num_envs=2, env_seed=None)
    with pytest.raises(ValueError, match=rf"tictactoe_v3 is turn-based .* agents='{agents}' cannot serve it: "
                                         "use agents='turns'"):
        TianshouVectorEnv(venv, agents=agents)
    venv.close()


def test_wrong_moves_and_finished_games_raise():
    envs = face(2)
    envs.seed(0)
    envs.reset()
    with pytest.raises(ValueError, match=r"agents='turns' takes one move per env \(shape \(2,\)\), got shape \(2, 2\)"):
        envs.step(np.zeros((2, 2), dtype=np.int64))
    envs.step(np.array([0, 0]))  # player_1 takes square 0 in both games
    with pytest.raises(ValueError, match=r"illegal move 0 for env 1 \(tictactoe_v3\), agent 'player_2' to move"):
        envs.step(np.array([0]), id=[1])
    for move in (3, 1, 4, 2):  # player_1 fills the left column (0, 1, 2) in env 0
        *_, terminated, truncated, _ = envs.step(np.array([move]), id=[0])
    assert terminated.tolist() == [True] and truncated.tolist() == [False]
    with pytest.raises(RuntimeError, match=r"envs \[0\] finished their episode: reset\(env_id\) them"):
        envs.step(np.array([5]), id=[0])
    envs.close()


@pytest.mark.slow
def test_train_with_script_plays_tictactoe():
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "train_with" / "tianshou_train.py"), "tictactoe",
                          "--epochs", "1", "--epoch-steps", "200", "--num-envs", "4"],
                         capture_output=True, text=True, timeout=900, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1].startswith("first_return=")

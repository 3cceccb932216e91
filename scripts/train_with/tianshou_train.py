#!/usr/bin/env python
"""Train with Tianshou on marl_vec, through TianshouVectorEnv (marl_vec.compat.tianshou).

Three tasks:

- ``ppo``: Tianshou's own PPO, unchanged, on a single-agent marl_vec config
  (default configs/gym/cartpole.yaml), its train and test collectors on the face.
- ``spread``: simultaneous-move multi-agent, the face's agent axis
  (``agents="axis"``) on a multi-agent config (default configs/mpe/simple_spread.yaml,
  any discrete-action config works, e.g. configs/lbf/8x8-2p-2f-coop.yaml), with a
  policy of its own: one network shared by every agent (the agent axis is a
  batch axis to it), available actions masked, trained by REINFORCE on
  Tianshou's Collector and replay buffer. Tianshou has no simultaneous-move
  multi-agent algorithm; this is the pattern to build one on.
- ``tictactoe``: turn-based, Tianshou's own multi-agent convention (``agents="turns"``:
  one agent per step, obs ``{agent_id, obs, mask}``) on a turn-based config (default
  configs/classic/tictactoe.yaml; configs/classic/connect_four.yaml works too), as
  Tianshou's tic-tac-toe tutorial trains it: its DQN learner in seat ``--seat`` (1 or 2,
  default 2) against its masked random player, ``MultiAgentOffPolicyAlgorithm``, its
  off-policy trainer, the learner's return as the test metric.

Runs in the Tianshou venv (Tianshou 2.0.1 pins deepdiff<8):

    bash scripts/install/install_tianshou_venv.sh
    .venv-tianshou/bin/python scripts/train_with/tianshou_train.py ppo --epochs 5
    .venv-tianshou/bin/python scripts/train_with/tianshou_train.py ppo --backend subproc
    .venv-tianshou/bin/python scripts/train_with/tianshou_train.py spread --iterations 30
    .venv-tianshou/bin/python scripts/train_with/tianshou_train.py spread configs/lbf/8x8-2p-2f-coop.yaml
    .venv-tianshou/bin/python scripts/train_with/tianshou_train.py tictactoe --epochs 10 --seat 1

``spread`` prints ``iteration=I episodes=N return=R`` (the mean team return per
episode of that iteration's collect), ``ppo`` and ``tictactoe`` Tianshou's epoch lines;
then a last line ``first_return=X final_return=Y`` (``ppo``, ``tictactoe``: the
(learner's) test return before training and the trainer's best test return).
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

import numpy as np
import torch

import marl_vec as mv
from marl_vec.compat.tianshou import TianshouVectorEnv


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("task", choices=["ppo", "spread", "tictactoe"])
    parser.add_argument("config", nargs="?", default=None,
                        help="a marl_vec config (ppo: configs/gym/cartpole.yaml; spread: configs/mpe/simple_spread.yaml; "
                             "tictactoe: configs/classic/tictactoe.yaml)")
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--backend", default="dummy", choices=["dummy", "subproc", "ray"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=5, help="ppo, tictactoe: Tianshou trainer epochs")
    parser.add_argument("--epoch-steps", type=int, default=5000, help="ppo, tictactoe: environment steps per epoch")
    parser.add_argument("--seat", type=int, default=2, choices=[1, 2], help="tictactoe: the learner's seat")
    parser.add_argument("--iterations", type=int, default=20, help="spread: collect-and-update rounds")
    parser.add_argument("--lr", type=float, default=None)
    return parser.parse_args(argv)


def make_face(config: str, args: argparse.Namespace, agents: str) -> TianshouVectorEnv:
    # env_seed=None: seeds come from Tianshou's envs.seed(), as for its own vector envs.
    venv = mv.make(config, num_envs=args.num_envs, backend=args.backend, env_seed=None)
    return TianshouVectorEnv(venv, agents=agents)


# -- ppo: Tianshou's own algorithm, unchanged ---------------------------------------------

def train_ppo(args: argparse.Namespace) -> tuple[float, float]:
    import tianshou as ts
    from tianshou.algorithm.modelfree.reinforce import DiscreteActorPolicy
    from tianshou.algorithm.optim import AdamOptimizerFactory
    from tianshou.data import CollectStats
    from tianshou.trainer import OnPolicyTrainerParams
    from tianshou.utils.net.common import Net
    from tianshou.utils.net.discrete import DiscreteActor, DiscreteCritic

    config = args.config or "gym/cartpole"
    train_envs, test_envs = make_face(config, args, "single"), make_face(config, args, "single")
    train_envs.seed(args.seed)
    test_envs.seed(args.seed + 1000)
    obs_shape = train_envs.observation_space[0].shape
    action_space = train_envs.action_space[0]
    actor = DiscreteActor(preprocess_net=Net(state_shape=obs_shape, hidden_sizes=[64, 64]),
                          action_shape=action_space.n)
    critic = DiscreteCritic(preprocess_net=Net(state_shape=obs_shape, hidden_sizes=[64, 64]))
    algorithm = ts.algorithm.PPO(policy=DiscreteActorPolicy(actor=actor, action_space=action_space), critic=critic,
                                 optim=AdamOptimizerFactory(lr=args.lr or 1e-3), gamma=0.99)
    train_collector = ts.data.Collector[CollectStats](algorithm, train_envs,
                                                      ts.data.VectorReplayBuffer(20000, args.num_envs))
    test_collector = ts.data.Collector[CollectStats](algorithm, test_envs)
    test_collector.reset()
    first = float(test_collector.collect(n_episode=args.num_envs).returns_stat.mean)
    result = algorithm.run_training(OnPolicyTrainerParams(
        training_collector=train_collector, test_collector=test_collector, max_epochs=args.epochs,
        epoch_num_steps=args.epoch_steps, collection_step_num_env_steps=1024, test_step_num_episodes=args.num_envs,
        batch_size=256, update_step_num_repetitions=4, show_progress=False))
    final = float(result.best_reward)
    train_envs.close()
    test_envs.close()
    return first, final


# -- spread: a policy of its own over the agent axis ----------------------------------------

def shared_agent_policy(obs_dim: int, n_actions: int, action_space: Any, observation_space: Any) -> Any:
    """A Tianshou Policy with one network for every agent: ``batch.obs.obs`` is
    (R, A, obs_dim), ``batch.obs.mask`` the available actions (R, A, n)."""
    from tianshou.algorithm.algorithm_base import Policy
    from tianshou.data import Batch

    class SharedAgentPolicy(Policy):
        def __init__(self) -> None:
            super().__init__(action_space=action_space, observation_space=observation_space, action_scaling=False,
                             action_bound_method=None)
            self.net = torch.nn.Sequential(torch.nn.Linear(obs_dim, 64), torch.nn.Tanh(),
                                           torch.nn.Linear(64, n_actions))

        def logits(self, obs: Any, mask: Any) -> torch.Tensor:
            out = self.net(torch.as_tensor(obs, dtype=torch.float32))
            return out.masked_fill(~torch.as_tensor(mask, dtype=torch.bool), -1e9)

        def forward(self, batch: Any, state: Any = None, **kwargs: Any) -> Any:
            with torch.no_grad():
                dist = torch.distributions.Categorical(logits=self.logits(batch.obs.obs, batch.obs.mask))
            return Batch(act=dist.sample().numpy(), state=state)

    return SharedAgentPolicy()


def returns_to_go(rew: np.ndarray, done: np.ndarray, gamma: float) -> np.ndarray:
    """Discounted returns within each episode of one env's transitions, in time order."""
    out = np.zeros_like(rew)
    acc = np.zeros(rew.shape[1:], dtype=rew.dtype)
    for t in range(len(rew) - 1, -1, -1):
        acc = rew[t] + gamma * acc * (not done[t])
        out[t] = acc
    return out


def train_spread(args: argparse.Namespace) -> tuple[float, float]:
    import tianshou as ts
    from tianshou.data import CollectStats

    torch.manual_seed(args.seed)
    config = args.config or "mpe/simple_spread"
    envs = make_face(config, args, "axis")
    envs.seed(args.seed)
    spec = envs.venv.spec
    if not spec.discrete:
        raise SystemExit(f"spread: {config} has continuous actions; this example's policy is for discrete ones")
    policy = shared_agent_policy(int(np.prod(spec.obs_shape)), spec.n_actions, envs.action_space[0],
                                 envs.observation_space[0])
    optim = torch.optim.Adam(policy.net.parameters(), lr=args.lr or 3e-3)
    buffer = ts.data.VectorReplayBuffer(args.num_envs * 2000, args.num_envs)
    collector = ts.data.Collector[CollectStats](policy, envs, buffer)
    collector.reset()
    first = final = float("nan")
    for it in range(args.iterations):
        collector.reset_buffer()
        stats = collector.collect(n_episode=args.num_envs)
        team = float(np.mean([np.sum(r) for r in stats.returns]))  # per episode: summed over agents
        first = team if it == 0 else first
        final = team
        print(f"iteration={it} episodes={stats.n_collected_episodes} return={team:.3f}", flush=True)
        # REINFORCE over each env's episodes: log pi(a|o) of every live agent times its return-to-go.
        losses = []
        for sub in buffer.buffers:
            if len(sub) == 0:
                continue
            b = sub[np.arange(len(sub))]
            g = returns_to_go(np.asarray(b.rew, dtype=np.float32), np.asarray(b.done), 0.95)
            g = (g - g.mean()) / (g.std() + 1e-8)
            logp = torch.distributions.Categorical(logits=policy.logits(b.obs.obs, b.obs.mask)).log_prob(
                torch.as_tensor(np.asarray(b.act)))
            live = torch.as_tensor(np.asarray(b.obs.agent_mask), dtype=torch.float32)
            losses.append(-(logp * torch.as_tensor(g) * live).sum() / live.sum())
        optim.zero_grad()
        torch.stack(losses).mean().backward()
        optim.step()
    envs.close()
    return first, final


# -- tictactoe: turn-based, Tianshou's PettingZooEnv convention ------------------------------

def train_tictactoe(args: argparse.Namespace) -> tuple[float, float]:
    import tianshou as ts
    from tianshou.algorithm import DQN, MARLRandomDiscreteMaskedOffPolicyAlgorithm, MultiAgentOffPolicyAlgorithm
    from tianshou.algorithm.modelfree.dqn import DiscreteQLearningPolicy
    from tianshou.algorithm.optim import AdamOptimizerFactory
    from tianshou.data import CollectStats
    from tianshou.trainer import OffPolicyTrainerParams
    from tianshou.utils.net.common import Net

    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    config = args.config or "classic/tictactoe"
    train_envs, test_envs = make_face(config, args, "turns"), make_face(config, args, "turns")
    train_envs.seed(args.seed)
    test_envs.seed(args.seed + 1000)
    action_space = train_envs.action_space[0]
    net = Net(state_shape=train_envs.observation_space[0].shape, action_shape=action_space.n,
              hidden_sizes=[128, 128, 128, 128])
    learner = DQN(policy=DiscreteQLearningPolicy(model=net, action_space=action_space, eps_training=0.1,
                                                 eps_inference=0.05),
                  optim=AdamOptimizerFactory(lr=args.lr or 1e-4), gamma=0.9, n_step_return_horizon=3,
                  target_update_freq=320)
    opponent = MARLRandomDiscreteMaskedOffPolicyAlgorithm(action_space=action_space)
    seats = [learner, opponent] if args.seat == 1 else [opponent, learner]
    # The face has the agents and agent_idx that MultiAgentPolicyManager reads from a PettingZooEnv.
    algorithm = MultiAgentOffPolicyAlgorithm(algorithms=seats, env=train_envs)
    train_collector = ts.data.Collector[CollectStats](
        algorithm, train_envs, ts.data.VectorReplayBuffer(20000, args.num_envs), exploration_noise=True)
    test_collector = ts.data.Collector[CollectStats](algorithm, test_envs, exploration_noise=True)
    test_collector.reset()
    first = float(np.asarray(test_collector.collect(n_episode=args.num_envs).returns)[:, args.seat - 1].mean())
    train_collector.reset()
    train_collector.collect(n_step=64 * args.num_envs)  # warm-up, as the tutorial does
    result = algorithm.run_training(OffPolicyTrainerParams(
        training_collector=train_collector, test_collector=test_collector, max_epochs=args.epochs,
        epoch_num_steps=args.epoch_steps, collection_step_num_env_steps=10, test_step_num_episodes=args.num_envs,
        batch_size=64, update_step_num_gradient_steps_per_sample=0.1, test_in_training=False,
        multi_agent_return_reduction=lambda rews: rews[:, args.seat - 1], show_progress=False))
    train_envs.close()
    test_envs.close()
    return first, float(result.best_reward)


TASKS = {"ppo": train_ppo, "spread": train_spread, "tictactoe": train_tictactoe}


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    # Per-agent returns (spread, tictactoe) are (episodes, A): Tianshou's stats flatten them, and warn each time.
    logging.getLogger("tianshou.data.stats").setLevel(logging.ERROR)
    torch.set_num_threads(1)  # small networks: more threads mostly contend for the cores
    first, final = TASKS[args.task](args)
    print(f"first_return={first:.3f} final_return={final:.3f}")


if __name__ == "__main__":
    main()

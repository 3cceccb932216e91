"""A compact PPO in the structure of CleanRL's ``ppo.py`` (discrete actions, CartPole),
run on any gymnasium ``VectorEnv``: gymnasium's ``SyncVectorEnv`` or marl_vec's
``GymVectorEnv`` face over any backend.

It exists to prove the face on a real trainer: the same seed gives the same
episodes (returns and lengths, in order) and bit-identical parameters on both.
As in CleanRL, each env carries gymnasium's ``RecordEpisodeStatistics``; episodes
are read from ``infos["final_info"]["episode"]`` (same-step autoreset) or
``infos["episode"]`` (next-step).

With ``Args.array_backend == "torch"`` the loop takes torch tensors from the env
(the face over ``DummyVecEnv(..., array_backend="torch")``, or gymnasium's
``NumpyToTorch``) and sends torch actions: no ``torch.Tensor(numpy_array)`` on
the hot path. The same seed gives the same parameters either way.

Usage::

    python scripts/train/cleanrl_ppo.py --total-timesteps 4096 --backend subproc
    python scripts/train/cleanrl_ppo.py --array-backend torch     # the face hands out torch tensors
"""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from torch.distributions.categorical import Categorical


@dataclass
class Args:
    seed: int = 1
    total_timesteps: int = 4096
    learning_rate: float = 2.5e-4
    num_envs: int = 4
    num_steps: int = 128
    anneal_lr: bool = True
    gamma: float = 0.99
    gae_lambda: float = 0.95
    num_minibatches: int = 4
    update_epochs: int = 4
    norm_adv: bool = True
    clip_coef: float = 0.2
    clip_vloss: bool = True
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    # "numpy": the env returns numpy arrays (CleanRL's own loop); "torch": torch tensors.
    array_backend: str = "numpy"

    @property
    def batch_size(self) -> int:
        return self.num_envs * self.num_steps

    @property
    def minibatch_size(self) -> int:
        return self.batch_size // self.num_minibatches


@dataclass
class Result:
    episode_returns: list[float] = field(default_factory=list)
    episode_lengths: list[int] = field(default_factory=list)
    parameters: list[np.ndarray] = field(default_factory=list)


def make_env(env_id: str = "CartPole-v1") -> Callable[[], gym.Env]:
    def thunk() -> gym.Env:
        return gym.wrappers.RecordEpisodeStatistics(gym.make(env_id))
    return thunk


def layer_init(layer: nn.Linear, std: float = np.sqrt(2), bias_const: float = 0.0) -> nn.Linear:
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self, envs: gym.vector.VectorEnv):
        super().__init__()
        obs_dim = int(np.prod(envs.single_observation_space.shape))
        self.critic = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, 1), std=1.0),
        )
        self.actor = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, envs.single_action_space.n), std=0.01),
        )

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x)

    def get_action_and_value(self, x: torch.Tensor, action: torch.Tensor | None = None):
        logits = self.actor(x)
        probs = Categorical(logits=logits)
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(x)


def _record_episodes(infos: dict[str, Any], result: Result) -> None:
    """Episodes from RecordEpisodeStatistics inside the envs, in env order."""
    where = infos.get("final_info", infos)
    if "episode" in where:
        ended = where["_episode"]
        result.episode_returns += where["episode"]["r"][ended].tolist()
        result.episode_lengths += where["episode"]["l"][ended].tolist()


def train(envs: gym.vector.VectorEnv, args: Args) -> Result:
    """CleanRL's ppo.py training loop on ``envs`` (closed at the end)."""
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = True
    device = torch.device("cpu")

    agent = Agent(envs).to(device)
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    obs = torch.zeros((args.num_steps, args.num_envs) + envs.single_observation_space.shape).to(device)
    actions = torch.zeros((args.num_steps, args.num_envs) + envs.single_action_space.shape).to(device)
    logprobs = torch.zeros((args.num_steps, args.num_envs)).to(device)
    rewards = torch.zeros((args.num_steps, args.num_envs)).to(device)
    dones = torch.zeros((args.num_steps, args.num_envs)).to(device)
    values = torch.zeros((args.num_steps, args.num_envs)).to(device)

    result = Result()
    num_iterations = args.total_timesteps // args.batch_size
    on_torch = args.array_backend == "torch"  # the env hands out tensors: no numpy conversions
    next_obs, _ = envs.reset(seed=args.seed)
    next_obs = next_obs.to(device) if on_torch else torch.Tensor(next_obs).to(device)
    next_done = torch.zeros(args.num_envs).to(device)

    for iteration in range(1, num_iterations + 1):
        if args.anneal_lr:
            frac = 1.0 - (iteration - 1.0) / num_iterations
            optimizer.param_groups[0]["lr"] = frac * args.learning_rate

        for step in range(0, args.num_steps):
            obs[step] = next_obs
            dones[step] = next_done
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs)
                values[step] = value.flatten()
            actions[step] = action
            logprobs[step] = logprob
            if on_torch:
                next_obs, reward, terminations, truncations, infos = envs.step(action)
                rewards[step] = reward.to(device).view(-1)
                next_obs, next_done = next_obs.to(device), (terminations | truncations).to(device, torch.float32)
            else:
                next_obs, reward, terminations, truncations, infos = envs.step(action.cpu().numpy())
                next_done = np.logical_or(terminations, truncations)
                rewards[step] = torch.tensor(reward).to(device).view(-1)
                next_obs, next_done = torch.Tensor(next_obs).to(device), torch.Tensor(next_done).to(device)
            _record_episodes(infos, result)

        with torch.no_grad():
            next_value = agent.get_value(next_obs).reshape(1, -1)
            advantages = torch.zeros_like(rewards).to(device)
            lastgaelam = 0
            for t in reversed(range(args.num_steps)):
                if t == args.num_steps - 1:
                    nextnonterminal = 1.0 - next_done
                    nextvalues = next_value
                else:
                    nextnonterminal = 1.0 - dones[t + 1]
                    nextvalues = values[t + 1]
                delta = rewards[t] + args.gamma * nextvalues * nextnonterminal - values[t]
                advantages[t] = lastgaelam = delta + args.gamma * args.gae_lambda * nextnonterminal * lastgaelam
            returns = advantages + values

        b_obs = obs.reshape((-1,) + envs.single_observation_space.shape)
        b_logprobs = logprobs.reshape(-1)
        b_actions = actions.reshape((-1,) + envs.single_action_space.shape)
        b_advantages = advantages.reshape(-1)
        b_returns = returns.reshape(-1)
        b_values = values.reshape(-1)

        b_inds = np.arange(args.batch_size)
        for _epoch in range(args.update_epochs):
            np.random.shuffle(b_inds)
            for start in range(0, args.batch_size, args.minibatch_size):
                mb_inds = b_inds[start:start + args.minibatch_size]
                _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[mb_inds], b_actions.long()[mb_inds])
                logratio = newlogprob - b_logprobs[mb_inds]
                ratio = logratio.exp()
                mb_advantages = b_advantages[mb_inds]
                if args.norm_adv:
                    mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)
                pg_loss1 = -mb_advantages * ratio
                pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
                pg_loss = torch.max(pg_loss1, pg_loss2).mean()
                newvalue = newvalue.view(-1)
                if args.clip_vloss:
                    v_loss_unclipped = (newvalue - b_returns[mb_inds]) ** 2
                    v_clipped = b_values[mb_inds] + torch.clamp(
                        newvalue - b_values[mb_inds], -args.clip_coef, args.clip_coef
                    )
                    v_loss_clipped = (v_clipped - b_returns[mb_inds]) ** 2
                    v_loss = 0.5 * torch.max(v_loss_unclipped, v_loss_clipped).mean()
                else:
                    v_loss = 0.5 * ((newvalue - b_returns[mb_inds]) ** 2).mean()
                loss = pg_loss - args.ent_coef * entropy.mean() + v_loss * args.vf_coef
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()

    envs.close()
    result.parameters = [p.detach().cpu().numpy().copy() for p in agent.parameters()]
    return result


def main() -> None:
    import marl_vec as mv
    from marl_vec.compat import GymVectorEnv

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--total-timesteps", type=int, default=4096)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--backend", default="dummy", choices=["dummy", "subproc"])
    parser.add_argument("--array-backend", default="numpy", choices=["numpy", "torch"],
                        help="torch: the face hands out torch tensors (DummyVecEnv only)")
    cli = parser.parse_args()
    if cli.array_backend == "torch" and cli.backend != "dummy":
        parser.error("--array-backend torch needs --backend dummy (the process backend returns numpy)")
    torch.set_num_threads(1)
    args = Args(seed=cli.seed, total_timesteps=cli.total_timesteps)
    fns = [make_env() for _ in range(args.num_envs)]
    theirs = train(gym.vector.SyncVectorEnv(fns, autoreset_mode="SameStep"), args)
    venv = mv.make_vec(fns, backend=cli.backend, env_seed=None, autoreset="same_step", array_backend=cli.array_backend)
    ours = train(GymVectorEnv(venv), replace(args, array_backend=cli.array_backend))
    same = ours.episode_returns == theirs.episode_returns and ours.episode_lengths == theirs.episode_lengths
    same_params = all(np.array_equal(a, b) for a, b in zip(ours.parameters, theirs.parameters))
    print(f"{len(ours.episode_returns)} episodes; same episodes: {same}; same parameters: {same_params}")


if __name__ == "__main__":
    main()

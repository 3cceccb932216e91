"""A compact CleanRL-style IPPO on VMAS balance, reading marl_vec's torch results directly.

One Gaussian actor and one critic, shared by the agents (parameter sharing, as
IPPO runs are usually set up), each seeing the agent's own observation. The
batch is ``mv.make("vmas/balance", backend="dummy", array_backend="torch")``:
``StepResult`` fields are torch tensors (``obs`` (E, A, obs), ``reward`` (E, A),
``done`` (E,), ``agent_mask`` (E, A), ``final_obs``), and actions go back as a
torch tensor, so no numpy array is made on a step. ``--array-backend numpy``
runs the same loop on numpy results (``torch.from_numpy`` of each field, actions
sent as ``Tensor.numpy()``): the same seed gives bit-identical parameters.

Episodes cut by the time limit are bootstrapped from the value of ``final_obs``
(same-step autoreset keeps it), folded into the reward; dead agents'
(``agent_mask`` False) samples do not count in the losses.

Usage::

    python scripts/train/cleanrl_ippo_vmas.py --num-envs 32 --iterations 20
    python scripts/train/cleanrl_ippo_vmas.py --array-backend numpy   # the same numbers through numpy
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn as nn
from torch.distributions.normal import Normal

import marl_vec as mv


@dataclass
class Args:
    seed: int = 1
    num_envs: int = 16
    num_steps: int = 32
    iterations: int = 10
    max_steps: int = 100  # VMAS balance's episode limit (the shipped config's)
    array_backend: str = "torch"  # "torch": tensors from the batch; "numpy": numpy, converted here
    learning_rate: float = 3e-4
    gamma: float = 0.99
    gae_lambda: float = 0.95
    update_epochs: int = 4
    num_minibatches: int = 4
    clip_coef: float = 0.2
    ent_coef: float = 0.0
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5


@dataclass
class Result:
    episode_returns: list[float] = field(default_factory=list)
    parameters: list[torch.Tensor] = field(default_factory=list)


def make_venv(args: Args) -> Any:
    """VMAS balance (the shipped config, ``max_steps`` overridden) as torch or numpy results."""
    config = mv.load_config("vmas/balance", {"env.kwargs.max_steps": args.max_steps})
    return mv.make(config, num_envs=args.num_envs, backend="dummy", env_seed=args.seed,
                   array_backend=args.array_backend)


def mlp(n_in: int, n_out: int, std: float) -> nn.Sequential:
    layers = [nn.Linear(n_in, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, n_out)]
    for layer in layers[::2]:
        nn.init.orthogonal_(layer.weight, 2 ** 0.5 if layer is not layers[-1] else std)
        nn.init.zeros_(layer.bias)
    return nn.Sequential(*layers)


class Agent(nn.Module):
    def __init__(self, obs_dim: int, act_dim: int):
        super().__init__()
        self.critic = mlp(obs_dim, 1, 1.0)
        self.actor_mean = mlp(obs_dim, act_dim, 0.01)
        self.actor_logstd = nn.Parameter(torch.zeros(act_dim))

    def value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x).squeeze(-1)

    def act(self, x: torch.Tensor, action: torch.Tensor | None = None) -> tuple[torch.Tensor, ...]:
        mean = self.actor_mean(x)
        dist = Normal(mean, self.actor_logstd.expand_as(mean).exp())
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action).sum(-1), dist.entropy().sum(-1), self.value(x)


def as_tensors(r: Any, on_torch: bool) -> tuple[torch.Tensor, ...]:
    """obs, reward, done, agent_mask, truncated, final_obs of a StepResult, as tensors: the
    result's own (torch mode), or ``torch.from_numpy`` of its arrays (numpy mode)."""
    fields = (r.obs, r.reward, r.done, r.agent_mask, r.truncated, r.final_obs)
    if on_torch:
        return fields
    return tuple(None if f is None else torch.from_numpy(f) for f in fields)


def train(args: Args) -> Result:
    """IPPO on VMAS balance for ``args.iterations`` updates; returns episodes and parameters."""
    torch.manual_seed(args.seed)
    on_torch = args.array_backend == "torch"
    venv = make_venv(args)
    spec = venv.spec
    low, high = (torch.as_tensor(b, dtype=torch.float32) for b in (spec.action.low, spec.action.high))
    agent = Agent(spec.obs_shape[0], spec.action.shape[0])
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    shape = (args.num_steps, args.num_envs, spec.n_agents)
    obs = torch.zeros(shape + spec.obs_shape)
    actions = torch.zeros(shape + spec.action.shape)
    logprobs, rewards, dones, values, masks = (torch.zeros(shape) for _ in range(5))
    result = Result()

    next_obs, _, next_done, next_mask, _, _ = as_tensors(venv.reset(), on_torch)
    for _iteration in range(args.iterations):
        for step in range(args.num_steps):
            obs[step], masks[step] = next_obs, next_mask.float()
            dones[step] = next_done.float().unsqueeze(-1)
            with torch.no_grad():
                action, logprobs[step], _, values[step] = agent.act(next_obs)
            actions[step] = action
            sent = torch.minimum(torch.maximum(action, low), high)  # the env's bounds; the sample is learnt
            r = venv.step(sent if on_torch else sent.numpy())
            next_obs, reward, next_done, next_mask, truncated, final_obs = as_tensors(r, on_torch)
            rewards[step] = reward
            if bool(truncated.any()):  # bootstrap time-outs from the final observation's value
                with torch.no_grad():
                    rewards[step] += args.gamma * agent.value(final_obs) * truncated.float()
            result.episode_returns += [float(info["episode"]["return"]) for info in r.infos if "episode" in info]

        with torch.no_grad():  # GAE, CleanRL's
            next_value = agent.value(next_obs)
            advantages = torch.zeros_like(rewards)
            lastgaelam = torch.zeros(shape[1:])
            for t in reversed(range(args.num_steps)):
                nextnonterminal = 1.0 - (next_done.float().unsqueeze(-1) if t == args.num_steps - 1 else dones[t + 1])
                nextvalues = next_value if t == args.num_steps - 1 else values[t + 1]
                delta = rewards[t] + args.gamma * nextvalues * nextnonterminal - values[t]
                advantages[t] = lastgaelam = delta + args.gamma * args.gae_lambda * nextnonterminal * lastgaelam
            returns = advantages + values

        b_obs, b_actions = obs.reshape(-1, *spec.obs_shape), actions.reshape(-1, *spec.action.shape)
        b_logprobs, b_adv, b_returns, b_mask = (x.reshape(-1) for x in (logprobs, advantages, returns, masks))
        batch = b_obs.shape[0]
        minibatch = batch // args.num_minibatches
        for _epoch in range(args.update_epochs):
            order = torch.randperm(batch)
            for start in range(0, batch, minibatch):
                mb = order[start:start + minibatch]
                _, newlogprob, entropy, newvalue = agent.act(b_obs[mb], b_actions[mb])
                ratio = (newlogprob - b_logprobs[mb]).exp()
                adv = (b_adv[mb] - b_adv[mb].mean()) / (b_adv[mb].std() + 1e-8)
                weight = b_mask[mb] / b_mask[mb].sum().clamp(min=1.0)  # dead agents do not count
                pg_loss = (torch.max(-adv * ratio, -adv * ratio.clamp(1 - args.clip_coef, 1 + args.clip_coef))
                           * weight).sum()
                v_loss = 0.5 * (((newvalue - b_returns[mb]) ** 2) * weight).sum()
                loss = pg_loss - args.ent_coef * (entropy * weight).sum() + args.vf_coef * v_loss
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()

    venv.close()
    result.parameters = [p.detach().clone() for p in agent.parameters()]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--num-envs", type=int, default=16)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--array-backend", default="torch", choices=["torch", "numpy"])
    cli = parser.parse_args()
    result = train(Args(seed=cli.seed, num_envs=cli.num_envs, iterations=cli.iterations,
                        array_backend=cli.array_backend))
    returns = result.episode_returns
    recent = sum(returns[-20:]) / max(len(returns[-20:]), 1)
    print(f"{len(returns)} episodes; mean return of the last 20: {recent:.3f}")


if __name__ == "__main__":
    main()

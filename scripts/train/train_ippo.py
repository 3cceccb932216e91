#!/usr/bin/env python
"""A compact PPO trainer (MAPPO: shared actor, centralised critic) that learns through marl_vec.

One actor network is shared by every agent (it sees the agent's own observation
and a one-hot agent id); one critic sees the global state and the agent id
(MAPPO style: centralised critic, decentralised actors). Advantages come from
GAE, and episodes cut by the time limit are bootstrapped from the value of
``final_state``, the last state of the ended episode that marl_vec keeps in the
same_step autoreset mode.

The actor's logits are masked by the env's avail actions and dead agents' samples
(``agent_mask``) do not count in the losses, so SMAC-style envs (SMAX) train as they are.
Where the family reports ``battle_won`` in its episode stats (SMAX, SC2), the win rate
of the last 100 episodes is tracked and logged too.

It first measures the random policy, then trains for ``--minutes`` and ends by
printing one line ``random_return=X final_return=Y`` (mean team return of the
last 100 episodes of each phase). ``--log CSV`` writes one row per iteration: wall
time, env-steps, episodes, the last 100 episodes' mean return and win rate, the
random policy's, and the 1-minute load average.

Example:
    python scripts/train/train_ippo.py --minutes 8
    python scripts/train/train_ippo.py --minutes 1 --num-envs 8 --backend subproc --plot curve.png
    python scripts/train/train_ippo.py --config smax/3m --num-envs 128 --rollout-steps 32 --minutes 45 \\
        --hp gamma=0.99 --hp reward_scale=1 --hp epochs=4 --hp minibatches=4 --log smax_3m.csv
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import math
import os
import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

import marl_vec as mv
from marl_vec.tools.rollout import RandomPolicy


@dataclass
class Hyper:
    """PPO settings; the defaults learn simple_spread within minutes on one shared CPU core.

    Tuned for few env-steps: stepping the envs takes about 3/4 of the time, so many
    small updates (25-step rollouts, 15 epochs) get the most out of each step.
    """

    rollout_steps: int = 25  # batched steps per iteration: E * 25 env-steps
    gamma: float = 0.95  # a horizon of about 20 steps, like the 25-step episodes
    lam: float = 0.95
    lr: float = 1e-3
    epochs: int = 15
    minibatches: int = 2
    clip: float = 0.2
    entropy_coef: float = 0.003
    value_coef: float = 0.5
    max_grad_norm: float = 10.0
    reward_scale: float = 0.1  # keeps value targets near 1 so the value loss does not dominate
    hidden: int = 64


# -- GAE ------------------------------------------------------------------------


def gae(
    rewards: np.ndarray,
    values: np.ndarray,
    next_values: np.ndarray,
    terminated: np.ndarray,
    ended: np.ndarray,
    gamma: float,
    lam: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Generalised advantage estimates over a rollout of T steps (time on axis 0).

    Args:
        rewards: r_t, shape (T, ...).
        values: V(s_t), shape (T, ...).
        next_values: V(s_{t+1}) of the state the step led to. Where the episode
            ended at step t this is the value of its *final* state (``final_state``),
            not of the reset state that follows.
        terminated: the step reached a terminal state: no bootstrap at all.
        ended: the (agent's) episode ended at step t, terminated or truncated:
            the advantage recursion stops, so nothing leaks across episodes.

    A truncated step (ended, not terminated) still bootstraps from ``next_values``:
    the time limit is not part of the task.

    Returns:
        advantages and value targets (advantages + values), shape (T, ...).

    >>> adv, ret = gae(np.ones(2), np.zeros(2), np.array([0.0, 10.0]),
    ...                np.zeros(2, bool), np.array([False, True]), gamma=0.5, lam=1.0)
    >>> adv.tolist()
    [4.0, 6.0]
    """
    T = rewards.shape[0]
    advantages = np.zeros(rewards.shape, dtype=np.float64)
    deltas = rewards + gamma * np.where(terminated, 0.0, next_values) - values
    running = np.zeros(rewards.shape[1:], dtype=np.float64)
    for t in reversed(range(T)):
        # Why: at an episode end the next step's advantage belongs to another episode.
        running = deltas[t] + gamma * lam * np.where(ended[t], 0.0, running)
        advantages[t] = running
    return advantages, advantages + values


# -- networks -------------------------------------------------------------------


def _mlp(inputs: int, hidden: int, outputs: int, last_gain: float) -> nn.Sequential:
    layers = [nn.Linear(inputs, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, outputs)]
    for layer in layers:
        if isinstance(layer, nn.Linear):
            nn.init.orthogonal_(layer.weight, gain=last_gain if layer is layers[-1] else math.sqrt(2))
            nn.init.zeros_(layer.bias)
    return nn.Sequential(*layers)


class ActorCritic(nn.Module):
    """Shared actor over agents (obs + agent id) and a centralised critic (state + agent id)."""

    def __init__(self, obs_dim: int, state_dim: int, n_agents: int, n_actions: int, hidden: int):
        super().__init__()
        self.n_agents = n_agents
        self.actor = _mlp(obs_dim + n_agents, hidden, n_actions, last_gain=0.01)
        self.critic = _mlp(state_dim + n_agents, hidden, 1, last_gain=1.0)
        self.register_buffer("agent_ids", torch.eye(n_agents))

    def _with_ids(self, x: torch.Tensor) -> torch.Tensor:
        """(..., A, D) -> (..., A, D + A): append each agent's one-hot id."""
        ids = self.agent_ids.expand(*x.shape[:-2], self.n_agents, self.n_agents)
        return torch.cat([x, ids], dim=-1)

    def logits(self, obs: torch.Tensor, avail: torch.Tensor) -> torch.Tensor:
        """obs (..., A, obs_dim), avail (..., A, n_actions) bool -> masked logits."""
        return self.actor(self._with_ids(obs)).masked_fill(~avail, -1e9)

    def value(self, state: torch.Tensor) -> torch.Tensor:
        """state (..., state_dim) -> (..., A): one value per agent (rewards differ per agent)."""
        per_agent = state.unsqueeze(-2).expand(*state.shape[:-1], self.n_agents, state.shape[-1])
        return self.critic(self._with_ids(per_agent)).squeeze(-1)


# -- rollout storage ------------------------------------------------------------


class Rollout:
    """Arrays of one iteration, (T, E, A, ...), allocated once and refilled."""

    def __init__(self, T: int, E: int, spec: mv.EnvSpec):
        A = spec.n_agents
        self.obs = np.zeros((T, E, A, *spec.obs_shape), np.float32)
        self.state = np.zeros((T, E, *spec.state_shape), np.float32)
        self.next_state = np.zeros_like(self.state)
        self.avail = np.zeros((T, E, A, spec.n_actions), bool)
        self.mask = np.zeros((T, E, A), bool)
        self.actions = np.zeros((T, E, A), np.int64)
        self.logp = np.zeros((T, E, A), np.float32)
        self.reward = np.zeros((T, E, A), np.float32)
        self.terminated = np.zeros((T, E, A), bool)
        self.ended = np.zeros((T, E, A), bool)


# -- the trainer ----------------------------------------------------------------


class Trainer:
    """Collects rollouts from ``venv`` (same_step autoreset) and updates the actor-critic.

    >>> with mv.make("mpe/simple_spread", num_envs=2) as venv:  # doctest: +SKIP
    ...     trainer = Trainer(venv, Hyper(), seed=0)
    ...     trainer.collect(); stats = trainer.update()
    """

    def __init__(self, venv: mv.VecEnv, hp: Hyper, seed: int):
        spec = venv.spec
        if not spec.discrete:
            raise ValueError("train_ippo.py needs discrete actions")
        self.venv, self.hp = venv, hp
        torch.manual_seed(seed)
        self.rng = torch.Generator().manual_seed(seed)
        self.net = ActorCritic(int(np.prod(spec.obs_shape)), int(np.prod(spec.state_shape)),
                               spec.n_agents, spec.n_actions, hp.hidden)
        self.opt = torch.optim.Adam(self.net.parameters(), lr=hp.lr, eps=1e-5)
        self.buf = Rollout(hp.rollout_steps, venv.num_envs, spec)
        self.result = venv.reset()
        self.returns: list[float] = []  # team return of every finished training episode
        self.wins: list[float] = []  # battle_won of every finished episode, where the family reports it
        self.env_steps = 0

    @torch.no_grad()
    def collect(self) -> None:
        """Run ``rollout_steps`` batched steps with the current policy into ``self.buf``."""
        b, r = self.buf, self.result
        for t in range(self.hp.rollout_steps):
            b.obs[t], b.state[t], b.avail[t], b.mask[t] = r.obs, r.state, r.avail_actions, r.agent_mask
            logits = self.net.logits(torch.from_numpy(r.obs), torch.from_numpy(r.avail_actions))
            dist = torch.distributions.Categorical(logits=logits)
            actions = dist.sample()
            b.actions[t], b.logp[t] = actions.numpy(), dist.log_prob(actions).numpy()
            r = self.venv.step(b.actions[t])
            b.reward[t] = r.reward * self.hp.reward_scale
            b.terminated[t] = r.terminated
            # An agent's episode ends with its env's, or earlier when it dies.
            np.logical_or(r.terminated, r.truncated, out=b.ended[t])
            b.ended[t] |= r.done[:, None]
            # Bootstrap from where the step led: the final state of an ended episode,
            # not the reset state that same_step autoreset already put in r.state.
            b.next_state[t] = r.state
            if r.done.any():
                b.next_state[t][r.done] = r.final_state[r.done]
                record_episodes(r.infos, self.returns, self.wins)
        self.result = r
        self.env_steps += self.hp.rollout_steps * self.venv.num_envs

    def update(self) -> dict[str, float]:
        """PPO epochs over the collected rollout."""
        hp, b = self.hp, self.buf
        with torch.no_grad():
            values = self.net.value(torch.from_numpy(b.state)).numpy()
            next_values = self.net.value(torch.from_numpy(b.next_state)).numpy()
        adv, ret = gae(b.reward, values, next_values, b.terminated, b.ended, hp.gamma, hp.lam)
        # Flatten to samples of one env-step each; all agents of an env-step stay together.
        T, E = b.reward.shape[:2]
        n = T * E
        obs = torch.from_numpy(b.obs.reshape(n, *b.obs.shape[2:]))
        state = torch.from_numpy(b.state.reshape(n, -1))
        avail = torch.from_numpy(b.avail.reshape(n, *b.avail.shape[2:]))
        mask = torch.from_numpy(b.mask.reshape(n, -1)).float()
        actions = torch.from_numpy(b.actions.reshape(n, -1))
        old_logp = torch.from_numpy(b.logp.reshape(n, -1))
        adv_t = torch.from_numpy(adv.reshape(n, -1)).float()
        adv_t = (adv_t - adv_t.mean()) / (adv_t.std() + 1e-8)
        ret_t = torch.from_numpy(ret.reshape(n, -1)).float()
        size = max(1, n // hp.minibatches)
        info: dict[str, float] = {}
        for _ in range(hp.epochs):
            order = torch.randperm(n, generator=self.rng)
            for start in range(0, n, size):
                idx = order[start:start + size]
                m = mask[idx]
                denom = m.sum().clamp(min=1.0)  # dead agents' samples do not count
                dist = torch.distributions.Categorical(logits=self.net.logits(obs[idx], avail[idx]))
                logp = dist.log_prob(actions[idx])
                ratio = torch.exp(logp - old_logp[idx])
                a = adv_t[idx]
                policy_loss = -(torch.min(ratio * a, ratio.clamp(1 - hp.clip, 1 + hp.clip) * a) * m).sum() / denom
                entropy = (dist.entropy() * m).sum() / denom
                value_loss = (((self.net.value(state[idx]) - ret_t[idx]) ** 2) * m).sum() / denom
                loss = policy_loss + hp.value_coef * value_loss - hp.entropy_coef * entropy
                self.opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(self.net.parameters(), hp.max_grad_norm)
                self.opt.step()
                info = {"policy_loss": policy_loss.item(), "value_loss": value_loss.item(), "entropy": entropy.item()}
        return info


def record_episodes(infos: Sequence[dict], returns: list[float], wins: list[float]) -> None:
    """Append the return (and ``battle_won``, where reported) of every episode that ended in ``infos``."""
    for info in infos:
        episode = info.get("episode")
        if episode is not None:
            returns.append(float(episode["return"]))
            if "battle_won" in episode:
                wins.append(float(episode["battle_won"]))


def random_return(venv: mv.VecEnv, episodes: int, seed: int) -> tuple[float, int, float]:
    """Mean team return of the first ``episodes`` episodes of the uniform random policy
    (over the available actions), the env-steps it took, and its win rate (NaN where the
    family reports no ``battle_won``)."""
    policy = RandomPolicy(venv.spec, venv.num_envs, seed)
    returns: list[float] = []
    wins: list[float] = []
    r = venv.reset()
    env_steps = 0
    while len(returns) < episodes:
        r = venv.step(policy(r))
        env_steps += venv.num_envs
        record_episodes(r.infos, returns, wins)
    win_rate = float(np.mean(wins[:episodes])) if wins else math.nan
    return float(np.mean(returns[:episodes])), env_steps, win_rate


# frames / seconds / episodes / last100_win: the names scripts/train_with/plot_log.py reads.
LOG_COLUMNS = ("iteration", "seconds", "frames", "episodes", "last100_return", "last100_win",
               "random_return", "random_win", "entropy", "load1")


def log_row(writer: Any, iteration: int, wall: float, trainer: "Trainer", baseline: float, random_win: float,
            entropy: float) -> None:
    """One row of the ``--log`` CSV (empty win cells where the family reports no battle_won)."""
    recent, wins = trainer.returns[-100:], trainer.wins[-100:]
    writer.writerow([iteration, f"{wall:.1f}", trainer.env_steps, len(trainer.returns),
                     f"{np.mean(recent):.4f}" if recent else "", f"{np.mean(wins):.4f}" if wins else "",
                     f"{baseline:.4f}", "" if math.isnan(random_win) else f"{random_win:.4f}",
                     f"{entropy:.4f}", f"{os.getloadavg()[0]:.2f}"])


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minutes", type=float, default=8.0, help="training time budget (default 8)")
    p.add_argument("--num-envs", type=int, default=16, help="envs in the batch (default 16)")
    p.add_argument("--backend", default="dummy", choices=["dummy", "subproc", "ray"], help="marl_vec backend")
    p.add_argument("--seed", type=int, default=0, help="seeds the envs, torch and the random baseline")
    p.add_argument("--config", default="mpe/simple_spread", help="a marl_vec config with discrete actions")
    p.add_argument("--iterations", type=int, default=None, help="stop after this many iterations (smoke tests)")
    p.add_argument("--random-episodes", type=int, default=100, help="episodes to measure the random policy on")
    p.add_argument("--rollout-steps", type=int, default=Hyper.rollout_steps, help="batched steps per iteration")
    p.add_argument("--hp", action="append", default=[], metavar="NAME=VALUE",
                   help="override a PPO setting of Hyper, e.g. --hp lr=3e-4 --hp epochs=5")
    p.add_argument("--threads", type=int, default=1, help="torch threads (the nets are tiny: 1 is fastest)")
    p.add_argument("--plot", default=None, metavar="PNG", help="save the learning curve here")
    p.add_argument("--log", default=None, metavar="CSV", help="write one row per iteration here (see the module doc)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = p.parse_args(argv)
    if args.minutes <= 0 and args.iterations is None:
        p.error("--minutes must be > 0 (or give --iterations)")
    known = {f.name: f.type for f in dataclasses.fields(Hyper)}
    hp: dict[str, float | int] = {}
    for item in args.hp:
        name, _, value = item.partition("=")
        if name not in known or not value:
            p.error(f"--hp {item!r}: give NAME=VALUE with NAME one of {', '.join(known)}")
        hp[name] = int(value) if known[name] in (int, "int") else float(value)
    args.hp = hp
    if args.num_envs < 1 or args.random_episodes < 1 or args.rollout_steps < 1:
        p.error("--num-envs, --random-episodes and --rollout-steps must be >= 1")
    return args


def main(argv: Sequence[str] | None = None) -> tuple[float, float]:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    hp = Hyper(rollout_steps=args.rollout_steps, **args.hp)
    log_file = open(args.log, "w", newline="") if args.log else None
    writer = csv.writer(log_file) if log_file else None
    try:
        with mv.make(args.config, num_envs=args.num_envs, backend=args.backend, env_seed=args.seed,
                     autoreset="same_step") as venv:
            t0 = time.perf_counter()
            baseline, random_steps, random_win = random_return(venv, args.random_episodes, args.seed)
            random_rate = random_steps / (time.perf_counter() - t0)
            won = "" if math.isnan(random_win) else f", win rate {random_win:.3f}"
            print(f"random policy: mean return {baseline:.2f}{won} over {args.random_episodes} episodes "
                  f"({random_rate:,.0f} env-steps/s)", flush=True)
            trainer = Trainer(venv, hp, args.seed)
            if writer:
                writer.writerow(LOG_COLUMNS)
                log_row(writer, 0, 0.0, trainer, baseline, random_win, math.nan)
            budget = args.minutes * 60
            start = time.perf_counter()
            iteration = 0
            with tqdm(total=round(budget), unit="s", disable=args.no_progress, desc="train") as bar:
                while True:
                    elapsed = time.perf_counter() - start
                    if (args.iterations is not None and iteration >= args.iterations) or (
                            args.iterations is None and elapsed >= budget):
                        break
                    trainer.collect()
                    stats = trainer.update()
                    iteration += 1
                    bar.update(min(round(time.perf_counter() - start), bar.total) - bar.n)
                    recent, wins = trainer.returns[-100:], trainer.wins[-100:]
                    bar.set_postfix(steps=trainer.env_steps, ret=f"{np.mean(recent):.2f}" if recent else "-",
                                    **({"win": f"{np.mean(wins):.2f}"} if wins else {}),
                                    ent=f"{stats['entropy']:.2f}")
                    if writer:
                        log_row(writer, iteration, time.perf_counter() - start, trainer, baseline, random_win,
                                stats["entropy"])
                        log_file.flush()  # a long run's curve can be read while it runs
    finally:
        if log_file:
            log_file.close()
    final = float(np.mean(trainer.returns[-100:])) if trainer.returns else float("nan")
    seconds = time.perf_counter() - start
    rate = trainer.env_steps / seconds if seconds > 0 else float("nan")
    # Why a ratio: on a shared machine absolute speeds vary from run to run; two rates
    # measured in the same run compare like with like (what the trainer costs on top).
    print(f"trained {iteration} iterations, {trainer.env_steps} env-steps, {len(trainer.returns)} episodes "
          f"in {seconds:.0f} s ({rate:,.0f} env-steps/s, {rate / random_rate:.2f} x the random rollout's)")
    if trainer.wins:
        print(f"win rate of the last 100 episodes: {np.mean(trainer.wins[-100:]):.3f} (random: {random_win:.3f})")
    if args.plot:
        from marl_vec.tools.plots import plot_returns

        plot_returns(trainer.returns, args.plot, title=f"PPO on {args.config}, {args.num_envs} envs",
                     baseline=baseline)
    print(f"random_return={baseline:.2f} final_return={final:.2f}")
    return baseline, final


if __name__ == "__main__":
    main()

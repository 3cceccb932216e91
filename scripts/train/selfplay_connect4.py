"""Self-play on connect four: one masked policy plays both seats, reading ``acting``.

A small PPO (masked logits, a value head, Monte Carlo returns per seat) trains on a
batch of connect_four_v3 games. At every step each env has one agent to move
(``r.acting``); the policy sees that agent's observation (PettingZoo's connect four
shows each agent its own pieces first, so one policy serves both seats) and its legal
moves (``r.avail_actions``), and its move goes in that agent's slot. Each move is
credited with the game's outcome for the seat that made it (the loser's -1 comes on
the winner's move: ``reward`` holds it for every agent).

Every ``--eval-every`` seconds the policy plays ``--eval-games`` games against a
uniform-random legal-move player (half as player_0, half as player_1), once with its
most likely legal move (greedy) and once with sampled moves; the curve (win rates vs
training games) goes to a CSV and a PNG. Self-play does not train against random
play, so the curve wanders; the policy of the best evaluation is kept, and at the end
it plays ``--final-games`` fresh games (seeds no evaluation used) greedy and sampled:
that is the result reported. Note that an untrained greedy policy already
wins most games against random play (a fixed column preference stacks four before a
random player blocks); the sampled curve starts near 50%.

Usage (the defaults made docs/images/selfplay_connect4.*; under 20 minutes in all on 2 cores):
    python scripts/train/selfplay_connect4.py
"""

from __future__ import annotations

import argparse
import copy
import csv
import os
import sys
import time
import warnings

import numpy as np

import marl_vec as mv
from marl_vec.envs.extras import MissingExtraError, require
from marl_vec.envs.registry import make_env_fn

EXTRAS = "pettingzoo,classic,examples"  # the game, and torch + matplotlib (examples)
try:  # before anything runs: one line naming the extra, as the marl-vec command says it
    require("torch", EXTRAS, "its policy (torch)")
    require("matplotlib", EXTRAS, "its plot (matplotlib)")
except MissingExtraError as exc:
    print(f"selfplay_connect4.py: {exc}", file=sys.stderr)
    sys.exit(2)

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

warnings.filterwarnings("ignore", category=DeprecationWarning)

GAME = "pettingzoo.classic.connect_four_v3"
N_ACTIONS = 7


class Policy(nn.Module):
    """Masked logits and a value from one agent's (6, 7, 2) board: a small conv net
    (``net="cnn"``: lines of four are local patterns) or an MLP."""

    def __init__(self, net: str = "cnn", hidden: int = 256):
        super().__init__()
        self.net = net
        if net == "cnn":
            self.body = nn.Sequential(
                nn.Conv2d(2, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(),
                nn.Flatten(), nn.Linear(64 * 42, hidden), nn.ReLU())
        else:
            self.body = nn.Sequential(nn.Flatten(), nn.Linear(84, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                                      nn.ReLU())
        self.pi = nn.Linear(hidden, N_ACTIONS)
        self.v = nn.Linear(hidden, 1)

    def forward(self, obs: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.net == "cnn":
            obs = obs.permute(0, 3, 1, 2)  # (n, 6, 7, 2) -> channels first
        h = self.body(obs)
        logits = self.pi(h).masked_fill(~mask, -1e9)
        return logits, self.v(h).squeeze(-1)


def movers(r) -> np.ndarray:
    """Each env's agent to move (envs always have one in a running game)."""
    return r.acting.argmax(axis=1)


def mover_rows(r, seat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rows = np.arange(len(seat))
    return r.obs[rows, seat].astype(np.float32), r.avail_actions[rows, seat]


class SelfPlay:
    """Collects finished games' moves with their returns, for PPO."""

    def __init__(self, venv: mv.VecEnv, policy: Policy, gamma: float):
        self.venv, self.policy, self.gamma = venv, policy, gamma
        E = venv.num_envs
        self.r = venv.reset()
        self.open: list[list[list[tuple]]] = [[[], []] for _ in range(E)]  # env -> seat -> moves
        self.ready: list[tuple] = []
        self.games = 0

    @torch.no_grad()
    def step(self) -> None:
        r = self.r
        seat = movers(r)
        obs, mask = mover_rows(r, seat)
        logits, value = self.policy(torch.from_numpy(obs), torch.from_numpy(mask))
        dist = torch.distributions.Categorical(logits=logits)
        move = dist.sample()
        logp = dist.log_prob(move)
        actions = np.zeros((self.venv.num_envs, 2), np.int64)
        actions[np.arange(len(seat)), seat] = move.numpy()
        self.r = r2 = self.venv.step(actions)
        for i in range(self.venv.num_envs):
            self.open[i][seat[i]].append((obs[i], mask[i], int(move[i]), float(logp[i]), float(value[i])))
            if r2.done[i]:
                outcome = r2.infos[i]["episode"]["agent_returns"]
                for k in (0, 1):
                    moves = self.open[i][k]
                    n = len(moves)
                    for j, m in enumerate(moves):
                        self.ready.append((*m, float(outcome[k]) * self.gamma ** (n - 1 - j)))
                self.open[i] = [[], []]
                self.games += 1

    def take(self) -> dict[str, torch.Tensor]:
        ready, self.ready = self.ready, []
        obs, mask, move, logp, value, ret = zip(*ready)
        return {"obs": torch.from_numpy(np.stack(obs)), "mask": torch.from_numpy(np.stack(mask)),
                "move": torch.tensor(move), "logp": torch.tensor(logp, dtype=torch.float32),
                "value": torch.tensor(value, dtype=torch.float32), "ret": torch.tensor(ret, dtype=torch.float32)}


def ppo_update(policy: Policy, opt: torch.optim.Optimizer, batch: dict[str, torch.Tensor], epochs: int = 4,
               minibatch: int = 512, clip: float = 0.2, ent: float = 0.01) -> None:
    n = len(batch["move"])
    adv = batch["ret"] - batch["value"]
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    for _ in range(epochs):
        for idx in torch.randperm(n).split(minibatch):
            logits, value = policy(batch["obs"][idx], batch["mask"][idx])
            dist = torch.distributions.Categorical(logits=logits)
            ratio = (dist.log_prob(batch["move"][idx]) - batch["logp"][idx]).exp()
            a = adv[idx]
            loss_pi = -torch.min(ratio * a, ratio.clamp(1 - clip, 1 + clip) * a).mean()
            loss_v = (value - batch["ret"][idx]).pow(2).mean()
            loss = loss_pi + 0.5 * loss_v - ent * dist.entropy().mean()
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(policy.parameters(), 0.5)
            opt.step()


@torch.no_grad()
def evaluate(policy: Policy, games: int, num_envs: int, seed: int, greedy: bool = True) -> tuple[float, float]:
    """(win rate, draw rate) of the policy (its most likely move, or ``greedy`` False: a
    sampled one) against a uniform-random legal-move player over ``games`` games, the
    policy as player_0 in even envs, player_1 in odd ones."""
    rng = np.random.default_rng(seed)
    fns = [make_env_fn("pettingzoo", GAME)] * num_envs
    per_env = -(-games // num_envs)
    wins = draws = played = 0
    finished = np.zeros(num_envs, int)
    with mv.make_vec(fns, backend="dummy", env_seed=seed) as venv:
        r = venv.reset()
        learner = np.arange(num_envs) % 2
        while played < games:
            seat = movers(r)
            obs, mask = mover_rows(r, seat)
            logits, _ = policy(torch.from_numpy(obs), torch.from_numpy(mask))
            if greedy:
                chosen = logits.argmax(dim=1).numpy()
            else:
                chosen = torch.distributions.Categorical(logits=logits).sample().numpy()
            random_move = np.array([rng.choice(np.flatnonzero(m)) for m in mask])
            move = np.where(seat == learner, chosen, random_move)
            actions = np.zeros((num_envs, 2), np.int64)
            actions[np.arange(num_envs), seat] = move
            r = venv.step(actions)
            for i in np.flatnonzero(r.done):
                if finished[i] >= per_env or played >= games:
                    continue
                finished[i] += 1
                played += 1
                ret = r.infos[i]["episode"]["agent_returns"]
                wins += ret[learner[i]] > ret[1 - learner[i]]
                draws += ret[0] == ret[1]
    return wins / games, draws / games


def plot(rows: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    games = [r["games"] for r in rows]
    ax.plot(games, [r["win_rate"] for r in rows], marker="o", label="greedy (most likely legal move)")
    ax.plot(games, [r["win_rate_sampled"] for r in rows], marker=".", label="sampled from the policy")
    ax.legend(loc="lower right")
    ax.axhline(0.9, color="grey", linestyle="--", linewidth=1)
    ax.set_xlabel("self-play training games")
    ax.set_ylabel("win rate vs random")
    ax.set_ylim(0, 1)
    ax.set_title(f"connect_four_v3 self-play ({rows[-1]['games_evaluated']} eval games per point)")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=17.0,
                   help="wall-clock budget of training and evaluations (the final evaluation comes after it)")
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--backend", default="dummy", choices=["dummy", "subproc"])
    p.add_argument("--games-per-update", type=int, default=256)
    p.add_argument("--eval-every", type=float, default=90.0, help="seconds of training between evaluations")
    p.add_argument("--eval-games", type=int, default=200)
    p.add_argument("--target", type=float, default=1.01,
                   help="stop once an evaluation's greedy and sampled win rates reach this (default: run the budget)")
    p.add_argument("--net", default="cnn", choices=["cnn", "mlp"])
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--anneal", action=argparse.BooleanOptionalAction, default=True,
                   help="learning rate falling linearly to a tenth over the budget")
    p.add_argument("--final-games", type=int, default=400, help="games of the final evaluation of the best policy")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    p.add_argument("--out", default="docs/images/selfplay_connect4", help="prefix of the .csv and .png written")
    args = p.parse_args()

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    policy = Policy(args.net)
    opt = torch.optim.Adam(policy.parameters(), lr=args.lr)
    start = time.perf_counter()
    deadline = start + 60 * args.minutes
    rows: list[dict] = []
    fns = [make_env_fn("pettingzoo", GAME)] * args.num_envs
    with mv.make_vec(fns, backend=args.backend, env_seed=args.seed) as venv:
        assert venv.spec.turn_based
        play = SelfPlay(venv, policy, gamma=0.98)
        last_eval, updates, since = start - args.eval_every, 0, 0
        best: tuple[float, dict] | None = None  # the best trained evaluation's mean win rate and weights
        while True:
            now = time.perf_counter()
            if now - last_eval >= args.eval_every or now >= deadline:
                win, draw = evaluate(policy, args.eval_games, 50, seed=1000 + len(rows))
                sampled, _ = evaluate(policy, args.eval_games, 50, seed=5000 + len(rows), greedy=False)
                rows.append({"seconds": round(time.perf_counter() - start, 1), "games": play.games,
                             "updates": updates, "win_rate": win, "draw_rate": draw, "win_rate_sampled": sampled,
                             "games_evaluated": args.eval_games})
                print(f"{rows[-1]['seconds']:7.1f} s  {play.games:6d} games  {updates:4d} updates  "
                      f"win rate vs random {win:.3f} (draws {draw:.3f}; sampled moves {sampled:.3f})", flush=True)
                last_eval = time.perf_counter()
                score = (win + sampled) / 2  # sampled moves show what the policy learned, greedy what it plays
                if updates and (best is None or score > best[0]):
                    best = (score, copy.deepcopy(policy.state_dict()))
                if min(win, sampled) >= args.target or time.perf_counter() >= deadline:
                    break
            while play.games - since < args.games_per_update:
                play.step()
            since = play.games
            if args.anneal:  # the learning rate falls linearly to a tenth over the budget: a steadier end
                left = max(0.0, (deadline - time.perf_counter()) / (deadline - start))
                for group in opt.param_groups:
                    group["lr"] = args.lr * (0.1 + 0.9 * left)
            ppo_update(policy, opt, play.take())
            updates += 1
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out + ".csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    plot(rows, args.out + ".png")
    assert best is not None
    policy.load_state_dict(best[1])
    win, draw = evaluate(policy, args.final_games, 50, seed=10**6)
    sampled, _ = evaluate(policy, args.final_games, 50, seed=2 * 10**6, greedy=False)
    kept = max((r for r in rows if r["updates"]), key=lambda r: r["win_rate"] + r["win_rate_sampled"])
    with open(args.out + "_final.txt", "w") as f:
        f.write(f"best policy: evaluation at {kept['seconds']} s ({kept['games']} training games, greedy win rate "
                f"{kept['win_rate']:.3f}, sampled {kept['win_rate_sampled']:.3f}, over {kept['games_evaluated']} games)\n"
                f"final evaluation, {args.final_games} fresh games each: greedy win rate {win:.4f} (draws {draw:.4f}), "
                f"sampled moves {sampled:.4f}\n"
                f"training time {rows[-1]['seconds']:.0f} s, {rows[-1]['games']} self-play games, {args.num_envs} envs "
                f"({args.backend}), {args.threads} torch thread(s), net {args.net}, lr {args.lr}"
                f"{' annealed' if args.anneal else ''}\n")
    print(open(args.out + "_final.txt").read(), end="")
    print(f"wrote {args.out}.csv, {args.out}.png and {args.out}_final.txt")


if __name__ == "__main__":
    main()

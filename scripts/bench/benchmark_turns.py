#!/usr/bin/env python
"""Turn-based games: turns per second of a batch against the plain AEC loop.

    python scripts/bench/benchmark_turns.py                     # chess, go 19x19, tictactoe; ~2 minutes
    python scripts/bench/benchmark_turns.py --games tictactoe --seconds 5 --rounds 3

For each game, one run measures (wall time; run it on an idle machine):

- ``plain``: one env in a plain ``agent_iter()`` loop: ``last()``, a random legal move
  from its mask, ``step()`` (and ``step(None)`` for finished agents), reset at the end;
- ``dummy``: DummyVecEnv of ``--num-envs`` envs in this process;
- ``subproc``: SubprocVecEnv of ``--num-envs`` envs in ``--workers`` processes.

A batch turn does more than the loop's: it writes every agent's ``observe()`` (the
loop observes only the agent to move) and validates the move. The ratio column is
batch turns/s over plain turns/s in the same round; rounds interleave the three
cases, and the table gives each column's median and the ratios' per-round range. Chess and go turns cost 0.3-2 ms, so processes
pay; a tictactoe turn costs ~70 us, so they do not.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import marl_vec as mv  # noqa: E402
from marl_vec.envs.registry import make_env_fn  # noqa: E402

warnings.filterwarnings("ignore")

GAMES: dict[str, tuple[str, dict[str, Any]]] = {
    "chess": ("pettingzoo.classic.chess_v6", {}),
    "go": ("pettingzoo.classic.go_v5", {"board_size": 19}),
    "go_9x9": ("pettingzoo.classic.go_v5", {"board_size": 9}),
    "connect_four": ("pettingzoo.classic.connect_four_v3", {}),
    "tictactoe": ("pettingzoo.classic.tictactoe_v3", {}),
}


def plain_loop(module: str, kwargs: dict[str, Any], seconds: float, seed: int = 0) -> float:
    """Turns per second of one env in a plain agent_iter loop."""
    env = importlib.import_module(module).env(**kwargs)
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    turns, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for agent in env.agent_iter():
            obs, _, term, trunc, info = env.last()
            if term or trunc:
                env.step(None)
                continue
            mask = obs["action_mask"] if isinstance(obs, dict) else info["action_mask"]
            env.step(int(rng.choice(np.flatnonzero(mask))))
            turns += 1
            if turns % 64 == 0 and time.perf_counter() - start >= seconds:
                break
        else:
            env.reset()
    elapsed = time.perf_counter() - start
    env.close()
    return turns / elapsed


def batch(module: str, kwargs: dict[str, Any], backend: str, num_envs: int, workers: int, seconds: float,
          seed: int = 0) -> float:
    """Turns per second of a batch (every env plays one turn per step)."""
    fns = [make_env_fn("pettingzoo", module, kwargs)] * num_envs
    extra = {"num_workers": workers} if backend == "subproc" else {}
    rng = np.random.default_rng(seed)
    with mv.make_vec(fns, backend=backend, env_seed=seed, **extra) as venv:
        r = venv.reset()
        rows = np.arange(num_envs)
        for _ in range(3):  # warm up (workers started, first games under way)
            r = venv.step(_moves(r, rows, rng))
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            r = venv.step(_moves(r, rows, rng))
            steps += 1
        elapsed = time.perf_counter() - start
    return steps * num_envs / elapsed


def _moves(r: Any, rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A random legal move for each env's agent to move (others 0: ignored)."""
    mover = r.acting.argmax(axis=1)
    legal = r.avail_actions[rows, mover]
    choice = (rng.random(legal.shape) * legal).argmax(axis=1)
    actions = np.zeros(r.acting.shape, dtype=np.int64)
    actions[rows, mover] = choice
    return actions


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--games", nargs="+", default=["chess", "go", "tictactoe"], choices=sorted(GAMES))
    p.add_argument("--num-envs", type=int, default=8)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--seconds", type=float, default=4.0, help="per measurement")
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds per game (medians reported)")
    args = p.parse_args()
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start (run it on an idle machine); "
          f"{args.rounds} rounds of {args.seconds:g} s per case")
    print(f"| game | plain loop turns/s | dummy ({args.num_envs} envs) | ratio (range) | subproc ({args.num_envs} envs, "
          f"{args.workers} workers) | ratio (range) |")
    print("|---|---:|---:|---:|---:|---:|")
    for game in args.games:
        module, kwargs = GAMES[game]
        rows = []
        for _ in range(args.rounds):
            plain = plain_loop(module, kwargs, args.seconds)
            dummy = batch(module, kwargs, "dummy", args.num_envs, args.workers, args.seconds)
            subproc = batch(module, kwargs, "subproc", args.num_envs, args.workers, args.seconds)
            rows.append((plain, dummy, subproc))
        plain_s, dummy_s, subproc_s = (np.array(c) for c in zip(*rows))
        d_ratio, s_ratio = dummy_s / plain_s, subproc_s / plain_s
        print(f"| {game} | {np.median(plain_s):,.0f} | {np.median(dummy_s):,.0f} | {np.median(d_ratio):.2f}x "
              f"({d_ratio.min():.2f}-{d_ratio.max():.2f}) | {np.median(subproc_s):,.0f} | {np.median(s_ratio):.2f}x "
              f"({s_ratio.min():.2f}-{s_ratio.max():.2f}) |", flush=True)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()

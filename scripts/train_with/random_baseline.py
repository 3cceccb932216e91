#!/usr/bin/env python
"""The uniform random policy's episode statistics on a marl_vec config: the floor a learning curve must rise above.

Plays ``--episodes`` episodes with uniformly random available actions and prints,
for the return, the length and each of the family's episode stats (e.g.
Football's ``win``), the mean and its standard error (std / sqrt(episodes)).

Example:
    python scripts/train_with/random_baseline.py football/academy_3_vs_1_with_keeper \\
        --env-kwarg rewards=scoring,checkpoints --autoreset fast --episodes 500
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Sequence

import numpy as np
import yaml

import marl_vec as mv
from marl_vec.tools.config import load_config, resolve_config_path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", help="marl_vec config: YAML path or shipped name")
    parser.add_argument("--env-kwarg", action="append", default=[], metavar="KEY=VALUE",
                        help="override one of the config's env kwargs (YAML value)")
    parser.add_argument("--episodes", type=int, default=500)
    parser.add_argument("--num-envs", type=int, default=4)
    parser.add_argument("--backend", choices=["dummy", "subproc", "ray"], default="dummy")
    parser.add_argument("--autoreset", choices=["same_step", "fast"], default="same_step")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    data = yaml.safe_load(resolve_config_path(args.config).read_text())
    for item in args.env_kwarg:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"--env-kwarg needs KEY=VALUE, got {item!r}")
        data["env"].setdefault("kwargs", {})[key] = yaml.safe_load(value)
    load_config(data)  # a wrong value fails here, naming what is allowed
    rng = np.random.default_rng(args.seed)
    episodes: list[dict] = []
    with mv.make(data, num_envs=args.num_envs, backend=args.backend, autoreset=args.autoreset,
                 env_seed=args.seed) as venv:
        spec = venv.spec
        if not spec.discrete:  # Box: uniform within each agent's bounds; unbounded entries (padding) 0
            shape = (venv.num_envs, spec.n_agents, *spec.action.shape)
            low = np.broadcast_to(spec.action.low, shape[1:])
            high = np.broadcast_to(spec.action.high, shape[1:])
            bounded = np.isfinite(low) & np.isfinite(high)
            low, high = np.where(bounded, low, 0.0), np.where(bounded, high, 0.0)
        r = venv.reset()
        while len(episodes) < args.episodes:
            if spec.discrete:  # uniform over each agent's available actions
                scores = rng.random(r.avail_actions.shape) * r.avail_actions
                r = venv.step(scores.argmax(-1))
            else:
                r = venv.step(rng.uniform(low, high, shape).astype(np.float32))
            for info in r.infos:
                if "episode" in info:
                    episodes.append(info["episode"])
    episodes = episodes[:args.episodes]
    keys = [k for k, v in episodes[0].items() if isinstance(v, (bool, int, float, np.number, np.bool_))]
    print(f"uniform random policy, {len(episodes)} episodes of {args.config}:")
    for key in keys:
        values = np.array([float(e[key]) for e in episodes if key in e])
        err = values.std(ddof=1) / math.sqrt(len(values))
        print(f"  {key}: {values.mean():.3f} ± {err:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

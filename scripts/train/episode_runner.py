#!/usr/bin/env python
"""Collect E complete episodes into a PyMARL-style padded batch (random policy).

The logic lives in :mod:`marl_vec.tools.episode_runner`; this is its command line:
it prints the batch layout and, with ``--out``, saves it as a ``.npz`` file that
a QMIX/VDN trainer can load.

Example:
    python scripts/train/episode_runner.py mpe/simple_spread --episodes 8 --out episodes.npz
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import fields
from typing import Sequence

import numpy as np

import marl_vec as mv
from marl_vec.tools.episode_runner import EpisodeRunner


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("config", nargs="?", default="mpe/simple_spread", help="YAML path or shipped config name")
    p.add_argument("--episodes", type=int, default=8, help="E: episodes per batch, one per env (default 8)")
    p.add_argument("--batches", type=int, default=1, help="batches to collect (default 1)")
    p.add_argument("--max-steps", type=int, default=None, help="T, the padded length (default: episode_limit)")
    p.add_argument("--backend", default="dummy", choices=["dummy", "subproc", "ray"])
    p.add_argument("--seed", type=int, default=0, help="env i of the first batch is seeded seed + i")
    p.add_argument("--out", default=None, metavar="NPZ", help="save the last batch here")
    args = p.parse_args(argv)
    if args.episodes < 1 or args.batches < 1:
        p.error("--episodes and --batches must be >= 1")
    with mv.make(args.config, num_envs=args.episodes, backend=args.backend, env_seed=args.seed,
                 autoreset="one_episode") as venv:
        runner = EpisodeRunner(venv, max_steps=args.max_steps)
        for i in range(args.batches):
            batch = runner.run()
            print(f"batch {i}: lengths {batch.lengths.tolist()}  mean return {batch.returns.mean():.3f}")
    for f in fields(batch):
        value = getattr(batch, f.name)
        if value is not None:
            print(f"  {f.name:<14} {str(value.shape):<18} {value.dtype}")
    if args.out:
        np.savez_compressed(args.out, **{f.name: getattr(batch, f.name) for f in fields(batch)
                                         if getattr(batch, f.name) is not None})
        print(f"saved {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

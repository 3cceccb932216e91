#!/usr/bin/env python
"""BenchMARL MAPPO on any marl_vec config, through marl_vec.compat.benchmarl.MarlVecTask.

BenchMARL's own trainer (``Experiment.run``) runs unchanged; the envs are
``marl_vec.make(config)`` behind a TorchRL face. After every collected batch it
prints the mean return of the episodes that ended in it, per agent group, and
ends with one line ``first_return=X last_return=Y`` (first and last batch with an
ended episode, summed over groups' per-agent means). Files BenchMARL writes
(config pickle, optional json) go to ``--out`` (a temporary folder by default);
no csv/wandb loggers.

Example:
    python scripts/train_with/benchmarl_mappo.py --config mpe/simple_spread --frames 60000 --num-envs 10
    python scripts/train_with/benchmarl_mappo.py --config mpe/simple_tag --group-map prefix --backend subproc
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Sequence

import torch
from benchmarl.algorithms import MappoConfig
from benchmarl.experiment import Experiment, ExperimentConfig
from benchmarl.experiment.callback import Callback
from benchmarl.models import MlpConfig

from marl_vec.compat.benchmarl import MarlVecTask


class PrintReturns(Callback):
    """Prints the mean return of the episodes that ended in each collected batch."""

    def __init__(self) -> None:
        super().__init__()
        self.returns: list[float] = []

    def on_batch_collected(self, batch) -> None:
        parts = []
        total = 0.0
        for group in self.experiment.group_map:
            done = batch.get(("next", group, "done")).any(-2).squeeze(-1)  # an episode ended there
            if not done.any():
                return
            ret = batch.get(("next", group, "episode_reward")).mean(-2).squeeze(-1)[done].mean().item()
            parts.append(f"{group}={ret:.2f}")
            total += ret
        self.returns.append(total)
        print(f"frames={self.experiment.total_frames} return {' '.join(parts)}", flush=True)


def train(config: str, frames: int, num_envs: int, frames_per_batch: int, seed: int, backend: str | None,
          group_map: str | None, out: Path) -> list[float]:
    """Runs BenchMARL MAPPO; returns the per-batch mean returns."""
    task_config = {"group_map": group_map}
    if backend:
        task_config["backend"] = backend
    task = MarlVecTask.from_config(config, **task_config)
    experiment_config = ExperimentConfig.get_from_yaml()
    settings = dict(
        max_n_frames=frames, on_policy_collected_frames_per_batch=frames_per_batch,
        on_policy_n_envs_per_worker=num_envs, on_policy_minibatch_size=min(400, frames_per_batch),
        on_policy_n_minibatch_iters=10, lr=3e-4, prefer_continuous_actions=False,
        evaluation=False, render=False, loggers=[], create_json=False, save_folder=str(out),
        checkpoint_interval=0, checkpoint_at_end=False,
    )
    for key, value in settings.items():
        setattr(experiment_config, key, value)
    printer = PrintReturns()
    experiment = Experiment(task=task, algorithm_config=MappoConfig.get_from_yaml(),
                            model_config=MlpConfig.get_from_yaml(), critic_model_config=MlpConfig.get_from_yaml(),
                            seed=seed, config=experiment_config, callbacks=[printer])
    experiment.run()
    return printer.returns


def main(argv: Sequence[str] | None = None) -> list[float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="mpe/simple_spread", help="marl_vec config: YAML path or shipped name")
    parser.add_argument("--frames", type=int, default=30_000, help="environment steps to train for (all envs)")
    parser.add_argument("--num-envs", type=int, default=10)
    parser.add_argument("--frames-per-batch", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backend", choices=["dummy", "subproc", "ray"], default=None, help="default: the config's")
    parser.add_argument("--group-map", choices=["prefix"], default=None,
                        help="default: one group 'agents'; prefix: name_<int> agents grouped by name")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--out", type=Path, default=None, help="folder for BenchMARL's files (default: a temporary one)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.frames_per_batch % args.num_envs:
        parser.error("--frames-per-batch must be a multiple of --num-envs")
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        returns = train(args.config, args.frames, args.num_envs, args.frames_per_batch, args.seed, args.backend,
                        args.group_map, out)
    if returns:
        print(f"first_return={returns[0]:.3f} last_return={returns[-1]:.3f}")
    return returns


if __name__ == "__main__":
    main()

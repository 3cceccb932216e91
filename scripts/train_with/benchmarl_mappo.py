#!/usr/bin/env python
"""BenchMARL MAPPO on any marl_vec config, through marl_vec.compat.benchmarl.MarlVecTask.

BenchMARL's own trainer (``Experiment.run``) runs unchanged; the envs are
``marl_vec.make(config)`` behind a TorchRL face. After every collected batch it
prints the mean return of the episodes that ended in it, per agent group, and
ends with one line ``first_return=X last_return=Y`` (first and last batch with an
ended episode, summed over groups' per-agent means). ``--log FILE`` also writes
one CSV row per batch: frames, seconds, episodes finished so far, and of this
batch's episodes their number, BenchMARL's mean return (``benchmarl_batch_return``)
and marl_vec's episode statistics (``batch_return``, ``batch_length`` and the
family's own, e.g. Football's ``batch_win``, ``batch_goals_for``; over the
batch's last 100 episodes if it ended more), then the same statistics over the
last 100 finished episodes (``last100_*``). Files BenchMARL writes
(config pickle, optional json) go to ``--out`` (a temporary folder by default);
no csv/wandb loggers.

Example:
    python scripts/train_with/benchmarl_mappo.py --config mpe/simple_spread --frames 60000 --num-envs 10
    python scripts/train_with/benchmarl_mappo.py --config mpe/simple_tag --group-map prefix --backend subproc
    python scripts/train_with/benchmarl_mappo.py --config football/academy_3_vs_1_with_keeper \\
        --env-kwarg rewards=scoring,checkpoints --autoreset fast --num-envs 16 --frames-per-batch 4000 \\
        --lr 5e-4 --entropy-coef 0.01 --lmbda 0.95 --minutes 80 --frames 10000000 --log football.csv
"""

from __future__ import annotations

import argparse
import csv
import tempfile
import time
from pathlib import Path
from typing import IO, Any, Sequence

import torch
import yaml
from benchmarl.algorithms import MappoConfig
from benchmarl.experiment import Experiment, ExperimentConfig
from benchmarl.experiment.callback import Callback
from benchmarl.models import MlpConfig

from marl_vec.compat.benchmarl import MarlVecTask, _base_env
from marl_vec.tools.config import load_config, resolve_config_path
from marl_vec.core.episode import EpisodeStatistics


class TimeUp(Exception):
    """Raised by the callback when ``--minutes`` have passed: BenchMARL's loop has no wall-clock stop."""


class PrintReturns(Callback):
    """Prints (and logs) the mean return of the episodes that ended in each collected batch."""

    def __init__(self, log: Path | None = None, seconds: float | None = None) -> None:
        super().__init__()
        self.returns: list[float] = []
        self.log_path = log
        self.log: IO[str] | None = None
        self.writer: Any = None
        self.episodes_seen = 0
        self.seconds = seconds
        self.start = time.monotonic()

    def __getstate__(self) -> dict[str, Any]:
        # BenchMARL pickles its callbacks beside its config: leave the open log out.
        return {**self.__dict__, "log": None, "writer": None}

    def on_batch_collected(self, batch) -> None:
        parts = []
        total = 0.0
        for group in self.experiment.group_map:
            done = batch.get(("next", group, "done")).any(-2).squeeze(-1)  # an episode ended there
            if not done.any():
                parts = []
                break
            ret = batch.get(("next", group, "episode_reward")).mean(-2).squeeze(-1)[done].mean().item()
            parts.append(f"{group}={ret:.2f}")
            total += ret
        elapsed = time.monotonic() - self.start
        if parts:
            self.returns.append(total)
            print(f"frames={self.experiment.total_frames} return {' '.join(parts)}", flush=True)
        if self.log_path is not None:
            self._write(elapsed, total if parts else float("nan"))
        if self.seconds is not None and elapsed > self.seconds:
            raise TimeUp

    def _write(self, elapsed: float, benchmarl_return: float) -> None:
        venv = _base_env(self.experiment.collector.env).venv
        stats = venv.episode_statistics()
        episodes = int(stats.pop("episodes"))
        new, self.episodes_seen = episodes - self.episodes_seen, episodes
        # This batch's episodes (the last `new` that marl_vec finished; at most its window of 100).
        this_batch = EpisodeStatistics(window=max(new, 1))
        this_batch.add(venv.statistics.recent()[-new:] if new else [])
        batch_stats = this_batch.means()
        batch_stats.pop("episodes")
        row = {"frames": self.experiment.total_frames, "seconds": round(elapsed, 1), "episodes": episodes,
               "batch_episodes": new, "benchmarl_batch_return": benchmarl_return,
               **{f"batch_{k}": v for k, v in batch_stats.items()},
               **{f"last100_{k}": v for k, v in stats.items()}}
        if self.writer is None:
            if "batch_return" not in row:
                return  # no episode finished yet: the columns are not known
            self.log = open(self.log_path, "w", newline="")
            self.writer = csv.DictWriter(self.log, fieldnames=list(row), extrasaction="ignore")
            self.writer.writeheader()
        self.writer.writerow(row)
        self.log.flush()

    def close(self) -> None:
        if self.log is not None:
            self.log.close()


def marl_vec_config(source: str, env_kwargs: Sequence[str]) -> Any:
    """The config itself, or a dict of it with ``KEY=VALUE`` env kwargs overridden."""
    if not env_kwargs:
        return source
    data = yaml.safe_load(resolve_config_path(source).read_text())
    for item in env_kwargs:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"--env-kwarg needs KEY=VALUE, got {item!r}")
        data["env"].setdefault("kwargs", {})[key] = yaml.safe_load(value)
    load_config(data)  # a wrong value fails here, naming what is allowed
    return data


def train(args: argparse.Namespace, out: Path) -> list[float]:
    """Runs BenchMARL MAPPO; returns the per-batch mean returns."""
    task_config: dict[str, Any] = {"group_map": args.group_map, "autoreset": args.autoreset}
    if args.backend:
        task_config["backend"] = args.backend
    source = marl_vec_config(args.config, args.env_kwarg)
    task = MarlVecTask.from_config(source, **task_config)
    experiment_config = ExperimentConfig.get_from_yaml()
    settings = dict(
        max_n_frames=args.frames, on_policy_collected_frames_per_batch=args.frames_per_batch,
        on_policy_n_envs_per_worker=args.num_envs,
        on_policy_minibatch_size=min(args.minibatch_size, args.frames_per_batch),
        on_policy_n_minibatch_iters=args.minibatch_iters, lr=args.lr, prefer_continuous_actions=False,
        evaluation=False, evaluation_episodes=1,  # BenchMARL builds its test env even without evaluation
        render=False, loggers=[], create_json=False, save_folder=str(out),
        checkpoint_interval=0, checkpoint_at_end=False,
    )
    for key, value in settings.items():
        setattr(experiment_config, key, value)
    algorithm_config = MappoConfig.get_from_yaml()
    algorithm_config.entropy_coef = args.entropy_coef
    algorithm_config.lmbda = args.lmbda
    model_config = MlpConfig.get_from_yaml()
    model_config.num_cells = args.hidden
    critic_config = MlpConfig.get_from_yaml()
    critic_config.num_cells = args.hidden
    printer = PrintReturns(args.log, None if args.minutes is None else args.minutes * 60)
    experiment = Experiment(task=task, algorithm_config=algorithm_config, model_config=model_config,
                            critic_model_config=critic_config, seed=args.seed, config=experiment_config,
                            callbacks=[printer])
    try:
        experiment.run()
    except TimeUp:
        print(f"stopped after {args.minutes} minutes at frames={experiment.total_frames}", flush=True)
        experiment.close()
    finally:
        printer.close()
    return printer.returns


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="mpe/simple_spread", help="marl_vec config: YAML path or shipped name")
    parser.add_argument("--env-kwarg", action="append", default=[], metavar="KEY=VALUE",
                        help="override one of the config's env kwargs (YAML value), e.g. rewards=scoring,checkpoints")
    parser.add_argument("--frames", type=int, default=30_000, help="environment steps to train for (all envs)")
    parser.add_argument("--minutes", type=float, default=None, help="also stop after this many minutes")
    parser.add_argument("--num-envs", type=int, default=10)
    parser.add_argument("--frames-per-batch", type=int, default=3000)
    parser.add_argument("--minibatch-size", type=int, default=400)
    parser.add_argument("--minibatch-iters", type=int, default=10, help="minibatches per collected batch")
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--entropy-coef", type=float, default=0.0)
    parser.add_argument("--lmbda", type=float, default=0.9, help="GAE lambda")
    parser.add_argument("--hidden", type=int, nargs="+", default=[256, 256], help="MLP sizes (actor and critic)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backend", choices=["dummy", "subproc", "ray"], default=None, help="default: the config's")
    parser.add_argument("--autoreset", choices=["same_step", "fast"], default="same_step",
                        help="fast: restore a snapshot of the first reset (Football: ~30x cheaper than a reset)")
    parser.add_argument("--group-map", choices=["prefix", "agents"], default=None,
                        help="default: the native task's (PettingZoo: prefix, else agents); prefix: name_<int> "
                             "agents grouped by name; agents: one group")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--out", type=Path, default=None, help="folder for BenchMARL's files (default: a temporary one)")
    parser.add_argument("--log", type=Path, default=None, help="CSV file: one row per collected batch")
    args = parser.parse_args(argv)
    if args.frames_per_batch % args.num_envs:
        parser.error("--frames-per-batch must be a multiple of --num-envs")
    return args


def main(argv: Sequence[str] | None = None) -> list[float]:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        returns = train(args, out)
    if returns:
        print(f"first_return={returns[0]:.3f} last_return={returns[-1]:.3f}")
    return returns


if __name__ == "__main__":
    main()

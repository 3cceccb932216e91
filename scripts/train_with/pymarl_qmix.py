#!/usr/bin/env python
"""Train pymarlzooplus's own QMIX (or any of its algorithms) on a marl_vec config,
through the PyMARL faces (marl_vec.compat.pymarl), with its own entry point unchanged:
``pymarlzooplus.pymarlzooplus(params)`` (sacred, its logger, its plots).

``register()`` puts the env face (``env=marl_vec``) and the runner face
(``runner=marl_vec``: ``--batch-size-run`` envs of one marl_vec VecEnv, dummy or
subproc, in place of their Pipe-per-env ``parallel`` runner) into pymarlzooplus's
registries; ``env_args.key`` names the config. ``--runner episode``/``parallel`` runs
their own runners over the env face instead.

Runs in .venv-pymarl (pymarlzooplus 1.1.0 pins numpy<2 and pettingzoo==1.24.3):

    bash scripts/install/install_pymarl_venv.sh
    .venv-pymarl/bin/python scripts/train_with/pymarl_qmix.py --t-max 20000
    .venv-pymarl/bin/python scripts/train_with/pymarl_qmix.py --config rware/tiny-2ag --batch-size-run 4 \\
        --backend subproc
    .venv-pymarl/bin/python scripts/train_with/pymarl_qmix.py --alg mappo --batch-size-run 8

pymarlzooplus writes its sacred records and plots under ``results/`` beside this script
(its rule: the caller's folder). The last line printed is
``t_env=T return_mean=R test_return_mean=S`` (their logger's last values).
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

from marl_vec.compat.pymarl import register


def params(args: argparse.Namespace) -> dict[str, Any]:
    """pymarlzooplus's params dict: the algorithm's yaml, the gymma env-config (whose
    env_args keys the env face takes), then ours."""
    env_args: dict[str, Any] = {"key": args.config, "seed": args.seed, "time_limit": None, "render": False}
    if args.backend is not None:
        env_args["backend"] = args.backend
    algo: dict[str, Any] = {
        "env": "marl_vec", "runner": args.runner, "env_args": env_args, "t_max": args.t_max,
        "batch_size_run": args.batch_size_run, "test_nepisode": args.batch_size_run * 2,
        "test_interval": max(args.t_max // 5, 1), "log_interval": max(args.t_max // 5, 1),
        "runner_log_interval": max(args.t_max // 10, 1), "learner_log_interval": max(args.t_max // 10, 1),
        "use_cuda": False, "use_cuda_cnn_modules": False,
    }
    if args.alg == "qmix":  # a shorter exploration schedule, for runs of minutes
        algo["epsilon_anneal_time"] = max(args.t_max // 2, 1)
    return {"config": args.alg, "env-config": "gymma", "algo_args": algo}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="lbf/8x8-2p-2f-coop", help="a marl_vec config (name, YAML path)")
    parser.add_argument("--alg", default="qmix", help="a pymarlzooplus algorithm config: qmix, vdn, mappo, ...")
    parser.add_argument("--runner", default="marl_vec", choices=["marl_vec", "episode", "parallel"])
    parser.add_argument("--batch-size-run", type=int, default=1, help="envs per run (the runner's batch)")
    parser.add_argument("--backend", default=None, choices=["dummy", "subproc"], help="the runner face's backend")
    parser.add_argument("--t-max", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    register()
    from pymarlzooplus import pymarlzooplus
    from pymarlzooplus.utils import logging_setup

    last: dict[str, float] = {}
    log_stat = logging_setup.Logger.log_stat

    def keep_last(self: Any, key: str, value: Any, t: int, to_sacred: bool = True) -> None:
        last[key], last["t_env"] = float(value), t
        log_stat(self, key, value, t, to_sacred)

    logging_setup.Logger.log_stat = keep_last  # to print the last values; their logger still logs them
    logging.getLogger("pymarlzooplus").setLevel(logging.INFO)
    pymarlzooplus(params(args))
    print(f"t_env={int(last.get('t_env', 0))} return_mean={last.get('return_mean', float('nan')):.3f} "
          f"test_return_mean={last.get('test_return_mean', float('nan')):.3f}")


if __name__ == "__main__":
    main()

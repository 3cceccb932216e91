#!/usr/bin/env python
"""Train XuanCe's own MAPPO (or IPPO, QMIX, ...) on any marl_vec config, through XuanCeVecEnv.

XuanCe's agent gets the marl_vec VecEnv behind the face and runs its own
training loop unchanged; this script only builds the two and prints the mean
team return of the last 100 finished episodes (marl_vec's episode statistics,
plus the family's stats, e.g. Football's win rate) every ``--report`` steps.

Hyperparameters start from XuanCe's own config file for ``--algo`` on
``--base`` (default: its mpe/simple_spread_v3 config) and are adapted to the
env: discrete or continuous policy, number of envs, buffer size.

Runs in the XuanCe venv (XuanCe pins numpy<2 and gymnasium<1.3):

    bash scripts/install/install_xuance_venv.sh
    .venv-xuance/bin/python scripts/train_with/xuance_mappo.py mpe/simple_spread --steps 20000
    .venv-xuance/bin/python scripts/train_with/xuance_mappo.py mpe/simple_spread --algo ippo --backend subproc
    .venv-xuance/bin/python scripts/train_with/xuance_mappo.py football/academy_3_vs_1_with_keeper \
        --env-kwarg rewards=scoring,checkpoints --steps 100000 --report 5000

Each line: ``step=S episodes=N return=R`` (and the env's stats), then a last line
``first_return=X final_return=Y``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from argparse import Namespace

import yaml

import marl_vec as mv
from marl_vec.compat import XuanCeVecEnv
from marl_vec.tools.config import resolve_config_path


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("config", help="marl_vec config: YAML path or shipped name (e.g. mpe/simple_spread)")
    parser.add_argument("--algo", default="mappo", help="a XuanCe multi-agent algorithm: mappo, ippo, qmix, ...")
    parser.add_argument("--base", default="mpe/simple_spread_v3",
                        help="which XuanCe config of --algo gives the hyperparameters (env/env_id)")
    parser.add_argument("--steps", type=int, default=20000, help="environment steps over all envs")
    parser.add_argument("--report", type=int, default=2000, help="print every this many environment steps")
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--backend", default="dummy", choices=["dummy", "subproc", "ray"])
    parser.add_argument("--buffer-size", type=int, default=None,
                        help="on-policy transitions per update (default: 25 steps per env)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--env-kwarg", action="append", default=[], metavar="KEY=VALUE",
                        help="override one of the config's env kwargs (YAML value), e.g. rewards=scoring,checkpoints")
    parser.add_argument("--torch-threads", type=int, default=1,
                        help="XuanCe's networks are small: more threads mostly contend for the cores")
    return parser.parse_args(argv)


def xuance_agent(args: argparse.Namespace, envs: XuanCeVecEnv, log_dir: str):
    from xuance.common import get_arguments
    from xuance.torch.agents import REGISTRY_Agents

    continuous = not envs.spec.discrete
    settings = dict(
        parallels=envs.num_envs, continuous_action=continuous, render=False, render_mode=None,
        log_dir=log_dir + "/logs", model_dir=log_dir + "/models", seed=args.seed, device="cpu",
        buffer_size=args.buffer_size or envs.num_envs * 25,
    )
    if args.algo in ("mappo", "ippo"):
        settings["policy"] = "Gaussian_MAAC_Policy" if continuous else "Categorical_MAAC_Policy"
        settings["use_actions_mask"] = envs.spec.discrete
    env_name, env_id = args.base.split("/", 1)
    config = get_arguments(args.algo, env_name, env_id, parser_args=Namespace(**settings))
    return REGISTRY_Agents[config.agent](config, envs)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    torch.set_num_threads(args.torch_threads)
    config = yaml.safe_load(resolve_config_path(args.config).read_text())
    for item in args.env_kwarg:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--env-kwarg needs KEY=VALUE, got {item!r}")
        config["env"].setdefault("kwargs", {})[key] = yaml.safe_load(value)
    envs = XuanCeVecEnv.from_config(config, num_envs=args.num_envs, backend=args.backend, env_seed=args.seed)
    venv = envs.venv
    returns: list[float] = []
    with tempfile.TemporaryDirectory() as log_dir:
        agent = xuance_agent(args, envs, log_dir)
        step = 0
        while step < args.steps:
            agent.train(max(1, args.report // envs.num_envs))
            step = agent.current_step
            stats = venv.episode_statistics()
            if "return" not in stats:
                continue
            returns.append(stats["return"])
            extra = "".join(f" {k}={v:.3f}" for k, v in stats.items()
                            if k not in ("episodes", "return", "length"))
            print(f"step={step} episodes={int(stats['episodes'])} return={stats['return']:.3f}{extra}", flush=True)
        agent.finish()
    envs.close()
    if returns:
        print(f"first_return={returns[0]:.3f} final_return={returns[-1]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python
"""AgileRL's own IPPO or MADDPG trainer on any marl_vec config, through AgileRLVecEnv.

AgileRL's ``train_multi_agent_on_policy`` (IPPO) or ``train_multi_agent_off_policy``
(MADDPG) runs unchanged on ``marl_vec.make(config)`` behind the face, one
evolution step (``--evo-steps`` environment steps over all envs) per call, the
population and the replay memory carried from call to call (AgileRL resets the
env and evaluates the agent at every evolution step anyway, so the calls add up
to one run). After each evolution step it prints one line
``steps=S fitness=F return=R episodes=N`` (and the env's stats, e.g. Football's
win rate): F is AgileRL's own test score (the mean return of its ``test``
episodes, summed over agents), R and N marl_vec's mean team return over the
last 100 finished episodes (training and test episodes alike) and the number
of episodes so far. The last line is ``first_fitness=X last_fitness=Y``.

Runs in the AgileRL venv (AgileRL 2.58 pins pettingzoo<1.27 and tensordict==0.13.0):

    bash scripts/install/install_agilerl_venv.sh
    .venv-agilerl/bin/python scripts/train_with/agilerl_train.py --config mpe/simple_spread --algo IPPO --steps 100000
    .venv-agilerl/bin/python scripts/train_with/agilerl_train.py --config mpe/simple_spread --algo MADDPG --steps 20000

IPPO runs without action masks (AgileRL 2.58's IPPO raises on numpy masks in
infos); MADDPG gets marl_vec's ``avail_actions`` as ``action_mask``. No
checkpoints, no wandb: AgileRL writes no files.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
from typing import Any, Sequence

import numpy as np
import torch
import yaml
from agilerl.algorithms import IPPO, MADDPG
from agilerl.components.replay_buffer import ReplayBuffer
from agilerl.training.train_multi_agent_off_policy import train_multi_agent_off_policy
from agilerl.training.train_multi_agent_on_policy import train_multi_agent_on_policy
from gymnasium import spaces

import marl_vec as mv
from marl_vec.compat import AgileRLVecEnv
from marl_vec.tools.config import load_config, resolve_config_path

ALGOS = ("IPPO", "MADDPG")


class KeptOpen(AgileRLVecEnv):
    """The face, left open by AgileRL's trainers: they close their env when they return,
    and this script calls them once per evolution step. ``close_for_good`` closes it."""

    def close(self, **kwargs: Any) -> None:
        pass

    def close_for_good(self) -> None:
        super().close()


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


def make_agent(args: argparse.Namespace, env: AgileRLVecEnv) -> Any:
    agents = list(env.agents)
    observation_spaces = spaces.Dict({a: env.single_observation_space(a) for a in agents})
    action_spaces = spaces.Dict({a: env.single_action_space(a) for a in agents})
    net_config = {"latent_dim": args.hidden, "encoder_config": {"hidden_size": [args.hidden]},
                  "head_config": {"hidden_size": [args.hidden]}}
    if args.algo == "IPPO":
        return IPPO(observation_spaces, action_spaces, agent_ids=agents, net_config=net_config,
                    lr=args.lr, batch_size=args.batch_size, learn_step=args.learn_step, device="cpu")
    return MADDPG(observation_spaces, action_spaces, agent_ids=agents, net_config=net_config,
                  batch_size=args.batch_size, learn_step=args.learn_step, vect_noise_dim=env.num_envs, device="cpu")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="mpe/simple_spread", help="marl_vec config: YAML path or shipped name")
    parser.add_argument("--env-kwarg", action="append", default=[], metavar="KEY=VALUE",
                        help="override one of the config's env kwargs (YAML value)")
    parser.add_argument("--algo", choices=ALGOS, default="IPPO",
                        help="IPPO: train_multi_agent_on_policy; MADDPG: train_multi_agent_off_policy")
    parser.add_argument("--steps", type=int, default=20_000, help="environment steps over all envs")
    parser.add_argument("--evo-steps", type=int, default=2_000,
                        help="environment steps per evolution step (one printed line each)")
    parser.add_argument("--eval-steps", type=int, default=None,
                        help="steps of AgileRL's test per evolution step (default: its own, one episode)")
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--backend", choices=["dummy", "subproc", "ray"], default=None, help="default: the config's")
    parser.add_argument("--learn-step", type=int, default=None,
                        help="steps between learning updates (default: IPPO 400, MADDPG 10)")
    parser.add_argument("--batch-size", type=int, default=None, help="default: IPPO 200, MADDPG 64")
    parser.add_argument("--lr", type=float, default=1e-3, help="IPPO's learning rate (MADDPG keeps its own)")
    parser.add_argument("--hidden", type=int, default=64, help="width of the actor and critic layers")
    parser.add_argument("--memory", type=int, default=100_000, help="MADDPG's replay buffer size")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--verbose", action="store_true", help="also print AgileRL's own report")
    args = parser.parse_args(argv)
    if args.learn_step is None:
        args.learn_step = 400 if args.algo == "IPPO" else 10
    if args.batch_size is None:
        args.batch_size = 200 if args.algo == "IPPO" else 64
    if args.evo_steps % args.num_envs:
        parser.error("--evo-steps must be a multiple of --num-envs")
    return args


def train(args: argparse.Namespace) -> list[float]:
    """Runs AgileRL's trainer one evolution step at a time; returns the fitness after each."""
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    random.seed(args.seed)
    overrides: dict[str, Any] = {"num_envs": args.num_envs, "reward_dtype": "float64", "env_seed": args.seed}
    if args.backend:
        overrides["backend"] = args.backend
    venv = mv.make(marl_vec_config(args.config, args.env_kwarg), **overrides)
    # AgileRL 2.58's IPPO raises on numpy action masks in infos (its bug): leave them out there.
    env = KeptOpen(venv, action_mask=args.algo != "IPPO")
    env.reset(seed=args.seed)  # AgileRL's trainers reset unseeded: seed once here
    agent = make_agent(args, env)
    memory = ReplayBuffer(max_size=args.memory, device="cpu") if args.algo == "MADDPG" else None
    common = dict(env_name=os.path.basename(str(args.config)), algo=args.algo, pop=[agent],
                  evo_steps=args.evo_steps, eval_steps=args.eval_steps, verbose=args.verbose, wb=False)
    fitnesses: list[float] = []
    try:
        while agent.metrics.steps < args.steps:
            # One evolution step per call: the trainer runs while the agent has fewer than max_steps.
            goal = agent.metrics.steps + 1
            if memory is None:
                train_multi_agent_on_policy(env, max_steps=goal, **common)
            else:
                train_multi_agent_off_policy(env, memory=memory, max_steps=goal, **common)
            fitness = float(agent.fitness[-1])
            fitnesses.append(fitness)
            stats = venv.episode_statistics()
            extra = "".join(f" {k}={v:.3f}" for k, v in stats.items() if k not in ("episodes", "return", "length"))
            ret = f" return={stats['return']:.3f}" if "return" in stats else ""
            print(f"steps={agent.metrics.steps} fitness={fitness:.3f}{ret} episodes={stats['episodes']}{extra}",
                  flush=True)
    finally:
        env.close_for_good()
    return fitnesses


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(1)  # small networks: more threads mostly contend for the cores
    os.environ.setdefault("WANDB_MODE", "disabled")
    fitnesses = train(args)
    if fitnesses:
        print(f"first_fitness={fitnesses[0]:.3f} last_fitness={fitnesses[-1]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python
"""Run every shipped config (configs/**.yaml) for many steps with a random policy.

    python scripts/ci/soak_configs.py                      # 10,000 steps per env, 2 envs each
    python scripts/ci/soak_configs.py --steps 500 pettingzoo sisl   # some families only

Each config runs with its own settings except ``vec.num_envs`` (``--num-envs``) and
the backend (``dummy``, so that every env's error surfaces here). A config whose
family cannot start on this machine (StarCraft II without the game) is reported as
skipped with the reason; any other exception is a failure. Reports per config: the
episodes finished, the steps on which the env's ``state()`` failed (``state="auto"``
gives zeros there, ``infos[i]["state_unavailable"]``), and the time taken.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

import marl_vec as mv  # noqa: E402
from marl_vec.tools.config import load_config, shipped_configs  # noqa: E402
from marl_vec.tools.rollout import RandomPolicy  # noqa: E402


def soak(name: str, steps: int, num_envs: int) -> str:
    cfg = load_config(name, {"vec.num_envs": num_envs, "vec.backend": "dummy"})
    start = time.perf_counter()
    try:
        venv = mv.make(cfg)
    except (mv.envs.MissingExtraError, FileNotFoundError, OSError) as exc:
        return f"SKIPPED  {name:<40} cannot start here: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
    unavailable = episodes = 0
    with venv, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        policy = RandomPolicy(venv.spec, venv.num_envs, seed=0)
        r = venv.reset()
        for _ in range(steps):
            r = venv.step(policy(r))
            episodes += int(r.done.sum())
            unavailable += sum(1 for info in r.infos if info.get("state_unavailable"))
    seconds = time.perf_counter() - start
    return (f"OK       {name:<40} {steps} steps x {num_envs} envs, {episodes} episodes, "
            f"state() failed on {unavailable} env-steps, {seconds:.0f} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("families", nargs="*", help="config folders to run (default: all)")
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--num-envs", type=int, default=2)
    args = parser.parse_args(argv)
    names = [n for n in shipped_configs() if not args.families or n.split("/")[0] in args.families]
    failed = 0
    for name in names:
        try:
            line = soak(name, args.steps, args.num_envs)
        except Exception as exc:  # noqa: BLE001 - report every config, then fail
            failed += 1
            line = f"FAILED   {name:<40} {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
        print(line, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

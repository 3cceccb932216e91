"""Atari Pong x 8: DummyVecEnv vs a plain loop vs gymnasium's SyncVectorEnv, as ratios in one run.

The plain loop is what a hand-written trainer does without a vector library:
step 8 gymnasium envs in turn, reset an env when its episode ends, and write
each observation into one preallocated (8, ...) uint8 batch. All candidates
step the same env chain (``marl_vec.envs.atari.atari_gym_env``) with the same
seeds and actions, in the alternating rounds of ``scripts/benchmark.py``.
Time is this process's CPU time (every candidate runs in this one process), so
that other jobs on a shared machine do not count.

    python scripts/benchmark_atari.py                 # preprocessed and raw frames
    python scripts/benchmark_atari.py --obs raw --seconds 4
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import marl_vec as mv  # noqa: E402
from benchmark import candidate, gym_sync, marl_vec_candidate, measure, report  # noqa: E402

ENV_ID = "ALE/Pong-v5"
OBS_KINDS = {"preprocessed": {"preprocess": True}, "raw": {}}


def gym_env(kwargs: dict):
    from marl_vec.envs.atari import atari_gym_env

    return atari_gym_env(ENV_ID, **kwargs)[0]


def plain_loop_into_batch(make_env, n: int, actions: np.ndarray):
    """Step each env, reset it when it ends, and write its frame into one batch array."""
    def build():
        envs = [make_env() for _ in range(n)]
        first = [env.reset(seed=i)[0] for i, env in enumerate(envs)]
        batch = np.stack(first)
        rewards = np.zeros(n, dtype=np.float32)

        def step_batch(a: np.ndarray) -> None:
            for i, env in enumerate(envs):
                obs, reward, terminated, truncated, _ = env.step(int(a[i, 0]))
                if terminated or truncated:
                    obs, _ = env.reset()
                batch[i] = obs
                rewards[i] = reward
        return step_batch, lambda: [e.close() for e in envs]

    return candidate("plain loop", build, actions)


def main(argv: list[str] | None = None) -> list[str]:
    from marl_vec.envs.atari import make_atari

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--obs", choices=[*OBS_KINDS, "both"], default="both")
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=3.0, help="CPU seconds per candidate, over 5 rounds")
    args = parser.parse_args(argv)
    n = args.num_envs
    actions = np.random.default_rng(0).integers(0, 6, size=(256, n, 1))
    lines: list[str] = []
    for kind in OBS_KINDS if args.obs == "both" else (args.obs,):
        kwargs = OBS_KINDS[kind]
        make_gym = functools.partial(gym_env, kwargs)
        make_ours = functools.partial(make_atari, ENV_ID, **kwargs)
        cases = [
            plain_loop_into_batch(make_gym, n, actions),
            gym_sync(make_gym, n, actions),
            marl_vec_candidate("DummyVecEnv", lambda make_ours=make_ours: mv.DummyVecEnv([make_ours] * n), actions),
            marl_vec_candidate("DummyVecEnv copy=False", lambda make_ours=make_ours: mv.DummyVecEnv([make_ours] * n, copy=False), actions),
        ]
        measure(cases, n, args.seconds, clock=time.process_time)
        lines += report(f"{ENV_ID} x {n}, {kind} frames (CPU time)", cases)
    return lines


if __name__ == "__main__":
    main()

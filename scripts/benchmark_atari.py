"""Atari Pong x 8: DummyVecEnv vs a plain loop vs gymnasium's SyncVectorEnv, as ratios in one run.

The plain loop is what a hand-written trainer does without a vector library:
step 8 gymnasium envs in turn, reset an env when its episode ends, and write
each observation into one preallocated (8, ...) uint8 batch. All three step
the same env chain (``marl_vec.envs.atari.atari_gym_env``) with the same seeds
and actions; variants run in alternating rounds and each keeps its best round,
so that noise from other processes on the machine hits all of them alike.
Time is this process's CPU time (every variant runs in this one process), so
that other jobs on a shared machine do not count.

    python scripts/benchmark_atari.py                 # preprocessed and raw, 3 rounds
    python scripts/benchmark_atari.py --obs raw --steps 500

Example:
    >>> results = run(obs="preprocessed", num_envs=2, steps=5, rounds=1)  # doctest: +SKIP
    >>> sorted(results)                                                    # doctest: +SKIP
    ['dummy', 'dummy_nocopy', 'plain_loop', 'sync_vector_env']
"""

from __future__ import annotations

import argparse
import time
from typing import Any, Callable

import numpy as np

ENV_ID = "ALE/Pong-v5"
OBS_KINDS = {"preprocessed": {"preprocess": True}, "raw": {}}


def _env_fn(kwargs: dict[str, Any]) -> Callable[[], Any]:
    from marl_vec.envs.atari import atari_gym_env

    return lambda: atari_gym_env(ENV_ID, **kwargs)[0]


def _plain_loop(kwargs: dict[str, Any], actions: np.ndarray, seed: int) -> float:
    envs = [_env_fn(kwargs)() for _ in range(actions.shape[1])]
    first, _ = envs[0].reset(seed=seed)
    batch = np.zeros((len(envs), *first.shape), dtype=first.dtype)
    rewards = np.zeros(len(envs), dtype=np.float32)
    for i, env in enumerate(envs):
        batch[i], _ = env.reset(seed=seed + i)
    start = time.process_time()
    for a in actions:
        for i, env in enumerate(envs):
            obs, reward, terminated, truncated, _ = env.step(int(a[i]))
            if terminated or truncated:
                obs, _ = env.reset()
            batch[i] = obs
            rewards[i] = reward
    elapsed = time.process_time() - start
    for env in envs:
        env.close()
    return elapsed


def _dummy(kwargs: dict[str, Any], actions: np.ndarray, seed: int, copy: bool = True) -> float:
    import marl_vec as mv
    from marl_vec.envs.atari import make_atari

    venv = mv.DummyVecEnv([lambda: make_atari(ENV_ID, **kwargs)] * actions.shape[1], env_seed=seed, copy=copy)
    venv.reset()
    batched = actions[:, :, None]
    start = time.process_time()
    for a in batched:
        venv.step(a)
    elapsed = time.process_time() - start
    venv.close()
    return elapsed


def _sync(kwargs: dict[str, Any], actions: np.ndarray, seed: int) -> float:
    import gymnasium as gym

    envs = gym.vector.SyncVectorEnv([_env_fn(kwargs)] * actions.shape[1])
    envs.reset(seed=seed)
    start = time.process_time()
    for a in actions:
        envs.step(a)
    elapsed = time.process_time() - start
    envs.close()
    return elapsed


VARIANTS: dict[str, Callable[..., float]] = {
    "plain_loop": _plain_loop,
    "dummy": _dummy,
    "dummy_nocopy": lambda kw, a, s: _dummy(kw, a, s, copy=False),
    "sync_vector_env": _sync,
}


def run(obs: str = "preprocessed", num_envs: int = 8, steps: int = 300, rounds: int = 3, seed: int = 0) -> dict[str, float]:
    """Env steps per second of each variant (best of ``rounds``)."""
    if obs not in OBS_KINDS:
        raise ValueError(f"unknown obs kind {obs!r}; allowed: {', '.join(OBS_KINDS)}")
    kwargs = OBS_KINDS[obs]
    actions = np.random.default_rng(seed).integers(0, 6, size=(steps, num_envs))
    best = dict.fromkeys(VARIANTS, float("inf"))
    for _ in range(rounds):
        for name, fn in VARIANTS.items():
            best[name] = min(best[name], fn(kwargs, actions, seed))
    return {name: steps * num_envs / t for name, t in best.items()}


def report(obs: str, rates: dict[str, float]) -> str:
    base = rates["plain_loop"]
    lines = [f"{ENV_ID}, {obs} observations: env steps/s and ratio to the plain loop"]
    for name, rate in rates.items():
        lines.append(f"  {name:16s} {rate:9.0f}   {rate / base:5.3f}x")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--obs", choices=[*OBS_KINDS, "both"], default="both")
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--steps", type=int, default=300, help="batched steps per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=None,
                        help="CPU seconds per variant (split over the rounds); sets --steps (scripts/benchmark.py passes it)")
    args = parser.parse_args(argv)
    kinds = list(OBS_KINDS) if args.obs == "both" else [args.obs]
    out = {}
    for kind in kinds:
        steps = args.steps
        if args.seconds is not None:
            # Size the rounds from a short plain-loop probe.
            probe = np.zeros((10, args.num_envs), dtype=np.int64)
            per_step = _plain_loop(OBS_KINDS[kind], probe, 0) / len(probe)
            steps = max(10, int(args.seconds / args.rounds / max(per_step, 1e-6)))
        out[kind] = run(kind, args.num_envs, steps, args.rounds)
        print(report(kind, out[kind]), flush=True)
    return out


if __name__ == "__main__":
    main()

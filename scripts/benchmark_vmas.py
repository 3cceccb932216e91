"""VMAS through marl_vec against VMAS used directly: env-steps/s, their ratio, the machine's load.

- ours: ``DummyVecEnv`` over the ``vmas`` family, ``--num-envs`` envs (one VMAS
  batch: one torch step per VecEnv step, outputs copied into our buffers, envs
  that ended reset with ``reset_at`` on their own seed; ``copy=True``, the default);
- direct: ``vmas.make_env(scenario, num_envs=N)`` stepped by hand with the same
  random actions, the same outputs read into numpy (every agent's obs stacked
  into one array, rewards, terminated/truncated), and the envs that ended reset
  with ``reset_at(i, return_observations=False)`` and one ``get_from_scenario``
  (TorchRL's idiom), without reseeding.

Rounds are interleaved (``--rounds``, ``--seconds`` of wall time each, after a
warm-up step); the median env-steps/s, each round's value and the load average
(``os.getloadavg``, before and after) are printed. torch keeps its default number
of threads (printed). Continuous actions, ``max_steps`` 100 unless given.

    python scripts/benchmark_vmas.py
    python scripts/benchmark_vmas.py --scenario transport --num-envs 1024 --seconds 3 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import warnings
from typing import Callable

import numpy as np

import marl_vec as mv
from marl_vec.envs.registry import make_env_fn

Runner = Callable[[int], None]  # runs n steps


def action_pool(spec: mv.EnvSpec, n_envs: int, pool: int = 8) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    low = np.where(np.isfinite(spec.action.low), spec.action.low, 0.0)
    high = np.where(np.isfinite(spec.action.high), spec.action.high, 0.0)
    shape = (n_envs, spec.n_agents, *spec.action.shape)
    return [rng.uniform(np.broadcast_to(low, shape[1:]), np.broadcast_to(high, shape[1:]), shape).astype(np.float32)
            for _ in range(pool)]


def ours(scenario: str, kwargs: dict, n_envs: int) -> tuple[Runner, float, Callable[[], None], list[np.ndarray]]:
    started = time.perf_counter()
    venv = mv.DummyVecEnv([make_env_fn("vmas", scenario, kwargs)] * n_envs, env_seed=0)
    venv.reset()
    build = time.perf_counter() - started
    pool = action_pool(venv.spec, n_envs)

    def run(n: int) -> None:
        for t in range(n):
            r = venv.step(pool[t % len(pool)])
            r.obs, r.reward, r.done  # noqa: B018 (read, as a trainer would)

    return run, build, venv.close, pool


def direct(scenario: str, kwargs: dict, n_envs: int, pool: list[np.ndarray]) -> tuple[Runner, float]:
    """VMAS by hand (see the module doc)."""
    import torch
    import vmas

    options = {k: kwargs[k] for k in ("max_steps",) if k in kwargs}
    started = time.perf_counter()
    env = vmas.make_env(scenario, num_envs=n_envs, device="cpu", seed=0, continuous_actions=True,
                        terminated_truncated=True, **options,
                        **{k: v for k, v in kwargs.items() if k not in ("max_steps", "continuous_actions")})
    env.reset()
    build = time.perf_counter() - started
    sizes = [space.shape[0] for space in env.action_space.spaces]
    torch_pool = [[torch.from_numpy(np.ascontiguousarray(actions[:, a, :size])) for a, size in enumerate(sizes)]
                  for actions in pool]

    def run(n: int) -> None:
        for t in range(n):
            obs, rewards, terminated, truncated, _ = env.step(list(torch_pool[t % len(torch_pool)]))
            np.stack([o.numpy() for o in obs], axis=1)
            np.stack([r.numpy() for r in rewards], axis=1)
            done = (terminated | truncated).numpy()
            if done.any():
                for i in np.flatnonzero(done).tolist():
                    env.reset_at(i, return_observations=False)
                env.get_from_scenario(get_observations=True, get_rewards=False, get_infos=False, get_dones=False)

    return run, build


def timed(run: Runner, seconds: float) -> float:
    """env-steps... of the batch per second over about ``seconds`` (whole steps)."""
    run(1)
    steps, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        run(5)
        steps += 5
    return steps / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", default="balance")
    parser.add_argument("--num-envs", type=int, default=1024)
    parser.add_argument("--max-steps", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    import torch

    kwargs = {"max_steps": args.max_steps, "continuous_actions": True}
    load_before = os.getloadavg()
    run_ours, build_ours, close, pool = ours(args.scenario, kwargs, args.num_envs)
    run_direct, build_direct = direct(args.scenario, kwargs, args.num_envs, pool)
    rates: dict[str, list[float]] = {"marl_vec DummyVecEnv": [], "VMAS direct": []}
    for _ in range(args.rounds):
        rates["marl_vec DummyVecEnv"].append(timed(run_ours, args.seconds) * args.num_envs)
        rates["VMAS direct"].append(timed(run_direct, args.seconds) * args.num_envs)
    close()
    load_after = os.getloadavg()
    print(f"VMAS {args.scenario} x {args.num_envs} (continuous actions, max_steps {args.max_steps}), "
          f"torch threads {torch.get_num_threads()}, {args.rounds} rounds of {args.seconds:g} s")
    print(f"build: marl_vec {build_ours:.1f} s, direct {build_direct:.1f} s")
    for name, values in rates.items():
        spread = ", ".join(f"{v:,.0f}" for v in values)
        print(f"{name:22s} median {statistics.median(values):>10,.0f} env-steps/s   rounds: {spread}")
    ratios = [a / b for a, b in zip(rates["marl_vec DummyVecEnv"], rates["VMAS direct"])]
    print(f"ratio marl_vec / direct: median {statistics.median(ratios):.2f} "
          f"(per round {', '.join(f'{r:.2f}' for r in ratios)})")
    print(f"load average (1, 5, 15 min): before {', '.join(f'{x:.1f}' for x in load_before)}; "
          f"after {', '.join(f'{x:.1f}' for x in load_after)}; cores {os.cpu_count()}")


if __name__ == "__main__":
    main()

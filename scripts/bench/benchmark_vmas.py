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
of threads unless ``--torch-threads`` (printed). Continuous actions, ``max_steps``
100 unless given. Building and the first reset are timed apart (ours: one
``reset_at`` per env on its own seed, or one VMAS call with ``--batched-reset``;
direct: VMAS's batched reset).

``--sweep 1,4,16,64,256,1024,4096`` measures both at each size instead (rounds
interleaved per size), writes ``--sweep-csv`` and plots ``--plot`` (log-log).

    python scripts/bench/benchmark_vmas.py
    python scripts/bench/benchmark_vmas.py --scenario transport --num-envs 1024 --seconds 3 --rounds 3
    python scripts/bench/benchmark_vmas.py --sweep 1,4,16,64,256,1024,4096 --seconds 2 --rounds 3 \
        --sweep-csv docs/images/vmas_scaling.csv --plot docs/images/vmas_scaling.png
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

from bench_plot import plot_scaling, write_rows

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
    kwargs = {k: v for k, v in kwargs.items() if k != "batched_reset"}  # ours only: VMAS's reset is batched
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


def measure(scenario: str, kwargs: dict, n_envs: int, rounds: int, seconds: float) -> dict:
    """Both candidates at one size, rounds interleaved: rates, ratios, build times and loads."""
    load_before = os.getloadavg()[0]
    run_ours, build_ours, close, pool = ours(scenario, kwargs, n_envs)
    run_direct, build_direct = direct(scenario, kwargs, n_envs, pool)
    rates: dict[str, list[float]] = {"marl_vec DummyVecEnv": [], "VMAS direct": []}
    for _ in range(rounds):
        rates["marl_vec DummyVecEnv"].append(timed(run_ours, seconds) * n_envs)
        rates["VMAS direct"].append(timed(run_direct, seconds) * n_envs)
    close()
    ratios = [a / b for a, b in zip(rates["marl_vec DummyVecEnv"], rates["VMAS direct"])]
    return {"rates": rates, "ratios": ratios, "build": (build_ours, build_direct),
            "load": (load_before, os.getloadavg()[0])}


def spread(values: list[float]) -> float:
    """(max - min) / median of one candidate's rounds."""
    return (max(values) - min(values)) / statistics.median(values)


def report(m: dict) -> None:
    print(f"build and first reset: marl_vec {m['build'][0]:.2f} s, direct {m['build'][1]:.2f} s (apart from the rates)")
    for name, values in m["rates"].items():
        rounds = ", ".join(f"{v:,.0f}" for v in values)
        print(f"{name:22s} median {statistics.median(values):>10,.0f} env-steps/s   spread {spread(values):.0%}   "
              f"rounds: {rounds}")
    print(f"ratio marl_vec / direct: median {statistics.median(m['ratios']):.2f} "
          f"(per round {', '.join(f'{r:.2f}' for r in m['ratios'])})")
    print(f"1-min load average: before {m['load'][0]:.1f}, after {m['load'][1]:.1f}; cores {os.cpu_count()}", flush=True)


def run_sweep(args: argparse.Namespace, kwargs: dict, sizes: list[int]) -> None:
    rows = []
    for n in sizes:
        print(f"-- x {n}", flush=True)
        m = measure(args.scenario, kwargs, n, args.rounds, args.seconds)
        report(m)
        for i, (name, values) in enumerate(m["rates"].items()):
            rows.append({"candidate": name, "num_envs": n, "env_steps_per_s": round(statistics.median(values)),
                         "spread": round(spread(values), 3),
                         "ratio_median": round(statistics.median(m["ratios"]), 3),
                         "ratio_per_round": " ".join(f"{r:.2f}" for r in m["ratios"]),
                         "build_and_first_reset_s": round(m["build"][i], 2),
                         "load1_before": round(m["load"][0], 2), "load1_after": round(m["load"][1], 2)})
    if args.sweep_csv:
        write_rows(rows, args.sweep_csv)
    if args.plot:
        loads = [r[k] for r in rows for k in ("load1_before", "load1_after")]
        import torch

        note = (f"{args.scenario}, max_steps {args.max_steps}, torch threads {torch.get_num_threads()}; median of "
                f"{args.rounds} x {args.seconds:g} s per point; 1-min load {min(loads):.1f}-{max(loads):.1f}")
        plot_scaling(rows, args.plot, f"VMAS through marl_vec vs direct, 2 shared CPU cores\n{note}",
                     "num_envs (one VMAS batch)",
                     lambda name: ("-", "tab:blue") if "marl_vec" in name else ("--", "tab:orange"))
        print(f"plot: {args.plot}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", default="balance")
    parser.add_argument("--num-envs", type=int, default=1024)
    parser.add_argument("--max-steps", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--torch-threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    parser.add_argument("--batched-reset", action="store_true",
                        help="ours with batched_reset=True (the first reset in one VMAS call)")
    parser.add_argument("--sweep", default=None, metavar="SIZES", help="comma-separated num_envs, e.g. 1,16,256,4096")
    parser.add_argument("--sweep-csv", default=None, metavar="CSV")
    parser.add_argument("--plot", default=None, metavar="PNG")
    args = parser.parse_args()
    sizes = [int(x) for x in args.sweep.split(",") if x.strip()] if args.sweep else []
    if args.sweep is not None and (not sizes or min(sizes) < 1):
        parser.error(f"--sweep must be positive integers, got {args.sweep!r}")
    warnings.filterwarnings("ignore")
    import torch

    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    kwargs = {"max_steps": args.max_steps, "continuous_actions": True}
    if args.batched_reset:
        kwargs["batched_reset"] = True
    print(f"VMAS {args.scenario} (continuous actions, max_steps {args.max_steps}, batched_reset {args.batched_reset}), "
          f"torch threads {torch.get_num_threads()}, {args.rounds} rounds of {args.seconds:g} s", flush=True)
    if sizes:
        run_sweep(args, kwargs, sizes)
        return
    print(f"x {args.num_envs}")
    report(measure(args.scenario, kwargs, args.num_envs, args.rounds, args.seconds))


if __name__ == "__main__":
    main()

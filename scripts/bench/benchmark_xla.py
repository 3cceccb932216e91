"""The XLA bridge's overhead: a rollout through ``venv.xla()``'s ``step`` in one jitted
``lax.scan``, against the same rollout driven from Python with ``venv.step``.

Cases (issue 51): CartPole x64 (DummyVecEnv), MPE simple_spread x32 on SubprocVecEnv,
Pong x8 (DummyVecEnv, the default Atari engine), and Pong x8 on the EnvPool engine
against EnvPool's own ``xla()`` on the same game. Both sides step the same envs with
the same pre-drawn random actions and sum the rewards (so neither can skip a step).

Rounds alternate the two sides; the ratio of a round is Python's time over the
bridge's (above 1: the bridge is faster). Reported: the median ratio and its spread
(min..max over rounds), env-steps/s of each side, and the load average before and
after, since the machine is shared.

Usage::

    python scripts/bench/benchmark_xla.py                 # every case, 5 rounds
    python scripts/bench/benchmark_xla.py --cases cartpole --steps 500 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

import marl_vec as mv

CASES: dict[str, dict[str, Any]] = {
    "cartpole": {"config": "gym/cartpole", "num_envs": 64, "backend": "dummy"},
    "spread": {"config": "mpe/simple_spread", "num_envs": 32, "backend": "subproc",
               "kwargs": {"num_workers": 2, "start_method": "forkserver"}},
    "pong": {"config": "atari/pong", "num_envs": 8, "backend": "dummy"},
    "pong_envpool": {"config": {"env": {"family": "atari", "id": "ALE/Pong-v5",
                                        "kwargs": {"preprocess": True, "engine": "envpool"}}},
                     "num_envs": 8, "backend": "dummy"},
}


def draw_actions(venv: mv.VecEnv, steps: int, seed: int) -> np.ndarray:
    """Random actions (steps, E, A), every one available (these envs mask nothing)."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, venv.spec.action.n_actions, (steps, venv.num_envs, venv.spec.n_agents)).astype(np.int32)


def python_side(venv: mv.VecEnv, actions: np.ndarray) -> Callable[[], float]:
    def run() -> float:
        total = 0.0
        for a in actions:
            total += float(venv.step(a).reward.sum())
        return total
    return run


def bridge_side(venv: mv.VecEnv, actions: np.ndarray) -> Callable[[], float]:
    fns = venv.xla(single_agent=False)
    body = lambda carry, a: ((lambda h, r: ((h, carry[1] + r.reward.sum()), None))(*fns.step(carry[0], a)))  # noqa: E731
    scan = jax.jit(lambda h, acts: jax.lax.scan(body, (h, jnp.float32(0.0)), acts)[0])
    acts = jnp.asarray(actions)
    state = {"handle": fns.handle}

    def run() -> float:
        state["handle"], total = scan(state["handle"], acts)
        return float(total)
    return run


def envpool_side(num_envs: int, actions: np.ndarray) -> tuple[Callable[[], float], Any]:
    """EnvPool's own xla() on Pong: its step inside the same jitted scan."""
    import envpool

    env = envpool.make("Pong-v5", env_type="gymnasium", num_envs=num_envs, batch_size=num_envs, seed=0)
    env.reset()
    handle, _, _, step = env.xla()
    body = lambda carry, a: ((lambda h, out: ((h, carry[1] + out[1].sum()), None))(*step(carry[0], a)))  # noqa: E731
    scan = jax.jit(lambda h, acts: jax.lax.scan(body, (h, jnp.float32(0.0)), acts)[0])
    acts = jnp.asarray(actions[..., 0])
    state = {"handle": handle}

    def run() -> float:
        state["handle"], total = scan(state["handle"], acts)
        return float(total)
    return run, env


def timed(run: Callable[[], float]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def measure(a: Callable[[], float], b: Callable[[], float], rounds: int) -> tuple[list[float], list[float]]:
    """Alternating rounds (after one warm-up each, which compiles): times of ``a`` and ``b``."""
    a(), b()
    ta, tb = [], []
    for _ in range(rounds):
        ta.append(timed(a))
        tb.append(timed(b))
    return ta, tb


def report(name: str, env_steps: int, slow: list[float], fast: list[float], labels: tuple[str, str],
           load: tuple[float, float]) -> dict[str, Any]:
    ratios = [s / f for s, f in zip(slow, fast)]
    out = {"case": name, "env_steps_per_round": env_steps, "rounds": len(ratios),
           "ratio_median": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios),
           f"{labels[0]}_steps_per_s": env_steps / statistics.median(slow),
           f"{labels[1]}_steps_per_s": env_steps / statistics.median(fast),
           "load_before": load[0], "load_after": load[1]}
    print(f"{name:14s} {labels[1]} / {labels[0]}: {out['ratio_median']:.3f}x "
          f"(spread {out['ratio_min']:.3f}..{out['ratio_max']:.3f}, {len(ratios)} rounds); "
          f"{labels[0]} {out[labels[0] + '_steps_per_s']:.0f} env-steps/s, "
          f"{labels[1]} {out[labels[1] + '_steps_per_s']:.0f}; load {load[0]:.1f} -> {load[1]:.1f}", flush=True)
    return out


def run_case(name: str, steps: int, rounds: int) -> list[dict[str, Any]]:
    case = CASES[name]
    venv = mv.make(case["config"], num_envs=case["num_envs"], backend=case["backend"], env_seed=0,
                   **case.get("kwargs", {}))
    try:
        venv.reset(seed=0)
        actions = draw_actions(venv, steps, seed=0)
        env_steps = steps * venv.num_envs
        load0 = os.getloadavg()[0]
        py, xla = measure(python_side(venv, actions), bridge_side(venv, actions), rounds)
        results = [report(name, env_steps, py, xla, ("python", "bridge"), (load0, os.getloadavg()[0]))]
        if name == "pong_envpool":
            own, env = envpool_side(venv.num_envs, actions)
            load0 = os.getloadavg()[0]
            theirs, ours = measure(own, bridge_side(venv, actions), rounds)
            results.append(report("pong_vs_envpool", env_steps, theirs, ours, ("envpool_xla", "bridge"),
                                  (load0, os.getloadavg()[0])))
            env.close()
        return results
    finally:
        venv.close()


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of: {', '.join(CASES)}")
    parser.add_argument("--steps", type=int, default=200, help="steps of the batch per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", default=None, help="write the results to this file")
    args = parser.parse_args(argv)
    names = [n for n in args.cases.split(",") if n]
    unknown = [n for n in names if n not in CASES]
    if unknown:
        parser.error(f"unknown cases {unknown}; allowed: {', '.join(CASES)}")
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}, {os.cpu_count()} CPUs", flush=True)
    results = [r for n in names for r in run_case(n, args.steps, args.rounds)]
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return results


if __name__ == "__main__":
    main()

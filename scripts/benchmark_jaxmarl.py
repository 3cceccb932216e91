"""JaxMARL through marl_vec against JaxMARL used directly, and against a plain loop over mpe2.

Three comparisons, ratios from one run, compile times reported apart:

- MPE simple_spread x 1024: DummyVecEnv over the ``jaxmarl`` family (one jitted,
  vmapped call per step, outputs copied into our buffers) against JaxMARL used
  directly (``jax.jit(jax.vmap(env.step))``, keys split per step, the same random
  actions, the same outputs read into numpy: obs of every agent, rewards, dones);
- the same against a plain Python loop over PettingZoo's mpe2 ``simple_spread_v3``
  (``--loop-envs`` envs, reset when done, obs written into one batch array);
- SMAX 3m x 256: DummyVecEnv against JaxMARL direct.

Each candidate runs ``--seconds`` of wall time per round after a warm-up step,
rounds interleaved (``--rounds``); the median env-steps/s is reported. Run it on
a quiet machine and report ``uptime`` beside it: every candidate uses all cores.

    python scripts/benchmark_jaxmarl.py
    python scripts/benchmark_jaxmarl.py --seconds 2 --rounds 2
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import time
from typing import Callable

import numpy as np

import marl_vec as mv
from marl_vec.envs.registry import make_env_fn

Runner = Callable[[int], None]  # runs n steps


def random_actions(n_envs: int, n_agents: int, n_actions: int, pool: int = 16) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.integers(0, n_actions, (n_envs, n_agents)).astype(np.int32) for _ in range(pool)]


def ours(env_id: str, n_envs: int) -> tuple[Runner, float, Callable[[], None]]:
    started = time.perf_counter()
    venv = mv.DummyVecEnv([make_env_fn("jaxmarl", env_id)] * n_envs, env_seed=0)
    venv.reset()
    build = time.perf_counter() - started
    spec = venv.spec
    if env_id.startswith("smax"):  # SMAX refuses unavailable actions: pick available ones
        rng = np.random.default_rng(0)
        state = {"r": venv.reset()}

        def run(n: int) -> None:
            for _ in range(n):
                avail = state["r"].avail_actions
                state["r"] = venv.step((rng.random(avail.shape) * avail).argmax(-1).astype(np.int32))
    else:
        pool = random_actions(n_envs, spec.n_agents, spec.n_actions)

        def run(n: int) -> None:
            for t in range(n):
                venv.step(pool[t % len(pool)])
    return run, build, venv.close


def direct(env_id: str, n_envs: int) -> tuple[Runner, float, Callable[[], None]]:
    """JaxMARL used directly: jit(vmap(env.step)), its autoreset, outputs read into numpy."""
    import jax

    from marl_vec.envs.jaxmarl.catalog import make_native, resolve

    make_id, kwargs = resolve(env_id)
    env = make_native(make_id, kwargs)
    agents = list(env.agents)
    n_actions = int(getattr(env.action_space(agents[0]), "num_categories", 0) or env.action_space(agents[0]).n)
    started = time.perf_counter()
    keys = jax.vmap(jax.random.PRNGKey)(np.arange(n_envs, dtype=np.uint32))
    split = jax.jit(jax.vmap(lambda k: jax.random.split(k)))
    obs, state = jax.jit(jax.vmap(env.reset))(keys)
    step = jax.jit(jax.vmap(env.step))
    avail_fn = jax.jit(jax.vmap(env.get_avail_actions)) if make_id.endswith("SMAX") else None
    holder = {"keys": keys, "state": state, "avail": None}

    def one(actions: np.ndarray) -> None:
        pairs = split(holder["keys"])
        holder["keys"] = pairs[:, 0]
        acts = {a: actions[:, i] for i, a in enumerate(agents)}
        obs, holder["state"], rewards, dones, _ = step(pairs[:, 1], holder["state"], acts)
        for a in agents:  # the same outputs read as ours: obs, rewards, dones (and avail for SMAX)
            np.asarray(obs[a]), np.asarray(rewards[a])
        np.asarray(dones["__all__"])
        if avail_fn is not None:
            avail = avail_fn(holder["state"])
            holder["avail"] = np.stack([np.asarray(avail[a]) for a in agents], axis=1)

    pool = random_actions(n_envs, len(agents), n_actions)
    if avail_fn is not None:
        rng = np.random.default_rng(0)
        holder["avail"] = np.stack([np.asarray(v) for v in avail_fn(state).values()], axis=1)

        def run(n: int) -> None:
            for _ in range(n):
                avail = holder["avail"]
                one((rng.random(avail.shape) * avail).argmax(-1).astype(np.int32))
    else:
        def run(n: int) -> None:
            for t in range(n):
                one(pool[t % len(pool)])
    run(2)  # compiles (reset's weak types compile step twice)
    return run, time.perf_counter() - started, lambda: None


def plain_mpe2_loop(n_envs: int) -> tuple[Runner, float, Callable[[], None]]:
    from mpe2 import simple_spread_v3

    envs = [simple_spread_v3.parallel_env(N=3, max_cycles=25) for _ in range(n_envs)]
    agents = envs[0].possible_agents
    batch = np.zeros((n_envs, len(agents), 18), dtype=np.float32)
    for i, env in enumerate(envs):
        obs, _ = env.reset(seed=i)
        batch[i] = [obs[a] for a in agents]
    pool = random_actions(n_envs, len(agents), 5)

    def run(n: int) -> None:
        for t in range(n):
            actions = pool[t % len(pool)]
            for i, env in enumerate(envs):
                obs, _, term, trunc, _ = env.step({a: int(actions[i, k]) for k, a in enumerate(agents)})
                if not env.agents:
                    obs, _ = env.reset()
                batch[i] = [obs[a] for a in agents]

    return run, 0.0, lambda: [env.close() for env in envs]


def rate(run: Runner, n_envs: int, seconds: float) -> float:
    steps, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        run(8)
        steps += 8
    return steps * n_envs / (time.perf_counter() - started)


def compare(title: str, candidates: dict[str, tuple[Callable, int]], rounds: int, seconds: float) -> dict[str, float]:
    built = {}
    for name, (make, n_envs) in candidates.items():
        with contextlib.redirect_stdout(io.StringIO()):
            run, compile_s, close = make()
        built[name] = (run, n_envs, close)
        print(f"  {name}: built and compiled in {compile_s:.1f} s")
    rates: dict[str, list[float]] = {name: [] for name in built}
    for _ in range(rounds):
        for name, (run, n_envs, _) in built.items():
            rates[name].append(rate(run, n_envs, seconds))
    for _, _, close in built.values():
        close()
    medians = {name: statistics.median(r) for name, r in rates.items()}
    print(title)
    for name, value in medians.items():
        print(f"  {name:<40} {value:>12,.0f} env-steps/s   (rounds: {', '.join(f'{r:,.0f}' for r in rates[name])})")
    return medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="wall time per candidate per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mpe-envs", type=int, default=1024)
    parser.add_argument("--smax-envs", type=int, default=256)
    parser.add_argument("--loop-envs", type=int, default=64, help="envs of the plain mpe2 loop")
    args = parser.parse_args()
    print(f"load average: {os.getloadavg()}")
    mpe = compare(f"MPE simple_spread x {args.mpe_envs}", {
        "marl_vec DummyVecEnv (jaxmarl family)": (lambda: ours("jax_mpe/simple_spread", args.mpe_envs), args.mpe_envs),
        "JaxMARL direct (jit + vmap)": (lambda: direct("jax_mpe/simple_spread", args.mpe_envs), args.mpe_envs),
        f"plain loop over mpe2 x {args.loop_envs}": (lambda: plain_mpe2_loop(args.loop_envs), args.loop_envs),
    }, args.rounds, args.seconds)
    names = list(mpe)
    print(f"  ratio ours / direct: {mpe[names[0]] / mpe[names[1]]:.2f}x (target >= 0.8x); "
          f"ours / plain mpe2 loop: {mpe[names[0]] / mpe[names[2]]:.0f}x (target >= 50x)")
    smax = compare(f"SMAX 3m x {args.smax_envs}", {
        "marl_vec DummyVecEnv (jaxmarl family)": (lambda: ours("smax/3m", args.smax_envs), args.smax_envs),
        "JaxMARL direct (jit + vmap)": (lambda: direct("smax/3m", args.smax_envs), args.smax_envs),
    }, args.rounds, args.seconds)
    names = list(smax)
    print(f"  ratio ours / direct: {smax[names[0]] / smax[names[1]]:.2f}x (target >= 0.8x)")
    print(f"load average: {os.getloadavg()}")


if __name__ == "__main__":
    main()

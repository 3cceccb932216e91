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
rounds interleaved (``--rounds``); the median env-steps/s is reported with every
round's rate, their spread ((max - min) / median) and the 1-minute load average
at each round. Run it on a quiet machine: every candidate uses all cores.

``--sweep`` then measures env-steps/s against num_envs (1 ... 4,096) for both
families and JaxMARL direct (and the plain mpe2 loop up to 64 envs), writes the
numbers to ``--sweep-csv`` and plots them into ``--plot`` (log-log).

    python scripts/bench/benchmark_jaxmarl.py
    python scripts/bench/benchmark_jaxmarl.py --seconds 2 --rounds 2
    python scripts/bench/benchmark_jaxmarl.py --sweep --plot docs/images/jaxmarl_scaling.png
    python scripts/bench/benchmark_jaxmarl.py --mabrax ant_4x2 --mabrax-envs 1024   # Box actions (extra mabrax)
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import time
from typing import Callable, Sequence

import numpy as np

import marl_vec as mv
from marl_vec.envs.registry import make_env_fn

from bench_plot import plot_scaling, write_rows

Runner = Callable[[int], None]  # runs n steps


def random_actions(n_envs: int, n_agents: int, n_actions: int, pool: int = 16) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.integers(0, n_actions, (n_envs, n_agents)).astype(np.int32) for _ in range(pool)]


def random_box_actions(n_envs: int, n_agents: int, width: int, pool: int = 16) -> list[np.ndarray]:
    """Uniform in [-1, 1] (MABrax's bounds), ``(n_envs, n_agents, width)`` float32, padding included."""
    rng = np.random.default_rng(0)
    return [rng.uniform(-1, 1, (n_envs, n_agents, width)).astype(np.float32) for _ in range(pool)]


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
        if spec.discrete:
            pool = random_actions(n_envs, spec.n_agents, spec.n_actions)
        else:
            pool = random_box_actions(n_envs, spec.n_agents, spec.action.shape[0])

        def run(n: int) -> None:
            for t in range(n):
                venv.step(pool[t % len(pool)])
    return run, build, venv.close


def direct(env_id: str, n_envs: int) -> tuple[Runner, float, Callable[[], None]]:
    """JaxMARL used directly: jit(vmap(env.step)), its autoreset, outputs read into numpy."""
    import jax

    from marl_vec.envs.jaxmarl.catalog import make_native, resolve

    make_id, kwargs = resolve(env_id)  # MABrax: the family's auto_reset=False (JaxMARL's step resets)
    env = make_native(make_id, kwargs)
    agents = list(env.agents)
    space = env.action_space(agents[0])
    box = type(space).__name__ == "Box"
    # Box: each agent's own size (the pool is padded to the largest, as ours is).
    sizes = [int(env.action_space(a).shape[0]) for a in agents] if box else []
    n_actions = 0 if box else int(getattr(space, "num_categories", 0) or space.n)
    started = time.perf_counter()
    keys = jax.vmap(jax.random.PRNGKey)(np.arange(n_envs, dtype=np.uint32))
    split = jax.jit(jax.vmap(lambda k: jax.random.split(k)))
    obs, state = jax.jit(jax.vmap(env.reset))(keys)
    step = jax.jit(jax.vmap(env.step))
    smax = make_id.endswith("SMAX")
    avail_fn = jax.jit(jax.vmap(env.get_avail_actions)) if smax else None
    holder = {"keys": keys, "state": state, "avail": None}

    def one(actions: np.ndarray) -> None:
        pairs = split(holder["keys"])
        holder["keys"] = pairs[:, 0]
        if box:
            acts = {a: actions[:, i, :d] for i, (a, d) in enumerate(zip(agents, sizes))}
        else:
            acts = {a: actions[:, i] for i, a in enumerate(agents)}
        obs, holder["state"], rewards, dones, _ = step(pairs[:, 1], holder["state"], acts)
        for a in agents:  # the same outputs read as ours: obs, rewards, dones (SMAX: world state, avail)
            np.asarray(obs[a]), np.asarray(rewards[a]), np.asarray(dones[a])
        np.asarray(dones["__all__"])
        if smax:
            np.asarray(obs["world_state"])
        if avail_fn is not None:
            avail = avail_fn(holder["state"])
            holder["avail"] = np.stack([np.asarray(avail[a]) for a in agents], axis=1)

    if box:
        pool = random_box_actions(n_envs, len(agents), max(sizes))
    else:
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


def spread(rates: Sequence[float]) -> float:
    """(max - min) / median of one candidate's rounds: how far to trust its median on a shared machine."""
    return (max(rates) - min(rates)) / statistics.median(rates)


def compare(title: str, candidates: dict[str, tuple[Callable, int]], rounds: int, seconds: float,
            per_round: dict[str, list[float]] | None = None) -> dict[str, float]:
    """Median env-steps/s of each candidate, rounds interleaved; ``per_round`` gets every round's rate."""
    built = {}
    for name, (make, n_envs) in candidates.items():
        with contextlib.redirect_stdout(io.StringIO()):
            run, compile_s, close = make()
        built[name] = (run, n_envs, close)
        print(f"  {name}: built and compiled in {compile_s:.1f} s (apart from the rates below)", flush=True)
    rates: dict[str, list[float]] = {name: [] for name in built}
    loads = []
    for _ in range(rounds):
        for name, (run, n_envs, _) in built.items():
            rates[name].append(rate(run, n_envs, seconds))
        loads.append(os.getloadavg()[0])
    for _, _, close in built.values():
        close()
    if per_round is not None:
        per_round.update(rates)
    medians = {name: statistics.median(r) for name, r in rates.items()}
    print(f"{title}   (1-min load after each round: {', '.join(f'{x:.1f}' for x in loads)})")
    for name, value in medians.items():
        print(f"  {name:<40} {value:>12,.0f} env-steps/s   spread {spread(rates[name]):.0%}   "
              f"(rounds: {', '.join(f'{r:,.0f}' for r in rates[name])})")
    return medians


SWEEP_SIZES = (1, 4, 16, 64, 256, 1024, 4096)


def sweep(sizes: Sequence[int], seconds: float, rounds: int, loop_max: int, path: str | None) -> list[dict]:
    """env-steps/s against num_envs for each candidate; one CSV row per (candidate, size)."""
    candidates: dict[str, Callable[[int], tuple[Runner, float, Callable[[], None]]]] = {
        "MPE simple_spread, marl_vec DummyVecEnv": lambda n: ours("jax_mpe/simple_spread", n),
        "MPE simple_spread, JaxMARL direct": lambda n: direct("jax_mpe/simple_spread", n),
        "SMAX 3m, marl_vec DummyVecEnv": lambda n: ours("smax/3m", n),
        "SMAX 3m, JaxMARL direct": lambda n: direct("smax/3m", n),
        "MPE simple_spread, plain mpe2 loop": plain_mpe2_loop,
    }
    rows = []
    for n in sizes:
        for name, make in candidates.items():
            if "mpe2" in name and n > loop_max:  # linear in n: the small sizes say it all
                continue
            with contextlib.redirect_stdout(io.StringIO()):
                run, compile_s, close = make(n)
            rates = [rate(run, n, seconds) for _ in range(rounds)]
            close()
            row = {"candidate": name, "num_envs": n, "env_steps_per_s": round(statistics.median(rates)),
                   "spread": round(spread(rates), 3), "compile_s": round(compile_s, 1),
                   "load1": round(os.getloadavg()[0], 2)}
            rows.append(row)
            print(f"  {name:<40} x{n:<5} {row['env_steps_per_s']:>12,} env-steps/s  spread {row['spread']:.0%}  "
                  f"(compile {compile_s:.1f} s, load {row['load1']})", flush=True)
    if path:
        write_rows(rows, path)
    return rows


def plot_sweep(rows: list[dict], path: str, note: str) -> None:
    """Log-log env-steps/s against num_envs, one line per candidate."""
    def style_of(name: str) -> tuple[str, str]:
        if "mpe2" in name:
            return ":", "tab:gray"
        return ("-" if "DummyVecEnv" in name else "--"), ("tab:blue" if name.startswith("MPE") else "tab:red")

    plot_scaling(rows, path, f"JaxMARL through marl_vec vs direct, 2 shared CPU cores\n{note}",
                 "num_envs (one jitted, vmapped block)", style_of)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="wall time per candidate per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mpe-envs", type=int, default=1024)
    parser.add_argument("--smax-envs", type=int, default=256)
    parser.add_argument("--loop-envs", type=int, default=64, help="envs of the plain mpe2 loop")
    parser.add_argument("--sweep", action="store_true", help="also measure env-steps/s against num_envs")
    parser.add_argument("--sweep-sizes", default=",".join(map(str, SWEEP_SIZES)), help="comma-separated num_envs")
    parser.add_argument("--sweep-seconds", type=float, default=1.5, help="wall time per size and round")
    parser.add_argument("--sweep-rounds", type=int, default=2)
    parser.add_argument("--sweep-csv", default=None, metavar="CSV", help="write the sweep's numbers here")
    parser.add_argument("--plot", default=None, metavar="PNG", help="plot the sweep here")
    parser.add_argument("--skip-compare", action="store_true", help="only the sweep")
    parser.add_argument("--mabrax", default=None, metavar="ID",
                        help="only compare this MABrax env (e.g. ant_4x2) through marl_vec with JaxMARL direct")
    parser.add_argument("--mabrax-envs", type=int, default=1024)
    args = parser.parse_args()
    if args.skip_compare and not args.sweep:
        parser.error("--skip-compare needs --sweep")
    sizes = [int(x) for x in args.sweep_sizes.split(",") if x.strip()]
    if any(n < 1 for n in sizes) or not sizes:
        parser.error(f"--sweep-sizes must be positive integers, got {args.sweep_sizes!r}")
    print(f"load average: {os.getloadavg()}", flush=True)
    if args.mabrax:
        compare_mabrax(args.mabrax, args.mabrax_envs, args.rounds, args.seconds)
    elif not args.skip_compare:
        compare_all(args)
    if args.sweep:
        print("env-steps/s against num_envs:")
        rows = sweep(sizes, args.sweep_seconds, args.sweep_rounds, args.loop_envs, args.sweep_csv)
        if args.plot:
            loads = [r["load1"] for r in rows]
            plot_sweep(rows, args.plot, f"median of {args.sweep_rounds} x {args.sweep_seconds:g} s per point; "
                                        f"1-min load {min(loads):.1f}-{max(loads):.1f}")
            print(f"plot: {args.plot}")
    print(f"load average: {os.getloadavg()}")


def compare_mabrax(env_id: str, n_envs: int, rounds: int, seconds: float) -> None:
    """MABrax (Box actions) through marl_vec against JaxMARL direct, the same env (auto_reset=False)."""
    rates: dict[str, list[float]] = {}
    medians = compare(f"MABrax {env_id} x {n_envs}", {
        "marl_vec DummyVecEnv (jaxmarl family)": (lambda: ours(env_id, n_envs), n_envs),
        "JaxMARL direct (jit + vmap)": (lambda: direct(env_id, n_envs), n_envs),
    }, rounds, seconds, rates)
    names = list(medians)
    # Each round runs ours then direct back to back: their ratio shares that round's load.
    ratios = [a / b for a, b in zip(rates[names[0]], rates[names[1]])]
    print(f"  ratio ours / direct: {medians[names[0]] / medians[names[1]]:.2f}x of the medians, "
          f"{statistics.median(ratios):.2f}x median of the rounds' ratios "
          f"({', '.join(f'{r:.2f}' for r in ratios)}) (target >= 0.9x)")


def compare_all(args: argparse.Namespace) -> None:
    """The three comparisons of the module doc, ratios from one run."""
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


if __name__ == "__main__":
    main()

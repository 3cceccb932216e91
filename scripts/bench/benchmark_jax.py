"""The functional batch's speed (issue 50): ``marl_vec.jax.batch`` in one jitted ``lax.scan``,
against JaxMARL stepped directly in the same scan, against the stateful ``jaxmarl`` family
driven from Python, and optimistic resets against a reset for every env on every step.

Sides, for each case and number of envs E (every side draws each step's actions inside its
loop from the current available actions, uniformly, so that SMAX's dead units stay still):

- ``batch``: ``b.step`` of ``marl_vec.jax.batch(id, E)`` (``same_step``) in ``lax.scan``;
- ``jaxmarl``: ``jax.vmap(env.step)`` of the same ``jaxmarl.make`` env in the same kind of
  scan: JaxMARL's own auto-resetting step (it computes a reset on every step), with its
  dict actions; the goal is batch / jaxmarl >= 0.95;
- ``stateful``: a ``DummyVecEnv`` of the ``jaxmarl`` family, one jitted call per step from
  Python (``--stateful-steps`` steps, numpy actions); the goal at E = 1 is batch / stateful >= 10;
- ``optimistic`` (``--optimistic-cases``): ``batch(id, E, resets_per_step=k)`` against
  ``batch(id, E)``, both scanned: k resets per step instead of E; the goal where reset is
  costly (SMAX, MABrax) is >= 1.3.

Rounds alternate the sides after one compiling call each; reported: env-steps/s per side, the
median ratio of each pair and its spread (min..max over rounds), and the load average before
and after, since these machines are shared. Compiling is not timed.

Usage::

    python scripts/bench/benchmark_jax.py                          # spread and smax, E = 1, 16, 1024
    python scripts/bench/benchmark_jax.py --cases spread --envs 1 16 --rounds 3 --steps 200
    python scripts/bench/benchmark_jax.py --optimistic-cases smax mabrax_ant   # MABrax: a long compile
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import marl_vec as mv
import marl_vec.jax as mvj
from marl_vec.envs.registry import make_env_fn

CASES = {"spread": "jax_mpe/simple_spread", "smax": "smax/3m", "mabrax_ant": "ant_4x2"}


def _uniform(key: Any, avail: Any) -> Any:
    """One available action per row of ``avail`` (..., n_actions), uniformly."""
    return jax.random.categorical(key, jnp.where(avail, 0.0, -jnp.inf)).astype(jnp.int32)


def batch_side(b: mvj.Batch, steps: int) -> Callable[[Any], Any]:
    """A jitted function of a key: reset, then ``steps`` steps of ``b`` in a scan; the reward sum."""
    def run(key: Any) -> Any:
        state, ts = b.reset(key)

        def one(carry: tuple, k: Any) -> tuple:
            state, ts = carry
            if ts.avail_actions is None:  # Box actions
                actions = jax.random.uniform(k, (b.num_envs, b.spec.n_agents, *b.spec.action_shape), minval=-1.0)
            else:
                actions = _uniform(k, ts.avail_actions)
            state, ts = b.step(state, actions)
            return (state, ts), ts.reward.sum()

        _, rewards = jax.lax.scan(one, (state, ts), jax.random.split(key, steps))
        return rewards.sum()
    return jax.jit(run)


def jaxmarl_side(b: mvj.Batch, steps: int) -> Callable[[Any], Any]:
    """The same scan over JaxMARL's own env, used directly: ``vmap(env.step)``, dict actions."""
    env, agents, e = b.env, list(b.agents), b.num_envs
    try:  # MPE has no available actions: every action, drawn the same way as the batch draws them
        env.get_avail_actions(env.reset(jax.random.PRNGKey(0))[1])
        has_avail = True
    except NotImplementedError:
        has_avail = False

    def available(state: Any) -> dict[str, Any]:
        if has_avail:
            return jax.vmap(env.get_avail_actions)(state)
        return {a: jnp.ones((e, env.action_space(a).n), bool) for a in agents}

    def run(key: Any) -> Any:
        _, state = jax.vmap(env.reset)(jax.random.split(key, e))

        def one(state: Any, k: Any) -> tuple:
            k_act, k_step = jax.random.split(k)
            avail = available(state)
            keys = jax.random.split(k_act, len(agents))
            actions = {a: _uniform(keys[i], avail[a]) for i, a in enumerate(agents)}
            _, state, reward, _, _ = jax.vmap(env.step)(jax.random.split(k_step, e), state, actions)
            return state, sum(reward[a].sum() for a in agents)

        _, rewards = jax.lax.scan(one, state, jax.random.split(key, steps))
        return rewards.sum()
    return jax.jit(run)


def stateful_side(env_id: str, e: int, steps: int) -> tuple[Callable[[], float], Callable[[], None]]:
    """The stateful family: ``steps`` steps of a DummyVecEnv from Python, random available actions."""
    venv = mv.DummyVecEnv([make_env_fn("jaxmarl", env_id)] * e, env_seed=0)
    rng = np.random.default_rng(0)
    r = venv.reset()

    def run() -> float:
        nonlocal r
        total = 0.0
        for _ in range(steps):
            avail = r.avail_actions
            if avail is None:
                actions = rng.uniform(-1.0, 1.0, (e, venv.spec.n_agents, *venv.spec.action_shape)).astype(np.float32)
            else:
                scores = np.where(avail, rng.random(avail.shape), -1.0)
                actions = scores.argmax(-1).astype(np.int32)
            r = venv.step(actions)
            total += float(r.reward.sum())
        return total
    return run, venv.close


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    jax.block_until_ready(fn())
    return time.perf_counter() - start


def compare(pairs: dict[str, tuple[Callable[[], Any], int]], rounds: int) -> dict[str, list[float]]:
    """Each side's env-steps/s per round, the sides alternating (each called once first, untimed)."""
    for fn, _ in pairs.values():
        jax.block_until_ready(fn())
    rates: dict[str, list[float]] = {name: [] for name in pairs}
    for _ in range(rounds):
        for name, (fn, env_steps) in pairs.items():
            rates[name].append(env_steps / timed(fn))
    return rates


def ratio(rates: dict[str, list[float]], top: str, bottom: str) -> dict[str, float]:
    per_round = [a / b for a, b in zip(rates[top], rates[bottom])]
    return {"median": statistics.median(per_round), "min": min(per_round), "max": max(per_round)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", nargs="*", default=["spread", "smax"], choices=["spread", "smax"])
    parser.add_argument("--envs", nargs="+", type=int, default=[1, 16, 1024])
    parser.add_argument("--steps", type=int, default=500, help="steps per scanned rollout")
    parser.add_argument("--stateful-steps", type=int, default=100, help="steps per round of the stateful side")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--optimistic-cases", nargs="*", default=["smax"], choices=sorted(CASES))
    parser.add_argument("--resets-per-step", type=int, default=1)
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    load_before = os.getloadavg()
    key = jax.random.PRNGKey(0)
    results = []
    for case in args.cases:
        for e in args.envs:
            b = mvj.batch(CASES[case], num_envs=e)
            run_batch, run_jaxmarl = batch_side(b, args.steps), jaxmarl_side(b, args.steps)
            run_stateful, close = stateful_side(CASES[case], e, args.stateful_steps)
            try:
                rates = compare({"batch": (lambda: run_batch(key), e * args.steps),
                                 "jaxmarl": (lambda: run_jaxmarl(key), e * args.steps),
                                 "stateful": (run_stateful, e * args.stateful_steps)}, args.rounds)
            finally:
                close()
            row = {"case": case, "envs": e, **{f"{k}_steps_per_s": statistics.median(v) for k, v in rates.items()},
                   "batch_over_jaxmarl": ratio(rates, "batch", "jaxmarl"),
                   "batch_over_stateful": ratio(rates, "batch", "stateful")}
            results.append(row)
            print(json.dumps(row, default=lambda x: round(x, 3)), flush=True)
    for case in args.optimistic_cases:  # Box MABrax too: only the batch's two forms
        for e in [n for n in args.envs if n > args.resets_per_step]:
            plain = batch_side(mvj.batch(CASES[case], num_envs=e), args.steps)
            opt = batch_side(mvj.batch(CASES[case], num_envs=e, resets_per_step=args.resets_per_step), args.steps)
            rates = compare({"optimistic": (lambda: opt(key), e * args.steps),
                             "same_step": (lambda: plain(key), e * args.steps)}, args.rounds)
            row = {"case": case, "envs": e, "resets_per_step": args.resets_per_step,
                   **{f"{k}_steps_per_s": statistics.median(v) for k, v in rates.items()},
                   "optimistic_over_same_step": ratio(rates, "optimistic", "same_step")}
            results.append(row)
            print(json.dumps(row, default=lambda x: round(x, 3)), flush=True)
    summary = {"load_before": load_before, "load_after": os.getloadavg(), "rounds": args.rounds,
               "steps": args.steps, "results": results, "jax": jax.__version__, "device": str(jax.devices()[0])}
    print(f"load average before {load_before[0]:.2f}, after {summary['load_after'][0]:.2f}")
    for row in results:
        pairs = [(name, row[name]) for name in ("batch_over_jaxmarl", "batch_over_stateful", "optimistic_over_same_step")
                 if name in row]
        print(f"{row['case']:>10} E={row['envs']:<5} " + ", ".join(
            f"{name.replace('_over_', '/')} {r['median']:.2f}x ({r['min']:.2f}..{r['max']:.2f})" for name, r in pairs))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)


if __name__ == "__main__":
    main()

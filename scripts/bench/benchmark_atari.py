"""Atari Pong x 8: DummyVecEnv vs a plain loop vs gymnasium's SyncVectorEnv, as ratios in one run.

The plain loop is what a hand-written trainer does without a vector library:
step 8 gymnasium envs in turn, reset an env when its episode ends, and write
each observation into one preallocated (8, ...) uint8 batch. All candidates
step the same env chain (``marl_vec.envs.atari.atari_gym_env``) with the same
seeds and actions, in the alternating rounds of ``scripts/bench/benchmark.py``.
Time is this process's CPU time (every candidate runs in this one process), so
that other jobs on a shared machine do not count.

    python scripts/bench/benchmark_atari.py                 # preprocessed and raw frames
    python scripts/bench/benchmark_atari.py --obs raw --seconds 4
    python scripts/bench/benchmark_atari.py --engines       # the engine comparison below

``--engines``: Pong x 8 with the standard DQN preprocessing (noop 30, frame skip 4
with max-pool, grayscale 84x84, stack 4, sticky actions 0.25), side by side in
one run: a plain Python loop over gymnasium's ``AtariPreprocessing`` +
``FrameStackObservation``, DummyVecEnv on the python engine, DummyVecEnv on the
ale_vector engine (2 threads; what the default, ``auto``, picks; and lean, ``copy=False,
validate=False``: what the contract's defaults cost), ale-py's ``AtariVectorEnv`` used directly (2
threads), and, when installed, EnvPool used directly (2 threads, synchronous) and
DummyVecEnv on the envpool engine (2 threads; also with ``copy=False``). Wall time (the
engines run threads), interleaved rounds, medians of env-steps/s and of the
per-step latency; each candidate is built and closed in its turn, so that no idle
engine's threads run beside the measured one. Besides the medians, each pair (ours
over an engine against that engine used directly) is compared round by round: the
median of the per-round ratios, and the ratio of CPU time (every thread of this
process) per env-step, which other jobs on a shared machine disturb less than wall
time. Report ``uptime`` beside it: the machine is shared. ``--same-step`` adds
``AtariVectorEnv`` used directly with the options our engine asks of it (same-step
autoreset, raw rewards): the engine's own cost of our contract. ``--only`` runs the
candidates whose names contain one of the given words (``--only ale_vector,AtariVectorEnv``).
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


# -- engines: the C++ engines against marl_vec over them -----------------------------

PONG = dict(noop_max=30, frame_skip=4, screen_size=84, grayscale=True, frame_stack=4,
            repeat_action_probability=0.25, clip_rewards=True)


class Timed:
    """A candidate of the engine comparison: ``step(actions (n, 1))`` after ``build``; wall times per step."""

    def __init__(self, name: str, build):
        self.name, self.build = name, build
        self.rates: list[float] = []
        self.latencies: list[float] = []


def _plain_pong_loop(n: int):
    """gymnasium's AtariPreprocessing + FrameStackObservation, stepped env by env into one batch."""
    from marl_vec.envs.atari import atari_gym_env

    opts = {k: v for k, v in PONG.items() if k not in ("clip_rewards", "repeat_action_probability")}
    envs = [atari_gym_env(ENV_ID, preprocess=True, repeat_action_probability=0.25, **opts)[0] for _ in range(n)]
    batch = np.stack([env.reset(seed=i)[0] for i, env in enumerate(envs)])
    rewards = np.zeros(n, dtype=np.float32)

    def step(a: np.ndarray) -> None:
        for i, env in enumerate(envs):
            obs, reward, terminated, truncated, _ = env.step(int(a[i, 0]))
            if terminated or truncated:
                obs, _ = env.reset()
            batch[i] = obs
            rewards[i] = np.sign(reward)
    return step, lambda: [e.close() for e in envs]


def _marl_vec_pong(n: int, engine: str, copy: bool = True, validate: bool = True, **kwargs):
    from marl_vec.envs.atari import make_atari

    opts = dict(PONG, **kwargs)
    venv = mv.DummyVecEnv([functools.partial(make_atari, ENV_ID, preprocess=True, engine=engine, **opts)] * n,
                          env_seed=0, copy=copy, validate=validate)
    venv.reset()
    return venv.step, venv.close


def _ale_vector_direct(n: int, threads: int, **options):
    """``options``: ``autoreset_mode="SameStep", reward_clipping=False`` are what our engine asks for."""
    from ale_py.vector_env import AtariVectorEnv

    options = {"reward_clipping": True, **options}
    env = AtariVectorEnv("pong", n, num_threads=threads, noop_max=30, frameskip=4, img_height=84, img_width=84,
                         grayscale=True, stack_num=4, repeat_action_probability=0.25, use_fire_reset=False, **options)
    env.reset(seed=0)
    return (lambda a: env.step(a[:, 0])), env.close


def _envpool_direct(n: int, threads: int):
    import envpool

    env = envpool.make("Pong-v5", env_type="gymnasium", num_envs=n, batch_size=n, num_threads=threads, seed=0,
                       noop_max=30, frame_skip=4, img_height=84, img_width=84, gray_scale=True, stack_num=4,
                       repeat_action_probability=0.25, reward_clip=True, episodic_life=False, use_fire_reset=False)
    env.reset()
    return (lambda a: env.step(a[:, 0])), env.close


def engines(n: int, seconds: float, rounds: int, threads: int = 2, same_step: bool = False,
            only: str | None = None) -> list[str]:
    """The engine comparison (see the module docstring); returns the report lines."""
    import importlib.util
    import os

    cases = [
        Timed("plain loop (gymnasium)", lambda: _plain_pong_loop(n)),
        Timed("DummyVecEnv, python", lambda: _marl_vec_pong(n, "python")),
        Timed(f"DummyVecEnv, ale_vector {threads}t (auto)", lambda: _marl_vec_pong(n, "ale_vector", engine_threads=threads)),
        # lean: no copies, no checks; what the contract's defaults cost on top of the engine
        Timed(f"DummyVecEnv, ale_vector {threads}t lean", lambda: _marl_vec_pong(
            n, "ale_vector", copy=False, validate=False, engine_threads=threads)),
        Timed(f"AtariVectorEnv direct {threads}t", lambda: _ale_vector_direct(n, threads)),
    ]
    if same_step:  # the engine alone with the options our contract asks of it
        cases.append(Timed(f"AtariVectorEnv direct {threads}t same-step", lambda: _ale_vector_direct(
            n, threads, autoreset_mode="SameStep", reward_clipping=False)))
    if importlib.util.find_spec("envpool") is not None:
        cases.append(Timed(f"EnvPool direct {threads}t", lambda: _envpool_direct(n, threads)))
        cases.append(Timed(f"DummyVecEnv, envpool {threads}t", lambda: _marl_vec_pong(n, "envpool", engine_threads=threads)))
        cases.append(Timed(f"DummyVecEnv, envpool {threads}t copy=False", lambda: _marl_vec_pong(n, "envpool", copy=False, engine_threads=threads)))
    if only:  # a subset by name, e.g. "ale_vector,AtariVectorEnv": ours on ale_vector and the engine alone
        cases = [c for c in cases if any(part.strip().lower() in c.name.lower() for part in only.split(","))]
    actions = np.random.default_rng(0).integers(0, 6, size=(1024, n, 1)).astype(np.int32)
    times = np.zeros(200_000)
    cpu: dict[str, list[float]] = {c.name: [] for c in cases}
    load_at_start = os.getloadavg()[0]
    for r in range(rounds):
        # Interleaved: every candidate once per round, in reverse order every other round, so
        # that a load that drifts during a round favours no candidate.
        for c in cases if r % 2 == 0 else cases[::-1]:
            # Built and closed in its turn: an idle engine's threads left alive beside
            # another engine's would take its cores (measured: up to 3x apart).
            step, close = c.build()
            try:
                for t in range(20):  # warm-up
                    step(actions[t])
                k, start, cpu_start = 0, time.perf_counter(), time.process_time()
                now = start
                while now - start < seconds and k < len(times):
                    step(actions[k % len(actions)])
                    after = time.perf_counter()
                    times[k] = after - now
                    now, k = after, k + 1
                cpu_used = time.process_time() - cpu_start
            finally:
                close()
            c.rates.append(k * n / (now - start))
            c.latencies.append(float(np.median(times[:k])))
            cpu[c.name].append(1e6 * cpu_used / (k * n))
    rate = {c.name: float(np.median(c.rates)) for c in cases}
    base = rate[cases[0].name]  # the plain loop, unless --only left it out
    load = os.getloadavg()
    lines = [f"{ENV_ID} x {n}, DQN preprocessing, wall time, {rounds} interleaved rounds of {seconds:g} s, medians "
             f"(load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, {load_at_start:.2f} at the start, "
             f"{os.cpu_count()} cores)"]
    versus = "vs plain" if cases[0].name.startswith("plain") else "vs first"
    lines.append(f"  {'candidate':<36} {'env-steps/s':>12} {versus:>9} {'step latency':>13} {'CPU/env-step':>13}")
    for c in cases:
        lines.append(f"  {c.name:<36} {rate[c.name]:>12,.0f} {rate[c.name] / base:>8.2f}x "
                     f"{1e3 * float(np.median(c.latencies)):>10.3f} ms {float(np.median(cpu[c.name])):>10.0f} us")

    def paired(ours: Timed, ref: Timed) -> str:
        """Medians of the ratio of throughputs and of latencies within each round (the
        load a round saw is shared by both), and of the ratio of CPU per env-step."""
        rates = np.median(np.array(ours.rates) / np.array(ref.rates))
        latency = np.median(np.array(ours.latencies) / np.array(ref.latencies))
        cpu_ratio = np.median(np.array(cpu[ref.name]) / np.array(cpu[ours.name]))
        per_round = np.array(ours.rates) / np.array(ref.rates)
        return (f"  {ours.name} / {ref.name}: throughput {rates:.2f}x, latency {latency:.2f}x, "
                f"env-steps per CPU second {cpu_ratio:.2f}x ({int(np.sum(per_round >= 0.97))} of {len(per_round)} "
                "rounds >= 0.97x; per round: " + ", ".join(f"{x:.2f}" for x in per_round) + ")")

    by_name = {c.name: c for c in cases}
    ours_ale = by_name.get(f"DummyVecEnv, ale_vector {threads}t (auto)")
    envpool_direct = by_name.get(f"EnvPool direct {threads}t")
    pairs = [(ours_ale, by_name.get(f"AtariVectorEnv direct {threads}t")),
             (by_name.get(f"DummyVecEnv, ale_vector {threads}t lean"), by_name.get(f"AtariVectorEnv direct {threads}t")),
             (ours_ale, by_name.get(f"AtariVectorEnv direct {threads}t same-step")),
             (by_name.get(f"AtariVectorEnv direct {threads}t same-step"), by_name.get(f"AtariVectorEnv direct {threads}t")),
             (ours_ale, envpool_direct),
             (by_name.get(f"DummyVecEnv, envpool {threads}t"), envpool_direct),
             (by_name.get(f"DummyVecEnv, envpool {threads}t copy=False"), envpool_direct)]
    for ours, ref in pairs:
        if ours is not None and ref is not None:
            lines.append(paired(ours, ref))
    print("\n".join(lines))
    return lines


def main(argv: list[str] | None = None) -> list[str]:
    from marl_vec.envs.atari import make_atari

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--obs", choices=[*OBS_KINDS, "both"], default="both")
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=3.0, help="CPU seconds per candidate, over 5 rounds")
    parser.add_argument("--engines", action="store_true", help="compare the C++ engines (see the module docstring)")
    parser.add_argument("--rounds", type=int, default=3, help="--engines: interleaved rounds")
    parser.add_argument("--threads", type=int, default=2, help="--engines: threads of each engine")
    parser.add_argument("--same-step", action="store_true",
                        help="--engines: add AtariVectorEnv used directly with our contract's options "
                             "(same-step autoreset, raw rewards): the engine's own cost of them")
    parser.add_argument("--only", help="--engines: candidates whose names contain one of these "
                                       "comma-separated words (e.g. 'ale_vector,AtariVectorEnv')")
    args = parser.parse_args(argv)
    n = args.num_envs
    if args.engines:
        return engines(n, args.seconds, args.rounds, args.threads, args.same_step, args.only)
    actions = np.random.default_rng(0).integers(0, 6, size=(256, n, 1))
    lines: list[str] = []
    for kind in OBS_KINDS if args.obs == "both" else (args.obs,):
        kwargs = OBS_KINDS[kind]
        make_gym = functools.partial(gym_env, kwargs)
        make_ours = functools.partial(make_atari, ENV_ID, engine="python", **kwargs)  # the same chain as the others
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

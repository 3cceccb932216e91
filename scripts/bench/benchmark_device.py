"""marl_vec with torch/JAX results on a device, against the library used directly and against numpy mode.

Issue 39's device check, one prepared script (under 8 minutes on one GPU):

- VMAS balance x4,096 and x32,768; JaxMARL MPE simple_spread x65,536 and SMAX 3m x8,192;
- each as ``ours`` (``DummyVecEnv(array_backend="torch"|"jax", device=..., copy=False)``),
  ``numpy`` (marl_vec's default numpy mode, results on the host) and ``direct`` (VMAS's
  ``make_env(device=...)`` / JaxMARL's jitted, vmapped ``step`` on the device, actions
  made there, nothing read back);
- 3 interleaved rounds of ``--seconds`` each; median env-steps/s and the ratios
  ours/direct (goal >= 0.9) and ours/numpy (goal >= 5) printed, with the device named.

What ``ours`` is: VMAS is built on ``--device`` (its ``device`` option) and its engine
writes the torch results there itself, actions taken there (no host copy per field:
docs/families/vmas.md, "On a GPU"); JaxMARL's blocks run on ``--device`` (its ``device``
option) and make their JAX results there, JAX actions taken there (docs/families/jaxmarl.md,
"On a GPU"). ``numpy`` runs VMAS on the CPU and JaxMARL on JAX's default device, as numpy
mode does by default, results copied to the host. The ratios say how far each is from the goals.

``--small`` runs every case with a few envs on the CPU (a check that the script runs):

    python scripts/bench/benchmark_device.py --small
    python scripts/bench/benchmark_device.py --device cuda:0          # on a GPU machine
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable

import numpy as np

import marl_vec as mv
from marl_vec.envs.registry import make_env_fn

Runner = Callable[[int], None]  # runs n steps

CASES = [  # (family, id, kwargs, envs, envs with --small)
    ("vmas", "balance", {"max_steps": 100, "continuous_actions": False}, 4096, 64),
    ("vmas", "balance", {"max_steps": 100, "continuous_actions": False}, 32768, 128),
    ("jaxmarl", "jax_mpe/simple_spread", {}, 65536, 64),
    ("jaxmarl", "smax/3m", {}, 8192, 32),
]


def ours(family: str, env_id: str, kwargs: dict, n: int, device: str, array_backend: str | None) -> Runner:
    """marl_vec: torch (VMAS) / JAX (JaxMARL) results on ``device``, or numpy mode (None)."""
    backend = array_backend or "numpy"
    extra = {} if array_backend is None else {"device": device, "copy": False}
    if array_backend is not None:  # the engine on the device, results made there (VMAS: torch, JaxMARL: JAX)
        kwargs = {**kwargs, "device": device}
    venv = mv.DummyVecEnv([make_env_fn(family, env_id, kwargs)] * n, env_seed=0, array_backend=backend,
                         validate=False, **extra)  # random actions, unchecked (SMAX has unavailable ones)
    if array_backend is not None:
        assert venv._device_group is not None, "the engine's device path is not in use"
    r = venv.reset()
    spec = venv.spec
    rng = np.random.default_rng(0)
    pool = [rng.integers(0, spec.n_actions, (n, spec.n_agents)).astype(spec.action.dtype) for _ in range(4)]
    if array_backend == "torch":
        import torch

        pool = [torch.from_numpy(a).to(device) for a in pool]
    elif array_backend == "jax":
        import jax

        pool = [jax.device_put(a, _jax_device(device)) for a in pool]

    def run(steps: int) -> None:
        nonlocal r
        for t in range(steps):
            r = venv.step(pool[t % 4])
        _sync(r.obs)
    return run


def direct_vmas(kwargs: dict, n: int, device: str) -> Runner:
    import torch
    import vmas

    env = vmas.make_env("balance", num_envs=n, device=device, seed=0, terminated_truncated=True,
                        continuous_actions=False, max_steps=kwargs["max_steps"])
    env.reset()
    g = torch.Generator(device=device).manual_seed(0)
    sizes = [int(s.n) for s in env.action_space.spaces]
    pool = [[torch.randint(0, s, (n, 1), generator=g, device=device) for s in sizes] for _ in range(4)]

    def run(steps: int) -> None:
        for t in range(steps):
            obs, rew, term, trunc, _ = env.step(pool[t % 4])
            done = (term | trunc).reshape(-1)
            if bool(done.any()):  # TorchRL's idiom: reset the ended envs, read their obs once
                for i in done.nonzero().reshape(-1).tolist():
                    env.reset_at(i, return_observations=False)
                env.get_from_scenario(get_observations=True, get_rewards=False, get_infos=False, get_dones=False)
        _sync(obs[0])
    return run


def direct_jaxmarl(env_id: str, n: int, device: str) -> Runner:
    import jax
    import jax.numpy as jnp

    from marl_vec.envs.jaxmarl.catalog import make_native, resolve

    make_id, implied = resolve(env_id)
    env = make_native(make_id, implied)
    dev = _jax_device(device)
    with jax.default_device(dev):
        keys = jax.random.split(jax.random.PRNGKey(0), n)
        _, state = jax.jit(jax.vmap(env.reset))(keys)
        n_actions = [int(getattr(env.action_space(a), "n", getattr(env.action_space(a), "num_categories", 1)))
                     for a in env.agents]

        @jax.jit
        def step(keys, state, t):
            keys = jax.vmap(lambda k: jax.random.split(k)[0])(keys)
            sub = jax.vmap(lambda k: jax.random.split(k)[1])(keys)
            acts = {a: (jnp.arange(n) + t) % m for a, m in zip(env.agents, n_actions)}
            obs, state, rew, dones, _ = jax.vmap(env.step)(sub, state, acts)
            return keys, state, obs

        box = [keys, state]

        def run(steps: int) -> None:
            obs = None
            for t in range(steps):
                box[0], box[1], obs = step(box[0], box[1], t)
            jax.block_until_ready(obs)
        run(1)
    return run


def _jax_device(device: str):
    import jax

    kind, _, index = device.partition(":")
    return jax.devices({"cuda": "gpu"}.get(kind, kind))[int(index or 0)]


def _sync(array) -> None:
    if hasattr(array, "block_until_ready"):
        array.block_until_ready()
    elif type(array).__module__.startswith("torch") and array.device.type == "cuda":
        import torch

        torch.cuda.synchronize(array.device)


def rate(run: Runner, n: int, seconds: float) -> float:
    run(1)  # warm-up (and compile)
    steps, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        run(4)
        steps += 4
    return steps * n / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--small", action="store_true", help="a few envs each, on the CPU: check that it runs")
    args = parser.parse_args()
    device = "cpu" if args.small else args.device
    seconds = 0.5 if args.small else args.seconds
    print(f"device {device}; {args.rounds} interleaved rounds of {seconds} s")
    for family, env_id, kwargs, big, small in CASES:
        n = small if args.small else big
        array_backend = "torch" if family == "vmas" else "jax"
        makers: dict[str, Callable[[], Runner]] = {
            "ours": lambda: ours(family, env_id, kwargs, n, device, array_backend),
            "numpy": lambda: ours(family, env_id, kwargs, n, device, None),
            "direct": (lambda: direct_vmas(kwargs, n, device)) if family == "vmas"
            else (lambda: direct_jaxmarl(env_id, n, device)),
        }
        runners = {name: make() for name, make in makers.items()}
        rates: dict[str, list[float]] = {name: [] for name in runners}
        for _ in range(args.rounds):
            for name, run in runners.items():
                rates[name].append(rate(run, n, seconds))
        med = {name: statistics.median(v) for name, v in rates.items()}
        print(f"{family}/{env_id} x{n}: " + ", ".join(f"{name} {med[name]:,.0f} env-steps/s" for name in med)
              + f"; ours/direct {med['ours'] / med['direct']:.2f}x (goal >= 0.9), "
              f"ours/numpy {med['ours'] / med['numpy']:.2f}x (goal >= 5)", flush=True)


if __name__ == "__main__":
    main()

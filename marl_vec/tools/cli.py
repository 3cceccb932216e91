"""The ``marl-vec`` command.

    marl-vec run [CONFIG] [-o vec.num_envs=32 ...]   random-policy rollout with a summary
    marl-vec info CONFIG                             spec and env_info
    marl-vec render CONFIG --out run.gif [--steps N] all envs of a rollout, tiled, as a GIF
    marl-vec bench [CONFIG] [--backends dummy,subproc]  env-steps/s of each backend on this config
    marl-vec tune [CONFIG] [--seconds 3] [--write]   the fastest backend (and engine) for CONFIG here
    marl-vec list                                    env families and shipped configs

CONFIG is a YAML path or a shipped config name (``mpe/simple_spread``, the default).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Sequence

# Why here: before anything imports pygame (gymnasium's and gfootball's renderers),
# and inherited by worker processes, so no support banner reaches the output.
os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

import yaml  # noqa: E402

from marl_vec.tools.config import (  # noqa: E402
    DEFAULT_CONFIG, Config, ConfigError, load_config, make_from_config, resolve_auto_backend, resolve_config_path,
    shipped_configs,
)
from marl_vec.envs.registry import FAMILIES  # noqa: E402
from marl_vec.core.errors import SetupError, WorkerError  # noqa: E402
from marl_vec.tools.tuner import usable_cores  # noqa: E402

EXIT_INTERRUPTED = 130  # what shells report for a command ended by SIGINT (128 + 2)


class _Interrupted(Exception):
    """A command was stopped by Ctrl-C; its partial report is already printed."""


def _parse_overrides(items: Sequence[str]) -> dict[str, Any]:
    overrides = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"override {item!r} must look like section.key=value, e.g. vec.num_envs=32")
        overrides[key.strip()] = yaml.safe_load(value)
    return overrides


def _load(args: argparse.Namespace) -> Config:
    cfg = load_config(args.config, _parse_overrides(args.override))
    quiet_libraries(cfg)
    return cfg


def quiet_libraries(cfg: Config) -> None:
    """Silence the banners of the env's libraries in this process (and in forked workers).

    ALE prints "A.L.E: Arcade Learning Environment ..." and "[Powered by Stella]" for
    every emulator it creates unless its logger is told otherwise; the setting is
    process-wide, so workers forked after this inherit it.
    """
    if cfg.env.family == "atari":
        try:
            import ale_py
        except ImportError:
            return  # making the env will say which extra to install
        ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)


def _interrupted(steps: int) -> None:
    print(f"interrupted after {steps} steps", flush=True)


def cmd_run(args: argparse.Namespace) -> int:
    from marl_vec.tools.rollout import Interrupted, rollout

    cfg = _load(args)
    if args.plot:
        cfg = cfg.model_copy(update={"run": cfg.run.model_copy(update={"plot": args.plot})})
    if cfg.run.plot:
        from marl_vec.tools.plots import require_matplotlib

        require_matplotlib()  # before the run, not after it
    cfg = resolve_auto_backend(cfg)  # before the line below, which names the backend
    interrupted = False
    try:
        with make_from_config(cfg) as venv:
            # Once the envs are made: a bad env id or option fails with its one line alone.
            print(f"marl-vec run: {cfg.env.family} {cfg.env.id}, {cfg.vec.num_envs} envs on {cfg.vec.backend}, "
                  f"{cfg.run.steps} steps", flush=True)
            summary = rollout(venv, cfg.run.steps, seed=cfg.run.seed, progress=not args.no_progress)
    except Interrupted as stop:
        _interrupted(stop.steps)
        summary, interrupted = stop.result, True
    for line in summary.lines():
        print(line)
    if cfg.run.plot and summary.returns:
        from marl_vec.tools.plots import plot_returns

        plot_returns(summary.returns, cfg.run.plot, env_name=cfg.env.id, num_envs=cfg.vec.num_envs,
                     title=f"{cfg.env.id}, {cfg.vec.num_envs} envs: random policy")
        print(f"{'plot':<{summary.width}}{cfg.run.plot}")
    elif cfg.run.plot:
        print(f"{'plot':<{summary.width}}not written: no episode finished in {summary.env_steps} env-steps")
    if interrupted:
        raise _Interrupted
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    cfg = _load(args)
    with make_from_config(cfg.model_copy(update={"vec": cfg.vec.model_copy(update={"num_envs": 1, "backend": "dummy",
                                                                                    "num_workers": None, "start_method": None,
                                                                                    "restart_on_error": 0})})) as venv:
        spec = venv.spec
        print(f"{cfg.env.family} {cfg.env.id}")
        print(spec.describe())
        print("env_info       " + json.dumps(venv.env_info()))
    return 0


# Families whose envs take gymnasium's render_mode keyword (the others render their own way).
RENDER_MODE_FAMILIES = ("gym", "atari", "pettingzoo")


def cmd_render(args: argparse.Namespace) -> int:
    from marl_vec.tools.render import record_gif, require_pillow
    from marl_vec.tools.rollout import Interrupted

    if args.steps < 0 or args.size < 1 or args.fps <= 0:
        raise ConfigError(f"--steps must be >= 0, --size >= 1 and --fps > 0; got --steps {args.steps}, "
                          f"--size {args.size}, --fps {args.fps}")
    require_pillow()  # before any env starts
    overrides = _parse_overrides(args.override)
    cfg = load_config(args.config, overrides)
    if cfg.env.family in RENDER_MODE_FAMILIES and "env.kwargs.render_mode" not in overrides:
        cfg = load_config(args.config, {**overrides, "env.kwargs.render_mode": "rgb_array"})
    quiet_libraries(cfg)
    print(f"marl-vec render: {cfg.env.family} {cfg.env.id}, {cfg.vec.num_envs} envs, {args.steps} steps", flush=True)
    try:
        with make_from_config(cfg) as venv:
            try:
                frames = record_gif(venv, args.out, steps=args.steps, fps=args.fps, max_side=args.size,
                                    progress=not args.no_progress)
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
    except Interrupted as stop:
        _interrupted(stop.steps)
        print(f"gif              {args.out}  ({stop.result} frames)")
        raise _Interrupted from None
    print(f"gif              {args.out}  ({frames} frames)")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    """Which backend suits this env here: the same random rollout on each, as ratios."""
    from marl_vec.tools.rollout import Interrupted, rollout

    cfg = _load(args)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    allowed = ("dummy", "subproc", "ray")
    unknown = [b for b in backends if b not in allowed]
    if unknown or not backends:
        raise ConfigError(f"--backends {args.backends!r}: allowed are {', '.join(allowed)}, comma-separated")
    cores, load = usable_cores(), os.getloadavg()
    print(f"marl-vec bench: {cfg.env.family} {cfg.env.id}, {cfg.vec.num_envs} envs, {args.steps} steps per backend")
    print(f"machine          {cores} usable cores (of {os.cpu_count()}), load average {load[0]:.2f} {load[1]:.2f} "
          f"{load[2]:.2f} (1, 5, 15 min) before the runs", flush=True)
    rows: list[tuple[str, float, int | None, str]] = []  # backend, env-steps/s, workers, remark
    interrupted = False
    for backend in backends:
        update: dict[str, Any] = {"backend": backend}
        if backend == "dummy":  # the process options of the config are for the other backends
            update.update(num_workers=None, start_method=None)
        vec = cfg.vec.model_copy(update=update)
        label = f"{backend}, {cfg.vec.num_envs} envs"
        try:
            with make_from_config(cfg.model_copy(update={"vec": vec})) as venv:
                workers = bench_workers(venv)
                try:
                    rollout(venv, min(10, args.steps), seed=cfg.run.seed, progress=False)  # warm-up
                except Interrupted:
                    raise KeyboardInterrupt from None  # nothing measured yet
                summary = rollout(venv, args.steps, seed=cfg.run.seed, progress=not args.no_progress, label=label)
            rows.append((backend, summary.steps_per_second, workers, ""))
        except Interrupted as stop:
            if stop.steps:
                rows.append((backend, stop.result.steps_per_second, workers, f"(interrupted: {stop.steps} steps)"))
            _interrupted(stop.steps)
            interrupted = True
            break
        except KeyboardInterrupt:  # while the backend started or closed
            _interrupted(0)
            interrupted = True
            break
    if rows:
        base_name, base = rows[0][0], rows[0][1]
        for backend, rate, workers, remark in rows:
            who = "this process" if not workers else f"{workers} Ray actors" if backend == "ray" else f"{workers} workers"
            print(f"  {backend:<8} {rate:>12,.0f} env-steps/s   {rate / base:5.2f}x {base_name}   {who} {remark}".rstrip())
        for backend, _, workers, _ in rows:
            for note in bench_notes(backend, workers, cores, load[0]):
                print(f"note: {note}")
    if interrupted:
        raise _Interrupted
    return 0


def bench_workers(venv: Any) -> int | None:
    """How many processes step ``venv``'s envs besides this one: subproc's workers, Ray's actors; None for dummy."""
    if hasattr(venv, "num_workers"):
        return venv.num_workers
    actors = getattr(venv, "actors", None)
    return len(actors) if actors else None


def bench_notes(backend: str, workers: int | None, cores: int, load: float) -> list[str]:
    """Why a process backend cannot beat ``dummy`` on this machine, if it cannot.

    ```pycon
    >>> bench_notes("subproc", 4, 2, 0.1)
    ['subproc: 4 workers on 2 cores take turns, so it cannot beat dummy here; try -o vec.num_workers=2']
    >>> bench_notes("dummy", None, 2, 5.0)
    []
    ```
    """
    if backend == "dummy" or not workers:
        return []
    notes = []
    if cores < 2:
        notes.append(f"{backend}: 1 usable core: worker processes only add messaging, so it cannot beat dummy here")
    elif workers > cores:
        notes.append(f"{backend}: {workers} workers on {cores} cores take turns, so it cannot beat dummy here; "
                     f"try -o vec.num_workers={cores}")
    if load >= cores:
        notes.append(f"{backend}: load average {load:.2f} >= {cores} cores before the runs: other jobs hold the cores "
                     "its workers need, so it may come out slower than dummy; the ratio says little about an idle machine")
    return notes


def cmd_tune(args: argparse.Namespace) -> int:
    """Measure the ways to run a config here; print the table and the fastest vec section (or write it)."""
    from marl_vec.tools.tuner import TuneInterrupted, tune

    cfg = _load(args)  # fails here on a bad config, before anything runs
    try:
        tune(args.config, seconds=args.seconds, overrides=_parse_overrides(args.override), rounds=args.rounds,
             progress=not args.no_progress, force=args.force, write=args.write, ray=args.ray)
    except TuneInterrupted as stop:
        _interrupted(sum(r.env_steps for r in stop.result.rows if r.interrupted) // cfg.vec.num_envs)
        print("nothing cached or written", flush=True)
        raise _Interrupted from None
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from marl_vec.tools.env_extras import NEEDS, needs_for

    def status(needs: Any) -> str:
        if needs is None:
            return ""
        missing = needs.missing()
        return "ready" if not missing else "missing: " + ", ".join(missing)

    configs = []
    for name in shipped_configs():
        try:
            cfg = load_config(resolve_config_path(name))
            needs = needs_for(cfg.env.family, cfg.env.id)
        except ConfigError:
            needs = None
        configs.append((name + ("  (default)" if name == DEFAULT_CONFIG else ""), needs))
    # Each column as wide as its longest entry (a long config name must not push its row's columns).
    ids_width = max(len(n.ids) for n in NEEDS)
    hint_width = max(len(n.install_hint()) for n in NEEDS)
    name_width = max(len(name) for name, _ in configs)
    print("env families (which ids need which extra: pip install 'marl_vec[EXTRA]'; here: ready or what is missing):")
    for fam in FAMILIES.values():
        print(f"  {fam.name:<11} {fam.makes}")
        for needs in (n for n in NEEDS if n.family == fam.name):
            print(f"      {needs.ids:<{ids_width}}  {needs.install_hint():<{hint_width}}  {status(needs)}".rstrip())
            if needs.then:
                print(f"          then: {needs.then}")
    print("shipped configs:")
    for name, needs in configs:
        hint = f"{needs.install_hint():<{hint_width}}  {status(needs)}" if needs else ""
        print(f"  {name:<{name_width}}  {hint}".rstrip())
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="marl-vec", description="Vectorized multi-agent environments.")
    sub = parser.add_subparsers(dest="command", required=True)

    def with_config(p: argparse.ArgumentParser, optional: bool) -> None:
        p.add_argument("config", nargs="?" if optional else None, default=None,
                       help=f"YAML path or shipped config name (default: {DEFAULT_CONFIG})")
        p.add_argument("-o", "--override", action="append", default=[], metavar="KEY=VALUE",
                       help="dotted override, e.g. -o vec.num_envs=32 -o vec.backend=subproc")

    run = sub.add_parser("run", help="random-policy rollout with a progress bar and a summary")
    with_config(run, optional=True)
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    run.add_argument("--plot", default=None, metavar="PNG", help="plot the episode returns here (sets run.plot)")
    run.set_defaults(func=cmd_run)

    info = sub.add_parser("info", help="print the spec and env_info of a config")
    with_config(info, optional=True)
    info.set_defaults(func=cmd_info)

    render = sub.add_parser("render", help="tile the frames of all envs of a random rollout into an animated GIF")
    with_config(render, optional=True)
    render.add_argument("--out", required=True, metavar="GIF", help="where to write the GIF")
    render.add_argument("--steps", type=int, default=50, help="batched steps to record (default 50)")
    render.add_argument("--fps", type=float, default=10.0, help="frames per second (default 10)")
    render.add_argument("--size", type=int, default=240, help="longest side of each env's tile in pixels")
    render.add_argument("--no-progress", action="store_true", help="no progress bar")
    render.set_defaults(func=cmd_render)

    bench = sub.add_parser("bench", help="env-steps/s of each backend on a config, as ratios")
    with_config(bench, optional=True)
    bench.add_argument("--backends", default="dummy,subproc",
                       help="comma-separated: dummy, subproc, ray (default: dummy,subproc)")
    bench.add_argument("--steps", type=int, default=300, help="batched steps per backend (default 300)")
    bench.add_argument("--no-progress", action="store_true", help="no progress bar")
    bench.set_defaults(func=cmd_bench)

    tune = sub.add_parser("tune", help="measure in-process and worker-process choices here, keep the fastest")
    with_config(tune, optional=True)
    tune.add_argument("--seconds", type=float, default=3.0, help="seconds per measurement (default 3)")
    tune.add_argument("--rounds", type=int, default=1,
                      help="measure every choice this many times, in turns, and show the spread (default 1)")
    tune.add_argument("--write", action="store_true", help="write the fastest choice into the config file")
    tune.add_argument("--force", action="store_true", help="measure again even when a cached result exists")
    tune.add_argument("--no-progress", action="store_true", help="no progress bar")
    tune.add_argument("--ray", action="store_true", default=None,
                      help="measure RayVecEnv too (always for a config with backend ray or a vec.ray.address)")
    tune.set_defaults(func=cmd_tune)

    lst = sub.add_parser("list", help="list env families and shipped configs")
    lst.set_defaults(func=cmd_list)
    return parser


def setup_error(exc: BaseException) -> BaseException | None:
    """The error to show as one line, if ``exc`` is one: a config error, or a
    [`SetupError`][marl_vec.core.errors.SetupError] (missing extra, unknown env id or option, game not
    installed) raised here or in a worker process (`WorkerError.cause`)."""
    if isinstance(exc, SetupError):  # ConfigError is one
        return exc
    if isinstance(exc, WorkerError) and exc.cause is not None:
        return exc.cause
    return None


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (SetupError, WorkerError) as exc:
        shown = setup_error(exc)
        if shown is None:  # an env failed in a worker: its traceback is what helps
            raise
        print(f"marl-vec: {shown}", file=sys.stderr)
        return 2
    except _Interrupted:  # the command printed what ran
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:  # before the first step (starting the envs) or while closing them
        _interrupted(0)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())

"""The ``marl-vec`` command.

    marl-vec run [CONFIG] [-o vec.num_envs=32 ...]   random-policy rollout with a summary
    marl-vec info CONFIG                             spec and env_info
    marl-vec render CONFIG --out run.gif [--steps N] all envs of a rollout, tiled, as a GIF
    marl-vec bench [CONFIG] [--backends dummy,subproc]  env-steps/s of each backend on this config
    marl-vec list                                    env families and shipped configs

CONFIG is a YAML path or a shipped config name (``mpe/simple_spread``, the default).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Sequence

import yaml

from marl_vec.config import DEFAULT_CONFIG, ConfigError, load_config, make_from_config, shipped_configs
from marl_vec.envs.registry import FAMILIES, MissingExtraError


def _parse_overrides(items: Sequence[str]) -> dict[str, Any]:
    overrides = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"override {item!r} must look like section.key=value, e.g. vec.num_envs=32")
        overrides[key.strip()] = yaml.safe_load(value)
    return overrides


def _load(args: argparse.Namespace):
    return load_config(args.config, _parse_overrides(args.override))


def cmd_run(args: argparse.Namespace) -> int:
    from marl_vec.rollout import rollout

    cfg = _load(args)
    if args.plot:
        cfg = cfg.model_copy(update={"run": cfg.run.model_copy(update={"plot": args.plot})})
    print(f"marl-vec run: {cfg.env.family} {cfg.env.id}, {cfg.vec.num_envs} envs on {cfg.vec.backend}, "
          f"{cfg.run.steps} steps")
    with make_from_config(cfg) as venv:
        summary = rollout(venv, cfg.run.steps, seed=cfg.run.seed, progress=not args.no_progress)
    for line in summary.lines():
        print(line)
    if cfg.run.plot:
        from marl_vec.plots import plot_returns

        plot_returns(summary.returns, cfg.run.plot, title=f"{cfg.env.id}: random policy")
        print(f"plot             {cfg.run.plot}")
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
    from marl_vec.render import record_gif

    if args.steps < 0 or args.size < 1 or args.fps <= 0:
        raise ConfigError(f"--steps must be >= 0, --size >= 1 and --fps > 0; got --steps {args.steps}, "
                          f"--size {args.size}, --fps {args.fps}")
    overrides = _parse_overrides(args.override)
    cfg = load_config(args.config, overrides)
    if cfg.env.family in RENDER_MODE_FAMILIES and "env.kwargs.render_mode" not in overrides:
        cfg = load_config(args.config, {**overrides, "env.kwargs.render_mode": "rgb_array"})
    print(f"marl-vec render: {cfg.env.family} {cfg.env.id}, {cfg.vec.num_envs} envs, {args.steps} steps")
    with make_from_config(cfg) as venv:
        try:
            frames = record_gif(venv, args.out, steps=args.steps, fps=args.fps, max_side=args.size)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    print(f"gif              {args.out}  ({frames} frames)")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    """Which backend suits this env here: the same random rollout on each, as ratios."""
    from marl_vec.rollout import rollout

    cfg = _load(args)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    allowed = ("dummy", "subproc", "ray")
    unknown = [b for b in backends if b not in allowed]
    if unknown or not backends:
        raise ConfigError(f"--backends {args.backends!r}: allowed are {', '.join(allowed)}, comma-separated")
    print(f"marl-vec bench: {cfg.env.family} {cfg.env.id}, {cfg.vec.num_envs} envs, {args.steps} steps per backend")
    results: list[tuple[str, float]] = []
    for backend in backends:
        vec = cfg.vec.model_copy(update={"backend": backend})
        with make_from_config(cfg.model_copy(update={"vec": vec})) as venv:
            rollout(venv, min(10, args.steps), seed=cfg.run.seed, progress=False)  # warm-up
            summary = rollout(venv, args.steps, seed=cfg.run.seed, progress=not args.no_progress)
        results.append((backend, summary.steps_per_second))
    base = results[0][1]
    for backend, rate in results:
        print(f"  {backend:<8} {rate:>12,.0f} env-steps/s   {rate / base:5.2f}x {results[0][0]}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    print("env families:")
    for fam in FAMILIES.values():
        extra = f"marl_vec[{fam.extra}]" if fam.extra else "core"
        print(f"  {fam.name:<11} {fam.makes}  ({extra})")
    print("shipped configs:")
    for name in shipped_configs():
        default = "  (default)" if name == DEFAULT_CONFIG else ""
        print(f"  {name}{default}")
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
    render.set_defaults(func=cmd_render)

    bench = sub.add_parser("bench", help="env-steps/s of each backend on a config, as ratios")
    with_config(bench, optional=True)
    bench.add_argument("--backends", default="dummy,subproc", help="comma-separated: dummy, subproc, ray")
    bench.add_argument("--steps", type=int, default=300, help="batched steps per backend (default 300)")
    bench.add_argument("--no-progress", action="store_true", help="no progress bar")
    bench.set_defaults(func=cmd_bench)

    lst = sub.add_parser("list", help="list env families and shipped configs")
    lst.set_defaults(func=cmd_list)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ConfigError, MissingExtraError) as exc:
        print(f"marl-vec: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

"""``marl-vec tune`` / ``mv.tune(config)``: which backend steps this config fastest on this machine.

It measures, for the config's ``num_envs``: in-process (``dummy``), and
``subproc`` with 1, 2, 4, ... workers up to the usable cores (the envs split
evenly over them), ``subproc`` with usable cores - 1 workers and a block stepped in
this process, both sides polling `MAIN_SPIN_US` before they sleep
(``step_in_main``, ``spin_us``; on 2 cores or more, for 2 envs or more, without
the async pool), and for a family with engines (Atari) each engine, unless
the config names one; and ``ray`` (RayVecEnv, an actor per usable core) when
asked (``ray=True``, ``--ray``) or when the config is a Ray one (``backend: ray``
or a ``vec.ray.address``), if ray is installed (else that row is skipped with
a note). Each choice runs a random policy for ``seconds`` (after a
short warm-up) with a progress bar. The table gives env-steps/s, CPU time per
env-step and the cores kept busy (this process and its workers), and memory
(PSS of the process tree, `marl_vec.tools.tree_usage`). ``rounds`` measures
every choice that many times, in turns. The fastest choice (a choice with fewer
processes within `MARGIN` of it wins instead) is kept in the cache
(`marl_vec.tools.tune_cache`) for ``backend: auto``, printed as a ``vec:``
section, and with ``write=True`` written into the config file.

Examples:
    >>> import marl_vec as mv
    >>> result = mv.tune("gym/cartpole", seconds=0.2, progress=False, quiet=True)
    >>> result.choice
    {'backend': 'dummy', 'num_workers': None}
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping, Union

from marl_vec.tools import tree_usage, tune_cache
from marl_vec.tools.config import (Config, ConfigError, apply_choice, load_config, make_from_config, resolve_config_path,
                             shipped_configs_dir)
from marl_vec.envs.registry import FAMILIES
from marl_vec.core.errors import SetupError, WorkerError
from marl_vec.tools.progress import Progress
from marl_vec.tools.rollout import RandomPolicy
from marl_vec.tools.yaml_edit import DELETE, YamlEditError, scalar, set_keys

DEFAULT_SECONDS = 3.0
# A choice with fewer processes (dummy: none) within this fraction of the fastest is taken
# instead: the difference is within a measurement's noise, and fewer processes hold less memory.
MARGIN = 0.05
WARMUP_FRACTION = 0.1  # of a measurement's seconds, stepped before the clock starts (first resets, caches)
# spin_us of the "workers + main" candidate: longer than a wake-up on a VM (150-250 us), so
# that a cheap env's answer (CartPole x 64: ~420 us a batch step) is mostly caught awake.
MAIN_SPIN_US = 300


@dataclass(frozen=True)
class Candidate:
    """One way to run the config: a backend, its worker count, and an engine (None: the config's);
    for ``subproc``, whether this process steps a block (``step_in_main``) and ``spin_us``."""

    backend: str
    num_workers: int | None = None
    engine: str | None = None
    step_in_main: bool = False
    spin_us: float = 0.0

    @property
    def choice(self) -> dict[str, Any]:
        """The keys ``backend: auto`` and ``--write`` set (``step_in_main``, ``spin_us`` only when set)."""
        out: dict[str, Any] = {"backend": self.backend, "num_workers": self.num_workers}
        if self.step_in_main:
            out["step_in_main"] = True
        if self.spin_us:
            out["spin_us"] = self.spin_us
        if self.engine is not None:
            out["engine"] = self.engine
        return out

    def label(self) -> str:
        return tune_cache.describe_choice(self.choice)

    def config(self, cfg: Config) -> Config:
        """``cfg`` run this way."""
        return apply_choice(cfg, self.choice)


@dataclass
class Row:
    """What one candidate measured (``skipped``: why it was not)."""

    candidate: Candidate
    env_steps: int = 0
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    memory: int = 0
    memory_kind: str = ""
    skipped: str | None = None
    interrupted: bool = False
    rounds: list[float] = field(default_factory=list)  # env-steps/s of each round

    def add(self, other: "Row") -> None:
        """Count another round's measurement of the same candidate into this row."""
        self.env_steps += other.env_steps
        self.seconds += other.seconds
        self.cpu_seconds += other.cpu_seconds
        self.memory = max(self.memory, other.memory)
        self.memory_kind = other.memory_kind or self.memory_kind
        self.interrupted = self.interrupted or other.interrupted
        if other.env_steps:
            self.rounds.append(other.rate)

    @property
    def rate(self) -> float:
        """env-steps/s."""
        return self.env_steps / self.seconds if self.seconds > 0 else 0.0

    @property
    def cpu_us_per_step(self) -> float:
        return 1e6 * self.cpu_seconds / self.env_steps if self.env_steps else 0.0

    @property
    def cores_busy(self) -> float:
        return self.cpu_seconds / self.seconds if self.seconds > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "candidate": asdict(self.candidate)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Row":
        return cls(**{**data, "candidate": Candidate(**data["candidate"])})


@dataclass
class TuneResult:
    """The table of a tune run (or of the cached one) and its choice."""

    title: str
    num_envs: int
    seconds: float  # per round of a choice
    rows: list[Row]
    when: str
    load: tuple[float, float, float]
    cores: int
    vec: dict[str, Any]  # the keys the config's vec section sets
    rounds: int = 1
    cached: bool = False
    cache_file: str | None = None
    interrupted: bool = False
    written: str | None = None  # what --write changed, where

    @property
    def best(self) -> Row:
        """The fastest row; but a row with fewer processes within `MARGIN` of it wins (see the module)."""
        measured = [r for r in self.rows if not r.skipped and r.env_steps]
        if not measured:
            raise ValueError("no candidate was measured")
        top = max(r.rate for r in measured)
        close = [r for r in measured if r.rate >= (1 - MARGIN) * top]
        # Ray's own processes (GCS, raylet) come on top of its actors: at a tie, subproc wins;
        # and at the same worker count, one that does not spin (it burns no CPU waiting)
        return min(close, key=lambda r: (r.candidate.num_workers or 0, r.candidate.backend == "ray",
                                         r.candidate.spin_us > 0, -r.rate))

    @property
    def choice(self) -> dict[str, Any]:
        """``backend`` and ``num_workers`` of the fastest (and ``engine`` where engines were compared)."""
        return self.best.candidate.choice

    def vec_section(self) -> dict[str, Any]:
        """The config's ``vec`` section with the fastest choice in it."""
        choice = self.choice
        vec = {"num_envs": self.num_envs, **self.vec}
        vec.setdefault("backend", None)  # in the config's order: backend where it was, else last
        out: dict[str, Any] = {}
        for key, value in vec.items():
            if key == "backend":
                out["backend"] = choice["backend"]
                out.update((k, choice[k]) for k in ("num_workers", "step_in_main", "spin_us")
                           if choice.get(k) is not None)
            elif key not in tune_cache.TUNED_VEC_KEYS and not (key == "start_method" and choice["backend"] != "subproc"):
                out[key] = value
        return out

    def lines(self, header: bool = True) -> list[str]:
        """The report: header, table, the fastest, its vec section and how to use it.

        ``header=False`` when ``tune`` printed its own line before measuring (one header per run).
        """
        rounds = f" x {self.rounds} rounds, interleaved" if self.rounds > 1 else ""
        out = [f"marl-vec tune: {self.title}, {self.num_envs} envs, {self.seconds:g} s per choice{rounds}"][:header]
        out += [f"machine          {self.cores} usable cores (of {os.cpu_count()}), load average "
               f"{self.load[0]:.2f} {self.load[1]:.2f} {self.load[2]:.2f} (1, 5, 15 min) before the runs, {self.when}"]
        if self.cached:
            out.append(f"cached result    {self.cache_file} (--force measures again)")
        measured = [r for r in self.rows if not r.skipped and r.env_steps]
        top = max((r.rate for r in measured), default=0.0)
        kind = next((r.memory_kind for r in measured if r.memory_kind), "PSS")
        width = max([len("choice")] + [len(r.candidate.label()) for r in self.rows])
        spread = any(len(r.rounds) > 1 for r in self.rows)
        out.append(f"  {'choice':<{width}} {'workers x envs':>14} {'env-steps/s':>12} {'vs best':>8} "
                   f"{'CPU us/env-step':>16} {'cores busy':>11} {'memory (' + kind + ')':>14}"
                   + ("   rounds: min-max env-steps/s" if spread else ""))
        best = self.best if measured else None
        for row in self.rows:
            mark = "*" if row is best else " "
            layout = _layout(row.candidate, self.num_envs)
            if row.skipped:
                out.append(f"{mark} {row.candidate.label():<{width}} {layout:>14}   skipped: {row.skipped}")
                continue
            remark = f"   {min(row.rounds):,.0f}-{max(row.rounds):,.0f}" if spread and row.rounds else ""
            remark += "  (interrupted)" if row.interrupted else ""
            out.append(f"{mark} {row.candidate.label():<{width}} {layout:>14} {row.rate:>12,.0f} {row.rate / top:>7.2f}x "
                       f"{row.cpu_us_per_step:>16.1f} {row.cores_busy:>11.2f} {row.memory / 2**20:>11.0f} MB{remark}")
        if self.load[0] >= self.cores:
            out.append(f"note: load average {self.load[0]:.2f} >= {self.cores} cores before the runs: other jobs held the "
                       "cores, so the figures say little about an idle machine; tune again when it is quieter (--force)")
        if best is not None and not self.interrupted:
            out.append(f"fastest          {best.candidate.label()}")
            out.append("vec:")
            out += [f"  {k}: {scalar(v)}" for k, v in self.vec_section().items()]
            if "engine" in self.choice:
                out.append(f"env.kwargs.engine: {self.choice['engine']}")
        if self.written:
            out.append(self.written)
        elif best is not None and not self.interrupted:
            out += self._how_to_use()
        return out

    def _how_to_use(self) -> list[str]:
        """What to do with the result: ``backend: auto`` takes it, ``--write`` sets it in a file."""
        named = self.vec.get("backend")
        if named in (None, "auto"):
            auto = "backend: auto (the default) now takes this choice for this config on this machine"
        else:
            auto = f"this config names backend: {named}; set backend: auto to take this choice on this machine"
        return [f"to use it        {auto};",
                "                 or run again with --write to set it in your YAML file, or paste the vec section"]

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def to_json(self) -> dict[str, Any]:
        return {"title": self.title, "num_envs": self.num_envs, "seconds": self.seconds, "rounds": self.rounds,
                "when": self.when,
                "load": list(self.load), "cores": self.cores, "vec": self.vec,
                "rows": [r.to_json() for r in self.rows], "choice": self.choice}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], cache_file: str) -> "TuneResult":
        return cls(title=data["title"], num_envs=data["num_envs"], seconds=data["seconds"], rounds=data["rounds"],
                   when=data["when"],
                   load=tuple(data["load"]), cores=data["cores"], vec=data["vec"],
                   rows=[Row.from_json(r) for r in data["rows"]], cached=True, cache_file=cache_file)


class TuneInterrupted(KeyboardInterrupt):
    """Ctrl-C during ``tune``; ``result`` holds what was measured until then (not cached)."""

    def __init__(self, result: TuneResult):
        super().__init__("tune interrupted")
        self.result = result


def _layout(candidate: Candidate, num_envs: int) -> str:
    """``2 x 4`` (workers x envs per worker), ``2 x 3-4`` when uneven, ``- x 8`` in this process,
    ``1+1 x 4`` for a worker and a block in this process (``step_in_main``)."""
    if candidate.num_workers is None:
        return f"- x {num_envs}"
    blocks = candidate.num_workers + candidate.step_in_main
    low, extra = divmod(num_envs, blocks)
    workers = f"{candidate.num_workers}+1" if candidate.step_in_main else f"{candidate.num_workers}"
    return f"{workers} x {low}" + (f"-{low + 1}" if extra else "")


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity), else all of them."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def worker_counts(num_envs: int, cores: int) -> list[int]:
    """1, 2, 4, ... up to min(num_envs, cores), and that limit itself: more workers than cores only take turns.

    ```pycon
    >>> worker_counts(8, 2), worker_counts(32, 6), worker_counts(1, 64)
    ([1, 2], [1, 2, 4, 6], [1])
    ```
    """
    limit = max(1, min(num_envs, cores))
    counts = [1 << k for k in range(limit.bit_length()) if 1 << k <= limit]
    return counts + ([limit] if counts[-1] != limit else [])


def wants_ray(cfg: Config, ray: bool | None) -> bool:
    """Whether Ray is a candidate: as asked, else for a Ray config (``backend: ray`` or a cluster address).

    On one machine Ray steps over the same shared memory as ``subproc``, plus its own
    processes and a few seconds of start-up per measurement: it is measured where asked.
    """
    return ray if ray is not None else (cfg.vec.backend == "ray" or cfg.vec.ray.address is not None)


def ray_missing() -> str | None:
    """Why Ray cannot be measured here (not installed), or None."""
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        return "ray is not installed (pip install 'marl_vec[ray]')"
    return None


def candidates(cfg: Config, cores: int, ray: bool = False) -> list[Candidate]:
    """What ``tune`` measures for ``cfg`` on ``cores`` cores (see the module's docstring).

    ``ray``: add RayVecEnv with an actor per core (at most one per env).
    """
    engines: list[str | None] = [None]
    if FAMILIES[cfg.env.family].engines and cfg.env.kwargs.get("engine") in (None, "auto"):
        engines = list(FAMILIES[cfg.env.family].engines)
    out = []
    for engine in engines:
        if cfg.vec.batch_size is None:  # an async-pool config wants workers: dummy's pool is synchronous
            out.append(Candidate("dummy", None, engine))
        counts = worker_counts(cfg.vec.num_envs, cores)
        out += [Candidate("subproc", n, engine) for n in counts]
        # Not for an async-pool config: this process would step its block inside send(), and the
        # pool is for a trainer that computes while the workers step, which step() does not measure.
        if cores >= 2 and cfg.vec.num_envs >= 2 and cfg.vec.batch_size is None:
            workers = max(1, min(cores, cfg.vec.num_envs) - 1)
            out.append(Candidate("subproc", workers, engine, step_in_main=True, spin_us=MAIN_SPIN_US))
        if ray:
            out.append(Candidate("ray", counts[-1], engine))
    return out


def measure(cfg: Config, candidate: Candidate, seconds: float, progress: bool = True, label: str | None = None) -> Row:
    """Step ``cfg`` run as ``candidate`` with a random policy for ``seconds`` (after a warm-up).

    ``label`` names the progress bar (default: the candidate's label).
    On Ctrl-C, closes the envs and raises `KeyboardInterrupt` with the partial
    row as its argument.
    """
    row = Row(candidate)
    num_envs = cfg.vec.num_envs
    with make_from_config(candidate.config(cfg)) as venv:
        policy = RandomPolicy(venv.spec, num_envs, cfg.run.seed)
        try:
            result = venv.reset()
            start, warm = time.perf_counter(), 0
            while warm < 2 or time.perf_counter() - start < WARMUP_FRACTION * seconds:
                result = venv.step(policy(result))
                warm += 1
            # The clock ends the run; the bar counts env-steps towards what the rate so far
            # makes in `seconds`, re-estimated as it goes (the warm-up's rate is a first guess).
            total = max(num_envs, int(warm * num_envs * seconds / max(time.perf_counter() - start, 1e-9)))
            pids = tree_usage.tree_pids()
            cpu0, start = tree_usage.cpu_seconds(pids), time.perf_counter()
            shown = 0.0
            with Progress(total, label or candidate.label(), enabled=progress, unit="env-step") as bar:
                while row.seconds < seconds:
                    result = venv.step(policy(result))
                    row.env_steps += num_envs
                    row.seconds = time.perf_counter() - start
                    if row.seconds - shown >= 0.1 or row.env_steps >= bar.total:
                        shown = row.seconds
                        bar.set_total(max(row.env_steps, int(row.env_steps * seconds / row.seconds)))
                    bar.update(num_envs)
                bar.finish()  # the clock ended the run: what it did is the total (100%)
        except KeyboardInterrupt:
            row.interrupted = True
            raise KeyboardInterrupt(row) from None
        finally:
            if row.env_steps:
                pids = tree_usage.tree_pids()  # the workers, alive until the with block ends
                row.cpu_seconds = tree_usage.cpu_seconds(pids) - cpu0
                row.memory, row.memory_kind = tree_usage.memory(pids)
    return row


def _engine_problem(exc: BaseException) -> str:
    """One line for an engine that cannot run this config (a missing extra, options it refuses)."""
    cause = getattr(exc, "cause", None) or exc
    return str(cause).splitlines()[0]


def _check_seconds(seconds: Any, rounds: Any) -> float:
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds) or seconds <= 0:
        raise ConfigError(f"seconds per measurement must be a number > 0 (e.g. {DEFAULT_SECONDS:g}); got {seconds!r}")
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise ConfigError(f"rounds must be an integer >= 1 (each round measures every choice once); got {rounds!r}")
    return float(seconds)


def _write_target(source: Any) -> Path:
    """The config file ``--write`` may change, or the error saying why there is none."""
    if isinstance(source, (Mapping, Config)) or source is None:
        raise ConfigError("--write needs a config file (a YAML path); this config is not one: paste the printed vec section")
    path = resolve_config_path(source)
    if shipped_configs_dir().resolve() in path.resolve().parents:
        raise ConfigError(f"--write would change the shipped config {path}; copy it to a file of yours and tune that")
    return path


def write_back(source: Any, choice: Mapping[str, Any], overrides: Mapping[str, Any] | None = None) -> str:
    """Set the fastest choice in the config file ``source``, keeping the rest of it; returns what it changed where.

    ``overrides`` (dotted keys) the config was measured with are written too, so that
    the file is the config that was measured.
    """
    path = _write_target(source)
    updates: dict[tuple[str, ...], Any] = {tuple(key.split(".")): value for key, value in (overrides or {}).items()}
    updates[("vec", "backend")] = choice["backend"]
    for key in ("num_workers", "step_in_main", "spin_us"):  # what the choice does not set goes
        updates[("vec", key)] = DELETE if choice.get(key) in (None, False, 0) else choice[key]
    if choice["backend"] != "subproc":  # only subproc takes a start method
        updates[("vec", "start_method")] = DELETE
    if choice.get("engine"):
        updates[("env", "kwargs", "engine")] = choice["engine"]
    try:
        path.write_text(set_keys(path.read_text(), updates))
    except YamlEditError as exc:
        raise ConfigError(f"{path}: {exc}; nothing written: paste the vec section printed above") from None
    also = f" (and {', '.join(overrides)})" if overrides else ""
    return f"wrote            {tune_cache.describe_choice(choice)}{also} into {path}"


def tune(
    config: Union[str, os.PathLike, Mapping[str, Any], Config, None] = None,
    seconds: float = DEFAULT_SECONDS,
    overrides: Mapping[str, Any] | None = None,
    rounds: int = 1,
    progress: bool = True,
    force: bool = False,
    write: bool = False,
    quiet: bool = False,
    ray: bool | None = None,
) -> TuneResult:
    """Measure the ways to run ``config`` here, keep and return the fastest (see the module's docstring).

    Args:
        config: a YAML path, a shipped config name, a dict or a `Config` (default ``mpe/simple_spread``).
        seconds: per measurement (> 0).
        overrides: dotted config keys (``{"vec.num_envs": 32}``).
        rounds: measure every choice this many times, in turns (a loaded machine's noise
            spreads over all choices alike); the table adds each row's spread.
        progress: show a progress bar for each measurement.
        force: measure even when a cached result for this config and machine exists.
        write: set the fastest choice in the config file (a YAML path of yours), and ``overrides``.
        quiet: print nothing (the table is ``str(result)``).
        ray: measure RayVecEnv too (a local cluster, or the config's ``vec.ray.address``);
            None: only for a Ray config (see `wants_ray`).

    Raises:
        ConfigError: a bad config, ``seconds``, or a ``write`` that cannot be done.
        TuneInterrupted: Ctrl-C; its ``result`` holds the rows measured (nothing is cached).
    """
    seconds = _check_seconds(seconds, rounds)
    cfg = config if isinstance(config, Config) and not overrides else load_config(
        config.model_dump(by_alias=True) if isinstance(config, Config) else config, overrides)
    if write:
        _write_target(config)  # refuse before measuring, not after
    data = cfg.model_dump(by_alias=True)
    with_ray = wants_ray(cfg, ray)
    result = None if force else _cached(data)
    if result is not None and with_ray and not any(r.candidate.backend == "ray" for r in result.rows):
        result = None  # a cached run without Ray does not answer a question about Ray
    if result is None:
        result = _measure_all(cfg, seconds, rounds, progress, quiet, with_ray)
        tune_cache.save(data, result.to_json())
    if write:
        result.written = write_back(config, result.choice, overrides)
    if not quiet:  # a fresh run printed its header before measuring
        print("\n".join(result.lines(header=result.cached)), flush=True)
    return result


def _cached(data: Mapping[str, Any]) -> TuneResult | None:
    """The cached result for this config here, or None (none, or one this version cannot read)."""
    cached = tune_cache.load(data)
    if cached is None:
        return None
    try:
        return TuneResult.from_json(cached, str(tune_cache.cache_path(data)))
    except (KeyError, TypeError, ValueError):
        return None


def _measure_all(cfg: Config, seconds: float, rounds: int, progress: bool, quiet: bool, ray: bool = False) -> TuneResult:
    cores = usable_cores()
    todo = candidates(cfg, cores, ray)
    result = TuneResult(
        title=f"{cfg.env.family} {cfg.env.id}", num_envs=cfg.vec.num_envs, seconds=seconds,
        rows=[Row(c) for c in todo], when=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), load=os.getloadavg(),
        cores=cores, vec=cfg.vec.model_dump(by_alias=True, exclude_unset=True), rounds=rounds)
    missing = ray_missing() if ray else None
    for row in result.rows:
        if row.candidate.backend == "ray":
            row.skipped = missing
    if not quiet:
        times = f" x {rounds} rounds, interleaved" if rounds > 1 else ""
        print(f"marl-vec tune: measuring {len(todo)} choices for {result.title}, {result.num_envs} envs, "
              f"{seconds:g} s each{times}", flush=True)
    for round_ in range(rounds):
        for row in result.rows:
            if row.skipped:
                continue
            label = f"{row.candidate.label()} (round {round_ + 1}/{rounds})" if rounds > 1 else None
            try:
                row.add(measure(cfg, row.candidate, seconds, progress, label))
            except KeyboardInterrupt as stop:
                partial = stop.args[0] if stop.args and isinstance(stop.args[0], Row) else None
                if partial is not None:
                    row.add(partial)
                result.rows = [r for r in result.rows if r.env_steps or r.skipped]  # what was measured
                result.interrupted = True
                if not quiet:
                    print("\n".join(result.lines(header=False)), flush=True)
                raise TuneInterrupted(result) from None
            except (SetupError, ValueError, WorkerError) as exc:
                # an engine that cannot run here (not installed, refuses the options) is skipped with
                # its other choices; any other error is the config's and stops the run
                if row.candidate.engine is None or isinstance(exc, ConfigError):
                    raise
                for other in result.rows:
                    if other.candidate.engine == row.candidate.engine:
                        other.skipped = _engine_problem(exc)
    if not any(r.env_steps and not r.skipped for r in result.rows):
        reasons = "; ".join(sorted({r.skipped for r in result.rows if r.skipped}))
        raise ConfigError(f"no way to run {result.title} could be measured: {reasons}")
    return result

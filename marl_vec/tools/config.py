"""YAML experiment files -> validated config -> a VecEnv.

A config has three sections, ``env`` (what to run), ``vec`` (how to batch it) and
``run`` (what ``marl-vec run`` does). Every key is checked at load time: an
unknown key or value fails naming it and what is allowed.

Examples:
    >>> cfg = load_config("mpe/simple_spread", {"vec.num_envs": 2})
    >>> cfg.env.id, cfg.vec.num_envs
    ('mpe2.simple_spread_v3', 2)
    >>> venv = make(cfg.model_dump(by_alias=True))
    >>> venv.num_envs
    2
    >>> venv.close()
"""

from __future__ import annotations

import copy
import difflib
import os
import sys
from importlib import resources
from pathlib import Path
from typing import Any, Literal, Mapping, Optional, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from marl_vec.envs.registry import FAMILIES, make_env_fn
from marl_vec.core.errors import SetupError
from marl_vec.tools.tune_cache import resolve_auto
from marl_vec.vec.base import VecEnv
from marl_vec.vec.device_arrays import is_host_device
from marl_vec.vec.factory import make_vec

DEFAULT_CONFIG = "mpe/simple_spread"

Family = Literal["gym", "atari", "pettingzoo", "football", "starcraft2", "lbf", "rware", "jaxmarl", "vmas",
                 "mamujoco", "meltingpot"]
# auto: the fastest of `marl-vec tune` for this config on this machine, else dummy (marl_vec.tools.tune_cache)
Backend = Literal["dummy", "subproc", "ray", "auto"]
Autoreset = Literal["same_step", "next_step", "disabled", "one_episode", "fast"]
State = Literal["auto", "env", "concat", "none"]
assert set(Family.__args__) == set(FAMILIES)  # type: ignore[attr-defined]


class ConfigError(SetupError, ValueError):
    """A config that cannot be loaded; the message names the key and what is allowed."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EnvConfig(_Strict):
    family: Family
    id: str
    kwargs: dict[str, Any] = Field(default_factory=dict)


class RayConfig(_Strict):
    address: Optional[str] = None  # None: start a local cluster; "auto" or "ray://host:port": connect
    num_workers: Optional[int] = Field(default=None, ge=1)
    envs_per_worker: Optional[int] = Field(default=None, ge=1)
    num_cpus_per_worker: float = Field(default=1.0, ge=0)
    resources_per_worker: dict[str, float] = Field(default_factory=dict)
    temp_dir: Optional[str] = None  # a local cluster's files (default: Ray's /tmp/ray)
    timeout: float = Field(default=600.0, gt=0)  # seconds to wait for an actor before reporting it hung
    # auto: actors on this machine step over shared memory, others over Ray calls; ray: all over Ray calls
    transport: Literal["auto", "ray"] = "auto"


class VecConfig(_Strict):
    num_envs: int = Field(default=8, ge=1)
    # auto: a cached `marl-vec tune` result for this config and machine, else dummy
    # (subproc where a process-only option such as num_workers is set); see docs/tuning.md.
    backend: Backend = "auto"
    env_seed: Optional[int] = 0
    autoreset: Autoreset = "same_step"
    state: State = "auto"  # what StepResult.state holds; see marl_vec.core.state
    copy_results: bool = Field(default=True, alias="copy")
    validate_actions: bool = Field(default=True, alias="validate")
    # Process and Ray backends.
    num_workers: Optional[int] = Field(default=None, ge=1)
    start_method: Optional[Literal["fork", "spawn", "forkserver"]] = None
    restart_on_error: int = Field(default=0, ge=0)
    # The reward array's dtype; None: the family's (float64 for gymnasium envs, else float32).
    reward_dtype: Optional[Literal["float32", "float64"]] = None
    # Envs per recv() of the async pool (None: num_envs; dummy's pool is synchronous).
    batch_size: Optional[int] = Field(default=None, ge=1)
    # subproc: this process steps the last block while the workers step theirs (in the pool too).
    step_in_main: bool = False
    # subproc: microseconds a worker polls for the next command before it sleeps (0: off).
    spin_us: float = Field(default=0.0, ge=0, le=1e6)
    # dummy: what results hold (numpy, torch tensors, JAX arrays) and where (docs/backends/device_arrays.md).
    array_backend: Literal["numpy", "torch", "jax"] = "numpy"
    device: Optional[str] = None
    ray: RayConfig = Field(default_factory=RayConfig)

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class RunConfig(_Strict):
    steps: int = Field(default=2000, ge=1)
    seed: int = 0  # seed of the random policy
    plot: Optional[str] = None


class Config(_Strict):
    env: EnvConfig
    vec: VecConfig = Field(default_factory=VecConfig)
    run: RunConfig = Field(default_factory=RunConfig)


def shipped_configs_dir() -> Path:
    """Where the configs shipped with marl_vec are (``configs/`` of the repo)."""
    try:
        path = Path(str(resources.files("marl_vec.configs")))
        if path.is_dir() and any(path.glob("*/*.yaml")):
            return path
    except (ModuleNotFoundError, TypeError):
        pass
    return Path(__file__).resolve().parents[2] / "configs"


def shipped_configs() -> list[str]:
    root = shipped_configs_dir()
    return sorted(str(p.relative_to(root).with_suffix("")) for p in root.glob("*/*.yaml"))


def resolve_config_path(name: str | os.PathLike) -> Path:
    """A file path, or the name of a shipped config (``mpe/simple_spread``).

    ``configs/mpe/simple_spread.yaml``, the shipped file's path in the repo, also
    names it when no such file exists relative to the working directory, so that
    it works from any directory.

    ```pycon
    >>> resolve_config_path("configs/mpe/simple_spread.yaml") == resolve_config_path("mpe/simple_spread")
    True
    ```
    """
    path = Path(name)
    if path.is_file():
        return path
    root = shipped_configs_dir()
    if not path.is_absolute() and path.parts[:1] == ("configs",) and len(path.parts) > 1:
        path = Path(*path.parts[1:])
    for candidate in (root / path, root / path.with_suffix(".yaml")):
        if candidate.is_file():
            return candidate
    raise ConfigError(f"no config file {str(name)!r}; {_config_hint(path)}")


def _config_hint(path: Path) -> str:
    """Close matches of a config name that is not shipped (as the env ids have), or its family's
    configs, or the families: never all the shipped names on one line."""
    names = shipped_configs()
    wanted = str(path.with_suffix("") if path.suffix in (".yaml", ".yml") else path)
    every = f"`marl-vec list` shows all {len(names)}"
    close = difflib.get_close_matches(wanted, names, n=3, cutoff=0.75)
    by_tail = {n.rpartition("/")[2]: n for n in names}
    close += [by_tail[t] for t in difflib.get_close_matches(path.stem, list(by_tail), n=3, cutoff=0.75)
              if by_tail[t] not in close]
    if close:
        return f"close matches: {', '.join(close[:3])}; give a YAML path or a shipped config name ({every})"
    family = path.parts[0] if len(path.parts) > 1 else ""
    in_family = [n for n in names if n.startswith(family + "/")] if family else []
    if in_family:
        return f"give a YAML path or one of the shipped configs of {family}: {', '.join(in_family)}"
    families = sorted({n.partition("/")[0] for n in names})
    return (f"give a YAML path or one of the shipped configs: FAMILY/NAME, FAMILY one of "
            f"{', '.join(families)} ({every})")


def _set_dotted(data: dict[str, Any], key: str, value: Any) -> None:
    parts = key.split(".")
    node = data
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"override {key}: {part} is not a section")
        node = child
    node[parts[-1]] = value


def _format_errors(exc: ValidationError, source: str, set_by: Mapping[str, str] | None = None,
                   base: str = "") -> str:
    """One line per error; ``set_by`` maps each overridden key to what set it (``override
    vec.num_envs=0``, ``make(num_envs=0)``), so that an error in a value the caller gave names
    the caller's words, not the file (often a shipped one) the other keys came from; ``base``
    names that config then (default ``source``)."""
    lines, givers = [], []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        if err["type"] == "extra_forbidden":
            section = _section_model(err["loc"][:-1])
            allowed = ", ".join(_field_names(section)) if section else "?"
            line = f"unknown key {loc!r}; allowed here: {allowed}"
        elif err["type"] == "missing":
            line = f"missing key {loc!r}"
        else:
            line = f"{loc}: {err['input']!r} is not allowed: {err['msg']}"
        giver = next((g for key, g in (set_by or {}).items() if loc == key or loc.startswith(key + ".")), None)
        givers.append(giver)
        lines.append(line if giver is None else f"{line} (set by {giver})")
    if all(givers):
        given = ", ".join(dict.fromkeys(g for g in givers if g))
        lines = [line.rpartition(" (set by ")[0] for line in lines]
        return f"invalid {given} (applied to {base or source}):\n  " + "\n  ".join(lines)
    return f"invalid config {source}:\n  " + "\n  ".join(lines)


def _config_name(where: str) -> str:
    """``the shipped config mpe/simple_spread`` for a shipped file's path, else ``where``."""
    if where == "(dict)":
        return "the config dict"
    try:
        name = Path(where).resolve().relative_to(shipped_configs_dir().resolve()).with_suffix("")
    except (ValueError, OSError):  # not under configs/, or "(dict)"
        return where
    return f"the shipped config {name.as_posix()}"


def _section_model(loc: tuple) -> type[BaseModel] | None:
    model: type[BaseModel] = Config
    for part in loc:
        field = model.model_fields.get(str(part))
        annotation = getattr(field, "annotation", None)
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return None
        model = annotation
    return model


def _field_names(model: type[BaseModel]) -> list[str]:
    return [f.alias or name for name, f in model.model_fields.items()]


def load_config(
    source: Union[str, os.PathLike, Mapping[str, Any], None] = None,
    overrides: Mapping[str, Any] | None = None,
) -> Config:
    """Load and validate a config.

    Args:
        source: a YAML path, a shipped config name, a dict, or None (the default,
            ``mpe/simple_spread``).
        overrides: dotted keys (``{"vec.num_envs": 32}``) applied before validation.
    """
    return _load_config(source, overrides, {key: f"override {key}={value!r}" for key, value in (overrides or {}).items()})


def _load_config(source: Union[str, os.PathLike, Mapping[str, Any], None], overrides: Mapping[str, Any] | None,
                 set_by: Mapping[str, str]) -> Config:
    """``load_config``; ``set_by``: how each override was given, for the errors."""
    if source is None:
        source = DEFAULT_CONFIG
    if isinstance(source, Mapping):
        data, where = copy.deepcopy(dict(source)), "(dict)"
    else:
        path = resolve_config_path(source)
        where = str(path)
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"{where} is not valid YAML: {exc}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{where} must be a mapping with sections env, vec, run")
    for key, value in (overrides or {}).items():
        _set_dotted(data, key, value)
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format_errors(exc, where, set_by, _config_name(where))) from None


def backend_kwargs(vec: VecConfig) -> dict[str, Any]:
    """The options of ``vec`` that its backend takes; options of other backends are an error."""
    # restart_on_error lives in EnvGroup, so every backend takes it.
    kwargs: dict[str, Any] = {"validate": vec.validate_actions, "restart_on_error": vec.restart_on_error}
    if vec.reward_dtype is not None:
        kwargs["reward_dtype"] = vec.reward_dtype
    if vec.backend == "subproc":
        kwargs.update({k: v for k, v in (("num_workers", vec.num_workers), ("start_method", vec.start_method),
                                         ("batch_size", vec.batch_size)) if v is not None})
        if vec.step_in_main:
            kwargs["step_in_main"] = True
        if vec.spin_us:
            kwargs["spin_us"] = vec.spin_us
    elif vec.backend == "ray":
        ray_config = vec.ray.model_dump()
        if vec.batch_size is not None:
            kwargs["batch_size"] = vec.batch_size
        if vec.start_method is not None:
            raise ConfigError("vec.start_method applies to the subproc backend; Ray starts its own workers")
        if vec.num_workers is not None:
            if ray_config["num_workers"] not in (None, vec.num_workers):
                raise ConfigError(
                    f"vec.num_workers={vec.num_workers} and vec.ray.num_workers={ray_config['num_workers']} disagree; give one"
                )
            ray_config["num_workers"] = vec.num_workers
        kwargs["ray_config"] = ray_config
    else:
        for key in ("num_workers", "start_method"):
            if getattr(vec, key) is not None:
                raise ConfigError(f"vec.{key} applies to the subproc and ray backends, not to backend {vec.backend!r}")
        if vec.batch_size is not None:  # DummyVecEnv's pool is synchronous: send() steps its envs at once
            kwargs["batch_size"] = vec.batch_size
        if vec.array_backend != "numpy" or vec.device is not None:
            kwargs.update(array_backend=vec.array_backend, device=vec.device)
    # cpu is the host, where every backend keeps its numpy results: only a device off it is DummyVecEnv's.
    if vec.backend != "dummy" and (vec.array_backend != "numpy" or not is_host_device(vec.device)):
        raise ConfigError(f"vec.array_backend={vec.array_backend!r} / vec.device={vec.device!r} apply to the dummy "
                          f"backend (DummyVecEnv), not to backend {vec.backend!r}, which returns numpy arrays on the host")
    if vec.step_in_main and vec.backend != "subproc":
        raise ConfigError(f"vec.step_in_main applies to the subproc backend, not to backend {vec.backend!r}")
    if vec.spin_us and vec.backend != "subproc":
        raise ConfigError(f"vec.spin_us applies to the subproc backend, not to backend {vec.backend!r}")
    return kwargs


def make(source: Union[str, os.PathLike, Mapping[str, Any], Config, None] = None, **vec_overrides: Any) -> VecEnv:
    """Build the VecEnv a config describes; keyword overrides replace keys of its ``vec`` section.

    ```python
    venv = make("gym/cartpole", num_envs=4, autoreset="next_step")
    ```
    """
    overrides = {f"vec.{k}": v for k, v in vec_overrides.items()}
    set_by = {f"vec.{k}": f"make({k}={v!r})" for k, v in vec_overrides.items()}
    if isinstance(source, Config):
        cfg = source
        if vec_overrides:
            cfg = _load_config(cfg.model_dump(by_alias=True), overrides, set_by)
    else:
        cfg = _load_config(source, overrides, set_by)
    return make_from_config(cfg)


def apply_choice(cfg: Config, choice: Mapping[str, Any]) -> Config:
    """``cfg`` run as ``choice`` (``backend``, ``num_workers``, optional ``step_in_main``,
    ``spin_us`` and ``engine``: a tuner's choice).

    The choice sets every key the tuner chooses: ``step_in_main`` and ``spin_us`` it
    lacks are off. A choice of ``dummy`` or ``ray`` drops ``vec.start_method``, which
    only ``subproc`` takes; a ``ray`` choice's worker count replaces ``vec.ray``'s own.
    """
    update: dict[str, Any] = {"backend": choice["backend"], "num_workers": choice.get("num_workers"),
                              "step_in_main": bool(choice.get("step_in_main", False)),
                              "spin_us": float(choice.get("spin_us") or 0.0)}
    if choice["backend"] != "subproc":
        update["start_method"] = None
    if choice["backend"] == "ray":
        update["ray"] = cfg.vec.ray.model_copy(update={"num_workers": None, "envs_per_worker": None})
    cfg = cfg.model_copy(update={"vec": cfg.vec.model_copy(update=update)})
    if choice.get("engine"):
        kwargs = {**cfg.env.kwargs, "engine": choice["engine"]}
        cfg = cfg.model_copy(update={"env": cfg.env.model_copy(update={"kwargs": kwargs})})
    return cfg


def resolve_auto_backend(cfg: Config) -> Config:
    """``cfg`` with ``backend: auto`` (the default) replaced by its choice; other configs as they are.

    The choice is the cached result of ``marl-vec tune`` for this config on this
    machine (backend, workers and, where the tuner chose one, the engine), else
    ``dummy``, or ``subproc`` where the config sets an option only worker processes
    take (see `marl_vec.tools.tune_cache`). The choice is printed to stderr, except
    where a config that does not name its backend stays on ``dummy``: that is what
    it always did.
    """
    if cfg.vec.backend != "auto":
        return cfg
    if cfg.vec.array_backend != "numpy" or not is_host_device(cfg.vec.device):  # torch/JAX results: DummyVecEnv only
        return cfg.model_copy(update={"vec": cfg.vec.model_copy(update={"backend": "dummy"})})
    choice, message, tuned = resolve_auto(cfg.model_dump(by_alias=True))
    named = "backend" in cfg.vec.model_fields_set
    if named or tuned or choice["backend"] != "dummy":
        print(message, file=sys.stderr, flush=True)
    return apply_choice(cfg, choice)


def env_kwargs(cfg: Config) -> dict[str, Any]:
    """``env.kwargs``, with ``vec.device`` as ``device`` where the family computes on a device
    (`Family.takes_device`: VMAS on torch, JaxMARL on JAX), results are asked in an array backend its
    engine makes there (`Family.device_backends`: torch for VMAS, jax or torch for JaxMARL) and
    the env's kwargs name no device of their own: the envs then step where the results live."""
    kwargs = dict(cfg.env.kwargs)
    vec = cfg.vec
    family = FAMILIES[cfg.env.family]
    if vec.device is not None and "device" not in kwargs and family.takes_device \
            and vec.array_backend in family.device_backends:
        kwargs["device"] = vec.device
    return kwargs


def make_from_config(cfg: Config) -> VecEnv:
    cfg = resolve_auto_backend(cfg)
    env_fn = make_env_fn(cfg.env.family, cfg.env.id, env_kwargs(cfg))
    vec = cfg.vec
    return make_vec(
        [env_fn] * vec.num_envs,
        backend=vec.backend,
        env_seed=vec.env_seed,
        autoreset=vec.autoreset,
        copy=vec.copy_results,
        state=vec.state,
        **backend_kwargs(vec),
    )

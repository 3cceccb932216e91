"""The house's layering: marl_vec's folders are its layers, and imports only look down, without cycles.

Read from the source with ``ast`` (every import, also those inside functions,
which are dependencies all the same), nothing is imported. The layers, from
the bottom (DESIGN.md, "The house"; docs/contributing.md draws the tree):

0. ``core/``: the batch itself, standing on nothing above it. Its data (``spaces``,
   ``obs_types``; ``spec``, ``episode``, ``errors``; ``buffers``, ``group_errors``), then the
   adapter contract (``adapter``: what an adapter writes into, `GroupStepper`), then the loop
   over adapters (``group``, ``state`` and the loops over results on a device);
1. ``envs/``: the adapters (an adapter writes into row views; it knows nothing of
   stepping loops or backends). Inside ``envs/``: ``extras`` at the bottom, the families
   above it, the ``registry`` (which turns raw envs into adapters) above the families;
2. ``jax/``: the functional form of the JAX families (``marl_vec.jax``), beside ``vec/`` and
   below it: ``core/`` and the JaxMARL family's model and kernel, never a backend;
3. ``vec/``: the backends, ``vec/subproc/`` and ``vec/ray/`` among them; they wrap users'
   env_fns into adapter factories (``envs.registry.adapter_fns``) for the core's loop;
4. ``compat/``: the faces; ``tools/rollout``, ``tools/episode_runner`` and ``tools/progress``
   drive a VecEnv the same way;
5. ``tools/``: config, render, plots, the tuner, and the faces built from configs
   (``compat/benchmarl``, ``compat/pymarl/``); then ``tools/cli``;
6. the package itself (``marl_vec/__init__.py``, ``__main__``).

A module may import its own layer or lower ones, with no exceptions in ``core/``. Outside
``envs/`` only its face is used (``marl_vec.envs``, ``envs.registry``, ``envs.extras``):
backends know nothing of env families.
"""

from __future__ import annotations

import ast
import functools
import pathlib

import pytest

PACKAGE_DIR = pathlib.Path(__file__).resolve().parents[2] / "marl_vec"

# A module's layer is that of its longest matching prefix.
LAYERS: tuple[tuple[str, ...], ...] = (
    # core (its package and any new module: the strictest layer) and its helpers on gymnasium spaces and observation types
    ("marl_vec.core", "marl_vec.core.spaces", "marl_vec.core.obs_types"),
    ("marl_vec.core.spec", "marl_vec.core.episode", "marl_vec.core.errors"),
    ("marl_vec.core.buffers", "marl_vec.core.group_errors"),  # group_errors: EnvGroup.step's bookkeeping when an env raises
    ("marl_vec.core.adapter",),  # the adapter contract: MultiAgentEnv, GroupStepper, the same-env check
    ("marl_vec.core.group", "marl_vec.core.state",  # state: the state option on adapter factories
     # the group's loop over results on a device (torch: device_outputs/device_group; JAX: jax_device)
     "marl_vec.core.device_outputs", "marl_vec.core.device_group", "marl_vec.core.jax_device"),
    ("marl_vec.envs",),
    # marl_vec.jax: the functional form of the JAX families (DESIGN.md, turn 5), beside vec/ and
    # listed just below it, so that a backend import from it is a violation. It uses core/ and,
    # alone outside envs/, the JaxMARL family's pure model and kernel (JAX_MAY_IMPORT below).
    ("marl_vec.jax",),
    ("marl_vec.vec",),
    ("marl_vec.compat", "marl_vec.tools.rollout", "marl_vec.tools.episode_runner", "marl_vec.tools.progress"),
    # compat.benchmarl: a BenchMARL task made from a marl_vec config, so beside config;
    # compat.pymarl: the PyMARL faces build their VecEnvs from marl_vec configs (env_args.key).
    # The tuner and its parts are in tools/ too; config reads tune_cache for `backend: auto`.
    ("marl_vec.tools", "marl_vec.compat.benchmarl", "marl_vec.compat.pymarl"),
    ("marl_vec.tools.cli",),
)
# The old import paths removed by the third pass of the house (CHANGELOG.md): each raises
# ModuleNotFoundError now; the names live at their new paths.
REMOVED_PATHS: dict[str, str] = {
    "marl_vec.config": "marl_vec.tools.config",
    "marl_vec.render": "marl_vec.tools.render",
    "marl_vec.plots": "marl_vec.tools.plots",
    "marl_vec.episode_runner": "marl_vec.tools.episode_runner",
    "marl_vec.tuner": "marl_vec.tools.tuner",
    "marl_vec.errors": "marl_vec.core.errors",
    "marl_vec.compat.pymarl_env": "marl_vec.compat.pymarl.env",
    "marl_vec.envs.base": "marl_vec.core.adapter",
}
# The modules of envs/ that marl_vec.jax may import: the JaxMARL family's model (spec, view) and
# its per-env pure functions (the one kernel of both forms), never its engine; and envs.extras,
# the error naming the extra a face needs (Jumanji's).
JAX_MAY_IMPORT = {"marl_vec.envs.jaxmarl.model", "marl_vec.envs.jaxmarl.functions", "marl_vec.envs.jaxmarl.kernels",
                  "marl_vec.envs.jaxmarl.views", "marl_vec.envs.jaxmarl.catalog", "marl_vec.envs.extras"}
TOP_LEVEL = {"marl_vec", "marl_vec.__main__"}
ENVS_FACE = {"marl_vec.envs", "marl_vec.envs.registry", "marl_vec.envs.extras"}
ENVS_BOTTOM = {"marl_vec.envs.extras"}
ENVS_TOP = {"marl_vec.envs", "marl_vec.envs.registry"}

# Imports that break a rule today, each with what should become of it. The test
# fails when one disappears, so that this list only ever shrinks.
KNOWN_VIOLATIONS: dict[tuple[str, str], str] = {
    ("marl_vec.compat.agilerl", "marl_vec.tools.config"): "AgileRLVecEnv.from_config() imports make() lazily; "
    "should become a config-level helper (marl_vec.tools.config.face_from_config) that the faces do not import",
    ("marl_vec.compat.xuance", "marl_vec.tools.config"): "XuanCeVecEnv.from_config(), as AgileRL's",
}


def modules_of(package_dir: pathlib.Path) -> dict[str, pathlib.Path]:
    """Dotted module name -> file, for every .py file under ``package_dir`` (a package's name: its __init__)."""
    root = package_dir.parent
    modules = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def import_graph(package_dir: pathlib.Path) -> dict[str, dict[str, int]]:
    """module -> {imported module of the same package: first line importing it}."""
    modules = modules_of(package_dir)
    top = package_dir.name

    def known(name: str) -> str | None:
        # `from a.b import c` names module a.b.c if it exists, else a name inside a.b.
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, dict[str, int]] = {}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        deps: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = name.split(".") if is_package else name.split(".")[:-1]
                    anchor = anchor[:len(anchor) - (node.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                targets = [f"{base}.{alias.name}" for alias in node.names]
            for target in targets:
                if target.split(".")[0] != top:
                    continue
                dep = known(target)
                if dep is not None and dep != name:
                    deps.setdefault(dep, node.lineno)
        graph[name] = deps
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def layer_of(module: str) -> int:
    """The layer of a marl_vec module (by its longest matching prefix); the package itself is above everything."""
    if module in TOP_LEVEL:
        return len(LAYERS)
    matches = [(len(p), level) for level, prefixes in enumerate(LAYERS) for p in prefixes
               if module == p or module.startswith(p + ".")]
    if matches:
        return max(matches)[1]
    raise AssertionError(f"{module} is in no layer: add it to LAYERS in tests/project/test_layering.py")


def envs_level(module: str) -> int:
    """Inside envs/: 0 extras, 1 the families, 2 the registry and the envs package."""
    if module in ENVS_BOTTOM:
        return 0
    return 2 if module in ENVS_TOP else 1


def violations(graph: dict[str, dict[str, int]]) -> dict[tuple[str, str], str]:
    """(importer, imported) -> the rule it breaks."""
    found = {}
    for src, deps in sorted(graph.items()):
        for dst, line in sorted(deps.items()):
            where = f"{src} line {line} imports {dst}"
            if layer_of(dst) > layer_of(src):
                found[(src, dst)] = f"{where}: layer {layer_of(src)} imports layer {layer_of(dst)}"
            elif (dst.startswith("marl_vec.envs.") and not src.startswith("marl_vec.envs") and dst not in ENVS_FACE
                  and not (src.startswith("marl_vec.jax") and dst in JAX_MAY_IMPORT)):
                found[(src, dst)] = f"{where}: outside envs/ only {sorted(ENVS_FACE)} may be imported"
            elif src.startswith("marl_vec.envs.") and dst.startswith("marl_vec.envs") and envs_level(dst) > envs_level(src):
                found[(src, dst)] = f"{where}: inside envs/ extras < families < registry"
    return found


# -- the checker, on small made-up packages ------------------------------------


def _package(tmp_path: pathlib.Path, files: dict[str, str]) -> pathlib.Path:
    for rel, text in files.items():
        path = tmp_path / "marl_vec" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path / "marl_vec"


def test_the_checker_finds_a_cycle_through_a_lazy_import(tmp_path):
    pkg = _package(tmp_path, {
        "__init__.py": "",
        "envs/__init__.py": "",
        "envs/registry.py": "def f():\n    from marl_vec.envs.pettingzoo import Adapter\n",
        "envs/pettingzoo.py": "from marl_vec.envs import registry\nclass Adapter: ...\n",
        "envs/gym.py": "from .extras import X\n",
        "envs/extras.py": "X = 1\n",
    })
    graph = import_graph(pkg)
    assert graph["marl_vec.envs.registry"] == {"marl_vec.envs.pettingzoo": 2}
    assert graph["marl_vec.envs.pettingzoo"] == {"marl_vec.envs.registry": 1}
    assert graph["marl_vec.envs.gym"] == {"marl_vec.envs.extras": 1}  # a relative import
    assert cycles(graph) == [["marl_vec.envs.pettingzoo", "marl_vec.envs.registry"]]


def test_the_checker_finds_an_upward_import(tmp_path):
    pkg = _package(tmp_path, {
        "__init__.py": "",
        "core/__init__.py": "",
        "core/spec.py": "",
        "envs/__init__.py": "",
        "envs/gym.py": "import marl_vec.core.spec\n\ndef f():\n    import marl_vec.vec.dummy\n",
        "vec/__init__.py": "",
        "vec/dummy.py": "from marl_vec.envs.gym import f\n",
    })
    graph = import_graph(pkg)
    assert cycles(graph) == [["marl_vec.envs.gym", "marl_vec.vec.dummy"]]
    assert violations(graph) == {
        ("marl_vec.envs.gym", "marl_vec.vec.dummy"): "marl_vec.envs.gym line 4 imports marl_vec.vec.dummy: layer 5 imports layer 7",
        ("marl_vec.vec.dummy", "marl_vec.envs.gym"):
            "marl_vec.vec.dummy line 1 imports marl_vec.envs.gym: outside envs/ only "
            "['marl_vec.envs', 'marl_vec.envs.extras', 'marl_vec.envs.registry'] may be imported",
    }


# -- marl_vec itself -----------------------------------------------------------


@functools.lru_cache(maxsize=1)
def marl_vec_graph() -> dict[str, dict[str, int]]:
    return import_graph(PACKAGE_DIR)


def test_marl_vec_has_no_import_cycle():
    assert cycles(marl_vec_graph()) == []


def test_every_marl_vec_module_has_a_layer():
    for module in modules_of(PACKAGE_DIR):
        layer_of(module)


def test_marl_vec_imports_only_look_down():
    found = violations(marl_vec_graph())
    new = {k: v for k, v in found.items() if k not in KNOWN_VIOLATIONS}
    assert not new, "imports against the layering:\n" + "\n".join(new.values())
    gone = sorted(set(KNOWN_VIOLATIONS) - set(found))
    assert not gone, f"no longer violations, remove them from KNOWN_VIOLATIONS: {gone}"


@pytest.mark.parametrize("module", ["marl_vec.envs.pettingzoo.parallel", "marl_vec.envs.football"] + sorted(
    m for m in modules_of(PACKAGE_DIR) if m.startswith("marl_vec.envs.starcraft2")))
def test_env_families_import_require_from_extras_not_the_registry(module):
    assert "marl_vec.envs.registry" not in marl_vec_graph()[module]


# -- the folders are the layers --------------------------------------------------

FOLDERS = ("core", "envs", "jax", "vec", "compat", "tools")


def test_marl_vec_jax_imports_no_backend_and_of_envs_only_the_jaxmarl_model_and_kernel():
    graph = marl_vec_graph()
    jax_modules = [m for m in graph if m == "marl_vec.jax" or m.startswith("marl_vec.jax.")]
    assert len(jax_modules) >= 4
    for module in jax_modules:
        for dep in graph[module]:
            assert dep.startswith(("marl_vec.jax", "marl_vec.core")) or dep in JAX_MAY_IMPORT, f"{module} imports {dep}"
            assert not dep.startswith(("marl_vec.vec", "marl_vec.core.group")), f"{module} imports {dep}"


def test_every_module_lives_in_a_layer_folder():
    """Nothing loose at the top but the package and ``__main__``."""
    loose = sorted(m for m in modules_of(PACKAGE_DIR) if m.split(".")[1:2] and m.split(".")[1] not in FOLDERS
                   and m not in TOP_LEVEL)
    assert loose == [], f"modules outside {FOLDERS}: {loose}"


def test_a_loose_module_is_found(tmp_path):
    pkg = _package(tmp_path, {"__init__.py": "", "__main__.py": "", "config.py": "", "core/__init__.py": ""})
    loose = sorted(m for m in modules_of(pkg) if m.split(".")[1:2] and m.split(".")[1] not in FOLDERS
                   and m not in TOP_LEVEL)
    assert loose == ["marl_vec.config"]


def test_the_core_imports_nothing_above_it():
    """The core stands on nothing: no import of envs/, vec/, compat/ or tools/, lazy ones included."""
    upward = {(src, dst): line for src, deps in marl_vec_graph().items() if src.startswith("marl_vec.core")
              for dst, line in deps.items() if not dst.startswith("marl_vec.core")}
    assert upward == {}
    assert not [key for key in KNOWN_VIOLATIONS if key[0].startswith("marl_vec.core")]


@pytest.mark.parametrize("old", sorted(REMOVED_PATHS))
def test_a_removed_path_is_gone(old):
    import importlib

    assert old not in modules_of(PACKAGE_DIR)
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)
    importlib.import_module(REMOVED_PATHS[old])


def test_the_names_of_removed_paths_import_from_their_homes():
    from marl_vec.compat.pymarl.env import PyMARLEnv
    from marl_vec.core.errors import PoolNotReadyError, WorkerError
    from marl_vec.tools.config import load_config, make, resolve_config_path
    from marl_vec.tools.episode_runner import EpisodeRunner
    from marl_vec.tools.render import record_gif
    from marl_vec.tools.tuner import TuneInterrupted, tune
    from marl_vec.vec.ray import RayVecEnv
    from marl_vec.vec.subproc import SubprocVecEnv

    import marl_vec as mv

    assert mv.SubprocVecEnv is SubprocVecEnv and mv.RayVecEnv is RayVecEnv
    assert mv.make is make and mv.PoolNotReadyError is PoolNotReadyError and mv.EpisodeRunner is EpisodeRunner
    assert mv.tune is tune
    assert all(callable(f) for f in (load_config, resolve_config_path, record_gif, PyMARLEnv, WorkerError,
                                      TuneInterrupted))
    for name in ("config", "render", "plots", "episode_runner", "tuner", "errors"):
        with pytest.raises(AttributeError):
            getattr(mv, name)


@pytest.mark.parametrize("name", ["MultiAgentEnv", "NativeEnvAdapter", "GroupStepper", "one_agent_spec"])
def test_the_adapter_contract_keeps_its_public_path_through_envs(name):
    import marl_vec.core.adapter as adapter
    import marl_vec.envs as envs

    assert getattr(envs, name) is getattr(adapter, name) and name in envs.__all__


def test_python_m_marl_vec_still_runs():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "marl_vec", "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "run" in out.stdout


SCRIPT_FOLDERS = {"install", "bench", "train", "train_with", "ci"}


def test_scripts_are_sorted_by_purpose():
    """scripts/ holds folders only, one per purpose; install scripts in install/, benchmarks in bench/."""
    scripts = PACKAGE_DIR.parent / "scripts"
    assert {p.name for p in scripts.iterdir()} == SCRIPT_FOLDERS
    assert all(p.name.startswith("install_") for p in (scripts / "install").iterdir())
    assert {p.name for p in (scripts / "bench").iterdir() if p.suffix == ".py"} >= {"benchmark.py", "bench_plot.py"}
    assert not [p for p in scripts.rglob("benchmark*.py") if p.parent.name != "bench"]

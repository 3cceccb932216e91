"""Hypothesis profiles: ``short`` (the default: 25 examples per test, for README's test command),
``ci`` (200: ``pytest tests/fuzz --hypothesis-profile=ci`` before a change to a backend, the pool or EnvGroup)
and ``long`` (10,000 examples per test: ``pytest --hypothesis-profile=long tests/fuzz``).

A test that sets its own ``max_examples`` keeps it under either profile.

And the tune cache of the session: what a test (or a doc example it runs) tunes
goes to a temporary folder, never into the user's ``~/.cache/marl_vec/tune``.
"""

import os

import pytest

try:
    from hypothesis import HealthCheck, Phase, settings
except ImportError:
    # The faces' own venvs (.venv-xuance, .venv-agilerl, .venv-tianshou) run a few test files
    # that use no Hypothesis; only the main venv (the test extra) has it.
    settings = None

if settings is not None:
    # No explain phase: on a stateful test it reruns the failing case hundreds of times (minutes).
    PHASES = [Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink]
    SUPPRESSED = [HealthCheck.too_slow, HealthCheck.data_too_large]
    # The short profile: enough for every rule of each machine to run in the default selection
    # (a share of it per backend: a Ray or worker batch costs seconds); the ci profile's 200 in CI.
    SHORT_EXAMPLES = 25
    settings.register_profile(
        "short", max_examples=SHORT_EXAMPLES, deadline=None, phases=PHASES, suppress_health_check=SUPPRESSED
    )
    settings.register_profile(
        "ci", max_examples=200, deadline=None, phases=PHASES, suppress_health_check=SUPPRESSED
    )
    # A long campaign that must fit a time box can ask for fewer: MARL_VEC_FUZZ_LONG_EXAMPLES=2000.
    LONG_EXAMPLES = int(os.environ.get("MARL_VEC_FUZZ_LONG_EXAMPLES", "10000"))
    settings.register_profile(
        "long", max_examples=LONG_EXAMPLES, deadline=None, phases=PHASES, suppress_health_check=SUPPRESSED
    )
    settings.load_profile("short")  # --hypothesis-profile=NAME (the hypothesis plugin) loads another


@pytest.fixture(autouse=True, scope="session")
def _tune_cache_of_the_session(tmp_path_factory):
    old = os.environ.get("MARL_VEC_TUNE_CACHE")
    os.environ["MARL_VEC_TUNE_CACHE"] = str(tmp_path_factory.mktemp("tune-cache"))
    yield
    if old is None:
        os.environ.pop("MARL_VEC_TUNE_CACHE", None)
    else:
        os.environ["MARL_VEC_TUNE_CACHE"] = old


@pytest.fixture
def sigint_raises():
    """Ctrl-C (SIGINT) raises KeyboardInterrupt in pytest's process for the test, also when
    pytest was started with SIGINT ignored (a background job, ``nohup``, some CI runners)."""
    from tests.helpers.sigint import python_sigint

    with python_sigint():
        yield


# The tests this session deselected (by -m, -k, --deselect), counted for
# tests/project/test_doc_counts.py, which checks the test counts the docs state.
DESELECTED: list[str] = []


def pytest_deselected(items):
    DESELECTED.extend(item.nodeid for item in items)


# Ray rows of the cross-backend matrices are in the long tier where another row covers them: a
# Ray row costs 10-40 s on 2 busy cores (actors start), over half of the default selection's
# time before this rule. The backends layer keeps its `ray-auto` rows (the pool, faults and
# interrupts on Ray), tests/backends/test_ray*.py all of theirs, and the fuzzer (tests/fuzz)
# both transports; elsewhere (core, faces, families) the Ray rows, and everywhere the
# `ray-ray` transport's rows, are `matrix`.
def long_tier_backend_row(item: pytest.Item) -> bool:
    """Whether ``item`` is a Ray row of a cross-backend matrix that the long tier runs."""
    callspec = getattr(item, "callspec", None)
    if callspec is None or item.path.name.startswith("test_ray") or "fuzz" in item.path.parts:
        return False
    values = {v for v in callspec.params.values() if isinstance(v, str)}
    return "ray-ray" in values or ("ray-auto" in values and "backends" not in item.path.parts)


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(config, items):
    from tests.helpers.heavy_rows import HEAVY_ROWS_FILE, read_heavy_rows

    heavy = read_heavy_rows()  # rows moved to the long tier by their measured time
    for item in items:
        if long_tier_backend_row(item) or item.nodeid in heavy:
            item.add_marker(pytest.mark.matrix)
    if not config.args or config.args == config.getini("testpaths"):  # the whole suite: no stale row
        # A file skipped here (an extra not installed) collects nothing: only its absence or a
        # row missing from a file that was collected makes a row stale.
        ids, files = {item.nodeid for item in items}, {item.nodeid.split("::")[0] for item in items}
        stale = {row for row in heavy - ids
                 if row.split("::")[0] in files or not (config.rootpath / row.split("::")[0]).exists()}
        if stale and not config.option.keyword:
            raise pytest.UsageError(
                f"{HEAVY_ROWS_FILE.name} lists {len(stale)} row(s) no test has (renamed or removed?), "
                f"e.g. {min(stale)}: rerun scripts/ci/heavy_rows.py or edit the file")
        long_tier = {"slow", "matrix", "exhaustive"}
        kept = {item.nodeid.split("[", 1)[0] for item in items
                if not long_tier & {mark.name for mark in item.iter_markers()}}
        emptied = sorted({row.split("[", 1)[0] for row in heavy & ids} - kept)
        if emptied:
            raise pytest.UsageError(f"{HEAVY_ROWS_FILE.name} lists every row of {emptied[0]}: "
                                    "a row of each test must stay in the default selection")

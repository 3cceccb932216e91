"""The turn-based state machine (tests/fuzz/turn_machine.py) over the scripted AEC game on
DummyVecEnv, SubprocVecEnv (with the async pool, and with ``step_in_main``)."""

import pytest
from hypothesis import settings

from tests.fuzz.turn_machine import TurnCache, turn_test

# Runs at the short Hypothesis profile by default and again at the ci profile in .ci/run's long pass.
pytestmark = pytest.mark.fuzz

CACHES = {name: TurnCache(name) for name in ("dummy", "subproc", "subproc-main")}


@pytest.fixture(scope="module", autouse=True)
def _batches():
    yield
    for cache in CACHES.values():
        cache.close_all()


# The CI profile's whole fuzz run has a budget of minutes: a share of its examples here (long: 1,250 each).
EXAMPLES = max(1, settings.default.max_examples // 8)
TestTurnsDummy = turn_test("dummy", CACHES["dummy"], EXAMPLES)
TestTurnsSubproc = turn_test("subproc", CACHES["subproc"], EXAMPLES)
TestTurnsSubprocMain = turn_test("subproc-main", CACHES["subproc-main"], EXAMPLES)

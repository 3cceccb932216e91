"""``backend: auto`` under the turn-based machine (tests/fuzz/auto_backend.py): for each choice the
tuner can make, a tune cache that holds it, the batch it builds, and every call on it (the async
pool too) against the plain loop."""

import pytest
from hypothesis import settings

from tests.fuzz.auto_backend import CHOICES, AutoCache
from tests.fuzz.turn_machine import turn_test

# Runs at the short Hypothesis profile by default and again at the ci profile in .ci/run's long pass.
pytestmark = pytest.mark.fuzz

CACHES = {name: AutoCache(name) for name in CHOICES}


@pytest.fixture(scope="module", autouse=True)
def _batches():
    yield
    for cache in CACHES.values():
        cache.close_all()


EXAMPLES = max(1, settings.default.max_examples // 16)
TestAutoDummy = turn_test("auto-dummy", CACHES["dummy"], EXAMPLES)
TestAutoSubproc1 = turn_test("auto-subproc-1", CACHES["subproc-1"], EXAMPLES)
TestAutoSubproc2 = turn_test("auto-subproc-2", CACHES["subproc-2"], EXAMPLES)
TestAutoMain = turn_test("auto-main", CACHES["main"], EXAMPLES)

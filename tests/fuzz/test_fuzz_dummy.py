"""The stateful fuzzer (tests/fuzz/machine.py) on DummyVecEnv."""

import pytest

from tests.fuzz.harness import VenvCache, closing
from tests.fuzz.machine import fuzz_test

# Runs at the short Hypothesis profile by default and again at the ci profile in .ci/run's long pass.
pytestmark = pytest.mark.fuzz

CACHE = VenvCache("dummy")
_batches = closing(CACHE)
TestFuzzDummy = fuzz_test("dummy", CACHE)

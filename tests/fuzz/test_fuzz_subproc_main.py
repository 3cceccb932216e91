"""The stateful fuzzer (tests/fuzz/machine.py) on SubprocVecEnv with ``step_in_main``:
one worker and a block stepped in this process, synchronous steps (no async pool there)."""

import pytest

from tests.fuzz.harness import VenvCache, closing
from tests.fuzz.machine import fuzz_test

# Runs at the short Hypothesis profile by default and again at the ci profile in .ci/run's long pass.
pytestmark = pytest.mark.fuzz

CACHE = VenvCache("subproc-main")
_batches = closing(CACHE)
TestFuzzSubprocMain = fuzz_test("subproc-main", CACHE)

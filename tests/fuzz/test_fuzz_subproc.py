"""The stateful fuzzer (tests/fuzz/machine.py) on SubprocVecEnv: two workers, several
envs each, synchronous steps and the async pool."""

import pytest

from tests.fuzz.harness import VenvCache, closing
from tests.fuzz.machine import fuzz_test

# Runs at the short Hypothesis profile by default and again at the ci profile in .ci/run's long pass.
pytestmark = pytest.mark.fuzz

CACHE = VenvCache("subproc")
_batches = closing(CACHE)
TestFuzzSubproc = fuzz_test("subproc", CACHE)

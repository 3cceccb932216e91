"""The stateful fuzzer (tests/fuzz/machine.py) on DummyVecEnv."""

from tests.fuzz.harness import VenvCache, closing
from tests.fuzz.machine import fuzz_test

CACHE = VenvCache("dummy")
_batches = closing(CACHE)
TestFuzzDummy = fuzz_test("dummy", CACHE)

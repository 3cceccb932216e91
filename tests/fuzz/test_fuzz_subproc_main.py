"""The stateful fuzzer (tests/fuzz/machine.py) on SubprocVecEnv with ``step_in_main``:
one worker and a block stepped in this process, synchronous steps (no async pool there)."""

from tests.fuzz.harness import VenvCache, closing
from tests.fuzz.machine import fuzz_test

CACHE = VenvCache("subproc-main")
_batches = closing(CACHE)
TestFuzzSubprocMain = fuzz_test("subproc-main", CACHE)

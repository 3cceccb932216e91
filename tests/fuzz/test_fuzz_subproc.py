"""The stateful fuzzer (tests/fuzz/machine.py) on SubprocVecEnv: two workers, several
envs each, synchronous steps and the async pool."""

from tests.fuzz.harness import VenvCache, closing
from tests.fuzz.machine import fuzz_test

CACHE = VenvCache("subproc")
_batches = closing(CACHE)
TestFuzzSubproc = fuzz_test("subproc", CACHE)

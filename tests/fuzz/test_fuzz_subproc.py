"""The stateful fuzzer (tests/fuzz/machine.py) on SubprocVecEnv: two workers, several
envs each, synchronous steps and the async pool."""

from __future__ import annotations

import pytest
from hypothesis import settings

from tests.fuzz.harness import VenvCache
from tests.fuzz.machine import machine_for

CACHE = VenvCache("subproc")


@pytest.fixture(scope="module", autouse=True)
def _batches():
    yield
    CACHE.close_all()


TestFuzzSubproc = machine_for("subproc", CACHE).TestCase
TestFuzzSubproc.settings = settings(stateful_step_count=30)

"""The stateful fuzzer (tests/fuzz/machine.py) on DummyVecEnv."""

from __future__ import annotations

import pytest
from hypothesis import settings

from tests.fuzz.harness import VenvCache
from tests.fuzz.machine import machine_for

CACHE = VenvCache("dummy")


@pytest.fixture(scope="module", autouse=True)
def _batches():
    yield
    CACHE.close_all()


TestFuzzDummy = machine_for("dummy", CACHE).TestCase
TestFuzzDummy.settings = settings(stateful_step_count=30)

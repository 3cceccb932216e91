"""The device-path pool machine (tests/fuzz/device_pool_machine.py): VMAS on
DummyVecEnv(array_backend="torch"), send/recv against VMAS stepped by hand."""

import pytest
from hypothesis import settings

from tests.fuzz.device_pool_machine import DeviceCache, device_pool_test

CACHE = DeviceCache()


@pytest.fixture(scope="module", autouse=True)
def _batch():
    yield
    CACHE.drop()


TestDevicePool = device_pool_test(CACHE, max(1, settings.default.max_examples // 10))

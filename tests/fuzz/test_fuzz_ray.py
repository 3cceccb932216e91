"""The stateful fuzzer (tests/fuzz/machine.py) on RayVecEnv, both transports: actors
linked to the driver's shared memory ("ray-auto") and actors answering Ray calls
("ray-ray", whose pool steps whole blocks). One local cluster for the module."""

from __future__ import annotations

import pytest
from hypothesis import settings

from tests.backends import start_ray_cluster
from tests.fuzz.harness import VenvCache
from tests.fuzz.machine import machine_for

pytest.importorskip("ray", reason="the ray extra is not installed: pip install 'marl_vec[ray]'")

CACHES = {"ray-auto": VenvCache("ray-auto"), "ray-ray": VenvCache("ray-ray")}


@pytest.fixture(scope="module", autouse=True)
def _cluster(tmp_path_factory):
    cluster = start_ray_cluster(tmp_path_factory)
    next(cluster)
    yield
    try:
        for cache in CACHES.values():
            cache.close_all()
    finally:
        next(cluster, None)


# Each example costs a few Ray round trips per call: half the profile's examples per transport.
TestFuzzRayLinked = machine_for("ray-auto", CACHES["ray-auto"]).TestCase
TestFuzzRayLinked.settings = settings(stateful_step_count=30, max_examples=max(1, settings.default.max_examples // 2))
TestFuzzRayCalls = machine_for("ray-ray", CACHES["ray-ray"]).TestCase
TestFuzzRayCalls.settings = settings(stateful_step_count=30, max_examples=max(1, settings.default.max_examples // 2))

"""The stateful fuzzer (tests/fuzz/machine.py) on RayVecEnv, both transports: actors
linked to the driver's shared memory ("ray-auto") and actors answering Ray calls
("ray-ray", whose pool steps whole blocks), and the turn-based machine on both. One local
cluster for the module."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import settings

import marl_vec as mv

from tests.helpers.backends import start_ray_cluster
from tests.fuzz.envs import AGENTS, box_env
from tests.fuzz.harness import VenvCache, arm
from tests.fuzz.machine import fuzz_test
from tests.fuzz.turn_machine import TurnCache, turn_test

# Runs at the short Hypothesis profile by default and again at the ci profile in .ci/run's long pass.
pytestmark = pytest.mark.fuzz

pytest.importorskip("ray", reason="the ray extra is not installed: pip install 'marl_vec[ray]'")

CACHES = {"ray-auto": VenvCache("ray-auto"), "ray-ray": VenvCache("ray-ray")}


@pytest.fixture(scope="module", autouse=True)
def _cluster(tmp_path_factory):
    cluster = start_ray_cluster(tmp_path_factory)
    next(cluster)
    yield
    try:
        for cache in [*CACHES.values(), *TURN_CACHES.values()]:
            cache.close_all()
    finally:
        next(cluster, None)


# A Ray call costs ~1-2 ms and a new batch seconds: a quarter of the profile's examples per transport.
EXAMPLES = max(1, settings.default.max_examples // 4)
TestFuzzRayLinked = fuzz_test("ray-auto", CACHES["ray-auto"], EXAMPLES)
TestFuzzRayCalls = fuzz_test("ray-ray", CACHES["ray-ray"], EXAMPLES)


def _zeros(n: int) -> np.ndarray:
    return np.zeros((n, len(AGENTS)), np.int64)


def test_ray_whole_block_pool_error_takes_out_only_the_failed_env():
    with mv.RayVecEnv([box_env] * 4, num_workers=2, transport="ray", batch_size=2, env_seed=0, timeout=60,
                      num_cpus_per_worker=0) as venv:
        arm(venv, 1)
        r = venv.recv()  # envs 0 and 1: actor 0's block
        venv.send(_zeros(2), r.env_ids)  # env 0 steps, env 1 raises
        seen: list[int] = []
        with pytest.raises(Exception, match="env 1"):
            for _ in range(8):  # envs 2 and 3 come back until the recv() that meets env 1's error
                r = venv.recv()
                seen += r.env_ids.tolist()
                venv.send(_zeros(2), r.env_ids)
        for _ in range(3):
            r = venv.recv()
            seen += r.env_ids.tolist()
            venv.send(_zeros(2), r.env_ids)
        assert 0 in seen, f"env 0 left the pool with env 1: recv() returned only {seen}"


# The turn-based machine (tests/fuzz/turn_machine.py) on both transports, in this module's cluster.
TURN_CACHES = {"ray-auto": TurnCache("ray-auto"), "ray-ray": TurnCache("ray-ray")}
TURN_EXAMPLES = max(1, settings.default.max_examples // 16)
TestTurnsRayLinked = turn_test("ray-auto", TURN_CACHES["ray-auto"], TURN_EXAMPLES)
TestTurnsRayCalls = turn_test("ray-ray", TURN_CACHES["ray-ray"], TURN_EXAMPLES)

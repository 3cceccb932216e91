"""The opponent-seat machine (tests/fuzz/seat_machine.py): OpponentSeat, SB3VecEnv and
GymVectorEnv over the scripted turn-based game, on DummyVecEnv and SubprocVecEnv."""

import pytest
from hypothesis import settings

pytest.importorskip("stable_baselines3", reason="the sb3 extra is not installed: pip install 'marl_vec[sb3]'")

from tests.fuzz.seat_machine import SeatCache, seat_test

# Runs at the short Hypothesis profile by default and again at the ci profile in .ci/run's long pass.
pytestmark = pytest.mark.fuzz

CACHES = {name: SeatCache(name) for name in ("dummy", "subproc")}


@pytest.fixture(scope="module", autouse=True)
def _faces():
    yield
    for cache in CACHES.values():
        cache.close_all()


EXAMPLES = max(1, settings.default.max_examples // 8)
TestSeatDummy = seat_test("dummy", CACHES["dummy"], EXAMPLES * 2)
TestSeatSubproc = seat_test("subproc", CACHES["subproc"], EXAMPLES)

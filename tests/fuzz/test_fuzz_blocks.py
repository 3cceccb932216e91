"""The block-engine machine (tests/fuzz/block_machine.py): a numpy block env through
marl_vec/envs/block_engine.py on DummyVecEnv and SubprocVecEnv, every autoreset mode."""

import pytest
from hypothesis import settings

from tests.fuzz.block_machine import BlockCache, block_test

# Runs at the short Hypothesis profile by default and again at the ci profile in .ci/run's long pass.
pytestmark = pytest.mark.fuzz

CACHE = BlockCache()


@pytest.fixture(scope="module", autouse=True)
def _batches():
    yield
    CACHE.close_all()


TestBlocks = block_test(CACHE, max(1, settings.default.max_examples // 4))

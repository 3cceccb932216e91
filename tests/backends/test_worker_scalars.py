"""A worker's answers pickle numpy scalars by value (`marl_vec.vec.worker.dumps`): the parent
gets the same types and the same values, bit for bit, as pickle's own form gives."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from marl_vec.vec.worker import decode, dumps, encode_ok

SCALARS = [np.float64(0.1), np.float64(-0.0), np.float64(np.inf), np.float32(1 / 3), np.float16(0.1),
           np.int64(-2**63), np.uint64(2**64 - 1), np.int32(-7), np.int16(3), np.int8(-128),
           np.uint32(2**32 - 1), np.uint16(9), np.uint8(255), np.bool_(True), np.bool_(False)]


@pytest.mark.parametrize("value", SCALARS, ids=[f"{type(v).__name__}({v})" for v in SCALARS])
def test_numpy_scalars_come_back_with_their_type_and_bits(value):
    back = pickle.loads(dumps(value))
    assert type(back) is type(value)
    assert np.asarray(back).tobytes() == np.asarray(value).tobytes()


def test_nan_keeps_its_bits_and_an_info_tree_comes_back_equal():
    nan = np.frombuffer(np.array([0x7FF8000000000123], dtype=np.uint64).tobytes(), dtype=np.float64)[0]
    assert np.asarray(pickle.loads(dumps(nan))).tobytes() == np.asarray(nan).tobytes()
    infos = {3: {"agents": {"agent_0": {"x_position": np.float64(0.47), "reward": np.float32(-1.5),
                                        "arr": np.arange(3), "flag": np.bool_(True), "py": 1.0}}}}
    status, back = decode(encode_ok(infos))
    assert status == "ok"
    leaf = back[3]["agents"]["agent_0"]
    assert {k: type(v) for k, v in leaf.items()} == {k: type(v) for k, v in infos[3]["agents"]["agent_0"].items()}
    np.testing.assert_array_equal(leaf["arr"], np.arange(3))
    assert leaf["x_position"] == infos[3]["agents"]["agent_0"]["x_position"] and leaf["reward"] == np.float32(-1.5)

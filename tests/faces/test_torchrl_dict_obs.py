"""TorchRLEnv over Dict observations: ``(group, "observation")`` is a nested TensorDict.

Proofs: a rollout through the face equals TorchRL's own ``PettingZooWrapper`` over the
same Dict-observation env (same seeds and actions, through episode ends at different
steps, on DummyVecEnv and SubprocVecEnv, with ``copy=False`` too); ``check_env_specs``;
Tuple spaces are refused with a message that says what is taken. Melting Pot (the Dict
family users asked for) is in tests/faces/test_benchmarl_meltingpot.py.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from gymnasium import spaces

torch = pytest.importorskip("torch")
pytest.importorskip("torchrl")
from torchrl.envs import PettingZooWrapper  # noqa: E402
from torchrl.envs.utils import check_env_specs  # noqa: E402

import marl_vec as mv  # noqa: E402
from marl_vec.compat.torchrl import TorchRLEnv  # noqa: E402
from tests.helpers.dict_obs_env import DictObsEnv  # noqa: E402

LEAVES = ("pos", "img", "grid", "ready")
STEP_KEYS = [("a", "reward"), ("a", "done"), ("a", "terminated"), ("a", "truncated"), ("done",)]


@pytest.mark.parametrize("backend,copy", [("dummy", True), ("subproc", True), ("dummy", False)])
def test_rollout_equals_pettingzoo_wrapper(backend, copy):
    """Env i is seeded i (episodes of 3 and 4 steps); every leaf, its dtype and shape included,
    every reward and done equal PettingZooWrapper's, at each step and at each following reset."""
    face = TorchRLEnv(mv.make_vec([DictObsEnv] * 2, backend=backend, env_seed=0, copy=copy), group_map="prefix")
    natives = [PettingZooWrapper(DictObsEnv(), categorical_actions=True, seed=i) for i in range(2)]
    try:
        td, native_tds = face.reset(), [n.reset() for n in natives]
        ends = []
        for t in range(9):
            td["a", "action"] = torch.tensor([[t % 3, (t + 1) % 3], [(t + 2) % 3, t % 3]])
            for i, ntd in enumerate(native_tds):
                ntd["a", "action"] = td["a", "action"][i].clone()
            td, td_next = face.step_and_maybe_reset(td)
            stepped = [n.step_and_maybe_reset(ntd) for n, ntd in zip(natives, native_tds)]
            for i, (native, native_next) in enumerate(stepped):
                for leaf in LEAVES:
                    key = ("a", "observation", leaf)
                    for got, want, when in ((td["next", *key][i], native["next", *key], "step"),
                                            (td_next[key][i], native_next[key], "reset")):
                        assert got.dtype == want.dtype and torch.equal(got, want), (t, i, when, leaf)
                for key in STEP_KEYS:
                    got, want = td["next", *key][i], native["next", *key]
                    assert torch.equal(got.to(want.dtype), want), (t, i, key)
            ends += [(t, i) for i in np.flatnonzero(td["next", "done"].flatten().numpy())]
            native_tds = [n for _, n in stepped]
            td = td_next
        assert ends == [(2, 0), (3, 1), (5, 0), (7, 1), (8, 0)]
    finally:
        face.close()
        for n in natives:
            n.close()


def test_specs_check_and_scalar_leaves():
    face = TorchRLEnv(mv.make_vec([DictObsEnv] * 3, env_seed=5))
    try:
        check_env_specs(face)
        spec = face.observation_spec["agents", "observation"]
        assert {k: (tuple(spec[k].shape), spec[k].dtype) for k in LEAVES} == {
            "pos": ((3, 2, 2), torch.float32), "img": ((3, 2, 3, 3, 1), torch.uint8),
            "grid": ((3, 2, 2, 2), torch.float64), "ready": ((3, 2, 1), torch.float64)}  # a scalar gets a trailing 1
        td = face.rollout(4, break_when_any_done=False)
        assert td["next", "agents", "observation", "ready"].shape == (3, 4, 2, 1)
    finally:
        face.close()


class _TupleObsEnv(DictObsEnv):
    def observation_space(self, agent):
        return spaces.Tuple((spaces.Box(0, 1, (2,), np.float32), spaces.Discrete(3)))

    def _obs(self):
        return {a: (np.zeros(2, np.float32), 1) for a in self.possible_agents}


def test_tuple_observations_are_refused_with_what_is_taken():
    venv = mv.make_vec([functools.partial(_TupleObsEnv)])
    with pytest.raises(TypeError, match=r"TorchRLEnv takes array and Dict observations.*Tuple"):
        TorchRLEnv(venv)
    venv.close()

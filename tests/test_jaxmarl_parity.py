"""The JaxMARL family equals JaxMARL stepped by hand, bit for bit, on DummyVecEnv and SubprocVecEnv.

Every step compares obs, state, avail actions, agent mask, rewards, dones and,
where an episode ended, the true last views (final_*) and SMAX's episode
statistics with :class:`tests.jaxmarl_reference.Reference` (JaxMARL's own
``step`` with the same keys and actions). Several episodes per env id.

Compiles cost 5-20 s per function and shape on an idle machine (more on a busy
one): every test uses blocks of ``K`` envs (Subproc: two workers of ``K``), so
that shapes repeat and JAX's persistent cache (~/.cache/marl_vec/jax) serves
repeated runs. The fast selection is SMAX 3m and MPE simple_spread on
DummyVecEnv; SubprocVecEnv and the other served ids are ``slow``. The comparison runs with XLA's CPU fusion
emitters off (see :mod:`tests.jaxmarl_reference`): with them on, two XLA
programs round about 1 float in 10^5 one ulp apart.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.jaxmarl_reference import Reference  # first: it sets XLA_FLAGS before JAX starts

pytest.importorskip("jaxmarl", reason="the jax extra is not installed: pip install 'marl_vec[jax]'")

import marl_vec as mv  # noqa: E402
from marl_vec.envs.jaxmarl.engine import model_of  # noqa: E402
from marl_vec.envs.registry import make_env_fn  # noqa: E402

K = 4  # envs per block
FAST = [("smax/3m", {}, 60), ("jax_mpe/simple_spread", {}, 60)]
SLOW = [
    ("smax/2s3z", {}, 60),
    ("smax/smacv2_5_units", {}, 60),
    ("smax/8m", {}, 60),
    ("hanabi", {}, 60),
    ("overcooked", {"max_steps": 20}, 50),
    ("coin_game", {"num_inner_steps": 5, "num_outer_steps": 2}, 30),
    ("switch_riddle", {}, 30),
    ("jax_mpe/simple_tag", {}, 60),
    ("jax_mpe/simple_speaker_listener", {}, 60),
]


def _actions(rng: np.random.Generator, avail: np.ndarray) -> np.ndarray:
    """Random available actions (``avail``: the reference's where it has its own, else the spec's)."""
    return (rng.random(avail.shape) * avail).argmax(-1).astype(np.int32)


def _compare(env_id: str, kwargs: dict, steps: int, backend: str, seed: int = 7) -> int:
    """Steps the family and the reference side by side; returns the number of episodes that ended."""
    n_envs = K if backend == "dummy" else 2 * K
    model = model_of(env_id, kwargs)
    fn = make_env_fn("jaxmarl", env_id, kwargs)
    extra = {} if backend == "dummy" else {"num_workers": 2}
    ref = Reference(model, seeds=[seed + i for i in range(n_envs)])
    rng = np.random.default_rng(0)
    ended = 0
    with mv.make_vec([fn] * n_envs, backend=backend, env_seed=seed, **extra) as venv:
        r = venv.reset()
        expected = ref.reset()
        _same(r, expected, env_id, "reset")
        for t in range(steps):
            actions = _actions(rng, expected.get("avail_actions", r.avail_actions))
            r = venv.step(actions)
            after, final = ref.step(actions)
            where = f"{env_id} step {t}"
            np.testing.assert_array_equal(r.done, after["done"], err_msg=where)
            np.testing.assert_array_equal(r.reward, after["reward"], err_msg=where)
            np.testing.assert_array_equal(r.terminated | r.truncated,
                                          after["agent_done"] | after["done"][:, None], err_msg=where)
            _same(r, after, env_id, where)
            for i in np.flatnonzero(r.done):
                ended += 1
                np.testing.assert_array_equal(r.final_obs[i], final["obs"][i], err_msg=where)
                if "state" in final:
                    np.testing.assert_array_equal(r.final_state[i], final["state"][i], err_msg=where)
                if "avail_actions" in final:
                    np.testing.assert_array_equal(r.final_avail_actions[i], final["avail_actions"][i], err_msg=where)
                episode = r.infos[i]["episode"]
                if "dead_allies" in final:
                    assert episode["dead_allies"] == final["dead_allies"][i]
                    assert episode["dead_enemies"] == final["dead_enemies"][i]
                    won = final["dead_enemies"][i] == model.env.num_enemies and final["dead_allies"][i] < model.env.num_allies
                    assert episode["battle_won"] == float(won)
            expected = after
    return ended


def _same(r: mv.StepResult, expected: dict, env_id: str, where: str) -> None:
    np.testing.assert_array_equal(r.obs, expected["obs"], err_msg=f"{where}: obs")
    if "state" in expected:
        np.testing.assert_array_equal(r.state, expected["state"], err_msg=f"{where}: state")
    if "avail_actions" in expected:
        np.testing.assert_array_equal(r.avail_actions, expected["avail_actions"], err_msg=f"{where}: avail")
    if "agent_mask" in expected:
        np.testing.assert_array_equal(r.agent_mask, expected["agent_mask"], err_msg=f"{where}: agent_mask")


@pytest.mark.parametrize("env_id,kwargs,steps", FAST, ids=[c[0] for c in FAST])
def test_dummy_equals_jaxmarl_by_hand(env_id, kwargs, steps):
    assert _compare(env_id, kwargs, steps, "dummy") >= 2 * K


@pytest.mark.slow  # two worker processes import JAX and load their block: 30-120 s here
@pytest.mark.parametrize("env_id,kwargs,steps", FAST[:1], ids=[c[0] for c in FAST[:1]])
def test_subproc_equals_jaxmarl_by_hand(env_id, kwargs, steps):
    assert _compare(env_id, kwargs, steps, "subproc") >= 2 * K


@pytest.mark.slow
@pytest.mark.parametrize("env_id,kwargs,steps", SLOW, ids=[c[0] for c in SLOW])
def test_served_envs_equal_jaxmarl_by_hand(env_id, kwargs, steps):
    assert _compare(env_id, kwargs, steps, "dummy") >= 1


@pytest.mark.slow
@pytest.mark.parametrize("env_id,kwargs,steps", [SLOW[1], SLOW[3]], ids=[SLOW[1][0], SLOW[3][0]])
def test_served_envs_equal_jaxmarl_by_hand_in_workers(env_id, kwargs, steps):
    assert _compare(env_id, kwargs, steps, "subproc") >= 1

"""The JaxMARL family's contract: SMAC's view of SMAX, seeds, autoreset modes, errors.

Bit-exactness against JaxMARL by hand is tests/families/test_jaxmarl_parity.py; this file
covers the rest with SMAX 3m in blocks of 4 (the parity tests' shapes, so JAX's
persistent cache compiles them once).
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers.jaxmarl_reference import Reference  # first: it sets XLA_FLAGS before JAX starts

pytest.importorskip("jaxmarl", reason="the jax extra is not installed: pip install 'marl_vec[jax]'")

import marl_vec as mv  # noqa: E402
from marl_vec.envs.jaxmarl.engine import make_jaxmarl, model_of  # noqa: E402
from marl_vec.envs.registry import make_env_fn  # noqa: E402
from marl_vec.core.group import EnvFinishedError  # noqa: E402

K = 4
STOP = 4  # SMAX's "stop" action: the only one of a dead unit


def _venv(**kwargs):
    return mv.DummyVecEnv([make_env_fn("jaxmarl", "smax/3m")] * K, **kwargs)


def test_smax_env_info_is_smac_like_and_the_spec_says_what_smax_is():
    env = make_jaxmarl("smax/3m")
    spec = env.spec
    assert spec.agents == ("ally_0", "ally_1", "ally_2")
    assert (spec.obs_shape, spec.state_shape, spec.n_actions, spec.episode_limit) == ((75,), (72,), 8, 100)
    assert spec.stats == ("battle_won", "dead_allies", "dead_enemies")
    with _venv(env_seed=0) as venv:
        assert venv.env_info() == {"n_agents": 3, "obs_shape": 75, "state_shape": 72, "n_actions": 8,
                                   "episode_limit": 100}


def test_dead_units_are_masked_with_stop_only_and_episodes_report_smac_stats():
    rng = np.random.default_rng(1)
    dead_seen, episodes = 0, []
    with _venv(env_seed=3) as venv:
        r = venv.reset()
        for _ in range(80):
            dead = ~r.agent_mask
            dead_seen += int(dead.sum())
            stop_only = np.zeros(8, dtype=bool)
            stop_only[STOP] = True
            assert (r.avail_actions[dead] == stop_only).all()
            r = venv.step((rng.random(r.avail_actions.shape) * r.avail_actions).argmax(-1))
            for i in np.flatnonzero(r.done):
                episodes.append(r.infos[i]["episode"])
                # terminated and truncated come apart: a decided battle ends, a time-out is cut
                assert r.terminated[i].any() != r.truncated[i].all()
    assert dead_seen > 0 and len(episodes) >= K
    for ep in episodes:
        assert ep["battle_won"] in (0.0, 1.0) and 0 <= ep["dead_allies"] <= 3 and 0 <= ep["dead_enemies"] <= 3
        assert ep["battle_won"] == float(ep["dead_enemies"] == 3 and ep["dead_allies"] < 3)


def test_reset_with_a_seed_reseeds_single_envs_and_other_rows_stay():
    model = model_of("smax/3m", {})
    with _venv(env_seed=0) as venv:
        first = venv.reset()
        r = venv.step(np.full((K, 3), STOP))
        before = r.obs.copy()
        r = venv.reset(seed=100, env_ids=[1, 3])
        expected = Reference(model, seeds=[101, 103]).reset()
        np.testing.assert_array_equal(r.obs[[1, 3]], expected["obs"])
        np.testing.assert_array_equal(r.state[[1, 3]], expected["state"])
        np.testing.assert_array_equal(r.obs[[0, 2]], before[[0, 2]])
        assert not np.array_equal(r.obs[1], first.obs[1])


def test_the_state_keeps_step_types_so_the_step_compiles_once():
    import jax

    with _venv(env_seed=0) as venv:
        venv.reset()
        block = venv.group.adapters[0].block
        assert not any(leaf.weak_type for leaf in jax.tree.leaves(block.state))
        venv.step(np.full((K, 3), STOP))
        assert not any(leaf.weak_type for leaf in jax.tree.leaves(block.state))


def test_disabled_mode_stops_a_finished_env_until_it_is_reset():
    with _venv(env_seed=0, autoreset="disabled") as venv:
        venv.reset()
        with pytest.raises(EnvFinishedError, match="reset\\(env_ids="):
            for _ in range(101):  # every episode ends within 100 steps
                r = venv.step(np.full((K, 3), STOP))
        finished = [int(i) for i in np.flatnonzero(r.done)]
        r = venv.reset(env_ids=finished)
        assert not r.done.any()
        venv.step(np.full((K, 3), STOP))


@pytest.mark.parametrize("mode,message", [
    ("next_step", "autoreset='next_step' is not supported by the JaxMARL family: it leaves finished envs out"),
    ("one_episode", "autoreset='one_episode' is not supported by the JaxMARL family: it leaves finished envs out"),
    ("fast", "autoreset='fast' needs an adapter that can snapshot"),
])
def test_modes_a_whole_block_cannot_serve_are_refused_with_the_reason(mode, message):
    with pytest.raises(ValueError, match=message):
        _venv(env_seed=0, autoreset=mode)


@pytest.mark.parametrize("env_id,message", [
    ("smax/4m", "unknown SMAX map '4m'"),
    ("storm", "not served: its reset and step return one observation array"),
    ("JaxRobotarium_navigation", "not served: needs the jaxrobotarium package, which is not on PyPI"),
    ("LearnedPolicyEnemySMAX", "not served: it needs a trained enemy policy"),
    ("no_such_env", "unknown JaxMARL env id 'no_such_env'; allowed: MPE_simple_v3"),
])
def test_ids_not_served_fail_naming_why(env_id, message):
    with pytest.raises(ValueError, match=message):
        make_jaxmarl(env_id)


def test_continuous_mpe_scenarios_are_served_with_discrete_actions():
    env = make_jaxmarl("MPE_simple_world_comm_v3", action_type="Discrete")
    assert env.spec.n_agents == 6 and env.spec.obs_padded and env.spec.actions_padded
    boxed = make_jaxmarl("MPE_simple_world_comm_v3")  # its default: Box actions, padded per agent
    assert not boxed.spec.discrete and boxed.spec.n_agents == 6


@pytest.mark.parametrize("backend", ["dummy", pytest.param("subproc", marks=pytest.mark.slow)])
def test_every_state_mode_through_episode_ends(backend):
    """``state="concat"`` failed at the first reset (the block wrote SMAX's own 72-wide state
    into the 225-wide concatenation); each mode holds through autoresets: ``concat`` is the
    observations, ``env`` equals ``auto`` (SMAX's world state), ``none`` is absent."""
    fns = [make_env_fn("jaxmarl", "smax/3m")] * K
    kwargs = {"num_workers": 2} if backend == "subproc" else {}
    states, ends = {}, 0
    for mode in ("auto", "env", "concat", "none"):
        rng = np.random.default_rng(5)
        with mv.make_vec(fns, backend=backend, env_seed=2, state=mode, **kwargs) as venv:
            r = venv.reset()
            assert venv.spec.state_shape == {"auto": (72,), "env": (72,), "concat": (225,), "none": (0,)}[mode]
            seen = [r.state]
            for _ in range(110):  # past SMAX's limit of 100 steps: every env ends at least once
                r = venv.step((rng.random(r.avail_actions.shape) * r.avail_actions).argmax(-1))
                seen.append(r.state)
                ends += int(r.done.sum())
                if mode == "concat":
                    np.testing.assert_array_equal(r.state, r.obs.reshape(K, -1))
                    np.testing.assert_array_equal(r.final_state[r.done], r.final_obs[r.done].reshape(-1, 225))
            states[mode] = seen
    assert all(s is None for s in states["none"])
    for a, b in zip(states["auto"], states["env"]):
        np.testing.assert_array_equal(a, b)
    assert ends >= 4 * K

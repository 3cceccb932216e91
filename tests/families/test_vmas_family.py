"""The VMAS family's contract: spec, configs, refused options and autoreset modes, with their messages.

Bit-exact stepping is tests/families/test_vmas_breadth.py's and tests/families/test_vmas_parity.py's concern.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("vmas", reason="the vmas extra is not installed: pip install 'marl_vec[vmas]'")

import marl_vec as mv  # noqa: E402
from marl_vec.tools.config import load_config  # noqa: E402
from marl_vec.envs.registry import make_env, make_env_fn  # noqa: E402
from marl_vec.envs.vmas.catalog import LEFT_OUT, SERVED, episode_seed  # noqa: E402

CONFIGS = {"vmas/balance": ("balance", 4, 100), "vmas/transport": ("transport", 4, 100),
           "vmas/navigation": ("navigation", 3, 100), "vmas/wheel": ("wheel", 4, 100),
           "vmas/football": ("football", 3, 500)}


def test_served_is_every_scenario_of_vmas():
    import vmas

    assert set(SERVED) == set(vmas.scenarios) | set(vmas.mpe_scenarios) | set(vmas.debug_scenarios)
    assert not LEFT_OUT


def test_unknown_scenario_names_what_is_served():
    with pytest.raises(ValueError, match=r"unknown VMAS scenario 'balanse'; allowed: balance, ball_passage, .*waterfall"):
        make_env("vmas", "balanse")


@pytest.mark.parametrize("key,why", [("num_envs", "the batch sets it"), ("seed", "env_seed"),
                                     ("multidiscrete_actions", "Discrete")])
def test_options_of_the_batch_are_refused_with_the_reason(key, why):
    with pytest.raises(ValueError, match=rf"env.kwargs '{key}' is not an option here: .*{why}.*options: continuous_actions"):
        make_env("vmas", "balance", **{key: 1})


def test_device_is_an_option_read_by_torch():
    # The spec is read on the CPU whatever the device; the batch's VMAS env is made on it
    # (tests/families/test_vmas_device.py).
    assert make_env("vmas", "balance", device="cuda:0").spec.device == "cuda:0"
    assert make_env("vmas", "balance", device="cpu").spec.device is None
    with pytest.raises(ValueError, match=r"VMAS device=1\.5 is not a torch device"):
        make_env("vmas", "balance", device=1.5)


def test_bad_max_steps_is_refused():
    with pytest.raises(ValueError, match="max_steps must be a positive int or None, got 0"):
        make_env("vmas", "balance", max_steps=0)


def test_scenario_keywords_reach_the_scenario():
    assert make_env("vmas", "balance", n_agents=5).spec.n_agents == 5


@pytest.mark.parametrize("mode", ["next_step", "one_episode"])
def test_unserved_autoreset_modes_are_refused_with_the_reason(mode):
    fn = make_env_fn("vmas", "balance", {"max_steps": 10})
    with pytest.raises(ValueError, match=rf"autoreset='{mode}' is not supported by the VMAS family: .*"
                                         r"allowed: same_step, disabled"):
        mv.DummyVecEnv([fn] * 2, autoreset=mode)


def test_fast_mode_is_refused_for_want_of_snapshots():
    fn = make_env_fn("vmas", "balance", {"max_steps": 10})
    with pytest.raises(ValueError, match="autoreset='fast' needs an adapter that can snapshot.*VmasAdapter cannot"):
        mv.DummyVecEnv([fn] * 2, autoreset="fast")


def test_disabled_mode_stops_finished_envs_until_reset():
    fn = make_env_fn("vmas", "wheel", {"max_steps": 2})
    with mv.DummyVecEnv([fn] * 2, env_seed=0, autoreset="disabled") as venv:
        venv.reset()
        actions = np.zeros((2, 4, 2), np.float32)
        venv.step(actions)
        r = venv.step(actions)
        assert r.done.all() and r.truncated.all() and not r.terminated.any()
        with pytest.raises(Exception, match="reset"):
            venv.step(actions)
        assert not venv.reset().done.any()
        assert not venv.step(actions).done.any()


def test_a_group_of_one_scenario_with_two_kwargs_is_refused():
    fns = [make_env_fn("vmas", "balance", {"max_steps": 9}), make_env_fn("vmas", "balance", {"max_steps": 9, "package_mass": 5})]
    with pytest.raises(ValueError, match="the envs of one VMAS group must be the same scenario with the same kwargs"):
        mv.DummyVecEnv(fns)


def test_heterogeneous_agents_are_padded():
    spec = make_env("vmas", "simple_speaker_listener", continuous_actions=False).spec
    assert (spec.obs_shape, spec.n_actions, spec.obs_padded, spec.actions_padded) == ((11,), 27, True, True)
    box = make_env("vmas", "simple_speaker_listener").spec.action
    assert box.shape == (5,) and box.agent_shapes == ((5,), (2,))
    np.testing.assert_array_equal(box.low[1], [-1, -1, -np.inf, -np.inf, -np.inf])


def test_state_is_the_observations_concatenated_and_env_state_is_refused():
    fn = make_env_fn("vmas", "transport", {"max_steps": 10})
    with mv.DummyVecEnv([fn] * 2, env_seed=0) as venv:
        r = venv.reset()
        assert venv.spec.state_is_obs and r.state.shape == (2, 4 * 11)
        np.testing.assert_array_equal(r.state, r.obs.reshape(2, -1))
    with pytest.raises(ValueError, match="state='env'.*no state of its own"):
        mv.make_vec([fn] * 2, state="env")


def test_episode_seeds_are_the_documented_words():
    assert episode_seed(7, 2) == int(np.random.SeedSequence([7, 2]).generate_state(1)[0])
    assert 0 <= episode_seed(2**70, 0) < 2**32


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_shipped_configs(name):
    scenario, n_agents, limit = CONFIGS[name]
    cfg = load_config(name, {"vec.num_envs": 2})
    assert (cfg.env.family, cfg.env.id) == ("vmas", scenario)
    with mv.make(cfg.model_dump(by_alias=True)) as venv:
        info = venv.env_info()
        assert (info["n_agents"], info["episode_limit"]) == (n_agents, limit)
        assert venv.spec.action.shape == (2,) and not venv.spec.discrete


def test_wheel_config_is_cut_at_its_limit():
    """wheel never terminates: each episode is truncated at exactly max_steps, then reset."""
    with mv.make("vmas/wheel", num_envs=2) as venv:
        venv.reset()
        actions = np.zeros((2, 4, 2), np.float32)
        for t in range(1, 101):
            r = venv.step(actions)
            assert r.done.all() == (t == 100)
        assert r.truncated.all() and not r.terminated.any()
        assert [i["episode"]["length"] for i in r.infos] == [100, 100]
        assert not r.final_obs is r.obs and not np.array_equal(r.final_obs, r.obs)

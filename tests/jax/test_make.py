"""``marl_vec.jax.make`` behaves as ``jaxmarl.make``: the same keys and actions give the same numbers.

Both envs, vmapped over ``K`` envs and jitted as JaxMARL's baselines use them, step
side by side with the same per-step keys and random available actions through
several episode ends (JaxMARL's autoreset); obs, rewards, dones, JaxMARL's state
leaves and avail actions are compared bit for bit, and the extras in ``infos``
(terminated and truncated apart, the ended episode's returns and length, the true
last observation) against what JaxMARL's outputs say. SMAX (108 s cold at load 12) is ``matrix``.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers.jaxmarl_reference import K  # first: it sets XLA_FLAGS before JAX starts

pytest.importorskip("jaxmarl", reason="the jax extra is not installed: pip install 'marl_vec[jax]'")

import jax  # noqa: E402

import marl_vec.jax as mvj  # noqa: E402
from marl_vec.envs.jaxmarl.catalog import make_native, resolve  # noqa: E402
from marl_vec.envs.jaxmarl.model import model_of  # noqa: E402


def _run(env_id: str, steps: int) -> int:
    make_id, implied = resolve(env_id)
    native = make_native(make_id, implied)
    mine = mvj.make(env_id, final_obs_in_infos=True)
    assert mine.agents == native.agents and mine.num_agents == native.num_agents
    for agent in native.agents:
        assert mine.observation_space(agent).shape == native.observation_space(agent).shape
        assert getattr(mine.action_space(agent), "n", None) == getattr(native.action_space(agent), "n", None)
    has_avail = model_of(env_id, {}).view.has_avail  # MPE's get_avail_actions raises NotImplementedError
    fns = {}
    for name, env in (("native", native), ("mine", mine)):
        fns[name] = (jax.jit(jax.vmap(env.reset)), jax.jit(jax.vmap(env.step)),
                     jax.jit(jax.vmap(env.get_avail_actions)) if has_avail else None,
                     jax.jit(jax.vmap(native.step_env)))
    keys = jax.random.split(jax.random.PRNGKey(11), K)
    obs_n, st_n = fns["native"][0](keys)
    obs_m, st_m = fns["mine"][0](keys)
    rng = np.random.default_rng(0)
    returns = np.zeros((K, len(native.agents)))
    length = np.zeros(K, dtype=int)
    ends = 0
    for t in range(steps):
        _equal(obs_m, obs_n, f"obs {t}")
        _equal(jax.tree.leaves(st_m.env_state), jax.tree.leaves(st_n), f"state {t}")
        if has_avail:
            avail = fns["native"][2](st_n)
            _equal(fns["mine"][2](st_m), avail, f"avail {t}")
            avail = np.stack([np.asarray(avail[a]) for a in native.agents], axis=1)
        else:
            avail = np.ones((K, len(native.agents), native.action_space(native.agents[0]).n), dtype=bool)
        acts_np = (rng.random(avail.shape) * avail).argmax(-1)
        acts = {a: jax.numpy.asarray(acts_np[:, i]) for i, a in enumerate(native.agents)}
        step_keys = jax.random.split(jax.random.PRNGKey(1000 + t), K)
        last = fns["native"][3](jax.vmap(lambda k: jax.random.split(k)[0])(step_keys), st_n, acts)[0]
        obs_n, st_n, rew_n, done_n, _ = fns["native"][1](step_keys, st_n, acts)
        obs_m, st_m, rew_m, done_m, infos = fns["mine"][1](step_keys, st_m, acts)
        _equal(rew_m, rew_n, f"rewards {t}")
        _equal(done_m, done_n, f"dones {t}")
        done = np.asarray(done_n["__all__"])
        agent_done = np.stack([np.asarray(done_n[a]) for a in native.agents], axis=1)
        returns += np.stack([np.asarray(rew_n[a]) for a in native.agents], axis=1)
        length += 1
        flags = np.asarray(infos["terminated"]) | np.asarray(infos["truncated"])
        np.testing.assert_array_equal(flags, agent_done | done[:, None])
        np.testing.assert_array_equal(np.asarray(infos["episode_valid"]), np.repeat(done[:, None], len(native.agents), 1))
        _equal(infos["final_obs"], last, f"final obs {t}")
        for i in np.flatnonzero(done):
            np.testing.assert_allclose(np.asarray(infos["episode_returns"])[i], returns[i], rtol=1e-5, atol=1e-5)
            assert (np.asarray(infos["episode_lengths"])[i] == length[i]).all()
            ends += 1
        returns[done], length[done] = 0.0, 0
    return ends


def _equal(mine, theirs, where: str) -> None:
    for a, b in zip(jax.tree.leaves(mine), jax.tree.leaves(theirs), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=where)


@pytest.mark.parametrize("env_id,steps", [("MPE_simple_spread_v3", 60),
                                          pytest.param("smax/3m", 120, marks=(pytest.mark.exhaustive,))])
def test_make_equals_jaxmarl_make_on_the_same_keys(env_id, steps):
    assert _run(env_id, steps) >= K


def test_a_time_limit_truncates_and_the_native_attributes_show_through():
    env = mvj.make("jax_mpe/simple_spread", time_limit=3)
    assert env.max_steps == 25 and repr(env) == "marl_vec.jax.make('jax_mpe/simple_spread')"
    _, state = env.reset(jax.random.PRNGKey(0))
    acts = {a: 0 for a in env.agents}
    for t in range(3):
        _, state, _, dones, infos = env.step(jax.random.PRNGKey(t), state, acts)
    assert bool(dones["__all__"]) and np.asarray(infos["truncated"]).all() and not np.asarray(infos["terminated"]).any()
    assert (np.asarray(infos["episode_lengths"]) == 3).all() and int(state.length) == 0
    with pytest.raises(ValueError, match=r"time_limit=0; allowed: a positive int or None"):
        mvj.make("jax_mpe/simple_spread", time_limit=0)

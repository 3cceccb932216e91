"""The JAX block writes JaxMARL's ``MultiAgentEnv.step`` out (one ``step_env``, ``reset``, select:
tests/families/test_jaxmarl_box.py and the parity tests check it bit for bit); an env whose ``step``
is its own is called as it is, so what it adds is kept."""

from __future__ import annotations

import pytest

from tests.helpers.jaxmarl_reference import K  # first: it sets XLA_FLAGS before JAX starts

pytest.importorskip("jaxmarl", reason="the jax extra is not installed: pip install 'marl_vec[jax]'")

import numpy as np

from marl_vec.envs.jaxmarl.engine import model_of
from marl_vec.envs.jaxmarl.kernels import _has_base_step, build_kernels


def test_an_env_with_its_own_step_keeps_what_it_adds():
    import jax

    model = model_of("jax_mpe/simple_spread", {})
    env = model.env
    assert _has_base_step(env)
    base = type(env)

    class BonusStep(base):  # a step of its own: JaxMARL's, with one more reward point
        def step(self, key, state, actions):
            obs, state, rewards, dones, infos = base.step(self, key, state, actions)
            return obs, state, {a: r + 1.0 for a, r in rewards.items()}, dones, infos

    env.__class__ = BonusStep
    try:
        assert not _has_base_step(env)
        kernels = build_kernels(model.view, K, "bonus")
    finally:
        env.__class__ = base
    plain = build_kernels(model.view, K, "plain")
    keys = jax.numpy.asarray(np.stack([[0, s] for s in range(K)]).astype(np.uint32))
    flags = jax.numpy.ones(K, dtype=bool)
    rewards = []
    for k in (kernels, plain):
        key, state, _ = k.reset(keys.copy(), k.state_zeros, keys.copy(), flags, flags)
        actions = jax.numpy.zeros((K, model.spec.n_agents), dtype=jax.numpy.int32)
        _, _, out, _ = k.step(key, state, actions)
        rewards.append(np.asarray(out[4]))
    np.testing.assert_allclose(rewards[0], rewards[1] + 1.0, rtol=1e-6)

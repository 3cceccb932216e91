"""The ``state`` option over every shipped config: ``auto``, ``env``, ``concat`` and ``none``.

Each family implements the option in its own adapter or engine, so a mode can break in one
family alone: JaxMARL's block read its model's spec instead of the slots', and
``state="concat"`` failed at the first reset there. Here every mode runs for 12 random
steps with ``autoreset="same_step"`` on DummyVecEnv, 4 envs (the JaxMARL tests' shapes).
``concat`` must equal the observations reshaped, its final rows included, in the shape
the spec says (one agent: its observation's own shape; Atari's single-player games gave
(4, 84, 84) arrays under a spec of (28224,)); ``none`` has no
state; ``env`` equals ``auto`` where ``auto`` is the env's own state and is refused with a
message where the env has none. The same seeds and actions give every mode the same
observations. One config per family runs by default; the rest are marked ``matrix``.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import marl_vec as mv
from marl_vec.envs.extras import MissingExtraError
from marl_vec.tools.config import shipped_configs
from marl_vec.tools.rollout import RandomPolicy

E = 4
STEPS = 12
# One per family (the cheapest); the other shipped configs run with -m matrix.
FAST = {"atari/pong_2p", "classic/tictactoe", "football/academy_3_vs_1_with_keeper", "gym/cartpole",
        "jax_mpe/simple_spread", "jaxmarl/overcooked", "lbf/8x8-2p-2f-coop", "magent2/battle", "mamujoco/ant_2x4",
        "meltingpot/collaborative_cooking__asymmetric", "mpe/simple_spread", "pettingzoo/pistonball",
        "rware/tiny-2ag", "sisl/multiwalker", "smax/3m", "vmas/balance"}
CONFIGS = [name if name in FAST else pytest.param(name, marks=pytest.mark.exhaustive)
           for name in shipped_configs() if not name.startswith("sc2/")]  # SC2: the game is not installed here


def _leaves(x):
    return x.items() if isinstance(x, dict) else [(None, x)]


def _run(name: str, mode: str):
    try:
        venv = mv.make(name, num_envs=E, backend="dummy", env_seed=3, autoreset="same_step", state=mode)
    except MissingExtraError as exc:
        pytest.skip(str(exc).splitlines()[0])
    policy = RandomPolicy(venv.spec, E, seed=0)
    with venv:
        r = venv.reset()
        results = [r]
        for _ in range(STEPS):
            r = venv.step(policy(r))
            results.append(r)
        return venv.spec, results


def _assert_concat(spec, results):
    assert spec.state_is_obs and spec.has_state
    for r in results:
        if not isinstance(r.state, dict):  # the spec says the state's shape (Atari's one agent: its frames)
            assert r.state.shape == (E, *spec.state_shape) == r.final_state.shape
        for key, state in _leaves(r.state):
            obs = r.obs if key is None else r.obs[key]
            np.testing.assert_array_equal(state.reshape(E, -1), obs.reshape(E, -1))
            if r.final_state is not None and r.done.any():
                final = r.final_state if key is None else r.final_state[key]
                final_obs = r.final_obs if key is None else r.final_obs[key]
                np.testing.assert_array_equal(final[r.done], final_obs[r.done].reshape(int(r.done.sum()), -1))


@pytest.mark.parametrize("name", CONFIGS)
def test_every_state_mode(name):
    spec, auto = _run(name, "auto")
    concat_spec, concat = _run(name, "concat")
    _assert_concat(concat_spec, concat)
    none_spec, none = _run(name, "none")
    assert not none_spec.has_state and all(r.state is None and r.final_state is None for r in none)
    if spec.state_is_obs:  # auto is the observations: env is refused, or is a state the family offers beside
        try:
            env_spec, env = _run(name, "env")
        except ValueError as exc:
            assert re.search(r"state='env': .* of its own.*allowed here: auto", str(exc)), exc
        else:
            if env_spec.state_is_obs:  # the env's state() is its observations (mpe2): served from them
                for a, b in zip(auto, env):
                    np.testing.assert_array_equal(a.state, b.state)
            else:  # a state the family offers beside (Melting Pot's WORLD.RGB)
                assert env_spec.has_state and all(r.state is not None for r in env)
    else:
        _, env = _run(name, "env")
        for a, b in zip(auto, env):
            for (_, x), (_, y) in zip(_leaves(a.state), _leaves(b.state)):
                np.testing.assert_array_equal(x, y)
    if name.startswith("meltingpot/"):
        return  # dmlab2d builds different worlds from one build to the next at one seed (docs/families/meltingpot.md)
    for a, b, c in zip(auto, concat, none):  # the mode changes the state only
        for (_, x), (_, y), (_, z) in zip(_leaves(a.obs), _leaves(b.obs), _leaves(c.obs)):
            np.testing.assert_array_equal(x, y)
            np.testing.assert_array_equal(x, z)
        np.testing.assert_array_equal(a.reward, b.reward)
        np.testing.assert_array_equal(a.done, c.done)

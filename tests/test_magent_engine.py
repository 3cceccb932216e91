"""MAgent2 envs step through their engine (marl_vec/envs/magent_engine.py).

Which envs take that path, and that it writes exactly what the generic PettingZoo
adapter writes, in every state mode and reward dtype (the breadth matrix,
tests/test_breadth_pettingzoo.py, compares both with a plain loop).
"""

from __future__ import annotations

import functools
import importlib

import numpy as np
import pytest

import marl_vec as mv
from marl_vec.envs import magent_engine
from marl_vec.envs.magent_engine import MAgentAdapter
from marl_vec.envs.pettingzoo import PettingZooAdapter, pettingzoo_adapter

pytest.importorskip("magent2")
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning", "ignore::DeprecationWarning")

MAGENT_ENVS = ["battle_v4", "battlefield_v5", "gather_v5", "tiger_deer_v4", "combined_arms_v6",
               "adversarial_pursuit_v4"]


def _module(name):
    return importlib.import_module(f"magent2.environments.{name}")


@pytest.mark.parametrize("name", MAGENT_ENVS)
def test_every_shipped_magent2_env_takes_the_engine_path(name):
    adapter = pettingzoo_adapter(_module(name).parallel_env(max_cycles=5))
    assert type(adapter) is MAgentAdapter
    adapter.close()


def test_an_env_that_overrides_step_takes_the_generic_path():
    env = _module("battle_v4").parallel_env(map_size=15)

    class Logged(type(env)):
        def step(self, actions):
            return super().step(actions)

    env.__class__ = Logged
    adapter = pettingzoo_adapter(env)
    assert type(adapter) is PettingZooAdapter
    adapter.close()


def _play(engine: bool, env_fn, steps: int, **venv_kwargs) -> list[dict]:
    """Every result of a run with attack-biased actions (13 and up attack),
    as copies (copy=False results are views the next step overwrites)."""
    def snapshot(result):
        return {k: (np.array(v) if isinstance(v, np.ndarray) else v) for k, v in vars(result).items()}

    with pytest.MonkeyPatch.context() as m:
        if not engine:
            m.setattr(magent_engine, "engine_path_applies", lambda env: False)
        with mv.DummyVecEnv([env_fn] * 2, env_seed=5, **venv_kwargs) as venv:
            assert type(venv.group.adapters[0]) is (MAgentAdapter if engine else PettingZooAdapter)
            rng = np.random.default_rng(1)
            first = venv.reset()
            out = [snapshot(first)]
            n, A = first.avail_actions.shape[-1], venv.spec.n_agents
            actions = np.where(rng.random((steps, 2, A)) < 0.8, rng.integers(13, n, (steps, 2, A)),
                               rng.integers(0, n, (steps, 2, A)))
            for a in actions:
                out.append(snapshot(venv.step(a)))
    return out


@pytest.mark.parametrize("venv_kwargs", [{}, {"state": "none"}, {"state": "concat"}, {"reward_dtype": "float64"},
                                         {"copy": False, "validate": False}])
def test_engine_path_writes_what_the_generic_adapter_writes(venv_kwargs):
    # gather: agents die within a few steps; episodes of 15 steps end.
    env_fn = functools.partial(_module("gather_v5").parallel_env, max_cycles=15)
    engine = _play(True, env_fn, 35, **venv_kwargs)
    generic = _play(False, env_fn, 35, **venv_kwargs)
    assert any(r["done"].any() for r in engine), "an episode ended"
    assert any((~r["agent_mask"] & ~r["done"][:, None]).any() for r in engine), "agents died"
    for t, (a, b) in enumerate(zip(engine, generic)):
        assert a.keys() == b.keys()
        for key in a:
            if isinstance(a[key], np.ndarray):
                np.testing.assert_array_equal(a[key], b[key], err_msg=f"{key} at step {t}")
                assert a[key].dtype == b[key].dtype, key
            else:  # infos (episode summaries hold arrays), None
                np.testing.assert_equal(a[key], b[key], err_msg=f"{key} at step {t}")

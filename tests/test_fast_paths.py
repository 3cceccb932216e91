"""Family fast paths of the PettingZoo adapter write what the generic adapter writes.

MAgent2 envs step through their engine (marl_vec/envs/magent_engine.py);
pistonball and cooperative_pong read their screen once per step
(marl_vec/envs/butterfly_screen.py). Here: which envs take them, which do not,
and that every field of every result (infos included) equals the generic
adapter's, in every state mode, reward dtype and with copy=False, across deaths
and episode ends. tests/test_breadth_pettingzoo.py compares both with a plain loop.
"""

from __future__ import annotations

import functools
import importlib

import numpy as np
import pytest

import marl_vec as mv
from marl_vec.envs import butterfly_screen, magent_engine, pettingzoo_family
from marl_vec.envs.butterfly_screen import ScreenAdapter
from marl_vec.envs.magent_engine import MAgentAdapter
from marl_vec.envs.pettingzoo import PettingZooAdapter
from marl_vec.envs.pettingzoo_family import pettingzoo_adapter

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning", "ignore::DeprecationWarning",
                                        "ignore::UserWarning")

MAGENT_ENVS = ["battle_v4", "battlefield_v5", "gather_v5", "tiger_deer_v4", "combined_arms_v6",
               "adversarial_pursuit_v4"]
VENV_KWARGS = [{}, {"state": "none"}, {"state": "concat"}, {"reward_dtype": "float64"},
               {"copy": False, "validate": False}]


def _magent(name):
    pytest.importorskip("magent2")
    return importlib.import_module(f"magent2.environments.{name}")


def _butterfly(name):
    return importlib.import_module(f"pettingzoo.butterfly.{name}")


@pytest.mark.parametrize("name", MAGENT_ENVS)
def test_every_shipped_magent2_env_steps_through_its_engine(name):
    adapter = pettingzoo_adapter(_magent(name).parallel_env(max_cycles=5))
    assert type(adapter) is MAgentAdapter
    adapter.close()


@pytest.mark.parametrize("name, kwargs", [("pistonball_v6", {}), ("pistonball_v6", {"continuous": False}),
                                          ("cooperative_pong_v6", {})])
def test_pistonball_and_cooperative_pong_read_their_screen(name, kwargs):
    adapter = pettingzoo_adapter(_butterfly(name).parallel_env(**kwargs))
    assert type(adapter) is ScreenAdapter
    adapter.close()


def _subclass_overriding(env, method: str):
    """``env`` with its raw class replaced by a subclass that overrides ``method``."""
    raw = env.unwrapped
    base = type(raw)
    raw.__class__ = type("Changed", (base,), {method: lambda self, *a, **k: getattr(base, method)(self, *a, **k)})
    return env


def test_envs_that_change_what_the_fast_paths_replace_take_the_generic_path():
    assert type(pettingzoo_adapter(_subclass_overriding(_magent("battle_v4").parallel_env(map_size=15), "step"))) \
        is PettingZooAdapter
    assert type(pettingzoo_adapter(_subclass_overriding(_magent("battle_v4").parallel_env(map_size=15), "state"))) \
        is PettingZooAdapter
    for name in ("pistonball_v6", "cooperative_pong_v6"):
        for method in ("observe", "state"):
            env = _subclass_overriding(_butterfly(name).parallel_env(), method)
            assert type(pettingzoo_adapter(env)) is PettingZooAdapter, (name, method)
        env = _butterfly(name).parallel_env()
        env.render_mode = "human"  # draws to a window at every step: not reproduced
        assert not butterfly_screen.screen_path_applies(env)
        # Another parallel wrapper (any wrapper around the parallel env) hides the AEC env.
        from pettingzoo.utils.conversions import aec_to_parallel_wrapper

        wrapped = type("Wrapped", (aec_to_parallel_wrapper,), {})(_butterfly(name).env())
        assert not butterfly_screen.screen_path_applies(wrapped)


def _play(fast: bool, module, env_fn, actions_of, steps: int, **venv_kwargs) -> list[dict]:
    """Every result of a run, as copies (copy=False results are views the next step
    overwrites); ``fast`` False: the fast path's check is patched to refuse."""
    def snapshot(result):
        return {k: (np.array(v) if isinstance(v, np.ndarray) else v) for k, v in vars(result).items()}

    with pytest.MonkeyPatch.context() as m:
        if not fast:
            check = "engine_path_applies" if module is magent_engine else "screen_path_applies"
            m.setattr(pettingzoo_family, check, lambda env: False)
        with mv.DummyVecEnv([env_fn] * 2, env_seed=5, **venv_kwargs) as venv:
            adapter = venv.group.adapters[0]
            assert (type(adapter) is not PettingZooAdapter) == fast
            first = venv.reset()
            out = [snapshot(first)]
            for a in actions_of(venv, first, steps):
                out.append(snapshot(venv.step(a)))
    return out


def _attack_biased(venv, first, steps):
    """magent2: actions 13 and up attack; agents die within a few gather steps."""
    rng = np.random.default_rng(1)
    n, A = first.avail_actions.shape[-1], venv.spec.n_agents
    return np.where(rng.random((steps, 2, A)) < 0.8, rng.integers(13, n, (steps, 2, A)),
                    rng.integers(0, n, (steps, 2, A)))


def _uniform(venv, first, steps):
    rng = np.random.default_rng(2)
    spec = venv.spec
    if spec.discrete:
        return rng.integers(0, spec.n_actions, (steps, 2, spec.n_agents))
    low, high = np.broadcast_to(spec.action.low, spec.action_shape), np.broadcast_to(spec.action.high, spec.action_shape)
    return rng.uniform(low, high, (steps, 2, spec.n_agents, *spec.action_shape)).astype(spec.action.dtype)


def _assert_same_results(fast, generic):
    assert len(fast) == len(generic)
    for t, (a, b) in enumerate(zip(fast, generic)):
        assert a.keys() == b.keys()
        for key in a:
            if isinstance(a[key], np.ndarray):
                np.testing.assert_array_equal(a[key], b[key], err_msg=f"{key} at step {t}")
                assert a[key].dtype == b[key].dtype, key
            else:  # infos (episode summaries hold arrays), None
                np.testing.assert_equal(a[key], b[key], err_msg=f"{key} at step {t}")


@pytest.mark.parametrize("venv_kwargs", VENV_KWARGS)
def test_magent2_engine_path_writes_what_the_generic_adapter_writes(venv_kwargs):
    env_fn = functools.partial(_magent("gather_v5").parallel_env, max_cycles=15)  # episodes of 15 steps
    fast = _play(True, magent_engine, env_fn, _attack_biased, 35, **venv_kwargs)
    generic = _play(False, magent_engine, env_fn, _attack_biased, 35, **venv_kwargs)
    assert any(r["done"].any() for r in fast), "an episode ended"
    assert any((~r["agent_mask"] & ~r["done"][:, None]).any() for r in fast), "agents died"
    _assert_same_results(fast, generic)


@pytest.mark.parametrize("venv_kwargs", VENV_KWARGS)
@pytest.mark.parametrize("name, kwargs", [("pistonball_v6", {"n_pistons": 5, "max_cycles": 9}),
                                          ("pistonball_v6", {"n_pistons": 3, "continuous": False, "max_cycles": 9}),
                                          ("cooperative_pong_v6", {"max_cycles": 9})])
def test_screen_path_writes_what_the_generic_adapter_writes(name, kwargs, venv_kwargs):
    env_fn = functools.partial(_butterfly(name).parallel_env, **kwargs)
    fast = _play(True, butterfly_screen, env_fn, _uniform, 20, **venv_kwargs)
    generic = _play(False, butterfly_screen, env_fn, _uniform, 20, **venv_kwargs)
    assert sum(r["done"].any() for r in fast) >= 2, "episodes ended (and the envs were reset)"
    _assert_same_results(fast, generic)

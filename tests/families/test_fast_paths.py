"""Family fast paths of the PettingZoo adapter write what the generic adapter writes.

MAgent2 envs step through their engine (marl_vec/envs/pettingzoo/magent_engine.py);
pistonball and cooperative_pong read their screen once per step
(marl_vec/envs/pettingzoo/butterfly_screen.py); other AEC-born parallel envs step their AEC
env below PettingZoo's wrappers (marl_vec/envs/pettingzoo/aec_parallel.py). Here: which envs take them, which do not,
and that every field of every result (infos included) equals the generic
adapter's, in every state mode, reward dtype and with copy=False, across deaths
and episode ends. tests/families/test_breadth_pettingzoo.py compares both with a plain loop.
"""

from __future__ import annotations

import functools
import importlib

import numpy as np
import pytest

import marl_vec as mv
from marl_vec.envs.pettingzoo import aec_parallel, butterfly_screen, magent_engine
from marl_vec.envs.pettingzoo import family as pettingzoo_family
from marl_vec.envs.pettingzoo.aec_parallel import AECParallelAdapter
from marl_vec.envs.pettingzoo.butterfly_screen import ScreenAdapter
from marl_vec.envs.pettingzoo.magent_engine import MAgentAdapter
from marl_vec.envs.pettingzoo.parallel import PettingZooAdapter
from marl_vec.envs.pettingzoo.family import pettingzoo_adapter

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
            assert type(pettingzoo_adapter(env)) is AECParallelAdapter, (name, method)
        env = _butterfly(name).parallel_env()
        env.render_mode = "human"  # draws to a window at every step: not reproduced
        assert not butterfly_screen.screen_path_applies(env)
        # Another parallel wrapper (any wrapper around the parallel env) hides the AEC env.
        from pettingzoo.utils.conversions import aec_to_parallel_wrapper

        wrapped = type("Wrapped", (aec_to_parallel_wrapper,), {})(_butterfly(name).env())
        assert not butterfly_screen.screen_path_applies(wrapped)


def _play(fast: bool, env_fn, actions_of, steps: int, **venv_kwargs) -> list[dict]:
    """Every result of a run, as copies (copy=False results are views the next step
    overwrites); ``fast`` False: the fast path's check is patched to refuse."""
    def snapshot(result):
        return {k: (np.array(v) if isinstance(v, np.ndarray) else v) for k, v in vars(result).items()}

    with pytest.MonkeyPatch.context() as m:
        if not fast:  # every fast path refused: the generic adapter
            for check in ("engine_path_applies", "screen_path_applies", "aec_parallel_applies"):
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


def _each_agents_own(venv, first, steps):
    """Uniform actions; Discrete ones within each agent's own (unpadded) actions."""
    if not venv.spec.discrete:
        return _uniform(venv, first, steps)
    n = first.avail_actions[0].sum(-1)  # each agent's number of actions at the start
    return (np.random.default_rng(2).random((steps, 2, venv.spec.n_agents)) * n).astype(np.int64)


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
    fast = _play(True, env_fn, _attack_biased, 35, **venv_kwargs)
    generic = _play(False, env_fn, _attack_biased, 35, **venv_kwargs)
    assert any(r["done"].any() for r in fast), "an episode ended"
    assert any((~r["agent_mask"] & ~r["done"][:, None]).any() for r in fast), "agents died"
    _assert_same_results(fast, generic)


@pytest.mark.parametrize("venv_kwargs", VENV_KWARGS)
@pytest.mark.parametrize("name, kwargs", [("pistonball_v6", {"n_pistons": 5, "max_cycles": 9}),
                                          ("pistonball_v6", {"n_pistons": 3, "continuous": False, "max_cycles": 9}),
                                          ("cooperative_pong_v6", {"max_cycles": 9})])
def test_screen_path_writes_what_the_generic_adapter_writes(name, kwargs, venv_kwargs):
    env_fn = functools.partial(_butterfly(name).parallel_env, **kwargs)
    fast = _play(True, env_fn, _uniform, 20, **venv_kwargs)
    generic = _play(False, env_fn, _uniform, 20, **venv_kwargs)
    assert sum(r["done"].any() for r in fast) >= 2, "episodes ended (and the envs were reset)"
    _assert_same_results(fast, generic)


AEC_BORN = [("mpe2.simple_spread_v3", {"max_cycles": 7}),
            ("mpe2.simple_spread_v3", {"max_cycles": 7, "continuous_actions": True}),
            ("mpe2.simple_world_comm_v3", {"max_cycles": 7}),  # padded Discrete actions
            ("mpe2.simple_crypto_v3", {"max_cycles": 7}),  # padded observations
            ("pettingzoo.sisl.multiwalker_v9", {"max_cycles": 12}),  # walkers fall: terminations, Clip wrapper
            ("pettingzoo.butterfly.knights_archers_zombies_v11", {"max_cycles": 12, "max_zombies": 4}),
            ("pettingzoo.sisl.pursuit_v5", {"max_cycles": 7, "n_pursuers": 3, "n_evaders": 2})]


def _aec_born(name, kwargs):
    module = importlib.import_module(name)
    return functools.partial(module.parallel_env, **kwargs)


@pytest.mark.parametrize("name, kwargs", AEC_BORN)
def test_aec_born_parallel_envs_step_below_the_wrappers(name, kwargs):
    adapter = pettingzoo_adapter(_aec_born(name, kwargs)())
    assert type(adapter) is AECParallelAdapter
    # Only mpe2's observe is known to change nothing: the others still observe before each move.
    assert adapter._observe_before_move == (not name.startswith("mpe2."))
    adapter.close()


@pytest.mark.parametrize("venv_kwargs", VENV_KWARGS)
@pytest.mark.parametrize("name, kwargs", AEC_BORN)
def test_aec_parallel_path_writes_what_the_generic_adapter_writes(name, kwargs, venv_kwargs):
    env_fn = _aec_born(name, kwargs)
    fast = _play(True, env_fn, _each_agents_own, 16, **venv_kwargs)
    generic = _play(False, env_fn, _each_agents_own, 16, **venv_kwargs)
    assert sum(r["done"].any() for r in fast) >= 1, "an episode ended (and the envs were reset)"
    _assert_same_results(fast, generic)


def test_an_mpe2_scenario_with_its_own_observation_keeps_the_discarded_observe():
    from mpe2.simple_spread.simple_spread import Scenario

    env = importlib.import_module("mpe2.simple_spread_v3").parallel_env()
    calls = []

    class Counting(Scenario):
        def observation(self, agent, world):
            calls.append(agent.name)
            return super().observation(agent, world)

    env.unwrapped.scenario.__class__ = Counting
    adapter = pettingzoo_adapter(env)
    assert adapter._observe_before_move
    with mv.DummyVecEnv([lambda: env]) as venv:
        venv.reset(seed=0)
        calls.clear()
        venv.step(np.zeros((1, 3), np.int64))
    # As the parallel wrapper: each agent observed before its move, then all three after the cycle.
    assert calls == ["agent_0", "agent_1", "agent_2"] * 2


def test_a_wrapper_of_the_users_stays_in_the_way_of_every_move():
    from pettingzoo.utils.conversions import aec_to_parallel_wrapper
    from pettingzoo.utils.wrappers import BaseWrapper

    moves = []

    class Doubling(BaseWrapper):  # changes what the env is given: must see every move
        def step(self, action):
            moves.append(action)
            super().step(None if action is None else action * 2 % 5)

    def make(wrap):
        aec = importlib.import_module("mpe2.simple_spread_v3").env(max_cycles=4)
        return aec_to_parallel_wrapper(Doubling(aec) if wrap else aec)

    actions = np.random.default_rng(3).integers(0, 5, (6, 1, 3))
    out = {}
    for wrap in (True, False):
        with mv.DummyVecEnv([lambda: make(wrap)], env_seed=1) as venv:
            assert type(venv.group.adapters[0]) is AECParallelAdapter
            venv.reset()
            out[wrap] = [venv.step(a if wrap else a * 2 % 5).obs.copy() for a in actions]
    assert moves[:3] == actions[0, 0].tolist()
    np.testing.assert_array_equal(out[True], out[False])


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
def test_an_action_out_of_bounds_is_refused_before_any_agent_moves(backend):
    env_fn = _aec_born("mpe2.simple_spread_v3", {})
    with mv.make_vec([env_fn], backend=backend, validate=False, env_seed=0) as venv:
        venv.reset()
        before = venv.step(np.zeros((1, 3), np.int64))
        with pytest.raises(Exception, match=r"action 5 for agent 'agent_1' is not in its action space; "
                                            r"allowed: integers 0\.\.4"):
            venv.step(np.array([[0, 5, 0]]))
        if backend == "dummy":  # no agent moved: the env still takes the cycle from agent_0
            raw = venv.group.adapters[0].env.unwrapped
            assert raw.agent_selection == "agent_0"
            assert before.obs.shape == (1, 3, 18)


def test_set_attr_of_a_new_aec_env_is_stepped_through_it():
    from pettingzoo.utils.wrappers import BaseWrapper

    moves = []

    class Counting(BaseWrapper):
        def step(self, action):
            moves.append(action)
            super().step(action)

    module = importlib.import_module("mpe2.simple_spread_v3")
    with mv.DummyVecEnv([module.parallel_env], env_seed=0) as venv:
        venv.reset()
        venv.set_attr("aec_env", [Counting(module.env())])
        venv.reset()
        venv.step(np.array([[1, 2, 3]]))
    assert moves == [1, 2, 3]

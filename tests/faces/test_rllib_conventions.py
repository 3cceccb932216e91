"""The RLlib face's vector env, step by step, against RLlib's own ``SyncVectorMultiAgentEnv``
over RLlib's own PettingZoo wrappers of the same envs, same seeds and same actions:
every dict (observations, rewards, terminateds, truncateds, infos) of every step.

- Dead agents (``DyingAgentEnv``: ``a1`` dies mid-episode; episodes end by truncation
  or termination): a dead agent's last step is reported, then it is absent.
- Turn-based (PettingZoo's connect four through RLlib's ``PettingZooEnv``): only the
  agent to move is in the observation dict, with its reward since its last turn; at
  the end every agent, with ``"__all__"``; action masks as RLlib's
  action-masking module reads them (``{"action_mask", "observations"}``).
- MPE simple_spread on SubprocVecEnv (the process backend gives the same dicts).
- The global state in infos; the errors (wrong autoreset, a missing action, an
  unknown agent, bad ``env_config``).
"""

from __future__ import annotations

import gc
import sys
from functools import partial

import numpy as np
import pytest

import marl_vec as mv

pytest.importorskip("ray.rllib", reason="the rllib extra is not installed: pip install 'marl_vec[rllib]'")

from mpe2 import simple_spread_v3  # noqa: E402
from pettingzoo.classic import connect_four_v3  # noqa: E402
from ray.rllib.env.vector.sync_vector_multi_agent_env import SyncVectorMultiAgentEnv  # noqa: E402
from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv, PettingZooEnv  # noqa: E402

from marl_vec.compat.rllib import MarlVecMultiAgentEnv, parse_env_config  # noqa: E402
from marl_vec.compat.rllib.translate import ALL  # noqa: E402
from tests.helpers.scripted_envs import DyingAgentEnv  # noqa: E402


def assert_same_dicts(ours: list[dict], theirs: list[dict], what: str, t: int) -> None:
    assert len(ours) == len(theirs)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert list(a) == list(b) or sorted(a) == sorted(b), f"{what} env {i} step {t}: keys {list(a)} != {list(b)}"
        for agent in b:
            x, y = a[agent], b[agent]
            if isinstance(y, dict):
                assert sorted(x) == sorted(y), f"{what} env {i} step {t} {agent}"
                for key in y:
                    np.testing.assert_array_equal(x[key], y[key], err_msg=f"{what} env {i} step {t} {agent} {key}")
            else:
                np.testing.assert_array_equal(x, y, err_msg=f"{what} env {i} step {t} {agent}")
                if what == "rewards":
                    assert float(x) == float(y)


def legal(rng: np.random.Generator, mask: np.ndarray) -> int:
    return int(rng.choice(np.flatnonzero(mask)))


def run_parallel(make_env, steps: int, n: int = 3, backend: str = "dummy", seed: int = 5) -> None:
    theirs = SyncVectorMultiAgentEnv([lambda: ParallelPettingZooEnv(make_env())] * n)
    ours = MarlVecMultiAgentEnv(mv.make_vec([make_env] * n, backend=backend, autoreset="next_step",
                                            reward_dtype="float64", env_seed=None))
    rng = np.random.default_rng(0)
    try:
        obs_t, infos_t = theirs.reset(seed=seed)
        obs_o, infos_o = ours.reset(seed=seed)
        assert_same_dicts(obs_o, list(obs_t), "obs", 0)
        assert_same_dicts(infos_o, list(infos_t), "infos", 0)
        ends = 0
        dones = [False] * n
        term_t: list[dict] = [{} for _ in range(n)]
        trunc_t: list[dict] = [{} for _ in range(n)]
        for t in range(1, steps + 1):
            actions = []
            for i in range(n):
                if dones[i]:
                    actions.append({})
                    continue
                space = ours.single_action_spaces
                actions.append({a: (legal(rng, infos_t[i][a]["action_mask"]) if "action_mask" in infos_t[i].get(a, {})
                                    else int(rng.integers(space[a].n)))
                                for a in obs_t[i] if not (term_t[i].get(a) or trunc_t[i].get(a))})
            obs_t, rew_t, term_t, trunc_t, infos_t = theirs.step(actions)
            obs_o, rew_o, term_o, trunc_o, infos_o = ours.step(actions)
            for what, a, b in (("obs", obs_o, obs_t), ("rewards", rew_o, rew_t), ("terminateds", term_o, term_t),
                               ("truncateds", trunc_o, trunc_t), ("infos", infos_o, infos_t)):
                assert_same_dicts(a, list(b), what, t)
            dones = [bool(term_t[i]["__all__"] or trunc_t[i]["__all__"]) for i in range(n)]
            ends += sum(dones)
        assert ends >= n  # every env finished an episode and was reset by the vector env
    finally:
        theirs.close()
        ours.close()


@pytest.mark.parametrize("ending", ["truncation", "termination"])
def test_dead_agents_match_rllibs_own_vector_env(ending):
    run_parallel(partial(DyingAgentEnv, die_at=3, episode_len=6, ending=ending), steps=16)


def test_a_dead_agent_is_reported_once_then_absent():
    env = MarlVecMultiAgentEnv(mv.DummyVecEnv([partial(DyingAgentEnv, die_at=2, episode_len=4)],
                                              autoreset="next_step", reward_dtype="float64"))
    obs, infos = env.reset(seed=0)
    seen = []
    for _ in range(4):
        actions = [{a: int(np.flatnonzero(infos[0][a]["action_mask"])[0]) for a in obs[0]
                    if not (seen and (seen[-1][1].get(a)))}]
        obs, rew, term, trunc, infos = env.step(actions)
        seen.append((sorted(obs[0]), term[0], trunc[0]))
    assert seen[1][0] == ["a0", "a1", "a2"] and seen[1][1]["a1"] is True  # a1's last step
    assert seen[2][0] == ["a0", "a2"] and "a1" not in seen[2][1]          # then gone
    assert seen[3][2] == {"a0": True, "a2": True, "__all__": True} and seen[3][1]["__all__"] is False
    env.close()


def test_mpe_on_subproc_matches_rllibs_own_vector_env():
    run_parallel(partial(simple_spread_v3.parallel_env, N=3, max_cycles=5), steps=12, n=4, backend="subproc")


def test_turn_based_masked_connect_four_matches_rllibs_pettingzoo_env():
    n = 3
    theirs = SyncVectorMultiAgentEnv([lambda: PettingZooEnv(connect_four_v3.env())] * n)
    ours = MarlVecMultiAgentEnv(mv.DummyVecEnv([connect_four_v3.env] * n, autoreset="next_step",
                                               reward_dtype="float64", env_seed=None), action_mask=True)
    space = ours.single_observation_spaces["player_0"]
    assert set(space.spaces) == {"action_mask", "observations"} and space["action_mask"].shape == (7,)
    rng = np.random.default_rng(1)
    obs_t, _ = theirs.reset(seed=3)
    obs_o, _ = ours.reset(seed=3)
    rew_t = term_t = trunc_t = rew_o = term_o = trunc_o = [{ALL: False} for _ in range(n)]  # no step yet
    games = 0
    for t in range(120):
        for i in range(n):
            assert sorted(obs_o[i]) == sorted(obs_t[i]), (t, i)
            ended = t > 0 and term_t[i]["__all__"]
            for agent, native in obs_t[i].items():
                np.testing.assert_array_equal(obs_o[i][agent]["observations"], native["observation"])
                assert obs_o[i][agent]["action_mask"].dtype == np.float32
                if not ended:  # at the end no one moves: the native mask depends on who last() was called for
                    np.testing.assert_array_equal(obs_o[i][agent]["action_mask"],
                                                  native["action_mask"].astype(np.float32))
        if t:
            for what, a, b in (("rewards", rew_o, rew_t), ("terminateds", term_o, term_t),
                               ("truncateds", trunc_o, trunc_t)):
                assert_same_dicts(a, list(b), what, t)
        actions = []
        for i in range(n):
            finished = t > 0 and (term_t[i]["__all__"] or trunc_t[i]["__all__"])
            if finished:
                games += 1
                assert len(obs_o[i]) == 2  # the end: both players, with their final observation
            else:
                assert len(obs_o[i]) == 1  # only the agent to move
            actions.append({} if finished else {a: legal(rng, o["action_mask"]) for a, o in obs_t[i].items()})
        obs_t, rew_t, term_t, trunc_t, _ = theirs.step(actions)
        obs_o, rew_o, term_o, trunc_o, _ = ours.step(actions)
    assert games >= n
    theirs.close()
    ours.close()


def test_global_state_in_infos():
    venv = mv.DummyVecEnv([partial(simple_spread_v3.parallel_env, N=3, max_cycles=5)] * 2, autoreset="next_step")
    env = MarlVecMultiAgentEnv(venv, global_state=True)
    obs, infos = env.reset(seed=0)
    state = infos[1]["agent_0"]["state"]
    assert state.shape == venv.spec.state_shape
    # mpe2's state() is every agent's observation concatenated
    np.testing.assert_array_equal(state, np.concatenate([obs[1][a] for a in ("agent_0", "agent_1", "agent_2")]))
    env.close()


def test_errors():
    fn = partial(simple_spread_v3.parallel_env, N=3, max_cycles=5)
    with pytest.raises(ValueError, match="autoreset='next_step', not 'disabled'"):
        MarlVecMultiAgentEnv(mv.DummyVecEnv([fn], autoreset="disabled"))
    pooled = MarlVecMultiAgentEnv(mv.DummyVecEnv([fn]))  # same_step: only for the async runner's pool
    assert pooled.pooled
    with pytest.raises(RuntimeError, match="sampled through its async pool"):
        pooled.reset(seed=0)
    pooled.close()
    env = MarlVecMultiAgentEnv(mv.DummyVecEnv([fn], autoreset="next_step"))
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"env 0: no action for agents \['agent_2'\]"):
        env.step([{"agent_0": 0, "agent_1": 0}])
    with pytest.raises(ValueError, match="unknown agent 'bob'"):
        env.step([{"agent_0": 0, "agent_1": 0, "agent_2": 0, "bob": 1}])
    with pytest.raises(ValueError, match="expected 1 action dicts"):
        env.step([{}, {}])
    with pytest.raises(RuntimeError, match="stepped through its vector env"):
        env.envs[0].step({})
    with pytest.raises(ValueError, match="action_mask=True needs Discrete actions"):
        MarlVecMultiAgentEnv(mv.DummyVecEnv([partial(simple_spread_v3.parallel_env, continuous_actions=True)],
                                            autoreset="next_step"), action_mask=True)
    env.close()
    with pytest.raises(ValueError, match="env_config needs 'env_fn'"):
        parse_env_config({"backend": "dummy"})
    with pytest.raises(ValueError, match="must be one of dummy, subproc, ray, got 'threads'"):
        parse_env_config({"env_fn": fn, "backend": "threads"})


def test_a_refused_batch_stays_the_callers_and_nothing_raises_when_collected(monkeypatch):
    """A refused construction closes nothing (the batch is still the caller's) and leaves
    no half-built env whose ``__del__`` raises later (an exception while pytest renders a
    traceback has crashed the whole session)."""
    unraised = []
    monkeypatch.setattr(sys, "unraisablehook", unraised.append)
    fn = partial(simple_spread_v3.parallel_env, N=3, max_cycles=5)
    venv = mv.DummyVecEnv([fn], autoreset="disabled")
    with pytest.raises(ValueError, match="autoreset='next_step'"):
        MarlVecMultiAgentEnv(venv)
    masked = mv.DummyVecEnv([partial(simple_spread_v3.parallel_env, continuous_actions=True)], autoreset="next_step")
    with pytest.raises(ValueError, match="action_mask=True needs Discrete actions"):
        MarlVecMultiAgentEnv(masked, action_mask=True)
    gc.collect()
    assert unraised == []
    assert venv.reset(seed=0).obs.shape == (1, 3, 18) and masked.reset(seed=0).obs.shape[0] == 1
    venv.close()
    masked.close()

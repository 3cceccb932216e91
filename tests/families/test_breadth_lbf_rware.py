"""Level-Based Foraging and the Multi-Robot Warehouse (families ``lbf``, ``rware``) against a plain loop.

The breadth matrix of the Tuple-agents families: DummyVecEnv and SubprocVecEnv
each equal a plain loop over the native envs (built from their registered entry
point, seeded ``env_seed + i``, stepped with the same actions as a list, reset
at each episode's end) bit for bit over several episodes: observations (vector,
grid, image, Dict trees), state (the observations concatenated), per-agent
rewards, terminated vs truncated (LBF: all food collected vs its step limit;
RWARE: always a time limit), done and final observations. Then the families'
conventions: kwargs reach the env, the shipped configs, clear errors.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import marl_vec as mv
from marl_vec.core import spaces
from marl_vec.envs.registry import EnvOptionsError, UnknownEnvError, make_env, make_env_fn

lbforaging = pytest.importorskip("lbforaging", reason="the lbf extra is not installed: pip install 'marl_vec[lbf]'")
rware = pytest.importorskip("rware", reason="the rware extra is not installed: pip install 'marl_vec[rware]'")


@dataclasses.dataclass
class Case:
    family: str
    env_id: str
    kwargs: dict[str, Any]
    steps: int = 60
    num_envs: int = 3
    load_bias: float = 0.0  # LBF: share of LOAD actions (5), so that food gets collected
    goals: bool = False  # some episode must end terminated (LBF: every food collected)

    @property
    def id(self) -> str:
        extra = ",".join(f"{k}={getattr(v, 'name', v)}" for k, v in self.kwargs.items())
        return f"{self.env_id}[{extra}]"

    def native(self) -> gym.Env:
        """The env as its package defines it, without marl_vec's construction path."""
        spec = gym.spec(self.env_id)
        creator = gym.envs.registration.load_env_creator(spec.entry_point)
        return creator(**{**spec.kwargs, **self.kwargs})


CASES = [
    Case("lbf", "Foraging-5x5-2p-1f-v3", {"max_episode_steps": 12}, steps=120, load_bias=0.6, goals=True),
    Case("lbf", "Foraging-8x8-2p-2f-coop-v3", {"sight": 2, "penalty": 0.1, "max_episode_steps": 10}, steps=40,
         load_bias=0.5),
    # (grid_observation=True cannot be built in lbforaging 2.0.0: its Box gets a wrong shape.)
    Case("lbf", "Foraging-8x8-3p-2f-v3", {"observe_agent_levels": False, "sight": 2, "max_episode_steps": 9},
         steps=30),
    Case("lbf", "Foraging-15x15-4p-3f-v3", {"max_episode_steps": 15}, steps=40),
    Case("rware", "rware-tiny-2ag-v2", {"max_steps": 15}, steps=50),
    Case("rware", "rware-small-4ag-v2", {"max_steps": 12, "sensor_range": 2}, steps=30, num_envs=2),
    Case("rware", "rware-tiny-2ag-v2", {"max_steps": 400, "max_inactivity_steps": 7}, steps=30),
    Case("rware", "rware-tiny-3ag-v2", {"max_steps": 10, "observation_type": rware.ObservationType.IMAGE}, steps=25),
    Case("rware", "rware-tiny-2ag-v2", {"max_steps": 10, "observation_type": rware.ObservationType.DICT}, steps=25),
    Case("rware", "rware-tiny-2ag-v2", {"max_steps": 10, "msg_bits": 2}, steps=25),
]


def draw_actions(spec: mv.EnvSpec, case: Case) -> np.ndarray:
    rng = np.random.default_rng(11)
    T, E, A = case.steps, case.num_envs, spec.n_agents
    if not spec.discrete:  # RWARE with msg_bits: MultiDiscrete (move, bits...)
        return rng.integers(0, spec.action.nvec, size=(T, E, A, len(spec.action.nvec)))
    actions = rng.integers(0, spec.n_actions, size=(T, E, A))
    return np.where(rng.random((T, E, A)) < case.load_bias, 5, actions)


def stack(values: list[Any]) -> Any:
    """Per-agent (or per-env) values, trees included, stacked on a new leading axis."""
    return spaces.tree_map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *values)


def plain_loop(case: Case, seed: int, actions: np.ndarray) -> dict[str, list]:
    envs = [case.native() for _ in range(case.num_envs)]
    rec: dict[str, list] = {k: [] for k in ("obs", "reward", "terminated", "truncated", "done", "final_obs")}
    obs = [env.reset(seed=seed + i)[0] for i, env in enumerate(envs)]
    rec["first_obs"] = [stack([stack(list(o)) for o in obs])]
    for a in actions:
        rewards, term, trunc, finals = [], [], [], {}
        for i, env in enumerate(envs):
            o, r, done, _, _ = env.step(a[i].tolist())
            # LBF's goal is an empty field; the warehouse has none: every end is a time limit.
            goal = done and case.family == "lbf" and int(env.unwrapped.field.sum()) == 0
            rewards.append(np.asarray(r, dtype=np.float32))
            term.append(np.full(len(r), goal))
            trunc.append(np.full(len(r), done and not goal))
            if done:
                finals[i] = stack(list(o))
                o = env.reset()[0]
            obs[i] = o
        rec["obs"].append(stack([stack(list(o)) for o in obs]))
        rec["reward"].append(np.stack(rewards))
        rec["terminated"].append(np.stack(term))
        rec["truncated"].append(np.stack(trunc))
        rec["done"].append(np.stack(term).any(1) | np.stack(trunc).any(1))
        rec["final_obs"].append(finals)
    for env in envs:
        env.close()
    return rec


def assert_tree_equal(got: Any, want: Any, msg: str) -> None:
    spaces.tree_map(lambda g, w: np.testing.assert_array_equal(g, w, err_msg=msg), got, want)


def run(case: Case, backend: str):
    fns = [make_env_fn(case.family, case.env_id, case.kwargs)] * case.num_envs
    seed = 5
    with mv.make_vec(fns, backend=backend, env_seed=seed) as venv:
        actions = draw_actions(venv.spec, case)
        first = venv.reset(seed=seed)
        results = [venv.step(a) for a in actions]
        spec = venv.spec
    return spec, first, results, actions


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in CASES])
def test_equals_plain_loop(case: Case, backend: str):
    spec, first, results, actions = run(case, backend)
    ref = plain_loop(case, 5, actions)
    assert_tree_equal(first.obs, ref["first_obs"][0], "first obs")
    if not spec.obs_is_tree:  # the state is the observations concatenated
        np.testing.assert_array_equal(first.state, first.obs.reshape(case.num_envs, -1))
    for t, r in enumerate(results):
        assert_tree_equal(r.obs, ref["obs"][t], f"obs at step {t}")
        for name in ("reward", "terminated", "truncated", "done"):
            np.testing.assert_array_equal(getattr(r, name), ref[name][t], err_msg=f"{name} at step {t}")
        assert r.agent_mask.all() and (r.avail_actions is None or r.avail_actions.all())
        for i, final in ref["final_obs"][t].items():
            assert_tree_equal(spaces.tree_map(lambda a: a[i], r.final_obs), final, f"final_obs of env {i} at {t}")
        if not spec.obs_is_tree:
            np.testing.assert_array_equal(r.state, r.obs.reshape(case.num_envs, -1), err_msg=f"state at {t}")
    ends = sum(int(r.done.sum()) for r in results)
    assert ends >= case.num_envs, "several episodes ended in the run"
    goals = sum(int(r.terminated.any(1).sum()) for r in results)
    if case.goals:
        assert goals > 0, "some episode reached its goal (terminated)"
    if case.family == "rware":
        assert goals == 0, "the warehouse ends only by time limits"


def test_terminated_and_truncated_kept_apart():
    """LBF: the episode that collects every food is terminated, one that runs out of steps truncated."""
    case = CASES[0]
    _, _, results, _ = run(case, "dummy")
    term = np.array([r.terminated for r in results])
    trunc = np.array([r.truncated for r in results])
    assert term.any() and trunc.any()
    assert not (term & trunc).any()
    # Every agent of an env shares the env's end.
    assert (term.all(2) == term.any(2)).all() and (trunc.all(2) == trunc.any(2)).all()
    lengths = [info["episode"]["length"] for r in results for info in r.infos if "episode" in info]
    assert max(lengths) == case.kwargs["max_episode_steps"] and min(lengths) < case.kwargs["max_episode_steps"]


def test_kwargs_reach_the_env_and_spec():
    env = make_env("lbf", "Foraging-8x8-2p-2f-coop-v3", sight=2, penalty=0.25, max_episode_steps=17)
    native = env.native.unwrapped
    assert (native.sight, native.penalty, native._max_episode_steps) == (2, 0.25, 17)
    assert env.spec.episode_limit == 17 and env.spec.agents == ("agent_0", "agent_1")
    wh = make_env("rware", "rware-tiny-2ag-v2", sensor_range=2, max_steps=33)
    assert (wh.native.unwrapped.sensor_range, wh.spec.episode_limit) == (2, 33)
    assert wh.spec.obs_shape == (wh.native.observation_space[0].shape[0],)


def test_penalty_gives_negative_rewards():
    """LBF's penalty: a failed LOAD costs each loading agent ``penalty``, per agent."""
    case = Case("lbf", "Foraging-8x8-2p-2f-coop-v3", {"penalty": 0.5, "max_episode_steps": 20}, steps=80,
                num_envs=2, load_bias=0.9)
    _, _, results, _ = run(case, "dummy")
    rewards = np.array([r.reward for r in results])
    assert (rewards < 0).any() and set(np.unique(rewards[rewards < 0])) <= {-0.5, -1.0}


@pytest.mark.parametrize("config", ["lbf/8x8-2p-2f-coop", "lbf/15x15-4p-3f", "rware/tiny-2ag", "rware/small-4ag"])
def test_shipped_configs(config: str):
    with mv.make(config, num_envs=2) as venv:
        r = venv.reset()
        n = {"lbf/8x8-2p-2f-coop": 2, "lbf/15x15-4p-3f": 4, "rware/tiny-2ag": 2, "rware/small-4ag": 4}[config]
        assert venv.spec.n_agents == n and r.obs.shape[:2] == (2, n)
        assert venv.spec.episode_limit == (50 if config.startswith("lbf") else 500)
        r = venv.step(np.zeros((2, n), np.int64))
        assert r.reward.shape == (2, n) and not r.done.any()
        # Env i is seeded env_seed + i: the two copies start differently.
        assert not np.array_equal(r.obs[0], r.obs[1])


@pytest.mark.parametrize("family, env_id, kwargs, error, words", [
    ("lbf", "Foraging-8x8-2p-2f-cop-v3", {}, UnknownEnvError, ["unknown lbf env id", "Foraging-8x8-2p-2f-coop-v3"]),
    ("lbf", "rware-tiny-2ag-v2", {}, UnknownEnvError, ["unknown lbf env id", "e.g. Foraging"]),
    ("rware", "rware-tiny-2ag-v9", {}, UnknownEnvError, ["unknown rware env id", "rware-tiny-2ag-v2"]),
    ("lbf", "Foraging-8x8-2p-2f-coop-v3", {"sigth": 2}, EnvOptionsError, ["sigth", "allowed:", "sight", "penalty"]),
    ("rware", "rware-tiny-2ag-v2", {"sight": 2}, EnvOptionsError, ["sight", "allowed:", "sensor_range"]),
])
def test_clear_errors(family, env_id, kwargs, error, words):
    with pytest.raises(error) as info:
        make_env(family, env_id, **kwargs)
    for word in words:
        assert word in str(info.value)


def test_config_rejects_an_unknown_family():
    with pytest.raises(mv.ConfigError, match="lbf"):
        mv.make({"env": {"family": "lbforaging", "id": "Foraging-8x8-2p-2f-coop-v3"}})

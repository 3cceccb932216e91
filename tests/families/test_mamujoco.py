"""Multi-Agent MuJoCo (family ``mamujoco``) against gymnasium-robotics stepped by hand, bit for bit.

The breadth matrix: every scenario and agent split the family serves (and the
one-agent form of each, and ``agent_obsk`` / ``global_categories`` variants), a
batch of ``E`` envs seeded ``env_seed + i`` against
:class:`tests.helpers.mamujoco_reference.Reference` (the library's own envs, the
same seeds, each agent's own part of the same padded actions): obs (zero-padded),
state (``env.state()``), rewards, terminated vs truncated, done and, where an
episode ended, the true last observation and state. Episodes are short where the
env allows (``max_episode_steps``), so every env crosses several time limits;
Hopper, Walker2d, Humanoid and the pendulums keep their 1,000-step limit and end by
falling (terminated) with random actions.

DummyVecEnv runs every case. SubprocVecEnv (2 workers) and the async pool
(``send``/``recv``, batches of 2 in the order envs finish) run the four configs'
scenarios plus the ones built on our own path (CoupledHalfCheetah, ManySegment*,
Ant/8x1) and a falling one (Hopper) by default; every other case on them is
``matrix`` (``python -m pytest -m matrix tests/families/test_mamujoco.py``).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("gymnasium_robotics", reason="the mamujoco extra is not installed: pip install 'marl_vec[mamujoco]'")

import marl_vec as mv  # noqa: E402
from marl_vec.envs.mamujoco import SPLITS  # noqa: E402
from marl_vec.envs.registry import EnvOptionsError, MissingExtraError, UnknownEnvError, make_env, make_env_fn  # noqa: E402
from tests.helpers.mamujoco_reference import Case, Reference  # noqa: E402

E, STEPS, SEED = 3, 30, 7
SHORT = {"max_episode_steps": 8}
FALLS = ("Hopper", "Walker2d", "Humanoid", "InvertedPendulum", "InvertedDoublePendulum")  # keep the 1,000 steps
NEVER_FALL = ("HalfCheetah", "Swimmer", "Reacher", "Pusher", "HumanoidStandup", "CoupledHalfCheetah",
              "ManySegmentSwimmer")


def _cases() -> list[Case]:
    cases = []
    for scenario, splits in SPLITS.items():
        kwargs = {} if scenario in FALLS else dict(SHORT)
        for split in splits:
            conf = {"NxK": "2x3" if scenario == "ManySegmentAnt" else "4x1"}.get(split, split)
            cases.append(Case(f"{scenario}/{conf}", dict(kwargs)))
        if scenario not in ("ManySegmentAnt", "ManySegmentSwimmer"):
            cases.append(Case(scenario, dict(kwargs)))
    cases += [Case("ManySegmentSwimmer/3x2", dict(SHORT)),
              Case("Ant/2x4", {**SHORT, "agent_obsk": 0}), Case("HalfCheetah/6x1", {**SHORT, "agent_obsk": 2}),
              Case("Humanoid/9|8", {"agent_obsk": 0, "global_categories": ("qpos",)})]
    return cases


CASES = _cases()
# On the process backends by default; the rest is `matrix`.
FAST = {"Ant/2x4", "HalfCheetah/6x1", "Walker2d/2x3", "Humanoid/9|8", "Hopper/3x1", "CoupledHalfCheetah/1p1",
        "ManySegmentAnt/2x3", "Ant/8x1"}


def params(process: bool) -> list:
    seen: set[str] = set()
    out = []
    for c in CASES:
        fast = not process or (c.env_id in FAST and c.env_id not in seen)
        seen.add(c.env_id)
        out.append(pytest.param(c, id=c.id, marks=() if fast else (pytest.mark.exhaustive,)))
    return out


def draw_actions(spec: mv.EnvSpec, steps: int, n_envs: int) -> np.ndarray:
    """Uniform in each agent's own bounds; the padding entries 0."""
    rng = np.random.default_rng(3)
    low = np.where(np.isfinite(spec.action.low), spec.action.low, 0.0)
    high = np.where(np.isfinite(spec.action.high), spec.action.high, 0.0)
    shape = (steps, n_envs, spec.n_agents, *spec.action.shape)
    return rng.uniform(np.broadcast_to(low, shape[2:]), np.broadcast_to(high, shape[2:]), shape).astype(np.float32)


def check_row(r: mv.StepResult, k: int, want: dict, where: str) -> None:
    for name in ("obs", "state", "reward", "terminated", "truncated", "done"):
        np.testing.assert_array_equal(getattr(r, name)[k], want[name], err_msg=f"{where}: {name}")
    if want["done"]:
        np.testing.assert_array_equal(r.final_obs[k], want["final_obs"], err_msg=f"{where}: final_obs")
        np.testing.assert_array_equal(r.final_state[k], want["final_state"], err_msg=f"{where}: final_state")


def synchronous(case: Case, backend: str) -> tuple[int, int]:
    """Steps the family and the reference side by side; (episodes ended, of which terminated)."""
    fns = [make_env_fn("mamujoco", case.env_id, case.kwargs)] * E
    extra = {"num_workers": 2} if backend == "subproc" else {}
    ended = terminated = 0
    with mv.make_vec(fns, backend=backend, env_seed=SEED, **extra) as venv:
        spec = venv.spec
        ref = Reference(case, E, SEED, spec.obs_shape[0])
        steps = STEPS if case.kwargs.get("max_episode_steps") else 3 * STEPS  # falling robots: their own limit
        actions = draw_actions(spec, steps, E)
        r, want = venv.reset(), ref.reset()
        np.testing.assert_array_equal(r.obs, want["obs"], err_msg=f"{case.id}: reset obs")
        np.testing.assert_array_equal(r.state, want["state"], err_msg=f"{case.id}: reset state")
        for t in range(steps):
            r = venv.step(actions[t])
            for i, w in enumerate(ref.step(actions[t])):
                check_row(r, i, w, f"{case.id} env {i} step {t}")
                ended += w["done"]
                terminated += w["done"] and bool(w["terminated"].any())
        ref.close()
    return ended, terminated


@pytest.mark.parametrize("case", params(process=False))
def test_dummy_equals_the_library(case: Case):
    ended, terminated = synchronous(case, "dummy")
    assert ended >= E, "every env crossed an episode end"
    scenario = case.env_id.split("/")[0]
    if scenario in ("Hopper", "Walker2d", "InvertedPendulum", "InvertedDoublePendulum"):
        assert terminated >= E, "falling robots end terminated, before their time limit"
    if scenario in NEVER_FALL:
        assert terminated == 0, "the robots that cannot fall end only by their time limit"


@pytest.mark.parametrize("case", params(process=True))
def test_subproc_equals_the_library(case: Case):
    assert synchronous(case, "subproc")[0] >= E


@pytest.mark.parametrize("case", params(process=True))
def test_the_async_pool_equals_the_library(case: Case):
    """Batches of 2 of 4 envs on 2 workers, in the order they finish: each env follows its own plain loop."""
    n_envs, steps = 4, 20
    fns = [make_env_fn("mamujoco", case.env_id, case.kwargs)] * n_envs
    with mv.SubprocVecEnv(fns, num_workers=2, batch_size=2, env_seed=SEED) as venv:
        spec = venv.spec
        ref = Reference(case, n_envs, SEED, spec.obs_shape[0])
        actions = draw_actions(spec, steps + 1, n_envs)
        first = ref.reset()
        venv.reset()
        t = [-1] * n_envs  # per env: the step its next result answers (-1: the reset)
        ended = 0
        while min(t) < steps:
            r = venv.recv()
            ids = r.env_ids.tolist()
            for k, i in enumerate(ids):
                where = f"{case.id} env {i} step {t[i]}"
                if t[i] < 0:
                    np.testing.assert_array_equal(r.obs[k], first["obs"][i], err_msg=f"{where}: reset obs")
                    np.testing.assert_array_equal(r.state[k], first["state"][i], err_msg=f"{where}: reset state")
                elif t[i] < steps:
                    want = ref.step_env(i, actions[t[i], i])
                    check_row(r, k, want, where)
                    ended += want["done"]
                t[i] += 1
            venv.send(np.stack([actions[min(t[i], steps), i] for i in ids]), ids)
        ref.close()
    assert ended >= 1


def test_the_spec_states_agents_padding_state_and_limit():
    env = make_env("mamujoco", "Humanoid/9|8")
    spec = env.spec
    assert spec.agents == ("agent_0", "agent_1") and spec.episode_limit == 1000
    assert spec.obs_shape == (242,) and spec.obs_padded and spec.state_shape == (348,) and spec.has_state
    assert spec.action.shape == (9,) and spec.actions_padded and spec.action.agent_shapes == ((9,), (8,))
    np.testing.assert_array_equal(spec.action.low[1], [np.float32(-0.4)] * 8 + [-np.inf])
    assert make_env("mamujoco", "Reacher/2x1").spec.episode_limit == 50
    assert make_env("mamujoco", "Ant/2x4", max_episode_steps=12).spec.episode_limit == 12
    assert make_env("mamujoco", "CoupledHalfCheetah/1p1").spec.episode_limit == 1000
    # agent_obsk widens each agent's view; None: every agent sees the whole state.
    widths = [make_env("mamujoco", "HalfCheetah/6x1", agent_obsk=k).spec.obs_shape for k in (0, 1, 2, None)]
    assert widths == [(7,), (9,), (11,), (17,)], widths


def test_the_four_configs():
    for name, agents, limit in (("mamujoco/ant_2x4", 2, 1000), ("mamujoco/halfcheetah_6x1", 6, 1000),
                                ("mamujoco/walker2d_2x3", 2, 1000), ("mamujoco/humanoid_9_8", 2, 1000)):
        with mv.make(name, num_envs=2, backend="dummy") as venv:
            assert venv.spec.n_agents == agents and venv.spec.episode_limit == limit, name
            venv.reset()
            r = venv.step(draw_actions(venv.spec, 1, 2)[0])
            assert r.obs.shape[:2] == (2, agents) and r.state.shape == (2, *venv.spec.state_shape)


def test_bad_ids_and_options_name_what_is_allowed():
    with pytest.raises(UnknownEnvError, match=r"no env 'Antt/2x4' in gymnasium_robotics.mamujoco_v1; close matches: Ant"):
        make_env("mamujoco", "Antt/2x4")
    with pytest.raises(UnknownEnvError, match=r"no split '3x3' of mamujoco Ant; allowed: Ant/2x4, Ant/2x4d, Ant/4x2, "
                                              r"Ant/8x1, or Ant \(one agent\)"):
        make_env("mamujoco", "Ant/3x3")
    with pytest.raises(UnknownEnvError, match=r"ManySegmentAnt needs a split NxK"):
        make_env("mamujoco", "ManySegmentAnt")
    with pytest.raises(EnvOptionsError, match="does not take env.kwargs bogus"):
        make_env("mamujoco", "Ant/2x4", bogus=1)
    with pytest.raises(TypeError, match="CoupledHalfCheetah got an unexpected keyword argument 'ctrl_cost_weight'; "
                                        "it takes max_episode_steps only"):
        make_env("mamujoco", "CoupledHalfCheetah/1p1", ctrl_cost_weight=0.1)
    with pytest.raises(ValueError, match=r"agent_obsk must be an int >= 0 .* not -1"):
        make_env("mamujoco", "Ant/2x4", agent_obsk=-1)


def test_a_missing_library_names_the_extra(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "gymnasium_robotics.envs.multiagent_mujoco.mamujoco_v1", None)
    with pytest.raises(MissingExtraError, match=r"needed for Multi-Agent MuJoCo .* pip install 'marl_vec\[mamujoco\]'"):
        make_env("mamujoco", "Ant/2x4")
    monkeypatch.setitem(sys.modules, "mujoco", None)
    with pytest.raises(MissingExtraError, match=r"mujoco is needed for Multi-Agent MuJoCo .*marl_vec\[mamujoco\]"):
        make_env("mamujoco", "Ant/2x4")


def test_pusher_observations_have_one_layout_in_every_env():
    """The library orders Pusher/3p's two joints labelled alike by object id: two of its envs
    can lay agent_0's observation out differently. The family's envs all share one layout."""
    from gymnasium_robotics import mamujoco_v1

    def agent_0(env) -> np.ndarray:
        return env.reset(seed=0)[0]["agent_0"]

    library = [agent_0(mamujoco_v1.parallel_env("Pusher", "3p")) for _ in range(12)]
    assert len({a.tobytes() for a in library}) == 2, "the library's layout varies between instances"
    family = [agent_0(make_env("mamujoco", "Pusher/3p").native) for _ in range(12)]
    assert len({a.tobytes() for a in family}) == 1
    assert family[0].tobytes() in {a.tobytes() for a in library}
    # The shoulder pan joint (qpos 0) before the shoulder lift joint (qpos 1).
    assert [n.qpos_ids for n in make_env("mamujoco", "Pusher/3p").native.k_dicts[0][0]] == [2, 0, 1]


def _build_many_segment_ants(n: int) -> list[str]:
    errors = []
    for _ in range(n):
        try:
            make_env("mamujoco", "ManySegmentAnt/2x3").close()
        except Exception as exc:  # any failure of a build is what this test counts
            errors.append(f"{type(exc).__name__}: {exc}")
    return errors


def test_many_segment_models_build_in_parallel_processes():
    """The library writes ManySegmentAnt's model next to its installed files and deletes it after
    loading: 4 processes building it at once fail about half their builds (FileNotFoundError).
    The family builds each in a folder of its own."""
    import multiprocessing

    with multiprocessing.get_context("fork").Pool(4) as pool:
        errors = [e for errs in pool.map(_build_many_segment_ants, [8] * 4) for e in errs]
    assert errors == []


def test_coupled_half_cheetah_on_mujoco_3_6_names_the_cause(monkeypatch):
    """MuJoCo 3.6 made data.ten_J sparse; gymnasium-robotics 1.4.2 indexes it as dense (an IndexError)."""
    import mujoco

    monkeypatch.setattr(mujoco, "__version__", "3.6.0")
    with pytest.raises(MissingExtraError, match=r"CoupledHalfCheetah needs mujoco < 3.6 .* mujoco 3.6.0 is installed: "
                                                r"pip install 'marl_vec\[mamujoco\]'"):
        make_env("mamujoco", "CoupledHalfCheetah/1p1")
    make_env("mamujoco", "HalfCheetah/6x1").close()  # the others do not read it

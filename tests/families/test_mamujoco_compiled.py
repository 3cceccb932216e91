"""The compiled MaMuJoCo step (marl_vec/envs/mamujoco/compiled_step.py): where it runs, where it
gives way to the library's ``env.step``, and that both give the library's numbers.

The bit-for-bit comparison with gymnasium-robotics stepped by hand over every scenario
and split is tests/families/test_mamujoco.py, which runs the compiled step wherever
it applies (asserted here); these tests cover what that matrix cannot reach: custom
body functions and extra observations, a plan the library disagrees with, a wrapper
that changes the robot's observation, NaN actions, infos and the ``compiled=False``
option.
"""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("gymnasium_robotics", reason="the mamujoco extra is not installed: pip install 'marl_vec[mamujoco]'")

import marl_vec as mv  # noqa: E402
from marl_vec.envs.mamujoco import MaMuJoCoAdapter, make_mamujoco  # noqa: E402
from marl_vec.envs.registry import make_env_fn  # noqa: E402
from tests.families.test_gym_fast_path import assert_same  # noqa: E402
from tests.families.test_mamujoco import CASES, SEED, check_row, draw_actions  # noqa: E402
from tests.helpers.mamujoco_reference import Case, Reference  # noqa: E402


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_every_split_is_compiled_and_every_one_agent_form_is_not(case: Case):
    """So the breadth matrix of test_mamujoco.py runs the compiled step for every split."""
    adapter = make_mamujoco(case.env_id, **case.kwargs)
    if "/" in case.env_id:
        assert adapter.compiled_step is not None, adapter.compiled_why
    else:
        assert adapter.compiled_step is None
        assert adapter.compiled_why == "the one-agent form passes its action as given and sees the robot's observation"
    adapter.close()


def run_against_reference(case: Case, adapter_fns: list, steps: int = 40, n_envs: int = 2) -> None:
    with mv.DummyVecEnv(adapter_fns, env_seed=SEED) as venv:
        ref = Reference(case, n_envs, SEED, venv.spec.obs_shape[0])
        actions = draw_actions(venv.spec, steps, n_envs)
        r, want = venv.reset(), ref.reset()
        np.testing.assert_array_equal(r.obs, want["obs"])
        for t in range(steps):
            r = venv.step(actions[t])
            for i, w in enumerate(ref.step(actions[t])):
                check_row(r, i, w, f"{case.id} env {i} step {t}")
        ref.close()


def test_compiled_false_steps_through_the_library_with_the_same_numbers():
    case = Case("Ant/2x4", {"max_episode_steps": 8})
    adapter = make_mamujoco("Ant/2x4", compiled=False)
    assert adapter.compiled_step is None and adapter.compiled_why == "compiled=False was asked"
    run_against_reference(case, [make_env_fn("mamujoco", "Ant/2x4", {**case.kwargs, "compiled": False})] * 2)
    with pytest.raises(TypeError, match="mamujoco compiled must be True or False, not 'no'"):
        make_mamujoco("Ant/2x4", compiled="no")


def test_infos_are_the_librarys():
    fns = {c: make_env_fn("mamujoco", "Walker2d/2x3", {"compiled": c}) for c in (True, False)}
    with mv.DummyVecEnv([fns[True]] * 2, env_seed=1) as fast, mv.DummyVecEnv([fns[False]] * 2, env_seed=1) as slow:
        fast.reset(), slow.reset()
        actions = draw_actions(fast.spec, 30, 2)
        for t in range(30):
            a, b = fast.step(actions[t]), slow.step(actions[t])
            assert_same(a.infos, b.infos, f"step {t}")
            assert "agents" in a.infos[0] and set(a.infos[0]["agents"]) == {"agent_0", "agent_1"}


def _clip_half(_id, x):
    return np.clip(np.asarray(x) * 0.5, -0.25, 0.25).tolist()  # not the library's body function


def _custom_ant(kind: str) -> Case:
    """Ant/2x4 with one body function or extra observation of our own, as agent_factorization."""
    from gymnasium_robotics.envs.multiagent_mujoco.obsk import get_parts_and_edges

    parts, edges, globals_ = get_parts_and_edges("Ant", "2x4")
    if kind == "body_fn":
        parts[0][0].body_fn = _clip_half
    else:
        parts[1][1].extra_obs = {"qvel": lambda data: np.tanh(data.qvel[-2:])}
    return Case("Ant/2x4", {"max_episode_steps": 8,
                            "agent_factorization": {"partition": parts, "edges": edges, "globals": globals_}})


@pytest.mark.parametrize("kind", ["body_fn", "extra_obs"])
def test_functions_of_our_own_are_called_as_the_library_calls_them(kind):
    case = _custom_ant(kind)
    adapter = make_mamujoco(case.env_id, **case.kwargs)
    assert adapter.compiled_step is not None, adapter.compiled_why
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the check at each reset must not find a difference
        run_against_reference(case, [lambda: make_mamujoco(case.env_id, **case.kwargs)] * 2)


def test_a_plan_the_library_disagrees_with_gives_way_at_the_reset(monkeypatch):
    """A wrong plan (two entries swapped) is caught at the first reset; the results stay the library's."""
    from marl_vec.envs.mamujoco import compiled_step

    real_plan = compiled_step.CompiledStep.plan.__func__

    def wrong_plan(cls, env, obs_width, action_width):
        step, why = real_plan(cls, env, obs_width, action_width)
        step.index[0, [0, 1]] = step.index[0, [1, 0]]
        return step, why

    monkeypatch.setattr(compiled_step.CompiledStep, "plan", classmethod(wrong_plan))
    case = Case("HalfCheetah/2x3", {"max_episode_steps": 8})
    with pytest.warns(RuntimeWarning, match=r"MaMuJoCo HalfCheetah/2x3: the compiled step's observations differed "
                                            r"from gymnasium-robotics' at a reset; this env steps through the library"):
        run_against_reference(case, [make_env_fn("mamujoco", case.env_id, case.kwargs)] * 2)


def test_a_wrapper_that_may_change_the_observation_keeps_the_library_step():
    from gymnasium_robotics import mamujoco_v1

    robot = gym.wrappers.TransformObservation(gym.make("Ant-v5"), lambda o: o * 2, gym.make("Ant-v5").observation_space)
    adapter = MaMuJoCoAdapter(mamujoco_v1.parallel_env("Ant", "2x4", gym_env=robot), "Ant/2x4")
    assert adapter.compiled_step is None
    assert adapter.compiled_why == "a wrapper of the robot's env may change its observation"


@pytest.mark.parametrize("compiled", [True, False])
def test_a_nan_action_is_refused_as_the_library_refuses_it(compiled):
    with mv.DummyVecEnv([make_env_fn("mamujoco", "Ant/2x4", {"compiled": compiled})], validate=False) as venv:
        venv.reset(seed=0)
        actions = np.zeros((1, 2, 4), dtype=np.float32)
        actions[0, 1, 2] = np.nan
        with pytest.raises(AssertionError, match="FATAL: At least one gym_env action is undefined!"):
            venv.step(actions)


def test_the_maps_equal_the_librarys_own_mapping_functions():
    """Observations against the library's ``_get_obs``, the robot's action against its
    ``map_local_actions_to_global_action``, on a state reached by stepping."""
    adapter = make_mamujoco("Humanoid/9|8")
    step, env = adapter.compiled_step, adapter.env
    assert step is not None
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(5):
        actions = rng.uniform(-0.4, 0.4, (2, 9)).astype(np.float32)
        by_agent = {"agent_0": actions[0, :9], "agent_1": actions[1, :8]}
        want = env.map_local_actions_to_global_action(by_agent)
        got = step.robot_action(actions)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
        env.step(by_agent)
    rows = np.zeros(step.index.shape)
    step.observations(rows)
    library = env._get_obs()
    for j, agent in enumerate(env.possible_agents):
        n = len(library[agent])
        np.testing.assert_array_equal(rows[j, :n], library[agent])
        assert not rows[j, n:].any(), "the padding is zeros"


def test_the_benchmark_script_runs_as_the_docs_show_it(tmp_path):
    """scripts/bench/benchmark_mamujoco.py (the figures of docs/families/mamujoco.md#speed), tiny:
    every column measured and printed, for the compiled step and the library's."""
    import pathlib
    import subprocess
    import sys

    script = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "bench" / "benchmark_mamujoco.py"
    for extra in ([], ["--library-step", "--spin-us", "100"]):
        out = subprocess.run([sys.executable, str(script), "--num-envs", "4", "--rounds", "1", "--seconds", "0.2",
                              *extra], capture_output=True, text=True, timeout=240, cwd=tmp_path)
        assert out.returncode == 0, out.stderr[-2000:]
        step = "library step" if extra else "compiled step"
        assert f"Ant/2x4 x4, 2 workers, spin_us={'100' if extra else '0'}, {step}, 1 rounds of 0.2 s" in out.stdout
        assert "median: plain" in out.stdout and "subproc/ceiling" in out.stdout

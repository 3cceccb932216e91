"""XuanCe's own trainers run unchanged on marl_vec through XuanCeVecEnv.

The proof: XuanCe IPPO on mpe2 simple_spread (2 envs, buffer 100, 300 steps)
learns exactly the parameters it learns on XuanCe's own DummyVecMultiAgentEnv
over the same env and seeds. Two things make XuanCe's native run a fair
reference, both outside marl_vec:
- XuanCe's MPE env imports ``pettingzoo.mpe``, which PettingZoo 1.27 moved to
  the ``mpe2`` package: the modules are aliased.
- mpe2 divides discrete actions in place (``action //= mdim``), which zeroes the
  actions XuanCe stored for learning; the native env gets a copy (the face copies
  actions itself).
XuanCe's env resets itself with its seed when made; the face resets its VecEnv
once when made, so both then see the same episodes.

XuanCe 1.4.4 pins numpy<2 and gymnasium<1.3: these tests run in their own venv
(``bash scripts/install/install_xuance_venv.sh``; .ci/run runs them there).
"""

from __future__ import annotations

import sys
from argparse import Namespace

import numpy as np
import pytest

try:
    import torch
    import xuance  # noqa: F401
except ImportError:
    pytest.skip("needs the xuance venv: bash scripts/install/install_xuance_venv.sh", allow_module_level=True)

import mpe2
import mpe2.simple_spread_v3

# XuanCe's MPE env imports pettingzoo.mpe.<scenario>; PettingZoo 1.27 moved MPE to mpe2.
sys.modules.setdefault("pettingzoo.mpe", mpe2)
sys.modules.setdefault("pettingzoo.mpe.simple_spread_v3", mpe2.simple_spread_v3)

from xuance.common import get_arguments  # noqa: E402
from xuance.environment import REGISTRY_MULTI_AGENT_ENV, make_envs  # noqa: E402
from xuance.environment.multi_agent_env.mpe import MPE_Env  # noqa: E402
from xuance.torch.agents import REGISTRY_Agents  # noqa: E402

import marl_vec as mv  # noqa: E402
from marl_vec.compat import XuanCeVecEnv  # noqa: E402

# Tiny networks: one thread is fastest, and several contend badly on a busy machine.
torch.set_num_threads(1)


class ActionCopyingMPE(MPE_Env):
    """XuanCe's MPE env, given a copy of the actions (mpe2 changes them in place)."""

    def step(self, actions):
        return super().step({agent: np.array(action, copy=True) for agent, action in actions.items()})


@pytest.fixture(autouse=True)
def copying_native_mpe(monkeypatch):
    monkeypatch.setitem(REGISTRY_MULTI_AGENT_ENV, "mpe", ActionCopyingMPE)


def xuance_config(algo: str, tmp_path, continuous: bool = False, **overrides) -> Namespace:
    settings = dict(
        parallels=2, continuous_action=continuous, vectorize="DummyVecMultiAgentEnv", render=False,
        render_mode=None, log_dir=str(tmp_path / "logs"), model_dir=str(tmp_path / "models"),
        env_seed=1, seed=1, device="cpu", logger="tensorboard",
    )
    settings.update(overrides)
    return get_arguments(algo, "mpe", "simple_spread_v3", parser_args=Namespace(**settings))


def marl_vec_envs(config: Namespace, backend: str = "dummy") -> XuanCeVecEnv:
    """The same mpe2 env as XuanCe's config makes, as a marl_vec VecEnv behind the face."""
    venv = mv.make({
        "env": {"family": "pettingzoo", "id": "mpe2.simple_spread_v3",
                "kwargs": {"N": 3, "max_cycles": 25, "continuous_actions": bool(config.continuous_action)}},
        "vec": {"num_envs": config.parallels, "backend": backend, "env_seed": config.env_seed,
                "reward_dtype": "float64"},
    })
    return XuanCeVecEnv(venv)


def parameters(agent) -> dict[str, torch.Tensor]:
    return {name: value.detach().clone() for name, value in agent.policy.state_dict().items()}


def train_ippo(tmp_path, face: bool, backend: str = "dummy", continuous: bool = False, steps: int = 300):
    policy = "Gaussian_MAAC_Policy" if continuous else "Categorical_MAAC_Policy"
    config = xuance_config("ippo", tmp_path / ("face" if face else "native"), continuous,
                           buffer_size=100, n_epochs=1, n_minibatch=1, policy=policy)
    envs = marl_vec_envs(config, backend) if face else make_envs(config)
    agent = REGISTRY_Agents[config.agent](config, envs)
    initial = parameters(agent)
    agent.train(steps)
    learned = parameters(agent)
    agent.finish()
    envs.close()
    return initial, learned


def assert_same_parameters(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    different = [name for name in a if not torch.equal(a[name], b[name])]
    assert not different, f"parameters differ: {different}"


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
def test_ippo_learns_the_same_parameters_as_on_xuance_own_vec_env(tmp_path, backend):
    initial, native = train_ippo(tmp_path, face=False)
    _, through_face = train_ippo(tmp_path, face=True, backend=backend)
    assert any(not torch.equal(initial[n], native[n]) for n in initial), "IPPO did not update its parameters"
    assert_same_parameters(native, through_face)


def test_ippo_continuous_actions_learn_the_same_parameters(tmp_path):
    # XuanCe's Gaussian policy samples actions outside [0, 1]: XuanCe relies on the
    # env to clip them, and so does the face.
    initial, native = train_ippo(tmp_path, face=False, continuous=True)
    _, through_face = train_ippo(tmp_path, face=True, continuous=True)
    assert any(not torch.equal(initial[n], native[n]) for n in initial)
    assert_same_parameters(native, through_face)


def test_recurrent_mappo_with_global_state_learns_the_same_parameters(tmp_path):
    # The episode-based path of XuanCe's on-policy trainer (run_episodes, used by its
    # recurrent policies and by its SC2 and Football configs), with a centralised critic
    # on the env's state.
    def train(face: bool):
        config = xuance_config("mappo", tmp_path / ("face" if face else "native"), buffer_size=4, n_epochs=1,
                               n_minibatch=1, policy="Categorical_MAAC_Policy", use_rnn=True,
                               representation="Basic_RNN", use_global_state=True)
        envs = marl_vec_envs(config) if face else make_envs(config)
        agent = REGISTRY_Agents[config.agent](config, envs)
        initial = parameters(agent)
        agent.train(100)
        learned = parameters(agent)
        agent.finish()
        envs.close()
        return initial, learned

    initial, native = train(face=False)
    _, through_face = train(face=True)
    assert any(not torch.equal(initial[n], native[n]) for n in initial)
    assert_same_parameters(native, through_face)


def test_qmix_trains_and_tests_through_the_face(tmp_path):
    # QMIX is not deterministic run to run (its replay sampling is unseeded), so
    # only its working is checked here: it trains on the global state, its loss is
    # finite, and a test run on a second face reports sane episode scores.
    config = xuance_config("qmix", tmp_path, buffer_size=2000, batch_size=32, start_training=100,
                           training_frequency=10, sync_frequency=50, decay_step_greedy=500)
    envs = marl_vec_envs(config)
    agent = REGISTRY_Agents[config.agent](config, envs)
    initial = parameters(agent)
    info = agent.train(150)
    assert agent.current_step == 300
    assert any(not torch.equal(initial[n], value) for n, value in parameters(agent).items()), "QMIX did not learn"
    assert np.isfinite(info["loss_Q"])
    test_envs = marl_vec_envs(config)
    scores = agent.test(4, test_envs=test_envs)
    assert len(scores) >= 4
    # simple_spread rewards are negative distances: below zero and finite over 25 steps.
    assert all(np.isfinite(s) and -500 < s < 0 for s in scores), scores
    assert test_envs.closed
    agent.finish()
    envs.close()


def test_train_with_script_trains_xuance_on_a_marl_vec_config(capsys):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "scripts" / "train_with" / "xuance_mappo.py"
    spec = importlib.util.spec_from_file_location("xuance_mappo", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    config = str(path.parent.parent.parent / "configs" / "mpe" / "simple_spread.yaml")
    assert script.main([config, "--steps", "200", "--report", "100", "--num-envs", "2"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith(("step=", "first_"))]
    assert [line.split()[0] for line in lines[:-1]] == ["step=100", "step=200"]
    # Steps count over all envs: 100 steps are 4 episodes of 25 steps, 200 are 8.
    assert lines[0].split()[1] == "episodes=4" and lines[1].split()[1] == "episodes=8"
    assert lines[-1].startswith("first_return=-") and " final_return=-" in lines[-1]


def test_mappo_trains_on_football_through_the_face(tmp_path):
    # XuanCe MAPPO (centralised critic on marl_vec's Football state) on 3 vs 1 with keeper.
    pytest.importorskip("gfootball.env", reason="gfootball is not in this venv (XUANCE_FOOTBALL=1 bash scripts/install/install_xuance_venv.sh)")
    from pathlib import Path

    config_file = Path(__file__).resolve().parents[2] / "configs" / "football" / "academy_3_vs_1_with_keeper.yaml"
    venv = mv.make(str(config_file), num_envs=2, backend="dummy", reward_dtype="float64")
    envs = XuanCeVecEnv(venv)
    assert envs.max_episode_steps == 401 and envs.num_adversaries == 0
    config = xuance_config("mappo", tmp_path, buffer_size=50, n_epochs=1, n_minibatch=1,
                           policy="Categorical_MAAC_Policy", use_global_state=True, use_actions_mask=True)
    agent = REGISTRY_Agents[config.agent](config, envs)
    initial = parameters(agent)
    agent.train(60)
    assert agent.current_step == 120
    assert any(not torch.equal(initial[n], value) for n, value in parameters(agent).items())
    assert envs.battles_game.sum() == venv.episode_statistics()["episodes"]
    agent.finish()
    envs.close()

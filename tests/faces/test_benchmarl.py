"""marl_vec.compat.benchmarl.MarlVecTask: BenchMARL's own trainers on marl_vec.

The proof: BenchMARL MAPPO, 1 env, 600 frames, seed 0, learns exactly the same
parameters through the face as on TorchRL's ``PettingZooWrapper`` over mpe2
simple_spread. BenchMARL's own ``PettingZooTask.SIMPLE_SPREAD`` cannot build its
env with pettingzoo 1.27 (TorchRL's ``PettingZooEnv`` looks the task up in
``pettingzoo.mpe``, which moved to the mpe2 package), so the reference is its
``PettingZooClass`` with ``get_env_fun`` building the same ``PettingZooWrapper``
(``categorical_actions=True, return_state=True, seed=seed, render_mode="rgb_array"``)
over ``mpe2.simple_spread_v3.parallel_env`` instead: that shim is the only change.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("benchmarl")
from benchmarl.algorithms import MappoConfig, QmixConfig  # noqa: E402
from benchmarl.environments.pettingzoo.common import PettingZooClass  # noqa: E402
from benchmarl.experiment import Experiment, ExperimentConfig  # noqa: E402
from benchmarl.experiment.callback import Callback  # noqa: E402
from benchmarl.models import MlpConfig  # noqa: E402
from torchrl.envs import PettingZooWrapper  # noqa: E402

from marl_vec.compat.benchmarl import MarlVecTask  # noqa: E402

SPREAD_PZ = {"task": "simple_spread_v3", "max_cycles": 25, "N": 3, "local_ratio": 0.5}
# The same config and the same one-thread rule (an autouse fixture) as the TorchRL face's tests.
from tests.faces.test_torchrl import SPREAD, _one_thread  # noqa: E402, F401


class Mpe2SimpleSpread(PettingZooClass):
    """BenchMARL's PettingZoo task class, its env built from mpe2 (see the module docstring)."""

    def get_env_fun(self, num_envs, continuous_actions, seed, device):
        import mpe2.simple_spread_v3 as simple_spread

        kwargs = {k: v for k, v in self.config.items() if k != "task"}
        return lambda: PettingZooWrapper(
            simple_spread.parallel_env(continuous_actions=continuous_actions, render_mode="rgb_array", **kwargs),
            categorical_actions=True, device=device, seed=seed, return_state=True)


def _config(folder, **overrides) -> ExperimentConfig:
    config = ExperimentConfig.get_from_yaml()
    settings = dict(
        max_n_frames=600, on_policy_collected_frames_per_batch=300, on_policy_n_envs_per_worker=1,
        on_policy_minibatch_size=100, on_policy_n_minibatch_iters=1,
        evaluation=False, render=False, loggers=[], create_json=False, save_folder=str(folder),
        checkpoint_interval=0, checkpoint_at_end=False, prefer_continuous_actions=False,
    )
    settings.update(overrides)
    for key, value in settings.items():
        setattr(config, key, value)
    return config


def _experiment(task, algorithm, folder, callbacks=(), **overrides) -> Experiment:
    return Experiment(task=task, algorithm_config=algorithm.get_from_yaml(), model_config=MlpConfig.get_from_yaml(),
                      critic_model_config=MlpConfig.get_from_yaml(), seed=0, config=_config(folder, **overrides),
                      callbacks=list(callbacks))


def _parameters(experiment: Experiment) -> list[torch.Tensor]:
    return [p.detach().clone() for group in sorted(experiment.losses) for p in experiment.losses[group].parameters()]


def test_mappo_learns_the_same_parameters_as_on_pettingzoo_wrapper(tmp_path):
    (tmp_path / "native").mkdir()
    (tmp_path / "face").mkdir()
    native = _experiment(Mpe2SimpleSpread(name="SIMPLE_SPREAD", config=dict(SPREAD_PZ)), MappoConfig, tmp_path / "native")
    initial = _parameters(native)
    native.run()
    face = _experiment(MarlVecTask("simple_spread", {"config": SPREAD, "group_map": "prefix"}), MappoConfig,
                       tmp_path / "face")
    face.run()
    assert native.total_frames == face.total_frames == 600
    expected, got = _parameters(native), _parameters(face)
    assert len(expected) == len(got) > 0
    assert not all(torch.equal(a, b) for a, b in zip(initial, expected))  # training changed them
    for a, b in zip(expected, got):
        assert torch.equal(a, b)


class _Evaluations(Callback):
    def __init__(self):
        super().__init__()
        self.rollouts = []

    def on_evaluation_end(self, rollouts):
        self.rollouts.append(rollouts)


@pytest.mark.parametrize("algorithm", [MappoConfig, QmixConfig], ids=["mappo", "qmix"])
def test_trains_and_evaluates_through_the_face(tmp_path, algorithm):
    evaluations = _Evaluations()
    task = MarlVecTask.from_config("mpe/simple_tag", group_map="prefix")
    experiment = _experiment(
        task, algorithm, tmp_path, callbacks=[evaluations],
        max_n_frames=200, on_policy_collected_frames_per_batch=100, on_policy_n_envs_per_worker=2,
        on_policy_minibatch_size=50,
        off_policy_collected_frames_per_batch=100, off_policy_n_envs_per_worker=2, off_policy_n_optimizer_steps=2,
        off_policy_train_batch_size=32, off_policy_memory_size=1000,
        evaluation=True, evaluation_interval=100, evaluation_episodes=2,
        create_json=True,  # BenchMARL evaluates only when something records it (into tmp_path)
    )
    assert experiment.group_map == {"adversary": ["adversary_0", "adversary_1", "adversary_2"], "agent": ["agent_0"]}
    experiment.run()
    assert experiment.total_frames == 200
    assert len(evaluations.rollouts) >= 2  # BenchMARL evaluates at its interval and at the end
    for rollouts in evaluations.rollouts:
        assert len(rollouts) == 2  # one per evaluation env
        for rollout in rollouts:
            assert rollout.batch_size[0] == 25  # simple_tag's episode: max_cycles=25
            assert bool(rollout["next", "done"][-1].all())


def test_task_contract():
    task = MarlVecTask.from_config("mpe/simple_spread")
    assert task.name == "mpe2_simple_spread_v3" and "/" not in task.name
    assert task.supports_discrete_actions() and task.supports_continuous_actions()  # MPE switches by kwarg
    env = task.get_env_fun(num_envs=3, continuous_actions=True, seed=4, device="cpu")()
    try:
        assert env.batch_size == (3,)
        assert task.max_steps(env) == 25
        # The native PettingZoo task's group (TorchRL's PettingZooWrapper groups agent_0..2 as "agent").
        assert task.group_map(env) == {"agent": ["agent_0", "agent_1", "agent_2"]}
        assert task.observation_spec(env)["agent", "observation"].shape == (3, 18)
        assert task.state_spec(env)["state"].shape == (54,)
        assert task.action_spec(env)["agent", "action"].shape == (3, 5)  # continuous
        assert task.action_mask_spec(env) is None and task.info_spec(env) is None
    finally:
        env.close()
    assert pickle.loads(pickle.dumps(task)) == task  # BenchMARL pickles the task beside its checkpoints
    football_like = MarlVecTask.from_config("gym/cartpole", name="cartpole")
    assert football_like.supports_discrete_actions() and not football_like.supports_continuous_actions()
    # The action type is read from one env in this process, whatever the config's process options.
    workers = MarlVecTask("cartpole", {"config": {"env": {"family": "gym", "id": "CartPole-v1"}, "vec": {
        "backend": "subproc", "num_workers": 2, "start_method": "spawn", "step_in_main": True, "batch_size": 1}}})
    assert workers.supports_discrete_actions() and not workers.supports_continuous_actions()


def test_default_groups_are_the_native_tasks():
    """PettingZoo: grouped by name prefix as TorchRL's PettingZooWrapper (so native checkpoints load);
    other families: one group "agents"; "agents" and "prefix" may be asked for."""
    native = Mpe2SimpleSpread("SIMPLE_SPREAD", SPREAD_PZ).get_env_fun(1, False, 0, "cpu")()
    tasks = {"default": MarlVecTask.from_config("mpe/simple_spread"),
             "agents": MarlVecTask.from_config("mpe/simple_spread", group_map="agents"),
             "cartpole": MarlVecTask.from_config("gym/cartpole", name="cartpole")}
    groups = {}
    for key, task in tasks.items():
        env = task.get_env_fun(num_envs=2, continuous_actions=False, seed=0, device="cpu")()
        groups[key] = task.group_map(env)
        env.close()
    assert groups["default"] == native.group_map == {"agent": ["agent_0", "agent_1", "agent_2"]}
    assert groups["agents"] == {"agents": ["agent_0", "agent_1", "agent_2"]}
    assert list(groups["cartpole"]) == ["agents"]
    native.close()


def test_seeding_with_several_envs_per_worker():
    """Env i is seeded seed + i. Env 0 starts as BenchMARL's native env with ``seed``; natively every
    env of a worker's SerialEnv is made with ``seed`` (copies of one episode stream), here env 1 has seed + 1."""
    from torchrl.envs import SerialEnv

    seed = 7
    native_task = Mpe2SimpleSpread("SIMPLE_SPREAD", SPREAD_PZ)
    first_obs = {}
    for s in (seed, seed + 1):
        env = native_task.get_env_fun(1, False, s, "cpu")()
        first_obs[s] = env.reset()["agent", "observation"]
        env.close()
    native_batch = SerialEnv(2, native_task.get_env_fun(2, False, seed, "cpu"))
    native_obs = native_batch.reset()["agent", "observation"]
    native_batch.close()
    ours = MarlVecTask.from_config("mpe/simple_spread").get_env_fun(num_envs=2, continuous_actions=False, seed=seed,
                                                                    device="cpu")()
    obs = ours.reset()["agent", "observation"]
    ours.close()
    assert torch.equal(obs[0], first_obs[seed]) and torch.equal(obs[1], first_obs[seed + 1])
    assert torch.equal(native_obs[0], first_obs[seed]) and torch.equal(native_obs[1], first_obs[seed])  # the native rule
    assert not torch.equal(first_obs[seed], first_obs[seed + 1])


def test_task_refuses_bad_input():
    with pytest.raises(ValueError, match="no '/'"):
        MarlVecTask("mpe/simple_spread", {"config": SPREAD})
    with pytest.raises(ValueError, match="unknown MarlVecTask config keys \\['num_env'\\]"):
        MarlVecTask("spread", {"config": SPREAD, "num_env": 2})
    with pytest.raises(ValueError, match="needs 'config'"):
        MarlVecTask("spread", {})
    with pytest.raises(ValueError, match="autoreset must be one of \\['same_step', 'fast'\\], got 'next_step'"):
        MarlVecTask("spread", {"config": SPREAD, "autoreset": "next_step"})


def test_task_autoreset_is_same_step_or_fast():
    default = MarlVecTask("spread", {"config": SPREAD})
    fast = MarlVecTask("spread", {"config": SPREAD, "autoreset": "fast"})
    assert default._env_config(2, 0, False).vec.autoreset == "same_step"
    # Building it needs an env that snapshots its state (Football; tests/faces/test_benchmarl_football.py).
    assert fast._env_config(2, 0, False).vec.autoreset == "fast"


def test_train_with_script_prints_returns(tmp_path):
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run(
        [sys.executable, str(root / "scripts" / "train_with" / "benchmarl_mappo.py"), "--config", "mpe/simple_tag",
         "--group-map", "prefix", "--frames", "200", "--num-envs", "4", "--frames-per-batch", "100",
         "--out", str(tmp_path)], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.strip().splitlines()
    # 100 frames of 4 envs per batch: each batch ends one 25-step episode per env.
    returns = [line for line in lines if line.startswith("frames=")]
    assert [r.split()[0] for r in returns] == ["frames=100", "frames=200"]
    assert all(" adversary=" in r and " agent=" in r for r in returns)
    assert lines[-1].startswith("first_return=") and " last_return=" in lines[-1]

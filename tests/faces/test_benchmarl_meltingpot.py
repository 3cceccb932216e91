"""Melting Pot through TorchRLEnv and MarlVecTask, against TorchRL's and BenchMARL's own Melting Pot code.

Issue 36 asked that BenchMARL's MAPPO on a Melting Pot task learn, through MarlVecTask in
worker processes, the same parameters as on BenchMARL's native task. That cannot hold
for this reason: dmlab2d 1.0.2 builds different worlds from one build to the next with the
same Lab2d seed (docs/families/meltingpot.md, "Seeds"), so two native runs at one seed
already differ. What is proven instead:

- the layout: BenchMARL's native ``MeltingPotTask`` (TorchRL's ``MeltingpotEnv``) and
  ``MarlVecTask`` over the same substrate build MAPPO with the same parameter names,
  shapes and initial values at one seed (a native checkpoint loads into the face's);
- the values: each step through the face, in worker processes, equals the substrate's
  own ``observation()`` in its worker, leaf for leaf (``WORLD.RGB`` as the state);
- BenchMARL's MAPPO with its CNN trains through MarlVecTask on SubprocVecEnv.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("dmlab2d", reason="the meltingpot extra is not installed: pip install 'marl_vec[meltingpot]'")
torch = pytest.importorskip("torch")
pytest.importorskip("benchmarl")
from benchmarl.algorithms import MappoConfig  # noqa: E402
from benchmarl.experiment import Experiment, ExperimentConfig  # noqa: E402
from benchmarl.models import CnnConfig  # noqa: E402

import marl_vec as mv  # noqa: E402
from marl_vec.compat.benchmarl import MarlVecTask  # noqa: E402
from marl_vec.compat.torchrl import TorchRLEnv  # noqa: E402
from marl_vec.envs import make_env_fn  # noqa: E402
from marl_vec.envs.meltingpot import import_substrate  # noqa: E402

SUBSTRATE = "prisoners_dilemma_in_the_matrix__repeated"  # 2 players, every kind of leaf (matrix, scalar, image)
# The leaves substrate.observation() has; COLLECTIVE_REWARD is added to each step's timestep
# by Melting Pot's wrapper: the sum of the players' rewards (checked against those).
LEAVES = ("INTERACTION_INVENTORIES", "INVENTORY", "READY_TO_SHOOT", "RGB")


def _config(folder, n_envs: int) -> ExperimentConfig:
    config = ExperimentConfig.get_from_yaml()
    settings = dict(max_n_frames=200, on_policy_collected_frames_per_batch=100, on_policy_n_envs_per_worker=n_envs,
                    on_policy_minibatch_size=50, on_policy_n_minibatch_iters=1, evaluation=False, render=False,
                    loggers=[], create_json=False, save_folder=str(folder), checkpoint_interval=0,
                    checkpoint_at_end=False, prefer_continuous_actions=False)
    for key, value in settings.items():
        setattr(config, key, value)
    return config


def _face_task(num_envs: int) -> MarlVecTask:
    cfg = {"env": {"family": "meltingpot", "id": SUBSTRATE, "kwargs": {"max_episode_steps": 100}},
           "vec": {"backend": "subproc", "num_envs": num_envs, "state": "env"}}
    return MarlVecTask("pd_repeated", {"config": cfg})


def _experiment(task, folder, n_envs: int = 1) -> Experiment:
    return Experiment(task=task, algorithm_config=MappoConfig.get_from_yaml(), model_config=CnnConfig.get_from_yaml(),
                      critic_model_config=CnnConfig.get_from_yaml(), seed=0, config=_config(folder, n_envs))


def test_mappo_has_the_native_tasks_parameters(tmp_path):
    import_substrate()  # TorchRL's MeltingpotEnv imports meltingpot: without its bots (tensorflow), as marl_vec does
    from benchmarl.environments import MeltingPotTask

    native = _experiment(MeltingPotTask.PRISONERS_DILEMMA_IN_THE_MATRIX__REPEATED.get_from_yaml(), tmp_path)
    face = _experiment(_face_task(1), tmp_path)
    want, got = native.losses["agents"].state_dict(), face.losses["agents"].state_dict()
    assert list(want) == list(got) and len(want) > 0
    tensors = [k for k, v in want.items() if isinstance(v, torch.Tensor)]
    assert len(tensors) > 10
    for key in tensors:
        assert want[key].shape == got[key].shape and torch.equal(want[key], got[key]), key
    # Both observe the same leaves, shaped alike after each task's transforms (BenchMARL's spec, no env axis).
    leaves = {k[-1]: (tuple(s.shape), s.dtype)
              for k, s in native.observation_spec.items(include_nested=True, leaves_only=True)}
    assert {k[-1]: (tuple(s.shape), s.dtype)
            for k, s in face.observation_spec.items(include_nested=True, leaves_only=True)} == leaves
    assert leaves["INTERACTION_INVENTORIES"] == ((2, 4), torch.float32)  # flattened, as the native task does
    assert native.state_spec["RGB"].shape == face.state_spec["state"].shape  # WORLD.RGB
    face.losses["agents"].load_state_dict(native.losses["agents"].state_dict())  # a native checkpoint loads
    native.close()
    face.close()


def test_face_steps_equal_the_substrates_own_observations():
    """Two envs in two worker processes, 3-step episodes: every leaf at every step equals
    ``substrate.observation()`` read in the worker; where an env ended, the step shows the
    episode's last observation and the following reset the new episode's first."""
    fn = make_env_fn("meltingpot", SUBSTRATE, {"max_episode_steps": 3})
    face = TorchRLEnv(mv.make_vec([fn, fn], backend="subproc", env_seed=0, state="env"))
    rng = np.random.default_rng(0)
    try:
        td = face.reset()
        ends = 0
        for t in range(7):
            before = face.venv.call("observation")
            _assert_equals_substrate(td, before, t, "current")
            td["agents", "action"] = torch.as_tensor(rng.integers(0, 8, (2, 2)))
            stepped, td = face.step_and_maybe_reset(td)
            after = face.venv.call("observation")
            done = stepped["next", "done"].flatten().tolist()
            ends += sum(done)
            for i in range(2):
                if not done[i]:
                    _assert_equals_substrate(stepped["next"], after, t, "step", rows=[i])
            _assert_equals_substrate(td, after, t, "after reset")
            rewards = stepped["next", "agents", "reward"]
            assert rewards.shape == (2, 2, 1) and rewards.dtype == torch.float32
            collective = stepped["next", "agents", "observation", "COLLECTIVE_REWARD"]
            assert torch.equal(collective, rewards.sum(1, keepdim=True).expand(2, 2, 1).double()), t
            assert not td["agents", "observation", "COLLECTIVE_REWARD"][torch.tensor(done)].any()  # 0 at a start
        assert ends == 4  # both envs ended at steps 2 and 5
    finally:
        face.close()


def _assert_equals_substrate(td, observations, t, when, rows=(0, 1)):
    for i in rows:
        players = observations[i]
        for leaf in LEAVES:
            got = td["agents", "observation", leaf][i]
            want = torch.as_tensor(np.stack([np.asarray(p[leaf]) for p in players]))
            assert torch.equal(got, want.reshape(got.shape)), (t, when, i, leaf)
        assert torch.equal(td["state"][i], torch.as_tensor(players[0]["WORLD.RGB"])), (t, when, i, "WORLD.RGB")


@pytest.mark.slow
def test_mappo_with_cnn_trains_in_worker_processes(tmp_path):
    experiment = _experiment(_face_task(2), tmp_path, n_envs=2)
    initial = [p.detach().clone() for p in experiment.losses["agents"].parameters()]
    experiment.run()
    assert experiment.total_frames == 200
    trained = list(experiment.losses["agents"].parameters())
    assert all(torch.isfinite(p).all() for p in trained)
    assert all(not torch.equal(a, b) for a, b in zip(initial, trained))  # every layer learned

"""marl_vec.compat.TorchRLEnv and MarlVecTask: TorchRL's and BenchMARL's own code on marl_vec.

Proofs: ``check_env_specs`` on every backend and on masked envs; a rollout through
the face equals TorchRL's ``PettingZooWrapper`` over mpe2 with the same seeds and
actions; BenchMARL MAPPO through the face learns exactly the parameters it learns
on ``PettingZooWrapper`` (BenchMARL's own PettingZoo task, whose env lookup
imports ``pettingzoo.mpe``, which pettingzoo 1.27 removed: the reference task here
is BenchMARL's ``PettingZooClass`` with only ``get_env_fun`` changed to build the
same ``PettingZooWrapper`` over ``mpe2.simple_spread_v3``).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchrl")
from tensordict import TensorDict  # noqa: E402
from torchrl.envs import PettingZooWrapper  # noqa: E402
from torchrl.envs.utils import check_env_specs  # noqa: E402

import marl_vec as mv  # noqa: E402
from marl_vec.compat.torchrl import TorchRLEnv, prefix_group_map  # noqa: E402
from tests.helpers.scripted_envs import DyingAgentEnv, HeterogeneousEnv  # noqa: E402

SPREAD = {"env": {"family": "pettingzoo", "id": "mpe2.simple_spread_v3",
                  "kwargs": {"N": 3, "max_cycles": 25, "local_ratio": 0.5, "continuous_actions": False}}}


@pytest.fixture(autouse=True)
def _one_thread(monkeypatch):
    # TorchRL's SerialEnv, on closing, raises torch's thread count to its value at
    # torchrl's import (torchrl._THREAD_POOL_INIT); held at one thread, every run sums
    # floats in the same order.
    import torchrl

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    monkeypatch.setattr(torchrl, "_THREAD_POOL_INIT", 1)
    yield
    torch.set_num_threads(threads)


def _spread_native(seed: int) -> PettingZooWrapper:
    import mpe2.simple_spread_v3 as simple_spread

    return PettingZooWrapper(simple_spread.parallel_env(N=3, max_cycles=25, local_ratio=0.5, continuous_actions=False),
                             categorical_actions=True, return_state=True, seed=seed)


# -- specs -------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", ["dummy", "subproc"])
@pytest.mark.parametrize("env_fn", [DyingAgentEnv, HeterogeneousEnv], ids=["dying_masked", "heterogeneous_masked"])
def test_check_env_specs_masked_envs(backend, env_fn):
    env = TorchRLEnv(mv.make_vec([env_fn] * 2, backend=backend, env_seed=0), agent_mask=True)
    try:
        assert "action_mask" in env.observation_spec["agents"].keys()
        check_env_specs(env)
        env.rollout(15, break_when_any_done=False)  # random actions respect the masks, through episode ends
    finally:
        env.close()


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
def test_check_env_specs_simple_spread(backend):
    env = TorchRLEnv(mv.make(SPREAD, num_envs=2, backend=backend))
    try:
        check_env_specs(env)
        obs = env.observation_spec
        assert set(obs.keys()) == {"agents", "state"}
        assert set(obs["agents"].keys()) == {"observation"}  # no masks where the env has none
        assert obs["agents", "observation"].shape == (2, 3, 18)
        assert obs["state"].shape == (2, 54)
        assert env.full_action_spec["agents", "action"].shape == (2, 3)
        assert env.full_reward_spec["agents", "reward"].shape == (2, 3, 1)
        assert env.full_done_spec["agents", "truncated"].shape == (2, 3, 1)
        assert env.full_done_spec["done"].shape == (2, 1)
    finally:
        env.close()


def test_prefix_groups_simple_tag():
    env = TorchRLEnv(mv.make("mpe/simple_tag", num_envs=2), group_map="prefix")
    try:
        assert env.group_map == {"adversary": ["adversary_0", "adversary_1", "adversary_2"], "agent": ["agent_0"]}
        check_env_specs(env)
        assert env.observation_spec["adversary", "observation"].shape == (2, 3, 16)
        assert env.observation_spec["agent", "observation"].shape == (2, 1, 16)  # padded to the largest agent
        assert prefix_group_map(["a", "b_x", "b_1"]) == {"a": ["a"], "b_x": ["b_x"], "b": ["b_1"]}
    finally:
        env.close()


# -- values -------------------------------------------------------------------------------

KEYS = [("agent", "observation"), "state", "done", "terminated", "truncated",
        ("agent", "done"), ("agent", "terminated"), ("agent", "truncated")]
NEXT_KEYS = KEYS + [("agent", "reward")]


def test_rollout_equals_pettingzoo_wrapper():
    """Two envs through the face vs two PettingZooWrappers seeded 0 and 1: 60 steps (two episode ends)."""
    actions = np.random.default_rng(7).integers(0, 5, size=(60, 2, 3))
    natives = [_spread_native(seed) for seed in (0, 1)]
    face = TorchRLEnv(mv.make(SPREAD, num_envs=2, env_seed=0), group_map="prefix", seed=0)
    try:
        assert face.group_map == natives[0].group_map
        td = face.reset()
        native_tds = [n.reset() for n in natives]
        ends = []
        for t in range(60):
            td["agent", "action"] = torch.as_tensor(actions[t])
            for i, n in enumerate(natives):
                native_tds[i]["agent", "action"] = torch.as_tensor(actions[t, i])
            td, td_next = face.step_and_maybe_reset(td)
            stepped = [n.step_and_maybe_reset(ntd) for n, ntd in zip(natives, native_tds)]
            for i, (native, native_next) in enumerate(stepped):
                for key in NEXT_KEYS:
                    assert torch.equal(td["next", key][i], native["next", key]), (t, i, key)
                for key in KEYS:
                    assert torch.equal(td_next[key][i], native_next[key]), (t, i, key)
            native_tds = [n for _, n in stepped]
            if td["next", "done"].any():
                ends.append(t)
            td = td_next
        assert ends == [24, 49]
    finally:
        face.close()
        for n in natives:
            n.close()


def test_action_masks_and_agent_mask_values():
    """DyingAgentEnv: at episode step s action s % n is unavailable; a2's action 3 is padding;
    a1 dies at step 3; episodes last 6 steps (so this crosses an autoreset)."""
    face = TorchRLEnv(mv.make_vec([DyingAgentEnv] * 2, env_seed=0), agent_mask=True)
    try:
        td = face.reset()
        for t in range(8):
            s = t % 6
            alive = [True, s < 3, True]
            assert td["agents", "mask"].tolist() == [alive, alive], t
            for i, n in enumerate((4, 4, 3)):
                expected = torch.zeros(4, dtype=torch.bool)
                if alive[i]:
                    expected[:n] = True
                    expected[s % n] = False
                else:
                    expected[0] = True  # a dead agent may only take the no-op
                assert torch.equal(td["agents", "action_mask"][0, i], expected), (t, i)
                assert torch.equal(td["agents", "action_mask"][1, i], expected), (t, i)
            td["agents", "action"] = torch.full((2, 3), (s + 1) % 3, dtype=torch.int64)
            stepped, td = face.step_and_maybe_reset(td)
            assert stepped["next", "done"].flatten().tolist() == [s == 5, s == 5], t
    finally:
        face.close()


class _EvenDyingAgentEnv(DyingAgentEnv):
    """DyingAgentEnv with 4 actions for every agent: PettingZooWrapper stacks one group's specs."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.n_actions = {"a0": 4, "a1": 4, "a2": 4}


MASK_KEYS = [("agents", "observation"), ("agents", "mask"), "done", ("agents", "done"), ("agents", "terminated"),
             ("agents", "truncated")]


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
def test_agent_mask_at_an_episode_end_equals_pettingzoo_wrapper(backend):
    """Issue 23: at a step where an env finished, ``(group, "mask")`` was the new episode's
    while the observation (and action mask) were the final ones. It is the final step's, as
    PettingZooWrapper gives it: the agents still in ``env.agents`` (none, at an episode's end)."""
    # No agent dies mid-episode here: TorchRL's step_and_maybe_reset resets a PettingZooWrapper
    # env as soon as one agent is done (its group's "_reset"), which the face does not.
    fns = [functools.partial(_EvenDyingAgentEnv, episode_len=4, die_at=9), functools.partial(_EvenDyingAgentEnv, die_at=9)]
    natives = [PettingZooWrapper(fn(), group_map={"agents": ["a0", "a1", "a2"]}, use_mask=True, seed=i,
                                 categorical_actions=True) for i, fn in enumerate(fns)]
    face = TorchRLEnv(mv.make_vec(fns, backend=backend, env_seed=0), agent_mask=True)
    try:
        td, native_tds = face.reset(), [n.reset() for n in natives]
        ends = []
        for t in range(13):
            counts = [t % 4, t % 6]  # (count + 1) % 3 is never the unavailable action count % n
            td["agents", "action"] = torch.tensor([[(c + 1) % 3] * 3 for c in counts])
            for i, ntd in enumerate(native_tds):
                ntd["agents", "action"] = td["agents", "action"][i].clone()
            td, td_next = face.step_and_maybe_reset(td)
            stepped = [n.step_and_maybe_reset(ntd) for n, ntd in zip(natives, native_tds)]
            for i, (native, native_next) in enumerate(stepped):
                for key in MASK_KEYS:
                    assert torch.equal(td["next", key][i], native["next", key]), (t, i, key)
                    assert torch.equal(td_next[key][i], native_next[key]), (t, i, "reset", key)
            ends += [(t, i) for i in np.flatnonzero(td["next", "done"].flatten().numpy())]
            native_tds = [n for _, n in stepped]
            td = td_next
        assert ends == [(3, 0), (5, 1), (7, 0), (11, 0), (11, 1)]
    finally:
        face.close()
        for n in natives:
            n.close()


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
def test_envs_ending_at_different_steps(backend):
    """Episodes of 4 and 6 steps: each step shows the final observation where an env ended, and the
    following reset (with "_reset" masks, as TorchRL's rollout) the new episode's start, without
    resetting the other env. DyingAgentEnv's obs[0] is the episode's step count."""
    fns = [functools.partial(DyingAgentEnv, episode_len=4, die_at=9), functools.partial(DyingAgentEnv, die_at=9)]
    face = TorchRLEnv(mv.make_vec(fns, backend=backend, env_seed=0))
    try:
        td = face.reset()
        for t in range(13):
            counts = [t % 4, t % 6]
            assert td["agents", "observation"][:, 0, 0].tolist() == counts, t
            # (count + 1) % 3 is never the unavailable action count % n
            td["agents", "action"] = torch.tensor([[(c + 1) % 3] * 3 for c in counts])
            stepped, td = face.step_and_maybe_reset(td)
            ended = [counts[0] == 3, counts[1] == 5]
            assert stepped["next", "done"].flatten().tolist() == ended, t
            assert stepped["next", "agents", "observation"][:, 0, 0].tolist() == [c + 1 for c in counts], t
    finally:
        face.close()


def test_partial_reset_resets_only_masked_envs():
    face = TorchRLEnv(mv.make_vec([DyingAgentEnv] * 2, env_seed=0))
    try:
        td = face.reset()
        for _ in range(2):
            td["agents", "action"] = torch.ones(2, 3, dtype=torch.int64) * 2
            td = face.step(td)["next"]
        assert td["agents", "observation"][:, 0, 0].tolist() == [2.0, 2.0]  # obs[0] is the step count
        td["_reset"] = torch.tensor([[True], [False]])
        td = face.reset(td)
        assert td["agents", "observation"][:, 0, 0].tolist() == [0.0, 2.0]
        td["agents", "action"] = torch.ones(2, 3, dtype=torch.int64)
        td = face.step(td)["next"]
        assert td["agents", "observation"][:, 0, 0].tolist() == [1.0, 3.0]  # env 1 was not reset
    finally:
        face.close()


def test_seeding_as_pettingzoo_wrapper():
    """set_seed resets at once with the seed (the next reset goes on from there); reset(seed=...) too."""
    face = TorchRLEnv(mv.make(SPREAD, num_envs=1))
    native = _spread_native(seed=None)
    try:
        face.set_seed(5)
        native.set_seed(5)
        assert torch.equal(face.reset()["agents", "observation"][0], native.reset()["agent", "observation"])
        assert torch.equal(face.reset(seed=9)["agents", "observation"][0], native.reset(seed=9)["agent", "observation"])
        assert torch.equal(face.reset()["state"][0], native.reset()["state"])
    finally:
        face.close()
        native.close()


def test_refuses_misuse():
    with pytest.raises(ValueError, match="autoreset='same_step' or 'fast'.*got autoreset='next_step'"):
        TorchRLEnv(mv.make(SPREAD, num_envs=1, autoreset="next_step"))
    venv = mv.make(SPREAD, num_envs=1)
    with pytest.raises(ValueError, match="must name every agent exactly once"):
        TorchRLEnv(venv, group_map={"g": ["agent_0"]})
    with pytest.raises(ValueError, match="group_map must be None, 'prefix' or a dict"):
        TorchRLEnv(venv, group_map="by_team")
    venv.close()
    cont = mv.make({**SPREAD, "env": {**SPREAD["env"], "kwargs": {"N": 3, "continuous_actions": True}}}, num_envs=1)
    with pytest.raises(ValueError, match="action_mask=True needs discrete actions"):
        TorchRLEnv(cont, action_mask=True)
    cont.close()
    with pytest.raises(TypeError, match="wraps a marl_vec VecEnv"):
        TorchRLEnv(_spread_native(0))


def test_check_env_specs_continuous_actions():
    config = {"env": {**SPREAD["env"], "kwargs": {"N": 3, "max_cycles": 25, "continuous_actions": True}}}
    env = TorchRLEnv(mv.make(config, num_envs=2))
    try:
        check_env_specs(env)
        action = env.full_action_spec["agents", "action"]
        assert action.shape == (2, 3, 5) and action.dtype == torch.float32
        assert float(action.space.low.min()) == 0.0 and float(action.space.high.max()) == 1.0  # mpe2's Box(0, 1)
        assert "action_mask" not in env.observation_spec["agents"].keys()
        env.rollout(30, break_when_any_done=False)
    finally:
        env.close()


def test_copy_false_vecenv_gives_steps_that_stay_put():
    """A copy=False VecEnv reuses its buffers; the face copies, so a rollout keeps every step."""
    actions = np.random.default_rng(3).integers(0, 5, size=(30, 2, 3))
    rollouts = []
    for copy in (True, False):
        face = TorchRLEnv(mv.make(SPREAD, num_envs=2, copy=copy))
        td = face.reset()
        steps = []
        for t in range(30):
            td["agents", "action"] = torch.as_tensor(actions[t])
            stepped, td = face.step_and_maybe_reset(td)
            steps.append(stepped)
        rollouts.append(torch.stack(steps))
        face.close()
    assert (rollouts[0] == rollouts[1]).all()
    assert not torch.equal(rollouts[1]["agents", "observation"][0], rollouts[1]["agents", "observation"][1])

"""RLlib users' own envs, unchanged, through the RLlib face: RLlib's env spec (a class, a
registered name or a creator, with ``env_config``) and a config that changes only its
``env_runner_cls``.

- Step by step, RLlib's ``MultiAgentCartPole`` (agents ``0, 1`` that end at different
  steps; ``"__all__"`` when both did) and PettingZoo's knights-archers-zombies through
  RLlib's ``ParallelPettingZooEnv`` (agents killed one by one) give the same dicts, keys
  (the env's own agent ids, ints included) and values as RLlib's ``SyncVectorMultiAgentEnv``
  at the same seeds and actions.
- PPO on ``MultiAgentCartPole`` (a class with ``env_config``) and on MPE through a registered
  ``ParallelPettingZooEnv`` samples the same episodes and learns the same weights as RLlib's
  own runner, on the sync runner (DummyVecEnv, SubprocVecEnv through ``with_batch``) and the
  async runner (one env).
- The registry takes an RLlib env for what it is (not a gymnasium env) without importing
  ray; the errors.
"""

from __future__ import annotations

import subprocess
import sys
from functools import partial

import gymnasium as gym
import numpy as np
import pytest

import marl_vec as mv

pytest.importorskip("ray.rllib", reason="the rllib extra is not installed: pip install 'marl_vec[rllib]'")

from pettingzoo.butterfly import knights_archers_zombies_v11  # noqa: E402
from pettingzoo.classic import connect_four_v3  # noqa: E402
from ray.rllib.env.multi_agent_env_runner import MultiAgentEnvRunner  # noqa: E402
from ray.rllib.env.vector.sync_vector_multi_agent_env import SyncVectorMultiAgentEnv  # noqa: E402
from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv, PettingZooEnv  # noqa: E402
from ray.rllib.env.multi_agent_env import MultiAgentEnv  # noqa: E402
from ray.rllib.examples.envs.classes.multi_agent import MultiAgentCartPole  # noqa: E402
from ray.rllib.examples.envs.classes.multi_agent.guess_the_number_game import GuessTheNumberGame  # noqa: E402

from marl_vec.compat.rllib import MarlVecAsyncEnvRunner, MarlVecEnvRunner, MarlVecMultiAgentEnv  # noqa: E402
from marl_vec.envs.rllib import RLlibAdapter  # noqa: E402
from marl_vec.envs.registry import as_adapter  # noqa: E402
from tests.helpers.rllib_runs import assert_same_runs, ppo_config, train  # noqa: E402

CARTPOLE = partial(MultiAgentCartPole, {"num_agents": 2})
KAZ = partial(knights_archers_zombies_v11.parallel_env, spawn_delay=5, line_death=True, max_cycles=300)


def kaz() -> ParallelPettingZooEnv:
    return ParallelPettingZooEnv(KAZ())


def step_both(make_env, steps: int, backend: str = "dummy", n: int = 2, seed: int = 1) -> list:
    """Step RLlib's vector env and the face's with the same random actions; return the
    (step, env, agents) of every agent that ended before its env did."""
    theirs = SyncVectorMultiAgentEnv([make_env] * n)
    ours = MarlVecMultiAgentEnv(mv.make_vec([make_env] * n, backend=backend, autoreset="next_step",
                                            reward_dtype="float64"))
    early = []
    try:
        obs_t, info_t = theirs.reset(seed=seed)
        obs_o, info_o = ours.reset(seed=seed)
        assert_same(obs_o, obs_t, "obs", 0)
        rng = np.random.default_rng(0)
        acting = [list(o) for o in obs_t]  # as RLlib's runner: agents with an observation, not done
        for t in range(1, steps + 1):
            actions = [{a: int(rng.integers(theirs.envs[i].unwrapped.get_action_space(a).n)) for a in agents}
                       for i, agents in enumerate(acting)]
            got, want = ours.step(actions), theirs.step(actions)
            for name, a, b in zip(("obs", "rewards", "terminateds", "truncateds", "infos"), got, want):
                assert_same(a, b, name, t)
            for i, (obs, terms, truncs) in enumerate(zip(want[0], want[2], want[3])):
                ended = [a for a in terms if a != "__all__" and (terms[a] or truncs.get(a))]
                if ended and not (terms["__all__"] or truncs["__all__"]):
                    early.append((t, i, ended))
                acting[i] = [a for a in obs if a not in ended]
    finally:
        theirs.close()
        ours.close()
    return early


def assert_same(ours: list[dict], theirs: list[dict], what: str, t: int) -> None:
    assert len(ours) == len(theirs)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        # The same ids (ints stay ints); observations in the same order (the module's batch order).
        keys = (list(a), list(b)) if what == "obs" else (sorted(a, key=str), sorted(b, key=str))
        assert keys[0] == keys[1], f"{what} env {i} step {t}: keys {list(a)} != {list(b)}"
        for agent in b:
            if what == "infos":
                assert sorted(a[agent]) == sorted(b[agent]), f"infos env {i} step {t} {agent}"
                continue
            np.testing.assert_array_equal(a[agent], b[agent], err_msg=f"{what} env {i} step {t} {agent}")


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
def test_multi_agent_cartpole_step_by_step_is_rllibs(backend):
    early = step_both(CARTPOLE, 150, backend=backend)
    assert early  # an agent ended while the other went on, several times


def test_pettingzoo_through_parallel_pettingzoo_env_with_dying_agents_is_rllibs():
    early = step_both(kaz, 300)
    assert len({agents[0] for _, _, agents in early}) >= 2  # archers and knights killed one by one


@pytest.fixture(scope="module")
def native_cartpole():
    return train(ppo_config("native").environment(MultiAgentCartPole, env_config={"num_agents": 2}))


@pytest.mark.parametrize("runner", ["sync", "subproc", "async"])
def test_ppo_on_multi_agent_cartpole_changes_only_env_runner_cls(native_cartpole, runner):
    cls = {"sync": MarlVecEnvRunner, "subproc": MarlVecEnvRunner.with_batch(backend="subproc"),
           "async": MarlVecAsyncEnvRunner}[runner]
    config = ppo_config("native").environment(MultiAgentCartPole, env_config={"num_agents": 2})
    ours = train(config.env_runners(env_runner_cls=cls))
    assert_same_runs(ours, native_cartpole)
    sampled = ours[0]
    assert {agent[0] for chunk in sampled for agent in chunk[4:]} == {0, 1}  # the env's own ids: ints
    lengths = [{agent[0]: len(agent[3]) for agent in chunk[4:]} for chunk in sampled if chunk[3] or chunk[2]]
    assert any(len(set(n.values())) > 1 for n in lengths)  # agents ended at different steps


def test_ppo_on_a_registered_parallel_pettingzoo_env_changes_only_env_runner_cls():
    native = train(ppo_config("native"))
    assert_same_runs(train(ppo_config("native").env_runners(env_runner_cls=MarlVecEnvRunner)), native)


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_creator_and_int_agent_ids_on_both_runners(kind):
    cls = MarlVecEnvRunner if kind == "sync" else MarlVecAsyncEnvRunner
    config = ppo_config("native", num_envs=2).environment(lambda config: MultiAgentCartPole(config),
                                                          env_config={"num_agents": 3})
    config = config.callbacks(on_sample_end=None)  # random actions: no log-probabilities to record
    native, ours = MultiAgentEnvRunner(config=config), cls(config=config.env_runners(env_runner_cls=cls))
    try:
        assert ours.env.envs[0].possible_agents == native.env.envs[0].unwrapped.possible_agents == [0, 1, 2]
        assert list(ours.env.single_action_spaces) == [0, 1, 2]
        episodes = ours.sample(num_episodes=2, random_actions=True)
        assert len(episodes) == 2
        assert all(sorted(ep.agent_episodes) == [0, 1, 2] for ep in episodes)
    finally:
        native.stop()
        ours.stop()


def test_the_registry_takes_an_rllib_env_for_what_it_is_without_importing_ray():
    adapter = as_adapter(MultiAgentCartPole({"num_agents": 2}))
    assert isinstance(adapter, RLlibAdapter)
    assert adapter.spec.agents == ("0", "1") and adapter.agent_ids == (0, 1)
    code = ("import sys, gymnasium as gym; from marl_vec.envs.registry import as_adapter; "
            "as_adapter(gym.make('CartPole-v1')); print('ray' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_without_ray_the_adapter_names_the_rllib_extra():
    code = ("import sys; sys.modules['ray'] = None\n"
            "from marl_vec.envs.rllib import RLlibAdapter\n"
            "try:\n    RLlibAdapter(object())\nexcept ImportError as e:\n    print(e)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "RLlib's MultiAgentEnv" in out.stdout and "pip install 'marl_vec[rllib]'" in out.stdout


class CoachEnv(MultiAgentEnv):
    """A user's RLlib env whose coach never acts and is paid for the players' steps."""

    def __init__(self, config=None):
        super().__init__()
        self.possible_agents = ["player", "coach"]
        self.agents = list(self.possible_agents)
        self.observation_spaces = dict.fromkeys(self.possible_agents, gym.spaces.Box(0, 1, (1,), np.float32))
        self.action_spaces = dict.fromkeys(self.possible_agents, gym.spaces.Discrete(2))

    def reset(self, *, seed=None, options=None):
        return {"player": np.zeros(1, np.float32)}, {}

    def step(self, action_dict):
        return ({"player": np.zeros(1, np.float32)}, {"player": 1.0, "coach": 0.5}, {"__all__": False},
                {"__all__": False}, {})


def test_errors():
    with pytest.raises(ValueError, match="with_batch\\(\\) takes the batch's options"):
        MarlVecEnvRunner.with_batch(env_fn=CARTPOLE)
    with pytest.raises(ValueError, match="'backnd' is not one of marl_vec's"):
        MarlVecEnvRunner.with_batch(backnd="subproc")
    with pytest.raises(TypeError, match="RLlibAdapter wraps an RLlib MultiAgentEnv, not CartPoleEnv"):
        RLlibAdapter(gym.make("CartPole-v1").unwrapped)
    config = ppo_config("native").environment(5)
    with pytest.raises(TypeError, match="config.env must be a registered env name, a MultiAgentEnv class"):
        MarlVecEnvRunner(config=config)
    # A turn-based RLlib env (only the agent to move observes): refused at its first step, by name.
    venv = mv.DummyVecEnv([lambda: PettingZooEnv(connect_four_v3.env())], autoreset="next_step")
    venv.reset(seed=0)
    with pytest.raises(ValueError, match=r"agents \['player_0'\] acted, were not flagged done and have no "
                                         "observation"):
        venv.step(np.zeros((1, 2), dtype=np.int64))
    venv.close()
    # An RLlib example env of the old API stack, which names no possible_agents.
    with pytest.raises(ValueError, match="GuessTheNumberGame: an RLlib MultiAgentEnv needs possible_agents"):
        RLlibAdapter(GuessTheNumberGame({}))
    venv = mv.DummyVecEnv([CoachEnv], autoreset="next_step")
    venv.reset(seed=0)
    with pytest.raises(ValueError, match=r"CoachEnv: rewards \{'coach': 0.5\} for agents that did not act"):
        venv.step(np.zeros((1, 2), dtype=np.int64))
    venv.close()

"""spec.episode_limit is the step limit the env enforces, for every shipped config
(Atari aside: tests/test_atari*.py), as ``marl-vec info`` and ``env_info()`` report
it: PyMARL-style trainers size their episode buffers from it.

Where it is cheap, the env is run to its limit and must end exactly there, truncated.
"""

from __future__ import annotations

import functools
import importlib
import json

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.envs.classic_control import CartPoleEnv

import marl_vec as mv
from marl_vec.tools.cli import main
from marl_vec.tools.config import load_config, shipped_configs
from marl_vec.envs.gym import GymAdapter

# The limit each config's env enforces: gymnasium's TimeLimit, PettingZoo's max_cycles,
# gfootball's game_duration + 1 (its last step comes after game_duration frames), the
# SMAC map's limit (60 steps for 3m, 120 for 8m), a pysc2 mini-game's 120 s timer
# (336 steps at step_mul 8).
ENFORCED = {
    "gym/cartpole": 500,
    "magent2/battle": 100,
    "mpe/simple_adversary": 25,
    "mpe/simple_spread": 25,
    "mpe/simple_tag": 25,
    "pettingzoo/pistonball": 125,
    "sisl/multiwalker": 500,
    "football/academy_3_vs_1_with_keeper": 401,
    "football/academy_counterattack_hard": 401,
    "football/5_vs_5": 3001,
    "football/11_vs_11_stochastic": 3001,
    "sc2/3m": 60,
    "sc2/8m": 120,
    "sc2/defeat_roaches": 336,
    # JaxMARL's max_steps (Hanabi has none); tests/families/test_jaxmarl_family.py checks env_info.
    "smax/3m": 100,
    "smax/8m": 100,
    "smax/2s3z": 100,
    "smax/smacv2_5_units": 100,
    "jax_mpe/simple_spread": 25,
    "jaxmarl/overcooked": 400,
    "jaxmarl/hanabi": None,
    # VMAS's max_steps (a truncation; BenchMARL's task settings).
    "vmas/balance": 100,
    "vmas/transport": 100,
    "vmas/navigation": 100,
    "vmas/wheel": 100,
    "vmas/football": 500,
    # Board and card games end by their rules (no step limit); rps_v2 has max_cycles 15.
    "classic/chess": None,
    "classic/connect_four": None,
    "classic/go_19x19": None,
    "classic/go_9x9": None,
    "classic/hanabi": None,
    "classic/leduc_holdem": None,
    "classic/rps": 15,
    "classic/texas_holdem": None,
    "classic/texas_holdem_no_limit": None,
    "classic/tictactoe": None,
    # LBF's max_episode_steps and RWARE's max_steps, both truncation.
    "lbf/15x15-4p-3f": 50,
    "lbf/8x8-2p-2f-coop": 50,
    "rware/small-4ag": 500,
    "rware/tiny-2ag": 500,
    # Multi-Agent MuJoCo: the robot's TimeLimit (truncation); falling ends earlier, terminated.
    "mamujoco/ant_2x4": 1000,
    "mamujoco/halfcheetah_6x1": 1000,
    "mamujoco/walker2d_2x3": 1000,
    "mamujoco/humanoid_9_8": 1000,
    # Melting Pot: the substrate's maxEpisodeLengthFrames (truncation); most end earlier at random, terminated.
    "meltingpot/commons_harvest__open": 5000,
    "meltingpot/clean_up": 5000,
    "meltingpot/prisoners_dilemma_in_the_matrix__arena": 5000,
    "meltingpot/collaborative_cooking__asymmetric": 1000,
    "meltingpot/territory__rooms": 5000,
    "meltingpot/allelopathic_harvest__open": 2000,
}
SC2 = [name for name in ENFORCED if name.startswith("sc2/")]  # the game is not installed here: a scripted one
# Each JaxMARL config compiles its block (5-20 s): not built here.
JAX = [name for name in ENFORCED if name.split("/")[0] in ("smax", "jax_mpe", "jaxmarl")]
NEEDS_GAME = SC2 + JAX


def test_every_shipped_config_has_its_enforced_limit_listed():
    configs = {name for name in shipped_configs() if not name.startswith("atari/")}
    assert configs == set(ENFORCED), "add the limit a new config's env enforces to ENFORCED"


@pytest.mark.parametrize("name", [n for n in ENFORCED if n not in NEEDS_GAME])
def test_marl_vec_info_reports_the_enforced_limit(name, capsys):
    assert main(["info", name]) == 0
    out = capsys.readouterr().out
    limit = ENFORCED[name]
    assert f"episode_limit  {limit}\n" in out
    assert f'"episode_limit": {json.dumps(limit)}}}' in out  # JSON: null for no limit


def sc2_venv(name: str) -> mv.VecEnv:
    """The config's env, on pysc2's mock game (scripted units) instead of StarCraft II."""
    pytest.importorskip("pysc2", reason="pysc2 is installed by the sc2 extra")
    from tests.families.test_starcraft2 import MARINE, ROACH, Games

    scene = [(1, MARINE, 1, 10.5, 10.5, 45, 45), (2, MARINE, 1, 12.5, 10.5, 45, 45)]
    scene.append((3, ROACH, 4, 30.5, 30.5, 145, 145) if name == "sc2/defeat_roaches"
                 else (3, MARINE, 4, 30.5, 30.5, 45, 45))
    cfg = load_config(name, {"vec.num_envs": 1, "vec.backend": "dummy"}).model_dump(by_alias=True)
    cfg["env"]["kwargs"]["game_factory"] = Games(scene)
    return mv.make(cfg)


def random_available(r: mv.StepResult, rng: np.random.Generator, spec) -> np.ndarray:
    if spec.discrete:
        return np.argmax(r.avail_actions * rng.random(r.avail_actions.shape), axis=-1)
    low, high = np.broadcast_to(spec.action.low, spec.action_shape), np.broadcast_to(spec.action.high, spec.action_shape)
    return rng.uniform(low, high, (1, spec.n_agents, *spec.action_shape)).astype(np.float32)


def balance_the_pole(r: mv.StepResult, rng, spec) -> np.ndarray:
    """Push toward where the pole falls: CartPole then lasts its whole 500 steps."""
    x, x_dot, theta, theta_dot = r.obs[0, 0]
    return np.array([[int(theta + 0.5 * theta_dot + 0.01 * x + 0.1 * x_dot > 0)]])


def run_to_the_limit(venv: mv.VecEnv, policy) -> None:
    """Step one env until its first episode ends: exactly at spec.episode_limit, by truncation."""
    limit = venv.spec.episode_limit
    rng = np.random.default_rng(0)
    r = venv.reset()
    for t in range(1, limit + 1):
        live = r.agent_mask[0].copy()
        r = venv.step(policy(r, rng, venv.spec))
        if r.done[0]:
            break
    assert t == limit and r.done[0], f"the episode ended at step {t}, not at the limit {limit}"
    assert r.truncated[0][live].all(), "every agent alive at the end is cut by the time limit"
    assert r.infos[0]["episode"]["length"] == limit


@pytest.mark.parametrize("name, policy", [
    ("gym/cartpole", balance_the_pole),
    ("mpe/simple_adversary", random_available),
    ("mpe/simple_spread", random_available),
    ("mpe/simple_tag", random_available),
    ("magent2/battle", random_available),
    ("pettingzoo/pistonball", random_available),
    ("mamujoco/halfcheetah_6x1", random_available),  # the cheetah cannot fall: 1,000 steps
])
def test_config_runs_to_its_limit_and_is_truncated_there(name, policy):
    with mv.make(name, num_envs=1, backend="dummy") as venv:
        assert venv.spec.episode_limit == venv.env_info()["episode_limit"] == ENFORCED[name]
        run_to_the_limit(venv, policy)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["football/5_vs_5", "football/11_vs_11_stochastic"])
def test_full_football_match_runs_to_its_limit(name):
    """Full matches end only at the final whistle (goals do not end them): 3001 steps.
    (test_football.py::test_time_limit_truncates_every_agent checks the same rule on a 401-step drill, fast.)"""
    with mv.make(name, num_envs=1, backend="dummy") as venv:
        run_to_the_limit(venv, random_available)


@pytest.mark.parametrize("name", SC2)
def test_sc2_config_reports_and_enforces_the_map_limit(name):
    with sc2_venv(name) as venv:
        assert venv.spec.episode_limit == venv.env_info()["episode_limit"] == ENFORCED[name]
        run_to_the_limit(venv, random_available)


def test_multiwalker_limit_is_its_max_cycles():
    """The shipped config's walkers fall long before 500 steps; a small max_cycles shows the
    rule. (At its limit multiwalker says terminated, not truncated: see the xfail below.)"""
    from pettingzoo.sisl import multiwalker_v9

    with mv.DummyVecEnv([functools.partial(multiwalker_v9.parallel_env, n_walkers=3, max_cycles=6)]) as venv:
        assert venv.spec.episode_limit == 6
        r, rng = venv.reset(), np.random.default_rng(0)
        for t in range(1, 7):
            r = venv.step(np.zeros((1, 3, 4), np.float32))
            assert r.done[0] == (t == 6)
        assert r.infos[0]["episode"]["length"] == 6


@pytest.mark.xfail(strict=True, reason="pettingzoo's multiwalker marks its max_cycles time-out as termination "
                                       "(multiwalker.py: `if frames >= max_cycles: terminations = True`); the "
                                       "PettingZoo adapter passes it on")
def test_multiwalker_time_out_is_truncation():
    from pettingzoo.sisl import multiwalker_v9

    with mv.DummyVecEnv([functools.partial(multiwalker_v9.parallel_env, n_walkers=3, max_cycles=6)]) as venv:
        venv.reset()
        for _ in range(6):
            r = venv.step(np.zeros((1, 3, 4), np.float32))
        assert r.truncated[0].all() and not r.terminated[0].any()


# -- every PettingZoo family that has max_cycles ---------------------------------------------------------


@pytest.mark.parametrize("module, kwargs", [
    ("pettingzoo.butterfly.pistonball_v6", {}),
    ("pettingzoo.butterfly.cooperative_pong_v6", {}),
    ("pettingzoo.butterfly.knights_archers_zombies_v11", {}),
    ("pettingzoo.sisl.pursuit_v5", {}),
    ("magent2.environments.adversarial_pursuit_v4", {"map_size": 20}),
    ("magent2.environments.battlefield_v5", {"map_size": 46}),
    ("magent2.environments.combined_arms_v6", {"map_size": 16}),
    ("magent2.environments.gather_v5", {}),
    ("magent2.environments.tiger_deer_v4", {"map_size": 20}),
    ("mpe2.simple_v3", {}),
    ("mpe2.simple_crypto_v3", {}),
    ("mpe2.simple_push_v3", {}),
    ("mpe2.simple_reference_v3", {}),
    ("mpe2.simple_speaker_listener_v4", {}),
    ("mpe2.simple_world_comm_v3", {}),
])
def test_pettingzoo_max_cycles_is_the_limit(module, kwargs):
    env_fn = functools.partial(importlib.import_module(module).parallel_env, max_cycles=7, **kwargs)
    with mv.DummyVecEnv([env_fn], env_seed=0) as venv:
        assert venv.spec.episode_limit == 7
        run_to_the_limit(venv, random_available)
    # The env's own default where none is given (sisl and cooperative_pong keep it on an inner env).
    default = importlib.import_module(module).parallel_env(**kwargs)
    raw = default.unwrapped
    declared = getattr(raw, "max_cycles", None) or raw.env.max_cycles
    with mv.DummyVecEnv([lambda: default]) as venv:
        assert venv.spec.episode_limit == declared > 0


# -- gymnasium: the TimeLimit that cuts --------------------------------------------------------------------


@pytest.mark.parametrize("make_env, limit", [
    (lambda: gym.make("CartPole-v1", max_episode_steps=30), 30),
    (lambda: gym.make("Pendulum-v1"), 200),
    (lambda: gym.wrappers.TimeLimit(CartPoleEnv(), 40), 40),  # no gym.make: no spec, still a limit
    (lambda: gym.wrappers.TimeLimit(gym.make("CartPole-v1"), 1000), 500),  # the inner TimeLimit cuts first
    (lambda: gym.wrappers.TimeLimit(gym.make("CartPole-v1"), 20), 20),
    (lambda: gym.make("CartPole-v1").env, None),  # taken out of its TimeLimit: the spec still says 500
    (lambda: CartPoleEnv(), None),
], ids=["max_episode_steps", "registered", "TimeLimit without spec", "nested, inner cuts", "nested, outer cuts",
        "TimeLimit removed", "bare env"])
def test_gymnasium_limit_is_the_time_limit_that_cuts(make_env, limit):
    assert GymAdapter(make_env()).spec.episode_limit == limit
    if limit is not None and limit <= 200:
        with mv.DummyVecEnv([make_env]) as venv:
            policy = balance_the_pole if venv.spec.discrete else random_available
            run_to_the_limit(venv, policy)

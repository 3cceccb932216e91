"""The ``meltingpot`` family's conventions: spec, roles, state modes, action names, episode ends,
rendering, seeding, and its errors (scenarios, unknown names, bad options, a missing extra).

Values are checked against the real substrate (``meltingpot.substrate``): its config, the
observations its own timestep holds (the adapter keeps it as ``timestep``).
"""

from __future__ import annotations

import importlib
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("dmlab2d", reason="the meltingpot extra is not installed: pip install 'marl_vec[meltingpot]'")

import marl_vec as mv  # noqa: E402
from marl_vec.envs.meltingpot import ScenarioError, import_substrate, substrates  # noqa: E402
from marl_vec.envs.registry import UnknownEnvError, make_env, make_env_fn  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CHEAP = "collaborative_cooking__asymmetric"


def test_every_substrate_is_served_and_scenarios_are_refused_saying_why():
    assert substrates() == tuple(sorted(import_substrate().SUBSTRATES)) and len(substrates()) == 49
    with pytest.raises(ScenarioError) as err:
        make_env("meltingpot", "clean_up_0")
    msg = str(err.value)
    assert "scenario (substrate clean_up plus bots)" in msg and "saved TensorFlow models" in msg
    assert "use its substrate 'clean_up'" in msg and "from marl_vec.envs.meltingpot import substrates" in msg
    assert "\n" not in msg
    with pytest.raises(UnknownEnvError, match="close matches: clean_up"):
        make_env("meltingpot", "clean_upp")


def test_spec_follows_the_substrate_config():
    config = import_substrate().get_config("commons_harvest__open")
    env = make_env("meltingpot", "commons_harvest__open")
    spec = env.spec
    assert spec.agents == tuple(f"player_{i}" for i in range(7)) and env.roles == config.default_player_roles
    assert {k: (s.shape, s.dtype) for k, s in spec.obs_space.spaces.items()} == {
        "RGB": ((88, 88, 3), np.uint8), "READY_TO_SHOOT": ((), np.float64), "COLLECTIVE_REWARD": ((), np.float64)}
    assert spec.n_actions == config.action_spec.num_values == 8 and spec.episode_limit == 5000
    assert spec.action_names == ("NOOP", "FORWARD", "BACKWARD", "STEP_LEFT", "STEP_RIGHT", "TURN_LEFT",
                                 "TURN_RIGHT", "FIRE_ZAP")
    module = importlib.import_module("meltingpot.configs.substrates.commons_harvest__open")
    assert [getattr(module, name) for name in spec.action_names] == [dict(a) for a in config.action_set]
    assert spec.state_is_obs and spec.stats == ("collective_return",)
    info = mv.make_vec([make_env_fn("meltingpot", "commons_harvest__open")]).env_info()
    assert info["action_names"] == list(spec.action_names) and info["episode_limit"] == 5000
    env.close()


def test_user_roles_and_bad_options_are_named():
    env = make_env("meltingpot", "bach_or_stravinsky_in_the_matrix__repeated", roles=["bach_fan", "bach_fan"])
    assert env.roles == ("bach_fan", "bach_fan") and env.spec.n_agents == 2
    allowed = (r"its roles \['bach_fan', 'default', 'stravinsky_fan'\] "
               r"\(one per player; default \['bach_fan', 'stravinsky_fan'\]\)")
    with pytest.raises(ValueError, match=r"roles must be a non-empty list of " + allowed + r", not \['mozart_fan'\]"):
        make_env("meltingpot", "bach_or_stravinsky_in_the_matrix__repeated", roles=["mozart_fan"])
    with pytest.raises(ValueError, match="max_episode_steps must be an int >= 1, not 0"):
        make_env("meltingpot", CHEAP, max_episode_steps=0)
    with pytest.raises(ValueError, match="unknown state mode 'world'; allowed: auto, env, concat, none"):
        mv.make_vec([make_env_fn("meltingpot", CHEAP)], state="world")


def test_rows_state_modes_render_and_collective_reward_are_the_substrates_own():
    name = "prisoners_dilemma_in_the_matrix__repeated"  # 2 players; RGB, READY_TO_SHOOT, INVENTORY, ...
    fn = make_env_fn("meltingpot", name, {"max_episode_steps": 3})
    with mv.DummyVecEnv([fn, fn], env_seed=0, state="env") as venv:
        adapters = venv.group.adapters
        keys = tuple(venv.spec.obs_space.spaces)
        assert {"RGB", "READY_TO_SHOOT", "COLLECTIVE_REWARD", "INVENTORY", "INTERACTION_INVENTORIES"} == set(keys)
        r = venv.reset()
        world = adapters[0].timestep.observation[0]["WORLD.RGB"]
        assert r.state.shape == (2, *world.shape) and r.state.dtype == np.uint8
        for t in range(3):
            r = venv.step(np.full((2, 2), t + 1))
            for i, adapter in enumerate(adapters):
                if r.done[i]:
                    continue
                players = adapter.timestep.observation
                for key in keys:
                    assert np.array_equal(r.obs[key][i], np.stack([p[key] for p in players])), key
                assert np.array_equal(r.state[i], players[0]["WORLD.RGB"])
                assert np.array_equal(r.reward[i], np.asarray(adapter.timestep.reward, np.float32))
                assert (r.obs["COLLECTIVE_REWARD"][i] == np.sum(adapter.timestep.reward)).all()
        assert r.done.all() and r.truncated.all() and not r.terminated.any()  # the frame limit: a time limit
        frames = venv.render()
        assert np.array_equal(frames[0], adapters[0].timestep.observation[0]["WORLD.RGB"])
    cheap = make_env_fn("meltingpot", CHEAP)
    with mv.DummyVecEnv([cheap], state="none") as venv:
        assert venv.reset().state is None and not venv.spec.has_state
    with mv.DummyVecEnv([cheap], state="concat") as venv:
        r = venv.reset()
        assert r.state["RGB"].shape == (1, 2 * 40 * 40 * 3)
        assert np.array_equal(r.state["RGB"][0], r.obs["RGB"][0].reshape(-1))


def test_an_end_before_the_limit_is_terminated():
    """running_with_scissors one_shot ends once two players have met (long before its 1,000 frames)."""
    fn = make_env_fn("meltingpot", "running_with_scissors_in_the_matrix__one_shot")
    with mv.DummyVecEnv([fn], env_seed=3) as venv:
        venv.reset()
        rng = np.random.default_rng(0)
        for t in range(1, 1001):
            r = venv.step(rng.integers(venv.spec.n_actions, size=(1, 2)))
            if r.done[0]:
                break
        assert r.done[0] and t < 1000 and r.terminated[0].all() and not r.truncated[0].any()


def test_a_seeded_reset_leaves_pythons_random_as_it_was():
    fn = make_env_fn("meltingpot", CHEAP)
    random.seed(123)
    want = [random.random() for _ in range(3)]
    random.seed(123)
    with mv.DummyVecEnv([fn], env_seed=5) as venv:
        venv.reset()
        venv.reset(seed=9)
    assert [random.random() for _ in range(3)] == want


def test_a_missing_library_names_the_extra_and_the_script():
    code = ("import sys; sys.modules['dmlab2d'] = None\n"
            "from marl_vec.envs.registry import make_env\n"
            "try:\n    make_env('meltingpot', 'clean_up')\nexcept ImportError as e:\n    print(type(e).__name__, e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.stdout.startswith("MissingExtraError"), out.stdout + out.stderr
    assert "pip install 'marl_vec[meltingpot]' and then: bash scripts/install/install_meltingpot.sh" in out.stdout


def test_marl_vec_render_makes_a_gif_of_the_worlds(tmp_path):
    pytest.importorskip("PIL", reason="the pictures extra is not installed")
    from PIL import Image

    from marl_vec.tools.cli import main

    out = tmp_path / "kitchen.gif"
    assert main(["render", "meltingpot/collaborative_cooking__asymmetric", "-o", "vec.num_envs=2",
                 "-o", "vec.backend=dummy", "--steps", "3", "--out", str(out), "--no-progress"]) == 0
    with Image.open(out) as gif:
        assert gif.n_frames == 4  # the reset and 3 steps
        assert gif.size[0] > 2 * 40  # two tiles of the world, each larger than a player's 40x40 view

"""The toy 3m battle on pysc2's mock game (marl_vec.envs.starcraft2.mock), through the
StarCraft II family: its scripted dynamics give SMAC's win, loss and reward, and a
``game_factory`` given by name is imported (or refused with the allowed form)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pysc2", reason="pysc2 is installed by the sc2 extra and scripts/install/install_sc2.sh")

import marl_vec as mv  # noqa: E402
from marl_vec.envs.starcraft2 import StarCraft2Env  # noqa: E402
from marl_vec.envs.starcraft2.mock import MOCK_3M  # noqa: E402

CONFIG = {"env": {"family": "starcraft2", "id": "3m", "kwargs": {"game_factory": MOCK_3M}}}


def play(policy: str) -> tuple[int, np.ndarray, dict]:
    """One episode of ``policy``: idle (stop) or focus (each agent attacks the first enemy it may)."""
    venv = mv.make(CONFIG, num_envs=1, backend="dummy")
    try:
        r = venv.reset(seed=0)
        assert r.agent_mask.all() and r.avail_actions[0, :, 6:].any(axis=1).all()  # all in range
        total, steps = np.zeros(3), 0
        while True:
            avail = r.avail_actions[0]
            if policy == "idle":
                a = np.where(avail[:, 1], 1, 0)
            else:
                a = np.array([6 + np.flatnonzero(avail[i, 6:])[0] if avail[i, 6:].any() else 0 for i in range(3)])
            r = venv.step(a[None])
            total += r.reward[0]
            steps += 1
            if r.done[0]:
                return steps, total, r.infos[0]
    finally:
        venv.close()


def test_idle_agents_lose_in_18_steps():
    steps, total, info = play("idle")
    assert steps == 18 and info["battle_won"] is False
    assert (info["dead_allies"], info["dead_enemies"]) == (3, 0)
    np.testing.assert_array_equal(total, 0.0)  # SMAC's reward counts only damage dealt


def test_focused_fire_wins_in_9_steps_with_smacs_full_reward():
    steps, total, info = play("focus")
    assert steps == 9 and info["battle_won"] is True
    assert (info["dead_allies"], info["dead_enemies"]) == (1, 3)
    np.testing.assert_allclose(total, 20.0, rtol=1e-6)  # a perfect episode sums to reward_scale_rate


@pytest.mark.parametrize("name, message", [
    ("marl_vec.envs.starcraft2.mock.MockBattle", "must be 'module:name'"),
    ("marl_vec.envs.starcraft2.mock:Nope", "has no callable 'Nope'"),
])
def test_game_factory_by_name_errors(name, message):
    with pytest.raises(ValueError, match=message):
        StarCraft2Env("3m", game_factory=name)

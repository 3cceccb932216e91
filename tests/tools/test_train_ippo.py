"""scripts/train/train_ippo.py: GAE with truncation bootstrapping, and one training iteration."""

from __future__ import annotations

import csv
import re

import numpy as np
import pytest

import marl_vec as mv
from tests.helpers.scripts import script_module

torch = pytest.importorskip("torch")
mpe2_spread = pytest.importorskip("mpe2.simple_spread_v3")


@pytest.fixture(scope="module")
def ippo():
    with script_module("train_ippo") as module:
        yield module


def test_gae_bootstraps_truncated_and_not_terminated_episodes(ippo):
    # Two envs (columns), four steps, gamma = lam = 0.5, every reward 1, every V(s_t) 2.
    # env 0: its episode is cut by the time limit at t=1; the final state is worth 10.
    # env 1: its episode terminates at t=2; the 99 given as next value must be ignored.
    rewards = np.ones((4, 2))
    values = np.full((4, 2), 2.0)
    next_values = np.array([[2.0, 2.0], [10.0, 2.0], [2.0, 99.0], [4.0, 2.0]])
    terminated = np.array([[0, 0], [0, 0], [0, 1], [0, 0]], bool)
    ended = np.array([[0, 0], [1, 0], [0, 1], [0, 0]], bool)
    adv, ret = ippo.gae(rewards, values, next_values, terminated, ended, gamma=0.5, lam=0.5)
    # env 0 deltas: 0, 1 + 0.5*10 - 2 = 4, 0, 1 + 0.5*4 - 2 = 1
    #   adv: t3 = 1, t2 = 0 + 0.25*1, t1 = 4 (episode end: nothing carried back), t0 = 0 + 0.25*4
    # env 1 deltas: 0, 0, 1 + 0 - 2 = -1 (terminal: no bootstrap), 0
    #   adv: t3 = 0, t2 = -1, t1 = 0.25*-1, t0 = 0.25*-0.25
    expected = np.array([[1.0, -0.0625], [4.0, -0.25], [0.25, -1.0], [1.0, 0.0]])
    np.testing.assert_array_equal(adv, expected)
    np.testing.assert_array_equal(ret, expected + 2.0)


def test_gae_keeps_agent_axes(ippo):
    shape = (3, 2, 4)  # T, E, A
    adv, ret = ippo.gae(np.ones(shape), np.zeros(shape), np.zeros(shape), np.zeros(shape, bool),
                        np.zeros(shape, bool), gamma=1.0, lam=1.0)
    np.testing.assert_array_equal(adv[:, 0, 0], [3.0, 2.0, 1.0])
    assert adv.shape == ret.shape == shape


def test_collect_bootstraps_from_the_final_state_not_the_reset_state(ippo):
    # 2 envs, 30 steps: every episode of simple_spread ends at step 25 (index 24).
    E, seed = 2, 4
    with mv.make("mpe/simple_spread", num_envs=E, env_seed=seed) as venv:
        trainer = ippo.Trainer(venv, ippo.Hyper(rollout_steps=30), seed=0)
        trainer.collect()
        b = trainer.buf
    assert b.ended[24].all() and not b.ended[:24].any() and not b.ended[25:].any()
    assert not b.terminated.any()  # the time limit truncates
    # Within an episode the next state is the state of the next step ...
    np.testing.assert_array_equal(b.next_state[:24], b.state[1:25])
    np.testing.assert_array_equal(b.next_state[25:29], b.state[26:30])
    # ... at its end it is the final state, which a plain loop over the native env reaches.
    assert not np.array_equal(b.next_state[24], b.state[25])
    for e in range(E):
        env = mpe2_spread.parallel_env(N=3, max_cycles=25, continuous_actions=False)
        env.reset(seed=seed + e)
        agents = list(env.possible_agents)
        for t in range(25):
            env.step({a: int(b.actions[t, e, i]) for i, a in enumerate(agents)})
        np.testing.assert_array_equal(b.next_state[24, e], env.state())
        env.close()
    assert len(trainer.returns) == E and trainer.env_steps == 30 * E


def test_one_update_changes_the_policy(ippo):
    with mv.make("mpe/simple_spread", num_envs=2) as venv:
        trainer = ippo.Trainer(venv, ippo.Hyper(rollout_steps=10, epochs=1), seed=0)
        before = [p.detach().clone() for p in trainer.net.parameters()]
        trainer.collect()
        stats = trainer.update()
    assert all(np.isfinite(v) for v in stats.values())
    assert any(not torch.equal(a, p) for a, p in zip(before, trainer.net.parameters()))


def test_episodes_are_recorded_with_battle_won_where_the_family_reports_it(ippo):
    returns, wins = [], []
    ippo.record_episodes([{}, {"episode": {"return": 1.5, "battle_won": 1.0}}, {"episode": {"return": -2}}],
                         returns, wins)
    assert returns == [1.5, -2.0] and wins == [1.0]


def test_one_training_iteration_end_to_end(ippo, tmp_path, capsys):
    plot, log = tmp_path / "curve.png", tmp_path / "log.csv"
    baseline, final = ippo.main(["--iterations", "2", "--num-envs", "2", "--random-episodes", "2",
                                 "--rollout-steps", "25", "--no-progress", "--plot", str(plot), "--log", str(log)])
    lines = capsys.readouterr().out.strip().splitlines()
    assert re.fullmatch(r"random_return=-?\d+\.\d\d final_return=-?\d+\.\d\d", lines[-1])
    assert lines[-1] == f"random_return={baseline:.2f} final_return={final:.2f}"
    assert lines[-2].startswith("trained 2 iterations, 100 env-steps, 4 episodes")
    assert baseline < 0 and final < 0
    assert plot.stat().st_size > 0
    # One row before training and one per iteration, in the columns plot_log.py reads; MPE has no battle_won.
    with open(log, newline="") as f:
        rows = list(csv.DictReader(f))
    assert tuple(rows[0]) == ippo.LOG_COLUMNS
    assert [(r["iteration"], r["frames"], r["episodes"]) for r in rows] == [("0", "0", "0"), ("1", "50", "2"),
                                                                          ("2", "100", "4")]
    assert float(rows[2]["last100_return"]) == pytest.approx(final, abs=1e-4)
    assert float(rows[0]["random_return"]) == pytest.approx(baseline, abs=1e-4)
    assert rows[2]["last100_win"] == rows[2]["random_win"] == ""
    assert float(rows[2]["load1"]) >= 0 and float(rows[2]["seconds"]) > 0


def test_bad_flags_are_refused(ippo, capsys):
    with pytest.raises(SystemExit):
        ippo.main(["--hp", "learning_rate=1"])
    assert "NAME one of rollout_steps, gamma" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        ippo.main(["--minutes", "0"])
    assert "--minutes must be > 0" in capsys.readouterr().err

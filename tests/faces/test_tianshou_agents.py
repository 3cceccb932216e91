"""The Tianshou face's agent axis (``agents="axis"``) and its training script.

Runs in .venv-tianshou (scripts/install/install_tianshou_venv.sh); skipped where tianshou is
not installed.

- Every step of the face equals the VecEnv's own step with the same actions and
  seeds (mpe2 simple_spread with its 25-step episodes, LBF with per-agent rewards
  and goals): observations, available actions, agent mask, per-agent rewards,
  an env's end as terminated or truncated, the final observation at the end, then
  the next episode's first observation from ``reset(env_id)``.
- Tianshou's Collector stores the axis as given.
- scripts/train_with/tianshou_train.py runs both of its tasks.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import marl_vec as mv

pytest.importorskip("tianshou", reason="tianshou runs in its own venv: bash scripts/install/install_tianshou_venv.sh")

import tianshou as ts  # noqa: E402
from tianshou.algorithm.algorithm_base import Policy  # noqa: E402
from tianshou.data import Batch, CollectStats  # noqa: E402

from marl_vec.compat.tianshou import TianshouVectorEnv  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = [pytest.param("mpe/simple_spread", {}, id="simple_spread"),
           pytest.param("lbf/8x8-2p-2f-coop", {"max_episode_steps": 15}, id="lbf")]


@pytest.mark.parametrize("config, kwargs", CONFIGS)
def test_every_step_equals_the_vecenvs_own(config, kwargs):
    if config.startswith("lbf"):
        pytest.importorskip("lbforaging")
    cfg = mv.load_config(config).model_dump(by_alias=True)
    cfg["env"]["kwargs"].update(kwargs)
    n = 3
    face = TianshouVectorEnv(mv.make(cfg, num_envs=n, env_seed=None), agents="axis")
    ref = mv.make(cfg, num_envs=n, env_seed=None)
    face.seed(4)
    first = ref.reset(seed=4)
    obs, info = face.reset()  # a second reset, as Tianshou's Collector does after seed()
    second = ref.reset()
    np.testing.assert_array_equal(obs.obs, second.obs)
    assert not np.array_equal(first.obs, second.obs)
    rng = np.random.default_rng(1)
    ends = 0
    for t in range(60):
        avail = second.avail_actions if t == 0 else r.avail_actions
        acts = np.stack([[rng.choice(np.flatnonzero(avail[i, a])) for a in range(avail.shape[1])] for i in range(n)])
        got_obs, rew, term, trunc, info = face.step(acts)
        r = ref.step(acts)
        np.testing.assert_array_equal(rew, r.reward)
        np.testing.assert_array_equal(term | trunc, r.done)
        np.testing.assert_array_equal(trunc, r.done & r.truncated.any(1))
        np.testing.assert_array_equal(got_obs.agent_mask, np.where(r.done[:, None], True, r.agent_mask))
        for i in range(n):
            want = r.final_obs[i] if r.done[i] else r.obs[i]
            np.testing.assert_array_equal(got_obs.obs[i], want, err_msg=f"env {i} step {t}")
            if not r.done[i]:
                np.testing.assert_array_equal(got_obs.mask[i], r.avail_actions[i])
            assert info[i]["env_id"] == i and "episode" not in info[i]
        done = np.flatnonzero(term | trunc).tolist()
        if done:
            ends += len(done)
            new_obs, _ = face.reset(done)
            np.testing.assert_array_equal(new_obs.obs, r.obs[done])  # the next episode's first observation
    assert ends >= n
    face.close()
    ref.close()


class MaskedRandomPolicy(Policy):
    """Each agent picks uniformly among its available actions (Tianshou's RandomActionPolicy
    takes only Discrete and Box spaces, not the axis's MultiDiscrete)."""

    def forward(self, batch, state=None, **kwargs):
        mask = np.asarray(batch.obs.mask)
        act = (np.random.default_rng(0).random(mask.shape) * mask).argmax(-1)
        return Batch(act=act, state=state)


def test_collector_stores_the_agent_axis():
    face = TianshouVectorEnv(mv.make("mpe/simple_spread", num_envs=2, env_seed=None), agents="axis")
    face.seed(0)
    policy = MaskedRandomPolicy(action_space=face.action_space[0], action_scaling=False, action_bound_method=None)
    collector = ts.data.Collector[CollectStats](policy, face, ts.data.VectorReplayBuffer(200, 2))
    collector.reset()
    stats = collector.collect(n_episode=3)
    assert stats.n_collected_episodes == 3
    batch, _ = collector.buffer.sample(10)
    assert batch.obs.obs.shape == (10, 3, 18) and batch.rew.shape == (10, 3) and batch.act.shape == (10, 3)
    assert np.asarray(stats.returns).shape == (3, 3)  # per episode, per agent
    face.close()


@pytest.mark.slow
@pytest.mark.parametrize("argv", [["spread", "--iterations", "3", "--num-envs", "2"],
                                  ["ppo", "--epochs", "1", "--epoch-steps", "1024", "--num-envs", "2"]],
                         ids=["spread", "ppo"])
def test_train_with_script_runs(argv):
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "train_with" / "tianshou_train.py"), *argv],
                         capture_output=True, text=True, timeout=900, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1].startswith("first_return=")

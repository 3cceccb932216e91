"""Every VMAS scenario the family serves equals VMAS stepped by hand, bit for bit, with both kinds of actions.

The matrix: every scenario of :data:`marl_vec.envs.vmas.catalog.SERVED` x
(Discrete, Box) actions, a DummyVecEnv of ``K`` envs against
:class:`tests.helpers.vmas_reference.Reference` (one VMAS batch of ``K``, the same seeds
and actions): obs, state, avail actions, agent mask, rewards, terminated,
truncated, done and, where an episode ended, the true last observation, over
``STEPS`` steps with ``max_steps=4`` (so several episodes per env end, and
every env is reset by ``reset_at`` with its own seed several times).

The fast selection is the five scenarios shipped as configs and MPE's
simple_spread; the others are ``slow`` (sampling and road_traffic take 5-12 s to
build a VMAS env here, road_traffic has 20 agents).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("vmas", reason="the vmas extra is not installed: pip install 'marl_vec[vmas]'")

import marl_vec as mv  # noqa: E402
from marl_vec.envs.registry import make_env_fn  # noqa: E402
from marl_vec.envs.vmas.catalog import SERVED  # noqa: E402
from tests.helpers.vmas_reference import Reference  # noqa: E402

K = 3
STEPS = 10
FAST = ("balance", "transport", "navigation", "wheel", "football", "simple_spread")


def random_actions(rng: np.random.Generator, spec: mv.EnvSpec, n_envs: int, avail: np.ndarray | None) -> np.ndarray:
    """Random actions in each agent's own range (Discrete: an available one; Box: within its bounds)."""
    if spec.discrete:
        return (rng.random(avail.shape) * avail).argmax(-1)
    low = np.where(np.isfinite(spec.action.low), spec.action.low, 0.0)
    high = np.where(np.isfinite(spec.action.high), spec.action.high, 0.0)
    shape = (n_envs, spec.n_agents, *spec.action.shape)
    return rng.uniform(np.broadcast_to(low, shape[1:]), np.broadcast_to(high, shape[1:]), shape).astype(np.float32)


def own_avail(ref: Reference, n_envs: int, width: int) -> np.ndarray:
    """Each agent's own Discrete actions available, the padding ones not (from VMAS's spaces)."""
    sizes = [space.n for space in ref.blocks[0].env.action_space.spaces]
    return np.broadcast_to(np.arange(width) < np.array(sizes)[:, None], (n_envs, len(sizes), width))


def compare(env_id: str, kwargs: dict, n_envs: int, block_sizes: list[int], backend: str = "dummy",
            steps: int = STEPS, seed: int = 11) -> int:
    """Steps the family and the reference side by side; returns how many episodes ended."""
    fn = make_env_fn("vmas", env_id, kwargs)
    extra = {"num_workers": len(block_sizes)} if backend == "subproc" else {}
    rng = np.random.default_rng(5)
    ended = 0
    with mv.make_vec([fn] * n_envs, backend=backend, env_seed=seed, **extra) as venv:
        spec = venv.spec
        ref = Reference(env_id, kwargs, block_sizes, seed)
        r = venv.reset()
        if spec.discrete:
            np.testing.assert_array_equal(r.avail_actions, own_avail(ref, n_envs, spec.n_actions))
        else:
            assert r.avail_actions is None
        np.testing.assert_array_equal(r.obs, ref.reset(), err_msg=f"{env_id}: reset obs")
        np.testing.assert_array_equal(r.state, r.obs.reshape(n_envs, -1), err_msg=f"{env_id}: state")
        assert r.agent_mask.all()
        for t in range(steps):
            actions = random_actions(rng, spec, n_envs, r.avail_actions)
            r = venv.step(actions)
            expected = ref.step(actions)
            where = f"{env_id} {kwargs} step {t}"
            for field in ("obs", "reward", "terminated", "truncated", "done"):
                np.testing.assert_array_equal(getattr(r, field), expected[field], err_msg=f"{where}: {field}")
            np.testing.assert_array_equal(r.state, r.obs.reshape(n_envs, -1), err_msg=f"{where}: state")
            for i in np.flatnonzero(r.done):
                ended += 1
                np.testing.assert_array_equal(r.final_obs[i], expected["final_obs"][i], err_msg=f"{where}: final_obs")
                np.testing.assert_array_equal(r.final_state[i], expected["final_obs"][i].ravel(), err_msg=where)
                assert r.infos[i]["episode"]["length"] <= kwargs.get("max_steps", 10**9)
    return ended


CASES = [(name, continuous) for name in SERVED for continuous in (False, True)]


def _marks(name: str) -> list:
    return [] if name in FAST else [pytest.mark.slow]


@pytest.mark.parametrize("name,continuous", [pytest.param(n, c, marks=_marks(n), id=f"{n}-{'box' if c else 'discrete'}")
                                             for n, c in CASES])
def test_scenario_equals_vmas_by_hand(name, continuous):
    ended = compare(name, {"continuous_actions": continuous, "max_steps": 4}, K, [K])
    assert ended >= 2 * K  # every env ended (and was reset with its own seed) at least twice

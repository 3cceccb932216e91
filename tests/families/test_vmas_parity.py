"""The VMAS family equals VMAS stepped by hand on DummyVecEnv and SubprocVecEnv, and its seeds reproduce.

:func:`tests.families.test_vmas_breadth.compare` steps the family beside
:class:`tests.helpers.vmas_reference.Reference` (a VMAS batch per block of envs, stepped
by hand with the same seeds and actions) and compares every field bit for bit,
final observations included. Here: longer runs (several episodes per env, the
shipped configs' scenarios), SubprocVecEnv (one VMAS batch per worker, started
by forkserver or spawn once torch runs threads), reseeding single envs, and what
reproducibility holds (see :mod:`marl_vec.envs.vmas`): the same seeds and actions
give the same results on every run and backend for the same split into batches,
and for scenarios that draw random numbers only at reset, for any split.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("vmas", reason="the vmas extra is not installed: pip install 'marl_vec[vmas]'")

import marl_vec as mv  # noqa: E402
from marl_vec.envs.registry import make_env_fn  # noqa: E402
from tests.families.test_vmas_breadth import compare, random_actions  # noqa: E402
from tests.helpers.vmas_reference import Reference  # noqa: E402


@pytest.mark.parametrize("env_id,kwargs", [
    ("balance", {"max_steps": 12, "continuous_actions": False}),
    ("simple_speaker_listener", {"max_steps": 7, "continuous_actions": True}),  # padded obs and Box actions
])
def test_dummy_equals_vmas_by_hand_over_several_episodes(env_id, kwargs):
    assert compare(env_id, kwargs, 4, [4], steps=40) >= 4 * 3


@pytest.mark.parametrize("env_id,kwargs", [
    ("transport", {"max_steps": 6, "continuous_actions": True}),
    ("football", {"max_steps": 6, "continuous_actions": False}),
])
def test_subproc_equals_vmas_by_hand_one_batch_per_worker(env_id, kwargs):
    assert compare(env_id, kwargs, 6, [3, 3], backend="subproc", steps=14) >= 6 * 2


def _run(backend: str, env_id: str, kwargs: dict, n_envs: int, seed: int, steps: int = 12, **extra) -> list:
    rng = np.random.default_rng(1)
    fn = make_env_fn("vmas", env_id, kwargs)
    with mv.make_vec([fn] * n_envs, backend=backend, env_seed=seed, **extra) as venv:
        out = [venv.reset().obs]
        for _ in range(steps):
            r = venv.step(_actions(rng, venv, n_envs))
            out += [r.obs, r.reward, r.done]
    return out


def _actions(rng: np.random.Generator, venv: mv.VecEnv, n_envs: int) -> np.ndarray:
    avail = None
    if venv.spec.discrete:
        avail = np.ones((n_envs, venv.spec.n_agents, venv.spec.n_actions), dtype=bool)
    return random_actions(rng, venv.spec, n_envs, avail)


def test_same_seeds_same_results_on_every_run_and_backend():
    kwargs = {"max_steps": 5, "continuous_actions": True}
    first = _run("dummy", "wheel", kwargs, 4, seed=3)
    again = _run("dummy", "wheel", kwargs, 4, seed=3)
    other = _run("dummy", "wheel", kwargs, 4, seed=4)
    in_one_worker = _run("subproc", "wheel", kwargs, 4, seed=3, num_workers=1)
    for a, b, c in zip(first, again, in_one_worker):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)
    assert not np.array_equal(first[0], other[0])


@pytest.mark.parametrize("env_id", ["balance", "navigation"])
def test_scenarios_random_only_at_reset_give_the_same_episodes_for_any_split(env_id):
    """Dummy (one batch of 4) and Subproc (two batches of 2): env i plays the same episodes."""
    kwargs = {"max_steps": 5, "continuous_actions": False}
    whole = _run("dummy", env_id, kwargs, 4, seed=9)
    split = _run("subproc", env_id, kwargs, 4, seed=9, num_workers=2)
    for a, b in zip(whole, split):
        np.testing.assert_array_equal(a, b)


def test_reset_with_a_seed_reseeds_single_envs():
    fn = make_env_fn("vmas", "balance", {"max_steps": 50})
    with mv.DummyVecEnv([fn] * 3, env_seed=0) as venv:
        first = venv.reset().obs.copy()
        venv.step(np.zeros((3, 3, 2), np.float32))
        r = venv.reset(seed=0)  # every env back to its first episode
        np.testing.assert_array_equal(r.obs, first)
        venv.step(np.zeros((3, 3, 2), np.float32))
        r = venv.reset(seed=1, env_ids=[0])  # env 0 gets seed 1: env 1's first episode
        np.testing.assert_array_equal(r.obs[0], first[1])
        r = venv.reset(env_ids=[2])  # no seed: env 2's next episode, not its first
        assert not np.array_equal(r.obs[2], first[2])
        ref = Reference("balance", {"max_steps": 50}, [3], 0)
        ref.reset()
        block = ref.blocks[0]
        with block.active():  # by hand: env 2's second episode (seeded 2)
            np.testing.assert_array_equal(r.obs[2], block._reset([2])[2])


def test_vmas_used_by_hand_beside_the_family_is_not_disturbed():
    """Each batch draws from its own copy of VMAS's process-wide random state: plain VMAS used
    directly in the same process gives what it gives alone (football's AI draws noise each step)."""
    import torch
    import vmas

    kwargs = {"max_steps": 30, "continuous_actions": False}

    def by_hand(beside: mv.VecEnv | None) -> list[np.ndarray]:
        env = vmas.make_env("football", num_envs=2, seed=0, continuous_actions=False, max_steps=30)
        out = [o.numpy().copy() for o in env.reset(seed=0)]
        for _ in range(6):
            if beside is not None:
                beside.step(np.zeros((2, 3), dtype=np.int64))
            out += [o.numpy().copy() for o in env.step([torch.zeros((2, 1), dtype=torch.int64)] * 3)[0]]
        return out

    alone = by_hand(None)
    with mv.DummyVecEnv([make_env_fn("vmas", "football", kwargs)] * 2, env_seed=5) as venv:
        venv.reset()
        for a, b in zip(alone, by_hand(venv)):
            np.testing.assert_array_equal(a, b)


def test_workers_beside_torch_threads_start_by_forkserver():
    """A process that ran a VMAS batch, once torch's thread pool runs (a large enough op starts
    it; VMAS's own ops do on large batches), starts workers by forkserver: torch is not forked."""
    code = (
        "import torch; torch.set_num_threads(2)\n"
        "import numpy as np, marl_vec as mv\n"
        "from marl_vec.envs.registry import make_env_fn\n"
        "from marl_vec.vec.subproc.lifecycle import default_start_method\n"
        "venv = mv.DummyVecEnv([make_env_fn('vmas', 'wheel', {'max_steps': 10})] * 64, env_seed=0)\n"
        "venv.reset(); venv.step(np.zeros((64, 4, 2), np.float32))\n"
        "torch.ones(1 << 20).add_(1)\n"
        "print(default_start_method())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "forkserver"


@pytest.mark.parametrize("env_id,kwargs", [
    ("balance", {"max_steps": 5, "continuous_actions": False, "batched_reset": True}),
    ("transport", {"max_steps": 4, "continuous_actions": True, "batched_reset": True}),
])
def test_batched_reset_equals_vmas_by_hand(env_id, kwargs):
    """batched_reset: the whole batch's resets are one env.reset(seed=...); autoresets stay per env."""
    assert compare(env_id, kwargs, 4, [4], steps=12) >= 4 * 2


def test_batched_reset_on_subproc_one_batch_per_worker():
    kwargs = {"max_steps": 4, "continuous_actions": False, "batched_reset": True}
    assert compare("navigation", kwargs, 4, [2, 2], backend="subproc", steps=10) >= 4 * 2


def test_batched_reset_one_call_for_the_whole_batch_per_env_otherwise():
    fn = make_env_fn("vmas", "balance", {"max_steps": 50, "batched_reset": True})
    per_env = make_env_fn("vmas", "balance", {"max_steps": 50})
    with mv.DummyVecEnv([fn] * 3, env_seed=0) as venv, mv.DummyVecEnv([per_env] * 3, env_seed=0) as plain:
        first = venv.reset().obs.copy()
        assert not np.array_equal(first, plain.reset().obs)  # another contract: the batch's seed, not each env's
        np.testing.assert_array_equal(venv.reset(seed=0).obs, first)  # the same seeds again: the same batch
        ref = Reference("balance", {"max_steps": 50}, [3], 0)  # a subset resets per env, on its own chain
        ref.reset()
        block = ref.blocks[0]
        block.episodes = [1, 1, 1]  # reset(seed=0) restarted each env's chain, then one whole-batch reset
        with block.active():
            block.env.seed(0)  # any state: reset_at reseeds
            expected = block._reset([1])[1]
        np.testing.assert_array_equal(venv.reset(env_ids=[1]).obs[1], expected)


def test_batched_reset_must_be_a_bool():
    with pytest.raises(ValueError, match="batched_reset must be true or false, got 'yes'"):
        make_env_fn("vmas", "balance", {"batched_reset": "yes"})()

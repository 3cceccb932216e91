"""One kernel, two forms: marl_vec.jax's batch equals the stateful ``jaxmarl`` family, bit for bit.

``batch.reset(jax.random.PRNGKey(s))`` gives env ``i`` the episodes of env ``i`` of a
stateful batch with ``env_seed=s``: the same actions (those of the by-hand runs,
:func:`tests.helpers.jax_batch_runs.run`, whose functional batches are compiled once per
session) are replayed through DummyVecEnv, and, ``slow``, SubprocVecEnv with forkserver
workers (JAX is never forked; spawn is ``matrix``), and every field is compared: obs,
state, avail, mask, reward, terminated and truncated apart, done, ``final_*`` where an
episode ended, and the episode summary (length and family stats exact, returns to
1e-5: float32 sums here, float64 there). The stateful family serves ``same_step`` and
``disabled``; the other modes are compared with JaxMARL by hand (test_batch_by_hand.py).
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers.jaxmarl_reference import K  # first: it sets XLA_FLAGS before JAX starts

pytest.importorskip("jaxmarl", reason="the jax extra is not installed: pip install 'marl_vec[jax]'")

import marl_vec as mv  # noqa: E402
from marl_vec.core.group import EnvFinishedError  # noqa: E402
from marl_vec.envs.registry import make_env_fn  # noqa: E402
from tests.helpers.jax_batch_runs import SEED, at, run  # noqa: E402

MPE = ("jax_mpe/simple_spread", (), "same_step", (), 60)
SMAX = ("smax/3m", (), "same_step", (), 120)
BOX = ("jax_mpe/simple_spread", (("action_type", "Continuous"),), "same_step", (), 60)


def same_result(r: mv.StepResult, ts, where: str, final: bool = True) -> None:
    """Every field of the stateful result equals the TimeStep's, bit for bit."""
    for name in ("obs", "state", "avail_actions", "agent_mask", "reward", "terminated", "truncated", "done"):
        mine = getattr(r, name)
        if mine is None:
            assert getattr(ts, name) is None, f"{where}: {name}"
            continue
        np.testing.assert_array_equal(mine, getattr(ts, name), err_msg=f"{where}: {name}")
        assert mine.dtype == getattr(ts, name).dtype, f"{where}: {name} {mine.dtype} {getattr(ts, name).dtype}"
    if not final:
        return
    done = r.done
    for name in ("final_obs", "final_state", "final_avail_actions"):
        if getattr(r, name) is not None:
            np.testing.assert_array_equal(getattr(r, name)[done], getattr(ts, name)[done], err_msg=f"{where}: {name}")
    np.testing.assert_array_equal(ts.episode.valid, done, err_msg=where)
    for i in np.flatnonzero(done):
        summary = r.infos[i]["episode"]
        assert summary["length"] == ts.episode.length[i], where
        np.testing.assert_allclose(summary["agent_returns"], ts.episode.agent_returns[i], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(summary["return"], ts.episode.team_return[i], rtol=1e-5, atol=1e-5)
        for name, values in ts.episode.stats.items():
            assert summary[name] == values[i], f"{where}: {name}"


def replay(case: tuple, backend: str = "dummy", **options) -> int:
    """The case's actions through a stateful batch with env_seed=SEED; every step compared. Returns the ends."""
    r = run(*case)
    env_id, kwargs = case[0], dict(case[1])
    fns = [make_env_fn("jaxmarl", env_id, kwargs)] * K
    ends = 0
    with mv.make_vec(fns, backend=backend, env_seed=SEED, **options) as venv:
        assert venv.spec == r.model.spec or venv.spec.obs_shape == r.model.spec.obs_shape
        same_result(venv.reset(), r.ts0, f"{env_id} reset", final=False)
        for t, actions in enumerate(r.actions):
            result = venv.step(actions)
            same_result(result, at(r.steps, t), f"{env_id} {backend} step {t}")
            ends += int(result.done.sum())
    return ends


@pytest.mark.parametrize("case", [MPE, SMAX, BOX], ids=["mpe", "smax", "box_mpe"])
def test_batch_equals_the_stateful_family_on_dummy(case):
    assert replay(case) > K


# One worker holds the K envs: a block of K, the functional batch's shape. XLA's CPU code depends on
# the shape: the stateful family itself, in blocks of 2 and of 4, gave SMAX 3m observations 1.3e-8
# apart (22 of 450 values after 5 steps; measured with the tests' XLA flags), so blocks of 2 in two
# workers would not equal a batch of 4 bit for bit. MPE and Box MPE agree in blocks of 2 (spawn).
@pytest.mark.slow  # a forkserver worker imports JAX and compiles its block
def test_batch_equals_the_stateful_family_in_a_forkserver_worker():
    assert replay(SMAX, "subproc", num_workers=1, start_method="forkserver") > K


@pytest.mark.exhaustive
@pytest.mark.parametrize("case", [MPE, BOX], ids=["mpe", "box_mpe"])
def test_batch_equals_the_stateful_family_in_spawned_workers(case):
    assert replay(case, "subproc", num_workers=2, start_method="spawn") > K


def test_disabled_mode_equals_the_stateful_family_up_to_the_first_end():
    """The stateful ``disabled`` mode raises when a finished env is stepped; the functional one (the same as
    ``one_episode`` inside jit: its run is shared) freezes it. Up to the first end they are one batch."""
    r = run("jax_mpe/simple_spread", (), "one_episode", (), 40)
    with mv.DummyVecEnv([make_env_fn("jaxmarl", "jax_mpe/simple_spread")] * K, env_seed=SEED,
                        autoreset="disabled") as venv:
        same_result(venv.reset(), r.ts0, "reset", final=False)
        for t, actions in enumerate(r.actions):
            result = venv.step(actions)
            same_result(result, at(r.steps, t), f"disabled step {t}")
            if result.done.any():
                break
        assert result.done.all() and t == 25  # JaxMARL MPE's episodes: 26 steps (max_steps=25, counted from 0)
        with pytest.raises(EnvFinishedError):
            venv.step(r.actions[t + 1])
    assert at(r.steps, t + 1).done[result.done].all()  # the functional batch: finished envs stay done

"""marl_vec.jax's functional batch under ``lax.scan`` equals JaxMARL stepped by hand, bit for bit, in every mode.

Each case runs :func:`tests.helpers.jax_batch_runs.run`: JaxMARL's own ``reset`` and
``step_env`` with the family's key chain and the mode written out on the host
(:mod:`tests.helpers.jax_modes_reference`), then the batch in one jitted reset + scan
with the same actions; :func:`tests.helpers.jax_batch_runs.check` compares obs, state,
avail, mask, rewards, dones, flags (a time limit: truncated, not terminated), the true
last views (final_*), ``autoreset``, the episode's ``valid`` flag, length and returns
(float32 sums against float64 ones: 1e-5), at every step, through several episode ends.

Compiles: one per case (5-20 s idle, up to a minute loaded), the envs' functions of
the reference once per env id. The fast selection is MPE simple_spread in every mode
(its episodes of 26 steps all end together: 4 envs, 2 resets per step exercise the
optimistic mode's shared resets), SMAX 3m (deaths, masks, avail, battle ends at
different steps) and Box MPE in ``same_step``; two more MPE cases are ``slow``, and SMAX's
and Box MPE's other modes are ``matrix`` (``python -m pytest -m matrix tests/jax``).
"""

from __future__ import annotations

import pytest

from tests.helpers.jaxmarl_reference import K  # first: it sets XLA_FLAGS before JAX starts

pytest.importorskip("jaxmarl", reason="the jax extra is not installed: pip install 'marl_vec[jax]'")

from tests.helpers.jax_batch_runs import check, run  # noqa: E402

MPE = ("jax_mpe/simple_spread", ())
SMAX = ("smax/3m", ())
BOX = ("jax_mpe/simple_spread", (("action_type", "Continuous"),))
LIMIT = (("gamma", 0.9), ("time_limit", 10))
# Not in the default selection (setup.cfg's addopts): 17-31 s of compiling each, cold, at load 12-15.
MATRIX = (pytest.mark.exhaustive,)

CASES = [
    pytest.param(*MPE, "same_step", (), 60, id="mpe-same_step"),
    pytest.param(*MPE, "next_step", (), 60, id="mpe-next_step"),
    pytest.param(*MPE, "one_episode", (), 40, id="mpe-one_episode"),
    pytest.param(*MPE, "disabled", (), 40, id="mpe-disabled", marks=pytest.mark.slow),
    pytest.param(*MPE, "fast", (), 60, id="mpe-fast"),
    pytest.param(*MPE, "same_step", (("resets_per_step", 2),), 60, id="mpe-optimistic"),
    pytest.param(*MPE, "same_step", LIMIT, 40, id="mpe-time_limit-gamma"),
    pytest.param(*MPE, "next_step", LIMIT, 40, id="mpe-next_step-time_limit", marks=pytest.mark.slow),
    pytest.param(*SMAX, "same_step", (), 120, id="smax-same_step"),
    pytest.param(*SMAX, "next_step", (), 120, id="smax-next_step", marks=MATRIX),
    pytest.param(*SMAX, "one_episode", (), 120, id="smax-one_episode", marks=MATRIX),
    pytest.param(*SMAX, "fast", (), 120, id="smax-fast", marks=MATRIX),
    pytest.param(*SMAX, "same_step", (("resets_per_step", 1),), 120, id="smax-optimistic", marks=MATRIX),
    pytest.param(*SMAX, "same_step", LIMIT, 60, id="smax-time_limit-gamma", marks=MATRIX),
    pytest.param(*BOX, "same_step", (), 60, id="box_mpe-same_step"),
    pytest.param(*BOX, "next_step", (), 60, id="box_mpe-next_step", marks=MATRIX),
]


@pytest.mark.parametrize("env_id,kwargs,mode,options,steps", CASES)
def test_batch_under_scan_equals_jaxmarl_by_hand(env_id, kwargs, mode, options, steps):
    r = run(env_id, kwargs, mode, options, steps)
    ends = check(r)
    # Every env ends at least once (one_episode: exactly once), so resets and final views were compared.
    assert ends >= (K if mode in ("one_episode", "disabled") else K + 1)
    if mode in ("one_episode", "disabled"):
        assert ends == K and r.steps.done[-1].all()
    if dict(options).get("resets_per_step") and env_id == MPE[0]:
        # All 4 envs end together (step 26) with 2 resets per step: envs 2 and 3 start as 0 and 1 do.
        t = int(r.steps.done[:, 0].argmax())
        assert r.steps.done[t].all()
        assert (r.steps.obs[t, 2] == r.steps.obs[t, 0]).all() and (r.steps.obs[t, 3] == r.steps.obs[t, 1]).all()
    if mode == "fast":  # every episode starts as the first one did
        t = int(r.steps.done[:, 0].argmax())
        ended = r.steps.done[t]
        assert (r.steps.obs[t][ended] == r.ts0.obs[ended]).all()

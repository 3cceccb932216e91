"""The breadth matrix of the JaxMARL family: every env id it serves, a few steps, equals JaxMARL by hand.

The ids come from the catalogue (:mod:`marl_vec.envs.jaxmarl.catalog`), not from a
list kept here: every SMAX map as ``smax/<map>``, every MPE scenario not left out
as ``jax_mpe/<scenario>`` (its ``MPE_*`` id is the same env: checked by ``resolve``
without compiling it again), and every other served ``jaxmarl.make`` id (``SMAX``
and ``HeuristicEnemySMAX`` without a map: 5 random units a side). A newly
served id is tested without touching this file.

Each id runs :func:`tests.helpers.jaxmarl_reference.compare` on DummyVecEnv for ``STEPS``
steps (MPE episodes end at 25, so their autoreset and final views are compared too);
the long runs over several episodes, and SubprocVecEnv, are
tests/families/test_jaxmarl_parity.py's. Compile time is what costs, not stepping: each id
compiles the family's step and reset and the reference's functions. Measured here
with the machine loaded by other jobs (load average 19-30), all 30 ids passing:
8-220 s per id (SMAX maps 23-220 s, MPE 21-199 s, hanabi/overcooked/coin_game 67-151 s);
under ``nice`` at load ~30 a SMAX map took up to 10 minutes. So: every test uses blocks of ``K`` envs and the envs' default kwargs,
the parity tests' shapes, and JAX's persistent cache (~/.cache/marl_vec/jax)
compiles each id once per machine; the fast selection is the ids whose functions
the parity tests compile anyway (``FAST``) and the check that the cases cover the
catalogue; every other id is ``slow`` and ``matrix`` (left out of the default selection
and CI's run, 10-60 s of compiling each; ``python -m pytest -m matrix`` runs them), with a
longer timeout.
"""

from __future__ import annotations

import pytest

from tests.helpers.jaxmarl_reference import (
    compare,  # first: it sets XLA_FLAGS before JAX starts
)

pytest.importorskip("jaxmarl", reason="the jax extra is not installed: pip install 'marl_vec[jax]'")

from marl_vec.envs.jaxmarl.catalog import (  # noqa: E402
    LEFT_OUT,
    MABRAX,
    MPE_IDS,
    SERVED,
    SMAX_MAPS,
    resolve,
)

STEPS = 30
FAST = ("smax/3m", "jax_mpe/simple_spread")  # compiled by tests/families/test_jaxmarl_parity.py's fast tests too
# Not in the default selection (setup.cfg's addopts): `python -m pytest -m matrix tests/families/test_jaxmarl_breadth.py`.
SLOW = (pytest.mark.exhaustive, pytest.mark.timeout(1800))
# Served only with discrete actions, which their defaults are not (catalog.SERVED's "*").
KWARGS = {"MPE_simple_world_comm_v3": {"action_type": "Discrete"},
          # The kwargs of tests/families/test_jaxmarl_box.py, so that its functions are compiled once.
          "jaxnav": {"max_steps": 20},
          **{make_id: {"episode_length": 20} for make_id in MABRAX}}


def served_cases() -> list:
    """``pytest.param(env_id, kwargs)`` for every id the family serves, once per distinct env."""
    ids = [(f"smax/{name}", {}) for name in SMAX_MAPS]
    ids += [(f"jax_mpe/{name}", KWARGS.get(make_id, {})) for name, make_id in MPE_IDS.items() if make_id not in LEFT_OUT]
    ids += [(entry.rstrip("*"), KWARGS.get(entry.rstrip("*"), {})) for entry in SERVED
            if not entry.startswith("MPE_")]  # MPE: the jax_mpe/ ids above
    return [pytest.param(env_id, kwargs, id=env_id, marks=() if env_id in FAST else SLOW) for env_id, kwargs in ids]


def test_the_cases_cover_every_served_id():
    served = {entry.rstrip("*") for entry in SERVED}
    covered = {resolve(case.values[0])[0] for case in served_cases()}
    assert covered == served
    assert {name for name in MPE_IDS if MPE_IDS[name] not in LEFT_OUT} <= {
        case.values[0].split("/", 1)[1] for case in served_cases() if case.values[0].startswith("jax_mpe/")}
    assert {f"smax/{name}" for name in SMAX_MAPS} <= {case.values[0] for case in served_cases()}


@pytest.mark.parametrize("env_id,kwargs", served_cases())
def test_every_served_id_equals_jaxmarl_by_hand(env_id, kwargs):
    compare(env_id, kwargs, STEPS, "dummy")

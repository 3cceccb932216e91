"""Every Melting Pot substrate through the family, bit for bit against what its own substrate returned.

One env per substrate (DummyVecEnv, WORLD.RGB as the state), episodes of 2 steps, 3 steps: a
reset, an episode end (final_obs, final_state, truncated) and the reset after it (which rebuilds
the world). Each row's digest must be the one of the timestep its substrate returned
(tests/helpers/meltingpot_reference.py), and the adapter checks at its first build that the
substrate's player observations are the ones its spec promised. The substrates whose world
takes more than ~0.5 s to build (chemistry's reaction graphs, the big maps) are ``matrix``:
``python -m pytest -m matrix tests/families/test_meltingpot_breadth.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("dmlab2d", reason="the meltingpot extra is not installed: pip install 'marl_vec[meltingpot]'")

import marl_vec as mv  # noqa: E402
from marl_vec.envs.meltingpot import substrates  # noqa: E402
from tests.helpers.meltingpot_reference import RecorderFn, actions_for, row_digest  # noqa: E402

# Built in more than ~0.5 s each (measured on 2 cores: 0.6-4.9 s; the others 0.03-0.4 s).
HEAVY = {"chemistry__three_metabolic_cycles", "chemistry__three_metabolic_cycles_with_plentiful_distractors",
         "chemistry__two_metabolic_cycles", "chemistry__two_metabolic_cycles_with_distractors",
         "fruit_market__concentric_rivers", "territory__rooms", "territory__open", "territory__inside_out",
         "boat_race__eight_races", "predator_prey__open", "predator_prey__alley_hunt", "predator_prey__orchard",
         "predator_prey__random_forest", "allelopathic_harvest__open", "coop_mining", "daycare",
         # built in 0.4-0.5 s, and the slowest of the rest in this test (3-5 s on a loaded machine)
         "factory_commons__either_or", "externality_mushrooms__dense"}


def _params() -> list:
    try:
        names = substrates()
    except ImportError:  # pragma: no cover - the extra is half installed
        return []
    assert HEAVY <= set(names)
    return [pytest.param(n, id=n, marks=(pytest.mark.exhaustive,) if n in HEAVY else ()) for n in names]


@pytest.mark.parametrize("name", _params())
def test_substrate_rows_are_its_own_timesteps(name):
    with mv.DummyVecEnv([RecorderFn(name, with_world=True, max_episode_steps=2)], env_seed=1, state="env") as venv:
        spec = venv.spec
        keys = tuple(spec.obs_space.spaces)
        assert "RGB" in keys and "COLLECTIVE_REWARD" in keys and len(spec.action_names) == spec.n_actions
        r = venv.reset()
        want = [row_digest(keys, r, 0, "reset")]
        for t in range(3):
            r = venv.step(actions_for(spec.n_actions, spec.n_agents, 0, t)[None])
            if r.done[0]:
                assert t == 1 and r.truncated[0].all()
                want += [row_digest(keys, r, 0, "final"), row_digest(keys, r, 0, "reset")]
            else:
                want.append(row_digest(keys, r, 0, "step"))
            assert np.array_equal(r.obs["COLLECTIVE_REWARD"][0],
                                  np.full(spec.n_agents, r.obs["COLLECTIVE_REWARD"][0, 0]))
        assert venv.get_attr("log")[0] == want

"""What the StarCraft II adapter costs per step, next to the game call it wraps.

The game binary is not available here, so the "game" is pysc2's mock
(``SC2TestEnv``) turning one 8m ``ResponseObservation`` (8 marines against 8)
into pysc2's observation each step with pysc2's own ``features.transform_obs``,
which is what ``SC2Env`` does on top of the game. The baseline is that pysc2
loop alone; the adapter adds reading raw units, SMAC observations, state,
available actions, reward and raw actions. The game's own simulation (several
milliseconds per step at step_mul 8) is in neither, so the ratio is a worst case.

    python scripts/bench/benchmark_sc2.py --steps 2000 --envs 4
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from marl_vec.envs.sc2_compat import import_pysc2

import_pysc2()
from pysc2.env import environment, mock_sc2_env  # noqa: E402
from pysc2.lib import actions as pysc2_actions  # noqa: E402
from pysc2.tests import dummy_observation  # noqa: E402
from s2clientprotocol import common_pb2  # noqa: E402

import marl_vec as mv  # noqa: E402
from marl_vec.envs.starcraft2 import StarCraft2Env  # noqa: E402


class FixedGame(mock_sc2_env.SC2TestEnv):
    """The mock game, always returning one 8m scene."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.episode_length = float("inf")
        resp = dummy_observation.Builder(self.observation_spec()[0]).game_loop(0).build()
        for k in range(16):
            mine = k < 8
            resp.observation.raw_data.units.add(
                tag=k + 1, unit_type=48, alliance=1 if mine else 4, owner=1 if mine else 2,
                pos=common_pb2.Point(x=100.5 + (k % 8), y=100.5 + (0 if mine else 5), z=0),
                radius=0.375, health=45, health_max=45, is_on_screen=True, display_type=1)
        self.response = resp
        self.next_timestep = [self._timestep()]

    def _timestep(self) -> environment.TimeStep:
        obs = self._features[0].transform_obs(self.response)
        return environment.TimeStep(environment.StepType.MID, 0.0, 1.0, obs)

    def step(self, actions, step_mul=None):
        self.next_timestep = [self._timestep()]  # pysc2's per-step observation work
        return super().step(actions, step_mul)


def raw_loop(n_envs: int, steps: int) -> float:
    sc2_env = import_pysc2()
    aif = sc2_env.AgentInterfaceFormat(use_raw_units=True, use_raw_actions=True, raw_resolution=256,
                                       action_space=sc2_env.ActionSpace.RAW)
    games = [FixedGame(map_name="8m", players=[sc2_env.Agent(sc2_env.Race.terran)], agent_interface_format=aif)
             for _ in range(n_envs)]
    for g in games:
        g.reset()
    noop = [pysc2_actions.RAW_FUNCTIONS.no_op()]
    start = time.perf_counter()
    for _ in range(steps):
        for g in games:
            g.step([noop])
    return steps * n_envs / (time.perf_counter() - start)


def adapter_loop(n_envs: int, steps: int) -> float:
    fns = [lambda: StarCraft2Env("8m", game_factory=FixedGame) for _ in range(n_envs)]
    with mv.DummyVecEnv(fns, env_seed=0) as venv:
        r = venv.reset()
        rng = np.random.default_rng(0)
        start = time.perf_counter()
        for _ in range(steps):
            avail = r.avail_actions
            # a random available action per agent
            scores = rng.random(avail.shape) * avail
            r = venv.step(scores.argmax(-1))
        return steps * n_envs / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--envs", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=None, help="ignored: this suite runs a fixed number of steps")
    args = parser.parse_args(argv)
    raw = raw_loop(args.envs, args.steps)
    adapted = adapter_loop(args.envs, args.steps)
    print(f"pysc2 alone (mock)     {raw:10.0f} env-steps/s  ({1e6 / raw:.0f} us per env-step)")
    print(f"StarCraft2Env, 8m      {adapted:10.0f} env-steps/s  ({1e6 / adapted:.0f} us per env-step)")
    print(f"ratio                  {raw / adapted:10.2f}x the time of pysc2 alone (game simulation excluded)")


if __name__ == "__main__":
    main()

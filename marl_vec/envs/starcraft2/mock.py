"""A toy 3m battle on pysc2's mock game, for examples and CI where StarCraft II is absent.

This is NOT the game. pysc2's ``mock_sc2_env.SC2TestEnv`` runs no simulation; alone it
shows no units at all. `MockBattle` feeds it a fixed SMAC-3m-like scene (3 of
our marines against 3 enemy marines, all within shooting range, on pysc2's 256x256
mock map) and these toy dynamics, so that the adapter's observations, available
actions, SMAC reward, kills, win and loss are all exercised:

- nobody moves: move and stop commands are accepted and ignored;
- each of our marines ordered to ``Attack_unit`` deals 6 damage (a marine's) to its target;
- every 2nd step, each live enemy marine deals 6 damage to our live marine with the
  lowest tag (a scripted bot that focuses fire);
- a unit at 0 health is removed; the battle is won when no enemy is left, lost when
  none of ours is. Idling loses in 18 steps; all three firing at one enemy after
  another wins in 9 (SMAC's reward then sums to 20); a battle that drags on is cut at
  3m's limit of 60 steps.

It is game-free and deterministic (no seed matters). Pass it as the adapter's
``game_factory``, by object or by name (a string works from YAML and PyMARL's
``env_args``, and pickles for subproc workers)::

    env = StarCraft2Env("3m", game_factory="marl_vec.envs.starcraft2.mock:MockBattle")
    # or: mv.make("sc2/3m", env_kwargs={"game_factory": MOCK_3M})

Imports: pysc2 (via `pysc2_shim`) and ``s2clientprotocol`` when a battle is made.
"""

from __future__ import annotations

from typing import Any

from marl_vec.envs.starcraft2.pysc2_shim import import_pysc2

MOCK_3M = "marl_vec.envs.starcraft2.mock:MockBattle"
MARINE = 48
DAMAGE, HEALTH = 6.0, 45.0
ENEMY_FIRE_EVERY = 2
# (tag, alliance 1=ours 4=enemy, x, y): two lines 4 world units apart, within range 6.
SCENE_3M = ((1, 1, 10.5, 9.5), (2, 1, 10.5, 11.5), (3, 1, 10.5, 13.5),
            (4, 4, 14.5, 9.5), (5, 4, 14.5, 11.5), (6, 4, 14.5, 13.5))


def MockBattle(**kwargs: Any) -> Any:
    """A new toy 3m battle on pysc2's mock game; ``kwargs`` are ``SC2Env``'s (as the adapter passes)."""
    return _battle_class()(**kwargs)


_CLASS: list[type] = []


def _battle_class() -> type:
    """The mock battle's class, built on first use (pysc2 is an optional dependency)."""
    if _CLASS:
        return _CLASS[0]
    import_pysc2()
    from pysc2.env import environment, mock_sc2_env
    from pysc2.lib import actions as sc2_actions
    from pysc2.tests import dummy_observation
    from s2clientprotocol import common_pb2

    attack_id = sc2_actions.RAW_FUNCTIONS.Attack_unit.id

    class _MockBattle(mock_sc2_env.SC2TestEnv):
        def __init__(self, **kw: Any):
            super().__init__(**kw)
            self.episode_length = float("inf")  # the battle ends it, not the mock's timer
            self.health: dict[int, float] = {}
            self.steps = 0

        def _observe(self) -> Any:
            resp = dummy_observation.Builder(self.observation_spec()[0]).game_loop(self.steps).build()
            for tag, alliance, x, y in SCENE_3M:
                if self.health.get(tag, 0.0) > 0:
                    resp.observation.raw_data.units.add(
                        tag=tag, unit_type=MARINE, alliance=alliance, owner=1 if alliance == 1 else 2,
                        pos=common_pb2.Point(x=x, y=y, z=0), radius=0.375, health=self.health[tag],
                        health_max=HEALTH, is_on_screen=True, display_type=1)
            self.observation = self._features[0].transform_obs(resp)
            return self.observation

        def _alive(self, alliance: int) -> list[int]:
            return [t for t, a, _, _ in SCENE_3M if a == alliance and self.health[t] > 0]

        def reset(self) -> Any:
            self.health = {tag: HEALTH for tag, *_ in SCENE_3M}
            self.steps = 0
            self.next_timestep = [environment.TimeStep(environment.StepType.MID, 0.0, 1.0, self._observe())]
            self._episode_steps = 0
            return mock_sc2_env.SC2TestEnv.step(self, [None])  # the mock's FIRST timestep

        def step(self, actions: Any, step_mul: Any = None) -> Any:
            self.steps += 1
            damage: dict[int, float] = {}
            for call in actions[0]:
                if call.function == attack_id:
                    cmd = self._features[0].transform_action(self.observation, call, skip_available=True)
                    target = cmd.action_raw.unit_command.target_unit_tag
                    damage[target] = damage.get(target, 0.0) + DAMAGE * len(cmd.action_raw.unit_command.unit_tags)
            ours = self._alive(1)
            if ours and self.steps % ENEMY_FIRE_EVERY == 0:
                damage[ours[0]] = damage.get(ours[0], 0.0) + DAMAGE * len(self._alive(4))
            for tag, d in damage.items():
                if tag in self.health:
                    self.health[tag] = max(self.health[tag] - d, 0.0)
            over = not self._alive(1) or not self._alive(4)
            step_type = environment.StepType.LAST if over else environment.StepType.MID
            self.next_timestep = [environment.TimeStep(step_type, 0.0, 1.0, self._observe())]
            return super().step(actions, step_mul)

        def close(self) -> None:
            pass

    _CLASS.append(_MockBattle)
    return _MockBattle

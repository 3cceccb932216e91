"""SMAC's action layout, and its translation into pysc2 raw calls.

Actions are ``[no-op, stop, move N, move S, move E, move W, attack enemy j...]``:
`N_ACTIONS_NO_ATTACK` fixed ones, then one per enemy slot. Which of them
are available is a feature (`features`); here they become the calls the
game is sent. Imports: `units` (pysc2's action functions are passed in).

Example::

    calls = raw_calls(np.array([2, 0, 6]), roster.allies, roster.enemies,
                      game.pysc2.actions.RAW_FUNCTIONS, move_amount=2.0,
                      raw_scale=game.raw_scale, map_y=game.map_y)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from marl_vec.envs.starcraft2.units import UnitSlots

N_ACTIONS_NO_ATTACK = 6  # no-op, stop, move N, S, E, W


def raw_calls(actions: np.ndarray, allies: UnitSlots, enemies: UnitSlots, funcs: Any, *,
              move_amount: float, raw_scale: float, map_y: float) -> list[Any]:
    """The pysc2 raw function calls (``funcs``: ``pysc2.lib.actions.RAW_FUNCTIONS``) for one step's actions.

    A dead agent's action and the no-op send nothing; with nothing to send, one ``no_op``.
    """
    s = raw_scale
    calls = []
    for i in range(allies.n):
        act = int(actions[i])
        if not allies.alive[i] or act == 0:
            continue  # no-op: a dead agent's action is ignored
        unit = int(allies.raw_index[i])
        if act == 1:
            calls.append(funcs.Stop_quick("now", unit))
        elif act < N_ACTIONS_NO_ATTACK:
            dx, dy = ((0, 1), (0, -1), (1, 0), (-1, 0))[act - 2]
            x = allies.x[i] + dx * move_amount
            y = allies.y[i] + dy * move_amount
            # pysc2 maps a raw point to the centre of its pixel: -0.5 lands on (x, y) itself.
            calls.append(funcs.Move_pt("now", unit, (x * s - 0.5, (map_y - y) * s - 0.5)))
        else:
            j = act - N_ACTIONS_NO_ATTACK
            calls.append(funcs.Attack_unit("now", unit, int(enemies.raw_index[j])))
    return calls or [funcs.no_op()]

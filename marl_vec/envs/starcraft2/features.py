"""SMAC's features: per-agent observation, global state and available actions.

`SmacFeatures` knows the feature sizes of a map and writes all agents'
features at once into views of the adapter's buffer row, with scratch arrays
allocated once in `SmacFeatures.bind`: no per-step array data. Distances
and offsets are divided by the sight range, health by its maximum, state
positions are relative to the map centre over the map size. Imports: numpy,
`maps`, `units`, `actions` (the action layout).

Example::

    features = SmacFeatures(MAPS["3m"])
    features.obs_size, features.state_size     # (30, 48)
    features.bind(row)
    features.write(row, roster.allies, roster.enemies, last_action,
                   map_size=(game.map_x, game.map_y), bounds=game.bounds)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from marl_vec.envs.starcraft2.actions import N_ACTIONS_NO_ATTACK
from marl_vec.envs.starcraft2.maps import MapInfo
from marl_vec.envs.starcraft2.units import UnitSlots


class SmacFeatures:
    """The feature layout of one map, and the writer of obs, state, avail_actions and agent_mask.

    Args:
        info: the map.
        obs_last_action, obs_agent_id, state_last_action: SMAC's optional features.
        sight_range, shoot_range, move_amount: SMAC's 9, 6 and 2 world units.
    """

    def __init__(self, info: MapInfo, *, obs_last_action: bool = False, obs_agent_id: bool = False,
                 state_last_action: bool = True, sight_range: float = 9.0, shoot_range: float = 6.0,
                 move_amount: float = 2.0):
        self.obs_last_action, self.obs_agent_id, self.state_last_action = obs_last_action, obs_agent_id, state_last_action
        self.sight_range, self.shoot_range, self.move_amount = sight_range, shoot_range, move_amount
        A, E = info.n_agents, info.n_enemies
        self.n_agents, self.n_enemies = A, E
        self.n_actions = N_ACTIONS_NO_ATTACK + E
        self.type_bits = len(info.unit_types)
        self.shield_ally, self.shield_enemy = int(info.ally_shields), int(info.enemy_shields)
        self.enemy_feats = 5 + self.shield_enemy + self.type_bits
        self.ally_feats = 5 + self.shield_ally + self.type_bits + (self.n_actions if obs_last_action else 0)
        self.own_feats = 1 + self.shield_ally + self.type_bits + (A if obs_agent_id else 0) + (
            self.n_actions if obs_last_action else 0)
        self.obs_size = 4 + E * self.enemy_feats + (A - 1) * self.ally_feats + self.own_feats
        self.ally_state = 4 + self.shield_ally + self.type_bits
        self.enemy_state = 3 + self.shield_enemy + self.type_bits
        self.state_size = A * self.ally_state + E * self.enemy_state + (A * self.n_actions if state_last_action else 0)

    def bind(self, row: Any) -> None:
        """Views of ``row``'s obs and state per feature group, and the scratch arrays of a step."""
        A, E, nA = self.n_agents, self.n_enemies, self.n_actions
        assert row.avail_actions is not None  # discrete actions: the buffers have avail_actions
        self._avail: np.ndarray = row.avail_actions
        obs = row.obs
        k = 4
        self._obs_enemy = obs[:, k:k + E * self.enemy_feats].reshape(A, E, self.enemy_feats)
        k += E * self.enemy_feats
        self._obs_ally = obs[:, k:k + (A - 1) * self.ally_feats].reshape(A, A - 1, self.ally_feats)
        self._obs_own = obs[:, k + (A - 1) * self.ally_feats:]
        st = row.state
        self._st_ally = st[:A * self.ally_state].reshape(A, self.ally_state)
        self._st_enemy = st[A * self.ally_state:A * self.ally_state + E * self.enemy_state].reshape(E, self.enemy_state)
        self._st_last = st[A * self.ally_state + E * self.enemy_state:]
        # others[i]: the allies agent i observes, in slot order without itself.
        self._others = np.array([[j for j in range(A) if j != i] for i in range(A)], np.int64).reshape(A, A - 1)
        f64 = np.float64
        self._e = {n: np.zeros((A, E), f64) for n in ("dx", "dy", "dist", "tmp")}
        self._e_vis = np.zeros((A, E), bool)
        self._a = {n: np.zeros((A, A - 1), f64) for n in ("dx", "dy", "dist", "tmp", "ox", "oy")}
        self._a_vis = np.zeros((A, A - 1), bool)
        self._a_alive_o = np.zeros((A, A - 1), bool)
        self._a_last = np.zeros((A, A - 1, nA), np.float32)
        self._frac = {n: np.zeros(n_, f64) for n, n_ in (("ahp", A), ("ash", A), ("ehp", E), ("esh", E), ("acd", A))}
        self._move = np.zeros(A, f64)
        self._move_ok = np.zeros(A, bool)
        self._eye = np.eye(A, dtype=np.float32)

    @staticmethod
    def _fraction(value: np.ndarray, maximum: np.ndarray, out: np.ndarray) -> np.ndarray:
        out.fill(0.0)
        return np.divide(value, maximum, out=out, where=maximum > 0)

    def write(self, row: Any, allies: UnitSlots, enemies: UnitSlots, last_action: np.ndarray, *,
              map_size: tuple[float, float], bounds: tuple[float, float, float, float]) -> None:
        """Write the row's obs, agent_mask, avail_actions and state from the units (``row``: the bound one)."""
        self._write_obs(row, allies, enemies, last_action, bounds)
        self._write_state(allies, enemies, last_action, map_size)

    def _write_avail(self, a: UnitSlots, e: UnitSlots, bounds: tuple[float, float, float, float]) -> None:
        """SMAC's rules: dead -> no-op only; live -> stop, feasible moves, enemies in range."""
        avail = self._avail
        alive = a.alive
        np.logical_not(alive, out=avail[:, 0])
        np.copyto(avail[:, 1], alive)
        x0, y0, x1, y1 = bounds
        m = self.move_amount / 2  # SMAC checks half a move ahead
        for k, (coord, step, lo, hi) in enumerate(((a.y, m, y0, y1), (a.y, -m, y0, y1), (a.x, m, x0, x1), (a.x, -m, x0, x1))):
            np.add(coord, step, out=self._move)
            out = avail[:, 2 + k]
            np.greater_equal(self._move, lo, out=out)
            np.less(self._move, hi, out=self._move_ok)
            out &= self._move_ok
            out &= alive
        attack = avail[:, N_ACTIONS_NO_ATTACK:]
        np.less_equal(self._e["dist"], self.shoot_range, out=attack)
        attack &= e.alive
        attack &= alive[:, None]

    def _write_obs(self, row: Any, a: UnitSlots, e: UnitSlots, last_action: np.ndarray,
                   bounds: tuple[float, float, float, float]) -> None:
        sight, alive = self.sight_range, a.alive
        row.obs.fill(0)
        np.copyto(row.agent_mask, alive)
        # Agent-to-enemy geometry.
        ed = self._e
        np.subtract(e.x, a.x[:, None], out=ed["dx"])
        np.subtract(e.y, a.y[:, None], out=ed["dy"])
        np.hypot(ed["dx"], ed["dy"], out=ed["dist"])
        self._write_avail(a, e, bounds)
        avail = self._avail
        row.obs[:, 0:4] = avail[:, 2:6]
        vis = self._e_vis
        np.less(ed["dist"], sight, out=vis)
        vis &= e.alive
        vis &= alive[:, None]
        f, tmp = self._obs_enemy, ed["tmp"]
        np.logical_and(avail[:, N_ACTIONS_NO_ATTACK:], vis, out=f[..., 0], casting="unsafe")
        for col, name in ((1, "dist"), (2, "dx"), (3, "dy")):
            np.multiply(ed[name], vis, out=tmp)
            np.divide(tmp, sight, out=f[..., col], casting="unsafe")
        np.multiply(vis, self._fraction(e.health, e.health_max, self._frac["ehp"]), out=f[..., 4], casting="unsafe")
        if self.shield_enemy:
            np.multiply(vis, self._fraction(e.shield, e.shield_max, self._frac["esh"]), out=f[..., 5], casting="unsafe")
        if self.type_bits:
            b = 5 + self.shield_enemy
            np.multiply(e.onehot, vis[:, :, None], out=f[..., b:b + self.type_bits], casting="unsafe")
        # Agent-to-ally geometry: others[i] are the allies agent i sees, in slot order.
        ad, others = self._a, self._others
        np.take(a.x, others, out=ad["ox"])
        np.take(a.y, others, out=ad["oy"])
        np.subtract(ad["ox"], a.x[:, None], out=ad["dx"])
        np.subtract(ad["oy"], a.y[:, None], out=ad["dy"])
        np.hypot(ad["dx"], ad["dy"], out=ad["dist"])
        avis = self._a_vis
        np.less(ad["dist"], sight, out=avis)
        np.take(alive, others, out=self._a_alive_o)
        avis &= self._a_alive_o
        avis &= alive[:, None]
        f, tmp = self._obs_ally, ad["tmp"]
        np.copyto(f[..., 0], avis)
        for col, name in ((1, "dist"), (2, "dx"), (3, "dy")):
            np.multiply(ad[name], avis, out=tmp)
            np.divide(tmp, sight, out=f[..., col], casting="unsafe")
        hp = self._fraction(a.health, a.health_max, self._frac["ahp"])
        sh = self._fraction(a.shield, a.shield_max, self._frac["ash"]) if self.shield_ally else None
        np.take(hp, others, out=tmp)
        np.multiply(tmp, avis, out=f[..., 4], casting="unsafe")
        b = 5
        if sh is not None:
            np.take(sh, others, out=tmp)
            np.multiply(tmp, avis, out=f[..., 5], casting="unsafe")
            b = 6
        if self.type_bits:
            for t in range(self.type_bits):
                np.take(a.onehot[:, t], others, out=tmp)
                np.multiply(tmp, avis, out=f[..., b + t], casting="unsafe")
            b += self.type_bits
        if self.obs_last_action:
            np.take(last_action, others, axis=0, out=self._a_last)
            np.multiply(self._a_last, avis[:, :, None], out=f[..., b:b + self.n_actions])
        # Own features.
        own = self._obs_own
        np.multiply(hp, alive, out=own[:, 0], casting="unsafe")
        b = 1
        if sh is not None:
            np.multiply(sh, alive, out=own[:, 1], casting="unsafe")
            b = 2
        if self.type_bits:
            np.multiply(a.onehot[:, :self.type_bits], alive[:, None], out=own[:, b:b + self.type_bits], casting="unsafe")
            b += self.type_bits
        if self.obs_agent_id:
            np.multiply(self._eye, alive[:, None], out=own[:, b:b + self.n_agents])
            b += self.n_agents
        if self.obs_last_action:
            np.multiply(last_action, alive[:, None], out=own[:, b:b + self.n_actions])

    def _write_state(self, a: UnitSlots, e: UnitSlots, last_action: np.ndarray, map_size: tuple[float, float]) -> None:
        # Uses the health and shield fractions _write_obs left in self._frac.
        f = self._st_ally
        alive = a.alive
        np.multiply(self._frac["ahp"], alive, out=f[:, 0], casting="unsafe")
        np.multiply(a.cooldown, alive, out=f[:, 1], casting="unsafe")
        _write_centred(f, 2, a, alive, map_size, self._frac["acd"])
        b = 4
        if self.shield_ally:
            np.multiply(self._frac["ash"], alive, out=f[:, 4], casting="unsafe")
            b = 5
        if self.type_bits:
            np.multiply(a.onehot[:, :self.type_bits], alive[:, None], out=f[:, b:b + self.type_bits], casting="unsafe")
        f, ealive = self._st_enemy, e.alive
        np.multiply(self._frac["ehp"], ealive, out=f[:, 0], casting="unsafe")
        _write_centred(f, 1, e, ealive, map_size, self._frac["esh"])
        b = 3
        if self.shield_enemy:
            self._fraction(e.shield, e.shield_max, self._frac["esh"])
            np.multiply(self._frac["esh"], ealive, out=f[:, 3], casting="unsafe")
            b = 4
        if self.type_bits:
            np.multiply(e.onehot[:, :self.type_bits], ealive[:, None], out=f[:, b:b + self.type_bits], casting="unsafe")
        if self.state_last_action:
            self._st_last[:] = last_action.reshape(-1)


def _write_centred(out: np.ndarray, col: int, units: UnitSlots, alive: np.ndarray, map_size: tuple[float, float],
                   scratch: np.ndarray) -> None:
    """Units' x and y from the map's centre, in map sizes, zero where dead, into ``out[:, col]`` and
    ``out[:, col + 1]`` (the state's position features, the same for allies and enemies)."""
    map_x, map_y = map_size
    for c, coord, centre, size in ((col, units.x, map_x / 2, map_x), (col + 1, units.y, map_y / 2, map_y)):
        np.subtract(coord, centre, out=scratch)
        scratch /= size
        np.multiply(scratch, alive, out=out[:, c], casting="unsafe")

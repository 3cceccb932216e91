"""OpponentSeat: a turn-based batch as a single-agent one, against a fixed opponent.

Single-agent faces (:class:`~marl_vec.compat.SB3VecEnv`,
:class:`~marl_vec.compat.GymVectorEnv`) serve a turn-based game (``spec.turn_based``)
through this wrapper: the learner holds one seat, every other seat is played by
``opponent``, a callable ``opponent(obs, avail) -> moves`` over the rows of the envs
where an opponent is to move (``obs`` that agent's observations, ``avail`` its legal
moves, ``(n, n_actions)`` bool; returns ``n`` moves). The default,
:class:`RandomLegal`, plays a uniformly random legal move.

After ``reset()`` and after every ``step()``, the learner is to move in every env:
the wrapper steps the batch with the opponent's moves where the opponent is to move,
while the learner's envs wait (``WAIT``, :mod:`marl_vec.vec.turns`). One learner step
is the learner's move plus the opponent's answers; its reward is what the learner got
over them (the -1 of a game the opponent won comes with the opponent's winning move).
At a game's end, ``final_obs``/``final_avail_actions`` are the learner's last view and
``infos[i]["episode"]`` has the learner's return, its moves as the length and the
winner statistics. Needs autoreset ``same_step`` (or ``fast``).

Example:
    >>> import marl_vec as mv
    >>> from marl_vec.envs.registry import make_env_fn
    >>> venv = mv.make_vec([make_env_fn("pettingzoo", "pettingzoo.classic.tictactoe_v3")] * 2)
    >>> seat = OpponentSeat(venv, seat="player_2")   # the learner moves second
    >>> r = seat.reset()
    >>> r.obs.shape, bool(r.acting.all())
    ((2, 1, 3, 3, 2), True)
    >>> seat.close()
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

import numpy as np

from marl_vec.core.spec import DiscreteAction
from marl_vec.vec.base import StepResult, VecEnv
from marl_vec.vec.turns import WAIT

Opponent = Callable[[Any, np.ndarray], Any]


class RandomLegal:
    """The default opponent: a uniformly random legal move, from its own seeded generator."""

    def __init__(self, seed: int | None = 0):
        self.rng = np.random.default_rng(seed)

    def __call__(self, obs: Any, avail: np.ndarray) -> np.ndarray:
        return np.array([self.rng.choice(np.flatnonzero(row)) for row in avail], dtype=np.int64)


class OpponentSeat:
    """A turn-based VecEnv seen from one seat (see the module docstring).

    Args:
        venv: a turn-based batch (``spec.turn_based``) with Discrete moves; this wrapper owns it.
        opponent: plays every other seat; None: :class:`RandomLegal` seeded with 0.
        seat: the learner's agent, an index or an id.
    """

    def __init__(self, venv: VecEnv, opponent: Opponent | None = None, seat: int | str = 0):
        spec = venv.spec
        if not spec.turn_based:
            raise ValueError(f"OpponentSeat needs a turn-based VecEnv (spec.turn_based); {spec.agents} move together")
        if not isinstance(spec.action, DiscreteAction) or spec.action.start <= WAIT:
            raise ValueError(f"OpponentSeat needs Discrete moves from 0 up, got {spec.action}")
        if spec.obs_is_tree:
            raise ValueError("OpponentSeat serves array observations; this game's are a Dict/Tuple tree")
        if not venv.autoreset.keeps_final:
            raise ValueError(f"OpponentSeat needs autoreset same_step or fast (a finished game restarts within the "
                             f"step), got {venv.autoreset.value!r}")
        if isinstance(seat, str):
            if seat not in spec.agents:
                raise ValueError(f"seat {seat!r} is not an agent; agents: {list(spec.agents)}")
            seat = spec.agents.index(seat)
        if not 0 <= int(seat) < spec.n_agents:
            raise ValueError(f"seat {seat} out of range [0, {spec.n_agents})")
        self.venv, self.seat = venv, int(seat)
        self.opponent: Opponent = RandomLegal() if opponent is None else opponent
        agent = spec.agents[self.seat]
        self.spec = dataclasses.replace(
            spec, agents=(agent,), turn_based=False, state_shape=(0,), state_is_obs=False, has_state=False,
            stats=tuple(s for s in spec.stats if s in ("draw", f"won_{agent}")))
        self.num_envs = venv.num_envs
        E = self.num_envs
        self._moves = np.zeros(E, dtype=np.int64)  # the learner's moves in each env's running game
        self._carry = np.zeros(E, dtype=np.float64)  # learner reward earned before its first move of a game
        self._last: StepResult | None = None

    # -- the VecEnv calls the faces use -------------------------------------------------

    @property
    def autoreset(self) -> Any:
        return self.venv.autoreset

    @property
    def copy(self) -> bool:
        return True  # results are always arrays of their own here

    @property
    def validate(self) -> bool:
        return self.venv.validate

    @validate.setter
    def validate(self, value: bool) -> None:
        self.venv.validate = value

    def reset(self, seed: int | None = None, env_ids: Sequence[int] | None = None) -> StepResult:
        r = self.venv.reset(seed=seed, env_ids=env_ids)
        ids = np.arange(self.num_envs) if env_ids is None else np.asarray(env_ids, dtype=np.int64).reshape(-1)
        active = np.zeros(self.num_envs, bool)
        active[ids] = True
        self._moves[ids] = 0
        self._carry[ids] = 0.0
        out = _Step(self.num_envs)
        r = self._advance(r, active, out)
        self._carry[ids] += out.reward[ids]  # the opponent's opening moves: counted in the learner's first step
        return self._result(r, out, reset=True)

    def step(self, actions: Any) -> StepResult:
        moves = np.asarray(actions).reshape(self.num_envs)
        full = np.full((self.num_envs, self.venv.spec.n_agents), WAIT, dtype=np.int64)
        full[:, self.seat] = moves
        out = _Step(self.num_envs)
        out.reward += self._carry
        self._carry.fill(0.0)
        self._moves += 1
        r = self.venv.step(full)
        self._collect(r, np.ones(self.num_envs, bool), out)
        r = self._advance(r, np.ones(self.num_envs, bool), out)
        return self._result(r, out)

    def call(self, name: str, *args: Any, indices: Sequence[int] | None = None, **kwargs: Any) -> list[Any]:
        """``action_masks`` (sb3-contrib's MaskablePPO asks for it): the learner's legal moves;
        anything else goes to the native envs."""
        if name == "action_masks" and self._last is not None:
            ids = range(self.num_envs) if indices is None else indices
            return [self._last.avail_actions[i, 0].copy() for i in ids]
        return self.venv.call(name, *args, indices=indices, **kwargs)

    def get_attr(self, name: str, indices: Sequence[int] | None = None) -> list[Any]:
        """``observation_space``/``action_space``: the learner's (a game's are methods of the agent);
        anything else the native envs'."""
        n = self.num_envs if indices is None else len(list(indices))
        if name == "observation_space":
            return [self.spec.single_agent_observation_space] * n
        if name == "action_space":
            return [self.spec.single_agent_action_space] * n
        return self.venv.get_attr(name, indices=indices)

    def set_attr(self, name: str, values: Any, indices: Sequence[int] | None = None) -> None:
        self.venv.set_attr(name, values, indices=indices)

    def render(self) -> list[Any]:
        return self.venv.render()

    def episode_statistics(self) -> dict[str, float]:
        return self.venv.episode_statistics()

    def close(self) -> None:
        self.venv.close()

    # -- the opponent's turns ---------------------------------------------------------

    def _advance(self, r: StepResult, active: np.ndarray, out: "_Step") -> StepResult:
        """Step the batch with the opponent's moves until the learner is to move in every
        ``active`` env (the others wait)."""
        seat, A = self.seat, self.venv.spec.n_agents
        while True:
            need = active & ~r.acting[:, seat]
            if not need.any():
                return r
            rows = np.flatnonzero(need)
            movers = r.acting[rows].argmax(axis=1)
            full = np.full((self.num_envs, A), WAIT, dtype=np.int64)
            full[rows, movers] = np.asarray(self.opponent(r.obs[rows, movers], r.avail_actions[rows, movers]))
            r = self.venv.step(full)
            self._collect(r, need, out)

    def _collect(self, r: StepResult, stepped: np.ndarray, out: "_Step") -> None:
        """The learner's share of a batch step over the envs ``stepped``."""
        seat = self.seat
        finished_before = out.done.copy()
        reward = r.reward[:, seat].astype(np.float64)
        # A game that ended in this learner step: what comes after belongs to the next game.
        self._carry[finished_before & stepped] += reward[finished_before & stepped]
        fresh = stepped & ~finished_before
        out.reward[fresh] += reward[fresh]
        for i in np.flatnonzero(fresh & r.done):
            out.done[i] = True
            out.terminated[i] = r.terminated[i, seat]
            out.truncated[i] = r.truncated[i, seat]
            out.final_obs[i] = r.final_obs[i, seat]
            out.final_avail[i] = r.final_avail_actions[i, seat]
            info = dict(r.infos[i])
            summary = dict(info.get("episode", {}))
            if summary:
                game_returns = summary.get("agent_returns")
                summary["game_returns"] = game_returns
                summary["agent_returns"] = np.array([game_returns[seat]])
                summary["return"] = float(game_returns[seat])
                summary["length"] = int(self._moves[i])
                info["episode"] = summary
            out.infos[i] = info
            self._moves[i] = 0

    def _result(self, r: StepResult, out: "_Step", reset: bool = False) -> StepResult:
        seat, E = self.seat, self.num_envs
        keep = slice(seat, seat + 1)
        infos = [dict(info) for info in r.infos] if reset else [out.infos.get(i, {}) for i in range(E)]
        result = StepResult(
            r.obs[:, keep].copy(), None, r.avail_actions[:, keep].copy(), np.ones((E, 1), bool),
            out.reward.astype(self.spec.reward_dtype)[:, None], out.terminated[:, None].copy(),
            out.truncated[:, None].copy(), out.done.copy(), infos,
            final_obs=out.final_obs_array(r.obs, keep), final_state=None,
            final_avail_actions=out.final_avail_array(r.avail_actions[:, keep]),
            acting=np.ones((E, 1), bool), final_acting=out.done[:, None].copy(),
        )
        self._last = result
        return result

    def __getattr__(self, name: str) -> Any:  # other attributes (e.g. ``group``) as the wrapped batch has them
        if name == "venv":
            raise AttributeError(name)
        return getattr(self.venv, name)


class _Step:
    """What one learner step gathers, env by env."""

    def __init__(self, E: int):
        self.reward = np.zeros(E, dtype=np.float64)
        self.done = np.zeros(E, dtype=bool)
        self.terminated = np.zeros(E, dtype=bool)
        self.truncated = np.zeros(E, dtype=bool)
        self.final_obs: dict[int, Any] = {}
        self.final_avail: dict[int, np.ndarray] = {}
        self.infos: dict[int, dict[str, Any]] = {}

    def final_obs_array(self, obs: Any, keep: slice) -> Any:
        out = np.zeros_like(obs[:, keep])
        for i, value in self.final_obs.items():
            out[i, 0] = value
        return out

    def final_avail_array(self, avail: np.ndarray) -> np.ndarray:
        out = np.zeros_like(avail)
        for i, value in self.final_avail.items():
            out[i, 0] = value
        return out



def serve_seat(venv: Any, opponent: Opponent | None, seat: int | str, face: str, library: str) -> Any:
    """What a single-agent face serves: a turn-based batch as an :class:`OpponentSeat`;
    a one-agent batch as it is (``opponent`` is then refused); nothing else, since
    ``library`` (e.g. "SB3's VecEnv") has no agent axis."""
    if getattr(venv.spec, "turn_based", False):
        venv = OpponentSeat(venv, opponent, seat)
    elif opponent is not None:
        raise ValueError(f"{face}: opponent= plays the other seats of a turn-based game; this batch "
                         f"({venv.spec.n_agents} agents) is not turn-based")
    spec = venv.spec
    if spec.n_agents != 1:
        raise ValueError(
            f"{face} needs a single-agent VecEnv, got {spec.n_agents} agents {spec.agents}; {library} has no "
            "agent axis (use the marl_vec API for multi-agent envs; a turn-based game is served against opponent=...)"
        )
    return venv

"""Actions of turn-based games: only the agent to move is read.

In a turn-based batch (``spec.turn_based``, PettingZoo AEC envs) one agent per env
moves at each step: ``buffers.acting`` marks it. The others' actions are ignored,
so any value is fine there, NaN included: a trainer may hand in a float array with
NaN everywhere but at the movers. `TurnActions` checks the movers' moves
(an illegal one raises ``ValueError`` naming the env, its game, the agent, the move
and the legal moves) and writes integer actions into the buffer, zero for the others.

``WAIT`` (-1) as the mover's action leaves that env as it is for one step: no turn is
played, its reward is zero and its flags clear, its episode length (counted in turns)
does not grow. This lets a caller move some envs while others wait, e.g. the faces'
opponent seat (`marl_vec.compat.opponent`) plays the opponent's turns while the
learner's envs wait. (Not for games whose Discrete moves start at -1 or lower.)

Examples:
    >>> import numpy as np
    >>> from marl_vec.core.spec import DiscreteAction, EnvSpec
    >>> spec = EnvSpec(("x", "o"), (9,), np.int8, (18,), np.int8, DiscreteAction(9),
    ...                turn_based=True, env_name="tictactoe_v3")
    >>> turns = TurnActions(spec)
    >>> acting = np.array([[True, False]]); avail = np.zeros((1, 2, 9), bool); avail[0, 0, 4] = True
    >>> out = np.zeros((1, 2), np.int64)
    >>> turns.write(np.array([[4.0, np.nan]]), out, acting, avail, validate=True); out.tolist()
    [[4, 0]]
    >>> turns.write(np.array([[3, 0]]), out, acting, avail, validate=True)
    Traceback (most recent call last):
    ...
    ValueError: illegal move 3 for env 0 (tictactoe_v3), agent 'x' to move; legal moves now: [4]
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from marl_vec.core.spec import WAIT, DiscreteAction, EnvSpec

_SHOWN = 40  # legal moves listed in an error (go has up to 362)


class TurnActions:
    """Checks and writes the discrete actions of a turn-based batch (see the module docstring)."""

    def __init__(self, spec: EnvSpec):
        action = spec.action
        if not isinstance(action, DiscreteAction):
            raise TypeError(f"TurnActions serves Discrete actions, not {type(action).__name__}")
        self.agents = spec.agents
        self.name = spec.env_name
        self.start, self.n = action.start, action.n_actions
        self.wait = WAIT if self.start > WAIT else None  # a game whose moves reach -1 cannot wait

    def write(self, actions: object, out: np.ndarray, acting: np.ndarray, avail: np.ndarray | None,
              validate: bool, env_ids: Sequence[int] | None = None) -> None:
        """Check the movers' actions (``validate``) and write all of them into ``out``
        (``(E, A)`` integers); row e is env ``env_ids[e]`` (None: env e)."""
        array = np.asarray(actions)
        if array.shape != out.shape:
            envs = "len(env_ids)" if env_ids is not None else "num_envs"
            raise ValueError(f"actions must have shape {out.shape} ({envs}={out.shape[0]}, n_agents={out.shape[1]}, "
                             f"one integer per agent; only the agent to move is read), got {array.shape}")
        if array.dtype.kind not in "iuf":
            raise ValueError(f"discrete actions must be integers (or floats, NaN for agents not to move), "
                             f"got dtype {array.dtype}")
        rows, cols = np.nonzero(acting)
        moves = array[rows, cols]
        if array.dtype.kind == "f":
            whole = np.isfinite(moves) & (moves == np.round(moves))
            if not whole.all():
                k = int(np.flatnonzero(~whole)[0])
                raise ValueError(f"move {moves[k]} {self._where(rows[k], cols[k], env_ids)} to move is not a whole "
                                 f"number; discrete moves are integers (NaN is fine only for agents not to move)")
        if validate:
            # Waiting envs play no move: nothing to check there.
            playing = slice(None) if self.wait is None else moves != self.wait
            self._check(moves[playing], rows[playing], cols[playing], avail, env_ids)
        out.fill(0)
        out[rows, cols] = moves

    def _check(self, moves: np.ndarray, rows: np.ndarray, cols: np.ndarray, avail: np.ndarray | None,
               env_ids: Sequence[int] | None) -> None:
        index = moves.astype(np.int64) - self.start
        ok = (index >= 0) & (index < self.n)
        if avail is not None and ok.any():
            inside = np.flatnonzero(ok)
            ok[inside] = avail[rows[inside], cols[inside], index[inside]]
        if ok.all():
            return
        k = int(np.flatnonzero(~ok)[0])
        e, a = int(rows[k]), int(cols[k])
        move = moves[k].item()
        if isinstance(move, float):
            move = int(move)
        legal = [] if avail is None else (np.flatnonzero(avail[e, a]) + self.start).tolist()
        if avail is None:
            shown = f"{self.start}..{self.start + self.n - 1}"
        elif len(legal) > _SHOWN:
            shown = f"{legal[:_SHOWN]} ... ({len(legal)} legal moves in all)"
        else:
            shown = str(legal)
        raise ValueError(f"illegal move {move} {self._where(e, a, env_ids)} to move; legal moves now: {shown}")

    def _where(self, e: int, a: int, env_ids: Sequence[int] | None) -> str:
        env = int(e) if env_ids is None else env_ids[int(e)]
        game = f" ({self.name})" if self.name else ""
        return f"for env {env}{game}, agent {self.agents[int(a)]!r}"


def legal_actions(spec: EnvSpec, acting: np.ndarray | None, avail: np.ndarray | None,
                  agent: int | str | None = None) -> np.ndarray:
    """The legal moves of one env's agent to move (or of ``agent``, an index or id),
    from its rows of the batch: ``acting`` (None for simultaneous-move envs) and
    ``avail``. Empty when no agent is to move (a finished game)."""
    if not isinstance(spec.action, DiscreteAction) or avail is None:
        raise TypeError(f"legal_actions() needs Discrete actions; this batch has {type(spec.action).__name__}")
    if agent is None:
        if acting is None:
            raise ValueError("legal_actions(i): this batch is not turn-based (every live agent acts); "
                             f"name the agent: legal_actions(i, agent), one of {list(spec.agents)}")
        movers = np.flatnonzero(acting)
        if movers.size == 0:
            return np.zeros(0, dtype=np.int64)
        k = int(movers[0])
    elif isinstance(agent, str):
        if agent not in spec.agents:
            raise ValueError(f"unknown agent {agent!r}; agents: {list(spec.agents)}")
        k = spec.agents.index(agent)
    else:
        k = int(agent)
        if not 0 <= k < spec.n_agents:
            raise IndexError(f"agent index {k} out of range [0, {spec.n_agents})")
    return np.flatnonzero(avail[k]).astype(np.int64) + spec.action.start

"""OpponentSeat: a turn-based batch as a single-agent one, against a fixed opponent.

Single-agent faces (`SB3VecEnv`,
[`GymVectorEnv`][marl_vec.compat.gym.vector.GymVectorEnv]) serve a turn-based game (``spec.turn_based``)
through this wrapper: the learner holds one seat, every other seat is played by
``opponent``, a callable ``opponent(obs, avail) -> moves`` over the rows of the envs
where an opponent is to move (``obs`` that agent's observations, ``avail`` its legal
moves, ``(n, n_actions)`` bool; returns ``n`` moves). The default,
[`RandomLegal`][marl_vec.compat.opponent.RandomLegal], plays a uniformly random legal move.

After ``reset()`` and after every ``step()``, the learner is to move in every env:
the wrapper steps the batch with the opponent's moves where the opponent is to move,
while the learner's envs wait (``WAIT``, `marl_vec.vec.turns`). One learner step
is the learner's move plus the opponent's answers; its reward is what the learner got
over them (the -1 of a game the opponent won comes with the opponent's winning move).
At a game's end, ``final_obs``/``final_avail_actions`` are the learner's last view and
``infos[i]["episode"]`` has the learner's return, its moves as the length and the
winner statistics. Needs autoreset ``same_step`` (or ``fast``).

The rules it keeps:

- A refused step (the batch's ``ValueError`` for an illegal learner move, or a
  malformed one) changes nothing: no move is played or counted, no reward is lost.
- ``reset(env_ids=...)`` and the ``indices`` of ``call``/``get_attr``/``set_attr``
  are read as the batch reads them (an int, ints, a boolean mask; negative ints
  for the calls). ``reset()`` returns the reset's infos and zero rewards: the
  opponent's opening moves' rewards come with the learner's first step.
- Seeds: ``reset(seed=s)`` seeds env i with ``s + i`` and calls the opponent's
  ``reseed(env_ids, seeds)`` with those seeds, if it has one. An opponent with
  ``play(env_ids, obs, avail)`` is called that way, told which env each row is.
  ``RandomLegal`` has both: its moves in env i depend on env i's seed only.
- If the opponent (or an env) raises once moves were played, the error goes on
  with a note naming the envs where the opponent was to move, and the envs whose
  results it cut off (every env for a step, the reset ones for a reset) must be
  reset: until then ``step()`` raises ``RuntimeError`` naming them.

Examples:
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
    """The default opponent: a uniformly random legal move, each env from a generator of its own.

    Env i's generator starts from ``seed + i`` and a seeded reset of the seat
    (``reset(seed=s)``, env i with ``s + i`` as the envs) starts it again from ``s + i``:
    ``numpy.random.default_rng(SeedSequence(s + i).spawn(1)[0])``, a child sequence, so it
    is independent of the env's own stream. Unseeded resets and later games go on with it.
    So a game depends on its env's seed and the learner's moves only. Called directly
    (``opponent(obs, avail)``), row k draws from env k's generator.
    """

    def __init__(self, seed: int | None = 0):
        self.seed = seed
        self._rngs: dict[int, np.random.Generator] = {}

    def reseed(self, env_ids: Sequence[int], seeds: Sequence[int | None]) -> None:
        """Start env ``env_ids[k]``'s generator again from ``seeds[k]`` (None: fresh entropy)."""
        for i, seed in zip(env_ids, seeds):
            self._rngs[int(i)] = np.random.default_rng(None if seed is None else
                                                       np.random.SeedSequence(int(seed)).spawn(1)[0])

    def play(self, env_ids: Sequence[int], obs: Any, avail: np.ndarray) -> np.ndarray:
        """One random legal move per row, row k of env ``env_ids[k]``."""
        moves = np.empty(len(avail), dtype=np.int64)
        for k, (i, row) in enumerate(zip(env_ids, avail)):
            rng = self._rngs.get(int(i))
            if rng is None:
                self.reseed([i], [None if self.seed is None else self.seed + int(i)])
                rng = self._rngs[int(i)]
            moves[k] = rng.choice(np.flatnonzero(row))
        return moves

    def __call__(self, obs: Any, avail: np.ndarray) -> np.ndarray:
        return self.play(range(len(avail)), obs, avail)


class OpponentSeat:
    """A turn-based VecEnv seen from one seat (see the module docstring).

    Args:
        venv: a turn-based batch (``spec.turn_based``) with Discrete moves; this wrapper owns it.
        opponent: plays every other seat; None: [`RandomLegal`][marl_vec.compat.opponent.RandomLegal] seeded with 0.
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
        # Envs that an error left with the opponent to move (or their results lost): reset first.
        self._stale = np.zeros(E, dtype=bool)
        self._cause, self._cut_call = "", ""

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

    def reset(self, seed: int | Sequence[int | None] | None = None,
              env_ids: Sequence[int] | None = None) -> StepResult:
        """Reset all envs, or ``env_ids`` (read as the batch reads them: ints or a boolean mask),
        and play the opponent's opening moves there; the reset's infos, zero rewards (the
        opening moves' rewards come with the learner's first step).

        ``seed``: None, an int (env i with ``seed + i``, as the batch) or one seed (or None)
        per reset env, as the faces' per-env seeds: the envs are reset in groups of one
        offset, and only then the openings are played (they step the whole batch, so
        every env must have been reset before).
        """
        ids = self._check_indices(env_ids, unique=True)
        seeds = self._env_seeds(seed, ids)
        groups: dict[int | None, list[int]] = {}
        for i, s in zip(ids, seeds):
            groups.setdefault(None if s is None else s - i, []).append(i)
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        reset_some = False
        try:
            for offset, group in (groups or {None: []}).items():
                start = self.venv.reset(seed=offset, env_ids=None if len(group) == self.num_envs else group)
                reset_some = True
                for i in group:
                    infos[i] = start.infos[i]
            self._moves[ids] = 0
            self._carry[ids] = 0.0
            seeded = [(i, s) for i, s in zip(ids, seeds) if s is not None]
            reseed = getattr(self.opponent, "reseed", None)
            if seeded and callable(reseed):
                reseed([i for i, _ in seeded], [s for _, s in seeded])
        except BaseException as exc:
            if reset_some or not _refused(exc):  # a refusal before any reset changes nothing
                self._cut(ids, exc, "the reset")
            raise
        active = np.zeros(self.num_envs, bool)
        active[ids] = True
        out = _Step(self.num_envs)
        r = self._advance(start, active, out, active, "the reset")
        self._carry[ids] += out.reward[ids]  # the opponent's opening moves: counted in the learner's first step
        self._stale[ids] = False
        out.reward.fill(0.0)
        return self._result(r, out, infos=infos)

    def _env_seeds(self, seed: int | Sequence[int | None] | None, ids: list[int]) -> list[int | None]:
        """Each reset env's seed: ``seed + i`` for an int, or the per-env list as given."""
        if seed is None:
            return [None] * len(ids)
        if isinstance(seed, (int, np.integer)):
            return [int(seed) + i for i in ids]
        seeds = list(seed) if isinstance(seed, (list, tuple, np.ndarray)) else [seed]
        if len(seeds) != len(ids) or not all(s is None or isinstance(s, (int, np.integer)) for s in seeds):
            raise ValueError(f"OpponentSeat.reset: seed must be None, an int, or one int (or None) per reset env "
                             f"({len(ids)} envs), got {seed!r}")
        return [None if s is None else int(s) for s in seeds]

    def step(self, actions: Any) -> StepResult:
        if self._stale.any():
            stale = np.flatnonzero(self._stale).tolist()
            raise RuntimeError(f"OpponentSeat: env(s) {stale} must be reset before the next step: {self._cause} "
                               f"cut {self._cut_call} short, so their games are not where the learner last saw "
                               f"them; call reset() or reset(env_ids={stale})")
        moves = np.asarray(actions).reshape(self.num_envs)
        full = np.full((self.num_envs, self.venv.spec.n_agents), WAIT, dtype=np.int64)
        full[:, self.seat] = moves
        every = np.ones(self.num_envs, bool)
        try:
            r = self.venv.step(full)
        except BaseException as exc:
            # Refused (an illegal move): nothing moved, nothing here changes either. Else the
            # learner's moves were played in some envs, whose results are lost with the error.
            if not _refused(exc):
                self._cut(np.arange(self.num_envs), exc, "the learner's step")
            raise
        out = _Step(self.num_envs)
        out.reward += self._carry
        self._carry.fill(0.0)
        self._moves += 1
        self._collect(r, every, out)
        r = self._advance(r, every, out, every, "the learner's step")
        return self._result(r, out)

    def call(self, name: str, *args: Any, indices: Sequence[int] | None = None, **kwargs: Any) -> list[Any]:
        """``action_masks`` (sb3-contrib's MaskablePPO asks for it): the learner's legal moves;
        anything else goes to the native envs."""
        if name == "action_masks" and self._last is not None:
            return [self._last.avail_actions[i, 0].copy() for i in self._check_indices(indices, negative=True)]
        return self.venv.call(name, *args, indices=indices, **kwargs)

    def get_attr(self, name: str, indices: Sequence[int] | None = None) -> list[Any]:
        """``observation_space``/``action_space``: the learner's (a game's are methods of the agent);
        anything else the native envs'."""
        if name in ("observation_space", "action_space"):
            n = len(self._check_indices(indices, negative=True))
            space = self.spec.single_agent_observation_space if name == "observation_space" else \
                self.spec.single_agent_action_space
            return [space] * n
        return self.venv.get_attr(name, indices=indices)

    def set_attr(self, name: str, values: Any, indices: Sequence[int] | None = None) -> None:
        self.venv.set_attr(name, values, indices=indices)

    def _check_indices(self, indices: Any, unique: bool = False, negative: bool = False) -> list[int]:
        """The batch's own reading of env indices (None, an int, ints, a boolean mask)."""
        return self.venv._check_indices(indices, unique=unique, negative=negative)

    def render(self) -> list[Any]:
        return self.venv.render()

    def episode_statistics(self) -> dict[str, float]:
        return self.venv.episode_statistics()

    def close(self) -> None:
        self.venv.close()

    # -- the opponent's turns ---------------------------------------------------------

    def _advance(self, r: StepResult, active: np.ndarray, out: "_Step", cut: np.ndarray, call: str) -> StepResult:
        """Step the batch with the opponent's moves until the learner is to move in every
        ``active`` env (the others wait). If the opponent (or the batch) raises, the envs
        ``cut`` must be reset: the error names the envs where the opponent was to move."""
        seat, A = self.seat, self.venv.spec.n_agents
        while True:
            need = active & ~r.acting[:, seat]
            if not need.any():
                return r
            rows = np.flatnonzero(need)
            movers = r.acting[rows].argmax(axis=1)
            full = np.full((self.num_envs, A), WAIT, dtype=np.int64)
            try:
                full[rows, movers] = self._opponent_moves(rows, r.obs[rows, movers], r.avail_actions[rows, movers])
                r = self.venv.step(full)
            except BaseException as exc:
                self._cut(np.flatnonzero(cut), exc, call, rows.tolist())
                raise
            self._collect(r, need, out)

    def _opponent_moves(self, rows: np.ndarray, obs: Any, avail: np.ndarray) -> np.ndarray:
        play = getattr(self.opponent, "play", None)  # an opponent that wants to know the envs (RandomLegal)
        moves = play(rows.tolist(), obs, avail) if callable(play) else self.opponent(obs, avail)
        return np.asarray(moves)

    def _cut(self, envs: Any, exc: BaseException, call: str, opponent_rows: list[int] | None = None) -> None:
        """``call`` raised after moves were played in ``envs``: they wait for a reset."""
        envs = [int(i) for i in envs]
        self._stale[envs] = True
        self._cut_call = call
        if opponent_rows is None:
            self._cause = f"{type(exc).__name__} from the batch"
            note = f"marl_vec: OpponentSeat: this error cut {call} short; reset env(s) {envs} before the next step"
        else:
            self._cause = f"{type(exc).__name__} while the opponent moved in env(s) {opponent_rows}"
            note = (f"marl_vec: OpponentSeat: raised while the opponent moved in env(s) {opponent_rows}; "
                    f"{call} is cut short: reset env(s) {envs} before the next step")
        if hasattr(exc, "add_note"):  # Python >= 3.11
            exc.add_note(note)

    def _collect(self, r: StepResult, stepped: np.ndarray, out: "_Step") -> None:
        """The learner's share of a batch step over the envs ``stepped``."""
        seat = self.seat
        finished_before = out.done.copy()
        reward = r.reward[:, seat].astype(np.float64)
        # A game that ended in this learner step: what comes after belongs to the next game.
        carried = finished_before & stepped
        self._carry[carried] += reward[carried]
        fresh = stepped & ~finished_before
        out.reward[fresh] += reward[fresh]
        # A game that ends before the learner's first move in it is not one of its episodes (it
        # took no decision there): the seat plays past it, and its reward is not the learner's.
        # Carried into the next game it would make that game's step rewards differ from its return.
        self._carry[carried & r.done] = 0.0
        skipped = fresh & r.done & (self._moves == 0)
        out.reward[skipped] = 0.0
        for i in np.flatnonzero(fresh & r.done & ~skipped):
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

    def _result(self, r: StepResult, out: "_Step", infos: list[dict[str, Any]] | None = None) -> StepResult:
        """The learner's view; ``infos``: a reset's (else those of the games that ended)."""
        seat, E = self.seat, self.num_envs
        keep = slice(seat, seat + 1)
        infos = [dict(info) for info in infos] if infos is not None else [out.infos.get(i, {}) for i in range(E)]
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


def _refused(exc: BaseException) -> bool:
    """The batch refused the actions before any env moved: its checks raise ValueError or
    TypeError. An env's own error is named (``marl_vec_env_index``, the group sets it) or
    comes as a WorkerError (a RuntimeError) from a worker."""
    return isinstance(exc, (ValueError, TypeError)) and not hasattr(exc, "marl_vec_env_index")


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
    """What a single-agent face serves: a turn-based batch as an [`OpponentSeat`][marl_vec.compat.opponent.OpponentSeat];
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

"""Any PettingZoo ``AECEnv`` (board and card games, one agent per turn) as a turn-based env.

Every classic game (``pettingzoo.classic``: chess, go, connect four, tic-tac-toe,
the rlcard poker games, hanabi, rps) and any other ``AECEnv`` joins the batch.
One batch step is one turn of a live agent (see docs/families/turn_based.md):

- ``obs[k]`` is ``env.observe(agent_k)["observation"]`` for every agent still in
  ``env.agents`` (the whole observation where it is not a dict), after the turn;
  ``avail_actions[k]`` is agent k's ``action_mask`` as the env reports it (in the
  observation dict or in ``env.infos[agent]["action_mask"]``; without either, every
  native action). The env decides what it reports for agents not to move (most
  classic games: no legal move).
- ``acting[k]`` is True for ``env.agent_selection``, the agent to move;
  ``agent_mask[k]`` for agents in ``env.agents`` that are neither terminated nor
  truncated. ``step`` reads only the acting agent's action.
- ``reward[k]`` is ``env.rewards[agent_k]`` right after the acting agent's move, for
  every agent: what the AEC protocol adds to ``_cumulative_rewards`` on that move.
  The loser's reward on the winner's move is in the winner's turn; over an episode
  the sums equal what a plain ``agent_iter()`` loop collects from ``last()``.
- Agents that are terminated or truncated are stepped with ``None`` by the adapter
  right after the move that ended them (the AEC protocol's dead steps; they add no
  reward), so that the next agent to move is live. An agent that leaves
  ``env.agents`` while the game goes on gets zero observation and mask.
- The episode ends when no agent is left: ``terminated``/``truncated`` keep what the
  env last said per agent (an agent it never flagged is truncated), ``acting`` and
  ``agent_mask`` are all False, and ``obs``/``avail_actions`` hold every agent's view
  right after the final move (the group copies them to ``final_*``).
- ``WAIT`` (-1, `marl_vec.vec.turns`) as the mover's action plays no turn: the row
  stays, with zero reward and clear flags. Episode lengths count turns played.
- Seeds: ``reset(seed)`` seeds the game as a plain loop would. shimmy's OpenSpiel
  games (hanabi_v5) draw fresh entropy on ``reset(seed=None)``, which would make every
  game after the first irreproducible; for them each unseeded reset gets the next seed
  of a ``numpy.random.default_rng(first seed)`` stream instead (`next_game_seed`).
- At a game's end ``info["agent_selection"]`` names the agent PettingZoo selected
  right after the last move (whose view a plain loop's ``env.last()`` shows then).
- Episode statistics: ``winner`` (the agent id with the largest return, or ``"draw"``
  when it is shared), ``draw`` and ``won_<agent>`` (0/1, so that the running means are
  draw and win rates).

Examples:
    >>> from pettingzoo.classic import tictactoe_v3
    >>> env = AECAdapter(tictactoe_v3.env())
    >>> env.spec.turn_based, env.spec.agents, env.spec.n_actions
    (True, ('player_1', 'player_2'), 9)
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from marl_vec.core.buffers import RowViews
from marl_vec.envs.pettingzoo.parallel import PettingZooAdapter, _write_multi_discrete_mask
from marl_vec.core.spec import WAIT, DiscreteAction


def reseeds_from_entropy(env: Any) -> bool:
    """Whether ``env.reset(seed=None)`` draws fresh entropy instead of continuing the
    game's random stream: shimmy's OpenSpiel compatibility env (hanabi_v5 wraps one).
    Told by class, without importing shimmy (which imports open_spiel)."""
    unwrapped = getattr(env, "unwrapped", env)
    for obj in (unwrapped, getattr(unwrapped, "hanabi_env", None)):
        if obj is not None and any(cls.__name__ == "OpenSpielCompatibilityV0"
                                   and cls.__module__.startswith("shimmy.") for cls in type(obj).__mro__):
            return True
    return False


def next_game_seed(stream: np.random.Generator) -> int:
    """The seed of the next unseeded game of an env that `reseeds_from_entropy`."""
    return int(stream.integers(2**31 - 1))


_STATE = ("agents", "rewards", "terminations", "truncations", "infos", "agent_selection")


def state_holder(env: Any) -> Any:
    """The object to read an AEC env's state from: ``env`` itself, or the innermost env
    below PettingZoo's wrappers where none of them has a state attribute of its own.

    Each wrapper forwards those reads with a ``__getattr__`` (a string check and a call
    per wrapper: classic games have three), most of a cheap game's turn; the raw env
    holds the same objects. Moves and observations still go through the wrappers.
    """
    from pettingzoo.utils.wrappers import BaseWrapper, OrderEnforcingWrapper

    # OrderEnforcingWrapper's __getattr__ only refuses reads before the first reset: the
    # adapter reads after it.
    forwarding = (BaseWrapper.__getattr__, OrderEnforcingWrapper.__getattr__)
    obj = env
    while isinstance(obj, BaseWrapper) and type(obj).__getattr__ in forwarding:
        own = set(vars(obj))
        for cls in type(obj).__mro__:
            if issubclass(cls, BaseWrapper) and cls is not BaseWrapper:
                own.update(vars(cls))
        if own.intersection(_STATE):
            return obj
        obj = obj.env
    return obj


class AECAdapter(PettingZooAdapter):
    """Wraps a PettingZoo ``AECEnv``; the spec (shapes, padding, state modes) is built as
    for a ``ParallelEnv`` from ``possible_agents`` and their spaces."""

    def __init__(self, env: Any):
        super().__init__(env)
        agents = self.agent_ids
        self.spec = dataclasses.replace(
            self.spec, turn_based=True, env_name=self.name,
            stats=("draw", *[f"won_{agent}" for agent in agents]),
        )
        self._returns = np.zeros(len(agents), dtype=np.float64)
        # Where the game's state (agents, rewards, flags, infos, agent_selection) is read.
        self._state = state_holder(env)
        # Envs that reseed from entropy: the stream their unseeded resets draw seeds from.
        self._reseeds = reseeds_from_entropy(env)
        self._seed_stream: np.random.Generator | None = None
        action = self.spec.action
        self._wait = WAIT if isinstance(action, DiscreteAction) and action.start > WAIT else None
        self._turns = 0  # turns played in this episode (WAIT steps are none)

    def bind(self, row: RowViews) -> None:
        super().bind(row)
        if row.acting is None:
            raise ValueError(f"{self.name}: a turn-based env needs buffers made from its turn_based spec")
        self._acting_row = row.acting
        self._acting = -1  # index of the agent to move; -1: none (the game is over)
        self._zeroed: set[str] = set()  # agents that left env.agents mid-game, their rows zeroed

    # -- what one turn writes ------------------------------------------------------

    def _observe(self, agents: list[str]) -> None:
        """Every agent's view of the game now, and its action mask."""
        env, st, index, views, has_mask = self.env, self._state, self._index, self._obs_views, self._obs_has_mask
        avail = self.row.avail_actions
        infos = None
        for agent in agents:
            i = index[agent]
            ob = env.observe(agent)
            mask = None
            if has_mask[i]:
                views[i][...] = ob["observation"]
                mask = ob["action_mask"]
            else:
                views[i][...] = ob
                if avail is not None:
                    infos = st.infos if infos is None else infos
                    info = infos.get(agent)
                    mask = info.get("action_mask") if info else None
            if avail is not None:
                self._write_mask(avail, i, mask)

    def _write_mask(self, avail: np.ndarray, i: int, mask: Any) -> None:
        if self._nvec is not None:
            avail[i].fill(False)
            _write_multi_discrete_mask(avail[i], mask, self._nvec)
        elif mask is None:
            avail[i] = self._avail_live[i]
        else:
            n = self._n_native[i]
            avail[i, n:] = False
            avail[i, :n] = np.asarray(mask, dtype=bool)[:n]

    def _zero_gone(self, live: list[str]) -> None:
        """Agents that left ``env.agents`` while the game goes on: zero view, no moves."""
        gone = [agent for agent in self.agent_ids if agent not in live and agent not in self._zeroed]
        for agent in gone:
            i = self._index[agent]
            self._obs_views[i][...] = 0
            if self.row.avail_actions is not None:
                self.row.avail_actions[i] = False
            self._zeroed.add(agent)

    def _write_turn(self) -> None:
        """Who moves next (acting), who is alive (agent_mask), and the state."""
        st, row = self._state, self.row
        live = st.agents
        acting, mask = self._acting_row, row.agent_mask
        acting.fill(False)
        mask.fill(False)
        self._acting = -1
        if live:
            terms, truncs = st.terminations, st.truncations
            for agent in live:
                if not (terms.get(agent, False) or truncs.get(agent, False)):
                    mask[self._index[agent]] = True
            self._acting = self._index[st.agent_selection]
            acting[self._acting] = True

    def _dead_steps(self) -> bool:
        """Step every terminated or truncated agent to move with ``None`` (the AEC
        protocol), until a live agent is to move or none is left; True if any was."""
        env, st = self.env, self._state
        stepped = False
        for _ in range(len(self.agent_ids) + 1):  # each dead step removes an agent
            live = st.agents
            if not live:
                break
            agent = st.agent_selection
            if not (st.terminations.get(agent, False) or st.truncations.get(agent, False)):
                break
            env.step(None)
            stepped = True
        return stepped

    def _infos(self, infos: dict | None, state_ok: bool) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if infos and any(infos.values()):
            out["agents"] = {agent: dict(info) for agent, info in infos.items() if info}
        if not state_ok:
            out["state_unavailable"] = True
        return out

    # -- the adapter contract ------------------------------------------------------

    def reset(self, seed: int | None = None) -> dict[str, Any]:
        env, st = self.env, self._state
        if self._reseeds:
            if seed is not None:
                self._seed_stream = np.random.default_rng(seed)
            elif self._seed_stream is not None:
                seed = next_game_seed(self._seed_stream)
        env.reset(seed=seed)
        self._returns.fill(0.0)
        self._turns = 0
        self._fresh_episode = True
        self._zeroed = set()
        self._dead_steps()  # an agent dead from the start is not to move
        live = list(st.agents)
        if len(live) < len(self.agent_ids):
            self._zero_gone(live)
        self._observe(live)
        self._write_turn()
        state_ok = self._write_state() if self._call_state else True
        return self._infos(st.infos, state_ok)

    def step(self, actions: Any) -> dict[str, Any]:
        env, st, row, index = self.env, self._state, self.row, self._index
        k = self._acting
        if k < 0:
            raise RuntimeError(f"{self.name}: step() after the game ended; reset it first")
        if self._discrete:
            action: Any = actions[k].item()
        else:
            per_agent = actions if self._actions_as_given else self._agent_actions(actions)
            action = per_agent[k]
        reward, terminated, truncated = row.reward, row.terminated, row.truncated
        if self._fresh_episode:
            self._fresh_episode = False
            terminated.fill(False)
            truncated.fill(False)
        reward.fill(0.0)
        if self._wait is not None and action == self._wait:
            return {}
        env.step(action)
        self._turns += 1
        for agent, value in st.rewards.items():
            reward[index[agent]] = value
        for agent, value in st.terminations.items():
            terminated[index[agent]] = value
        for agent, value in st.truncations.items():
            truncated[index[agent]] = value
        self._returns += reward
        # The move's infos, before dead steps take their agents' entries out of env.infos.
        infos = {agent: dict(info) for agent, info in st.infos.items() if info}
        # Every agent's view right after the move: at the game's end, the final views.
        self._observe(list(st.agents))
        selected = st.agent_selection  # whom env.last() reports now, before dead steps move on
        if self._dead_steps():
            live = list(st.agents)
            if live:  # the game goes on without the agents that left
                self._zero_gone(live)
                self._observe(live)
            else:  # the game ended: an agent the env never flagged was cut off with it
                np.logical_or(truncated, ~(terminated | truncated), out=truncated)
        self._write_turn()
        state_ok = self._write_state() if self._call_state else True
        out = self._infos(infos, state_ok)
        if not st.agents:  # the game ended: whose view a plain loop's last() shows (Tianshou's PettingZooEnv)
            out["agent_selection"] = selected
        return out

    def episode_stats(self, info: dict[str, Any]) -> dict[str, Any]:
        returns = self._returns
        best = returns.max()
        winners = np.flatnonzero(returns == best)
        draw = len(winners) != 1
        stats: dict[str, Any] = {"winner": "draw" if draw else self.agent_ids[int(winners[0])], "draw": float(draw),
                                 "length": self._turns}
        for i, agent in enumerate(self.agent_ids):
            stats[f"won_{agent}"] = float(not draw and i == int(winners[0]))
        return stats

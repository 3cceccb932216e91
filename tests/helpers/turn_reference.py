"""A plain AEC loop over native PettingZoo games: what a turn-based batch must reproduce,
written without marl_vec (``agent_iter()`` / ``last()`` / ``step()`` and ``observe()``).

Moves come from :class:`Chooser`, one per env (seeded by the env index), which picks
among the legal moves it is shown; the batch test builds the same choosers and shows
them the batch's masks, so both sides play the same games when they agree.

:func:`aec_turns` plays ``turns`` live turns of one env (resetting when a game ends,
as autoreset ``same_step`` does) and returns, per turn, what the batch's row must
hold after that turn (``TURN_FIELDS``; the ``final_*`` entries where the game ended)
and, per finished game, the rewards the loop's ``last()`` gave each agent.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

import numpy as np

from marl_vec.envs.pettingzoo.aec import next_game_seed, reseeds_from_entropy

TURN_FIELDS = ("obs", "avail", "acting", "agent_mask", "reward", "terminated", "truncated", "done")


class Chooser:
    """Env ``index``'s moves: a uniformly random legal move, from a generator seeded by
    ``index``; with ``prefer`` (a move number) that move half the time when legal (go's
    pass, to end games early)."""

    def __init__(self, index: int, prefer: int | None = None):
        self.rng = np.random.default_rng([1234, index])
        self.prefer = prefer

    def __call__(self, legal: np.ndarray) -> int:
        coin = self.rng.random()
        if self.prefer is not None and self.prefer in legal and coin < 0.5:
            return int(self.prefer)
        return int(legal[self.rng.integers(len(legal))])


def game_fn(module: str, **kwargs: Any) -> Callable[[], Any]:
    """A picklable zero-argument maker of ``module.env(**kwargs)``."""
    import functools

    return functools.partial(_make, module, kwargs)


def _make(module: str, kwargs: dict[str, Any]) -> Any:
    return importlib.import_module(module).env(**kwargs)


def _view(env: Any, agent: str, n_actions: int) -> tuple[np.ndarray, np.ndarray]:
    ob = env.observe(agent)
    if isinstance(ob, dict) and "action_mask" in ob:
        return np.asarray(ob["observation"]), np.asarray(ob["action_mask"], dtype=bool)
    mask = (env.infos.get(agent) or {}).get("action_mask")
    return np.asarray(ob), np.ones(n_actions, bool) if mask is None else np.asarray(mask, dtype=bool)


def _views(env: Any, agents: list[str], n: int) -> dict[str, np.ndarray]:
    """Every agent's observation and mask now (zeros for agents no longer in ``env.agents``)."""
    seen = {a: _view(env, a, n) for a in env.agents}
    like = next(iter(seen.values()))[0]
    obs = np.zeros((len(agents), *like.shape), like.dtype)
    avail = np.zeros((len(agents), n), bool)
    for a, (ob, mask) in seen.items():
        obs[agents.index(a)], avail[agents.index(a)] = ob, mask
    return {"obs": obs, "avail": avail}


def aec_turns(env_fn: Callable[[], Any], seed: int, turns: int, choose: Chooser,
              reward_dtype: Any = np.float32) -> tuple[list[dict[str, Any]], dict[str, Any], list[np.ndarray]]:
    """(per-turn records, the first view, each finished game's summed ``last()`` rewards)."""
    env = env_fn()
    agents = list(env.possible_agents)
    A = len(agents)
    n = int(env.action_space(agents[0]).n)
    records: list[dict[str, Any]] = []
    game_sums: list[np.ndarray] = []
    env.reset(seed=seed)
    reseeds, stream = reseeds_from_entropy(env), np.random.default_rng(seed)
    first: dict[str, Any] | None = None
    while len(records) < turns:
        sums = np.zeros(A)
        views: dict[str, Any] | None = None  # every agent's view right after the last move
        pending: dict[str, Any] | None = None  # the last move's record, until the next live turn
        for agent in env.agent_iter():
            _, rew, term, trunc, _ = env.last()
            sums[agents.index(agent)] += rew
            if term or trunc:
                env.step(None)
                continue
            # A live agent to move: the row's current view (after the previous move, or the reset).
            current = _views(env, agents, n)
            current["acting"] = np.array([a == agent for a in agents])
            current["agent_mask"] = np.array([a in env.agents and not (env.terminations[a] or env.truncations[a])
                                              for a in agents])
            if pending is not None:
                pending.update(current)
                records.append(pending)
            elif first is None:
                first = current
            if len(records) >= turns:
                break
            move = choose(np.flatnonzero(current["avail"][agents.index(agent)]))
            env.step(move)
            pending = {"move": move, "done": False, "agent_selection": env.agent_selection,
                       "reward": np.array([env.rewards.get(a, 0.0) for a in agents], dtype=reward_dtype),
                       "terminated": np.array([bool(env.terminations.get(a, False)) for a in agents]),
                       "truncated": np.array([bool(env.truncations.get(a, False)) for a in agents])}
            views = _views(env, agents, n)
        else:  # the game ended: the last move's record holds the final views
            assert pending is not None and views is not None
            pending.update({"done": True, "final_obs": views["obs"], "final_avail": views["avail"],
                            "final_acting": np.zeros(A, bool), "final_agent_mask": np.zeros(A, bool)})
            game_sums.append(sums)
            # hanabi (shimmy's OpenSpiel) would draw fresh entropy: marl_vec's documented seed stream.
            env.reset(seed=next_game_seed(stream) if reseeds else None)
            agent = env.agent_selection
            current = _views(env, agents, n)
            current["acting"] = np.array([a == agent for a in agents])
            current["agent_mask"] = np.ones(A, bool)
            pending.update(current)
            records.append(pending)
    env.close()
    assert first is not None
    return records[:turns], first, game_sums


# -- the batch side: the same choosers over a VecEnv -------------------------------------

def row_record(r: Any, k: int) -> dict[str, Any]:
    """Row ``k`` of a StepResult (or PoolStepResult) in the reference's terms."""
    out = {"obs": r.obs[k], "avail": r.avail_actions[k], "acting": r.acting[k], "agent_mask": r.agent_mask[k],
           "reward": r.reward[k], "terminated": r.terminated[k], "truncated": r.truncated[k],
           "done": bool(r.done[k]), "episode": r.infos[k].get("episode")}
    if out["done"]:
        out.update(final_obs=r.final_obs[k], final_avail=r.final_avail_actions[k], final_acting=r.final_acting[k],
                   agent_selection=r.infos[k].get("agent_selection"))
    return out


def move_row(r: Any, k: int, choose: Chooser, n_agents: int) -> np.ndarray:
    """The actions of row ``k``: the chooser's move for the agent to move, NaN for the others."""
    row = np.full(n_agents, np.nan)
    mover = int(np.flatnonzero(r.acting[k])[0])
    row[mover] = choose(np.flatnonzero(r.avail_actions[k, mover]))
    return row


def batch_turns(venv: Any, choosers: list[Chooser], turns: int) -> tuple[list[list[dict]], dict[str, Any]]:
    """Each env's records over ``turns`` synchronous steps, and the reset result's rows."""
    r = venv.reset()
    first = [row_record(r, i) for i in range(venv.num_envs)]
    out: list[list[dict]] = [[] for _ in choosers]
    for _ in range(turns):
        actions = np.stack([move_row(r, i, c, venv.spec.n_agents) for i, c in enumerate(choosers)])
        r = venv.step(actions)
        for i in range(venv.num_envs):
            out[i].append(row_record(r, i))
    return out, {"first": first}


def pool_turns(venv: Any, choosers: list[Chooser], turns: int, seed: int = 0) -> list[list[dict]]:
    """Each env's records under the async pool (``send``/``recv``), ``turns`` per env;
    a random subset of the received envs is held back a while, the rest sent in a random order."""
    rng = np.random.default_rng(seed)
    venv.reset()
    n, batch, A = venv.num_envs, venv.batch_size, venv.spec.n_agents
    out: list[list[dict]] = [[] for _ in choosers]
    seen_reset = [False] * n
    held: dict[int, np.ndarray] = {}
    while min(len(o) for o in out) < turns:
        r = venv.recv()
        for k, i in enumerate(r.env_ids.tolist()):
            if not seen_reset[i]:
                seen_reset[i] = True
            elif len(out[i]) < turns:
                out[i].append(row_record(r, k))
            held[i] = move_row(r, k, choosers[i], A)
        ids = list(held)
        rng.shuffle(ids)
        keep = int(rng.integers(0, n - batch + 1))
        send = ids[keep:]
        if send:
            venv.send(np.stack([held.pop(i) for i in send]), send)
    return out


def assert_same_turns(got: list[dict], expected: list[dict], env: int) -> None:
    """Every field of every turn bit for bit, the final views where the game ended."""
    assert len(got) == len(expected)
    for t, (g, e) in enumerate(zip(got, expected)):
        for field in TURN_FIELDS:
            np.testing.assert_array_equal(g[field], e[field], err_msg=f"env {env} turn {t}: {field}")
        if e["done"]:
            for field in ("final_obs", "final_avail", "final_acting"):
                np.testing.assert_array_equal(g[field], e[field], err_msg=f"env {env} turn {t}: {field}")
            # whom env.last() shows right after the last move (Tianshou's PettingZooEnv hands that view out)
            assert g["agent_selection"] == e["agent_selection"], f"env {env} turn {t}: agent_selection"


def assert_game_sums(got: list[dict], sums: list[np.ndarray], env: int) -> None:
    """Each finished game's returns (the batch's episode summary, and its rewards summed)
    equal what the plain loop's ``last()`` gave each agent."""
    summaries = [g["episode"] for g in got if g["done"]]
    assert len(summaries) == len(sums), f"env {env}: {len(summaries)} games ended, the loop finished {len(sums)}"
    start = 0
    for game, (summary, expected) in enumerate(zip(summaries, sums)):
        stop = next(t for t in range(start, len(got)) if got[t]["done"]) + 1
        summed = np.sum([g["reward"].astype(np.float64) for g in got[start:stop]], axis=0)
        np.testing.assert_array_equal(summed, expected, err_msg=f"env {env} game {game}: summed rewards")
        np.testing.assert_array_equal(summary["agent_returns"], expected, err_msg=f"env {env} game {game}")
        assert summary["length"] == stop - start
        start = stop

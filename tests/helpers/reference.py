"""Plain loops over native envs: what a batch must reproduce, written without marl_vec.

Each function steps a list of native envs one by one with given actions, resets
an env as soon as its episode ends (same_step semantics), and records what the
README promises the batch arrays hold.
"""

from __future__ import annotations

import numpy as np


def pettingzoo_plain_loop(env_fns, seed: int, actions: np.ndarray):
    """:func:`pettingzoo_reference` for envs whose agents share one observation shape
    and that have a ``state_space``: the shapes are read from a first env.

    ``actions`` is (T, E, A). Returns a dict of (T, E, A, ...) arrays.
    """
    env = env_fns[0]()
    obs_shape = tuple(env.observation_space(env.possible_agents[0]).shape)
    state_shape = tuple(env.state_space.shape)
    env.close()
    return pettingzoo_reference(env_fns, seed, actions, obs_shape, state_shape)


def _own_part(action: np.ndarray, space) -> np.ndarray:
    """An agent's own part of a Box action padded to the largest agent's (its space's
    shape; flattened first where the ranks differ), as README's padding promises."""
    shape = getattr(space, "shape", None)
    if not np.issubdtype(action.dtype, np.floating) or shape is None or action.shape == tuple(shape):
        return action
    if action.ndim != len(shape):
        return action.reshape(-1)[: int(np.prod(shape))].reshape(shape)
    return action[tuple(slice(0, d) for d in shape)]


def pettingzoo_reference(env_fns, seed: int, actions: np.ndarray, obs_shape: tuple, state_shape: tuple):
    """The plain loop of README's promises, for any ParallelEnv of the breadth matrix.

    Each env is reset with ``seed + i``, stepped with ``actions`` (T, E, A), and
    reset as soon as every agent left. Agents missing from the env's dicts (dead)
    get zero obs and reward; their flags stay as the env last said. Also:
    observations zero-padded to
    ``obs_shape`` (flattened first where agents' ranks differ); the state of
    ``state="auto"``: ``env.state()`` where the env has a ``state_space`` (zeros on a
    step where it raises), else the padded observations concatenated; the agent
    mask; and how often an agent re-entered ``env.agents`` (respawns).
    """
    envs = [fn() for fn in env_fns]
    agents = list(envs[0].possible_agents)
    T, E, A = actions.shape[:3]
    has_state = getattr(envs[0], "state_space", None) is not None

    def obs_row(obs):
        row = np.zeros((A, *obs_shape), dtype=np.result_type(*[np.asarray(o).dtype for o in obs.values()])
                       if obs else np.float32)
        for j, a in enumerate(agents):
            if a in obs:
                o = np.asarray(obs[a])
                if o.ndim != len(obs_shape):
                    row[j].reshape(-1)[: o.size] = o.reshape(-1)
                else:
                    row[j][tuple(slice(0, d) for d in o.shape)] = o
        return row

    def state_of(env, row):
        if not has_state:
            return row.reshape(-1)
        try:
            return np.asarray(env.state())
        except Exception:  # noqa: BLE001 - state="auto": zeros where state() fails
            return np.zeros(state_shape)

    rec = {k: [] for k in ("obs", "state", "reward", "terminated", "truncated", "done", "mask", "final_obs",
                           "final_state")}
    first = [env.reset(seed=seed + i)[0] for i, env in enumerate(envs)]
    first_obs = np.stack([obs_row(o) for o in first])
    first_state = np.stack([state_of(env, row) for env, row in zip(envs, first_obs)])
    flags = [(np.zeros(A, bool), np.zeros(A, bool)) for _ in envs]
    respawns = 0
    for t in range(T):
        step = {k: [] for k in rec}
        for i, env in enumerate(envs):
            live = list(env.agents)
            act = {a: _own_part(actions[t, i, agents.index(a)], env.action_space(a)) for a in live}
            if np.issubdtype(actions.dtype, np.integer):
                act = {a: int(v) for a, v in act.items()}
            obs, rew, term, trunc, _ = env.step(act)
            terminated, truncated = flags[i]
            for a in act:
                j = agents.index(a)
                terminated[j] = bool(term.get(a, False))
                truncated[j] = bool(trunc.get(a, False))
                if a not in env.agents and not (terminated[j] or truncated[j]):
                    terminated[j] = True
            for a in env.agents:
                if a not in act:
                    respawns += 1
                    terminated[agents.index(a)] = truncated[agents.index(a)] = False
            done = not env.agents
            if done:
                unflagged = ~(terminated | truncated)
                truncated |= unflagged
            reward = np.array([rew.get(a, 0.0) if a in act else 0.0 for a in agents], np.float32)
            o = obs_row(obs)
            s = state_of(env, o)
            step["final_obs"].append(o)
            step["final_state"].append(s)
            step["reward"].append(reward)
            step["terminated"].append(terminated.copy())
            step["truncated"].append(truncated.copy())
            step["done"].append(done)
            if done:
                obs, _ = env.reset()
                o = obs_row(obs)
                s = state_of(env, o)
                flags[i] = (np.zeros(A, bool), np.zeros(A, bool))
            step["obs"].append(o)
            step["state"].append(s)
            step["mask"].append(np.array([a in env.agents for a in agents]))
        for k in rec:
            rec[k].append(np.stack(step[k]))
    for env in envs:
        env.close()
    out = {k: np.stack(v) for k, v in rec.items()}
    out["first_obs"], out["first_state"], out["respawns"] = first_obs, first_state, respawns
    return out

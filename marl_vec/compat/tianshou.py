"""TianshouVectorEnv: a Tianshou ``BaseVectorEnv`` over a marl_vec VecEnv (extra ``tianshou``).

A real subclass of ``tianshou.env.BaseVectorEnv``, so Tianshou's ``Collector`` and
``AsyncCollector`` take it as they take their own ``DummyVectorEnv``. It keeps
Tianshou's contract:

- **No autoreset.** At an episode's end ``step`` returns the episode's last
  observation, and the env waits for ``reset(env_id)``, which the Collector calls.
  With ``autoreset="same_step"`` the VecEnv has already started the next episode,
  without a seed, as Tianshou's ``reset(env_id)`` without a seed would: ``reset``
  hands that observation out. A reset with a ``seed`` or ``options``, or after a
  ``set_env_attr`` on the ended env, resets for real. With ``autoreset="disabled"``
  every ``reset(env_id)`` resets then, as Tianshou's does (not while envs step).
  Stepping a finished env before its reset raises.
- **Subsets.** ``step(action, id)`` steps only the envs ``id`` (the others do not
  move), ``reset(env_id)`` resets only those. Both go through marl_vec's async
  pool (``send``/``recv``), which every backend has (DummyVecEnv's is synchronous).
- **Async.** With ``wait_num`` < ``env_num`` (or a ``timeout``) the face is async
  (``is_async``): ``step(action, id)`` sends, then returns the first ``wait_num`` envs
  to finish (the pool's ``batch_size``; with ``timeout``, those ready by then, at
  least one: ``recv(timeout=...)``), each with ``info["env_id"]``; ``waiting_id`` and
  ``ready_id`` are kept as Tianshou keeps them. ``step(None)`` only collects.
- ``seed(s)``: env i reset with ``s + i`` (or ``s[i]`` for a list) and its action
  space seeded, as Tianshou's workers do. ``reset(seed=s)`` gives every env
  named the same seed, as Tianshou's ``reset`` does; ``reset(options=...)`` hands
  the options to each env's reset (gymnasium envs).
- ``get_env_attr``/``set_env_attr`` reach the native envs, a new attribute set on
  ``env.unwrapped`` as Tianshou sets it (``action_space`` and
  ``observation_space`` are the face's per-env spaces, seeded by ``seed``);
  ``render`` returns one frame per env; ``close`` closes the VecEnv.
- ``info[i]["env_id"]`` on every step; marl_vec's own keys (``episode``,
  ``reset_info``) are taken out, so infos are the env's own.

Three layouts (``agents=``):

- ``"single"`` (default): a one-agent VecEnv as Tianshou's single-agent envs are:
  ``obs`` (R, *obs_shape), ``rew`` (R,), ``terminated``/``truncated`` (R,),
  actions (R,) or (R, *action_shape); dtypes those of the envs' own values, as
  Tianshou stacks them (a Python int reward is int64: `tianshou_values`);
  Dict observations an object array of one dict per env, as Tianshou gives them.
- ``"axis"``: simultaneous-move multi-agent envs with an agent axis, for a policy
  of your own: ``obs`` is a Tianshou ``Batch`` with ``obs`` (R, A, *obs_shape),
  ``mask`` (R, A, n_actions: the available actions, discrete only) and
  ``agent_mask`` (R, A), as a policy reads ``batch.obs.obs``; ``rew`` (R, A),
  actions (R, A) or (R, A, *action_shape); an env ends when all its agents do:
  ``truncated`` if any agent was cut, else ``terminated``.
- ``"turns"``: turn-based games (``spec.turn_based``: PettingZoo AEC envs such as
  ``classic/tictactoe``) in Tianshou's own multi-agent convention, that of its
  ``PettingZooEnv``, for ``MultiAgentPolicyManager`` (``MultiAgentOffPolicyAlgorithm``):
  one agent per step. ``obs`` is an object array of one dict per env, ``{"agent_id",
  "obs", "mask"}`` for the agent to move (at an episode's end: for the agent
  PettingZoo selected after the last move, as ``env.last()`` gives it); actions (R,)
  are that agent's moves; ``rew`` (R, A) is every agent's reward of the turn;
  ``terminated``/``truncated`` (R,) that agent's flags; infos are that agent's
  ``env.infos`` entry. ``agents`` and ``agent_idx`` are the face's, as on a
  ``PettingZooEnv``. Rewards are the VecEnv's floats (a ``PettingZooEnv`` of
  tic-tac-toe gives the game's Python ints: int64 arrays, equal in value).

A turn-based VecEnv is refused by ``"single"``/``"axis"`` and a simultaneous one
by ``"turns"``, each error naming the layout to use.

Examples:
    >>> import gymnasium as gym
    >>> import marl_vec as mv
    >>> from marl_vec.compat.tianshou import TianshouVectorEnv
    >>> envs = TianshouVectorEnv(mv.DummyVecEnv([lambda: gym.make("CartPole-v1")] * 4, env_seed=None))
    >>> envs.seed(0)
    [[0], [1], [2], [3]]
    >>> obs, info = envs.reset()
    >>> obs.shape, envs.env_num, envs.is_async
    ((4, 4), 4, False)
    >>> obs, rew, terminated, truncated, info = envs.step([0, 1], id=[1, 3])
    >>> obs.shape, [i["env_id"] for i in info]
    ((2, 4), [1, 3])
    >>> envs.close()
"""

from __future__ import annotations

import copy
from typing import Any, Literal

import gymnasium as gym
import numpy as np

from marl_vec.compat.tianshou_values import NativeValues
from marl_vec.core.group import ENV_EPISODE_KEY
from marl_vec.core.obs_types import REWARD_KIND_ATTR
from marl_vec.core.spec import ContinuousAction
from marl_vec.core.adapter import RESET_OPTIONS_ATTR
from marl_vec.envs.extras import require
from marl_vec.vec.base import VecEnv

require("tianshou", "tianshou", "marl_vec.compat.tianshou (install it in its own venv: scripts/install/install_tianshou_venv.sh)")
from tianshou.data import Batch  # noqa: E402  (after the check that names the extra)
from tianshou.env import BaseVectorEnv  # noqa: E402

__all__ = ["TianshouVectorEnv"]

Agents = Literal["single", "axis", "turns"]
LAYOUTS = ("single", "axis", "turns")
_KEEPS_FINAL = ("same_step", "fast")


def _env_info(info: dict[str, Any], env_id: int) -> dict[str, Any]:
    """The env's own info (marl_vec's episode summary and reset info taken out), with ``env_id``."""
    out = {k: v for k, v in info.items() if k not in ("episode", "reset_info", ENV_EPISODE_KEY, REWARD_KIND_ATTR)}
    if ENV_EPISODE_KEY in info:  # the env's own "episode" (e.g. RecordEpisodeStatistics), kept aside by the group
        out["episode"] = info[ENV_EPISODE_KEY]
    out["env_id"] = env_id
    return out


def _check_turns(spec: Any, agents: str) -> None:
    """A turn-based VecEnv needs agents='turns', and only it takes one."""
    name = spec.env_name or "this VecEnv"
    if spec.turn_based and agents != "turns":
        raise ValueError(
            f"{name} is turn-based (spec.turn_based: one agent of {list(spec.agents)} moves per step); "
            f"agents={agents!r} cannot serve it: use agents='turns' (Tianshou's PettingZooEnv convention, "
            "obs {agent_id, obs, mask}, for MultiAgentPolicyManager)")
    if agents == "turns":
        if not spec.turn_based:
            raise ValueError(
                f"agents='turns' serves turn-based games (spec.turn_based: PettingZoo AEC envs, e.g. "
                f"classic/tictactoe); the agents {list(spec.agents)} of {name} move together: use agents='axis'"
                + (" (or 'single')" if spec.n_agents == 1 else ""))
        if not spec.discrete:
            raise TypeError(f"agents='turns' serves Discrete moves; {name} has {type(spec.action).__name__}")


def _check_obs_tree(spec: Any, agents: str) -> None:
    """Dict observations are served in agents='single', as Tianshou serves them; not Tuple."""
    if not spec.obs_is_tree:
        return
    space = spec.single_agent_observation_space
    if agents != "single":
        raise TypeError(f"agents={agents!r} serves array observations; {space} is a Dict/Tuple space "
                        "(agents='single' serves Dict observations)")
    if isinstance(space, gym.spaces.Tuple):
        raise TypeError(f"Tuple observation space is not supported, as in Tianshou ({space}): "
                        "change it to an array or Dict space")


def _object_array(items: list[Any]) -> np.ndarray:
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out


class TianshouVectorEnv(BaseVectorEnv):
    """Tianshou's ``BaseVectorEnv`` over ``venv`` (which this face owns and closes).

    Args:
        venv: a marl_vec VecEnv with ``autoreset="same_step"`` (or ``"fast"``, or
            ``"disabled"`` for resets at ``reset(env_id)``, not with ``"turns"``); build it
            with ``env_seed=None`` for Tianshou's unseeded first reset, or call [`seed`][marl_vec.compat.tianshou.TianshouVectorEnv.seed].
        agents: ``"single"`` (one-agent VecEnvs, Tianshou's layout), ``"axis"`` (an agent axis)
            or ``"turns"`` (turn-based games, Tianshou's ``PettingZooEnv`` convention).
        wait_num: async: return after this many envs finished a step (None: synchronous).
        timeout: async: a step waits at most this many seconds for ``wait_num`` envs, then
            returns those ready (hung envs are bounded by the VecEnv's own ``timeout``).
    """

    def __init__(self, venv: VecEnv, agents: Agents = "single", wait_num: int | None = None,
                 timeout: float | None = None):
        # BaseVectorEnv.__init__ builds one worker per env: the VecEnv is the workers here.
        if not isinstance(venv, VecEnv):
            raise TypeError(f"TianshouVectorEnv wraps a marl_vec VecEnv, got {type(venv).__name__}")
        if agents not in LAYOUTS:
            raise ValueError(f"agents must be one of {LAYOUTS}, got {agents!r}")
        mode = venv.autoreset.value
        if mode not in _KEEPS_FINAL and (mode != "disabled" or agents == "turns"):
            raise ValueError(
                f"TianshouVectorEnv needs a VecEnv with autoreset='same_step' (or 'fast')"
                f"{'' if agents == 'turns' else ', or disabled'}, got {mode!r}: the face turns it into "
                "Tianshou's no-autoreset contract")
        spec = venv.spec
        _check_turns(spec, agents)
        if agents == "single" and spec.n_agents != 1:
            raise ValueError(f"agents='single' needs a one-agent VecEnv, got {spec.n_agents} agents {spec.agents}; "
                             "use agents='axis' for an agent axis")
        _check_obs_tree(spec, agents)
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                    or not timeout > 0):
            raise ValueError(f"timeout is {timeout!r}, it should be a positive number of seconds if provided")
        n = venv.num_envs
        if wait_num is not None and not (isinstance(wait_num, int) and 1 <= wait_num <= n):
            raise ValueError(f"wait_num should be in [1, {n}], but got {wait_num!r}")
        self._venv = venv
        self._agents = agents
        self._spec = spec
        self.workers: list[Any] = []
        self.env_num = n
        self.wait_num = wait_num or n
        self.timeout = timeout
        self.is_async = self.wait_num != n or timeout is not None  # as Tianshou's
        self.waiting_id: list[int] = []
        self.ready_id = list(range(n))
        self.is_closed = False
        self._action_spaces = [self._one_space(spec.single_agent_action_space, actions=True) for _ in range(n)]
        self._observation_spaces = [self._one_space(spec.single_agent_observation_space) for _ in range(n)]
        self._next_reset: dict[int, tuple[Any, dict[str, Any]]] = {}  # env -> its next episode's (obs, info)
        self._redo: set[int] = set()  # envs whose next episode began before a set_env_attr: reset them again
        # autoreset='disabled': an ended env is reset by reset(env_id) only, then, as Tianshou resets it.
        self._deferred = mode == "disabled"
        self._ended: set[int] = set()  # (disabled) envs whose episode ended, not reset since
        self._tree = spec.obs_is_tree  # Dict observations: one dict per env, as Tianshou stacks them
        # The envs' own types of observations and rewards, as Tianshou stacks them (agents='single').
        self._native = NativeValues(venv) if agents == "single" else None
        self._takes_options: bool | None = None  # whether every env takes reset options (gymnasium envs)
        if agents == "turns":  # as on Tianshou's PettingZooEnv (MultiAgentPolicyManager reads them)
            self.agents = list(spec.agents)
            self.agent_idx = {agent: k for k, agent in enumerate(spec.agents)}
            self._movers = np.full(n, -1, dtype=np.int64)  # env -> index of its agent to move (-1: none)
        self._owned = False  # every env returned by recv() (so send() may step any)

    def _one_space(self, space: gym.Space, actions: bool = False) -> gym.Space:
        """Env i's own copy (each env's space is seeded on its own, as Tianshou's workers' are)."""
        if self._agents != "axis":  # one agent's: the agent to move's, in turns
            return copy.deepcopy(space)
        action = self._spec.action
        if actions and isinstance(action, ContinuousAction):
            # (A, *shape) with each agent's own bounds: agents' Boxes may differ, and Tianshou
            # scales a policy's actions into the space's bounds entry by entry.
            low, high = action.agent_bounds(self._spec.n_agents)
            return gym.spaces.Box(low, high, low.shape, action.dtype)
        return gym.vector.utils.batch_space(space, self._spec.n_agents)

    # -- attributes ---------------------------------------------------------------

    def get_env_attr(self, key: str, id: int | list[int] | np.ndarray | None = None) -> list[Any]:
        self._assert_is_not_closed()
        ids = self._ids(id)
        if self.is_async:
            self._assert_id(ids)
        if key == "action_space":
            return [self._action_spaces[i] for i in ids]
        if key == "observation_space":
            return [self._observation_spaces[i] for i in ids]
        return self._venv.get_attr(key, indices=ids)

    def set_env_attr(self, key: str, value: Any, id: int | list[int] | np.ndarray | None = None) -> None:
        self._assert_is_not_closed()
        ids = self._ids(id)
        if self.is_async:
            self._assert_id(ids)
        # One value for every env named, as Tianshou sets it (marl_vec's set_attr reads a list as per-env values).
        self._venv.set_attr(key, [value] * len(ids), indices=ids)
        # Tianshou resets at reset(env_id): a next episode begun before this must begin again.
        self._redo.update(i for i in ids if i in self._next_reset)

    def _ids(self, id: Any) -> list[int]:
        if id is None:
            return list(range(self.env_num))
        ids = [id] if np.isscalar(id) else list(np.asarray(id).reshape(-1))
        out = []
        for i in ids:
            if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer)) or not 0 <= i < self.env_num:
                raise IndexError(f"env id {i!r} is not an env of this batch; allowed: 0 to {self.env_num - 1}")
            out.append(int(i))
        if len(set(out)) != len(out):
            raise ValueError(f"env ids {out} name an env twice")
        return out

    # -- reset and seed -------------------------------------------------------------

    def reset(self, env_id: int | list[int] | np.ndarray | None = None, **kwargs: Any) -> tuple[Any, np.ndarray]:
        self._assert_is_not_closed()
        ids = self._ids(env_id)
        if self.is_async:
            self._assert_id(ids)
        seed = kwargs.pop("seed", None)
        options = kwargs.pop("options", None)
        if kwargs:
            raise TypeError(f"reset() got {', '.join(sorted(kwargs))}; the envs' reset takes seed and options")
        if seed is not None and not isinstance(seed, (int, np.integer)):
            raise TypeError(f"reset(seed=...) takes one int for every env named, got {seed!r}")
        if options is not None and not isinstance(options, dict):
            raise TypeError(f"reset(options=...) takes one dict for every env named, got {options!r}")
        fresh = [i for i in ids if seed is not None or options is not None or i not in self._next_reset
                 or i in self._redo]
        rows: dict[int, tuple[Any, dict[str, Any]]] = {}
        if fresh:
            if self.waiting_id:
                raise RuntimeError(f"cannot reset envs {fresh} while envs {self.waiting_id} are stepping; "
                                   "collect them first with step(None)")
            seeds = None if seed is None else [int(seed)] * len(fresh)
            rows = self._real_reset(fresh, seeds, options)
        obs, infos = [], []
        for i in ids:
            o, info = rows[i] if i in rows else self._next_reset.pop(i)
            self._next_reset.pop(i, None)
            obs.append(o)
            infos.append(info)
            if self._agents == "turns":
                self._movers[i] = self.agent_idx[o["agent_id"]]
        return self._stack(obs), _object_array(infos)

    def seed(self, seed: int | list[int] | None = None) -> list[list[int] | None]:
        """Env i reset with ``seed + i`` (or ``seed[i]``) and its action space seeded, as
        Tianshou's workers do; returns ``[[seed_i], ...]``."""
        self._assert_is_not_closed()
        if seed is None:
            seeds: list[int | None] = [None] * self.env_num
        elif isinstance(seed, (int, np.integer)):
            seeds = [int(seed) + i for i in range(self.env_num)]
        else:
            seeds = [None if s is None else int(s) for s in seed]
            if len(seeds) != self.env_num:
                raise ValueError(f"seed() got {len(seeds)} seeds for {self.env_num} envs")
        if self.waiting_id:
            raise RuntimeError(f"cannot seed while envs {self.waiting_id} are stepping; collect them first")
        for space, s in zip(self._action_spaces, seeds):
            space.seed(s)
        self._real_reset(list(range(self.env_num)), seeds)
        return [[s] if s is not None else None for s in seeds]

    def _real_reset(self, ids: list[int], seeds: list[int | None] | None,
                    options: dict[str, Any] | None = None) -> dict[int, tuple[Any, dict[str, Any]]]:
        """Reset ``ids`` in the VecEnv (env ``ids[k]`` with ``seeds[k]``, each with ``options``);
        their (obs, info).

        marl_vec seeds env i with ``seed + i``: a run of consecutive seeds is one call."""
        venv = self._venv
        if options is not None:
            self._hand_options(ids, options)
        out: dict[int, tuple[Any, dict[str, Any]]] = {}
        calls: list[tuple[int | None, list[int]]] = []
        if seeds is None or all(s is None for s in seeds):
            calls.append((None, ids))
        elif all(s is not None and s - i == seeds[0] - ids[0] for i, s in zip(ids, seeds)):  # type: ignore[operator]
            calls.append((seeds[0] - ids[0], ids))  # type: ignore[operator]
        else:
            calls.extend(((None if s is None else s - i), [i]) for i, s in zip(ids, seeds))
        for base, envs in calls:
            r = venv.reset(seed=base, env_ids=None if envs == list(range(self.env_num)) else envs)
            if self._native is not None:
                self._native.after_reset(envs)
            obs = self._obs_rows(r)
            for i in envs:
                out[i] = (obs[i], self._reset_info(r.infos[i], obs[i]))
                self._next_reset.pop(i, None)
                self._redo.discard(i)
                self._ended.discard(i)
        # After a reset every env is ready in the pool: take them all, so send() may step any.
        venv.batch_size = self.env_num
        venv.recv()
        self._owned = True
        return out

    def _hand_options(self, ids: list[int], options: dict[str, Any]) -> None:
        """Give ``options`` to the next reset of envs ``ids`` (gymnasium envs take them)."""
        if self._takes_options is None:
            try:
                self._venv.get_attr(RESET_OPTIONS_ATTR, indices=[0])
                self._takes_options = True
            except AttributeError:
                self._takes_options = False
        if not self._takes_options:
            raise TypeError(f"reset(options=...): the envs of {self._spec.env_name or 'this VecEnv'} take no reset "
                            "options (marl_vec passes them to gymnasium envs only)")
        self._venv.set_attr(RESET_OPTIONS_ATTR, [options] * len(ids), indices=ids)

    # -- step ---------------------------------------------------------------------

    def step(self, action: Any, id: int | list[int] | np.ndarray | None = None) -> tuple:
        self._assert_is_not_closed()
        if not self._owned:
            raise RuntimeError("call reset() (or seed()) before step()")
        ids = self._ids(id)
        venv = self._venv
        if not self.is_async:
            if action is None:
                raise ValueError("action must be not-None for non-async")
            self._send(action, ids)
            venv.batch_size = len(ids)
            r = venv.recv()
            order = {e: k for k, e in enumerate(r.env_ids.tolist())}
            rows = [order[i] for i in ids]  # Tianshou returns the envs in the order of `id`
        else:
            if action is not None:
                self._assert_id(ids)
                self._send(action, ids)
                self.waiting_id.extend(ids)
                self.ready_id = [x for x in self.ready_id if x not in ids]
            if not self.waiting_id:
                raise RuntimeError("step(None): no env is stepping")
            venv.batch_size = min(self.wait_num, len(self.waiting_id))
            r = venv.recv(timeout=self.timeout)  # with a timeout: those ready by then (at least one)
            rows = list(range(len(r.env_ids)))
            for e in r.env_ids.tolist():
                self.waiting_id.remove(e)
                self.ready_id.append(e)
        return self._step_result(r, rows)

    def _send(self, action: Any, ids: list[int]) -> None:
        if hasattr(action, "detach"):  # a torch tensor
            action = action.detach().cpu().numpy()
        actions = np.asarray(action)
        if len(actions) != len(ids):
            raise ValueError(f"step() got {len(actions)} actions for {len(ids)} envs {ids}")
        finished = [i for i in ids if i in self._next_reset or i in self._ended]
        if finished:
            raise RuntimeError(f"envs {finished} finished their episode: reset(env_id) them before stepping "
                               "(Tianshou's Collector does)")
        if self._spec.discrete and actions.dtype.kind == "f" and np.array_equal(actions, np.round(actions)):
            # Tianshou's AsyncCollector keeps actions in a float array: whole numbers are the actions.
            actions = actions.astype(np.int64)
        if self._agents == "single":
            actions = actions.reshape(len(ids), 1, *actions.shape[1:])
        elif self._agents == "turns":
            actions = self._movers_actions(actions, ids)
        self._venv.send(actions, ids)

    def _movers_actions(self, actions: np.ndarray, ids: list[int]) -> np.ndarray:
        """(R,) moves -> (R, A): each env's move at its agent to move (the others are not read)."""
        if actions.ndim != 1 and actions.shape[1:] != (1,):
            raise ValueError(f"agents='turns' takes one move per env (shape ({len(ids)},)), got shape {actions.shape}")
        full = np.zeros((len(ids), self._spec.n_agents), dtype=actions.dtype)
        full[np.arange(len(ids)), self._movers[ids]] = actions.reshape(len(ids))
        return full

    def _step_result(self, r: Any, rows: list[int]) -> tuple:
        env_ids = r.env_ids.tolist()
        obs_now = self._obs_rows(r)
        final = self._obs_rows(r, final=True)
        obs, infos = [], []
        for k in rows:
            e = env_ids[k]
            info = r.infos[k]
            if r.done[k] and self._deferred:  # the env holds its last observation until reset(e)
                self._ended.add(e)
                obs.append(obs_now[k])
            elif r.done[k]:
                # The episode's last observation now; its successor waits for reset(e).
                self._next_reset[e] = (obs_now[k], self._reset_info(info.get("reset_info", {}), obs_now[k]))
                obs.append(final[k])
            else:
                obs.append(obs_now[k])
            if self._agents == "turns":
                self._movers[e] = -1 if r.done[k] else self.agent_idx[obs[-1]["agent_id"]]
                infos.append({**info.get("agents", {}).get(obs[-1]["agent_id"], {}), "env_id": e})
            else:
                infos.append(_env_info(info, e))
        idx = np.asarray(rows, dtype=np.int64)
        done = r.done[idx]
        if self._agents == "turns":
            # The flags of the agent whose view is handed out (env.last()'s); False while a game goes on.
            shown = np.asarray([self.agent_idx[o["agent_id"]] for o in obs], dtype=np.int64)
            rew = r.reward[idx]
            terminated = done & r.terminated[idx, shown]
            truncated = done & r.truncated[idx, shown]
        elif self._agents == "single":
            rew = self._native.rewards(r.reward[idx, 0], [env_ids[k] for k in rows],  # type: ignore[union-attr]
                                       [r.infos[k] for k in rows])
            terminated, truncated = r.terminated[idx, 0], r.truncated[idx, 0]
        else:
            rew = r.reward[idx]
            cut = r.truncated[idx].any(axis=1)
            terminated, truncated = done & ~cut, done & cut
        return self._stack(obs), rew, terminated, truncated, _object_array(infos)

    # -- layout ---------------------------------------------------------------------

    def _obs_rows(self, r: Any, final: bool = False) -> list[Any]:
        """One observation per row of ``r`` as this layout gives it."""
        obs = r.final_obs if final else r.obs
        if obs is None:
            return [None] * len(r.done)
        if self._agents == "single":  # each env's row as the env returned it (a dict for Dict spaces)
            env_ids = getattr(r, "env_ids", None)
            return self._native.obs_rows(obs, range(len(r.done)) if env_ids is None else env_ids.tolist())  # type: ignore[union-attr]
        avail = r.final_avail_actions if final else r.avail_actions
        if self._agents == "turns":
            return [self._turn_obs(obs[k], avail[k], self._shown_agent(r, k, final)) if not final or r.done[k]
                    else None for k in range(len(obs))]
        return [{"obs": obs[k], "agent_mask": r.agent_mask[k],
                 **({} if avail is None else {"mask": avail[k]})} for k in range(len(obs))]

    def _turn_obs(self, obs: np.ndarray, avail: np.ndarray, k: int) -> dict[str, Any]:
        """Tianshou's PettingZooEnv observation of agent ``k``: its id, its view, its legal moves."""
        return {"agent_id": self._spec.agents[k], "obs": obs[k], "mask": avail[k]}

    def _shown_agent(self, r: Any, k: int, final: bool) -> int:
        """Whose view row ``k`` hands out: the agent to move; at an episode's end the agent
        PettingZoo selected after the last move (the AEC adapter's ``agent_selection``)."""
        if not final:
            return int(r.acting[k].argmax())
        agent = r.infos[k].get("agent_selection")
        if agent is None:  # an env restarted after a crash: no last move to report; show its last mover
            return int(self._movers[int(r.env_ids[k])])
        return self.agent_idx[agent]

    def _reset_info(self, info: dict[str, Any], obs: Any) -> dict[str, Any]:
        """A reset's info as this layout gives it (turns: the agent to move's own)."""
        if self._agents == "turns":
            return dict(info.get("agents", {}).get(obs["agent_id"], {}))
        return dict(info)

    def _stack(self, obs: list[Any]) -> Any:
        if self._agents == "single":
            # Dict observations: an object array of one dict per env, as Tianshou's np.stack
            # gives them; its Collector and buffers make them a Batch.
            return _object_array(obs) if self._tree else np.stack(obs)
        if self._agents == "turns":
            return _object_array(obs)  # one dict per env, as Tianshou's vector envs stack PettingZooEnv's
        # A Batch (the Collector indexes observations by env): keys as in the docstring.
        return Batch({key: np.stack([o[key] for o in obs]) for key in obs[0]})

    # -- the rest -------------------------------------------------------------------

    def render(self, **kwargs: Any) -> list[Any]:
        self._assert_is_not_closed()
        if self.is_async and self.waiting_id:
            raise RuntimeError(f"Environments {self.waiting_id} are still stepping, cannot render them now.")
        if kwargs:
            raise TypeError(f"render() takes no arguments here (the envs' render_mode is set when made), got {kwargs}")
        return self._venv.render()

    def close(self) -> None:
        if self.is_closed:
            return
        self.is_closed = True
        self._venv.close()

    @property
    def venv(self) -> VecEnv:
        """The marl_vec VecEnv underneath."""
        return self._venv

"""GymVectorEnv: a ``gymnasium.vector.VectorEnv`` over a single-agent marl_vec VecEnv.

The face behaves as gymnasium's ``SyncVectorEnv`` over the same envs, seeds and
actions, on any backend (dummy, subproc, ray):

- ``obs`` (E, *obs_shape), ``terminated``/``truncated`` (E,) bool: the agent axis squeezed
  (leaf by leaf for Dict / Tuple observations, which come as gymnasium batches them);
  ``reward`` (E,) in the VecEnv's reward dtype, passed through unconverted.
- Actions of every space the core takes (Discrete, Box, MultiDiscrete, MultiBinary,
  Dict / Tuple of those) as ``action_space.sample()`` gives them.
- Text, Graph, Sequence, OneOf and custom spaces (object leaves of the VecEnv) as
  gymnasium batches them: a tuple of per-env values, for observations (deep copies
  with ``copy=True``, as SyncVectorEnv's) and for actions.
- ``GymVectorEnv.from_env_fns(env_fns, copy, observation_mode, autoreset_mode, backend=...)``
  takes SyncVectorEnv's arguments and raises its RuntimeError (and message) for
  sub-envs whose spaces cannot be batched together; ``envs`` are the sub-envs of a
  DummyVecEnv.
- Spaces are the sub-envs' own: ``single_action_space`` is env 0's action space
  object (in this process; a copy from a worker), and ``action_space`` is batched
  from it, so ``action_space.sample()`` draws as ``SyncVectorEnv``'s does. Sub-envs
  whose observation or action spaces differ are refused with ``RuntimeError``.
- Infos exactly as ``SyncVectorEnv``: the envs' own keys with ``_key`` masks;
  same_step: ``infos["final_obs"]``/``infos["final_info"]`` where an episode ended
  (each final observation in the env's own structure: Python ints for Discrete leaves),
  the top level then holding the reset's info. Nothing is added unless
  ``episode_info=True``: then marl_vec's summary ``{"r", "l", ...family stats}``
  is put in ``infos["episode"]`` where an episode ended and the env did not
  report an ``"episode"`` of its own (the env's keys always win).
- Actions go to the envs unchecked, as gymnasium does: the face turns the
  VecEnv's validation off (``venv.validate = False``), so an out-of-range action
  reaches the env and the env's own error is raised. What the face itself checks
  is what ``SyncVectorEnv`` checks: a non-iterable action raises ``TypeError``,
  a wrong number of actions ``ValueError``. (Also refused, with ``TypeError``:
  non-integer actions for a discrete space, which a cast would silently change.)
- Over a VecEnv with ``array_backend="torch"`` / ``"jax"``: what gymnasium's ``NumpyToTorch``
  (``ArrayConversion`` to ``jax.numpy``) returns over ``SyncVectorEnv``, made from the
  batch's own tensors, torch / JAX actions taken (`marl_vec.compat.gym.arrays`).
- ``reset(seed=int | list | None)``, ``options={"reset_mask": ...}``;
  ``np_random_seed``/``np_random`` are per-env tuples; ``call``/``get_attr``/
  ``set_attr`` reach through gymnasium wrappers (``get_wrapper_attr``/``set_wrapper_attr``);
  ``render_mode`` and ``metadata`` are env 0's.

Examples:
    >>> import gymnasium as gym, numpy as np
    >>> import marl_vec as mv
    >>> envs = GymVectorEnv(mv.DummyVecEnv([lambda: gym.make("CartPole-v1")] * 3, autoreset="next_step"))
    >>> envs.metadata["autoreset_mode"]
    <AutoresetMode.NEXT_STEP: 'NextStep'>
    >>> obs, infos = envs.reset(seed=0)
    >>> obs, reward, terminated, truncated, infos = envs.step(envs.action_space.sample())
    >>> terminated.shape, infos
    ((3,), {})
    >>> envs.close()

This module is the face itself; what it translates is in
`batching` (observations, actions, infos) and
`spaces` (which spaces it reports, and which sub-envs it refuses).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Sequence

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode as GymAutoresetMode
from gymnasium.vector.utils import batch_differing_spaces, batch_space, concatenate, create_empty_array, iterate

from marl_vec.core import spaces
from marl_vec.compat.gym.arrays import FaceArrays, refuse
from marl_vec.compat.gym.batching import (FinalObs, _batched_leaves, _env_info, _gym_episode, _venv_tree, agent_zero,
                                          final_obs_of, gym_batch, object_column)
from marl_vec.compat.gym.spaces import (_attr_or_none, _check_same, _mismatch_as_gymnasium, _native_action_space,
                                        action_space_of, observation_space_of)
from marl_vec.compat.opponent import OpponentSeat, serve_seat
from marl_vec.core.episode import AutoresetMode
from marl_vec.core.spec import ObjectAction, SpecMismatchError, TreeAction
from marl_vec.vec.base import VecEnv
from marl_vec.vec.device_arrays import host_array

__all__ = ["GymVectorEnv", "AUTORESET_MODES", "observation_space_of", "action_space_of", "agent_zero", "final_obs_of",
           "gym_batch", "object_column"]

# marl_vec autoreset mode -> gymnasium's. one_episode has no gymnasium equivalent.
AUTORESET_MODES: dict[AutoresetMode, GymAutoresetMode] = {
    AutoresetMode.SAME_STEP: GymAutoresetMode.SAME_STEP,
    AutoresetMode.FAST: GymAutoresetMode.SAME_STEP,
    AutoresetMode.NEXT_STEP: GymAutoresetMode.NEXT_STEP,
    AutoresetMode.DISABLED: GymAutoresetMode.DISABLED,
}


class GymVectorEnv(gymnasium.vector.VectorEnv):
    """Wraps a single-agent marl_vec ``VecEnv`` (``spec.n_agents == 1``) as ``SyncVectorEnv`` would.

    Args:
        venv: the batch; this face owns it (it turns its action validation off, see
            the module docstring) and closes it. For gymnasium's unseeded first
            ``reset()``, build it with ``env_seed=None`` (marl_vec's default seeds env i with i).
        single_observation_space: override of the observation space (default: the
            native env's, when it matches the spec's shape and dtype).
        episode_info: also report marl_vec's episode summary in ``infos["episode"]``.
        opponent: for a turn-based game (``spec.turn_based``), served as single-agent:
            ``opponent(obs, avail) -> moves`` plays every seat but ``seat`` (default: a
            random legal move); see `marl_vec.compat.opponent`.
        seat: the learner's agent in a turn-based game, an index or an id.
        observation_mode: as SyncVectorEnv's: ``"same"`` (every env has env 0's
            observation space), ``"different"`` (same shape and dtype, bounds may
            differ: the batched space is built from each env's), or a tuple
            ``(observation_space, single_observation_space)``.
    """

    def __init__(
        self,
        venv: VecEnv,
        single_observation_space: gymnasium.spaces.Space | None = None,
        episode_info: bool = False,
        observation_mode: str | tuple[gymnasium.spaces.Space, gymnasium.spaces.Space] = "same",
        opponent: Any = None,
        seat: int | str = 0,
    ):
        array_backend = refuse(venv, getattr(venv.spec, "turn_based", False))
        venv = serve_seat(venv, opponent, seat, "GymVectorEnv", "gymnasium's VectorEnv")
        spec = venv.spec
        if venv.autoreset not in AUTORESET_MODES:
            allowed = ", ".join(m.value for m in AUTORESET_MODES)
            raise ValueError(
                f"autoreset={venv.autoreset.value!r} has no gymnasium equivalent; allowed: {allowed}"
            )
        self.venv = venv
        self.num_envs = venv.num_envs
        self.episode_info = episode_info
        native_obs_spaces = _attr_or_none(venv, "observation_space")
        native_action_spaces = _attr_or_none(venv, "action_space")
        if isinstance(observation_mode, tuple) and len(observation_mode) == 2:
            if not all(isinstance(space, gymnasium.spaces.Space) for space in observation_mode):
                raise TypeError(
                    f"Expected both elements of observation_mode to be Spaces, got "
                    f"{type(observation_mode[0])} and {type(observation_mode[1])}"
                )
            batched_observation_space, single_observation_space = observation_mode
        elif observation_mode == "same":
            _check_same(native_obs_spaces, "observation")
        elif observation_mode == "different":
            if any(space is None for space in native_obs_spaces):
                raise ValueError("observation_mode='different' needs the envs' observation_space attributes")
            batched_observation_space = batch_differing_spaces(native_obs_spaces)
        else:
            raise ValueError(
                f"Invalid `observation_mode`, expected: 'same' or 'different' or tuple of single and batch "
                f"observation space, actual got {observation_mode}"
            )
        if single_observation_space is None:
            single_observation_space = observation_space_of(spec, native_obs_spaces[0])
        self.single_observation_space = single_observation_space
        self.single_action_space = _native_action_space(spec, native_action_spaces[0])
        _check_same(native_action_spaces, "action")
        # batch_space seeds the batched space with a copy of the single space's generator,
        # as SyncVectorEnv's: action_space.sample() draws the same actions.
        self.observation_space = (
            batch_space(self.single_observation_space, self.num_envs)
            if observation_mode == "same"
            else batched_observation_space
        )
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        native_metadata = _attr_or_none(venv, "metadata", [0])[0]
        self.metadata = dict(native_metadata) if isinstance(native_metadata, dict) else {"render_modes": []}
        self.metadata["autoreset_mode"] = AUTORESET_MODES[venv.autoreset]
        self.render_mode = _attr_or_none(venv, "render_mode", [0])[0]

        # Actions are written as given: the envs see what SyncVectorEnv would pass them.
        venv.validate = False
        self._keeps_final = venv.autoreset.keeps_final
        self._discrete = spec.discrete
        self._tree_actions = isinstance(spec.action, TreeAction)
        self._action_shape = (self.num_envs, *spec.action_shape)
        self._venv_action_shape = (self.num_envs, 1, *spec.action_shape)
        self._obs_is_tree = spec.obs_is_tree
        self._obs_space_of_venv = spec.single_agent_observation_space  # the structure of r.obs
        # Text, Graph, Sequence, OneOf, custom spaces: gymnasium batches them as a tuple of
        # per-env values; the VecEnv keeps them in object arrays.
        self._obs_objects = any(spaces.is_object_leaf(leaf) for _, leaf in
                                spaces.leaves(self._obs_space_of_venv, objects=True))
        self._object_actions = isinstance(spec.action, ObjectAction)
        self._copy_flags = not venv.copy  # SyncVectorEnv copies rewards and flags even with copy=False
        self._final_obs = FinalObs(venv)  # final_obs leaves of the envs' own types
        # Over a torch / JAX batch: its tensors as gymnasium's NumpyToTorch / ArrayConversion give them.
        self._arrays = None if array_backend == "numpy" else FaceArrays(venv, self._action_shape, self._discrete)

    @classmethod
    def from_env_fns(
        cls,
        env_fns: Sequence[Any],
        copy: bool = True,
        observation_mode: str | tuple[gymnasium.spaces.Space, gymnasium.spaces.Space] = "same",
        autoreset_mode: str | GymAutoresetMode = GymAutoresetMode.NEXT_STEP,
        backend: str = "dummy",
        env_seed: int | None = None,
        episode_info: bool = False,
        **backend_kwargs: Any,
    ) -> "GymVectorEnv":
        """``SyncVectorEnv(env_fns, copy, observation_mode, autoreset_mode)``'s signature, on any backend.

        Builds the VecEnv (unseeded by default, as gymnasium's first ``reset()``) and the
        face over it. Sub-envs whose spaces the VecEnv cannot batch together raise
        ``RuntimeError`` with SyncVectorEnv's message, as gymnasium does.

        ```pycon
        >>> import gymnasium as gym
        >>> envs = GymVectorEnv.from_env_fns([lambda: gym.make("CartPole-v1")] * 2, autoreset_mode="SameStep")
        >>> envs.metadata["autoreset_mode"], envs.num_envs
        (<AutoresetMode.SAME_STEP: 'SameStep'>, 2)
        >>> envs.close()
        ```
        """
        from marl_vec.vec.factory import make_vec

        mode = {GymAutoresetMode.NEXT_STEP: "next_step", GymAutoresetMode.SAME_STEP: "same_step",
                GymAutoresetMode.DISABLED: "disabled"}[GymAutoresetMode(autoreset_mode)]
        try:
            venv = make_vec(list(env_fns), backend=backend, env_seed=env_seed, autoreset=mode, copy=copy,
                            **backend_kwargs)
        except SpecMismatchError as err:
            raise _mismatch_as_gymnasium(err, observation_mode) from err
        try:
            return cls(venv, episode_info=episode_info, observation_mode=observation_mode)
        except BaseException:
            venv.close()
            raise

    @property
    def envs(self) -> list[gymnasium.Env]:
        """The sub-envs themselves (SyncVectorEnv's ``envs``), for a VecEnv that runs them in
        this process (DummyVecEnv over gymnasium envs); other backends run them elsewhere."""
        group = getattr(self.venv, "group", None)
        envs = [getattr(adapter, "env", None) for adapter in getattr(group, "adapters", [])]
        if group is None or not envs or any(not isinstance(env, gymnasium.Env) for env in envs):
            raise AttributeError(
                f"envs: the sub-envs of {type(self.venv).__name__} are not gymnasium envs in this process "
                "(only a DummyVecEnv over gymnasium envs has them); use call/get_attr/set_attr"
            )
        return envs

    # -- gymnasium API ------------------------------------------------------------

    @property  # per env, as SyncVectorEnv's (which overrides the same way)
    def np_random_seed(self) -> tuple[int, ...]:  # type: ignore[override]
        """The sub-envs' ``np_random_seed``, one per env."""
        return self.get_attr("np_random_seed")

    @property  # type: ignore[misc]
    def np_random(self) -> tuple[np.random.Generator, ...]:  # type: ignore[override]
        """The sub-envs' generators, one per env (copies from a worker process)."""
        return self.get_attr("np_random")

    def reset(
        self, *, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset all envs, or those of ``options["reset_mask"]``.

        ``seed``: None (each env continues its own stream), an int (env i gets
        ``seed + i``) or one seed (or None) per env.
        """
        if seed is None:
            seeds: list[int | None] = [None] * self.num_envs
        elif isinstance(seed, (int, np.integer)):
            seeds = [int(seed) + i for i in range(self.num_envs)]
        else:
            seeds = list(seed)
        if len(seeds) != self.num_envs:
            raise ValueError(
                f"If seeds are passed as a list the length must match num_envs={self.num_envs} "
                f"but got length={len(seeds)}."
            )
        env_ids = list(range(self.num_envs))
        options = dict(options or {})
        if self._arrays is not None:  # as gymnasium's wrappers: a torch / JAX reset_mask to numpy
            options = host_array(options)
        if "reset_mask" in options:
            env_ids = np.flatnonzero(self._check_reset_mask(options.pop("reset_mask"))).tolist()
        if options:
            raise ValueError(
                f"reset options {sorted(options)} are not supported by GymVectorEnv (marl_vec's reset "
                "passes no options to the envs); allowed: reset_mask"
            )
        # marl_vec seeds env i with seed + i: envs whose seeds share one offset reset together.
        by_offset: dict[int | None, list[int]] = defaultdict(list)
        for i in env_ids:
            s = seeds[i]
            by_offset[None if s is None else int(s) - i].append(i)
        env_infos: dict[int, dict[str, Any]] = {}
        r = None
        if isinstance(self.venv, OpponentSeat):
            # The per-env seeds in one call: the seat's openings step the whole batch.
            r = self.venv.reset(seed=[seeds[i] for i in env_ids],
                                env_ids=None if len(env_ids) == self.num_envs else env_ids)
            by_offset.clear()
            env_infos.update((i, r.infos[i]) for i in env_ids)
        for offset, ids in by_offset.items():
            r = self.venv.reset(seed=offset, env_ids=None if len(ids) == self.num_envs else ids)
            env_infos.update((i, r.infos[i]) for i in ids)
        assert r is not None  # env_ids is never empty
        infos: dict[str, Any] = {}
        for i in sorted(env_infos):
            if env_infos[i]:
                infos = self._add_info(infos, env_infos[i], i)
        if self._arrays is not None:
            return self._arrays.squeeze(r.obs), self._arrays.infos(infos)
        return self._observations(r.obs), infos

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        r = self.venv.step(self._venv_actions(actions))
        infos: dict[str, Any] = {}
        done = r.done
        for i, info in enumerate(r.infos):
            if not info:
                continue
            summary = info.get("episode")
            env_info = _env_info(info)
            if self._keeps_final and done[i]:
                final_obs = (self._final_obs(r.final_obs, i, copy=not self.venv.copy) if self._arrays is None else
                             self._arrays.final_obs(r.final_obs, i, self._final_obs.kind(i), not self.venv.copy))
                infos = self._add_info(infos, {"final_obs": final_obs, "final_info": env_info}, i)
                env_info = info.get("reset_info", {})
            if env_info:
                infos = self._add_info(infos, env_info, i)
            if self.episode_info and summary is not None and "episode" not in env_info:
                infos = self._add_info(infos, {"episode": _gym_episode(summary)}, i)
        if self._arrays is not None:
            reward, terminated, truncated = self._arrays.flags(r.reward, r.terminated, r.truncated, self._copy_flags)
            return self._arrays.squeeze(r.obs), reward, terminated, truncated, self._arrays.infos(infos)
        reward, terminated, truncated = r.reward[:, 0], r.terminated[:, 0], r.truncated[:, 0]
        if self._copy_flags:
            reward, terminated, truncated = reward.copy(), terminated.copy(), truncated.copy()
        return self._observations(r.obs), reward, terminated, truncated, infos

    def render(self) -> tuple[Any, ...]:
        return tuple(self.venv.render())

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call method ``name`` of every env (through its wrappers), or read it if not callable."""
        return tuple(self.venv.call(name, *args, **kwargs))

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """As ``SyncVectorEnv.get_attr``: ``call(name)``."""
        return self.call(name)

    def set_attr(self, name: str, values: Any) -> None:
        """Set ``name`` on every env where a wrapper or the env has it; a list or tuple gives one value per env."""
        if isinstance(values, (list, tuple)) and len(values) != self.num_envs:
            raise ValueError(
                "Values must be a list or tuple with length equal to the number of environments. "
                f"Got `{len(values)}` values for {self.num_envs} environments."
            )
        self.venv.set_attr(name, values)

    def close_extras(self, **kwargs: Any) -> None:
        self.venv.close()

    def __repr__(self) -> str:
        return f"GymVectorEnv({self.venv!r})"

    # -- translation ------------------------------------------------------------

    def _observations(self, tree: Any) -> Any:
        """The VecEnv's (E, 1, ...) observations as gymnasium batches them."""
        if not self._obs_objects:
            return agent_zero(tree)
        return gym_batch(self._obs_space_of_venv, agent_zero(tree))

    def _venv_actions(self, actions: Any) -> Any:
        """``actions`` as the VecEnv's (E, 1, *action_shape), checked as SyncVectorEnv checks them."""
        if self._arrays is not None:
            native = self._arrays.actions(actions)
            if native is not None:
                return native  # the VecEnv reads CPU tensors / arrays without a copy
            actions = host_array(actions)  # as gymnasium's wrappers: to numpy, leaf by leaf
        if self._tree_actions:
            return self._venv_tree_actions(actions)
        if self._object_actions:
            # A tuple of per-env values (the batched space is a Tuple), iterated as SyncVectorEnv does.
            items = list(iterate(self.action_space, actions))
            if len(items) != self.num_envs:
                raise ValueError(f"expected {self.num_envs} actions (one per env), got {len(items)}")
            return object_column(items)
        if not (isinstance(actions, np.ndarray) and actions.shape == self._action_shape):
            # SyncVectorEnv iterates over the batched space: the same TypeError for a
            # non-iterable, and one action per env (its zip(strict=True) raises ValueError).
            items = list(iterate(self.action_space, actions))
            if len(items) != self.num_envs:
                raise ValueError(f"expected {self.num_envs} actions (one per env), got {len(items)}")
            actions = np.asarray(items)
            if actions.shape != self._action_shape:
                raise ValueError(
                    f"actions must have shape {self._action_shape} (one per env), got {actions.shape}"
                )
        if self._discrete:
            if actions.dtype.kind not in "iu":
                raise TypeError(
                    f"discrete actions must be integers, got dtype {actions.dtype}; a cast would change them"
                )
        return actions.reshape(self._venv_action_shape)

    def _venv_tree_actions(self, actions: Any) -> Any:
        """Dict/Tuple actions (a tree of (E, *leaf_shape) arrays, as ``action_space.sample()``)
        as the VecEnv's tree of (E, 1, *leaf_shape) views."""
        n = self.num_envs
        batched = _batched_leaves(self.single_action_space, actions, n)
        if batched is None:
            # Anything else (e.g. a list of per-env dicts) goes through gymnasium's own
            # iterate, for SyncVectorEnv's TypeError / ValueError, then is batched.
            items = list(iterate(self.action_space, actions))
            if len(items) != n:
                raise ValueError(f"expected {n} actions (one per env), got {len(items)}")
            batched = concatenate(self.single_action_space, items, create_empty_array(self.single_action_space, n))
        return _venv_tree(self.single_action_space, batched, n)

    def _check_reset_mask(self, mask: Any) -> np.ndarray:
        """SyncVectorEnv's checks of ``options["reset_mask"]``, with its exception types."""
        if not isinstance(mask, np.ndarray):
            raise TypeError(f"`options['reset_mask']` must be a numpy array, got {type(mask)}")
        if mask.shape != (self.num_envs,):
            raise ValueError(f"`options['reset_mask']` must have shape `({self.num_envs},)`, got {mask.shape}")
        if mask.dtype != np.bool_:
            raise TypeError(f"`options['reset_mask']` must have `dtype=np.bool_`, got {mask.dtype}")
        if not mask.any():
            raise ValueError(
                "`options['reset_mask']` must contain a boolean array with at least one True value, "
                f"got reset_mask={mask}"
            )
        return mask

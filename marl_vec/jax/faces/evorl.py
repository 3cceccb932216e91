"""The EvoRL face: a `marl_vec.jax.batch` whose ``reset``/``step`` return EvoRL's ``EnvState``.

One idea: EvoRL's env state, field for field, from the batch's own numbers. EvoRL
installs only from its git repository, so this face is mirrored by hand from its
source (github.com/EMI-Group/evorl at commit 36836c0, 2025-09-28):
``evorl/envs/env.py`` (``EnvState``), ``evorl/envs/wrappers/training_wrapper.py``
(``EpisodeWrapper``, ``OneEpisodeWrapper``, ``VmapAutoResetWrapper``,
``FastVmapAutoResetWrapper``, ``VmapEnvPoolAutoResetWrapper``, ``AutoresetMode``),
``evorl/envs/jaxmarl.py`` (``create_wrapped_mabrax_env``) and ``evorl/types.py``
(``PyTreeDict``). What it gives, E envs and A agents:

- ``obs`` (E, A, *obs) (after the autoreset, as EvoRL's wrappers leave it), ``reward``
  (E, A) float32, ``done`` (E,) float32: the episode ended (terminated or truncated);
- ``info`` (a dict with attribute access, as EvoRL's ``PyTreeDict``): ``steps`` (E,)
  int32, the episode's steps with this one; ``termination`` and ``truncation`` (E,)
  float32 (a time limit reached by an episode that did not terminate is a truncation,
  as EvoRL's ``EpisodeWrapper`` says); ``ori_obs`` (E, A, *obs), the true next
  observation (zeros after a reset, as EvoRL's); ``episode_return`` (E, A) float32, the
  running (discounted) return, only with ``discount``; ``autoreset`` (E,) float32, the
  step was a reset step, only in ``envpool`` mode;
- ``env.num_envs``; ``env_state`` is the batch's `BatchState`.

Modes by EvoRL's names (``AutoresetMode`` or its value): ``normal`` is ``same_step``,
``fast`` is ``fast``, ``envpool`` is ``next_step``, ``disabled`` is ``one_episode``
(EvoRL's ``OneEpisodeWrapper``: a finished env's whole state repeats, its reward too).
Multi-agent choices of ours: arrays with an agent axis where EvoRL's JaxMARL adapter
has dicts by agent (``step`` takes either), and the episode-level flags per env.

May import: jax, numpy, ``marl_vec.jax.{batch,types}``.

Examples:
    >>> import jax, jax.numpy as jnp
    >>> env = evorl_env("switch_riddle", episode_length=4, parallel=2, autoreset_mode="envpool")
    >>> state = env.reset(jax.random.PRNGKey(0))
    >>> state = env.step(state, jnp.zeros((2, 3), jnp.int32))
    >>> env.num_envs, state.obs.shape, sorted(state.info)
    (2, (2, 3, 2), ['autoreset', 'ori_obs', 'steps', 'termination', 'truncation'])
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp

from marl_vec.jax.batch import Batch, batch
from marl_vec.jax.types import BatchState, TimeStep

# EvoRL's AutoresetMode values -> the batch's modes.
MODES = {"normal": "same_step", "fast": "fast", "envpool": "next_step", "disabled": "one_episode"}
# Where each info field exists (EvoRL adds them in one wrapper or another): for the error on a missing one.
_WHERE = {"autoreset": "autoreset_mode='envpool' (the batch's next_step) only",
          "episode_return": "a discount only (evorl_env(..., discount=...), or a batch made with gamma=...)",
          "ori_obs": "record_ori_obs=True only"}


class Info(dict):
    """EvoRL's ``PyTreeDict`` for ``EnvState.info``: a dict whose keys are attributes too, and a pytree."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            where = f"; it is there with {_WHERE[name]}" if name in _WHERE else ""
            raise AttributeError(f"EnvState.info has no {name!r} (it has {sorted(self)}){where}") from None

    def replace(self, **fields: Any) -> Info:
        return Info({**self, **fields})


jax.tree_util.register_pytree_node(
    Info, lambda d: (tuple(d[k] for k in sorted(d)), tuple(sorted(d))),
    lambda keys, values: Info(zip(keys, values, strict=True)))


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class EnvState:
    """EvoRL's ``evorl.envs.env.EnvState`` (its public fields; see the module doc).

    Attributes:
        env_state: the batch's `BatchState`.
        obs: (E, A, *obs_shape).
        reward: (E, A) float32.
        done: (E,) float32.
        info: an `Info`.
    """

    env_state: BatchState
    obs: Any
    reward: Any
    done: Any
    info: Info

    def replace(self, **fields: Any) -> EnvState:
        """A copy with ``fields`` changed (EvoRL's ``PyTreeData.replace``)."""
        return dataclasses.replace(self, **fields)


class EvoRLLike:
    """A `Batch` with EvoRL's ``reset(key) -> EnvState`` and ``step(state, action) -> EnvState``; made by
    `evorl_env` or ``EvoRLLike(batch)`` (see the module doc).

    Attributes:
        batch: the functional batch it wraps.
        num_envs: E (EvoRL's vmap wrappers' attribute).
        agents: the agent ids, in the order of the agent axis.
        record_ori_obs: ``info.ori_obs`` is kept.
    """

    def __init__(self, source: Batch, record_ori_obs: bool = True):
        if not isinstance(source, Batch):
            raise TypeError(f"EvoRLLike({source!r}): allowed: a marl_vec.jax.batch (or use evorl_env(id, ...))")
        self.batch, self.record_ori_obs = source, bool(record_ori_obs)
        self.num_envs = source.num_envs
        self.agents = list(source.spec.agents)

    def __repr__(self) -> str:
        return f"EvoRLLike({self.batch!r})"

    def reset(self, key: Any) -> EnvState:
        """Every env reset (the batch's ``reset(key)``): zero reward, done and info, as EvoRL's wrappers reset."""
        bs, ts = self.batch.reset(key)
        e = self.num_envs
        zero = jnp.zeros(e, jnp.float32)
        info = Info(steps=jnp.zeros(e, jnp.int32), termination=zero, truncation=zero)
        if self.record_ori_obs:
            info["ori_obs"] = jnp.zeros_like(ts.obs)
        if self.batch.gamma is not None:
            info["episode_return"] = jnp.zeros_like(ts.reward)
        if self.batch.autoreset == "next_step":
            info["autoreset"] = zero
        return EnvState(bs, ts.obs, ts.reward, zero, info)

    def step(self, state: EnvState, action: Any) -> EnvState:
        """One step of every env in the batch's mode. ``action``: (E, A) ints / (E, A, width) floats, or
        a dict of them by agent ((E,) / (E, width) each), as EvoRL's multi-agent envs take them."""
        bs, ts = self.batch.step(state.env_state, self._actions(action))
        new = self._state(bs, ts)
        if self.batch.autoreset not in ("one_episode", "disabled"):
            return new
        # EvoRL's OneEpisodeWrapper: a finished env returns its state as it was (reward and info too);
        # only the batch's state moves on (it is frozen there itself).
        frozen = state.done > 0
        old, now = (state.obs, state.reward, state.done, state.info), (new.obs, new.reward, new.done, new.info)
        keep = jax.tree.map(lambda o, n: jnp.where(frozen.reshape(-1, *[1] * (n.ndim - 1)), o, n), old, now)
        return EnvState(bs, *keep)

    # -- pieces -------------------------------------------------------------------

    def _actions(self, action: Any) -> Any:
        if not isinstance(action, Mapping):
            return action
        if sorted(action) != sorted(self.agents):
            raise ValueError(f"{self!r}.step: actions keyed by {sorted(action)}; expected one per agent: "
                             f"{self.agents}")
        return jnp.stack([jnp.asarray(action[a]) for a in self.agents], axis=1)

    def _state(self, bs: BatchState, ts: TimeStep) -> EnvState:
        done = ts.done
        truncation = done & ts.truncated.any(axis=1)
        info = Info(steps=ts.episode.length, termination=(done & ~truncation).astype(jnp.float32),
                    truncation=truncation.astype(jnp.float32))
        reset_step = ts.autoreset
        if self.record_ori_obs:  # EvoRL's reset state carries zeros here (also at an envpool reset step)
            info["ori_obs"] = jnp.where(reset_step.reshape(-1, *[1] * (ts.obs.ndim - 1)), 0, ts.final_obs)
        if self.batch.gamma is not None:
            info["episode_return"] = ts.episode.discounted_return
        if self.batch.autoreset == "next_step":
            info["autoreset"] = reset_step.astype(jnp.float32)
        return EnvState(bs, ts.obs, ts.reward, done.astype(jnp.float32), info)


def evorl_env(env_id: str, episode_length: int | None = None, parallel: int = 1, autoreset_mode: Any = "normal",
              discount: float | None = None, record_ori_obs: bool = True, **kwargs: Any) -> EvoRLLike:
    """EvoRL's ``create_wrapped_*_env(env_name, episode_length, parallel, autoreset_mode, ...)`` over marl_vec.

    Args:
        env_id: a ``jaxmarl`` family id (``kwargs`` go to ``jaxmarl.make``).
        episode_length: EvoRL's ``EpisodeWrapper`` limit: episodes end there, as truncated (the
            batch's ``time_limit``); None: only the env's own end.
        parallel: the number of envs (EvoRL's name; ``env.num_envs``).
        autoreset_mode: EvoRL's ``AutoresetMode`` (or its value): ``normal``, ``fast``, ``disabled``,
            ``envpool``.
        discount: record ``info.episode_return`` with this discount (EvoRL's ``EpisodeWrapper``).
        record_ori_obs: record ``info.ori_obs``.

    Examples:
        >>> env = evorl_env("switch_riddle", parallel=4, autoreset_mode="disabled", discount=0.99)
        >>> env.batch.autoreset, env.num_envs
        ('one_episode', 4)
    """
    mode = getattr(autoreset_mode, "value", autoreset_mode)
    if mode not in MODES:
        raise ValueError(f"marl_vec.jax.faces.evorl.evorl_env: autoreset_mode={autoreset_mode!r}; allowed: EvoRL's "
                         f"AutoresetMode or its value: {', '.join(MODES)}")
    return EvoRLLike(batch(env_id, parallel, MODES[mode], time_limit=episode_length, gamma=discount, **kwargs),
                     record_ori_obs=record_ori_obs)

"""JaxMARL stepped by hand in every autoreset mode of ``marl_vec.jax``: the reference of tests/jax/.

Only JaxMARL's own ``reset`` and ``step_env`` (vmapped over the envs and jitted,
as JaxMARL is used directly), ``jax.random.split`` and numpy: the mode logic is
written here again on the host, per env, from the contract
(docs/jax/inside_jit.md), not with ``marl_vec.jax``'s code. Env ``i`` seeded
``s`` walks the key chain of the stateful family: ``key = PRNGKey(s + i)``;
reset: ``key, k = split(key)``, ``reset(k)``; each step: ``key, sub =
split(key)``, ``k_step, k_reset = split(sub)``; ``step_env(k_step)``, and
where the mode resets, ``reset(k_reset)`` (optimistic: the ``r``-th env that
ended takes the ``k_reset`` of the ``(r % k)``-th; fast: the env's first reset).

The reading of JaxMARL's dicts into arrays is :class:`tests.helpers.jaxmarl_reference.Reference`'s.

Example:
    >>> ref = ModeReference(model_of("jax_mpe/simple_spread", {}), seed=7, n_envs=4, mode="next_step")  # doctest: +SKIP
    >>> first = ref.reset(); expected = ref.step(actions)                                               # doctest: +SKIP
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from tests.helpers.jaxmarl_reference import Reference


@functools.lru_cache(maxsize=None)
def _jitted(env: Any) -> tuple[Any, Any]:
    """JaxMARL's vmapped reset and step_env of ``env``, jitted once per env (one compile per test session)."""
    import jax

    return jax.jit(jax.vmap(env.reset)), jax.jit(jax.vmap(env.step_env))


def _where(flags: np.ndarray, a: Any, b: Any) -> Any:
    """``a`` where ``flags`` (per env), else ``b``, leaf by leaf, in numpy."""
    import jax

    def pick(x: Any, y: Any) -> np.ndarray:
        x, y = np.asarray(x), np.asarray(y)
        return np.where(flags.reshape((-1,) + (1,) * (x.ndim - 1)), x, y)

    return jax.tree.map(pick, a, b)


class ModeReference(Reference):
    """JaxMARL over ``n_envs`` envs in one of marl_vec.jax's modes, stepped by hand (see the module doc)."""

    def __init__(self, model: Any, seed: int, n_envs: int, mode: str, time_limit: int | None = None,
                 resets_per_step: int | None = None):
        super().__init__(model, seeds=[seed + i for i in range(n_envs)])
        mode = "one_episode" if mode == "disabled" else mode  # the same inside jit (a frozen env cannot raise)
        self.mode, self.time_limit, self.k = mode, time_limit, resets_per_step
        self._reset_v, self._step_env = _jitted(model.env)
        self.n = n_envs
        self.length = np.zeros(n_envs, dtype=np.int64)
        self.ended = np.zeros(n_envs, dtype=bool)
        self.first: Any = None
        self.frozen_view: dict[str, np.ndarray] = {}

    def reset(self) -> dict[str, np.ndarray]:
        obs, self.state = self._reset_v(self._next_keys())
        self.obs = obs
        if self.mode == "fast":
            self.first = (obs, self.state)
        return self._arrays(obs, self.state)

    def step(self, actions: np.ndarray) -> dict[str, Any]:
        """Expected fields of one step: obs/state/avail/mask (what follows), reward, done, agent_done,
        final (the true last views), autoreset (a next_step reset step), valid (an episode ended)."""
        import jax

        pairs = np.asarray(self.split(self.keys))
        self.keys = pairs[:, 0]
        subs = np.asarray(self.split(pairs[:, 1]))
        k_step, k_reset = subs[:, 0], subs[:, 1]
        acts = self._acts(actions)
        obs_l, state_l, rewards, dones, _ = self._step_env(k_step, self.state, acts)
        reward = np.stack([np.asarray(rewards[a]) for a in self.agents], axis=1).astype(np.float32)
        done = np.asarray(dones["__all__"]).copy()
        agent_done = np.stack([np.asarray(dones[a]) for a in self.agents], axis=1)
        cut = np.zeros(self.n, dtype=bool)
        if self.time_limit is not None:
            cut = self.length + 1 >= self.time_limit
        ends = done | cut
        out: dict[str, Any] = {"autoreset": np.zeros(self.n, dtype=bool), "cut": cut & ~done}
        if self.mode == "next_step":
            resets = self.ended
            obs_r, state_r = self._reset_v(jax.numpy.asarray(k_reset))
            obs, state = _where(resets, obs_r, obs_l), _where(resets, state_r, state_l)
            reward[resets] = 0.0
            ends = ends & ~resets
            agent_done[resets] = False
            out["autoreset"] = resets
            final = self._arrays(obs, state)
            self.length = np.where(resets, 0, self.length + 1)
        elif self.mode == "one_episode":
            frozen = self.ended
            obs, state = _where(frozen, self.obs, obs_l), _where(frozen, self.state, state_l)
            reward[frozen] = 0.0
            final = self._arrays(obs, state)
            out["frozen"] = frozen
            self.length = self.length + ~frozen
            out["valid"] = ends & ~frozen
            ends = ends | frozen
        else:
            final = self._arrays(obs_l, state_l)
            if self.mode == "fast":
                obs_r, state_r = self.first
            else:
                keys = k_reset
                if self.k is not None:  # optimistic: the r-th env that ended takes the (r % k)-th's reset
                    order = np.flatnonzero(ends)
                    keys = k_reset.copy()
                    for r, i in enumerate(order):
                        keys[i] = k_reset[order[r % self.k]]
                obs_r, state_r = self._reset_v(jax.numpy.asarray(keys))
            obs, state = _where(ends, obs_r, obs_l), _where(ends, state_r, state_l)
            self.length = self.length + 1
        out.update(self._arrays(obs, state))
        out.update(reward=reward, done=ends, agent_done=agent_done, final=final, length=self.length.copy())
        out.setdefault("valid", ends)
        self.length = np.where(ends, 0, self.length) if self.mode != "one_episode" else self.length
        self.ended = ends
        self.obs, self.state = obs, state
        return out

    def _acts(self, actions: np.ndarray) -> dict[str, Any]:
        jnp = self.jax.numpy
        if self.action_dims is None:
            return {a: jnp.asarray(actions[:, i]) for i, a in enumerate(self.agents)}
        return {a: jnp.asarray(actions[:, i, :d]) for i, (a, d) in enumerate(zip(self.agents, self.action_dims))}

"""The pure functions of ONE JaxMARL env: the one kernel that both forms of a JaxMARL batch call.

One idea: the per-env step and reset, as pure JAX functions of one env
(nothing batched, nothing compiled here). Two callers vmap them:

- the stateful family (`marl_vec.envs.jaxmarl.kernels.build_kernels`) compiles
  `EnvFunctions.step` and `EnvFunctions.reset_rows` for a block of ``k`` envs;
- the functional batch (``marl_vec.jax``) composes the same `EnvFunctions.step`
  (``same_step``) or its parts (`split`, `step_raw`, `reset_raw`, `outputs`:
  ``next_step``, ``one_episode``, ``fast``, optimistic resets) inside the user's jit.

So the same key and actions give the same numbers in both forms.

The key chain of one env (what the stateful family promised before this module
existed, kept as it was): a seeded reset ``key, k = split(key_of_seed(seed))``,
``reset(k)``; each step ``key, sub = split(key)``, ``k_step, k_reset = split(sub)``,
``step_env(k_step, ...)``, and ``reset(k_reset)`` where the episode ended: what
JaxMARL's own ``MultiAgentEnv.step(sub, ...)`` does, written out so that the
TRUE last views (``step_env``'s, which JaxMARL's ``step`` replaces) come from the
one physics step.

May import: jax, jaxmarl (lazily), numpy, ``marl_vec.envs.jaxmarl.views``.

Examples:
    >>> from marl_vec.envs.jaxmarl.model import model_of
    >>> import jax
    >>> fns = EnvFunctions(model_of("jax_mpe/simple_spread", {}).view)
    >>> key, state, views = fns.reset_rows(jax.random.PRNGKey(0), fns.reset(jax.random.PRNGKey(0))[0],
    ...                                    jax.random.PRNGKey(3), True, True)
    >>> views[0].shape  # obs (A, *obs_shape) of env seed 3
    (3, 18)
"""

from __future__ import annotations

from typing import Any, NamedTuple

from marl_vec.envs.jaxmarl.views import View


class Stepped(NamedTuple):
    """What one env's step makes, before or after its autoreset.

    ``views``: (obs, world state or None, avail or None, mask or None) of what follows the step
    (the reset ones where the episode ended and the step resets); ``last``: the step's TRUE last
    views (``step_env``'s). ``done``: JaxMARL's ``__all__`` (or-ed with a cut, where one is given).
    """

    key: Any
    state: Any
    views: tuple
    reward: Any
    terminated: Any
    truncated: Any
    done: Any
    stats: Any
    last: tuple


def has_base_step(env: Any) -> bool:
    """Whether ``env``'s ``step`` is JaxMARL's ``MultiAgentEnv.step`` (step_env, reset, select), which
    `EnvFunctions.step` writes out; an env with a step of its own has it called as it is."""
    from jaxmarl.environments.multi_agent_env import MultiAgentEnv

    return getattr(type(env), "step", None) is MultiAgentEnv.step


def normalise(state: Any, like: Any) -> Any:
    """``state`` with each leaf of ``like``'s dtype and no weak type: reset's state has weak
    types where step's has none (SMAX's ``last_attacked_enemy``, MPE's ``done``), which would
    make JAX compile a step twice."""
    import jax

    return jax.tree.map(lambda x, ref: jax.lax.convert_element_type(x, ref.dtype), state, like)


def select(flag: Any, if_true: Any, if_false: Any) -> Any:
    """``if_true`` where the scalar ``flag``, else ``if_false``, leaf by leaf (JaxMARL's own select)."""
    import jax

    return jax.tree.map(lambda x, y: jax.lax.select(flag, x, y), if_true, if_false)


class EnvFunctions:
    """The pure per-env functions of one JaxMARL env (see the module doc).

    Args:
        view: the env's `marl_vec.envs.jaxmarl.views.View` (it holds the env).
    """

    def __init__(self, view: View):
        import jax
        import jax.numpy as jnp

        self.view = view
        self.env = env = view.env
        self.base_step = has_base_step(env)
        # Step's state types, from one abstract step of an abstract reset.
        key_struct = jax.ShapeDtypeStruct((2,), jnp.uint32)
        _, reset_state = jax.eval_shape(env.reset, key_struct)
        self.state_struct = jax.eval_shape(lambda key, s, a: env.step_env(key, s, view.actions_dict(a))[1],
                                           key_struct, reset_state, self.action_struct(()))

    def action_struct(self, lead: tuple[int, ...]) -> Any:
        """Discrete: int32 ``(*lead, A)``; Box: float32 ``(*lead, A, width)``."""
        import jax
        import jax.numpy as jnp

        view, n_agents = self.view, len(self.view.agents)
        if view.action_dims is None:
            return jax.ShapeDtypeStruct((*lead, n_agents), jnp.int32)
        return jax.ShapeDtypeStruct((*lead, n_agents, max(view.action_dims)), jnp.float32)

    # -- the parts ------------------------------------------------------------------

    @staticmethod
    def split(key: Any) -> tuple[Any, Any, Any]:
        """One step's keys: ``(next key, k_step, k_reset)``."""
        import jax

        key, sub = jax.random.split(key)
        k_step, k_reset = jax.random.split(sub)
        return key, k_step, k_reset

    def reset_raw(self, key: Any) -> tuple[dict, Any]:
        """JaxMARL's ``reset(key)``: (its obs dict, its state with step's types)."""
        obs, state = self.env.reset(key)
        return obs, normalise(state, self.state_struct)

    def step_raw(self, key: Any, state: Any, actions: Any) -> tuple[dict, Any, dict, dict]:
        """JaxMARL's ``step_env(key, state, actions)`` without its infos: (obs, state after, rewards, dones)."""
        return self.step_dict(key, state, self.view.actions_dict(actions))[:4]

    def step_dict(self, key: Any, state: Any, actions: dict) -> tuple[dict, Any, dict, dict, dict]:
        """``step_env`` with JaxMARL's dict of actions: (obs, state after with step's types, rewards, dones, infos)."""
        obs, after, rewards, dones, infos = self.env.step_env(key, state, actions)
        return obs, normalise(after, self.state_struct), rewards, dones, infos

    def outputs(self, obs: dict, state: Any) -> tuple:
        """Our views of one env: (obs (A, ...), world state or None, avail or None, mask or None)."""
        return self.view.outputs(obs, state)

    def step_outputs(self, after: Any, rewards: dict, dones: dict) -> tuple[Any, Any, Any, Any, Any]:
        """(reward (A,) float32, terminated (A,), truncated (A,), done, episode stats) of a step."""
        import jax.numpy as jnp

        view = self.view
        terminated, truncated = view.flags(after, dones)
        return view.rewards(rewards), terminated, truncated, jnp.asarray(dones["__all__"]), view.episode_stats(after)

    # -- the composites -------------------------------------------------------------

    def reset(self, key: Any) -> tuple[Any, tuple]:
        """``(state, views)`` of ``reset(key)``."""
        obs, state = self.reset_raw(key)
        return state, self.outputs(obs, state)

    def reset_rows(self, key: Any, state: Any, seed_key: Any, use_seed: Any, row: Any) -> tuple:
        """The stateful block's reset of one row: from ``seed_key`` where ``use_seed`` (a seeded reset),
        else from the env's own key; a row not in ``row`` keeps its key and state."""
        import jax
        import jax.numpy as jnp

        key2, k_reset = jax.random.split(jnp.where(use_seed, seed_key, key))
        new_state, out = self.reset(k_reset)
        state = jax.tree.map(lambda r, s: jnp.where(row, r, s), new_state, state)
        return jnp.where(row, key2, key), state, out

    def step(self, key: Any, state: Any, actions: Any, cut: Any = None, first: Any = None) -> Stepped:
        """One step of one env with its autoreset (same_step): see the module doc.

        ``cut``: a bool that ends the episode too (a time limit); ``first``: ``(obs, state)`` to reset
        to instead of ``reset(k_reset)`` (a cached first state). Both None: the stateful family's step.
        """
        if not self.base_step:
            if cut is not None or first is not None:
                raise ValueError(f"{type(self.env).__name__} has a step of its own (not MultiAgentEnv.step): "
                                 "only autoreset='same_step' without a time limit is served for it")
            return self._own_step(key, state, actions)
        key, k_step, k_reset = self.split(key)
        obs_last, after, rewards, dones = self.step_raw(k_step, state, actions)
        obs_reset, state_reset = self.reset_raw(k_reset) if first is None else first
        done_all = dones["__all__"] if cut is None else dones["__all__"] | cut
        following = select(done_all, state_reset, after)
        obs_next = select(done_all, obs_reset, obs_last)
        reward, terminated, truncated, done, stats = self.step_outputs(after, rewards, dones)
        return Stepped(key, following, self.outputs(obs_next, following), reward, terminated, truncated, done,
                       stats, self.outputs(obs_last, after))

    def _own_step(self, key: Any, state: Any, actions: Any) -> Stepped:
        """An env whose ``step`` is its own: call it, and ``step_env`` again for the last views."""
        import jax

        key, sub = jax.random.split(key)
        acts = self.view.actions_dict(actions)
        obs_next, following, rewards, dones, _ = self.env.step(sub, state, acts)
        obs_last, after, _, _, _ = self.env.step_env(jax.random.split(sub)[0], state, acts)
        following = normalise(following, self.state_struct)
        after = normalise(after, self.state_struct)
        reward, terminated, truncated, done, stats = self.step_outputs(after, rewards, dones)
        return Stepped(key, following, self.outputs(obs_next, following), reward, terminated, truncated, done,
                       stats, self.outputs(obs_last, after))

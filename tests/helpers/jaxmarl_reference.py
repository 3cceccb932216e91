"""JaxMARL stepped by hand: the reference the JaxMARL family is compared with, bit for bit.

Env ``i`` seeded ``s`` plays the key chain the family promises: ``key =
jax.random.PRNGKey(s)``; reset: ``key, k = split(key)``, ``env.reset(k)``; each
step: ``key, sub = split(key)``, then JaxMARL's own ``env.step(sub, state,
actions)`` (its autoreset: where an episode ended, the reset observation), and
in the same jitted function ``env.step_env(split(sub)[0], state, actions)``,
the step inside it, for the true last observation, which JaxMARL's ``step``
loses. (Compiled apart, XLA may fuse that step_env differently and round one
float in ~10^6 one ulp apart.) Vmapped over the envs with ``jax.vmap`` and
jitted, as JaxMARL is used directly; the arrays are read with plain numpy,
without the family's code.

Example:
    >>> ref = Reference(model_of("smax/3m", {}), seeds=[0, 1])  # doctest: +SKIP
    >>> view = ref.reset(); view = ref.step(actions)            # doctest: +SKIP
"""

from __future__ import annotations

import os
from typing import Any

# XLA's CPU fusion emitters contract a multiply-add into one FMA in one program and not
# in another: two programs computing the same JaxMARL step round about 1 float in 10^5
# one ulp apart (measured: MPE speaker_listener, 63 of ~880k obs values; the states
# stayed equal). Without them (or with --xla_cpu_max_isa=AVX, no FMA) the family and
# JaxMARL used directly agree bit for bit. Set before JAX starts its backend; worker
# processes inherit it.
# brax's physics (MABrax) needs no FMA at all to agree bit for bit (measured: hopper_3x1
# rewards one ulp apart at step 5 with the fusion emitters off alone): hence AVX as the top ISA.
EXACT_FLAG = "--xla_cpu_use_fusion_emitters=false"
NO_FMA_FLAG = "--xla_cpu_max_isa=AVX"
for _flag in (EXACT_FLAG, NO_FMA_FLAG):
    if _flag not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + _flag).strip()


def check_exact_flag() -> None:
    """Fail when JAX's backend started before :data:`EXACT_FLAG` was set (another module used JAX first)."""
    from jax._src import xla_bridge

    if xla_bridge.backends_are_initialized() and EXACT_FLAG not in os.environ.get("XLA_FLAGS", ""):
        raise RuntimeError(f"JAX started without XLA_FLAGS={EXACT_FLAG}; import tests.helpers.jaxmarl_reference first")

import numpy as np

import marl_vec as mv
from marl_vec.envs.jaxmarl.engine import Model, model_of
from marl_vec.envs.registry import make_env_fn

K = 4  # envs per block in every JaxMARL test: shapes repeat, so JAX's persistent cache serves them


class Reference:
    """JaxMARL over ``len(seeds)`` envs, stepped by hand (see the module doc)."""

    def __init__(self, model: Model, seeds: list[int]):
        import jax

        self.jax = jax
        self.env = env = model.env
        self.agents = list(env.agents)
        self.kind = type(model.view).__name__
        self.n_actions = model.spec.n_actions
        self.action_dims = model.view.action_dims  # Box: each agent's size (actions come padded)
        self.split = jax.jit(jax.vmap(lambda k: jax.random.split(k)))
        self.keys = jax.numpy.stack([jax.random.PRNGKey(s) for s in seeds])
        self._reset = jax.jit(jax.vmap(env.reset))

        def step_and_last(sub: Any, state: Any, acts: Any) -> tuple:
            # JaxMARL's step and the step_env inside it (the same keys, so one computation
            # for XLA): its last views before its autoreset replaced them.
            return env.step(sub, state, acts), env.step_env(jax.random.split(sub)[0], state, acts)

        self._step = jax.jit(jax.vmap(step_and_last))
        self._avail = None
        if self.kind == "SmaxView":
            self._avail = jax.jit(jax.vmap(env.get_avail_actions))
        elif self.kind == "HanabiView":
            self._avail = jax.jit(jax.vmap(env.get_legal_moves))
        self.state: Any = None

    def _next_keys(self) -> Any:
        pairs = self.split(self.keys)
        self.keys = pairs[:, 0]
        return pairs[:, 1]

    def _arrays(self, obs: dict, state: Any) -> dict[str, np.ndarray]:
        """Our fields, read from JaxMARL's dicts with numpy."""
        rows = [np.asarray(obs[a]) for a in self.agents]
        width = max(row.shape[-1] for row in rows)
        if any(row.shape != rows[0].shape for row in rows):  # flat obs of different sizes: zero-padded
            rows = [np.pad(row, [(0, 0), (0, width - row.shape[-1])]) for row in rows]
        dtype = np.result_type(*rows)
        out = {"obs": np.stack([row.astype(dtype) for row in rows], axis=1)}
        if "world_state" in obs:
            out["state"] = np.asarray(obs["world_state"])
        if self._avail is not None:
            avail = self._avail(state)
            out["avail_actions"] = np.stack([np.asarray(avail[a]) for a in self.agents], axis=1).astype(bool)
        if self.kind == "SmaxView":
            units = state.state if hasattr(state, "enemy_policy_state") else state
            ids = [self.env.agent_ids[a] for a in self.agents]
            out["agent_mask"] = np.asarray(units.unit_alive)[:, ids]
        return out

    def reset(self) -> dict[str, np.ndarray]:
        obs, self.state = self._reset(self._next_keys())
        return self._arrays(obs, self.state)

    def step(self, actions: np.ndarray) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """One step of every env: (what follows it, JaxMARL's autoreset included; the true last views)."""
        sub = self._next_keys()
        if self.action_dims is None:
            acts = {a: self.jax.numpy.asarray(actions[:, i]) for i, a in enumerate(self.agents)}
        else:
            acts = {a: self.jax.numpy.asarray(actions[:, i, :d])
                    for i, (a, d) in enumerate(zip(self.agents, self.action_dims))}
        (obs, state, rewards, dones, _), (obs_f, state_f, _, _, _) = self._step(sub, self.state, acts)
        self.state = state
        after = self._arrays(obs, state)
        after["reward"] = np.stack([np.asarray(rewards[a]) for a in self.agents], axis=1).astype(np.float32)
        after["done"] = np.asarray(dones["__all__"])
        after["agent_done"] = np.stack([np.asarray(dones[a]) for a in self.agents], axis=1)
        final = self._arrays(obs_f, state_f)
        if self.kind == "SmaxView":
            units = state_f.state if hasattr(state_f, "enemy_policy_state") else state_f
            alive = np.asarray(units.unit_alive)
            allies = self.env.num_allies
            final["dead_allies"] = (~alive[:, :allies]).sum(axis=1)
            final["dead_enemies"] = (~alive[:, allies:]).sum(axis=1)
        return after, final


def random_available(rng: np.random.Generator, avail: np.ndarray) -> np.ndarray:
    """Random available actions (``avail``: the reference's where it has its own, else the spec's)."""
    return (rng.random(avail.shape) * avail).argmax(-1).astype(np.int32)


def box_actions(rng: np.random.Generator, spec: mv.EnvSpec, n_envs: int) -> np.ndarray:
    """Uniform Box actions ``(n_envs, A, width)`` float32 inside the spec's bounds (infinite ones: [-1, 1])."""
    shape = (spec.n_agents, *spec.action_shape)
    low = np.broadcast_to(np.where(np.isfinite(spec.action.low), spec.action.low, -1.0), shape)
    high = np.broadcast_to(np.where(np.isfinite(spec.action.high), spec.action.high, 1.0), shape)
    return rng.uniform(low, high, (n_envs, *shape)).astype(np.float32)


def compare(env_id: str, kwargs: dict, steps: int, backend: str, seed: int = 7) -> int:
    """Steps the family (``K`` envs, or two workers of ``K`` on Subproc) and the reference side by side,
    asserting every output equal; returns the number of episodes that ended."""
    n_envs = K if backend == "dummy" else 2 * K
    model = model_of(env_id, kwargs)
    fn = make_env_fn("jaxmarl", env_id, kwargs)
    extra = {} if backend == "dummy" else {"num_workers": 2}
    ref = Reference(model, seeds=[seed + i for i in range(n_envs)])
    rng = np.random.default_rng(0)
    ended = 0
    with mv.make_vec([fn] * n_envs, backend=backend, env_seed=seed, **extra) as venv:
        r = venv.reset()
        expected = ref.reset()
        same_views(r, expected, env_id, "reset")
        for t in range(steps):
            if model.view.action_dims is None:
                actions = random_available(rng, expected.get("avail_actions", r.avail_actions))
            else:  # Box: uniform within each agent's bounds (MABrax [-1, 1], MPE [0, 1]); padding in [-1, 1]
                actions = box_actions(rng, model.spec, n_envs)
            r = venv.step(actions)
            after, final = ref.step(actions)
            where = f"{env_id} step {t}"
            np.testing.assert_array_equal(r.done, after["done"], err_msg=where)
            np.testing.assert_array_equal(r.reward, after["reward"], err_msg=where)
            np.testing.assert_array_equal(r.terminated | r.truncated,
                                          after["agent_done"] | after["done"][:, None], err_msg=where)
            same_views(r, after, env_id, where)
            for i in np.flatnonzero(r.done):
                ended += 1
                np.testing.assert_array_equal(r.final_obs[i], final["obs"][i], err_msg=where)
                if "state" in final:
                    np.testing.assert_array_equal(r.final_state[i], final["state"][i], err_msg=where)
                if "avail_actions" in final:
                    np.testing.assert_array_equal(r.final_avail_actions[i], final["avail_actions"][i], err_msg=where)
                episode = r.infos[i]["episode"]
                if "dead_allies" in final:
                    assert episode["dead_allies"] == final["dead_allies"][i]
                    assert episode["dead_enemies"] == final["dead_enemies"][i]
                    won = final["dead_enemies"][i] == model.env.num_enemies and final["dead_allies"][i] < model.env.num_allies
                    assert episode["battle_won"] == float(won)
            expected = after
    return ended


def same_views(r: mv.StepResult, expected: dict, env_id: str, where: str) -> None:
    """obs, and state, avail actions and agent mask where the reference has them, equal bit for bit."""
    np.testing.assert_array_equal(r.obs, expected["obs"], err_msg=f"{where}: obs")
    if "state" in expected:
        np.testing.assert_array_equal(r.state, expected["state"], err_msg=f"{where}: state")
    if "avail_actions" in expected:
        np.testing.assert_array_equal(r.avail_actions, expected["avail_actions"], err_msg=f"{where}: avail")
    if "agent_mask" in expected:
        np.testing.assert_array_equal(r.agent_mask, expected["agent_mask"], err_msg=f"{where}: agent_mask")

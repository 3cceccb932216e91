"""PPO in JAX with the rollout inside ``jit``: CleanRL's ``ppo_atari_envpool_xla_jax.py`` pattern
over marl_vec's ``venv.xla()``, for any family and backend (IPPO with shared parameters
for multi-agent envs).

Each update is one compiled program: a ``lax.scan`` of ``num_steps`` env steps through
``step(handle, actions)`` (the envs run on the host, in order), then GAE and the PPO
epochs. Discrete actions; unavailable actions are masked out of the policy; an agent
whose ``agent_mask`` is False adds nothing to the loss. Pure JAX (an MLP and Adam
written out), no flax or optax.

``--driver python`` runs the same algorithm with the rollout driven from Python
(``venv.step`` between jitted policy calls), for the comparison in
scripts/bench/benchmark_xla.py; with the same seed both give the same parameters.

Usage::

    python scripts/train/ppo_xla_jax.py --config gym/cartpole --num-envs 8 --updates 30
    python scripts/train/ppo_xla_jax.py --config mpe/simple_spread --backend subproc --updates 50
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import marl_vec as mv
from marl_vec.vec.xla_layout import XlaResult


@dataclass
class Args:
    config: str = "gym/cartpole"
    backend: str = "dummy"
    num_envs: int = 8
    num_steps: int = 32
    updates: int = 20
    seed: int = 1
    learning_rate: float = 2.5e-3
    gamma: float = 0.99
    gae_lambda: float = 0.95
    num_minibatches: int = 4
    update_epochs: int = 4
    clip_coef: float = 0.2
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    hidden: int = 64
    driver: str = "xla"  # "xla": the rollout inside jit; "python": venv.step from Python


def init_params(key: Any, obs_dim: int, n_actions: int, hidden: int) -> dict:
    """Actor and critic MLPs (two tanh layers each), orthogonal-ish scaled normal init."""
    def dense(k: Any, n_in: int, n_out: int, scale: float) -> dict:
        return {"w": jax.random.normal(k, (n_in, n_out)) * scale / np.sqrt(n_in), "b": jnp.zeros(n_out)}

    ks = jax.random.split(key, 6)
    return {"actor": [dense(ks[0], obs_dim, hidden, 1.4), dense(ks[1], hidden, hidden, 1.4),
                      dense(ks[2], hidden, n_actions, 0.01)],
            "critic": [dense(ks[3], obs_dim, hidden, 1.4), dense(ks[4], hidden, hidden, 1.4),
                       dense(ks[5], hidden, 1, 1.0)]}


def mlp(layers: list, x: Any) -> Any:
    for layer in layers[:-1]:
        x = jnp.tanh(x @ layer["w"] + layer["b"])
    return x @ layers[-1]["w"] + layers[-1]["b"]


def policy(params: dict, obs: Any, avail: Any) -> tuple[Any, Any]:
    """Masked logits (E, A, n) and values (E, A) of observations (E, A, obs_dim)."""
    x = obs.reshape(obs.shape[:2] + (-1,)).astype(jnp.float32)
    logits = jnp.where(avail, mlp(params["actor"], x), -1e9)
    return logits, mlp(params["critic"], x)[..., 0]


def adam(params: dict, grads: dict, state: dict, lr: float) -> tuple[dict, dict]:
    """One Adam step (b1 0.9, b2 0.999, eps 1e-5), with grads clipped to global norm 0.5."""
    norm = jnp.sqrt(sum(jnp.sum(g ** 2) for g in jax.tree_util.tree_leaves(grads)))
    grads = jax.tree_util.tree_map(lambda g: g * jnp.minimum(1.0, 0.5 / (norm + 1e-8)), grads)
    t = state["t"] + 1
    m = jax.tree_util.tree_map(lambda m, g: 0.9 * m + 0.1 * g, state["m"], grads)
    v = jax.tree_util.tree_map(lambda v, g: 0.999 * v + 0.001 * g * g, state["v"], grads)
    step = lambda p, m, v: p - lr * (m / (1 - 0.9 ** t)) / (jnp.sqrt(v / (1 - 0.999 ** t)) + 1e-5)  # noqa: E731
    return jax.tree_util.tree_map(step, params, m, v), {"t": t, "m": m, "v": v}


def sample(key: Any, params: dict, obs: Any, avail: Any) -> tuple[Any, Any, Any]:
    logits, value = policy(params, obs, avail)
    action = jax.random.categorical(key, logits)
    logp = jax.nn.log_softmax(logits)
    return action.astype(jnp.int32), jnp.take_along_axis(logp, action[..., None], -1)[..., 0], value


def ppo_update(args: Args, params: dict, opt: dict, key: Any, batch: dict, last_value: Any) -> tuple:
    """GAE over the rollout (T, E, A) and ``update_epochs`` epochs of minibatch PPO."""
    not_done = 1.0 - batch["done"][..., None].astype(jnp.float32)  # (T, E, 1): the episode went on

    def gae(carry: Any, t: Any) -> Any:
        adv, next_value = carry
        delta = batch["reward"][t] + args.gamma * next_value * not_done[t] - batch["value"][t]
        adv = delta + args.gamma * args.gae_lambda * not_done[t] * adv
        return (adv, batch["value"][t]), adv

    steps = batch["reward"].shape[0]
    _, adv = jax.lax.scan(gae, (jnp.zeros_like(last_value), last_value), jnp.arange(steps), reverse=True)
    returns = adv + batch["value"]
    flat = {k: v.reshape((-1,) + v.shape[3:]) for k, v in {**batch, "adv": adv, "ret": returns}.items()
            if k not in ("done", "reward")}
    size = flat["ret"].shape[0]
    mb = size // args.num_minibatches

    def loss_fn(p: dict, b: dict) -> Any:
        logits, value = policy(p, b["obs"][:, None], b["avail"][:, None])
        logits, value = logits[:, 0], value[:, 0]
        logp_all = jax.nn.log_softmax(logits)
        logp = jnp.take_along_axis(logp_all, b["action"][:, None], -1)[:, 0]
        mask = b["mask"].astype(jnp.float32)
        n = jnp.maximum(mask.sum(), 1.0)
        adv = (b["adv"] - b["adv"].mean()) / (b["adv"].std() + 1e-8)
        ratio = jnp.exp(logp - b["logp"])
        pg = jnp.maximum(-adv * ratio, -adv * jnp.clip(ratio, 1 - args.clip_coef, 1 + args.clip_coef))
        entropy = -(jnp.exp(logp_all) * jnp.where(b["avail"], logp_all, 0.0)).sum(-1)
        v_loss = 0.5 * (value - b["ret"]) ** 2
        return ((pg - args.ent_coef * entropy + args.vf_coef * v_loss) * mask).sum() / n

    def epoch(carry: Any, k: Any) -> Any:
        params, opt = carry
        perm = jax.random.permutation(k, size)

        def minibatch(carry: Any, i: Any) -> Any:
            params, opt = carry
            idx = jax.lax.dynamic_slice_in_dim(perm, i * mb, mb)
            grads = jax.grad(loss_fn)(params, jax.tree_util.tree_map(lambda x: x[idx], flat))
            return adam(params, grads, opt, args.learning_rate), None

        return jax.lax.scan(minibatch, (params, opt), jnp.arange(args.num_minibatches))[0], None

    (params, opt), _ = jax.lax.scan(epoch, (params, opt), jax.random.split(key, args.update_epochs))
    return params, opt


def train(args: Args) -> dict:
    """Train; return the final parameters, the parameters after each update (``history``), the mean
    episode return per update (``curve``) and the time spent."""
    venv = mv.make(args.config, num_envs=args.num_envs, backend=args.backend, env_seed=args.seed)
    first = venv.reset(seed=args.seed)
    fns = venv.xla(single_agent=False)  # (E, A, ...) for every family: one code path
    key = jax.random.PRNGKey(args.seed)
    key, k = jax.random.split(key)
    obs_dim = int(np.prod(venv.spec.obs_shape))
    params = init_params(k, obs_dim, venv.spec.action.n_actions, args.hidden)
    opt = {"t": 0, "m": jax.tree_util.tree_map(jnp.zeros_like, params),
           "v": jax.tree_util.tree_map(jnp.zeros_like, params)}
    obs, avail = jnp.asarray(first.obs), jnp.asarray(first.avail_actions)

    def record(obs: Any, avail: Any, mask: Any, action: Any, logp: Any, value: Any, r: Any) -> dict:
        return {"obs": obs, "avail": avail, "mask": mask, "action": action, "logp": logp, "value": value,
                "reward": r.reward, "done": r.done, "ep_ret": r.episode_return, "ep_done": r.done}

    def xla_update(params: dict, opt: dict, handle: Any, obs: Any, avail: Any, key: Any) -> tuple:
        def body(carry: Any, k: Any) -> Any:
            handle, obs, avail, mask = carry
            action, logp, value = sample(k, params, obs, avail)
            handle, r = fns.step(handle, action)
            return (handle, r.obs, r.avail_actions, r.agent_mask), record(obs, avail, mask, action, logp, value, r)

        key, k_roll, k_upd = jax.random.split(key, 3)
        mask = jnp.ones(obs.shape[:2], bool)
        (handle, obs, avail, _), batch = jax.lax.scan(body, (handle, obs, avail, mask),
                                                      jax.random.split(k_roll, args.num_steps))
        last_value = policy(params, obs, avail)[1]
        params, opt = ppo_update(args, params, opt, k_upd, batch, last_value)
        return params, opt, handle, obs, avail, key, batch["ep_ret"], batch["ep_done"]

    jit_sample = jax.jit(sample)
    jit_update = jax.jit(lambda p, o, k, b, lv: ppo_update(args, p, o, k, b, lv))
    jit_policy = jax.jit(policy)

    def python_update(params: dict, opt: dict, handle: Any, obs: Any, avail: Any, key: Any) -> tuple:
        key, k_roll, k_upd = jax.random.split(key, 3)
        steps = []
        mask = jnp.ones(obs.shape[:2], bool)
        for k in jax.random.split(k_roll, args.num_steps):
            action, logp, value = jit_sample(k, params, obs, avail)
            r = venv.step(np.asarray(action))
            res = XlaResult(None, None, None, None, None, jnp.asarray(r.reward), None, None, jnp.asarray(r.done),
                            episode_return=jnp.asarray(_episode_returns(r)))
            steps.append(record(obs, avail, mask, action, logp, value, res))
            obs, avail, mask = jnp.asarray(r.obs), jnp.asarray(r.avail_actions), jnp.asarray(r.agent_mask)
        batch = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *steps)
        params, opt = jit_update(params, opt, k_upd, batch, jit_policy(params, obs, avail)[1])
        return params, opt, handle, obs, avail, key, batch["ep_ret"], batch["ep_done"]

    update = jax.jit(xla_update) if args.driver == "xla" else python_update
    handle, curve, history = fns.handle, [], []
    start = time.perf_counter()
    with fns.errors():
        for _ in range(args.updates):
            params, opt, handle, obs, avail, key, ep_ret, ep_done = update(params, opt, handle, obs, avail, key)
            history.append(params)
            ep_done = np.asarray(ep_done)
            curve.append(float(np.asarray(ep_ret)[ep_done].mean()) if ep_done.any() else float("nan"))
    jax.block_until_ready(params)
    seconds = time.perf_counter() - start
    venv.close()
    return {"params": params, "history": history, "curve": curve, "seconds": seconds}


def _episode_returns(r: Any) -> np.ndarray:
    out = np.zeros(len(r.done), np.float32)
    for i in np.flatnonzero(r.done):
        if "episode" in r.infos[i]:
            out[i] = r.infos[i]["episode"]["return"]
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, value in vars(Args()).items():
        parser.add_argument("--" + name.replace("_", "-"), type=type(value), default=value)
    args = Args(**vars(parser.parse_args(argv)))
    out = train(args)
    for i, ret in enumerate(out["curve"]):
        print(f"update {i + 1:4d}  mean episode return {ret:8.2f}")
    print(f"{args.updates} updates in {out['seconds']:.2f} s ({args.driver} driver)")
    return out


if __name__ == "__main__":
    main()

"""The EvoRL face equals what EvoRL's wrappers make of the functional batch's steps, field by field.

EvoRL is not installable here (git only), so the expected ``EnvState`` of every step is
EvoRL's wrapper logic, written out below from its source
(``evorl/envs/wrappers/training_wrapper.py`` at EMI-Group/evorl 36836c0:
``EpisodeWrapper._step``, ``OneEpisodeWrapper.step``, ``VmapEnvPoolAutoResetWrapper.step``),
applied to the env's own outputs: the functional batch in the same mode, stepped with the
same key and actions (`tests.helpers.jax_face_runs`), read for its rewards, its own
terminations (an agent says "tell") and its observations; the episode limit, steps,
truncation, returns and autoreset flags are EvoRL's rules here, not the face's code.
JaxMARL's ``switch_riddle`` (K envs, a compile of about a second each), through
terminated and truncated episodes.
"""

from __future__ import annotations

import enum

import numpy as np
import pytest

from tests.helpers.jaxmarl_reference import K  # first: it sets XLA_FLAGS before JAX starts

pytest.importorskip("jaxmarl", reason="the jax extra is not installed: pip install 'marl_vec[jax]'")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import marl_vec.jax as mvj  # noqa: E402
from marl_vec.jax.faces.evorl import MODES, EvoRLLike, evorl_env  # noqa: E402
from tests.helpers.jax_face_runs import ENV, SEED, batch_run, ends, scan  # noqa: E402

LENGTH, GAMMA = 4, 0.9


class AutoresetMode(enum.Enum):
    """EvoRL's own enum, as evorl/envs/wrappers/training_wrapper.py defines it."""

    NORMAL = "normal"
    FAST = "fast"
    DISABLED = "disabled"
    ENVPOOL = "envpool"


def evorl_by_hand(mode: str, first, steps, discount: float | None) -> list[dict]:
    """EvoRL's EnvState (its obs, reward, done and info) of every step, env by env, from the env's outputs."""
    a = first.reward.shape[1]
    state = {"obs": first.obs, "reward": np.zeros((K, a), np.float32), "done": np.zeros(K, np.float32),
             "steps": np.zeros(K, np.int32), "termination": np.zeros(K, np.float32),
             "truncation": np.zeros(K, np.float32), "ori_obs": np.zeros_like(first.obs)}
    if discount is not None:
        state["episode_return"] = np.zeros((K, a), np.float32)
    if mode == "envpool":
        state["autoreset"] = np.zeros(K, np.float32)
    out = [state]
    for t in range(steps.done.shape[0]):
        prev, new = out[-1], {k: v.copy() for k, v in out[-1].items()}
        for i in range(K):
            prev_done = prev["done"][i]
            if mode == "disabled" and prev_done:  # OneEpisodeWrapper: state.replace()
                continue
            if mode == "envpool" and prev_done:  # the reset state, with autoreset = prev_done
                new["obs"][i], new["reward"][i], new["done"][i] = steps.obs[t, i], 0.0, 0.0
                new["steps"][i] = new["termination"][i] = new["truncation"][i] = 0
                new["ori_obs"][i] = 0.0
                if discount is not None:
                    new["episode_return"][i] = 0.0
                new["autoreset"][i] = 1.0
                continue
            # EpisodeWrapper._step over the env's own step (its done: the env's termination).
            steps_i = prev["steps"][i] * (1 - int(prev_done)) + 1
            env_done = float(steps.terminated[t, i].any())
            new["steps"][i] = steps_i
            new["termination"][i] = env_done
            new["truncation"][i] = 1 - env_done if steps_i >= LENGTH else 0.0
            new["done"][i] = 1.0 if steps_i >= LENGTH else env_done
            new["ori_obs"][i] = steps.final_obs[t, i]  # the env's own next obs, before any reset
            new["reward"][i] = steps.reward[t, i]
            # Normal and fast: the obs after the autoreset; envpool: the env's own (it resets next step).
            new["obs"][i] = steps.obs[t, i]
            if discount is not None:
                ret = prev["episode_return"][i] * (1 - prev_done)
                new["episode_return"][i] = ret + np.float32(discount) ** np.float32(steps_i - 1) * steps.reward[t, i]
            if mode == "envpool":
                new["autoreset"][i] = 0.0
        out.append(new)
    return out


def face_run(mode: str, discount: float | None = GAMMA, record_ori_obs: bool = True):
    env = evorl_env(ENV, LENGTH, K, getattr(AutoresetMode, mode.upper()), discount, record_ori_obs)
    options = (("gamma", discount),) if discount is not None else ()
    acts, first, steps = batch_run(MODES[mode], (*options, ("time_limit", LENGTH)))
    face_first, face_steps = scan(lambda key: (lambda s: (s, s))(env.reset(key)),
                                  lambda s, a: (lambda n: (n, n))(env.step(s, a)), acts)
    return env, acts, first, steps, face_first, face_steps


@pytest.mark.parametrize("mode,discount", [("normal", GAMMA), ("envpool", GAMMA), ("disabled", None),
                                           pytest.param("fast", 1.0, marks=pytest.mark.slow)])  # fast: normal's ends
def test_the_face_is_evorls_env_state_of_the_batch(mode, discount):
    env, _, first, steps, face_first, face_steps = face_run(mode, discount)
    terminated, truncated = ends(steps)
    assert terminated >= 1 and truncated >= 1
    assert env.num_envs == K and env.batch.autoreset == MODES[mode]
    expected = evorl_by_hand(mode, first, steps, discount)
    for t, want in enumerate(expected):
        got = face_first if t == 0 else jax.tree.map(lambda x: x[t - 1], face_steps)
        assert sorted(got.info) == sorted(k for k in want if k not in ("obs", "reward", "done")), t
        for name, value in want.items():
            mine = getattr(got, name) if name in ("obs", "reward", "done") else got.info[name]
            assert mine.dtype == value.dtype, f"step {t - 1}: {name} {mine.dtype} {value.dtype}"
            if name == "episode_return":
                np.testing.assert_allclose(mine, value, rtol=1e-6, err_msg=f"step {t - 1}: {name}")
            else:
                np.testing.assert_array_equal(mine, value, err_msg=f"step {t - 1}: {name}")
    done = np.stack([w["done"] for w in expected[1:]])
    if mode == "disabled":  # every env ends once, then repeats its last state
        assert done[-1].all() and (np.diff(done, axis=0) >= 0).all()
    else:
        trunc = np.stack([w["truncation"] for w in expected[1:]])
        term = np.stack([w["termination"] for w in expected[1:]])
        assert (trunc * term == 0).all() and trunc.sum() >= 2 and term.sum() >= 2


def test_attribute_and_key_access_and_dict_actions():
    env = evorl_env(ENV, LENGTH, K, "normal", GAMMA)
    state = env.reset(jax.random.PRNGKey(SEED))
    assert state.info.steps is state.info["steps"] and "ori_obs" in state.info and "autoreset" not in state.info
    acts = np.array([[0, 1, 2]] * K, np.int32)
    step = jax.jit(env.step)
    by_array = step(state, jnp.asarray(acts))
    by_dict = step(state, {agent: jnp.asarray(acts[:, i]) for i, agent in enumerate(env.agents)})
    for x, y in zip(jax.tree.leaves(by_array), jax.tree.leaves(by_dict), strict=True):
        np.testing.assert_array_equal(x, y)
    assert state.replace(done=by_array.done).done is by_array.done
    assert len(jax.tree.leaves(state.info)) == 5 and state.info.replace(steps=1).steps == 1


def test_bad_input_fails_naming_what_is_allowed():
    with pytest.raises(ValueError, match=r"autoreset_mode='reset'; allowed: EvoRL's AutoresetMode or its value: "
                                         r"normal, fast, envpool, disabled"):
        evorl_env(ENV, autoreset_mode="reset")
    with pytest.raises(TypeError, match=r"EvoRLLike\('switch_riddle'\): allowed: a marl_vec.jax.batch"):
        EvoRLLike(ENV)
    env = evorl_env(ENV, parallel=K)
    state = env.reset(jax.random.PRNGKey(SEED))
    with pytest.raises(AttributeError, match=r"no 'autoreset' .* it is there with autoreset_mode='envpool' "
                                             r"\(the batch's next_step\) only"):
        _ = state.info.autoreset
    with pytest.raises(AttributeError, match=r"no 'episode_return' .*it is there with a discount only"):
        _ = state.info.episode_return
    with pytest.raises(ValueError, match=r"actions keyed by \['agent_0'\]; expected one per agent: "
                                         r"\['agent_0', 'agent_1', 'agent_2'\]"):
        env.step(state, {"agent_0": jnp.zeros(K, jnp.int32)})
    with pytest.raises(ValueError, match=r"actions of shape \(4, 2\); expected \(4, 3\): ints \(E, A\)"):
        jax.eval_shape(env.step, state, jax.ShapeDtypeStruct((K, 2), jnp.int32))
    assert "ori_obs" not in evorl_env(ENV, parallel=K, record_ori_obs=False).reset(jax.random.PRNGKey(0)).info
    assert mvj.batch(ENV, K).gamma is None

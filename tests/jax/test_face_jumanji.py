"""The Jumanji / Mava face equals the functional batch it wraps, built step by step with Jumanji's own types.

Each case steps the face and the functional batch (`tests.helpers.jax_face_runs`) with
the same key and actions through terminated and truncated episodes of JaxMARL's
``switch_riddle`` (K envs, a compile of about a second each), and builds what every
env's step must be with Jumanji's own constructors (``restart``, ``transition``,
``termination``, ``truncation``) from the batch's fields: step types, rewards,
discounts (0 on termination, 1 on truncation), Mava's observation, the true next
observation in ``extras``, Mava's episode metrics. Then Jumanji's own wrappers over the
face: ``VmapWrapper`` over one env plays the batch, and ``AutoResetWrapper`` over an env
that never resets (``one_episode``) ends its episodes as the face does.
"""

from __future__ import annotations

import functools
import subprocess
import sys

import numpy as np
import pytest

from tests.helpers.jaxmarl_reference import K  # first: it sets XLA_FLAGS before JAX starts

pytest.importorskip("jaxmarl", reason="the jax extra is not installed: pip install 'marl_vec[jax]'")
pytest.importorskip("jumanji", reason="the jumanji extra is not installed: pip install 'marl_vec[jumanji]'")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jumanji import types as jt  # noqa: E402
from jumanji.wrappers import AutoResetWrapper, VmapWrapper  # noqa: E402

import marl_vec.jax as mvj  # noqa: E402
from marl_vec.jax.faces.jumanji import Observation, ObservationGlobalState, jumanji_env  # noqa: E402
from tests.helpers.jax_face_runs import ENV, SEED, batch_run, ends, scan  # noqa: E402

LIMIT = (("time_limit", 4),)


def _env(steps, i):
    return jax.tree.map(lambda x: x[i], steps)


def expected_timesteps(mode: str, first, steps, global_state: bool = False) -> list[list]:
    """What each env's TimeStep must be at reset and at every step, from the batch's fields alone."""
    resets_in_step = mode not in ("next_step", "one_episode")
    a = first.reward.shape[1]
    out = []
    count = np.zeros(K, int)  # the running episode's steps
    held_len, held_ret = np.zeros(K, int), np.zeros(K, np.float32)
    returns = np.zeros((K, a))

    def observation(obs, state, avail, n):
        step_count = np.full(a, n, np.int32)
        if global_state:
            return ObservationGlobalState(obs, avail, np.broadcast_to(state, (a, *state.shape)), step_count)
        return Observation(obs, avail, step_count)

    row = []
    for i in range(K):
        obs = observation(first.obs[i], first.state[i], first.avail_actions[i], 0)
        row.append(jt.restart(obs, extras={"next_obs": obs}, shape=(a,), dtype=np.float32))
    out.append(row)
    for t in range(steps.done.shape[0]):
        ts, row = _env(steps, t), []
        for i in range(K):
            done, term, reset_step = bool(ts.done[i]), ts.terminated[i], bool(ts.autoreset[i])
            if ts.episode.valid[i]:
                returns[i] += ts.reward[i]
                count[i] += 1
                held_len[i], held_ret[i] = count[i], returns[i].mean()
                returns[i], count[i] = 0.0, 0
            elif not reset_step and not done:
                returns[i] += ts.reward[i]
                count[i] += 1
            final_count = held_len[i] if done else count[i]
            next_obs = observation(ts.final_obs[i], ts.final_state[i], ts.final_avail_actions[i], final_count)
            obs = observation(ts.obs[i], ts.state[i], ts.avail_actions[i], count[i] if resets_in_step else final_count)
            args = dict(reward=ts.reward[i], observation=obs, extras={"next_obs": next_obs}, shape=(a,),
                        dtype=np.float32)
            if done and term.all():
                step = jt.termination(**args)
            elif done and not term.any():
                step = jt.truncation(**args)
            elif done:  # some agents terminated, the others cut: each agent's own discount
                step = jt.TimeStep(step_type=jt.StepType.LAST, reward=ts.reward[i], observation=obs,
                                   discount=1.0 - term.astype(np.float32), extras=args["extras"])
            elif reset_step:
                step = jt.restart(obs, extras={"next_obs": next_obs}, shape=(a,), dtype=np.float32)
            else:
                step = jt.transition(**args)
            step.extras["episode_metrics"] = (held_ret[i], held_len[i], bool(ts.episode.valid[i]))
            row.append(step)
        out.append(row)
    return out


def assert_face_is(face_steps: list, expected: list) -> None:
    """Every env's step of the face (stacked numpy leaves) equals the expected Jumanji TimeStep."""
    for t, row in enumerate(expected):
        for i, want in enumerate(row):
            got = jax.tree.map(lambda x: x[t, i], face_steps)
            where = f"step {t - 1} env {i}"
            assert int(got.step_type) == int(want.step_type), where
            np.testing.assert_array_equal(got.reward, want.reward, err_msg=where)
            np.testing.assert_array_equal(got.discount, want.discount, err_msg=where)
            assert got.discount.dtype == np.float32 and got.step_type.dtype == np.int8
            assert type(got.observation) is type(want.observation), where
            for name in want.observation._fields:
                np.testing.assert_array_equal(getattr(got.observation, name), getattr(want.observation, name),
                                              err_msg=f"{where}: observation.{name}")
                mine, theirs = got.extras["next_obs"], want.extras["next_obs"]
                np.testing.assert_array_equal(getattr(mine, name), getattr(theirs, name),
                                              err_msg=f"{where}: next_obs.{name}")
            for x, y in zip(got.extras["real_next_obs"], got.extras["next_obs"], strict=True):
                np.testing.assert_array_equal(x, y, err_msg=f"{where}: real_next_obs")
            if "episode_metrics" in want.extras:
                ret, length, terminal = want.extras["episode_metrics"]
                metrics = got.extras["episode_metrics"]
                np.testing.assert_allclose(metrics["episode_return"], ret, rtol=1e-6, err_msg=where)
                assert (int(metrics["episode_length"]), bool(metrics["is_terminal_step"])) == (length, terminal), where


@functools.lru_cache(maxsize=None)  # each face compiles once per session
def face_run(mode: str, options: tuple = (), global_state: bool = False):
    """(face, the batch's reset and steps, the face's TimeSteps from its reset on, each env's key after each step)."""
    face = jumanji_env(ENV, K, mode, global_state=global_state, **dict(options))
    acts, first, steps = batch_run(mode, options)
    with_keys = (lambda out: (out[0], (out[1], out[0].key)))
    (face_first, _), (face_steps, keys) = scan(lambda key: with_keys(face.reset(key)),
                                               lambda s, a: with_keys(face.step(s, a)), acts)
    return face, first, steps, jax.tree.map(lambda x, y: np.concatenate([x[None], y]), face_first, face_steps), keys


@pytest.mark.parametrize("mode,options,global_state", [
    ("same_step", LIMIT, False), ("next_step", (), True),
    pytest.param("one_episode", LIMIT, False, marks=pytest.mark.slow)])  # its concern: the AutoResetWrapper test
def test_the_face_is_the_batch_as_jumanjis_timesteps(mode, options, global_state):
    face, first, steps, face_steps, _ = face_run(mode, options, global_state)
    terminated, truncated = ends(steps)
    assert terminated >= 2 and truncated >= 2 if mode != "one_episode" else terminated + truncated == K
    assert_face_is(face_steps, expected_timesteps(mode, first, steps, global_state))
    last = face_steps.step_type == jt.StepType.LAST
    # discount 0 where the episode terminated, 1 where it was truncated (Mava's wrapper: 0 on both)
    cut = np.concatenate([np.zeros((1, K, 3), bool), steps.truncated])
    truncated_end, terminated_end = last & cut.any(-1), last & ~cut.any(-1)
    assert (face_steps.discount[truncated_end] == 1).all() and (face_steps.discount[terminated_end] == 0).all()
    if mode == "next_step":  # dm_env's order: the step after LAST is FIRST
        after = np.flatnonzero(last[:-1].ravel())
        assert (face_steps.step_type[1:].ravel()[after] == jt.StepType.FIRST).all()


def test_mavas_and_jumanjis_specs_hold_the_observations():
    face, _, _, face_steps, _ = face_run("same_step", LIMIT)
    one = jumanji_env(ENV, time_limit=4)
    assert (one.num_agents, one.time_limit, one.action_dim, one.num_envs, face.num_envs) == (3, 4, 3, None, K)
    for t in (0, 5, 17):
        obs = jax.tree.map(lambda x: x[t, 1], face_steps.observation)
        one.observation_spec.validate(obs)
        one.discount_spec.validate(face_steps.discount[t, 1])
        one.reward_spec.validate(face_steps.reward[t, 1])
    one.action_spec.validate(np.array([0, 2, 1], np.int32))
    with pytest.raises(ValueError):
        one.action_spec.validate(np.array([0, 3, 1], np.int32))  # 3 actions: 3 is out of bounds


def test_box_actions_and_smax_stats_take_mavas_layout():
    """Traced only (no compile): Box MPE's all-ones action mask and bounded action spec, SMAX's stats."""
    box = jumanji_env("jax_mpe/simple_spread", K, action_type="Continuous", global_state=True)
    state, ts = jax.eval_shape(box.reset, jax.random.PRNGKey(0))
    assert ts.observation.action_mask.shape == (K, 3, 5) and ts.observation.global_state.shape == (K, 3, 54)
    assert box.action_dim == 5 and box.action_spec.shape == (3, 5) and box.time_limit == 25
    _, ts1 = jax.eval_shape(box.step, state, jax.ShapeDtypeStruct((K, 3, 5), jnp.float32))
    assert jax.tree.structure(ts1) == jax.tree.structure(ts)
    smax = jumanji_env("smax/3m", K)
    _, ts = jax.eval_shape(smax.reset, jax.random.PRNGKey(0))
    assert sorted(ts.extras["env_metrics"]) == ["battle_won", "dead_allies", "dead_enemies", "won_episode"]
    assert ts.observation.action_mask.shape == (K, 3, 8)


def test_one_env_under_jumanjis_vmap_wrapper_plays_the_batch():
    """Mava's way: one env, vmapped; over keys env_keys(key, K) it plays the batch's K envs."""
    face = VmapWrapper(jumanji_env(ENV, time_limit=4))
    acts, _, _ = batch_run("same_step", LIMIT)
    batched = face_run("same_step", LIMIT)[3]
    first, steps = scan(lambda key: face.reset(mvj.env_keys(key, K)), face.step, acts)
    vmapped = jax.tree.map(lambda x, y: np.concatenate([x[None], y]), first, steps)
    for path, x, y in zip(jax.tree_util.tree_leaves_with_path(vmapped), jax.tree.leaves(vmapped),
                          jax.tree.leaves(batched), strict=True):
        np.testing.assert_array_equal(x, y, err_msg=jax.tree_util.keystr(path[0]))


def test_jumanjis_auto_reset_wrapper_over_an_env_that_never_resets():
    """Jumanji's own AutoResetWrapper over a ``one_episode`` env: up to each env's first end it is the
    face's ``same_step``; at the end its extras["next_obs"] is the episode's last observation and its
    observation the reset that Jumanji draws from split(state.key)[0], the env's own reset of that key."""
    inner = jumanji_env(ENV, autoreset="one_episode", time_limit=4)
    wrapped = VmapWrapper(AutoResetWrapper(inner, next_obs_in_extras=True))
    acts, _, _ = batch_run("same_step", LIMIT)
    _, _, _, face_steps, keys = face_run("same_step", LIMIT)  # keys: each env's key after each step
    first, steps = scan(lambda key: wrapped.reset(mvj.env_keys(key, K)), wrapped.step, acts)
    theirs = jax.tree.map(lambda x, y: np.concatenate([x[None], y]), first, steps)
    reset = jax.jit(inner.reset)
    for i in range(K):
        end = int(np.argmax(theirs.step_type[1:, i] == jt.StepType.LAST)) + 1
        assert 1 <= end < acts.shape[0]
        for name in ("step_type", "reward", "discount"):
            np.testing.assert_array_equal(getattr(theirs, name)[:end + 1, i], getattr(face_steps, name)[:end + 1, i])
        np.testing.assert_array_equal(theirs.observation.agents_view[:end, i],
                                      face_steps.observation.agents_view[:end, i])
        np.testing.assert_array_equal(theirs.extras["next_obs"].agents_view[:end + 1, i],
                                      face_steps.extras["next_obs"].agents_view[:end + 1, i])
        _, reset_ts = reset(jax.random.split(keys[end - 1, i])[0])
        np.testing.assert_array_equal(theirs.observation.agents_view[end, i], reset_ts.observation.agents_view)


def test_bad_input_fails_naming_what_is_allowed():
    one = jumanji_env(ENV)
    state, _ = one.reset(jax.random.PRNGKey(SEED))
    with pytest.raises(ValueError, match=r"action of shape \(4, 3\); expected \(3,\): ints \(A,\) for one env "
                                         r"\(vmap the env for a batch, or make it with num_envs=E\)"):
        one.step(state, jnp.zeros((4, 3), jnp.int32))
    many = jumanji_env(ENV, num_envs=K)
    state, _ = jax.eval_shape(many.reset, jax.random.PRNGKey(SEED))
    with pytest.raises(ValueError, match=r"actions of shape \(3,\); expected \(4, 3\): ints \(E, A\)"):
        jax.eval_shape(many.step, state, jax.ShapeDtypeStruct((3,), jnp.int32))
    with pytest.raises(ValueError, match=r"\['num_envs', 'time_limit'\] given with a Batch; allowed: the batch alone"):
        jumanji_env(mvj.batch(ENV, K), num_envs=K, time_limit=3)
    with pytest.raises(TypeError, match=r"env=3; allowed: a jaxmarl family id \(str\) or a marl_vec.jax.batch"):
        jumanji_env(3)
    with pytest.raises(ValueError, match="unknown autoreset mode 'normal'"):
        jumanji_env(ENV, autoreset="normal")


def test_without_jumanji_the_import_names_the_extra():
    """Where Jumanji is not installed, importing the face says which extra installs it."""
    code = ("import sys; sys.modules['jumanji'] = None\n"
            "try:\n    import marl_vec.jax.faces.jumanji\n"
            "except Exception as exc:\n    print(type(exc).__name__, exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert "MissingExtraError" in out.stdout, out.stdout + out.stderr
    assert "pip install 'marl_vec[jumanji]'" in out.stdout and "Jumanji / Mava face" in out.stdout, out.stdout

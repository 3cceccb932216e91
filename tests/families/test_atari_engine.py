"""Atari on ale-py's C++ engine (``engine: ale_vector``): one native call steps a whole group.

Compared with ale-py's ``AtariVectorEnv`` used directly (bit for bit: frames,
raw rewards, flags, final frames), with the python path where they must agree
(with no random noops and no sticky actions both are deterministic and give the
same observations, rewards, flags and episodes; otherwise seeding determinism,
episode accounting, shapes and dtypes), across backends, and its errors.
"""

from __future__ import annotations

import numpy as np
import pytest

ale_py = pytest.importorskip("ale_py", reason="the atari extra is not installed")
pytest.importorskip("cv2", reason="the atari extra is not installed")

import marl_vec as mv  # noqa: E402
from marl_vec.envs.atari import AleVectorAtariAdapter, make_atari  # noqa: E402
from marl_vec.core.group import EnvFinishedError  # noqa: E402

BREAKOUT = "ALE/Breakout-v5"  # random play loses its 5 lives in ~150-250 steps: episode ends in short tests


def engine_fn(env_id: str = BREAKOUT, **kwargs):
    return lambda: make_atari(env_id, preprocess=True, engine="ale_vector", **kwargs)


def python_fn(env_id: str = BREAKOUT, **kwargs):
    return lambda: make_atari(env_id, preprocess=True, engine="python", **kwargs)


def record(venv: mv.VecEnv, actions: np.ndarray, seed: int | None = None) -> list[tuple]:
    """The reset observation, then per step: obs, final_obs where done, reward, flags, episode infos."""
    out: list[tuple] = [(venv.reset(seed=seed).obs.copy(),)]
    for a in actions:
        r = venv.step(a)
        finals = r.final_obs[r.done].copy() if r.final_obs is not None else None
        episodes = [(i, info["episode"]["length"], info["episode"]["return"], info["episode"]["score"])
                    for i, info in enumerate(r.infos) if "episode" in info]
        out.append((r.obs.copy(), finals, r.reward.copy(), r.terminated.copy(), r.truncated.copy(), r.done.copy(), episodes))
    return out


def assert_same_records(a: list[tuple], b: list[tuple]) -> None:
    assert len(a) == len(b)
    for t, (x, y) in enumerate(zip(a, b)):
        for p, q in zip(x, y):
            if isinstance(p, np.ndarray):
                assert p.dtype == q.dtype and np.array_equal(p, q), f"step {t}"
            else:
                assert p == q, f"step {t}"


def random_actions(steps: int, num_envs: int, n_actions: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, n_actions, size=(steps, num_envs, 1))


# -- against the engine used directly ---------------------------------------------


@pytest.mark.parametrize("options, limit", [
    ({}, 800),  # 800 frames: 200 steps, so both flags occur
    ({"frame_stack": 1, "clip_rewards": False}, 800),
    # Episodes of 2 and 1 steps (the noop starts are not counted): their stacks and final
    # stacks still hold the engine's zero padding, which must read as the reset frame.
    ({}, 8),
    ({"frame_stack": 5, "clip_rewards": False}, 4),
])
def test_bit_equal_to_ale_vector_env_used_directly(options, limit):
    """Same seeds (env_seed + i), same actions: every frame, raw reward, flag and final frame of
    AtariVectorEnv (SameStep autoreset, single frames stacked by the test), with sticky actions,
    noop starts and a frame limit."""
    from ale_py.vector_env import AtariVectorEnv

    E, steps, seed = 3, 420, 7
    ours = mv.DummyVecEnv([engine_fn(max_num_frames_per_episode=limit, **options)] * E, env_seed=seed)
    direct = AtariVectorEnv(
        "breakout", E, autoreset_mode="SameStep", reward_clipping=False, use_fire_reset=False,
        stack_num=1, noop_max=30, repeat_action_probability=0.25, max_num_frames_per_episode=limit,
    )
    actions = random_actions(steps, E, 4)
    stack_n = options.get("frame_stack", 4)
    obs = ours.reset().obs
    frames, _ = direct.reset(seed=np.arange(seed, seed + E))
    stacks = np.repeat(frames, stack_n, axis=1)  # a stack starts as the reset frame, repeated
    assert np.array_equal(obs.reshape(stacks.shape), stacks)
    clip = options.get("clip_rewards", True)
    score = np.zeros(E)
    ends = {"terminated": 0, "truncated": 0}
    for a in actions:
        r = ours.step(a)
        frames, reward, terminated, truncated, info = direct.step(a[:, 0].astype(np.int64))
        done = terminated | truncated
        last = np.where(done[:, None, None, None], info["final_obs"], frames) if done.any() else frames
        stacks = np.concatenate([stacks[:, 1:], last], axis=1)
        score += reward
        assert np.array_equal(r.reward[:, 0], np.sign(reward) if clip else reward) and r.reward.dtype == np.float64  # a gymnasium env: float64 rewards
        assert np.array_equal(r.terminated[:, 0], terminated) and np.array_equal(r.truncated[:, 0], truncated)
        assert np.array_equal(r.done, done)
        if done.any():
            assert np.array_equal(r.final_obs[done].reshape(stacks[done].shape), stacks[done])
        for i in np.flatnonzero(done):
            assert r.infos[i]["episode"]["score"] == score[i]
            score[i] = 0.0
            stacks[i] = frames[i]  # the reset frame, repeated
            ends["terminated" if terminated[i] else "truncated"] += 1
        assert np.array_equal(r.obs.reshape(stacks.shape), stacks)
    if limit > 100:
        assert ends["terminated"] >= 2 and ends["truncated"] >= 2, ends
    else:
        assert ends["truncated"] >= 3 * E * 10, ends  # many short episodes: young stacks at their end
    ours.close()


# -- against the python path ------------------------------------------------------


@pytest.mark.parametrize("options", [{}, {"frame_stack": 1}, {"grayscale": False, "screen_size": 64, "clip_rewards": False}])
def test_deterministic_game_equals_the_python_path(options):
    """No noops, no sticky actions: both engines are deterministic and agree bit for bit
    (observations with the stack padded by the reset frame, final_obs, rewards, flags, episodes)."""
    kwargs = dict(noop_max=0, repeat_action_probability=0.0, **options)
    actions = random_actions(400, 2, 4, seed=1)
    runs = []
    for fn in (engine_fn(**kwargs), python_fn(**kwargs)):
        with mv.DummyVecEnv([fn] * 2, env_seed=0) as venv:
            runs.append(record(venv, actions))
    assert sum(len(step[-1]) for step in runs[0][1:]) >= 3, "the test should cover episode ends"
    assert_same_records(*runs)


def test_spec_equals_the_python_path():
    for options in ({}, {"frame_stack": 1, "grayscale": False}, {"max_episode_steps": 50}):
        ours, theirs = engine_fn(**options)(), python_fn(**options)()
        assert isinstance(ours, AleVectorAtariAdapter)
        for field in ("agents", "obs_shape", "obs_dtype", "state_shape", "state_dtype", "n_actions", "episode_limit", "stats"):
            assert getattr(ours.spec, field) == getattr(theirs.spec, field), (options, field)
        theirs.close()
    assert engine_fn("ALE/Pong-v5")().spec.episode_limit == 27000


def test_seeding_env_i_is_env_seed_plus_i_and_runs_repeat():
    actions = random_actions(150, 3, 4, seed=2)
    with mv.DummyVecEnv([engine_fn()] * 3, env_seed=10) as venv:
        batch = record(venv, actions)
    with mv.DummyVecEnv([engine_fn()] * 3, env_seed=10) as venv:
        assert_same_records(batch, record(venv, actions))
    with mv.DummyVecEnv([engine_fn()], env_seed=12) as venv:  # env 2 of the batch, alone
        alone = record(venv, actions[:, 2:])
    assert np.array_equal(batch[0][0][2:], alone[0][0])
    for x, y in zip(batch[1:], alone[1:]):
        assert np.array_equal(x[0][2:], y[0]) and np.array_equal(x[2][2:], y[2])
    with mv.DummyVecEnv([engine_fn()] * 3, env_seed=11) as venv:
        other = record(venv, actions)
    assert any(not np.array_equal(x[0], y[0]) for x, y in zip(batch[1:], other[1:]))  # noop starts differ
    with mv.DummyVecEnv([engine_fn()] * 3, env_seed=10) as venv:  # reset(seed=...) reseeds
        venv.reset()
        venv.step(actions[0])
        assert_same_records(batch, record(venv, actions, seed=10))


def test_time_limit_truncates_and_scores_raw_while_rewards_are_clipped():
    limit = 30
    with mv.DummyVecEnv([engine_fn("ALE/Pong-v5", max_episode_steps=limit)] * 2, env_seed=0) as venv:
        assert venv.spec.episode_limit == limit
        venv.reset()
        for t in range(1, 2 * limit + 1):
            r = venv.step(np.zeros((2, 1), dtype=np.int64))
            ended = t % limit == 0
            assert (r.done == ended).all() and (r.truncated[:, 0] == ended).all() and not r.terminated.any()
            if ended:
                assert [info["episode"]["length"] for info in r.infos] == [limit, limit]
    # Pong's points: a score of -n (raw) against a return of -n from clipped rewards of -1.
    with mv.DummyVecEnv([engine_fn("ALE/Pong-v5", max_episode_steps=400)], env_seed=0) as venv:
        venv.reset()
        for _ in range(400):
            r = venv.step(np.zeros((1, 1), dtype=np.int64))
            assert set(np.unique(r.reward).tolist()) <= {-1.0, 0.0, 1.0}
        episode = r.infos[0]["episode"]
        assert episode["score"] == episode["return"] < 0


# -- autoreset modes --------------------------------------------------------------


def test_disabled_mode_waits_for_reset_and_continues_the_engine_stream():
    actions = random_actions(400, 2, 4, seed=3)
    with mv.DummyVecEnv([engine_fn()] * 2, env_seed=0, autoreset="disabled") as venv:
        venv.reset()
        for a in actions:
            r = venv.step(a)
            if r.done.any():
                break
        else:
            raise AssertionError("no episode end")
        ended = int(np.flatnonzero(r.done)[0])
        assert r.final_obs is None
        with pytest.raises(EnvFinishedError, match=f"env {ended} finished its episode"):
            venv.step(a)
        obs = venv.reset(env_ids=[ended]).obs[ended]
        assert obs.shape == (1, 4, 84, 84) and (obs[0, 0] == obs[0, 3]).all()  # a fresh stack
    # The same reset in same_step mode gives the same observation: the engine's own autoreset.
    with mv.DummyVecEnv([engine_fn()] * 2, env_seed=0) as venv:
        venv.reset()
        for a in actions:
            r = venv.step(a)
            if r.done.any():
                break
        assert np.array_equal(r.obs[ended], obs)


@pytest.mark.parametrize("mode, why", [
    ("next_step", "leaves finished envs out of a step"),
    ("one_episode", "leaves finished envs out of a step"),
])
def test_modes_the_engine_cannot_serve_are_refused_at_construction(mode, why):
    with pytest.raises(ValueError, match=f"autoreset='{mode}' is not supported by the ale_vector Atari engine: it {why}.*"
                                         "allowed: same_step, disabled, or set engine: python"):
        mv.DummyVecEnv([engine_fn()] * 2, autoreset=mode)


def test_fast_mode_is_refused_at_construction():
    with pytest.raises(ValueError, match="autoreset='fast' needs an adapter that can snapshot.*AleVectorAtariAdapter cannot"):
        mv.DummyVecEnv([engine_fn()] * 2, autoreset="fast")


# -- backends ---------------------------------------------------------------------


def test_subproc_workers_each_host_an_engine_bitwise_like_dummy():
    actions = random_actions(300, 4, 4, seed=4)
    fn = engine_fn(engine_threads=1)
    with mv.DummyVecEnv([fn] * 4, env_seed=5) as venv:
        dummy = record(venv, actions)
    with mv.SubprocVecEnv([fn] * 4, env_seed=5, num_workers=2) as venv:
        assert_same_records(dummy, record(venv, actions))
    assert sum(len(step[-1]) for step in dummy[1:]) >= 2, "the test should cover episode ends"


# Slow (~18 s: a Ray cluster of its own): test_subproc_workers_each_host_an_engine_bitwise_like_dummy covers
# an engine per worker process, tests/backends/test_ray.py Ray's actors.
@pytest.mark.slow
def test_ray_actors_each_host_an_engine_bitwise_like_dummy(tmp_path_factory):
    """Both transports: the same-machine link and plain Ray calls."""
    ray = pytest.importorskip("ray", reason="the ray extra is not installed")
    import os

    from marl_vec.vec.ray.vec_env import RayVecEnv

    actions = random_actions(250, 4, 4, seed=6)
    fn = engine_fn(engine_threads=1)
    with mv.DummyVecEnv([fn] * 4, env_seed=5) as venv:
        dummy = record(venv, actions)
    assert sum(len(step[-1]) for step in dummy[1:]) >= 1, "the test should cover episode ends"
    if ray.is_initialized():  # pragma: no cover - another module left one open
        ray.shutdown()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ray.init(num_cpus=2, include_dashboard=False, _temp_dir=str(tmp_path_factory.mktemp("ray")),  # short: a socket path
             runtime_env={"env_vars": {"PYTHONPATH": root}})
    try:
        for transport in ("auto", "ray"):
            with RayVecEnv([fn] * 4, env_seed=5, num_workers=2, transport=transport) as venv:
                assert_same_records(dummy, record(venv, actions))
    finally:
        ray.shutdown()


def test_config_engine_option_and_one_engine_per_group():
    cfg = {"env": {"family": "atari", "id": BREAKOUT, "kwargs": {"preprocess": True, "engine": "ale_vector", "engine_threads": 2}},
           "vec": {"num_envs": 3, "backend": "dummy"}}
    with mv.make(cfg) as venv:
        r = venv.reset()
        assert r.obs.shape == (3, 1, 4, 84, 84) and r.obs.dtype == np.uint8
        assert r.state.shape == (3, 4, 84, 84) and r.avail_actions.all() and r.agent_mask.all()
        engines = {id(a.engine) for a in venv.group.adapters}  # one native engine for the group
        assert len(engines) == 1
        assert venv.group.adapters[2].engine.config.threads == 2  # noqa: SLF001


def test_adapter_alone_runs_on_an_engine_of_one():
    env = engine_fn(noop_max=0, repeat_action_probability=0.0)()
    with mv.DummyVecEnv([python_fn(noop_max=0, repeat_action_probability=0.0)]) as venv:
        expected = venv.reset().obs[0, 0]
        step = venv.step(np.ones((1, 1), dtype=np.int64))
    from marl_vec.core.buffers import BatchBuffers

    buffers = BatchBuffers(env.spec, 1)
    row = buffers.rows(0, 1)[0]
    env.bind(row)
    env.reset(seed=0)
    assert np.array_equal(row.obs[0], expected)
    row.actions[0] = 1
    env.step(row.actions)
    assert np.array_equal(row.obs[0], step.obs[0, 0]) and row.reward[0] == step.reward[0, 0]
    env.close()


# -- errors -----------------------------------------------------------------------


@pytest.mark.parametrize("kwargs, message", [
    ({"engine": "cuda"}, "unknown atari engine 'cuda'; allowed: python, ale_vector, envpool, auto"),
    ({"engine": "ale_vector", "preprocess": False}, "engine 'ale_vector' cannot run 'ALE/Pong-v5': it always preprocesses"),
    ({"engine": "ale_vector", "terminal_on_life_loss": True}, "cannot run 'ALE/Pong-v5': terminal_on_life_loss"),
    ({"engine": "ale_vector", "render_mode": "rgb_array"}, r"does not take the options \['render_mode'\]"),
    ({"engine": "python", "engine_threads": 2}, "'engine_threads' needs engine: ale_vector"),
])
def test_errors_name_what_is_wrong_and_what_is_allowed(kwargs, message):
    kwargs = {"preprocess": True, **kwargs}
    with pytest.raises(ValueError, match=message):
        make_atari("ALE/Pong-v5", **kwargs)


def test_multiplayer_stays_on_the_pettingzoo_path():
    pytest.importorskip("multi_agent_ale_py", reason="the atari extra is not installed")
    with pytest.raises(ValueError, match="multi-player Atari runs on the PettingZoo path only"):
        make_atari("pettingzoo.atari.pong_v3", preprocess=True, engine="ale_vector")
    assert type(make_atari("pettingzoo.atari.pong_v3", preprocess=True, engine="auto")).__name__ == "MultiAgentAtariAdapter"


def test_auto_is_the_default_and_picks_the_fastest_engine_that_takes_the_options():
    # ale_vector whether or not EnvPool is installed: through a VecEnv it is the faster
    # (scripts/bench/benchmark_atari.py --engines), and the choice must not depend on extras.
    for made in (make_atari("ALE/Pong-v5", preprocess=True, engine="auto"), make_atari("ALE/Pong-v5", preprocess=True),
                 make_atari("ALE/Pong-v5", preprocess=True, noop_max=0)):
        assert isinstance(made, AleVectorAtariAdapter) and made.config.kind == "ale_vector" and made.fallback is not None
    for python_only in ({}, {"preprocess": True, "terminal_on_life_loss": True}, {"preprocess": True, "render_mode": "rgb_array"}):
        raw = make_atari("ALE/Pong-v5", **python_only)
        assert type(raw).__name__ == "AtariAdapter", python_only
        raw.close()


@pytest.mark.parametrize("mode", ["next_step", "one_episode", "fast"])
def test_auto_runs_the_modes_the_engine_cannot_serve_on_the_python_path(mode):
    """In those modes auto's envs are the python path's, bit for bit (observations, rewards, flags,
    episodes), with its threads option dropped; in same_step they are the engine's."""
    actions = random_actions(300, 2, 4, seed=5)
    runs = []
    for engine in ("auto", "python"):
        kwargs = {"engine_threads": 1} if engine == "auto" else {}
        fn = lambda engine=engine, kwargs=kwargs: make_atari(BREAKOUT, preprocess=True, engine=engine, **kwargs)
        with mv.DummyVecEnv([fn] * 2, env_seed=0, autoreset=mode) as venv:
            runs.append(record(venv, actions))
            assert getattr(venv.group._stepper, "on_python", False) == (engine == "auto")  # noqa: SLF001
    assert sum(len(step[-1]) for step in runs[0][1:]) >= 1, "the test should cover episode ends"
    assert_same_records(*runs)


def test_auto_in_same_step_mode_is_the_engine():
    actions = random_actions(200, 2, 4, seed=6)
    auto_fn = lambda: make_atari(BREAKOUT, preprocess=True, engine="auto")
    kind = auto_fn().config.kind
    runs = []
    for fn in (auto_fn, lambda: make_atari(BREAKOUT, preprocess=True, engine=kind)):
        with mv.DummyVecEnv([fn] * 2, env_seed=0) as venv:
            runs.append(record(venv, actions))
            assert not venv.group._stepper.on_python  # noqa: SLF001
    assert_same_records(*runs)


# -- EnvPool (engine: envpool), when installed -------------------------------------


def envpool_fn(env_id: str = BREAKOUT, **kwargs):
    pytest.importorskip("envpool", reason="envpool is not installed: pip install 'marl_vec[envpool]'")
    return lambda: make_atari(env_id, preprocess=True, engine="envpool", **kwargs)


def test_envpool_agrees_with_the_python_path_on_rewards_flags_and_episodes():
    """Deterministic settings: the same rewards, flags, episode lengths and scores step by step,
    shapes and dtypes (EnvPool's frames differ from gymnasium's in a few pixels: no bit-equality)."""
    # One noop at each reset (noop_max 1): both draw it from [1, noop_max] and EnvPool refuses 0.
    kwargs = dict(noop_max=1, repeat_action_probability=0.0, max_num_frames_per_episode=600)
    actions = random_actions(400, 2, 4, seed=1)
    runs = []
    for fn in (envpool_fn(**kwargs), python_fn(**kwargs)):
        with mv.DummyVecEnv([fn] * 2, env_seed=0) as venv:
            runs.append(record(venv, actions))
    assert sum(len(step[-1]) for step in runs[0][1:]) >= 3, "the test should cover episode ends"
    ours, theirs = runs
    assert ours[0][0].shape == theirs[0][0].shape and ours[0][0].dtype == theirs[0][0].dtype
    for x, y in zip(ours[1:], theirs[1:]):
        assert x[0].shape == y[0].shape and x[0].dtype == y[0].dtype
        for p, q in zip(x[2:], y[2:]):
            assert np.array_equal(p, q) if isinstance(p, np.ndarray) else p == q


def test_envpool_seeding_and_subproc_parity():
    actions = random_actions(250, 4, 4, seed=2)
    fn = envpool_fn(engine_threads=1)
    with mv.DummyVecEnv([fn] * 4, env_seed=5) as venv:
        dummy = record(venv, actions)
        again = record(venv, actions, seed=5)  # reset(seed=...) makes the pool anew with the same seeds
    assert_same_records(dummy, again)
    with mv.SubprocVecEnv([fn] * 4, env_seed=5, num_workers=2) as venv:
        assert_same_records(dummy, record(venv, actions))
    with mv.DummyVecEnv([fn] * 4, env_seed=6) as venv:
        assert any(not np.array_equal(x[0], y[0]) for x, y in zip(dummy[1:], record(venv, actions)[1:]))
    assert sum(len(step[-1]) for step in dummy[1:]) >= 1, "the test should cover episode ends"


def test_envpool_refuses_a_partial_reseed_at_once_and_leaves_the_other_envs_running():
    # Issue 23, bug 5: reset(seed=s, env_ids=[0]) rebuilt the whole EnvPool (env 1's episode
    # lost) and the error came only at the next step. It is refused before anything is reset.
    actions = random_actions(40, 2, 4, seed=3)
    refused = r"engine: envpool cannot reseed part of a group: .* must name all 2 envs of the group .*engine: ale_vector"
    with mv.DummyVecEnv([envpool_fn()] * 2, env_seed=0) as venv, \
            mv.DummyVecEnv([envpool_fn()] * 2, env_seed=0) as reference:
        venv.reset(), reference.reset()
        for t in range(20):
            venv.step(actions[t]), reference.step(actions[t])
        for env_ids in ([0], [1], np.array([True, False])):
            with pytest.raises(ValueError, match=refused):
                venv.reset(seed=3, env_ids=env_ids)
        for t in range(20, 40):  # both envs go on as if nothing was asked
            a, b = venv.step(actions[t]), reference.step(actions[t])
            np.testing.assert_array_equal(a.obs, b.obs)
            np.testing.assert_array_equal(a.reward, b.reward)
        r = venv.reset(env_ids=[1])  # what works: a reset without a seed, of one env
        assert not r.done.any()
        venv.reset(seed=3, env_ids=[0, 1])  # or a seeded reset of every env
        venv.step(actions[0])


def test_envpool_partial_first_reset():
    with mv.DummyVecEnv([envpool_fn()] * 2, env_seed=0) as venv:  # the first reset is seeded env_seed + i
        with pytest.raises(ValueError, match="engine: envpool cannot reseed part of a group"):
            venv.reset(env_ids=[0])
    with mv.DummyVecEnv([envpool_fn()] * 2, env_seed=None) as venv:  # unseeded: served; env 1 waits
        venv.reset(env_ids=[0])
        with pytest.raises(ValueError, match=r"env slots \[1\] of this group were never reset: reset them first"):
            venv.step(np.zeros((2, 1), dtype=np.int64))
        venv.reset(env_ids=[1])
        venv.step(np.zeros((2, 1), dtype=np.int64))


def test_envpool_refuses_noop_max_zero():
    with pytest.raises(ValueError, match="engine 'envpool' needs noop_max >= 1"):
        envpool_fn(noop_max=0)()


def test_envpool_modes_and_time_limit():
    with pytest.raises(ValueError, match="autoreset='next_step' is not supported by the envpool Atari engine"):
        mv.DummyVecEnv([envpool_fn()] * 2, autoreset="next_step")
    with mv.DummyVecEnv([envpool_fn("ALE/Pong-v5", max_episode_steps=25)] * 2, env_seed=0) as venv:
        assert venv.spec.episode_limit == 25
        venv.reset()
        for t in range(1, 51):
            r = venv.step(np.zeros((2, 1), dtype=np.int64))
            assert (r.done == (t % 25 == 0)).all() and not r.terminated.any()


def envpool_direct_stacks(obs: np.ndarray, stack: int, grayscale: bool) -> np.ndarray:
    """EnvPool's observations (E, stack * channels, h, w) in our layout (E, stack, h, w[, 3])."""
    if grayscale:
        return obs
    E, _, h, w = obs.shape
    return obs.reshape(E, stack, 3, h, w).transpose(0, 1, 3, 4, 2)


@pytest.mark.parametrize("options", [{}, {"grayscale": False, "frame_stack": 2, "screen_size": 64, "clip_rewards": False}])
def test_envpool_bit_equal_to_envpool_used_directly(options):
    """Same seeds (env_seed + i), same actions, EnvPool driven by hand with a partial reset of the envs
    that ended (our same_step autoreset): every observation, final observation, reward, flag and
    raw score, with sticky actions, noop starts and a frame limit (colour frames included)."""
    envpool = pytest.importorskip("envpool", reason="envpool is not installed: pip install 'marl_vec[envpool]'")
    E, steps, seed, limit = 3, 420, 7, 800  # 800 frames: 200 steps, so both flags occur
    stack, gray, size = options.get("frame_stack", 4), options.get("grayscale", True), options.get("screen_size", 84)
    ours = mv.DummyVecEnv([envpool_fn(max_num_frames_per_episode=limit, engine_threads=2, **options)] * E, env_seed=seed)
    direct = envpool.make(
        "Breakout-v5", env_type="gymnasium", num_envs=E, batch_size=E, num_threads=1, env_seed=list(range(seed, seed + E)),
        max_episode_steps=limit // 4, repeat_action_probability=0.25, noop_max=30, frame_skip=4, stack_num=stack,
        img_height=size, img_width=size, gray_scale=gray, episodic_life=False, reward_clip=False, use_fire_reset=False,
    )
    actions = random_actions(steps, E, 4)
    obs = ours.reset().obs
    stacks = envpool_direct_stacks(direct.reset()[0], stack, gray)
    assert np.array_equal(obs.reshape(stacks.shape), stacks) and (stacks[:, 0] == stacks[:, -1]).all()
    clip = options.get("clip_rewards", True)
    score = np.zeros(E)
    ends = {"terminated": 0, "truncated": 0}
    for a in actions:
        r = ours.step(a)
        frames, reward, terminated, truncated, _ = direct.step(a[:, 0].astype(np.int32))
        stacks = envpool_direct_stacks(frames, stack, gray)
        done = terminated | truncated
        score += reward
        assert np.array_equal(r.reward[:, 0], np.sign(reward) if clip else reward) and r.reward.dtype == np.float64
        assert np.array_equal(r.terminated[:, 0], terminated) and np.array_equal(r.truncated[:, 0], truncated)
        assert np.array_equal(r.done, done)
        if done.any():
            assert np.array_equal(r.final_obs[done].reshape(stacks[done].shape), stacks[done])
            fresh, _ = direct.reset(np.flatnonzero(done).astype(np.int32))
            stacks = stacks.copy()
            stacks[done] = envpool_direct_stacks(fresh, stack, gray)
        for i in np.flatnonzero(done):
            assert r.infos[i]["episode"]["score"] == score[i]
            score[i] = 0.0
            ends["terminated" if terminated[i] else "truncated"] += 1
        assert np.array_equal(r.obs.reshape(stacks.shape), stacks)
    if limit > 100:
        assert ends["terminated"] >= 2 and ends["truncated"] >= 2, ends
    else:
        assert ends["truncated"] >= 3 * E * 10, ends  # many short episodes: young stacks at their end
    ours.close()
    direct.close()


def test_envpool_public_api_path_equals_its_raw_calls(monkeypatch):
    """The engine steps EnvPool through its raw C++ calls; an EnvPool without them is served by
    its public send/recv/reset, with the same results."""
    from marl_vec.envs.atari import envpool_engine

    actions = random_actions(300, 3, 4, seed=4)
    fn = envpool_fn(max_num_frames_per_episode=600)
    with mv.DummyVecEnv([fn] * 3, env_seed=1) as venv:
        raw = record(venv, actions)
        assert venv.group.adapters[0].engine.step == venv.group.adapters[0].engine._step_raw  # noqa: SLF001
    monkeypatch.setattr(envpool_engine, "USE_RAW_CALLS", False)
    with mv.DummyVecEnv([fn] * 3, env_seed=1) as venv:
        assert_same_records(raw, record(venv, actions))
    assert sum(len(step[-1]) for step in raw[1:]) >= 3, "the test should cover episode ends"


def test_envpool_disabled_mode_waits_for_reset_and_gives_the_same_step_reset():
    actions = random_actions(400, 2, 4, seed=3)
    with mv.DummyVecEnv([envpool_fn()] * 2, env_seed=0, autoreset="disabled") as venv:
        venv.reset()
        for a in actions:
            r = venv.step(a)
            if r.done.any():
                break
        else:
            raise AssertionError("no episode end")
        ended = int(np.flatnonzero(r.done)[0])
        with pytest.raises(EnvFinishedError, match=f"env {ended} finished its episode"):
            venv.step(a)
        obs = venv.reset(env_ids=[ended]).obs[ended]
        assert obs.shape == (1, 4, 84, 84) and (obs[0, 0] == obs[0, 3]).all()  # a fresh stack
        after = [venv.step(b).obs.copy() for b in actions[:20]]
    with mv.DummyVecEnv([envpool_fn()] * 2, env_seed=0) as venv:  # same_step: the same reset and what follows
        venv.reset()
        for a in actions:
            r = venv.step(a)
            if r.done.any():
                break
        assert np.array_equal(r.obs[ended], obs)
        assert all(np.array_equal(venv.step(b).obs, x) for b, x in zip(actions[:20], after))

"""`VecEnv.xla()`: a rollout through ``step`` inside ``jax.jit`` + ``lax.scan`` gives, bit for
bit, what ``venv.step`` gives from Python with the same seed and actions.

Shipped configs of four families (gymnasium CartPole, MPE simple_spread, tic-tac-toe
(PettingZoo AEC, turn-based), LBF), on DummyVecEnv, SubprocVecEnv (forkserver: JAX is
never forked) and RayVecEnv (a local cluster), in every autoreset mode, through episode
ends: every field of every step, final_* and the episode stats included.
"""

from __future__ import annotations

import pytest

jax = pytest.importorskip("jax", reason="the jax extra is not installed: pip install 'marl_vec[jax]'")

import marl_vec as mv  # noqa: E402
from tests.helpers.backends import ray_cluster  # noqa: E402,F401
from tests.helpers.xla_rollouts import assert_same, replay, scan_rollout  # noqa: E402

CONFIGS = {"cartpole": "gym/cartpole", "spread": "mpe/simple_spread", "tictactoe": "classic/tictactoe",
           "lbf": "lbf/8x8-2p-2f-coop"}
STEPS = {"cartpole": 40, "spread": 30, "tictactoe": 14, "lbf": 55}  # past the first episode ends


def make(family: str, backend: str, request: pytest.FixtureRequest, autoreset: str = "same_step",
         num_envs: int = 3) -> mv.VecEnv:
    kwargs: dict = {}
    if backend == "subproc":
        kwargs = {"num_workers": 2, "start_method": "forkserver"}
    elif backend == "ray":
        request.getfixturevalue("ray_cluster")
        kwargs = {"num_workers": 2}
    return mv.make(CONFIGS[family], num_envs=num_envs, backend=backend, autoreset=autoreset, env_seed=0, **kwargs)


def check(venv: mv.VecEnv, family: str, seed: int, reset_done: bool = False, host_call: str = "auto") -> int:
    actions, got = scan_rollout(venv, seed, STEPS[family], reset_done, host_call)
    expected = replay(venv, seed, actions, reset_done)
    return assert_same(venv, got, expected)


@pytest.mark.parametrize("backend", ["dummy", "subproc", "ray"])
@pytest.mark.parametrize("family", list(CONFIGS))
def test_scanned_rollout_equals_python_steps(family, backend, request):
    with make(family, backend, request) as venv:
        ends = check(venv, family, seed=7)
    assert ends > 0  # the rollout went through episode ends (final_* and stats compared there)


@pytest.mark.parametrize("mode", ["next_step", "one_episode"])
@pytest.mark.parametrize("family", list(CONFIGS))
def test_every_autoreset_mode(family, mode, request):
    with make(family, "dummy", request, autoreset=mode) as venv:
        assert check(venv, family, seed=3) > 0


@pytest.mark.parametrize("family", list(CONFIGS))
def test_disabled_mode_resets_inside_jit(family, request):
    """autoreset="disabled": each jitted step is followed by a jitted ``reset(handle, done)``."""
    with make(family, "dummy", request, autoreset="disabled") as venv:
        assert check(venv, family, seed=5, reset_done=True) > 0


@pytest.mark.parametrize("mode", ["next_step", "disabled"])
@pytest.mark.parametrize("backend", ["subproc", "ray"])
def test_modes_on_process_backends(backend, mode, request):
    with make("spread", backend, request, autoreset=mode) as venv:
        assert check(venv, "spread", seed=11, reset_done=mode == "disabled") > 0


@pytest.mark.parametrize("family", ["spread", "tictactoe"])
def test_io_callback_host_call_gives_the_same(family, request):
    """The fallback host call (``io_callback(ordered=True)``, for JAX without buffer_callback)."""
    with make(family, "dummy", request, autoreset="disabled") as venv:
        assert check(venv, family, seed=9, reset_done=True, host_call="io_callback") > 0


@pytest.mark.parametrize("engine,mode", [("python", "fast"), ("envpool", "same_step")])
def test_atari_single_agent_has_envpool_shapes(engine, mode):
    """Pong (one agent): EnvPool's shapes, obs (E, 4, 84, 84) and reward (E,), the same arrays
    as from Python; on the python engine in fast mode (snapshots), and on the EnvPool engine."""
    if engine == "envpool":
        pytest.importorskip("envpool", reason="the envpool extra is not installed: pip install 'marl_vec[envpool]'")
    config = {"env": {"family": "atari", "id": "ALE/Pong-v5", "kwargs": {"preprocess": True, "engine": engine}}}
    with mv.make(config, num_envs=2, env_seed=0, autoreset=mode) as venv:
        actions, got = scan_rollout(venv, seed=2, steps=12)
        assert actions.shape == (12, 2)
        assert got[0][0].obs.shape == (2, 4, 84, 84) and got[0][0].reward.shape == (2,)
        assert_same(venv, got, replay(venv, seed=2, actions=actions))

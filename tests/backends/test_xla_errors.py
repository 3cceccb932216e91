"""`VecEnv.xla()` where things go wrong: an env error inside a jitted, scanned rollout
surfaces as the env's own one-line error (the same as from Python), the rollout stops at
that step, and the batch stays usable or closes cleanly; misuse (``vmap``, ``grad``,
another batch's handle) is refused with a clear message; Ctrl-C stops a jitted rollout.
"""

from __future__ import annotations

import functools
import multiprocessing

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="the jax extra is not installed: pip install 'marl_vec[jax]'")
import jax.numpy as jnp  # noqa: E402

import marl_vec as mv  # noqa: E402
from marl_vec.vec.xla import XlaGradError, XlaVmapError  # noqa: E402
from tests.helpers.scripted_envs import FailingEnv, SlowRecordingEnv  # noqa: E402
from tests.helpers.sigint import interrupted  # noqa: E402


def failing(fail_at: int = 3):
    return FailingEnv(fail_at=fail_at)


# Env 0 fails at its 3rd step, env 1 would at its 100th: which env fails is certain on every
# backend (two workers failing at once would race to be the one reported).
FNS = [failing, functools.partial(failing, 100)]


def python_error(cls, steps: int, **kwargs) -> BaseException:
    """The error ``steps`` Python steps of a fresh batch raise (each agent's first available action)."""
    with cls(FNS, env_seed=0, **kwargs) as venv:
        r = venv.reset()
        with pytest.raises(Exception) as info:
            for _ in range(steps):
                r = venv.step(np.argmax(r.avail_actions, axis=-1))
    return info.value


def scanned(fns, avail, steps: int):
    """``steps`` jitted, scanned steps, each agent taking its first available action."""
    def body(carry, _):
        handle, avail = carry
        handle, r = fns.step(handle, jnp.argmax(avail, axis=-1).astype(jnp.int32))
        return (handle, r.avail_actions), None

    run = jax.jit(lambda h, a: jax.lax.scan(body, (h, a), None, length=steps)[0])
    return run(fns.handle, jnp.asarray(avail))


@pytest.mark.parametrize("cls", [mv.DummyVecEnv, mv.SubprocVecEnv])
def test_env_error_in_scan_is_the_env_own_error(cls):
    kwargs = {"num_workers": 2, "start_method": "forkserver"} if cls is mv.SubprocVecEnv else {}
    expected = python_error(cls, 5, **kwargs)
    venv = cls(FNS, env_seed=0, **kwargs)
    avail = venv.reset().avail_actions
    fns = venv.xla()
    with pytest.raises(type(expected)) as info:
        with fns.errors():
            scanned(fns, avail, 5)
    assert str(info.value) == str(expected)  # the same error as from Python, with the env named
    first_line = str(expected).splitlines()[0]
    assert first_line in ("scripted failure at step 3",  # DummyVecEnv: the env's own, with a note naming env 0
                          "env 0 (worker 0) failed in step: RuntimeError('scripted failure at step 3')")
    assert getattr(info.value, "__notes__", None) == getattr(expected, "__notes__", None)
    if cls is mv.DummyVecEnv:
        # The scan stopped at the failing step: env 0 raised at its 3rd step, env 1 took 2.
        assert venv.get_attr("steps_taken") == [3, 2]
    venv.close()
    assert multiprocessing.active_children() == []  # no worker left behind


def test_bad_action_in_jit_names_env_and_agent_and_batch_stays_usable():
    with mv.make("classic/tictactoe", num_envs=2, env_seed=0) as venv:
        venv.reset()
        fns = venv.xla()
        with pytest.raises(ValueError, match=r"^illegal move 9 for env 0 \(tictactoe_v3\), agent 'player_1' to move; legal moves now: \[0, 1, 2, 3, 4, 5, 6, 7, 8\]$"):
            with fns.errors():
                jax.jit(fns.step)(fns.handle, jnp.full((2, 2), 9, jnp.int32))
        # Without errors(): JAX's own JaxRuntimeError, which ends with the same one-line error.
        with pytest.raises(jax.errors.JaxRuntimeError) as info:
            jax.jit(fns.step)(fns.handle, jnp.full((2, 2), 9, jnp.int32))
        assert str(info.value).rstrip().splitlines()[-1] == (
            "ValueError: illegal move 9 for env 0 (tictactoe_v3), agent 'player_1' to move; "
            "legal moves now: [0, 1, 2, 3, 4, 5, 6, 7, 8]")
        # Nothing was stepped; a legal move steps both envs.
        handle, r = jax.jit(fns.step)(fns.handle, jnp.zeros((2, 2), jnp.int32))
        assert np.asarray(r.avail_actions)[:, 1, 0].tolist() == [False, False]  # square 0 taken


def test_vmap_and_grad_are_refused():
    with mv.make("gym/cartpole", num_envs=2, env_seed=0) as venv:
        venv.reset()
        handle, recv, send, step = venv.xla()
        with pytest.raises(XlaVmapError, match=r"DummyVecEnv.xla\(\) step cannot run under jax.vmap.*num_envs"):
            jax.vmap(step, in_axes=(None, 0))(handle, jnp.ones((3, 2), jnp.int32))
        with pytest.raises(XlaVmapError, match="send cannot run under jax.vmap"):
            jax.jit(jax.vmap(send, in_axes=(0, None)))(jnp.stack([handle, handle]), jnp.ones(2, jnp.int32))
        with pytest.raises(XlaGradError, match=r"step cannot be differentiated: the envs run on the host"):
            jax.grad(lambda a: step(handle, a)[1].reward.sum())(jnp.ones(2))
        with mv.make("gym/cartpole", num_envs=2, env_seed=0) as other:
            other.reset()
            with pytest.raises(ValueError, match="this handle belongs to another batch"):
                with other.xla().errors():
                    jax.jit(other.xla().step)(handle, jnp.ones(2, jnp.int32))


def test_ctrl_c_stops_a_jitted_rollout():
    """SIGINT during a scan of slow steps: KeyboardInterrupt within a step or two, and the
    batch steps again from Python."""
    with mv.DummyVecEnv([lambda: SlowRecordingEnv(delay=0.2)] * 2, env_seed=0) as venv:
        venv.reset()
        fns = venv.xla()
        run = jax.jit(lambda h: jax.lax.scan(lambda h, _: (fns.step(h, jnp.ones(2, jnp.int32))[0], None),
                                             h, None, length=200)[0])
        run.lower(fns.handle).compile()  # compiled before the timer starts

        def rollout():
            with fns.errors():
                run(fns.handle).block_until_ready()

        interrupted(rollout, after=1.0)
        seen = venv.get_attr("seen")
        assert 1 <= len(seen[0]) <= 12  # stopped after ~5 steps of 0.2 s, not 200
        r = venv.step(np.ones((2, 1), np.int64))
        assert r.obs.shape == (2, 1, 1)


PMAP_PROGRAM = """
import os
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
import jax, jax.numpy as jnp
import marl_vec as mv
from marl_vec.vec.xla import XlaVmapError
with mv.make("gym/cartpole", num_envs=2, env_seed=0) as venv:
    venv.reset()
    fns = venv.xla()
    try:
        jax.pmap(fns.step, in_axes=(None, 0))(fns.handle, jnp.ones((2, 2), jnp.int32))
    except XlaVmapError as exc:
        print(exc)
    # one device: a plain jitted call, on any device
    h = jax.device_put(fns.handle, jax.devices()[1])
    print(jax.jit(fns.step)(h, jnp.ones(2, jnp.int32))[1].obs.shape)
"""


def test_pmap_over_several_devices_is_refused():
    """Each device would step the one batch (it did, twice per step, before the refusal)."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", PMAP_PROGRAM], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "DummyVecEnv.xla() step cannot run under pmap or shard_map over several devices (pmap: 2): every device "
        "would step the same batch of host envs. Call it outside the mapped function (one batch per handle), "
        "or give each device a batch of its own",
        "(2, 4)"]

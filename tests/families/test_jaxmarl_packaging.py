"""The JaxMARL family runs on gymnasium 1.4: jaxmarl is installed without its pins
(scripts/install/install_jax.sh), and what its envs import does not include gymnax (which
pins gymnasium<1.4), gymnasium itself, nor flax's unused dependencies."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("jaxmarl", reason="the jax extra is not installed: pip install 'marl_vec[jax]'")

BLOCKED = ["gymnax", "gymnasium", "orbax", "tensorstore", "optax", "seaborn", "pandas", "safetensors"]

PROBE = """
import contextlib, io, sys
for name in BLOCKED:
    sys.modules[name] = None  # importing one now raises ImportError
import jax
with contextlib.redirect_stdout(io.StringIO()):
    import jaxmarl
from jaxmarl.environments.smax import map_name_to_scenario
for make_id, kwargs in SERVED:
    if "scenario" in kwargs:
        kwargs["scenario"] = map_name_to_scenario(kwargs["scenario"])
    env = jaxmarl.make(make_id, **kwargs)
    key = jax.ShapeDtypeStruct((2,), "uint32")
    obs, state = jax.eval_shape(env.reset, key)
    spaces = {a: env.action_space(a) for a in env.agents}  # Box: float32 of its shape; Discrete: an int32
    acts = {a: jax.ShapeDtypeStruct(tuple(s.shape), "float32") if type(s).__name__ == "Box"
            else jax.ShapeDtypeStruct((), "int32") for a, s in spaces.items()}
    jax.eval_shape(env.step_env, key, state, acts)
print("ok", len(SERVED))
"""


def _served() -> list:
    from marl_vec.envs.jaxmarl.catalog import SERVED, resolve

    out = []
    for served in SERVED:
        make_id, kwargs = resolve(served.rstrip("*"))
        if served.endswith("*"):
            kwargs["action_type"] = "Discrete"
        if make_id in ("SMAX", "HeuristicEnemySMAX"):
            kwargs["scenario"] = "3m"
        out.append((make_id, kwargs))
    return out


def test_gymnasium_is_1_4_here():
    import gymnasium

    assert tuple(int(x) for x in gymnasium.__version__.split(".")[:2]) >= (1, 4)


def test_the_served_envs_make_reset_and_step_without_gymnax_or_gymnasium():
    code = f"BLOCKED = {BLOCKED!r}\nSERVED = {_served()!r}\n" + PROBE
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().endswith(f"ok {len(_served())}")

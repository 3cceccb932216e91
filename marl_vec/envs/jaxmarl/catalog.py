"""Which JaxMARL envs the family serves, how our ids name them, and why the others are left out.

One idea: the catalogue. Our ids are ``jaxmarl.make`` ids as they are
(``MPE_simple_spread_v3``, ``hanabi``, ``HeuristicEnemySMAX`` with a
``scenario`` kwarg naming a map) and two shorthands: ``smax/<map>``
(``HeuristicEnemySMAX`` on a SMAC-named map, e.g. ``smax/3m``) and
``jax_mpe/<scenario>`` (``jax_mpe/simple_spread`` is ``MPE_simple_spread_v3``).

Served: every registered env whose observations come as one array per agent
and whose actions are Discrete or Box (continuous MPE with
``action_type="Continuous"`` and FACMAC's MPE scenarios, jaxnav, MABrax, which
needs ``brax``: extra ``mabrax``).
`LEFT_OUT` lists the registered ids that are not, each with its reason.

May import: jaxmarl (lazily, via ``require``), ``marl_vec.envs.extras``.

Examples:
    >>> resolve("smax/3m")
    ('HeuristicEnemySMAX', {'scenario': '3m'})
    >>> resolve("jax_mpe/simple_spread")
    ('MPE_simple_spread_v3', {})
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from typing import Any

from marl_vec.envs.extras import require

SMAX_MAPS = ("3m", "8m", "2s3z", "3s5z", "5m_vs_6m", "10m_vs_11m", "27m_vs_30m", "3s5z_vs_3s6z", "3s_vs_5z",
             "6h_vs_8z", "25m", "smacv2_5_units", "smacv2_10_units", "smacv2_20_units")

MPE_IDS = {
    "simple": "MPE_simple_v3", "simple_tag": "MPE_simple_tag_v3", "simple_world_comm": "MPE_simple_world_comm_v3",
    "simple_spread": "MPE_simple_spread_v3", "simple_crypto": "MPE_simple_crypto_v3",
    "simple_speaker_listener": "MPE_simple_speaker_listener_v4", "simple_push": "MPE_simple_push_v3",
    "simple_adversary": "MPE_simple_adversary_v3", "simple_reference": "MPE_simple_reference_v3",
    "simple_facmac": "MPE_simple_facmac_v1", "simple_facmac_3a": "MPE_simple_facmac_3a_v1",
    "simple_facmac_6a": "MPE_simple_facmac_6a_v1", "simple_facmac_9a": "MPE_simple_facmac_9a_v1",
}

# MABrax (extra ``mabrax``: brax): Box actions per agent, padded to the largest agent's.
MABRAX = ("ant_4x2", "halfcheetah_6x1", "hopper_3x1", "humanoid_9|8", "walker2d_2x3")

# Registered ids that are served (the MPE one marked * has continuous actions by default;
# the breadth test runs it with action_type="Discrete", tests/families/test_jaxmarl_box.py with Box ones).
SERVED = (
    "MPE_simple_v3", "MPE_simple_tag_v3", "MPE_simple_spread_v3", "MPE_simple_crypto_v3",
    "MPE_simple_speaker_listener_v4", "MPE_simple_push_v3", "MPE_simple_adversary_v3", "MPE_simple_reference_v3",
    "MPE_simple_world_comm_v3*", "SMAX", "HeuristicEnemySMAX", "hanabi", "overcooked", "overcooked_v2",
    "MPE_simple_facmac_v1", "MPE_simple_facmac_3a_v1", "MPE_simple_facmac_6a_v1", "MPE_simple_facmac_9a_v1",
    "coin_game", "switch_riddle", "jaxnav", *MABRAX,
)

_NOT_PER_AGENT = ("its reset and step return one observation array for all agents (not a dict per agent), "
                  "and its step does not run with actions as a dict keyed by agent (jaxmarl 0.2.0)")
LEFT_OUT = {
    "storm": _NOT_PER_AGENT,
    "storm_2p": _NOT_PER_AGENT,
    "storm_np": _NOT_PER_AGENT,
    "LearnedPolicyEnemySMAX": "it needs a trained enemy policy and its parameters, which JaxMARL does not ship",
    **{f"JaxRobotarium_{name}": "needs the jaxrobotarium package, which is not on PyPI"
       for name in ("navigation", "discovery", "material_transport", "warehouse", "arctic_transport",
                    "foraging", "rware", "predator_prey")},
}


def resolve(env_id: str) -> tuple[str, dict[str, Any]]:
    """Our id -> (``jaxmarl.make`` id, kwargs the id implies)."""
    if env_id.startswith("smax/"):
        name = env_id[len("smax/"):]
        if name not in SMAX_MAPS:
            raise ValueError(f"unknown SMAX map {name!r} in {env_id!r}; allowed: {', '.join(SMAX_MAPS)}")
        return "HeuristicEnemySMAX", {"scenario": name}
    if env_id.startswith("jax_mpe/"):
        name = env_id[len("jax_mpe/"):]
        if name not in MPE_IDS:
            raise ValueError(f"unknown JaxMARL MPE scenario {name!r} in {env_id!r}; allowed: {', '.join(MPE_IDS)}")
        env_id = MPE_IDS[name]
    if env_id in LEFT_OUT:
        raise ValueError(f"the JaxMARL env {env_id!r} is not served: {LEFT_OUT[env_id]}")
    served = [s.rstrip("*") for s in SERVED]
    if env_id not in served:
        raise ValueError(f"unknown JaxMARL env id {env_id!r}; allowed: {', '.join(served)}, smax/<map> "
                         f"(maps: {', '.join(SMAX_MAPS)}) or jax_mpe/<scenario> ({', '.join(MPE_IDS)})")
    if env_id in MABRAX:
        # brax's own autoreset would replace the last observation of an episode by the reset one;
        # JaxMARL's step resets instead, and the engine keeps the true last views.
        require("brax", "mabrax", "MABrax envs")
        return env_id, {"auto_reset": False}
    return env_id, {}


def import_jaxmarl() -> Any:
    """jaxmarl, imported quietly: it prints two lines about optional submodules at import,
    to the process's stdout itself (a ``redirect_stdout`` does not catch them), so file
    descriptor 1 points at /dev/null meanwhile."""
    if "jaxmarl" in sys.modules:
        return sys.modules["jaxmarl"]
    for stream in (sys.stdout, sys.__stdout__):
        if stream is not None:
            stream.flush()
    try:
        saved, devnull = os.dup(1), os.open(os.devnull, os.O_WRONLY)
    except OSError:  # no file descriptor 1: nothing to silence
        return require("jaxmarl", "jax", "JaxMARL envs")
    try:
        os.dup2(devnull, 1)
        with contextlib.redirect_stdout(io.StringIO()):
            return require("jaxmarl", "jax", "JaxMARL envs")
    finally:
        if sys.__stdout__ is not None:
            sys.__stdout__.flush()
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


def make_native(make_id: str, kwargs: dict[str, Any]) -> Any:
    """``jaxmarl.make(make_id, **kwargs)``; a ``scenario`` given as a map name becomes SMAX's Scenario."""
    jaxmarl = import_jaxmarl()
    kwargs = dict(kwargs)
    if isinstance(kwargs.get("scenario"), str):
        from jaxmarl.environments.smax import map_name_to_scenario

        name = kwargs["scenario"]
        if name not in SMAX_MAPS:
            raise ValueError(f"unknown SMAX map {name!r}; allowed: {', '.join(SMAX_MAPS)}")
        kwargs["scenario"] = map_name_to_scenario(name)
    return jaxmarl.make(make_id, **kwargs)


# device= names: JAX's platforms, with torch's "cuda" for JAX's "gpu" (so that one name serves
# DummyVecEnv's torch and JAX results alike).
DEVICE_PLATFORMS = {"cpu": "cpu", "cuda": "gpu", "gpu": "gpu", "tpu": "tpu"}


def parse_device(value: Any) -> str | None:
    """The option ``device`` (``"cpu"``, ``"gpu"``, ``"cuda:0"``, ``"tpu"``, a ``jax.Device``, or
    None: JAX's default device) as one canonical name: ``"cpu"``, ``"cuda:<i>"`` or ``"tpu:<i>"``
    (``<i>``: the device's index among JAX's devices of its platform). Only the name is checked
    here: the spec is read where the envs may not step (a process backend refuses a device before
    that); `jax_device` finds the device when the block is built.

    Examples:
        >>> parse_device("gpu"), parse_device("cuda:1"), parse_device("cpu:0"), parse_device(None)
        ('cuda:0', 'cuda:1', 'cpu', None)
    """
    if value is None:
        return None
    platform = getattr(value, "platform", None)
    if platform is not None:  # a jax.Device: its index among its platform's devices
        import jax

        index = [d.id for d in jax.devices(platform)].index(value.id)
        value = f"{platform}:{index}"
    kind, _, index = str(value).partition(":") if isinstance(value, str) else ("", "", "")
    if kind not in DEVICE_PLATFORMS or not (index == "" or index.isdigit()):
        raise ValueError(f"JaxMARL device={value!r} is not a JAX device; allowed: 'cpu', 'gpu', 'cuda', "
                         "'cuda:<i>', 'gpu:<i>', 'tpu', 'tpu:<i>' or a jax.Device")
    platform, number = DEVICE_PLATFORMS[kind], int(index or 0)
    if platform == "cpu":
        return "cpu" if number == 0 else f"cpu:{number}"
    return f"{'cuda' if platform == 'gpu' else platform}:{number}"


def jax_device(name: str) -> Any:
    """The ``jax.Device`` of a `parse_device` name; one ValueError line naming the devices JAX
    sees where it has no such device (``"cuda:0"`` on a machine without a GPU).

    Examples:
        >>> jax_device("cpu")
        CpuDevice(id=0)
    """
    import jax

    kind, _, index = name.partition(":")
    try:
        return jax.devices(DEVICE_PLATFORMS[kind])[int(index or 0)]
    except (RuntimeError, IndexError):
        seen = list(jax.devices())
        seen += [d for d in jax.devices("cpu") if d not in seen]
        raise ValueError(f"JaxMARL device={name!r}: JAX {jax.__version__} has no such device here; "
                         f"it sees: {', '.join(str(d) for d in seen)}") from None

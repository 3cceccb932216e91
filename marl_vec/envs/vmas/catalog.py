"""Which VMAS scenarios the family serves, which options it takes, and how a seed becomes an episode's seed.

One idea: the catalogue and the rules around it. Our ids are VMAS's scenario
names as ``vmas.make_env`` takes them (``balance``, ``transport``,
``navigation``, ``wheel``, ``football``, the MPE ports ``simple_spread`` ...,
and the debug scenarios ``waterfall`` ...). Every scenario of vmas 1.5.2 runs
on CPU and is served (checked: tests/families/test_vmas_breadth.py); `LEFT_OUT`
is empty, and stays the place to name one with its reason.

Options (``env.kwargs``): ``continuous_actions`` (VMAS's default True),
``max_steps`` (the episode limit, a truncation; VMAS's default None: no limit),
``clamp_actions``, ``batched_reset`` (ours, default False: see `batch_seed`),
``device`` (the torch device VMAS runs on, default ``"cpu"``: see `parse_device`; off the
CPU only DummyVecEnv serves it, best with ``array_backend="torch"``: docs/families/vmas.md)
and any keyword of the scenario itself (``n_agents``, ...).
Options that belong to the batch or that we fix are refused with the reason
(`REFUSED`).

Seeds: VMAS has ONE random state for the whole process (torch's, numpy's and
Python's global generators, swapped in around each call: a class attribute of
``vmas.Environment``), not one per env. So an env's episodes are made
reproducible by reseeding it before each of its resets: episode ``n`` of the
env whose seed is ``s`` starts with ``env.seed(episode_seed(s, n))`` and then
``env.reset_at(i)``. See `marl_vec.envs.vmas` for what that guarantees.
With ``batched_reset=True``, a reset of every env of a batch at once is one
``env.reset(seed=batch_seed(...))`` instead (`batch_seed`).

May import: numpy, vmas and torch (lazily, via ``require``), ``marl_vec.envs.extras``.

Examples:
    >>> resolve("balance")
    'balance'
    >>> episode_seed(0, 0) == episode_seed(0, 0) != episode_seed(0, 1)
    True
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from marl_vec.envs.extras import require

# vmas 1.5.2's scenario lists (vmas.scenarios, vmas.mpe_scenarios, vmas.debug_scenarios).
SCENARIOS = ("balance", "ball_passage", "ball_trajectory", "buzz_wire", "discovery", "dispersion", "dropout",
             "flocking", "football", "give_way", "joint_passage", "joint_passage_size", "multi_give_way",
             "navigation", "passage", "reverse_transport", "road_traffic", "sampling", "transport", "wheel",
             "wind_flocking")
MPE_SCENARIOS = ("simple", "simple_adversary", "simple_crypto", "simple_push", "simple_reference",
                 "simple_speaker_listener", "simple_spread", "simple_tag", "simple_world_comm")
DEBUG_SCENARIOS = ("asym_joint", "circle_trajectory", "diff_drive", "drone", "goal", "het_mass",
                   "kinematic_bicycle", "line_trajectory", "pollock", "vel_control", "waterfall")
SERVED = SCENARIOS + MPE_SCENARIOS + DEBUG_SCENARIOS

# Scenarios of vmas 1.5.2 that are not served, each with its reason (none: all run on CPU).
LEFT_OUT: dict[str, str] = {}

# Scenarios whose env i's episodes depend on the batch it runs in, not only on its seed and actions,
# each with its reason (found by tests/families/test_vmas_split.py: one batch of 8 against batches
# of 1 to 7 and SubprocVecEnv's two of 4). The others give env i the same episodes for any split
# (torch's rounding by batch width is taken away by padding: marl_vec.envs.vmas.engine.PAD_ENVS).
_JOINTS = ("its joints: a reset of one env recomputes the joint landmarks of every env of the batch "
           "(VMAS's Joint.notify), which rounds otherwise than the scenario's own placing")
SPLIT_DEPENDENT = {
    "asym_joint": _JOINTS,
    "buzz_wire": _JOINTS,
    "discovery": "it draws new target positions from the batch's random stream while stepping",
    "football": "its AI draws noise for the whole batch from the batch's random stream at each step",
    "het_mass": "its agents' masses are one number for the whole batch, redrawn at every env's reset",
    "road_traffic": "it draws from the batch's random stream while stepping and reading observations, "
                    "and its observation() changes every env's state",
    "simple_crypto": "a reset of env i draws a key and a secret for every env of the batch and keeps row i: "
                     "env i's draw depends on its place in its batch",
}

# make_env keywords that are not env options here, each with its reason.
REFUSED = {
    "num_envs": "the batch sets it (VMAS's batch_dim is a block's number of envs, padded to a multiple of 32)",
    "seed": "envs are seeded by the VecEnv (env_seed, reset(seed=...))",
    "wrapper": "the family is the wrapper",
    "wrapper_kwargs": "the family is the wrapper",
    "dict_spaces": "the family reads VMAS's outputs as lists, in agent order",
    "terminated_truncated": "the family always asks VMAS for terminated and truncated apart",
    "grad_enabled": "the outputs are copied into numpy buffers, so no gradient could flow",
    "multidiscrete_actions": "the family serves Discrete (continuous_actions=False) and Box actions",
}
OPTIONS = ("continuous_actions", "max_steps", "clamp_actions", "batched_reset", "device")


def resolve(env_id: str) -> str:
    """Our id -> VMAS's scenario name; an unknown one names what is served."""
    if env_id in LEFT_OUT:
        raise ValueError(f"the VMAS scenario {env_id!r} is not served: {LEFT_OUT[env_id]}")
    if env_id not in SERVED:
        raise ValueError(f"unknown VMAS scenario {env_id!r}; allowed: {', '.join(SERVED)}")
    return env_id


def split_options(env_id: str, kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``kwargs`` -> (our options with VMAS's defaults, the scenario's own keywords)."""
    for key in kwargs:
        if key in REFUSED:
            raise ValueError(f"VMAS scenario {env_id!r}: env.kwargs {key!r} is not an option here: {REFUSED[key]}; "
                             f"options: {', '.join(OPTIONS)} and the scenario's own keywords")
    options = {"continuous_actions": True, "max_steps": None, "clamp_actions": False, "batched_reset": False,
               "device": "cpu"}
    options.update({k: v for k, v in kwargs.items() if k in OPTIONS})
    options["device"] = parse_device(options["device"], check=False)
    if not isinstance(options["batched_reset"], bool):
        raise ValueError(f"VMAS scenario {env_id!r}: batched_reset must be true or false, "
                         f"got {options['batched_reset']!r}")
    limit = options["max_steps"]
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"VMAS scenario {env_id!r}: max_steps must be a positive int or None, got {limit!r}")
    return options, {k: v for k, v in kwargs.items() if k not in OPTIONS}


def parse_device(value: Any, check: bool = True) -> str:
    """``value`` (a string such as ``"cpu"``, ``"cuda:0"``, or a ``torch.device``) as torch's name
    of the device; ``check``: a CUDA device needs CUDA here (one ValueError line naming what was
    given and what there is). The spec is read on the CPU, so only the batch's VMAS env, made
    where the envs step, needs the device (a process backend refuses it before that).

    Examples:
        >>> parse_device("cpu"), parse_device("cuda:1", check=False)
        ('cpu', 'cuda:1')
    """
    import torch

    from marl_vec.core.devices import torch_device

    try:
        device = torch.device(value)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"VMAS device={value!r} is not a torch device (e.g. 'cpu', 'cuda', 'cuda:0'): {exc}") from None
    if check and device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0 or (device.index or 0) >= count:
            there = ", ".join(["cpu"] + [f"cuda:{i}" for i in range(count)])
            raise ValueError(f"VMAS device={value!r}: torch {torch.__version__} has "
                             f"{'no CUDA' if count == 0 else f'{count} CUDA device(s)'} here; available: {there}")
        device = torch_device(device)  # "cuda" as "cuda:<current>": the device VMAS's tensors report
    return str(device)


def episode_seed(seed: int, episode: int) -> int:
    """The seed VMAS gets before episode ``episode`` (0, 1, ...) of an env seeded ``seed``:
    a 32-bit word of ``numpy.random.SeedSequence([seed, episode])`` (numpy's global seed,
    which VMAS's ``seed`` sets too, takes 32 bits)."""
    return int(np.random.SeedSequence([int(seed) % 2**64, int(episode)]).generate_state(1)[0])


def batch_seed(seeds: list[int], episodes: list[int]) -> int:
    """With ``batched_reset=True``: the seed VMAS gets before a reset of a whole batch at once
    (``env.reset(seed=...)``, one call) whose envs have seeds ``seeds`` and have started
    ``episodes`` episodes each: a 32-bit word of ``SeedSequence([*seeds, *episodes])``.
    Every env's episode then depends on the batch's seeds together, not on its own alone.

    Examples:
        >>> batch_seed([0, 1], [0, 0]) != batch_seed([1, 0], [0, 0])
        True
    """
    entropy = [int(s) % 2**64 for s in seeds] + [int(n) for n in episodes]
    return int(np.random.SeedSequence(entropy).generate_state(1)[0])


def import_vmas() -> Any:
    """vmas, imported without the warning that ``gym`` (which VMAS imports for its spaces) prints
    about being unmaintained."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return require("vmas", "vmas", "VMAS envs")


def make_native(scenario: str, num_envs: int, options: dict[str, Any], scenario_kwargs: dict[str, Any],
                device: str | None = None) -> Any:
    """``vmas.make_env`` of ``num_envs`` envs on ``device`` (None: the option's, checked), asking for
    terminated and truncated apart. Its own first reset (at construction, seeded 0) is overwritten
    by our per-env resets."""
    vmas = import_vmas()
    device = parse_device(options["device"]) if device is None else device
    return vmas.make_env(scenario, num_envs=num_envs, device=device, seed=0, terminated_truncated=True,
                         continuous_actions=bool(options["continuous_actions"]), max_steps=options["max_steps"],
                         clamp_actions=bool(options["clamp_actions"]), **scenario_kwargs)

"""Multi-Agent MuJoCo (family ``mamujoco``): gymnasium-robotics' ``mamujoco_v1`` scenarios.

MAMuJoCo splits one MuJoCo robot (gymnasium's ``Ant-v5``, ``HalfCheetah-v5``, ...)
into agents that each move some of its joints. Its env is a PettingZoo
``ParallelEnv`` with ``state()``, so `MaMuJoCoAdapter` is the PettingZoo
adapter with what that adapter cannot read off the env: the state's space, the
episode limit and a name per scenario. Conventions (docs/families/mamujoco.md):

- Ids: ``Scenario/agent_conf`` (``Ant/2x4``, ``HalfCheetah/6x1``, ``Humanoid/9|8``,
  ``ManySegmentAnt/2x3``, ...; `SPLITS`); a bare ``Scenario`` is the robot as
  one agent that sees the whole state (the library's ``agent_conf=None``).
  ``Ant/8x1`` is not one of the library's splits: it is the library's own Ant graph
  (its joints, edges and globals, from its ``4x2`` split) with one joint per agent,
  passed as ``agent_factorization``.
- Observations: each agent's local view (its joints and those ``agent_obsk`` hops
  away, default 1, as the library's default), zero-padded to the largest agent's;
  Pusher/3p's in a fixed order (see ``_order_label_ties``).
  ``local_categories`` and ``global_categories`` go to the env as they are.
- State: ``env.state()``, the single-agent env's full observation (float64).
- Actions: a Box per agent of its joints, padded to the largest agent's (Humanoid
  9|8: 9 and 8); the padding is ignored.
- Rewards: the robot's one reward, the same for every agent.
- Episode ends as the robot's env says: ``terminated`` when it is unhealthy (Ant,
  Hopper, Humanoid, Walker2d, the pendulums fall), ``truncated`` at its time limit
  (1,000 steps; Reacher 50, Pusher 100), ``spec.episode_limit``. ``max_episode_steps``
  and the robot's own keywords (``ctrl_cost_weight``, ``healthy_z_range``, ...) go
  to ``gymnasium.make``; an unknown one is refused by name.
- Seeding: ``reset(seed=s)`` is the env's ``reset(seed=s)``.

Two scenarios are built here rather than by the library's own path, with the
library's classes and the same result: ManySegmentAnt/Swimmer write their generated
XML next to the installed package and delete it after loading, which races when
several workers build the same model at once (and fails on a read-only install):
here each build writes into its own temporary folder. CoupledHalfCheetah drops
every keyword; here ``max_episode_steps`` sets its time limit (others are refused).

Examples:
    >>> env = make_mamujoco("Humanoid/9|8")
    >>> env.spec.agents, env.spec.obs_shape, env.spec.action.shape, env.spec.state_shape, env.spec.episode_limit
    (('agent_0', 'agent_1'), (242,), (9,), (348,), 1000)
"""

from __future__ import annotations

import os
import re
import tempfile
from typing import Any

import gymnasium as gym
import numpy as np

from marl_vec.envs.extras import MissingExtraError, UnknownEnvError, no_env_message, require
from marl_vec.envs.mamujoco.adapter import MaMuJoCoAdapter

EXTRA = "mamujoco"

# Each scenario's agent splits in gymnasium-robotics 1.4.2 (obsk.get_parts_and_edges), plus Ant/8x1
# (see the module docstring). "NxK": any N agents of K segments each. () : only the one-agent form.
SPLITS: dict[str, tuple[str, ...]] = {
    "Ant": ("2x4", "2x4d", "4x2", "8x1"),
    "HalfCheetah": ("2x3", "6x1"),
    "Hopper": ("3x1",),
    "Humanoid": ("9|8",),
    "HumanoidStandup": ("9|8",),
    "Reacher": ("2x1",),
    "Pusher": ("3p",),
    "Swimmer": ("2x1",),
    "Walker2d": ("2x3",),
    "InvertedPendulum": (),
    "InvertedDoublePendulum": (),
    "CoupledHalfCheetah": ("1p1",),
    "ManySegmentSwimmer": ("NxK",),
    "ManySegmentAnt": ("NxK",),
}
_MANY_SEGMENTS = {"ManySegmentAnt": ("many_segment_ant", "Ant-v5"),
                  "ManySegmentSwimmer": ("many_segment_swimmer", "Swimmer-v5")}


def parse_id(env_id: str) -> tuple[str, str | None]:
    """``Scenario/agent_conf`` as (scenario, agent_conf); UnknownEnvError names what is allowed.

    ```pycon
    >>> parse_id("Ant/2x4"), parse_id("Hopper")
    (('Ant', '2x4'), ('Hopper', None))
    ```
    """
    scenario, _, conf = env_id.partition("/")
    if scenario not in SPLITS:
        raise UnknownEnvError(no_env_message(env_id, "gymnasium_robotics.mamujoco_v1", SPLITS, scenario))
    splits = SPLITS[scenario]
    if not conf:
        if scenario in _MANY_SEGMENTS:
            raise UnknownEnvError(f"mamujoco {scenario} needs a split NxK (N agents of K segments), e.g. {scenario}/2x3")
        return scenario, None
    if splits == ("NxK",):
        if not re.fullmatch(r"[1-9]\d*x[1-9]\d*", conf):
            raise UnknownEnvError(f"no split {conf!r} of mamujoco {scenario}; allowed: NxK (N agents of K segments, "
                                  f"e.g. {scenario}/2x3)")
    elif conf not in splits:
        allowed = ", ".join(f"{scenario}/{s}" for s in splits) or "none but the one-agent form"
        raise UnknownEnvError(f"no split {conf!r} of mamujoco {scenario}; allowed: {allowed}, or {scenario} "
                              "(one agent)")
    return scenario, conf


def _many_segments_env(scenario: str, conf: str, render_mode: str | None, kwargs: dict[str, Any]) -> gym.Env:
    """The library's ManySegment build, with its generated XML in a folder of its own."""
    module_name, base = _MANY_SEGMENTS[scenario]
    module = require(f"gymnasium_robotics.envs.multiagent_mujoco.{module_name}", EXTRA, "Multi-Agent MuJoCo")
    n_agents, per_agent = (int(x) for x in conf.split("x"))
    with tempfile.TemporaryDirectory(prefix="marl_vec_mamujoco_") as folder:
        path = os.path.join(folder, f"{module_name}_{n_agents * per_agent}_segments.auto.xml")
        module.gen_asset(n_segs=n_agents * per_agent, asset_path=path)
        return gym.make(base, xml_file=path, **kwargs, render_mode=render_mode)


def _coupled_half_cheetah_env(render_mode: str | None, kwargs: dict[str, Any]) -> gym.Env:
    mujoco = require("mujoco", EXTRA, "Multi-Agent MuJoCo")
    if tuple(int(x) for x in mujoco.__version__.split(".")[:2]) >= (3, 6):
        # MuJoCo 3.6 made the tendon Jacobian sparse; the library's observation indexes it as dense.
        raise MissingExtraError(f"mamujoco CoupledHalfCheetah needs mujoco < 3.6 (gymnasium-robotics 1.4.2 reads "
                              f"data.ten_J as a dense matrix, sparse since MuJoCo 3.6); mujoco {mujoco.__version__} "
                              "is installed: pip install 'marl_vec[mamujoco]' installs a working one")
    unknown = sorted(set(kwargs) - {"max_episode_steps"})
    if unknown:
        raise TypeError(f"CoupledHalfCheetah got an unexpected keyword argument {unknown[0]!r}; "
                        "it takes max_episode_steps only")
    from gymnasium_robotics.envs.multiagent_mujoco.coupled_half_cheetah import CoupledHalfCheetahEnv

    return gym.wrappers.TimeLimit(CoupledHalfCheetahEnv(render_mode), kwargs.get("max_episode_steps", 1000))


def ant_8x1() -> dict[str, Any]:
    """The Ant as 8 agents of one joint each: the library's Ant graph, one joint per part."""
    from gymnasium_robotics.envs.multiagent_mujoco.obsk import get_parts_and_edges

    parts, edges, globals_ = get_parts_and_edges("Ant", "4x2")
    return {"partition": [(joint,) for part in parts for joint in part], "edges": edges, "globals": globals_}


def make_mamujoco(env_id: str, agent_obsk: int | None = 1, local_categories: list[list[str]] | None = None,
                  global_categories: tuple[str, ...] | None = None, agent_factorization: dict[str, Any] | None = None,
                  render_mode: str | None = None, compiled: bool = True, **kwargs: Any) -> MaMuJoCoAdapter:
    """The ``mamujoco`` family: ``env_id`` is ``Scenario/agent_conf`` (see the module docstring).

    ``kwargs`` (``max_episode_steps``, the robot's own options) go to the robot's env.
    ``compiled=False`` steps every env through the library's ``env.step`` (see
    `marl_vec.envs.mamujoco.compiled_step`; the results are the same).
    """
    if not isinstance(compiled, bool):
        raise TypeError(f"mamujoco compiled must be True or False, not {compiled!r}")
    require("mujoco", EXTRA, "Multi-Agent MuJoCo")
    mamujoco_v1 = require("gymnasium_robotics.envs.multiagent_mujoco.mamujoco_v1", EXTRA, "Multi-Agent MuJoCo")
    scenario, conf = parse_id(env_id)
    if agent_obsk is not None and (not isinstance(agent_obsk, (int, np.integer)) or agent_obsk < 0):
        raise ValueError(f"mamujoco agent_obsk must be an int >= 0 (how many joints away an agent sees) or None "
                         f"(every agent sees the whole state), not {agent_obsk!r}")
    gym_env = None
    if scenario in _MANY_SEGMENTS:
        assert conf is not None  # parse_id refuses the bare form
        gym_env = _many_segments_env(scenario, conf, render_mode, kwargs)
    elif scenario == "CoupledHalfCheetah":
        gym_env = _coupled_half_cheetah_env(render_mode, kwargs)
    if scenario == "Ant" and conf == "8x1" and agent_factorization is None:
        agent_factorization = ant_8x1()
    env = mamujoco_v1.parallel_env(scenario, conf, agent_obsk=agent_obsk, agent_factorization=agent_factorization,
                                   local_categories=local_categories, global_categories=global_categories,
                                   render_mode=render_mode, gym_env=gym_env, **({} if gym_env else kwargs))
    return MaMuJoCoAdapter(env, env_id, compiled)

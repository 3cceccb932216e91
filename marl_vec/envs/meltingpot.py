"""DeepMind's Melting Pot (family ``meltingpot``): every substrate of ``meltingpot.substrate.SUBSTRATES``.

A substrate is a Lab2d world (dmlab2d's C++ engine running Melting Pot's Lua) that
several players share. Its ``Lab2d`` object cannot be pickled, so no one could ship
a built substrate to a worker; here each env is built inside its worker from the
family's picklable factory (``make_env_fn("meltingpot", name)``).
Conventions (docs/families/meltingpot.md):

- Ids: a substrate name (``commons_harvest__open``, ``clean_up``, ...; `substrates`).
  A scenario (a substrate with bots) is refused: its bots are saved TensorFlow models
  that this install does not have (`ScenarioError`).
- Agents ``player_0`` ... ``player_{N-1}``, one per role: ``roles`` (default: the
  substrate's ``default_player_roles``); any roles of its ``valid_roles`` are accepted.
- Observations: a Dict per player of the substrate's individual keys (``RGB``,
  ``READY_TO_SHOOT``, ``COLLECTIVE_REWARD`` and whatever else it has: ``INVENTORY``,
  ``STAMINA``, ...), in the substrate's dtypes. ``WORLD.RGB`` is not an observation.
- State (``state=``): ``auto`` and ``concat`` are the players' observations
  concatenated (free: the buffers share them); ``env`` is ``WORLD.RGB``, the whole
  world's picture (it costs one copy per step, so it is off unless asked); ``none``.
- Actions: the substrate's discrete action set; ``spec.action_names`` (and
  ``env_info()["action_names"]``) name them (``NOOP``, ``FORWARD``, ``FIRE_ZAP``, ...).
- Rewards: each player's own; ``infos[i]["episode"]["collective_return"]`` is the
  episode's sum of ``COLLECTIVE_REWARD``.
- Episodes end when the substrate says (its Lua ends many at random after a
  minimum length). An end at ``maxEpisodeLengthFrames`` (``spec.episode_limit``) is
  ``truncated``, an earlier one ``terminated`` (Melting Pot gives discount 0 to
  both). ``max_episode_steps`` lowers that limit, in the substrate's own settings.
- Seeding: Melting Pot's build takes no seed; it draws the Lab2d seed from Python's
  ``random``. ``reset(seed=s)`` builds the substrate afresh with ``random`` seeded
  by ``s`` (and puts ``random``'s state back), as ``random.seed(s);
  substrate.build(...)`` does. An unseeded reset is the substrate's own reset (it
  rebuilds the world with its next seed). Substrates are not reproducible from their
  seed at all (see the family page): with the same Lab2d seed and settings, the engine
  builds different worlds from one build to the next.
- ``render()`` is ``WORLD.RGB`` of the last step.

``import meltingpot`` imports the bots and so tensorflow (1.3 GB, ~9 s per
process); substrates need neither. `import_substrate` imports the substrate modules
without the package's ``__init__``.

Examples:
    >>> env = make_meltingpot("commons_harvest__open")
    >>> env.spec.agents[:2], env.spec.n_actions, env.spec.episode_limit
    (('player_0', 'player_1'), 8, 5000)
    >>> sorted(env.spec.obs_space.spaces), env.spec.action_names[:3]
    (['COLLECTIVE_REWARD', 'READY_TO_SHOOT', 'RGB'], ('NOOP', 'FORWARD', 'BACKWARD'))
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import random
import sys
from types import ModuleType
from typing import Any, Sequence

import gymnasium as gym
import numpy as np

from marl_vec.core import spaces
from marl_vec.core.buffers import RowViews
from marl_vec.core.errors import SetupError
from marl_vec.core.spec import DiscreteAction, EnvSpec
from marl_vec.core.adapter import NativeEnvAdapter
from marl_vec.envs.extras import MissingExtraError, UnknownEnvError, missing_extra_message, no_env_message

EXTRA = "meltingpot"
WORLD = "WORLD.RGB"
COLLECTIVE = "COLLECTIVE_REWARD"
LIST_HINT = "python -c 'from marl_vec.envs.meltingpot import substrates; print(*substrates())'"


class ScenarioError(SetupError, ValueError):
    """A Melting Pot scenario (substrate + bots) was asked for: its bots cannot run here."""


def import_substrate() -> ModuleType:
    """``meltingpot.substrate``, imported without ``meltingpot/__init__.py``.

    That ``__init__`` imports ``meltingpot.bot``, which imports tensorflow for the
    bots' saved models; the substrates never use it. The package goes into
    ``sys.modules`` as a bare module (its ``__path__`` set, its ``__init__`` not run),
    so its submodules import as usual. A ``meltingpot`` imported before is used as is.
    """
    if "meltingpot" not in sys.modules:
        try:
            spec = importlib.util.find_spec("meltingpot")
        except ImportError:  # pragma: no cover - a broken parent path
            spec = None
        if spec is None:
            raise MissingExtraError(missing_extra_message(
                "meltingpot", EXTRA, "Melting Pot substrates", ImportError("No module named 'meltingpot'"))
                + " and then: bash scripts/install/install_meltingpot.sh")
        sys.modules["meltingpot"] = importlib.util.module_from_spec(spec)
    try:
        return importlib.import_module("meltingpot.substrate")
    except ImportError as exc:
        raise MissingExtraError(missing_extra_message("meltingpot.substrate", EXTRA, "Melting Pot substrates", exc)
                                + " and then: bash scripts/install/install_meltingpot.sh") from exc


def substrates() -> tuple[str, ...]:
    """The names of every substrate (49 in dm-meltingpot 2.4.1), sorted: Melting Pot keeps them in a
    frozenset, whose order changes from one process to the next (pytest-xdist's workers must
    collect the same tests in the same order)."""
    return tuple(sorted(import_substrate().SUBSTRATES))


def _scenario_substrate(name: str) -> str | None:
    """The substrate of scenario ``name``, or None when ``name`` is no scenario."""
    try:
        scenarios = importlib.import_module("meltingpot.configs.scenarios")
    except ImportError:  # pragma: no cover - an install without the scenario configs
        return None
    config = scenarios.SCENARIO_CONFIGS.get(name)
    return None if config is None else str(config.substrate)


def check_substrate(name: str) -> None:
    """Refuse what is not a substrate: a scenario (`ScenarioError`) or an unknown name (`UnknownEnvError`)."""
    known = substrates()
    if name in known:
        return
    substrate = _scenario_substrate(name)
    if substrate is not None:
        raise ScenarioError(
            f"meltingpot {name!r} is a scenario (substrate {substrate} plus bots), which cannot run here: its bots "
            "are saved TensorFlow models in an assets archive that dm-meltingpot downloads from outside the package "
            f"registries; use its substrate {substrate!r}, or list the substrates with: {LIST_HINT}")
    raise UnknownEnvError(no_env_message(name, "meltingpot.substrate.SUBSTRATES", known)
                          + f" (list them with: {LIST_HINT})")


def action_names(name: str, action_set: Sequence[Any]) -> tuple[str, ...]:
    """A name per action of substrate ``name``: the config module's constant that holds it
    (``FORWARD = {"move": 1, ...}``), else its non-zero parts (``move=1,turn=-1``).

    ```pycon
    >>> action_names("no_such_config", [{"move": 0, "turn": 0}, {"move": 1, "turn": -1}])
    ('NOOP', 'move=1,turn=-1')
    ```
    """
    modules: list[ModuleType] = []
    try:
        module = importlib.import_module(f"meltingpot.configs.substrates.{name}")
        modules = [module] + ([module.base_config] if isinstance(getattr(module, "base_config", None), ModuleType)
                              else [])
    except ImportError:
        pass
    names = []
    for action in action_set:
        action = dict(action)
        found = [key for m in modules for key, value in vars(m).items()
                 if key.isupper() and isinstance(value, dict) and value == action]
        parts = ",".join(f"{k}={v}" for k, v in action.items() if v)
        names.append(found[0] if found else parts or "NOOP")
    return tuple(names)


def _box(spec: Any) -> gym.spaces.Box:
    """The gymnasium Box of a dm_env array spec (its bounds where it has them)."""
    dtype = np.dtype(spec.dtype)
    shape = tuple(spec.shape)
    if hasattr(spec, "minimum"):
        low, high = np.broadcast_to(spec.minimum, shape), np.broadcast_to(spec.maximum, shape)
    elif dtype == np.uint8:
        low, high = np.zeros(shape), np.full(shape, 255)
    elif np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        low, high = np.full(shape, info.min), np.full(shape, info.max)
    else:
        low, high = np.full(shape, -np.inf), np.full(shape, np.inf)
    return gym.spaces.Box(low.astype(dtype), high.astype(dtype), shape, dtype)


class MeltingPotAdapter(NativeEnvAdapter):
    """One Melting Pot substrate; the Lab2d world is built at the first reset, in the process that steps it."""

    def __init__(self, name: str, roles: Sequence[str] | None = None, max_episode_steps: int | None = None):
        check_substrate(name)
        self._substrate = import_substrate()
        config = self._substrate.get_config(name)
        valid = sorted(config.valid_roles)
        self.roles = tuple(config.default_player_roles if roles is None else roles)
        if isinstance(roles, str) or not self.roles or any(r not in valid for r in self.roles):
            raise ValueError(f"meltingpot {name}: roles must be a non-empty list of its roles {valid} "
                             f"(one per player; default {list(config.default_player_roles)}), not {roles!r}")
        settings = config.lab2d_settings_builder(roles=self.roles, config=config)  # Python only: no world built
        limit = int(settings["maxEpisodeLengthFrames"])
        if max_episode_steps is not None:
            if not isinstance(max_episode_steps, (int, np.integer)) or isinstance(max_episode_steps, bool) \
                    or max_episode_steps < 1:
                raise ValueError(f"meltingpot max_episode_steps must be an int >= 1, not {max_episode_steps!r}")
            limit = int(max_episode_steps)
            config = _with_episode_limit(config, limit)
        self.name, self.env, self._config, self._limit = name, None, config, limit
        self._checked = False
        observation = config.timestep_spec.observation
        global_names = set(config.global_observation_names)
        # The substrate's CollectiveRewardWrapper adds COLLECTIVE_REWARD to each player's observation.
        boxes = {k: _box(spec) for k, spec in observation.items() if k not in global_names}
        boxes[COLLECTIVE] = gym.spaces.Box(-np.inf, np.inf, (), np.float64)
        obs_space = gym.spaces.Dict(boxes)
        self._keys = tuple(obs_space.spaces)
        self._world_spec = observation[WORLD]
        obs_shape, obs_dtype = spaces.flat_shape_dtype(obs_space)
        n_actions = int(config.action_spec.num_values)
        self.spec = EnvSpec(
            agents=tuple(f"player_{i}" for i in range(len(self.roles))), obs_shape=obs_shape, obs_dtype=obs_dtype,
            state_shape=(0,), state_dtype=np.dtype(np.uint8), action=DiscreteAction(n_actions),
            episode_limit=limit, obs_space=obs_space, has_state=False, stats=("collective_return",),
            env_name=f"meltingpot {name}", action_names=action_names(name, config.action_set))
        self.use_state("auto")

    def use_state(self, mode: str) -> None:
        """``auto``/``concat``: the observations; ``env``: ``WORLD.RGB``; ``none``: no state."""
        if mode not in ("auto", "env", "concat", "none"):
            raise ValueError(f"unknown state mode {mode!r}; allowed: auto, env, concat, none")
        self._world_state = mode == "env"
        spec = self.spec
        if mode == "env":
            self.spec = dataclasses.replace(spec, state_shape=tuple(self._world_spec.shape),
                                            state_dtype=np.dtype(self._world_spec.dtype), state_is_obs=False,
                                            has_state=True)
        elif mode == "none":
            self.spec = dataclasses.replace(spec, state_shape=(0,), state_is_obs=False, has_state=False)
        else:
            # One agent: its observation's own shape; several: raveled, concatenated (the buffers' view).
            self.spec = dataclasses.replace(spec, state_shape=spec.state_leaf_shape(tuple(spec.obs_shape)), state_dtype=spec.obs_dtype, state_is_obs=True,
                                            has_state=True)

    def bind(self, row: RowViews) -> None:
        super().bind(row)
        obs = row.obs
        assert isinstance(obs, dict)  # a Dict space: one array per key, (A, *shape)
        self._obs_leaves = [(key, obs[key]) for key in self._keys]
        self._collective = 0.0
        self._steps = 0
        self._world: np.ndarray | None = None
        self.timestep: Any = None

    def _build(self, seed: int | None) -> Any:
        if seed is None:
            return self._substrate.build_from_config(self._config, roles=self.roles)
        saved = random.getstate()
        random.seed(int(seed))
        try:
            return self._substrate.build_from_config(self._config, roles=self.roles)
        finally:
            random.setstate(saved)

    def _check_spec(self, env: Any) -> None:
        """The built substrate's player observations are the ones the spec promised."""
        built = {k: (tuple(v.shape), np.dtype(v.dtype)) for k, v in env.observation_spec()[0].items() if k != WORLD}
        promised = {k: (box.shape, box.dtype) for k, box in self.spec.obs_space.spaces.items()}
        if built != promised:
            env.close()
            raise RuntimeError(f"meltingpot {self.name}: the built substrate's player observations {built} are not "
                               f"the ones its config declares {promised}")

    def _write(self, timestep: Any) -> None:
        players = timestep.observation
        for key, leaf in self._obs_leaves:
            for i, ob in enumerate(players):
                leaf[i] = ob[key]
        self.timestep = timestep  # the substrate's own last timestep (dm_env.TimeStep, one entry per player)
        self._world = players[0][WORLD]
        if self._world_state:
            self.row.state[...] = self._world

    def reset(self, seed: int | None = None) -> dict[str, Any]:
        if seed is not None or self.env is None:
            self.close()
            env = self._build(seed)
            if not self._checked:
                self._check_spec(env)
                self._checked = True
            self.env = env
        timestep = self.env.reset()
        self._write(timestep)
        row = self.row
        if row.avail_actions is not None:
            row.avail_actions[...] = True
        row.agent_mask[...] = True
        self._collective, self._steps = 0.0, 0
        return {}

    def step(self, actions: np.ndarray) -> dict[str, Any]:
        timestep = self.env.step(actions.tolist())
        self._write(timestep)
        row = self.row
        row.reward[...] = timestep.reward
        self._collective += float(np.sum(timestep.reward))
        self._steps += 1
        # Melting Pot ends every episode with discount 0; its frame limit is a time limit.
        last = timestep.last()
        row.truncated[...] = last and self._steps >= self._limit
        row.terminated[...] = last and self._steps < self._limit
        return {}

    def episode_stats(self, info: dict[str, Any]) -> dict[str, float]:
        return {"collective_return": self._collective}

    def render(self) -> np.ndarray | None:
        return None if self._world is None else np.array(self._world)

    def close(self) -> None:
        if self.env is not None:
            env, self.env = self.env, None
            env.close()

    @property
    def native(self) -> Any:
        """The substrate (``meltingpot.utils.substrates.substrate.Substrate``); the adapter
        itself until the first reset builds it."""
        return self if self.env is None else self.env


def _with_episode_limit(config: Any, limit: int) -> Any:
    """``config`` whose Lab2d settings end an episode after ``limit`` frames (maxEpisodeLengthFrames)."""
    inner = config.lab2d_settings_builder

    def lab2d_settings_builder(roles: Sequence[str], config: Any) -> Any:
        settings = inner(roles=roles, config=config)
        settings["maxEpisodeLengthFrames"] = limit
        return settings

    with config.unlocked():
        config.lab2d_settings_builder = lab2d_settings_builder
    return config


def make_meltingpot(env_id: str, roles: Sequence[str] | None = None,
                    max_episode_steps: int | None = None) -> MeltingPotAdapter:
    """The ``meltingpot`` family: ``env_id`` is a substrate name (see the module docstring)."""
    return MeltingPotAdapter(env_id, roles, max_episode_steps)

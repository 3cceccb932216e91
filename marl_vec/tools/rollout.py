"""Random-policy rollouts: what ``marl-vec run`` does, and a baseline for trainers.

Examples:
    >>> import marl_vec as mv
    >>> venv = mv.make("mpe/simple_spread", num_envs=2)
    >>> summary = rollout(venv, steps=50, progress=False)
    >>> summary.env_steps
    100
    >>> venv.close()
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from marl_vec.tools.progress import Progress
from marl_vec.core.spec import (ContinuousAction, DiscreteAction, EnvSpec, MultiBinaryAction, MultiDiscreteAction,
                           ObjectAction, TreeAction)
from marl_vec.vec.base import StepResult, VecEnv


class RandomPolicy:
    """Uniform over each agent's available actions (or over a Box, clipped to [-1, 1] where unbounded)."""

    def __init__(self, spec: EnvSpec, num_envs: int, seed: int | None = 0):
        self.spec = spec
        self.rng = np.random.default_rng(seed)
        self.num_envs = num_envs
        if isinstance(spec.action, ContinuousAction):
            # Per agent: padded agents have their own bounds (padding unbounded, ignored).
            agents_shape = (spec.n_agents, *spec.action_shape)
            low = np.broadcast_to(spec.action.low, agents_shape).astype(np.float64)
            high = np.broadcast_to(spec.action.high, agents_shape).astype(np.float64)
            self.low = np.where(np.isfinite(low), low, -1.0)
            self.high = np.where(np.isfinite(high), high, 1.0)

    def __call__(self, result: StepResult) -> np.ndarray:
        action = self.spec.action
        if isinstance(action, (DiscreteAction, MultiDiscreteAction)):
            assert result.avail_actions is not None
            scores = self.rng.random(result.avail_actions.shape)
            scores[~result.avail_actions] = -1.0
            start = np.asarray(action.start, dtype=np.int64).reshape(action.shape)
            return scores.argmax(axis=-1) + start  # the space's own values
        shape = (self.num_envs, self.spec.n_agents, *self.spec.action_shape)
        if isinstance(action, MultiBinaryAction):
            return self.rng.integers(0, 2, size=shape, dtype=action.dtype)
        if isinstance(action, TreeAction):  # Dict/Tuple: a sample of the space, batched over (E, A)
            from gymnasium.vector.utils import batch_space

            space = batch_space(self.spec.action_space, self.num_envs)
            space.seed(int(self.rng.integers(2**31)))
            return space.sample()
        if isinstance(action, ObjectAction):  # Text, Graph, ...: one sample per env and agent
            space = action.space()
            space.seed(int(self.rng.integers(2**31)))
            out = np.empty(shape, dtype=object)
            for index in np.ndindex(*shape):
                out[index] = space.sample()
            return out
        return self.rng.uniform(self.low, self.high, size=shape).astype(self.spec.action.dtype)


@dataclass
class RolloutSummary:
    env_steps: int
    seconds: float
    episodes: int
    statistics: dict[str, float]
    returns: list[float] = field(default_factory=list)  # every finished episode's team return, in order
    steps: int | None = None  # batched steps run (env_steps / num_envs)
    episode_limit: int | None = None  # the env's (spec.episode_limit), to say why no episode ended

    @property
    def steps_per_second(self) -> float:
        return self.env_steps / self.seconds if self.seconds > 0 else float("nan")

    @property
    def width(self) -> int:
        """The label column: 17 characters, wider when a statistic's label (``mean won_player_0``)
        would reach its values; two spaces before the values then."""
        longest = max((len(f"mean {key}") for key in self.statistics if key != "episodes"), default=0)
        return max(17, longest + 2)

    def _why_none(self) -> str:
        """Why a summary with no episode has no return line: the run was shorter than an episode."""
        if self.episodes or self.steps is None:
            return ""
        limit = (f"the episode limit is {self.episode_limit:,} steps" if self.episode_limit
                 else "the env sets no episode limit")
        return f"  (no episode ended within the {self.steps:,} steps run; {limit})"

    def lines(self) -> list[str]:
        w = self.width
        out = [
            f"{'env-steps/s':<{w}}{self.steps_per_second:,.0f}  ({self.env_steps} env-steps in {self.seconds:.2f} s)",
            f"{'episodes':<{w}}{self.episodes}{self._why_none()}",
        ]
        for key, value in self.statistics.items():
            if key != "episodes":
                out.append(f"{'mean ' + key:<{w}}{value:.4g}  (last {min(self.episodes, 100)} episodes)")
        return out


class Interrupted(KeyboardInterrupt):
    """Ctrl-C inside a loop of batched steps; ``steps`` ran before it, ``result`` is what they gave.

    A KeyboardInterrupt, so code that does not know it stops as usual; ``marl-vec``
    catches it to print what ran and exit with 130.
    """

    def __init__(self, steps: int, result: Any = None):
        super().__init__(f"interrupted after {steps} steps")
        self.steps = steps
        self.result = result


def rollout(
    venv: VecEnv,
    steps: int,
    policy: Callable[[StepResult], Any] | None = None,
    seed: int | None = 0,
    progress: bool = True,
    on_step: Callable[[StepResult], None] | None = None,
    label: str | None = None,
) -> RolloutSummary:
    """Run ``steps`` batched steps (``steps * num_envs`` env-steps) with ``policy``.

    ``label`` names the progress display (default ``"<num_envs> envs"``). On Ctrl-C it
    raises `Interrupted` whose ``result`` is the summary of the steps done.
    """
    policy = policy or RandomPolicy(venv.spec, venv.num_envs, seed)
    result = venv.reset()
    returns: list[float] = []
    done_steps = 0
    start = time.perf_counter()
    with Progress(steps, label or f"{venv.num_envs} envs", enabled=progress) as bar:
        try:
            for _ in range(steps):
                result = venv.step(policy(result))
                done_steps += 1
                if result.done.any():
                    returns.extend(
                        info["episode"]["return"] for info in result.infos if "episode" in info
                    )
                    bar.set_postfix(episodes=len(returns), ret=f"{np.mean(returns[-100:]):.3g}")
                if on_step is not None:
                    on_step(result)
                bar.update()
        except KeyboardInterrupt:
            raise Interrupted(done_steps, _summary(venv, done_steps, start, returns)) from None
    return _summary(venv, done_steps, start, returns)


def _summary(venv: VecEnv, steps: int, start: float, returns: list[float]) -> RolloutSummary:
    seconds = time.perf_counter() - start
    stats = venv.episode_statistics()
    return RolloutSummary(steps * venv.num_envs, seconds, int(stats.get("episodes", 0)), stats, returns, steps,
                          venv.spec.episode_limit)

"""VMAS stepped by hand: the reference the VMAS family is compared with, bit for bit.

One ``vmas.make_env`` per block of envs (a DummyVecEnv is one block; a
SubprocVecEnv one per worker), stepped with the same actions. It follows the
family's documented rules, written here again from VMAS's own API:

- env ``i`` of a block has a seed ``s``; before episode ``n`` (0, 1, ...) of it,
  ``env.seed(word)`` with ``word`` the first 32-bit word of
  ``numpy.random.SeedSequence([s, n])``, then ``env.reset_at(i,
  return_observations=False)``; after every env that resets together has been
  reset, one ``get_from_scenario`` reads the observations (TorchRL's idiom), of
  which only the reset envs' are kept (the others keep their step's);
- with ``batched_reset``, a reset of the whole block (``reset()``) is instead ONE
  ``env.reset(seed=word)``, ``word`` the first 32-bit word of
  ``SeedSequence([*seeds, *episodes])`` (each env's seed, then how many episodes
  each has started), and every env's episode count goes on by one;
- a block of ``k`` envs is a VMAS batch of ``k`` rounded up to a multiple of 32 envs: the
  envs past ``k`` are padding, stepped with zero actions, never reset one by one and never read;
- each block runs on its own copy of VMAS's process-wide random state
  (``Environment.vmas_random_state``), swapped in around its calls;
- terminated is VMAS's ``terminated``; truncated is VMAS's ``truncated`` where
  the episode did not terminate; both are the env's, given to every agent.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # gym's "unmaintained" notice, printed at import
    import torch
    import vmas
    from vmas.simulator.environment import Environment

OPTIONS = ("continuous_actions", "max_steps", "clamp_actions", "batched_reset")
PAD = 32  # the family's rule (docs/families/vmas.md), written here again


def word(seed: int, episode: int) -> int:
    return int(np.random.SeedSequence([seed, episode]).generate_state(1)[0])


class Block:
    """One VMAS batch stepped by hand."""

    def __init__(self, scenario: str, kwargs: dict[str, Any], seeds: list[int]):
        self.seeds, self.episodes = list(seeds), [0] * len(seeds)
        self.random = list(Environment.vmas_random_state)
        own = {k: v for k, v in kwargs.items() if k not in OPTIONS}
        self.k = len(seeds)
        self.native_width = -(-self.k // PAD) * PAD
        with self.active():
            self.env = vmas.make_env(scenario, num_envs=self.native_width, device="cpu", seed=0, terminated_truncated=True,
                                     continuous_actions=kwargs.get("continuous_actions", True),
                                     max_steps=kwargs.get("max_steps"),
                                     clamp_actions=kwargs.get("clamp_actions", False), **own)
        self.continuous = kwargs.get("continuous_actions", True)
        self.batched = kwargs.get("batched_reset", False)
        self.obs_sizes = [int(o.shape[1]) for o in self.env.get_from_scenario(True, False, False, False)[0]]
        self.width = max(self.obs_sizes)

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        shared = Environment.vmas_random_state
        outside = list(shared)
        shared[:] = self.random
        try:
            yield
        finally:
            self.random = list(shared)
            shared[:] = outside

    def _stack(self, obs: list[torch.Tensor]) -> np.ndarray:
        out = np.zeros((self.k, len(obs), self.width), dtype=np.float32)
        for a, o in enumerate(obs):
            out[:, a, : o.shape[1]] = o.numpy()[: self.k]
        return out

    def _reset(self, slots: list[int]) -> np.ndarray:
        for i in slots:
            self.env.seed(word(self.seeds[i], self.episodes[i]))
            self.episodes[i] += 1
            self.env.reset_at(i, return_observations=False)
        return self._stack(self.env.get_from_scenario(True, False, False, False)[0])

    def reset(self) -> np.ndarray:
        with self.active():
            if not self.batched:
                return self._reset(list(range(len(self.seeds))))
            entropy = [s % 2**64 for s in self.seeds] + self.episodes
            word = int(np.random.SeedSequence(entropy).generate_state(1)[0])
            self.episodes = [n + 1 for n in self.episodes]
            return self._stack(self.env.reset(seed=word))

    def step(self, actions: np.ndarray) -> dict[str, np.ndarray]:
        per_agent = []
        k = self.k
        for a, space in enumerate(self.env.action_space.spaces):
            if self.continuous:
                act = torch.zeros((self.native_width, space.shape[0]), dtype=torch.float32)
                act[:k] = torch.tensor(actions[:, a, : space.shape[0]], dtype=torch.float32)
            else:
                act = torch.zeros((self.native_width, 1), dtype=torch.int64)
                act[:k] = torch.tensor(actions[:, a : a + 1], dtype=torch.int64)
            per_agent.append(act)
        with self.active():
            obs, rewards, terminated, truncated, _ = self.env.step(per_agent)
            last = self._stack(obs)
            term = terminated.numpy().reshape(-1)[:k].copy()
            cut = truncated.numpy().reshape(-1)[:k] & ~term
            done = term | cut
            following = last.copy()  # envs that go on keep the step's observation (TorchRL's idiom too):
            if done.any():  # road_traffic's observation() changes its state, so a second read differs
                following[done] = self._reset(np.flatnonzero(done).tolist())[done]
        n_agents = len(per_agent)
        return {"obs": following, "final_obs": last, "done": done,
                "reward": np.stack([r.numpy().reshape(-1)[:k] for r in rewards], axis=1).astype(np.float32),
                "terminated": np.repeat(term[:, None], n_agents, axis=1),
                "truncated": np.repeat(cut[:, None], n_agents, axis=1)}


class Reference:
    """Blocks of envs seeded ``env_seed + i`` (i counted over all blocks), stepped together."""

    def __init__(self, scenario: str, kwargs: dict[str, Any], block_sizes: list[int], env_seed: int):
        self.blocks, start = [], env_seed
        for size in block_sizes:
            self.blocks.append(Block(scenario, kwargs, list(range(start, start + size))))
            start += size
        self.bounds = np.cumsum([0, *block_sizes])

    def reset(self) -> np.ndarray:
        return np.concatenate([b.reset() for b in self.blocks])

    def step(self, actions: np.ndarray) -> dict[str, np.ndarray]:
        parts = [b.step(actions[lo:hi]) for b, lo, hi in zip(self.blocks, self.bounds[:-1], self.bounds[1:])]
        return {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}

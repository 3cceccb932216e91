"""EnvGroup's bookkeeping when an env raises part-way through a step with no restart left,
and the seed of a rebuilt env (`rebuild_seed`).

`EnvGroup.step <marl_vec.core.group.EnvGroup.step>` steps its envs in order. When env
``f`` raises and may not restart, the envs before it have already stepped: they get that
step's full bookkeeping here (``done``, episode statistics, ``final_*`` and autoreset),
exactly as a whole step gives it, before the error propagates. Env ``f`` and the envs
after it are left as they were (not stepped); env ``f`` needs ``reset(env_ids=[f])``.

Examples:
    >>> import gymnasium as gym
    >>> from marl_vec.core.buffers import BatchBuffers
    >>> from marl_vec.envs.registry import adapter_fns
    >>> from marl_vec.core.group import EnvGroup
    >>> fns = adapter_fns([lambda: gym.make("CartPole-v1")] * 2)
    >>> group = EnvGroup(fns, BatchBuffers(fns[0]().spec, 2))
    >>> _ = group.reset(seed=0); infos = group.step()
    >>> settle_stepped(group, 0, infos, RuntimeError("env 0 raised"))  # nothing stepped before env 0
"""

from __future__ import annotations

from typing import Any

import numpy as np

from marl_vec.core.episode import AutoresetMode

# The functions take an EnvGroup, typed Any: group.py imports this module, so importing
# EnvGroup here (even for type checking) would make an import cycle (tests/project/test_layering.py).
EnvGroup = Any


def failed_index(group: EnvGroup, at: int, exc: BaseException) -> int:
    """The local index of the env that raised: ``at`` (the stepper's ``failed_at``), else
    the env named on ``exc`` (a waiting env whose autoreset raised); -1 when unknown."""
    if at >= 0:
        return at
    named = getattr(exc, "marl_vec_env_index", None)
    if isinstance(named, int) and 0 <= named - group.start < len(group.adapters):
        return named - group.start
    return -1


def settle_stepped(group: EnvGroup, failed: int, infos: list[dict[str, Any]], exc: BaseException) -> None:
    """Give envs ``0 .. failed - 1`` of ``group``, stepped before env ``failed`` raised, their
    step's bookkeeping, as `EnvGroup.step` does for a whole step; their infos (episode
    summaries, reset infos) go into ``infos`` and ``group.settled`` (a Ray actor's pool step
    returns them). Should that raise too (an autoreset that fails),
    ``exc`` stays the error the caller sees, with a note naming the second one."""
    group.settled = infos[:max(failed, 0)]  # the same dicts: _settle fills them in
    if failed <= 0:
        return
    try:
        _settle(group, failed, infos)
    except Exception as second:  # the original error is the one to report
        if hasattr(exc, "add_note"):
            exc.add_note(f"marl_vec: settling the envs stepped before it also raised {second!r}")


def _settle(group: EnvGroup, failed: int, infos: list[dict[str, Any]]) -> None:
    waiting, episodes = group._waiting, group.episodes
    ended: list[int] = []
    for j in range(failed):
        row, flags = group._rows[j], group._ended_rows[j]
        np.logical_or(row.terminated, row.truncated, out=flags)
        done = bool(flags.all())
        group.done[j] = done
        episodes.add_env_step(j, row.reward)
        if j in waiting:  # it repeated (or autoreset after) an episode end summarized already
            episodes.clear(j)
            if group.mode is not AutoresetMode.ONE_EPISODE:
                waiting.discard(j)
            continue
        if done:
            ended.append(j)
    group.ended = ended
    if not ended:
        return
    if group._keeps_final:
        group._keep_finals(ended)
    for j, summary in zip(ended, episodes.end(ended)):
        infos[j] = group.settled[j] = group._end_episode(j, infos[j], summary)


def rebuild_seed(env_seed: int | None, index: int, rebuilds: int) -> int | None:
    """The seed for rebuild number ``rebuilds`` of env (or block of envs) ``index``:
    reproducible from ``env_seed``, and new at every rebuild. None when unseeded.

    Used by EnvGroup for an env that raised, and by the process and Ray backends
    for the block of a worker or actor that died.
    """
    if env_seed is None:
        return None
    entropy = [int(env_seed) % 2**63, index, int(rebuilds)]
    return int(np.random.SeedSequence(entropy).generate_state(1)[0])

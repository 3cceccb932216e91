"""What the batch's global state holds: ``state="auto" | "env" | "concat" | "none"``.

- ``auto`` (default): the env's own state where it has one (PettingZoo: a
  ``state_space``), else the agents' observations concatenated. When the env's
  ``state()`` raises on some step (multiwalker after a walker fell, magent2 when a
  group is empty), that env's state row is zeros on that step, ``infos[i]`` says
  ``state_unavailable``, and a warning names the env and the error (once).
- ``env``: the env's own state; an env without one is refused at construction, and
  a ``state()`` that raises is an error naming the env.
- ``concat``: the agents' (padded) observations concatenated; free, the state
  shares memory with the observations in the buffers.
- ``none``: no state at all: ``StepResult.state`` and ``final_state`` are None,
  ``spec.has_state`` is False, nothing is computed or allocated for it.

The mode is applied where adapters are made (`with_state` wraps each
env_fn), so every backend, worker and rebuilt env applies it alike.

Examples:
    >>> import marl_vec as mv
    >>> from mpe2 import simple_spread_v3
    >>> venv = mv.make_vec([simple_spread_v3.parallel_env] * 2, state="none")
    >>> venv.reset().state is None, venv.spec.has_state
    (True, False)
    >>> venv.close()
"""

from __future__ import annotations

from typing import Any, Callable, Literal, Sequence

from marl_vec.core.adapter import require_adapter

StateMode = Literal["auto", "env", "concat", "none"]
STATE_MODES: tuple[str, ...] = ("auto", "env", "concat", "none")


def check_state_mode(mode: Any) -> str:
    """``mode`` if it is a state mode, else a ValueError naming the allowed ones."""
    if mode not in STATE_MODES:
        raise ValueError(f"unknown state mode {mode!r}; allowed: {', '.join(STATE_MODES)}")
    return str(mode)


class WithState:
    """A picklable adapter factory: the adapter ``fn()`` makes, its state set to ``mode``.

    ``fn`` makes adapters (raw envs are wrapped where env_fns are taken in, by
    ``marl_vec.envs.registry.adapter_fns``).
    """

    def __init__(self, fn: Callable[[], Any], mode: str):
        self.fn, self.mode = fn, check_state_mode(mode)

    def __call__(self) -> Any:
        adapter = require_adapter(self.fn())
        try:
            adapter.use_state(self.mode)
        except BaseException:
            adapter.close()
            raise
        return adapter

    def __repr__(self) -> str:
        return f"WithState({self.fn!r}, {self.mode!r})"


def with_state(env_fns: Sequence[Callable[[], Any]], mode: str) -> list[Callable[[], Any]]:
    """Adapter factories ``env_fns``, their adapters' state set to ``mode`` (``auto``: unchanged)."""
    if check_state_mode(mode) == "auto":
        return list(env_fns)
    return [WithState(fn, mode) for fn in env_fns]

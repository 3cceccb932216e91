"""Which wrappers of a gymnasium env only check, and the step below them.

``gym.make`` builds ``TimeLimit(OrderEnforcing(PassiveEnvChecker(env)))`` (gymnasium
1.x; ``disable_env_checker=True`` leaves the checker out, an env registered without
a step limit the TimeLimit). A plain loop pays for each wrapper on every step,
about half a microsecond on CartPole (a tenth of its ~6 us step). Two of them only
check and never change a result:

- ``OrderEnforcing.step`` raises ``ResetNeeded`` until the env was reset once, then
  hands the call on (its ``reset`` notes that it was reset);
- ``PassiveEnvChecker`` checks the first reset's and the first step's results and
  compares the first two steps' data (``checked_reset``, ``checked_step``,
  ``checked_data_reuse``), then hands every call on.

Once both are past their checks, a step or reset of the env below them gives the
same result object for object. ``TimeLimit`` changes ``truncated``: the caller keeps
it out of the call chain but does its work on the wrapper's own ``_elapsed_steps``
(counts a step, truncates at ``_max_episode_steps``, sets 0 at a reset), so a user
reading or setting it sees what the plain chain would show.

`fast_chain` accepts only chains made exactly of these types (``type(w) is``,
so a subclass that may step differently is not taken for one), with at most one
TimeLimit and no wrapper whose ``step`` is set on the instance; anything else
(``ClipAction``, ``RecordEpisodeStatistics``, a user's wrapper) is stepped through
its whole chain.

May import: gymnasium (lazily). Nothing of marl_vec.

Examples:
    >>> import gymnasium as gym
    >>> env = gym.make("CartPole-v1")
    >>> chain = fast_chain(env)
    >>> chain.limit is env, chain.raw is env.unwrapped, chain.ready()  # not reset yet
    (True, True, False)
    >>> _ = env.reset(seed=0); _ = env.step(0); _ = env.step(0)
    >>> chain.ready()
    True
    >>> fast_chain(gym.wrappers.ClipReward(gym.make("CartPole-v1"), 0, 1)) is None
    True
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple


def check_only_wrappers() -> tuple[type, ...]:
    """The gymnasium wrapper types whose ``step`` and ``reset`` change nothing (only check),
    exactly these types (not subclasses)."""
    from gymnasium.wrappers.common import OrderEnforcing, PassiveEnvChecker

    return (OrderEnforcing, PassiveEnvChecker)


class FastChain(NamedTuple):
    """A chain of check-only wrappers and at most one TimeLimit over ``raw``."""

    raw: Any                      # the env below every wrapper
    raw_step: Callable[[Any], Any]  # raw.step, bound once
    limit: Any                    # the TimeLimit wrapper, or None
    checkers: tuple[Any, ...]     # the check-only wrappers, outermost first

    def ready(self) -> bool:
        """Whether every check-only wrapper is past its checks: from now on it only hands
        ``step`` on (OrderEnforcing reset once; PassiveEnvChecker's first two steps done)."""
        from gymnasium.wrappers.common import OrderEnforcing

        for wrapper in self.checkers:
            if type(wrapper) is OrderEnforcing:
                if wrapper._has_reset is not True:
                    return False
            elif wrapper.checked_reset is not True or wrapper.checked_step is not True \
                    or getattr(wrapper, "checked_data_reuse", True) is not True:
                return False
        return self.limit is None or self.limit._elapsed_steps is not None  # reset through the TimeLimit


def fast_chain(env: Any) -> FastChain | None:
    """``env``'s chain when it is one or more wrappers, each a check-only wrapper or (at
    most one) ``TimeLimit``, exact types, over an env that is not a wrapper; else None
    (step the whole chain)."""
    import gymnasium as gym
    from gymnasium.wrappers import TimeLimit

    passable = check_only_wrappers()
    checkers: list[Any] = []
    limit = None
    obj = env
    while isinstance(obj, gym.Wrapper):
        kind = type(obj)
        own = vars(obj)
        if "step" in own or "reset" in own or "env" not in own:  # set on the instance, or a property
            return None
        if kind is TimeLimit:
            if limit is not None:
                return None
            limit = obj
        elif kind in passable:
            checkers.append(obj)
        else:
            return None
        obj = obj.env
    # No wrapper at all: nothing to pass (and a raw env's reset is called without options).
    if obj is env or not isinstance(obj, gym.Env):
        return None
    return FastChain(obj, obj.step, limit, tuple(checkers))

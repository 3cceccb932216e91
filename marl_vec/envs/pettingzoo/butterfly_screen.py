"""pistonball and cooperative_pong: observations and state read once from the screen.

Both are AEC envs behind PettingZoo's ``aec_to_parallel_wrapper``. Per parallel
step the wrapper computes every agent's observation twice (in ``last()`` before
each agent's move, where it is thrown away, and again at the end), each one a
copy of a screen region in pygame's column order, handed out as a transposed
view; ``state()`` copies the whole screen that way too. The adapter then copied
those views into its rows, a second transpose. In a plain loop over pistonball
the observation copies are two thirds of the time.

`ScreenAdapter` steps the AEC env as
`AECParallelAdapter` does (the wrapper's calls,
in its order, below its check wrappers), except the observations: it reads the screen once per step (after the env drew
it, where the wrapper observes), row by row, one colour channel at a time (a
strided copy numpy does fast, where copying whole 3-byte pixels across pygame's
4-byte ones is a loop per pixel), into the state row, and copies each agent's
region of it into its observation row. The values are the env's own, bit for bit
(tests/families/test_breadth_pettingzoo.py compares them with a plain loop).

Used where the env is exactly ``aec_to_parallel_wrapper`` over an unmodified
pistonball or cooperative_pong (their ``observe`` and ``state`` are the
library's), not rendering to a window, and the spaces match the screen; anything
else takes the generic path.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from marl_vec.core.buffers import RowViews
from marl_vec.envs.pettingzoo.aec_parallel import AECParallelAdapter

# One agent's observation: a (rows, columns) window of the screen as the state lays it out.
Crop = tuple[slice, slice]


def _pistonball(raw: Any, agents: tuple[str, ...]) -> tuple[Callable[[], Any], list[Crop]] | None:
    from pettingzoo.butterfly.pistonball.pistonball import raw_env

    if type(raw) is not raw_env:
        return None
    # As raw_env.observe: 40 px either side of the piston, between the walls and above the pistons.
    y_low, y_high = raw.wall_width, raw.screen_height - raw.wall_width - raw.piston_body_height
    crops = []
    for agent in agents:
        i = raw.agent_name_mapping[agent]
        x_high = raw.wall_width + raw.piston_width * (i + 2)
        x_low = raw.wall_width + raw.piston_width * (i - 1)
        crops.append((slice(y_low, y_high), slice(x_low, x_high)))
    return (lambda: raw.screen), crops


def _cooperative_pong(raw: Any, agents: tuple[str, ...]) -> tuple[Callable[[], Any], list[Crop]] | None:
    from pettingzoo.butterfly.cooperative_pong.cooperative_pong import CooperativePong, raw_env

    if type(raw) is not raw_env or type(getattr(raw, "env", None)) is not CooperativePong:
        return None
    # Every agent sees the whole screen; the game (and its screen) is rebuilt by a seeded reset.
    return (lambda: raw.env.screen), [(slice(None), slice(None))] * len(agents)


def _unchanged(raw: Any) -> bool:
    """The env's observe/state are the library's (a subclass may change what they show)."""
    from pettingzoo.butterfly.cooperative_pong.cooperative_pong import CooperativePong
    from pettingzoo.butterfly.cooperative_pong.cooperative_pong import raw_env as pong
    from pettingzoo.butterfly.pistonball.pistonball import raw_env as pistonball

    kind = type(raw)
    if kind is pistonball:
        return kind.observe is pistonball.observe and kind.state is pistonball.state
    game = type(getattr(raw, "env", None))
    return (kind is pong and kind.observe is pong.observe and kind.state is pong.state
            and game is CooperativePong and game.observe is CooperativePong.observe
            and game.state is CooperativePong.state)


def screen_path_applies(env: Any) -> bool:
    """Whether ``env`` is a parallel pistonball or cooperative_pong that ScreenAdapter reproduces."""
    try:
        from pettingzoo.utils.conversions import aec_to_parallel_wrapper
    except ImportError:
        return False
    if type(env) is not aec_to_parallel_wrapper or getattr(env, "render_mode", None) == "human":
        return False
    raw = getattr(env, "unwrapped", None)
    try:
        return _screen_layout(raw, tuple(env.possible_agents)) is not None and _unchanged(raw)
    except ImportError:
        return False


def _screen_layout(raw: Any, agents: tuple[str, ...]) -> tuple[Callable[[], Any], list[Crop]] | None:
    return _pistonball(raw, agents) or _cooperative_pong(raw, agents)


class ScreenAdapter(AECParallelAdapter):
    """pistonball or cooperative_pong (see `screen_path_applies`); same results as
    `PettingZooAdapter`.

    Examples:
        >>> from pettingzoo.butterfly import cooperative_pong_v6
        >>> import marl_vec as mv
        >>> with mv.DummyVecEnv([cooperative_pong_v6.parallel_env]) as venv:
        ...     type(venv.group.adapters[0]).__name__, venv.reset().state.shape
        ('ScreenAdapter', (1, 280, 480, 3))
    """

    def _find_the_way_in(self) -> None:
        super()._find_the_way_in()
        # screen_path_applies found the library's observe: reading the screen changes nothing.
        self._observe_before_move = False

    def bind(self, row: RowViews) -> None:
        super().bind(row)
        layout = _screen_layout(self.env.unwrapped, self.agent_ids)
        assert layout is not None  # screen_path_applies chose this adapter
        self._screen, self._crops = layout
        state_space = self.env.state_space
        shape = tuple(state_space.shape)
        obs = row.obs
        # The screen as the state lays it out: the state row, or where the batch keeps
        # no env state, an array of this adapter's.
        state = row.state if self._call_state else None
        self._frame = state if state is not None else np.zeros(shape, np.uint8)
        fits = (isinstance(obs, np.ndarray) and obs.dtype == np.uint8 and state_space.dtype == np.uint8
                and len(shape) == 3 and shape[2] == 3
                and all(obs[i].shape == self._frame[crop].shape and
                        tuple(self.env.observation_space(agent).shape) == self._frame[crop].shape
                        for i, (agent, crop) in enumerate(zip(self.agent_ids, self._crops))))
        self._screen_path = fits and not self._env_masks
        # The step's observations were read from the screen into the frame (the state
        # row): _write_state has nothing left to do.
        self._frame_is_state = False

    def _read_frame(self) -> None:
        """The screen into the frame, as the env's ``state()`` lays it out."""
        import pygame

        pixels = pygame.surfarray.pixels3d(self._screen())  # (x, y, rgb) view, locks the surface
        try:
            rows_first = pixels.transpose(1, 0, 2)
            if rows_first.shape != self._frame.shape:
                raise ValueError(f"{self.name}: the screen is {rows_first.shape[:2]} pixels, "
                                 f"the state space {self._frame.shape[:2]}")
            frame = self._frame
            for channel in range(3):
                frame[..., channel] = rows_first[..., channel]
        finally:
            del pixels

    def reset(self, seed: int | None = None) -> dict[str, Any]:
        if not self._screen_path:
            return super().reset(seed)
        env = self.env
        aec = env.aec_env
        # aec_to_parallel_wrapper.reset, without its observe() calls.
        aec.reset(seed=seed, options=None)
        env.agents = aec.agents[:]
        infos = dict(**aec.infos)
        self._write_observations([a for a in aec.agents if not (aec.terminations[a] or aec.truncations[a])])
        return self._record_reset(None, infos)

    def _write_observations(self, reported: list[str]) -> None:
        """The screen into the frame, and each reported agent's region of it into its
        observation row; rows of the others are zero."""
        self._read_frame()
        self._frame_is_state = self._frame is self.row.state
        obs, frame = self.row.obs, self._frame
        if reported == self._agent_list:
            for i, crop in enumerate(self._crops):
                obs[i] = frame[crop]
            return
        shown = {self._index[a] for a in reported}
        for i, crop in enumerate(self._crops):
            obs[i] = frame[crop] if i in shown else 0

    def _step_observations(self, agents: list[str]) -> dict[str, Any] | None:
        if not self._screen_path:
            return super()._step_observations(agents)
        self._write_observations(agents)
        return None

    def _write_state(self) -> bool:
        """The env's ``state()``: the screen read for this step's observations, or read now."""
        if not self._screen_path:
            return super()._write_state()
        if not self._frame_is_state:
            self._read_frame()
        self._frame_is_state = False
        return True

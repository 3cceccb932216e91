"""Pictures of a batch: the frames of all envs tiled into one image, and GIFs of it.

In a recorded GIF each tile is labelled with its env index, the step of its
current episode and the episode's return so far (the mean over agents, as
``infos[i]["episode"]["return"]``).

Envs must render ``rgb_array`` frames (make them with ``render_mode="rgb_array"``;
``marl-vec render`` sets that for the families that take it).

Examples:
    >>> import marl_vec as mv
    >>> venv = mv.make(mv.load_config("mpe/simple_spread",
    ...                {"env.kwargs.render_mode": "rgb_array", "vec.num_envs": 4}))
    >>> record_gif(venv, "run.gif", steps=25)
    26
"""

from __future__ import annotations

import math
import os
from typing import Any, Callable, Sequence

import numpy as np

from marl_vec.envs.registry import require
from marl_vec.core.episode import AutoresetMode
from marl_vec.vec.base import StepResult, VecEnv


def tile_frames(frames: Sequence[np.ndarray | None], cols: int | None = None, pad: int = 2) -> np.ndarray:
    """Tile E frames of one shape (H, W, 3) into a grid, row by row, ``pad`` black pixels apart.

    ``cols`` defaults to ceil(sqrt(E)); empty grid cells stay black.

    ```pycon
    >>> a, b = np.full((1, 2, 3), 7, np.uint8), np.full((1, 2, 3), 9, np.uint8)
    >>> tile_frames([a, b], pad=1)[..., 0].tolist()
    [[7, 7, 0, 9, 9]]
    ```
    """
    if not len(frames):
        raise ValueError("tile_frames needs at least one frame")
    missing = [i for i, f in enumerate(frames) if f is None]
    if missing:
        raise ValueError(
            f"envs {missing} returned no frame; make the envs with render_mode='rgb_array' "
            "(env.kwargs.render_mode in a config)"
        )
    arrays = [np.asarray(f) for f in frames]
    shape = arrays[0].shape
    if len(shape) != 3 or shape[2] not in (3, 4):
        raise ValueError(f"frames must be (H, W, 3) or (H, W, 4) images, got shape {shape}")
    odd = [i for i, f in enumerate(arrays) if f.shape != shape]
    if odd:
        raise ValueError(f"env {odd[0]} rendered a frame of shape {arrays[odd[0]].shape}; env 0 rendered {shape}")
    if pad < 0:
        raise ValueError(f"pad must be >= 0, got {pad}")
    n = len(arrays)
    cols = cols or math.ceil(math.sqrt(n))
    if cols < 1:
        raise ValueError(f"cols must be >= 1, got {cols}")
    rows = math.ceil(n / cols)
    h, w, c = shape
    out = np.zeros((rows * h + (rows - 1) * pad, cols * w + (cols - 1) * pad, 3), np.uint8)
    for i, frame in enumerate(arrays):
        r, k = divmod(i, cols)
        y, x = r * (h + pad), k * (w + pad)
        out[y:y + h, x:x + w] = frame[..., :3]
    return out


def require_pillow() -> None:
    """Fail now, naming the light ``pictures`` extra, if Pillow (which draws GIFs) is missing.

    Called before any env starts or steps, so a missing Pillow costs no rollout.
    """
    require("PIL", "pictures", "GIFs (Pillow)")


def _shrink(frame: np.ndarray, max_side: int | None) -> np.ndarray:
    """Scale a frame down so its longer side is at most ``max_side`` (never up)."""
    if max_side is None or max(frame.shape[:2]) <= max_side:
        return frame
    from PIL import Image

    h, w = frame.shape[:2]
    scale = max_side / max(h, w)
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    return np.asarray(Image.fromarray(np.ascontiguousarray(frame[..., :3])).resize(size, Image.Resampling.BILINEAR))


def label_frame(frame: np.ndarray, text: str) -> np.ndarray:
    """``frame`` with ``text`` written in white on a black box in its top-left corner.

    ```pycon
    >>> bool(label_frame(np.zeros((20, 60, 3), np.uint8), "env 0").max() > 200)  # white text on black
    True
    ```
    """
    from PIL import Image, ImageDraw

    image = Image.fromarray(np.ascontiguousarray(frame[..., :3]))
    draw = ImageDraw.Draw(image)
    left, top, right, bottom = draw.textbbox((2, 1), text)
    draw.rectangle((0, 0, right + 2, bottom + 2), fill=(0, 0, 0))
    draw.text((2, 1), text, fill=(255, 255, 255))
    return np.asarray(image)


def tile_label(env: int, step: int, episode_return: float) -> str:
    """The label of one tile: ``tile_label(3, 12, -4.25)`` is ``'env 3  step 12  return -4.25'``."""
    return f"env {env}  step {step}  return {episode_return:.2f}"


class EpisodeProgress:
    """Each env's step and return so far in its current episode, as a GIF's labels show them.

    The return is the sum of the team reward (the mean over agents), as in
    ``infos[i]["episode"]["return"]``. Where an episode ended, the counters restart
    with the frame that shows the next episode: at once in the modes that reset
    within the step (``same_step``, ``fast``), at the next step in ``next_step``;
    ``one_episode`` and ``disabled`` keep the ended episode's.

    ```pycon
    >>> from types import SimpleNamespace as R
    >>> p = EpisodeProgress(2, "next_step")
    >>> p.update(R(reward=np.array([[1.0], [2.0]]), done=np.array([False, True])))
    >>> p.labels()
    ['env 0  step 1  return 1.00', 'env 1  step 1  return 2.00']
    >>> p.update(R(reward=np.array([[1.0], [0.0]]), done=np.array([False, False])))  # env 1 was reset
    >>> p.labels()
    ['env 0  step 2  return 2.00', 'env 1  step 0  return 0.00']
    ```
    """

    def __init__(self, num_envs: int, autoreset: AutoresetMode | str):
        self.mode = AutoresetMode.parse(autoreset)
        self.steps = np.zeros(num_envs, np.int64)
        self.returns = np.zeros(num_envs, np.float64)
        self._ended = np.zeros(num_envs, bool)  # next_step: reset by the coming step

    def update(self, result: Any) -> None:
        """Count one batched step's ``result`` (its ``reward`` (E, A) and ``done`` (E,))."""
        if self.mode is AutoresetMode.NEXT_STEP:  # this step reset the envs that ended at the last one
            self.steps[self._ended], self.returns[self._ended] = 0, 0.0
        stepped = ~self._ended  # one_episode: ended envs are not stepped any more
        self.steps[stepped] += 1
        self.returns[stepped] += np.asarray(result.reward, np.float64).reshape(len(self.steps), -1).mean(1)[stepped]
        done = np.asarray(result.done, bool)
        if self.mode.keeps_final:
            self.steps[done], self.returns[done] = 0, 0.0
        elif self.mode is AutoresetMode.NEXT_STEP:
            self._ended = done.copy()
        else:
            self._ended |= done

    def labels(self) -> list[str]:
        return [tile_label(i, int(n), float(r)) for i, (n, r) in enumerate(zip(self.steps, self.returns))]


def tiled_frame(venv: VecEnv, cols: int | None = None, max_side: int | None = 240,
                labels: Sequence[str] | None = None) -> np.ndarray:
    """One picture of every env of ``venv`` now, each frame scaled to at most ``max_side`` pixels.

    ``labels``: a text per env, written on its tile (`label_frame`).
    """
    frames = [None if f is None else _shrink(np.asarray(f), max_side) for f in venv.render()]
    if labels is not None:
        frames = [f if f is None else label_frame(f, text) for f, text in zip(frames, labels)]
    return tile_frames(frames, cols)


PROGRESS_HEIGHT = 4  # pixels of the progress bar under the tiles of a recorded GIF


def with_progress(frame: np.ndarray, done: int, total: int) -> np.ndarray:
    """``frame`` with a white bar below it, ``done / total`` of its width long.

    Why: viewers see where in the rollout a frame is, and consecutive frames always
    differ (while ``total`` <= the width), so GIF writers cannot merge them away.

    ```pycon
    >>> with_progress(np.zeros((1, 4, 3), np.uint8), 1, 2)[1:, :, 0].tolist()
    [[255, 255, 0, 0], [255, 255, 0, 0], [255, 255, 0, 0], [255, 255, 0, 0]]
    ```
    """
    h, w = frame.shape[:2]
    out = np.zeros((h + PROGRESS_HEIGHT, w, 3), np.uint8)
    out[:h] = frame[..., :3]
    out[h:, : round(w * done / max(total, 1))] = 255
    return out


def save_gif(frames: Sequence[np.ndarray], path: str | os.PathLike, fps: float = 10.0) -> str:
    """Write (H, W, 3) uint8 frames as an animated GIF that loops forever."""
    if not frames:
        raise ValueError("save_gif needs at least one frame")
    if fps <= 0:
        raise ValueError(f"fps must be > 0, got {fps}")
    require_pillow()
    from PIL import Image

    images = [Image.fromarray(np.ascontiguousarray(f)) for f in frames]
    images[0].save(os.fspath(path), format="GIF", save_all=True, append_images=images[1:],
                   duration=max(20, round(1000 / fps)), loop=0,
                   # Why disposal=2: Pillow merges a frame equal to the one before it unless
                   # frames restore the background; a GIF of N steps should have N + 1 frames.
                   disposal=2)
    return os.fspath(path)


def record_gif(
    venv: VecEnv,
    path: str | os.PathLike,
    steps: int = 50,
    policy: Callable[[StepResult], Any] | None = None,
    fps: float = 10.0,
    cols: int | None = None,
    max_side: int | None = 240,
    seed: int | None = None,
    progress: bool = False,
    labels: bool = True,
) -> int:
    """Reset ``venv``, play ``steps`` batched steps, save the tiled frames as a GIF.

    The GIF has ``steps + 1`` frames: the reset, then one per step, each the tiled
    frames of all envs with a progress bar below (`with_progress`; Pillow would
    merge two equal frames, which the bar prevents while ``steps`` <= the width).
    ``labels``: each tile shows its env index, episode step and return so far
    (`EpisodeProgress`).
    ``policy(result)`` defaults to uniform random. Returns the number of frames.
    On Ctrl-C during the steps, the frames recorded so far are saved and
    `marl_vec.tools.rollout.Interrupted` is raised with that number of frames as its result.
    """
    from marl_vec.tools.progress import Progress
    from marl_vec.tools.rollout import Interrupted, RandomPolicy

    if steps < 0:
        raise ValueError(f"steps must be >= 0, got {steps}")
    require_pillow()
    if policy is None:
        policy = RandomPolicy(venv.spec, venv.num_envs, seed=0)
    result = venv.reset(seed=seed)
    counter = EpisodeProgress(venv.num_envs, venv.autoreset)

    def picture(t: int) -> np.ndarray:
        return with_progress(tiled_frame(venv, cols, max_side, counter.labels() if labels else None), t, steps)

    frames = [picture(0)]
    with Progress(steps, f"render, {venv.num_envs} envs", enabled=progress) as bar:
        try:
            for t in range(1, steps + 1):
                result = venv.step(policy(result))
                counter.update(result)
                frames.append(picture(t))
                bar.update()
        except KeyboardInterrupt:
            save_gif(frames, path, fps)
            raise Interrupted(len(frames) - 1, len(frames)) from None
    save_gif(frames, path, fps)
    return len(frames)

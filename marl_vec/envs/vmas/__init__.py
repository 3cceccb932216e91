"""VMAS (vmas 1.5.2, torch-vectorized) on its own engine: each group of envs is one VMAS batch.

The family of VMAS scenarios (extra ``vmas``): ``balance``, ``transport``,
``navigation``, ``wheel``, ``football``, the MPE ports and the debug scenarios.
Its modules, one idea each: ``catalog`` (served scenarios, options, episode
seeds), ``model`` (a scenario as our spec; VMAS's random state made private to
each batch) and ``engine`` (the adapter slots and the group stepper that owns a
VMAS batch). See docs/families/vmas.md.

Reproducibility: VMAS has one random state per process, not one per env. Each
env is reseeded before each of its resets (episode ``n`` of an env seeded ``s``
starts from ``episode_seed(s, n)``), and each batch draws from its own copy of
VMAS's random state. Each VMAS batch is padded to a multiple of 32 envs
(``engine.PAD_ENVS``), so that torch's kernels round env i the same whatever the
batch's width. So env i's episodes depend on its seed and its actions only, on
every backend and for any split of envs into batches (a DummyVecEnv is one batch;
a SubprocVecEnv one per worker), except in the scenarios of
``catalog.SPLIT_DEPENDENT`` (draws made for the whole batch at once, or a reset
that changes other envs), where they hold for the same split only. With the
option ``batched_reset=True``, a reset of a whole batch at once is one VMAS
``reset`` seeded from all its envs' seeds (``catalog.batch_seed``): fast, but those
episodes depend on the batch's seeds together.

Examples:
    >>> import marl_vec as mv
    >>> venv = mv.make({"env": {"family": "vmas", "id": "balance", "kwargs": {"max_steps": 100}}}, num_envs=32)
    >>> venv.spec.action.shape
    (2,)
"""

from marl_vec.envs.vmas.engine import VmasAdapter, make_vmas

__all__ = ["VmasAdapter", "make_vmas"]

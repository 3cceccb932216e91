"""``backend: auto`` under the fuzzer: the turn-based machine over batches built from a config
whose tune cache holds each choice the tuner can make (marl_vec/tools/tuner.py ``candidates``).

docs/tuning.md promises that a tune result changes only processes, memory and speed: so each
choice must build the layout it names and serve every call of the turn machine, the async
pool's ``send``/``recv`` (with the default ``batch_size``, the whole batch) included, with
rows equal to the plain loop's (the "1 worker + main" choice's pool too, since issue 40's
bug 3 was fixed).
"""

from __future__ import annotations

from typing import Any

import marl_vec as mv
from marl_vec.tools import tune_cache, tuner
from marl_vec.tools.config import load_config
from tests.fuzz.turn_machine import TurnCache, TurnConfig

# Each choice the tuner makes for a pettingzoo config on 2 cores or more (no engines; Ray only
# when asked, and it is fuzzed as a backend of its own in test_fuzz_ray.py).
CHOICES: dict[str, dict[str, Any]] = {
    "dummy": {"backend": "dummy", "num_workers": None},
    "subproc-1": {"backend": "subproc", "num_workers": 1},
    "subproc-2": {"backend": "subproc", "num_workers": 2},
    "main": {"backend": "subproc", "num_workers": 1, "step_in_main": True, "spin_us": tuner.MAIN_SPIN_US},
}


def config(num_envs: int, env_seed: int) -> dict[str, Any]:
    return {"env": {"family": "pettingzoo", "id": "tests.fuzz.turn_game.env"},
            "vec": {"num_envs": num_envs, "backend": "auto", "env_seed": env_seed}}


def layout(venv: mv.VecEnv) -> dict[str, Any]:
    """The choice a built batch is: its backend, workers and main block."""
    if isinstance(venv, mv.DummyVecEnv):
        return {"backend": "dummy", "num_workers": None}
    out: dict[str, Any] = {"backend": "subproc", "num_workers": venv.num_workers}
    if getattr(venv, "step_in_main", False):
        out.update(step_in_main=True, spin_us=venv._spin * 1e6)  # the workers' polling, as given
    return out


class AutoCache(TurnCache):
    """Batches of ``backend: auto`` whose tune cache holds ``choice``; each checked to be that layout."""

    def __init__(self, name: str):
        super().__init__(f"auto-{name}")
        self.choice = CHOICES[name]
        self.serves_pool = True

    def get(self, cfg: TurnConfig) -> mv.VecEnv:
        venv = self.venvs.get(cfg)
        if venv is None or venv.closed:
            data = config(cfg.num_envs, cfg.env_seed)
            # As `marl-vec tune` keeps it: under the whole validated config (tuner.tune).
            tune_cache.save(load_config(data).model_dump(by_alias=True), {"choice": self.choice, "when": "the fuzzer"})
            venv = self.venvs[cfg] = mv.make(data)
            assert layout(venv) == self.choice, f"backend auto built {layout(venv)}; the tune cache holds {self.choice}"
        return venv

"""scripts/train_with/agilerl_train.py: AgileRL's own trainers on a marl_vec config.

Runs in the AgileRL venv (.ci/run runs tests/faces/test_agilerl*.py there; skipped
elsewhere). The script calls AgileRL's trainer once per evolution step, keeping the
face open between calls; the fitness after every evolution step equals that of ONE
call of the same trainer on AgileRL's own ``AsyncPettingZooVecEnv`` over mpe2
simple_spread (the config's env) with the same seeds and agent: so the per-step
calls add up to AgileRL's own run.
"""

from __future__ import annotations

import importlib.util
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip(
    "agilerl",
    reason="AgileRL is not installed here: it needs its own venv (bash scripts/install/install_agilerl_venv.sh, "
    "then .venv-agilerl/bin/python -m pytest tests/faces/test_agilerl_train_with.py)",
)
import torch  # noqa: E402  (after the skip: torch comes with agilerl)
from agilerl.components.replay_buffer import ReplayBuffer  # noqa: E402
from agilerl.training.train_multi_agent_off_policy import train_multi_agent_off_policy  # noqa: E402
from agilerl.training.train_multi_agent_on_policy import train_multi_agent_on_policy  # noqa: E402
from agilerl.vector.pz_async_vec_env import AsyncPettingZooVecEnv  # noqa: E402
from mpe2 import simple_spread_v3  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "train_with" / "agilerl_train.py"
# Two envs, three evolution steps of 200 steps: a few seconds per run.
SHORT = ["--config", "mpe/simple_spread", "--backend", "dummy", "--num-envs", "2",
         "--steps", "600", "--evo-steps", "200", "--seed", "0"]
ALGO_ARGS = {"IPPO": ["--algo", "IPPO", "--learn-step", "100", "--batch-size", "50"],
             "MADDPG": ["--algo", "MADDPG", "--learn-step", "10", "--batch-size", "32"]}


def load_script():
    spec = importlib.util.spec_from_file_location("agilerl_train", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def native_fitnesses(script, args) -> list[float]:
    """One call of AgileRL's trainer on its own vec env over the config's env, seeded as the script seeds."""
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    random.seed(args.seed)
    env = AsyncPettingZooVecEnv(
        [lambda: simple_spread_v3.parallel_env(N=3, max_cycles=25, continuous_actions=False)] * args.num_envs)
    env.reset(seed=args.seed)
    agent = script.make_agent(args, env)
    common = dict(env_name="simple_spread", algo=args.algo, pop=[agent], max_steps=args.steps,
                  evo_steps=args.evo_steps, eval_steps=args.eval_steps, verbose=False, wb=False)
    if args.algo == "IPPO":
        train_multi_agent_on_policy(env, **common)
    else:
        train_multi_agent_off_policy(env, memory=ReplayBuffer(max_size=args.memory, device="cpu"), **common)
    return [float(f) for f in agent.fitness]


@pytest.fixture(autouse=True)
def _one_thread_no_wandb(monkeypatch):
    torch.set_num_threads(1)  # as the script's main(): float sums depend on the thread count
    monkeypatch.setenv("WANDB_MODE", "disabled")


@pytest.mark.parametrize("algo", ["IPPO", "MADDPG"])
def test_script_fitness_equals_one_run_of_agilerl_on_its_own_vec_env(algo):
    script = load_script()
    args = script.parse_args(SHORT + ALGO_ARGS[algo])
    through_script = script.train(args)
    native = native_fitnesses(script, args)
    print(algo, "fitness", through_script, native)
    assert len(through_script) == 3
    assert through_script == native


def test_script_prints_one_line_per_evolution_step():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "WANDB_MODE": "disabled"}
    run = subprocess.run([sys.executable, str(SCRIPT), *SHORT, *ALGO_ARGS["IPPO"]],
                         capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.strip().splitlines()
    steps = [line for line in lines if line.startswith("steps=")]
    assert [s.split()[0] for s in steps] == ["steps=200", "steps=400", "steps=600"]
    # 200 steps over 2 envs per evolution step, 100 each: simple_spread's episodes last
    # 25 steps, so 8 training episodes end, and AgileRL's test plays one more per env.
    assert [s.split()[3] for s in steps] == ["episodes=10", "episodes=20", "episodes=30"]
    assert all(" fitness=" in s and " return=" in s for s in steps)
    assert lines[-1].startswith("first_fitness=") and " last_fitness=" in lines[-1]


def test_script_refuses_bad_arguments():
    script = load_script()
    with pytest.raises(SystemExit):
        script.parse_args(["--evo-steps", "201", "--num-envs", "2"])
    with pytest.raises(SystemExit, match="--env-kwarg needs KEY=VALUE, got 'N'"):
        script.marl_vec_config("mpe/simple_spread", ["N"])

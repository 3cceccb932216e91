"""Proof 3 of issue 35: a masked turn-based game. RLlib's PPO with RLlib's own
action-masking module (``ray.rllib.examples.rl_modules.classes.action_masking_rlm``,
unchanged) trains on PettingZoo's connect four through the face (4 envs per runner,
one module per player through ``policy_mapping_fn``), with RLlib's runner and with the
async runner (first-ready batches of 2, DummyVecEnv's pool), and every move it sends is legal:
marl_vec refuses an unavailable action (``ValueError``), and each recorded action is
allowed by the mask of the observation it was chosen on.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("ray.rllib", reason="the rllib extra is not installed: pip install 'marl_vec[rllib]'")

from pettingzoo.classic import connect_four_v3  # noqa: E402
from ray.rllib.algorithms.ppo import PPOConfig  # noqa: E402
from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec  # noqa: E402
from ray.rllib.core.rl_module.rl_module import RLModuleSpec  # noqa: E402
from ray.rllib.examples.rl_modules.classes.action_masking_rlm import (  # noqa: E402
    ActionMaskingTorchRLModule,
)

from marl_vec.compat.rllib import ENV_NAME, MarlVecAsyncEnvRunner, MarlVecEnvRunner  # noqa: E402

MOVES: list[tuple[str, str, np.ndarray, np.ndarray]] = []  # (agent, module, masks, actions) per chunk
GAMES: list[tuple[int, bool]] = []  # (length, terminated) of each finished game


def record_moves(*, samples: list, **kwargs: Any) -> None:
    for episode in samples:
        if episode.is_done:
            GAMES.append((episode.env_t, episode.is_terminated))
        for agent, sa in episode.agent_episodes.items():
            if len(sa) == 0:
                continue
            masks = np.asarray(sa.get_observations()["action_mask"])[:-1]  # the masks the moves were chosen on
            MOVES.append((agent, sa.module_id, masks, np.asarray(sa.get_actions())))


@pytest.mark.parametrize("runner", ["sync", "async"])
def test_rllib_action_masking_module_trains_on_connect_four_with_legal_moves_only(runner):
    async_pool = runner == "async"  # the async runner: first-ready batches of 2 of the 4 games
    module = RLModuleSpec(module_class=ActionMaskingTorchRLModule,
                          model_config={"conv_filters": [[8, [3, 3], 1]], "head_fcnet_hiddens": [16]})
    config = (
        PPOConfig()
        .framework("torch")
        .environment(ENV_NAME, env_config={"env_fn": connect_four_v3.env, "action_mask": True,
                                           "obs_dtype": "float32",
                                           "backend_kwargs": {"batch_size": 2} if async_pool else {}})
        .env_runners(env_runner_cls=MarlVecAsyncEnvRunner if async_pool else MarlVecEnvRunner,
                     num_env_runners=0, num_envs_per_env_runner=4,
                     rollout_fragment_length=50)
        .multi_agent(policies={"p0", "p1"},
                     policy_mapping_fn=lambda agent_id, episode, **kw: "p0" if agent_id == "player_0" else "p1")
        .rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs={"p0": module, "p1": module}))
        .training(train_batch_size=200, minibatch_size=100, num_epochs=1)
        .callbacks(on_sample_end=record_moves)
        .debugging(seed=0)
    )
    MOVES.clear()
    GAMES.clear()
    algo = config.build_algo()
    try:
        before = {m: algo.get_module(m).state_dict()["pi.net.mlp.0.weight"].clone() for m in ("p0", "p1")}
        results = [algo.train() for _ in range(2)]
        for m in ("p0", "p1"):  # both modules learned
            assert not np.array_equal(before[m].numpy(), algo.get_module(m).state_dict()["pi.net.mlp.0.weight"].numpy())
    finally:
        algo.stop()
    assert sum(r["env_runners"]["num_episodes"] for r in results) == len(GAMES) >= 8
    assert all(terminated and 7 <= length <= 42 for length, terminated in GAMES)  # won, lost or drawn
    assert {(agent, module) for agent, module, _, _ in MOVES} == {("player_0", "p0"), ("player_1", "p1")}
    moves = 0
    for agent, _, masks, actions in MOVES:
        assert masks.shape == (len(actions), 7)
        assert (masks[np.arange(len(actions)), actions] == 1.0).all(), f"{agent} made an illegal move"
        moves += len(actions)
    # Two iterations of 200 env steps, one move each; at a chunk's cut, a move whose
    # next observation has not come yet stays with the next chunk (one per env).
    assert moves >= 2 * (200 - 4)

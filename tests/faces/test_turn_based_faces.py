"""Turn-based games through the faces: SB3VecEnv and GymVectorEnv serve one seat against
a fixed opponent (checked against a plain AEC loop where the opponent plays the same
moves), TorchRLEnv exposes ``acting`` and the action masks."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import marl_vec as mv
from marl_vec.compat.opponent import OpponentSeat, RandomLegal
from marl_vec.envs.registry import make_env_fn
from tests.helpers.turn_reference import Chooser, game_fn

warnings.filterwarnings("ignore", category=DeprecationWarning, module="pettingzoo")

TICTACTOE = "pettingzoo.classic.tictactoe_v3"


def first_legal(obs, avail):
    """A deterministic opponent: the lowest legal move."""
    return avail.argmax(axis=1)


def seat_reference(seed: int, steps: int, choose: Chooser, learner: str = "player_2"):
    """The learner's view of a plain loop: per learner move, its next observation, the
    rewards ``last()`` gave it since (at its next turn, or at the game's end) and whether
    the game ended (then the observation is its last one and the next game's opening is played)."""
    env = game_fn(TICTACTOE)()
    env.reset(seed=seed)

    def until_learner():
        """Play the opponent until the learner is to move (ended: False) or the game is over."""
        rewards, final = 0.0, None
        for agent in env.agent_iter():
            obs, rew, term, trunc, _ = env.last()
            if agent == learner:
                rewards += rew
                if not (term or trunc):
                    return obs, rewards, False
                final = obs["observation"]
            if term or trunc:
                env.step(None)
                continue
            env.step(int(np.flatnonzero(obs["action_mask"])[0]))
        env.reset()
        obs, _, _ = until_learner()
        return {"final": final, "next": obs}, rewards, True

    obs, _, _ = until_learner()
    out = []
    for _ in range(steps):
        env.step(choose(np.flatnonzero(obs["action_mask"])))
        result, reward, ended = until_learner()
        if ended:
            out.append({"obs": result["next"]["observation"], "reward": reward, "done": True, "final": result["final"]})
            obs = result["next"]
        else:
            out.append({"obs": result["observation"], "reward": reward, "done": False})
            obs = result
    return out


def test_sb3_serves_a_seat_against_the_opponent_as_a_plain_loop_plays_it():
    pytest.importorskip("stable_baselines3")
    from marl_vec.compat import SB3VecEnv

    E, steps, seed = 3, 14, 5
    env = SB3VecEnv(mv.make_vec([make_env_fn("pettingzoo", TICTACTOE)] * E, env_seed=seed),
                    opponent=first_legal, seat="player_2")
    choosers = [Chooser(i) for i in range(E)]
    obs = env.reset()
    got: list[list[dict]] = [[] for _ in range(E)]
    for _ in range(steps):
        masks = np.stack(env.env_method("action_masks"))
        obs, reward, done, infos = env.step(np.array([c(np.flatnonzero(m)) for c, m in zip(choosers, masks)]))
        for i in range(E):
            got[i].append({"obs": obs[i], "reward": reward[i], "done": done[i], "info": infos[i]})
    env.close()
    for i in range(E):
        expected = seat_reference(seed + i, steps, Chooser(i))
        ends = 0
        for t, (g, e) in enumerate(zip(got[i], expected)):
            np.testing.assert_array_equal(g["obs"], e["obs"], err_msg=f"env {i} step {t}")
            assert g["reward"] == e["reward"] and g["done"] == e["done"], f"env {i} step {t}"
            if e["done"]:
                ends += 1
                np.testing.assert_array_equal(g["info"]["terminal_observation"], e["final"])
                assert g["info"]["episode"]["r"] == e["reward"]
        assert ends >= 1, f"env {i}: no game ended"


def test_gym_vector_env_serves_the_same_games():
    from marl_vec.compat import GymVectorEnv

    E, seed = 2, 9
    env = GymVectorEnv(mv.make_vec([make_env_fn("pettingzoo", TICTACTOE)] * E, env_seed=seed),
                       opponent=first_legal, seat=1)
    assert env.single_observation_space.shape == (3, 3, 2) and env.single_action_space.n == 9
    choosers = [Chooser(i) for i in range(E)]
    obs, _ = env.reset()
    expected = [seat_reference(seed + i, 8, Chooser(i)) for i in range(E)]
    for t in range(8):
        masks = env.venv.call("action_masks")
        obs, reward, terminated, truncated, infos = env.step(
            np.array([c(np.flatnonzero(m)) for c, m in zip(choosers, masks)]))
        for i in range(E):
            np.testing.assert_array_equal(obs[i], expected[i][t]["obs"])
            assert reward[i] == expected[i][t]["reward"] and terminated[i] == expected[i][t]["done"]
            assert not truncated[i]
    env.close()


def test_the_default_opponent_plays_random_legal_moves_and_games_end():
    seat = OpponentSeat(mv.make_vec([make_env_fn("pettingzoo", "pettingzoo.classic.connect_four_v3")] * 4,
                                    env_seed=0))
    assert isinstance(seat.opponent, RandomLegal)
    r = seat.reset()
    assert r.obs.shape == (4, 1, 6, 7, 2) and r.acting.all()
    games = []
    for _ in range(60):
        r = seat.step(np.array([np.flatnonzero(m)[0] for m in r.avail_actions[:, 0]]))
        games += [r.infos[i]["episode"] for i in np.flatnonzero(r.done)]
        assert r.acting.all()
    assert games and all(g["return"] in (-1.0, 0.0, 1.0) and g["length"] >= 4 for g in games)
    seat.close()


def test_faces_refuse_what_they_cannot_serve():
    from mpe2 import simple_spread_v3

    from marl_vec.compat import GymVectorEnv

    with pytest.raises(ValueError, match="a turn-based game is served against opponent="):
        GymVectorEnv(mv.make_vec([lambda: simple_spread_v3.parallel_env()]))
    with pytest.raises(ValueError, match="opponent= plays the other seats of a turn-based game"):
        GymVectorEnv(mv.make_vec([lambda: simple_spread_v3.parallel_env()]), opponent=first_legal)
    venv = mv.make_vec([make_env_fn("pettingzoo", TICTACTOE)], autoreset="next_step")
    with pytest.raises(ValueError, match="OpponentSeat needs autoreset same_step or fast"):
        OpponentSeat(venv)
    with pytest.raises(ValueError, match="seat 'nobody' is not an agent"):
        OpponentSeat(mv.make_vec([make_env_fn("pettingzoo", TICTACTOE)]), seat="nobody")


def test_torchrl_exposes_acting_and_the_action_mask():
    pytest.importorskip("torchrl")
    import torch

    from marl_vec.compat.torchrl import TorchRLEnv

    fns = [make_env_fn("pettingzoo", TICTACTOE)] * 3
    env = TorchRLEnv(mv.make_vec(fns, env_seed=0))
    with mv.make_vec(fns, env_seed=0) as plain:
        r = plain.reset()
        td = env.reset()
        assert torch.equal(td["agents", "acting"], torch.from_numpy(r.acting))
        assert torch.equal(td["agents", "action_mask"], torch.from_numpy(r.avail_actions))
        torch.manual_seed(0)
        rollout = env.rollout(30, break_when_any_done=False)  # random actions within the spec's masks
        assert rollout["agents", "acting"].sum(-1).eq(1).all()
        assert rollout["next", "done"].any()
        # Along the rollout, every acting agent's move was legal (an illegal one raises).
        moved = rollout["agents", "action"][rollout["agents", "acting"]]
        legal = rollout["agents", "action_mask"][rollout["agents", "acting"]]
        assert legal.gather(-1, moved.unsqueeze(-1)).all()
    env.close()

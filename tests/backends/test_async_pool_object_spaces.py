"""The async pool (send/recv) with every action form step() takes: object values (Text,
custom spaces), Dict trees, Box and MultiDiscrete arrays; and recv() with object and tree
observations (Graph, Text inside a Dict). Every env's trajectory under the pool equals
its trajectory under DummyVecEnv with the same per-env actions, whatever the batch size
and the order of sends, and a bad action gets step()'s own message, naming the sent env.
"""

from __future__ import annotations

import os
import re
import signal
from typing import Any, Callable

import gymnasium as gym
import numpy as np
import pytest

import marl_vec as mv
from marl_vec.core.spec import ObjectAction, TreeAction
from tests.helpers import backends
from tests.helpers.backends import ray_cluster  # noqa: F401  (the module's Ray cluster)
from tests.helpers.object_space_envs import (cartpole_custom_space, cartpole_dict_with_graph, cartpole_text,
                                     cartpole_text_action)
from tests.faces.test_gym_spaces import assert_same, cartpole_dict_action, cartpole_multidiscrete_action
from tests.core.test_object_spaces import as_tree, object_column

E = 4
STEPS = 40  # per env: CartPole under these actions ends episodes within it (asserted)
BITS = np.random.default_rng(5).integers(0, 2, (E, STEPS + 1))  # env i's choice at its step t


def pendulum() -> gym.Env:
    return gym.make("Pendulum-v1", max_episode_steps=15)  # Box actions; time-outs within STEPS


# One agent's action of env i at its step t, per env; what step() and send() are given is built
# from these by `batched`.
ACTIONS: dict[Callable[[], gym.Env], Callable[[int, int], Any]] = {
    cartpole_text_action: lambda i, t: "LR"[BITS[i, t]],  # Text actions
    cartpole_custom_space: lambda i, t: ("left", "right")[BITS[i, t]],  # custom space, actions and observations
    cartpole_dict_action: lambda i, t: {  # Dict(Discrete, MultiBinary, Box) actions
        "push": int(BITS[i, t]), "bits": np.array([t % 2, i % 2, 1], np.int8),
        "x": np.array([0.5, -0.25 * (t % 3)], np.float32)},
    cartpole_dict_with_graph: lambda i, t: int(BITS[i, t]),  # Dict observations with Graph and Text leaves
    cartpole_text: lambda i, t: int(BITS[i, t]),  # Text observations
    cartpole_multidiscrete_action: lambda i, t: np.array([BITS[i, t], (i + t) % 3]),
    pendulum: lambda i, t: np.array([(BITS[i, t] - 0.5) * (1 + i) / 2], np.float32),  # Box actions
}
FNS = list(ACTIONS)


def batched(venv: mv.VecEnv, values: list[Any], t: int) -> Any:
    """One agent's action per row as step() and send() take them: a tree of (n, 1, ...)
    arrays, object values as nested lists or an object array (by turns), else an array."""
    action = venv.spec.action
    if isinstance(action, TreeAction):
        return {key: np.stack([v[key] for v in values])[:, None] for key in values[0]}
    if isinstance(action, ObjectAction):
        return [[v] for v in values] if t % 2 else object_column(values)
    return np.stack([np.asarray(v) for v in values])[:, None]


def record(traj: list, r: Any, k: int) -> None:
    done = bool(r.done[k])
    episode = r.infos[k].get("episode")
    traj.append((as_tree(r.obs, k), r.reward[k], r.terminated[k], r.truncated[k], done,
                 as_tree(r.final_obs, k) if done else None,
                 None if episode is None else (episode["return"], episode["length"])))


def sync_trajectories(fn: Callable[[], gym.Env]) -> list[list]:
    act = ACTIONS[fn]
    with mv.DummyVecEnv([fn] * E, env_seed=0) as venv:
        r = venv.reset()
        trajs: list[list] = [[] for _ in range(E)]
        for i in range(E):
            record(trajs[i], r, i)
        for t in range(STEPS):
            r = venv.step(batched(venv, [act(i, t) for i in range(E)], t))
            for i in range(E):
                record(trajs[i], r, i)
    assert sum(step[4] for traj in trajs for step in traj) >= 2, "no episode ended: the test shows no final_obs"
    return trajs


def pool_trajectories(fn: Callable[[], gym.Env], backend: str, batch_size: int, hold: bool = True,
                      seed: int = 0) -> list[list]:
    """Each env's trajectory under the pool; the received envs are sent in a random order,
    and with ``hold`` a random subset of them is held back for later (not where workers
    step whole blocks: a held env would keep its block's sent envs waiting)."""
    act, rng = ACTIONS[fn], np.random.default_rng(seed)
    with backends.make(backend, [fn] * E, env_seed=0, batch_size=batch_size) as venv:
        venv.reset()
        trajs: list[list] = [[] for _ in range(E)]
        held: list[int] = []
        sends = 0
        while min(len(traj) for traj in trajs) < STEPS + 1:
            r = venv.recv()
            assert len(r.env_ids) == batch_size
            for k, i in enumerate(r.env_ids.tolist()):
                if len(trajs[i]) < STEPS + 1:
                    record(trajs[i], r, k)
                held.append(i)
            rng.shuffle(held)
            keep = int(rng.integers(0, E - batch_size + 1)) if hold else 0
            send, held = held[keep:], held[:keep]
            if send:
                # An env's next action is that of its step len(trajs[i]) - 1 (its last record's).
                venv.send(batched(venv, [act(i, min(len(trajs[i]) - 1, STEPS)) for i in send], sends), send)
                sends += 1
    return trajs


def assert_same_trajectories(got: list[list], expected: list[list]) -> None:
    for i, (ours, theirs) in enumerate(zip(got, expected)):
        assert len(ours) == len(theirs)
        for t, (x, y) in enumerate(zip(ours, theirs)):
            for field, u, v in zip(("obs", "reward", "terminated", "truncated", "done", "final_obs", "episode"), x, y):
                assert_same(u, v, f"env {i} step {t} {field}")


@pytest.mark.parametrize("batch_size", [1, 3, E])
@pytest.mark.parametrize("fn", FNS, ids=lambda fn: fn.__name__)
def test_each_env_trajectory_equals_its_dummy_one(fn, batch_size):
    assert_same_trajectories(pool_trajectories(fn, "subproc", batch_size), sync_trajectories(fn))


@pytest.mark.parametrize("fn", FNS, ids=lambda fn: fn.__name__)
def test_each_env_trajectory_equals_its_dummy_one_with_a_block_in_this_process(fn):
    # step_in_main: this process's block gets its object actions and gives its object rows as a worker's
    assert_same_trajectories(pool_trajectories(fn, "subproc-main", 3), sync_trajectories(fn))


@pytest.mark.parametrize("backend, batch_size, hold", [("ray-auto", 3, True),
                                                       ("ray-ray", 2, False)])  # Ray calls: whole blocks of 2
@pytest.mark.parametrize("fn", [cartpole_text_action, cartpole_dict_action, cartpole_dict_with_graph],
                         ids=lambda fn: fn.__name__)
def test_each_env_trajectory_equals_its_dummy_one_on_ray(fn, backend, batch_size, hold, ray_cluster):  # noqa: F811
    assert_same_trajectories(pool_trajectories(fn, backend, batch_size, hold), sync_trajectories(fn))


# -- bad actions: step()'s own messages, naming the sent env; nothing is sent ----------------

def refusal(call: Callable[[], Any]) -> str:
    """The ValueError's message (an object's default repr without its address)."""
    with pytest.raises(ValueError) as info:
        call()
    return re.sub(r" at 0x[0-9a-f]+>", ">", str(info.value))


def sync_refusal(fn: Callable[[], gym.Env], i: int, bad: Any) -> str:
    """step()'s message for action ``bad`` at env i (good actions elsewhere)."""
    with mv.DummyVecEnv([fn] * E, env_seed=0) as venv:
        venv.reset()
        values = [ACTIONS[fn](j, 0) for j in range(E)]
        values[i] = bad
        return refusal(lambda: venv.step(batched(venv, values, 0)))


BAD_ACTIONS = [
    (cartpole_text_action, "X", r"action 'X' for env 2, agent 'agent_0' is not in the action space "
                                r"Text\(1, 1, charset=LR\)"),
    (cartpole_custom_space, "up", r"action 'up' for env 2, agent 'agent_0' is not in the action space"),
    (cartpole_dict_action, {"push": 2, "bits": np.zeros(3, np.int8), "x": np.zeros(2, np.float32)},
     r"action\['push'\] 2 for env 2, agent 'agent_0' is out of range; allowed: 0..1"),
    (cartpole_dict_action, {"push": 0, "bits": np.array([0, 2, 1], np.int8), "x": np.zeros(2, np.float32)},
     r"action\['bits'\] \[0, 2, 1\] for env 2, agent 'agent_0' is not binary; allowed: 0 and 1"),
    (cartpole_dict_action, {"push": 0, "bits": np.zeros(3, np.int8), "x": np.array([2.0, 0.0], np.float32)},
     r"action\['x'\] \[2.0, 0.0\] for env 2, agent 'agent_0' is outside the action space "
     r"\[\[-1.0, -1.0\], \[1.0, 1.0\]\]"),
    (cartpole_multidiscrete_action, np.array([0, 3]),
     r"action \[0, 3\] for env 2, agent 'agent_0' is out of range; allowed per component: \[0..1, 0..2\]"),
    (pendulum, np.array([2.5], np.float32),
     r"action \[2.5\] for env 2, agent 'agent_0' is outside the action space \[\[-2.0\], \[2.0\]\]"),
]


@pytest.mark.parametrize("fn, bad, message", BAD_ACTIONS, ids=lambda x: getattr(x, "__name__", ""))
def test_bad_actions_get_steps_message_naming_the_sent_env_and_send_nothing(fn, bad, message):
    assert re.match(message, sync_refusal(fn, 2, bad))
    with mv.SubprocVecEnv([fn] * E, num_workers=2, env_seed=0, batch_size=E) as venv:
        venv.reset()
        r = venv.recv()
        send = [3, 2, 0]  # row 1 is env 2
        values = [ACTIONS[fn](i, 0) for i in send]
        values[1] = bad
        got = refusal(lambda: venv.send(batched(venv, values, 0), send))
        assert got == sync_refusal(fn, 2, bad)
        good = batched(venv, [ACTIONS[fn](i, 0) for i in r.env_ids.tolist()], 0)
        venv.send(good, r.env_ids)  # every env still owed: the refusal sent nothing
        assert sorted(venv.recv().env_ids.tolist()) == list(range(E))


def test_object_actions_of_the_wrong_count_or_form_are_refused():
    with mv.SubprocVecEnv([cartpole_text_action] * E, num_workers=2, batch_size=2) as venv:
        venv.reset()
        r = venv.recv()
        with pytest.raises(ValueError, match=r"expected 2 items \(object actions of shape \(2, 1\): one value per "
                                             r"env and agent\), got list"):
            venv.send([["L"]], r.env_ids)
        with pytest.raises(ValueError, match=r"expected 1 items at \[0\]"):
            venv.send(["L", "R"], r.env_ids)  # a string is one value, not a sequence of agents' values
        venv.send([["L"], ["R"]], r.env_ids)


def test_tree_actions_missing_a_leaf_or_of_the_wrong_shape_are_refused():
    with mv.SubprocVecEnv([cartpole_dict_action] * E, num_workers=2, batch_size=2) as venv:
        venv.reset()
        r = venv.recv()
        good = batched(venv, [ACTIONS[cartpole_dict_action](i, 0) for i in r.env_ids.tolist()], 0)
        with pytest.raises(ValueError, match=r"actions must be a tree like the action space .*: action\['x'\] "
                                             r"is missing"):
            venv.send({key: value for key, value in good.items() if key != "x"}, r.env_ids)
        with pytest.raises(ValueError, match=r"send\(\) actions\['x'\] must have shape \(2, 1, 2\) \(len\(env_ids\)=2, "
                                             r"n_agents=1, one array of shape \(2,\) per agent\), got \(2, 1, 3\)"):
            venv.send({**good, "x": np.zeros((2, 1, 3), np.float32)}, r.env_ids)
        with pytest.raises(ValueError, match=r"send\(\) actions\['push'\] must have shape \(2, 1\) "
                                             r"\(len\(env_ids\)=2, n_agents=1, one integer in 0..1 per agent\), "
                                             r"got \(4, 1\)"):
            venv.send({**good, "push": np.zeros((4, 1), np.int64)}, r.env_ids)
        venv.send(good, r.env_ids)


def test_object_values_from_recv_are_copies_later_batches_leave_alone():
    with mv.SubprocVecEnv([cartpole_dict_with_graph] * E, num_workers=2, batch_size=E, env_seed=0) as venv:
        venv.reset()
        first = venv.recv()
        for k, i in enumerate(first.env_ids.tolist()):  # deep copies, as step() gives with copy=True
            assert first.obs["graph"][k, 0] is not venv.buffers.obs["graph"][i, 0]
            assert_same(first.obs["graph"][k, 0], venv.buffers.obs["graph"][i, 0])
        nodes = [g.nodes.copy() for g in first.obs["graph"][:, 0]]
        tags = list(first.obs["tag"][:, 0])
        venv.send(np.zeros((E, 1), np.int64), first.env_ids)
        second = venv.recv()
        assert any(a != b for a, b in zip(tags, second.obs["tag"][:, 0]))
        assert list(first.obs["tag"][:, 0]) == tags
        for graph, kept in zip(first.obs["graph"][:, 0], nodes):
            np.testing.assert_array_equal(graph.nodes, kept)


def test_a_replaced_worker_ends_its_envs_episodes_with_the_object_rows_the_caller_saw():
    """Object leaves live only in this process: a new worker never had the rows of its
    envs, yet their restarted episodes end with final_obs what the caller last saw."""
    with mv.SubprocVecEnv([cartpole_dict_with_graph] * E, num_workers=2, batch_size=2, env_seed=0,
                          restart_on_error=1) as venv:
        venv.reset()
        venv.recv()  # envs 0, 1: held
        seen = venv.recv()  # envs 2, 3: worker 1's block
        assert seen.env_ids.tolist() == [2, 3]
        os.kill(venv.worker_pids[1], signal.SIGKILL)
        venv.send(np.zeros((2, 1), np.int64), seen.env_ids)
        r = venv.recv()
        assert sorted(r.env_ids.tolist()) == [2, 3] and venv.worker_restarts == [0, 1]
        assert r.done.all() and r.truncated.all() and all(info["restarted"] for info in r.infos)
        for k, i in enumerate(r.env_ids.tolist()):
            assert_same(as_tree(r.final_obs, k), as_tree(seen.obs, i - 2), f"env {i} final_obs")
            assert r.obs["tag"][k, 0] is not None and r.obs["graph"][k, 0] is not None  # the new env's reset

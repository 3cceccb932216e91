"""Gymnasium's CartPole with spaces of no fixed shape, for the object-leaf tests.

gymnasium ships no env whose observations are Text, Graph, Sequence or OneOf, so
these are CartPole under gymnasium's own ``TransformObservation`` /
``TransformAction`` wrappers, each value derived from CartPole's state (so seeds
and actions show in it), of varying size where the space allows (Graph nodes and
edges, Sequence lengths, Text lengths). Module-level functions: worker
processes and Ray actors import them by name.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.spaces import Box, Dict, Discrete, Graph, GraphInstance, OneOf, Sequence, Space, Text
from gymnasium.wrappers import TransformAction, TransformObservation

TEXT = Text(max_length=6, min_length=1, charset="LR0123456789")
GRAPH = Graph(node_space=Box(-np.inf, np.inf, (2,), np.float32), edge_space=Discrete(3))
SEQUENCE = Sequence(Box(-np.inf, np.inf, (2,), np.float32), stack=True)
SEQUENCE_OF_DISCRETE = Sequence(Discrete(4))  # a tuple of Python ints... of numpy ints, as sampled
ONE_OF = OneOf((Discrete(2), Box(-np.inf, np.inf, (4,), np.float32)))
DICT_WITH_GRAPH = Dict({"pos": Box(-np.inf, np.inf, (2,), np.float32), "graph": GRAPH, "tag": TEXT})


def _size(o: np.ndarray) -> int:
    """1, 2 or 3, from the cart's velocity: values of varying size along an episode."""
    return 1 + int(abs(o[1]) * 10) % 3


def text_of(o: np.ndarray) -> str:
    return ("L" if o[0] < 0 else "R") + "".join(str(int(abs(x) * 100) % 10) for x in o[:_size(o)])


def graph_of(o: np.ndarray) -> GraphInstance:
    n = 1 + _size(o)  # 2..4 nodes, a chain of n - 1 edges
    nodes = np.resize(o, (n, 2)).astype(np.float32)
    edges = (np.arange(n - 1) + int(o[2] > 0)) % 3
    links = np.stack([np.arange(n - 1), np.arange(1, n)], axis=1).astype(np.int32)
    return GraphInstance(nodes, edges, links)


def sequence_of(o: np.ndarray) -> np.ndarray:
    return np.resize(o, (_size(o), 2)).astype(np.float32)


def discrete_sequence_of(o: np.ndarray) -> tuple:
    return tuple(np.int64(int(abs(x) * 10) % 4) for x in o[:_size(o)])


def one_of(o: np.ndarray) -> tuple:
    return (np.int64(0), np.int64(int(o[2] > 0))) if o[0] < 0 else (np.int64(1), o.astype(np.float32))


def dict_with_graph(o: np.ndarray) -> dict[str, Any]:
    return {"pos": o[:2].astype(np.float32), "graph": graph_of(o), "tag": text_of(o)}


def cartpole_text() -> gym.Env:
    return TransformObservation(gym.make("CartPole-v1"), text_of, TEXT)


def cartpole_graph() -> gym.Env:
    return TransformObservation(gym.make("CartPole-v1"), graph_of, GRAPH)


def cartpole_sequence() -> gym.Env:
    return TransformObservation(gym.make("CartPole-v1"), sequence_of, SEQUENCE)


def cartpole_discrete_sequence() -> gym.Env:
    return TransformObservation(gym.make("CartPole-v1"), discrete_sequence_of, SEQUENCE_OF_DISCRETE)


def cartpole_one_of() -> gym.Env:
    return TransformObservation(gym.make("CartPole-v1"), one_of, ONE_OF)


def cartpole_dict_with_graph() -> gym.Env:
    return TransformObservation(gym.make("CartPole-v1"), dict_with_graph, DICT_WITH_GRAPH)


class Direction(Space):
    """A custom space: the words "left" and "right" (gymnasium batches it as a Tuple, as Text)."""

    def __init__(self, seed: int | None = None):
        super().__init__(None, None, seed)

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        return ("left", "right")[int(self.np_random.integers(2))]

    def contains(self, x: Any) -> bool:
        return x in ("left", "right")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Direction)

    def __hash__(self) -> int:
        return hash("Direction")


TEXT_ACTION = Text(max_length=1, min_length=1, charset="LR")


def cartpole_text_action() -> gym.Env:
    """Actions "L" / "R" (a Text space); observations CartPole's own."""
    return TransformAction(gym.make("CartPole-v1"), lambda a: 0 if a == "L" else 1, TEXT_ACTION)


def cartpole_custom_space() -> gym.Env:
    """Actions and observations in the custom :class:`Direction` space."""
    env = TransformAction(gym.make("CartPole-v1"), lambda a: 0 if a == "left" else 1, Direction())
    return TransformObservation(env, lambda o: "left" if o[0] < 0 else "right", Direction())


OBJECT_OBSERVATION_ENVS = [cartpole_text, cartpole_graph, cartpole_sequence, cartpole_discrete_sequence,
                           cartpole_one_of, cartpole_dict_with_graph, cartpole_custom_space]
OBJECT_ACTION_ENVS = [cartpole_text_action, cartpole_custom_space]


class ReusedGraphObservation(gym.ObservationWrapper):
    """CartPole's state as a Graph whose node array is one array, changed in place at every
    step (as envs that reuse their buffers do): what a copy must protect against."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.observation_space = Graph(node_space=Box(-np.inf, np.inf, (2,), np.float32), edge_space=None)
        self._nodes = np.zeros((2, 2), np.float32)

    def observation(self, o: np.ndarray) -> GraphInstance:
        self._nodes[...] = o.reshape(2, 2)
        return GraphInstance(self._nodes, None, None)


def cartpole_reused_graph() -> gym.Env:
    return ReusedGraphObservation(gym.make("CartPole-v1"))

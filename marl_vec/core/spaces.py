"""Gymnasium spaces as trees of fixed-shape arrays: the one place that knows their layout.

A space is a tree whose leaves are Box, Discrete, MultiDiscrete or MultiBinary
and whose inner nodes are Dict and Tuple (nested freely). A batch keeps one
preallocated array per leaf, with leading ``(E, A)`` axes; what a user sees is
those arrays put back into the space's structure, as gymnasium's
``batch_space`` / ``create_empty_array`` lay them out: one array for a leaf
space, a dict (in the space's key order) or a tuple of arrays for Dict and Tuple.

Spaces without a fixed shape (Text, Graph, Sequence, OneOf, custom ``Space``
subclasses; gymnasium batches them as a Tuple of per-env spaces) may be
*object leaves* where the caller allows them (``leaves(..., objects=True)``):
an ``(E, A)`` numpy object array holding each value as the env gave it. They
never live in shared memory; see `marl_vec.core.buffers`.

Examples:
    >>> import gymnasium as gym, numpy as np
    >>> space = gym.spaces.Dict({"pos": gym.spaces.Box(-1, 1, (2,)), "id": gym.spaces.Discrete(3)})
    >>> [(path, leaf_shape_dtype(leaf)) for path, leaf in leaves(space)]
    [(('id',), ((), dtype('int64'))), (('pos',), ((2,), dtype('float32')))]
    >>> tree = empty(space, (4, 2))
    >>> tree["pos"].shape, tree["id"].shape
    ((4, 2, 2), (4, 2))
    >>> assign(tree_map(lambda a: a[0, 1, ...], tree), {"pos": [0.5, -0.5], "id": 2})  # views of env 0, agent 1
    >>> tree["id"][0].tolist()
    [0, 2]
"""

from __future__ import annotations

from typing import Any, Callable, Sequence, Union

import gymnasium as gym
import numpy as np

# A leaf's place in its tree: the keys (Dict) and indices (Tuple) from the root.
Path = tuple[Union[str, int], ...]
# A tree of arrays: an array, or a dict / tuple of trees.
Tree = Any

LEAF_SPACES = (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)
ALLOWED = "Box, Discrete, MultiDiscrete, MultiBinary, and Dict / Tuple of those (nested)"
OBJECT = np.dtype(object)


def is_object_leaf(space: gym.Space) -> bool:
    """True for a space batched as an object leaf: neither a fixed-shape leaf nor Dict / Tuple
    (Text, Graph, Sequence, OneOf, custom Space subclasses)."""
    return not isinstance(space, LEAF_SPACES) and not is_tree(space)


def is_tree(space: gym.Space) -> bool:
    """True for Dict and Tuple spaces (their values are dicts / tuples of arrays)."""
    return isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple))


def leaves(space: gym.Space, what: str = "space", objects: bool = False) -> list[tuple[Path, gym.Space]]:
    """Every leaf of ``space`` with its path, depth first in the space's own order.

    ``objects``: spaces without a fixed-shape layout (Text, Graph, Sequence, OneOf,
    custom spaces) are object leaves; otherwise they raise TypeError naming ``what``.
    """
    out: list[tuple[Path, gym.Space]] = []

    def visit(node: gym.Space, path: Path) -> None:
        if isinstance(node, LEAF_SPACES) or (objects and is_object_leaf(node)):
            out.append((path, node))
        elif isinstance(node, gym.spaces.Dict):
            for key, child in node.spaces.items():
                visit(child, (*path, key))
        elif isinstance(node, gym.spaces.Tuple):
            for index, child in enumerate(node.spaces):
                visit(child, (*path, index))
        else:
            where = f" at {'/'.join(map(str, path))}" if path else ""
            raise TypeError(f"{what}: {node}{where} is not supported here; allowed: {ALLOWED} "
                            "(Text, Graph, Sequence, OneOf and custom spaces only for gymnasium envs)")

    visit(space, ())
    return out


def leaf_shape_dtype(space: gym.Space) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype of one value of a leaf space (Discrete: a scalar of its dtype;
    an object leaf: a scalar of dtype object)."""
    if is_object_leaf(space):
        return (), OBJECT
    shape = tuple(int(d) for d in (space.shape or ()))
    return shape, np.dtype(space.dtype)


def flat_shape_dtype(space: gym.Space) -> tuple[tuple[int, ...], np.dtype]:
    """A leaf's own shape and dtype; for a tree, its leaves raveled and concatenated
    (size summed, dtypes promoted), the shape a trainer that flattens sees."""
    if not is_tree(space):
        return leaf_shape_dtype(space)
    parts = [leaf_shape_dtype(leaf) for _, leaf in leaves(space, objects=True)]
    size = sum(int(np.prod(shape)) for shape, _ in parts)
    return (size,), np.result_type(*[dtype for _, dtype in parts])


def path_name(field: str, path: Path) -> str:
    """The buffer name of a leaf: ``obs`` for a leaf space, ``obs/pos``, ``obs/1/id`` in trees."""
    return "/".join([field, *map(str, path)])


def assemble(space: gym.Space, arrays: dict[Path, Any], path: Path = ()) -> Tree:
    """The tree of ``space``'s structure whose leaves are ``arrays[path]``."""
    if isinstance(space, gym.spaces.Dict):
        return {key: assemble(child, arrays, (*path, key)) for key, child in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        return tuple(assemble(child, arrays, (*path, i)) for i, child in enumerate(space.spaces))
    return arrays[path]


def empty(space: gym.Space, lead: tuple[int, ...]) -> Tree:
    """Zeroed arrays of ``space``'s structure with leading axes ``lead``."""
    return assemble(space, {path: np.zeros((*lead, *leaf_shape_dtype(leaf)[0]), leaf_shape_dtype(leaf)[1])
                            for path, leaf in leaves(space, objects=True)})


def tree_leaves(tree: Tree) -> list[Any]:
    """The leaves of a tree of arrays, in the order `leaves` gives for its space."""
    if isinstance(tree, dict):
        return [leaf for child in tree.values() for leaf in tree_leaves(child)]
    if isinstance(tree, tuple):
        return [leaf for child in tree for leaf in tree_leaves(child)]
    return [tree]


def tree_map(fn: Callable[..., Any], tree: Tree, *others: Tree) -> Tree:
    """``fn`` applied leaf by leaf (to ``tree``'s leaves and the matching ones of ``others``)."""
    if isinstance(tree, dict):
        return {key: tree_map(fn, child, *(o[key] for o in others)) for key, child in tree.items()}
    if isinstance(tree, tuple):
        return tuple(tree_map(fn, child, *(o[i] for o in others)) for i, child in enumerate(tree))
    return fn(tree, *others)


def assign(views: Tree, value: Any) -> None:
    """Write ``value`` (one sample of the space, or a tree of arrays) into ``views``.

    Raises ValueError when ``value`` lacks a key or item of the structure.
    """
    if isinstance(views, dict):
        for key, view in views.items():
            try:
                child = value[key]
            except (KeyError, IndexError, TypeError):
                raise ValueError(f"expected a dict with key {key!r}, got {_describe(value)}") from None
            assign(view, child)
    elif isinstance(views, tuple):
        if not isinstance(value, (tuple, list)) or len(value) != len(views):
            raise ValueError(f"expected a tuple of {len(views)} items, got {_describe(value)}")
        for view, child in zip(views, value):
            assign(view, child)
    elif views.dtype.hasobject and views.ndim == 0:
        views[()] = value  # stored as it is: `[...] =` would broadcast a tuple or an array into the slot
    else:
        views[...] = value


class TreeView:
    """A tree of array views that takes ``view[...] = value`` and ``fill`` like one array,
    so code written for one observation array writes Dict/Tuple observations too."""

    __slots__ = ("tree",)

    def __init__(self, tree: Tree):
        self.tree = tree

    def __setitem__(self, key: Any, value: Any) -> None:
        if key is not Ellipsis:
            raise TypeError("a TreeView is written whole: view[...] = value")
        assign(self.tree, value)

    def fill(self, value: Any) -> None:
        for leaf in tree_leaves(self.tree):
            leaf.fill(value)


def writable(tree: Tree) -> Any:
    """An array as it is; a dict / tuple tree (or an object leaf) as a `TreeView`."""
    return tree if isinstance(tree, np.ndarray) and not tree.dtype.hasobject else TreeView(tree)


def _describe(value: Any) -> str:
    if isinstance(value, dict):
        return f"a dict with keys {sorted(map(str, value))}"
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)} items"
    return f"{type(value).__name__} {value!r}"


# -- agents with different spaces -------------------------------------------------

def padded_shape(shapes: Sequence[tuple[int, ...]]) -> tuple[tuple[int, ...], bool]:
    """The shape all of ``shapes`` fit in, and whether they are flattened to fit.

    Equal shapes stay; shapes of one rank are padded per dimension to the largest;
    shapes of different ranks are raveled and padded to the largest size.
    """
    if len(set(shapes)) == 1:
        return shapes[0], False
    if len({len(s) for s in shapes}) == 1:
        return tuple(int(d) for d in np.max(shapes, axis=0)), False
    return (max(int(np.prod(s)) for s in shapes),), True


def window(view: np.ndarray, native: tuple[int, ...], flatten: bool) -> np.ndarray:
    """The part of a padded ``view`` that holds a value of shape ``native`` (a view)."""
    if flatten:
        return view.reshape(-1)[: int(np.prod(native))].reshape(native)
    index: tuple[Any, ...] = (*(slice(0, d) for d in native), Ellipsis)  # the Ellipsis keeps a 0-d view a view
    return view[index]


def _structure(space: gym.Space) -> Any:
    if isinstance(space, gym.spaces.Dict):
        return ("dict", tuple((k, _structure(c)) for k, c in space.spaces.items()))
    if isinstance(space, gym.spaces.Tuple):
        return ("tuple", tuple(_structure(c) for c in space.spaces))
    return "leaf"


def container_box(shape: tuple[int, ...], dtype: np.dtype) -> gym.spaces.Box:
    """A Box that holds any value of ``shape`` and ``dtype`` (bounds of the dtype)."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return gym.spaces.Box(False, True, shape, dtype=dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return gym.spaces.Box(info.min, info.max, shape, dtype=dtype)
    return gym.spaces.Box(-np.inf, np.inf, shape, dtype=dtype)


class AgentLayout:
    """How the agents' own spaces fit one common space, leaf by leaf.

    Agents must share the tree structure (the same Dict keys and Tuple lengths);
    each leaf is padded over the agents as `padded_shape` says, its dtype
    promoted. A leaf equal for every agent keeps its space; a padded one becomes
    a `container_box` of the common shape and dtype.

    Attributes:
        space: the common single-agent space.
        padded: whether some agent's leaf is smaller than the common one.
    """

    def __init__(self, spaces: Sequence[gym.Space], names: Sequence[str], what: str):
        trees = [leaves(space, f"{what} of agent {name!r}") for space, name in zip(spaces, names)]
        structures = {_structure(space) for space in spaces}
        if len(structures) > 1:
            raise TypeError(
                f"{what}: the agents' spaces have different structures ({', '.join(str(s) for s in spaces)}); "
                "agents may differ in leaf shapes and dtypes, not in Dict keys or Tuple lengths"
            )
        self.paths = [path for path, _ in trees[0]]
        self._native: list[list[tuple[int, ...]]] = [[leaf_shape_dtype(leaf)[0] for _, leaf in tree] for tree in trees]
        self._flatten: list[bool] = []
        common: dict[Path, gym.Space] = {}
        self.padded = False
        for k, path in enumerate(self.paths):
            leaf_spaces = [tree[k][1] for tree in trees]
            shape, flatten = padded_shape([native[k] for native in self._native])
            self._flatten.append(flatten)
            if all(s == leaf_spaces[0] for s in leaf_spaces):
                common[path] = leaf_spaces[0]
                continue
            dtype = np.result_type(*[s.dtype for s in leaf_spaces])
            common[path] = container_box(shape, dtype)
            self.padded = self.padded or any(native[k] != shape for native in self._native)
        self.space = _rebuild(spaces[0], common)

    def agent_views(self, agent: int, row: Tree) -> Tree:
        """Agent ``agent``'s native-shaped windows into its row ``row`` of the common layout."""
        arrays = dict(zip(self.paths, tree_leaves(row)))
        windows = {path: window(arrays[path], self._native[agent][k], self._flatten[k])
                   for k, path in enumerate(self.paths)}
        return assemble(self.space, windows)


def _rebuild(space: gym.Space, common: dict[Path, gym.Space], path: Path = ()) -> gym.Space:
    if isinstance(space, gym.spaces.Dict):
        # Pairs, not a dict: gymnasium sorts a plain dict's keys, and the leaves' paths keep the
        # native order (an OrderedDict space, as RWARE's, keeps its own).
        return gym.spaces.Dict([(k, _rebuild(c, common, (*path, k))) for k, c in space.spaces.items()])
    if isinstance(space, gym.spaces.Tuple):
        return gym.spaces.Tuple([_rebuild(c, common, (*path, i)) for i, c in enumerate(space.spaces)])
    return common[path]

"""A guard tree as data: the calls `guard_tree.build_tree` makes on the C++ tree, written down once by the
saving process and made again by the loading one.

Lowering guards to the C++ tree is work over Python objects: sources named, hashed and grouped
into nodes, guard texts written, each guard kind dispatched to its leaf. The tree that comes out
is the same for every process that loads the entry. So `pyframe.save` lowers the entry's guards
onto a `TreeRecorder`, which stands for the C++ root and its nodes and keeps each call as
`(node, method, arguments, makes_a_node, names_nodes)`, and `pyframe.load` replays those calls
on a new C++ root, in one call of C++ (`_C.replay_tree`): no Source or Guard object made.

A call's arguments are plain values, or objects named for another process (refs.py: the
pickler writes an identity-compared object as a name), or, for the calls that take nodes (an
aliasing or shape guard's inputs, an export), `_Node` indices into the nodes made so far.
"""
from __future__ import annotations

from typing import Any

from .. import _C


class _Node(int):
    """A node of the tree named in another call's arguments: its index in the order made."""

    __slots__ = ()

    def __reduce__(self) -> Any:
        return _Node, (int(self),)


class TreeRecorder:
    """Stands for a C++ RootGuardManager under guard_tree.build_tree: the calls made on it and on the
    nodes it hands out (`RecordedNode`s) are kept in `calls`, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, str, tuple, bool, bool]] = []
        self.made = 1           # the root is node 0
        self.exported = 0
        self.root = RecordedNode(self, 0)

    def record(self, node: int, method: str, args: tuple) -> Any:
        names_nodes = any(_names_nodes(a) for a in args)
        if names_nodes:
            args = tuple(_as_indices(a) for a in args)
        makes = not method.startswith("add_") and method not in ("export", "group_exports")
        self.calls.append((node, method, args, makes, names_nodes))
        if method == "export":
            self.exported += 1
            return self.exported - 1
        if makes:
            self.made += 1
            return RecordedNode(self, self.made - 1)
        return None


class RecordedNode:
    """A node of the recorded tree: any method called on it is a call of the C++ node's."""

    __slots__ = ("recorder", "index")

    def __init__(self, recorder: TreeRecorder, index: int) -> None:
        self.recorder, self.index = recorder, index

    def __getattr__(self, method: str) -> Any:
        return lambda *args: self.recorder.record(self.index, method, args)


def _names_nodes(arg: Any) -> bool:
    return type(arg) is RecordedNode or (type(arg) is list and any(type(a) is RecordedNode for a in arg))


def _as_indices(arg: Any) -> Any:
    if type(arg) is RecordedNode:
        return _Node(arg.index)
    if type(arg) is list:
        return [_Node(a.index) if type(a) is RecordedNode else a for a in arg]
    return arg


def replay(calls: list[tuple[int, str, tuple, bool, bool]], root: Any) -> Any:
    """The recorded calls made on `root` (a new C++ RootGuardManager): the tree they built. Made by
    C++ (`_C.replay_tree`), which keeps each node it makes by index: no Python object per node."""
    _C.replay_tree(root, calls)
    return root

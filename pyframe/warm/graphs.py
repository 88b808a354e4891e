"""A captured graph as data: its nodes in order, each target named (refs.py), and back.

torch.fx pickles a GraphModule by its Python code and traces that code again when loaded, which
renames nodes (`x = a / b` comes back as `truediv`). pyframe writes the graph itself: each node's
op, name, target, arguments (other nodes by name) and type annotation, and the GraphModules of
higher-order ops (`cond`'s branches, checkpoint's body) as graphs of their own. Loading makes the
same graph, node for node, and the same code.
"""
from __future__ import annotations

from typing import Any

import torch
import torch.fx

from ..fx_python_code import PyframeGraph
from .refs import Unsaveable, dumps, loads


def graph_to_data(gm: torch.fx.GraphModule) -> bytes:
    return dumps(_describe(gm), _node_names)


def graph_from_data(data: bytes) -> torch.fx.GraphModule:
    return _build(loads(data, _node_refs))


class _NodeRef:
    """A node named in another node's arguments, until the graph has it."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


def _node_names(obj: Any) -> Any:
    return ("node", obj.name) if type(obj) is torch.fx.Node else None


def _node_refs(pid: tuple) -> Any:
    if pid[0] == "node":
        return _NodeRef(pid[1])
    raise Unsaveable(f"unexpected persistent id {pid!r} in a graph")


def _plain(value: Any) -> Any:
    """fx's immutable lists and dicts as plain ones (named tuples and other values as they are)."""
    kind = type(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, tuple) and not hasattr(kind, "_fields"):
        return tuple(_plain(v) for v in value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if kind is slice:
        return slice(_plain(value.start), _plain(value.stop), _plain(value.step))
    return value


def _with_nodes(value: Any, made: dict[str, torch.fx.Node]) -> Any:
    kind = type(value)
    if kind is _NodeRef:
        return made[value.name]
    if kind is list:
        return [_with_nodes(v, made) for v in value]
    if kind is tuple:
        return tuple(_with_nodes(v, made) for v in value)
    if kind is dict:
        return {k: _with_nodes(v, made) for k, v in value.items()}
    if kind is slice:
        return slice(_with_nodes(value.start, made), _with_nodes(value.stop, made), _with_nodes(value.step, made))
    return value


def _describe(gm: torch.fx.GraphModule) -> dict:
    subgraphs = {}
    for name, module in gm.named_children():
        if not isinstance(module, torch.fx.GraphModule):
            raise Unsaveable(f"the graph holds a {type(module).__qualname__} module ({name})")
        subgraphs[name] = _describe(module)
    nodes = [(n.op, n.name, n.target, _plain(n.args), _plain(n.kwargs), n.type) for n in gm.graph.nodes]
    return {"nodes": nodes, "subgraphs": subgraphs, "class_name": type(gm).__name__}


def _build(described: dict) -> torch.fx.GraphModule:
    root = torch.nn.Module()
    for name, sub in described["subgraphs"].items():
        setattr(root, name, _build(sub))
    graph = PyframeGraph()  # (fx's own code, written faster: fx_python_code.py)
    made: dict[str, torch.fx.Node] = {}
    for op, name, target, args, kwargs, type_expr in described["nodes"]:
        # (made bare, then given its arguments in one step, as the trace makes its nodes: graph.py)
        node = graph.create_node(op, target, name=name, type_expr=type_expr)
        node._update_args_kwargs(_with_nodes(args, made), _with_nodes(kwargs, made))
        if node.name != name:
            raise Unsaveable(f"graph node {name} came back as {node.name}")
        made[name] = node
    return torch.fx.GraphModule(root, graph, class_name=described["class_name"])

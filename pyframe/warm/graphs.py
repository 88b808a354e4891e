"""A captured graph as data: its nodes in order, each target named (refs.py), and back.

torch.fx pickles a GraphModule by its Python code and traces that code again when loaded, which
renames nodes (`x = a / b` comes back as `truediv`). pyframe writes the graph itself: each node's
op, name, target, arguments (other nodes by name) and type annotation, and the GraphModules of
higher-order ops (`cond`'s branches, checkpoint's body) as graphs of their own. Loading makes the
same graph, node for node, and the same code.

Each node's `meta["example_value"]` is written too when its sizes are static (a tensor's metadata, a
tuple of them, a number) and made again on load as a FakeTensor of pyframe's static mode, as the
trace left it: backends read it, and AOTAutograd's cache takes a method call only on a node that has
one (`check_node_safe`: "Unsupported call_method target"), so without them a loaded graph would
miss the cache artifacts its file holds.
"""
from __future__ import annotations

from typing import Any

import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensor

from ..fake.memo import new_fake
from ..fx_python_code import PyframeGraph
from ..graph import fake_mode
from .refs import Unsaveable, dumps, loads


def graph_to_data(gm: torch.fx.GraphModule) -> bytes:
    return dumps(_describe(gm), _node_names)


def graph_from_data(data: bytes, examples: bool = True) -> torch.fx.GraphModule:
    """The saved graph; with `examples`, its nodes' example values made again (for a backend that
    reads them: a backend of torch's. They cost some microseconds a node, which others need not pay)."""
    return _build(loads(data, _node_refs), examples)


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
    return {"nodes": nodes, "subgraphs": subgraphs, "class_name": type(gm).__name__,
            "examples": _describe_examples(gm)}


def _describe_examples(gm: torch.fx.GraphModule) -> dict[str, Any]:
    """Each node's example value as data, by node name; none at all for a graph with dynamic
    shapes (its example values belong to its ShapeEnv, which a load does not make again)."""
    examples = {}
    for node in gm.graph.nodes:
        described = _describe_example(node.meta.get("example_value"))
        if described is _SYMBOLIC:
            return {}
        if described is not None:
            examples[node.name] = described
    return examples


_SYMBOLIC = object()
_NUMBERS = (int, float, bool)
_SYMBOLS = (torch.SymInt, torch.SymFloat, torch.SymBool)


def _describe_example(value: Any) -> Any:
    """A node's example value as data; None when it has none or one not made again here (a
    subgraph's GraphModule, a tensor subclass), _SYMBOLIC when it has symbolic sizes."""
    if isinstance(value, torch.Tensor):
        sizes, strides = tuple(value.shape), value.stride()
        if not all(type(n) is int for n in (*sizes, *strides)) or type(value.storage_offset()) is not int:
            return _SYMBOLIC
        if type(value) is not FakeTensor or value.layout is not torch.strided:
            return None
        return ("tensor", sizes, strides, value.storage_offset(), value.dtype, value.device, value.requires_grad)
    if type(value) in (tuple, list):
        items = [_describe_example(v) for v in value]
        if any(i is _SYMBOLIC for i in items):
            return _SYMBOLIC
        return None if any(i is None for i in items) else (type(value).__name__, items)
    if type(value) in _NUMBERS:
        return ("number", value)
    return _SYMBOLIC if isinstance(value, _SYMBOLS) else None


def _example(described: tuple) -> Any:
    kind = described[0]
    if kind == "tensor":
        _, sizes, strides, offset, dtype, device, requires_grad = described
        # (the storage a view of that layout needs, as the trace's FakeTensor had it)
        extent = offset + 1 + sum((n - 1) * s for n, s in zip(sizes, strides) if n > 0) if all(sizes) else 0
        meta = torch.empty(extent, dtype=dtype, device="meta").as_strided(sizes, strides, offset)
        fake = new_fake(fake_mode(), meta, device)
        return fake.requires_grad_() if requires_grad else fake
    if kind == "number":
        return described[1]
    items = [_example(v) for v in described[1]]
    return items if kind == "list" else tuple(items)


def _build(described: dict, examples: bool) -> torch.fx.GraphModule:
    root = torch.nn.Module()
    for name, sub in described["subgraphs"].items():
        setattr(root, name, _build(sub, examples))
    graph = PyframeGraph()  # (fx's own code, written faster: fx_python_code.py)
    made: dict[str, torch.fx.Node] = {}
    for op, name, target, args, kwargs, type_expr in described["nodes"]:
        # (made bare, then given its arguments in one step, as the trace makes its nodes: graph.py)
        node = graph.create_node(op, target, name=name, type_expr=type_expr)
        node._update_args_kwargs(_with_nodes(args, made), _with_nodes(kwargs, made))
        if node.name != name:
            raise Unsaveable(f"graph node {name} came back as {node.name}")
        made[name] = node
    if examples:
        for name, example in described.get("examples", {}).items():  # (a file written before they were)
            made[name].meta["example_value"] = _example(example)
    return torch.fx.GraphModule(root, graph, class_name=described["class_name"])

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

Each GraphModule's Python code is written compiled too (marshal), with the source it was compiled
from. A load makes the module again as fx does, but where fx's code generation gives that same
source it runs the saved code object instead of compiling the source: compiling a model's 30 KB of
graph code was a fifth of a warm first call. Any other source (another torch's code generation) is
compiled as fx compiles it.
"""
from __future__ import annotations

import contextlib
import marshal
import sys
import threading
import types
from typing import Any, Iterator

import torch
import torch.fx
import torch.fx.graph_module as fx_graph_module
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
    if kind is tuple:  # (empty ones as they are, a placeholder's: fx keeps a tuple, copies a dict)
        return tuple([_with_nodes(v, made) for v in value]) if value else value
    if kind is list:
        return [_with_nodes(v, made) for v in value]
    if kind is dict:
        return {k: _with_nodes(v, made) for k, v in value.items()} if value else value
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
            "examples": _describe_examples(gm), "compiled": _compiled(gm.code)}


def _compiled(source: str) -> tuple[str, int, bytes]:
    """`source` (a GraphModule's code), the optimization level and its module code as fx compiles it."""
    return source, sys.flags.optimize, marshal.dumps(compile(source, "<pyframe graph>", "exec", dont_inherit=True))


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
    with _compiled_sources(described):
        return _build_module(described, examples)


def _build_module(described: dict, examples: bool) -> torch.fx.GraphModule:
    root = torch.nn.Module()
    for name, sub in described["subgraphs"].items():
        setattr(root, name, _build_module(sub, examples))
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


_EXEC_LOCK = threading.Lock()  # (one load at a time swaps fx's function; see _compiled_sources)


@contextlib.contextmanager
def _compiled_sources(described: dict) -> Iterator[None]:
    """While the GraphModules of `described` are made: fx's `_exec_with_source` (what GraphModule's
    recompile runs its generated source with) runs the saved code of a source the file holds, in
    fx's globals and under fx's file name, instead of compiling it. Other sources, other threads'
    included, go to fx's own."""
    compiled: dict[str, bytes] = {}
    _collect_compiled(described, compiled)
    fx_exec, loader = getattr(fx_graph_module, "_exec_with_source", None), getattr(fx_graph_module, "_loader", None)
    if not compiled or fx_exec is None or not hasattr(loader, "cache"):  # (another torch: compiled as it compiles)
        yield
        return

    def exec_with_source(src: str, globals: dict[str, Any], co_fields: dict[str, Any] | None = None) -> None:
        data = compiled.get(src) if not co_fields else None
        if data is None:
            return fx_exec(src, globals, co_fields)
        exec(_with_filename(marshal.loads(data), loader.cache(src, globals, co_fields)), globals)

    with _EXEC_LOCK:
        fx_graph_module._exec_with_source = exec_with_source
        try:
            yield
        finally:
            fx_graph_module._exec_with_source = fx_exec


def _collect_compiled(described: dict, into: dict[str, bytes]) -> None:
    saved = described.get("compiled")  # (a file written before graphs kept their code)
    if saved is not None and saved[1] == sys.flags.optimize:
        into[saved[0]] = saved[2]
    for sub in described["subgraphs"].values():
        _collect_compiled(sub, into)


def _with_filename(code: types.CodeType, filename: str) -> types.CodeType:
    """`code` and the code objects it holds, as compiled under `filename` (fx's key of the source:
    tracebacks and `inspect` find the lines through it)."""
    consts = tuple(_with_filename(c, filename) if type(c) is types.CodeType else c for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)

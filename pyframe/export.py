"""`pyframe.export(fn)(*args, **kwargs)`: the one graph a call traces, as a module callable as `fn`.

torch._dynamo.export's contract (with `aten_graph=False`): the call is traced with `fullgraph=True`
(a graph break raises `pyframe.exc.Unsupported`) and static shapes, then the graph is given the
calling convention of `fn` itself. Its forward takes `fn`'s arguments by their names, flattens them
with pytree (`in_spec`: the arguments as given, positional and keyword), and returns what `fn`
returned, unflattened (`out_spec`): each tensor where the graph computes it, an argument returned as
it is, and the other values (ints, strings, None) as the constants the trace found, as torch._dynamo
embeds them. The tensors the graph read from elsewhere (a module's parameters and buffers, a global
tensor) are the module's own parameters and buffers, named after their placeholders.

How the pieces are found again after the call. The backend of the trace records the graph, the
real tensors handed to it (its example inputs, in placeholder order) and the tensors it returned
on that call. A placeholder whose tensor is one of the call's flattened arguments reads that
argument; any other is an attribute. A tensor the call returned is the graph output it is (the
transformed code hands the graph's outputs on as they are), else an argument or an attribute.

The export leaves nothing behind: its cache entries and frame records are dropped, as explain's.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

import torch
import torch.fx
import torch.utils._pytree as pytree
from torch.fx.graph import _PyTreeCodeGen, _PyTreeInfo

from .eval_frame import call_privately
from .exc import Unsupported


class ExportResult(NamedTuple):
    """What an export gives: the graph module and the guard texts of the compiled frame (the
    conditions under which the graph stands for `fn`; torch._dynamo's gives its Guard objects)."""

    graph_module: torch.fx.GraphModule
    guards: list[str]


def export(fn: Callable, *, aten_graph: bool = False) -> Callable[..., ExportResult]:
    """`pyframe.export(fn)(*args, **kwargs)`: trace `fn` (a function or an nn.Module) on these
    arguments into one graph and return it as an ExportResult (see the module's docstring)."""
    if not callable(fn):
        raise TypeError(f"pyframe.export(fn) takes a function or an nn.Module, not {type(fn).__name__}")
    if aten_graph:
        raise NotImplementedError("pyframe.export(aten_graph=True): only torch-level graphs are exported "
                                  "(torch._dynamo.export's default, aten_graph=False)")

    def run(*args: Any, **kwargs: Any) -> ExportResult:
        capture = _Capture()
        result, records = call_privately(fn, args, kwargs, capture, "export", fullgraph=True, dynamic=False)
        compiled = [record for record in records if record.status == "compiled"]
        if len(capture.graphs) > 1 or len(compiled) > 1:
            raise Unsupported(f"pyframe.export: the call compiled {len(compiled)} frames into "
                              f"{len(capture.graphs)} graphs; an export is one frame's one graph")
        graph = capture.graphs[0] if capture.graphs else None
        guards = list(compiled[0].guards) if compiled else []
        return ExportResult(_exported_module(fn, args, kwargs, result, graph), guards)

    return run


@dataclass
class _Graph:
    gm: torch.fx.GraphModule
    examples: list[Any]                      # the real values handed to it, in placeholder order
    outputs: tuple | None = None             # what it returned on the traced call


class _Capture:
    """The export's backend: keeps each graph, its example inputs and the outputs of its run."""

    def __init__(self) -> None:
        self.graphs: list[_Graph] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        graph = _Graph(gm, list(example_inputs))
        self.graphs.append(graph)

        def run_graph(*inputs: Any) -> Any:
            outputs = gm.forward(*inputs)
            if graph.outputs is None:
                graph.outputs = tuple(outputs)
            return outputs

        return run_graph


def _exported_module(fn: Callable, args: tuple, kwargs: dict, result: Any, graph: _Graph | None) -> torch.fx.GraphModule:
    flat_args, in_spec = pytree.tree_flatten((tuple(args), dict(kwargs)))
    flat_out, out_spec = pytree.tree_flatten(result)
    root = torch.nn.Module()
    new = torch.fx.Graph()
    arg_nodes = [new.placeholder(f"arg{i}") for i in range(len(flat_args))]
    argument_of: dict[int, torch.fx.Node] = {}
    for value, node in zip(reversed(flat_args), reversed(arg_nodes)):  # (the first occurrence wins)
        argument_of[id(value)] = node
    env: dict[torch.fx.Node, Any] = {}
    attribute_of: dict[int, torch.fx.Node] = {}
    produced: dict[int, torch.fx.Node] = {}
    if graph is not None:
        placeholders = [n for n in graph.gm.graph.nodes if n.op == "placeholder"]
        for node, value in zip(placeholders, graph.examples):
            found = argument_of.get(id(value), attribute_of.get(id(value)))
            env[node] = found if found is not None else _attribute(root, new, node.name, value, attribute_of)
        output_node = None
        for node in graph.gm.graph.nodes:
            if node.op == "placeholder":
                continue
            if node.op == "output":
                output_node = node
                continue
            if node.op == "get_attr":  # (a subgraph of a higher-order op)
                setattr(root, node.target, getattr(graph.gm, node.target))
            env[node] = new.node_copy(node, lambda n: env[n])
        outputs = output_node.args[0] if output_node is not None else ()
        outputs = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
        for node, value in zip(outputs, graph.outputs or ()):
            if isinstance(node, torch.fx.Node):
                produced.setdefault(id(value), env[node])
    returned = []
    for i, leaf in enumerate(flat_out):
        if isinstance(leaf, torch.Tensor):
            node = produced.get(id(leaf), argument_of.get(id(leaf), attribute_of.get(id(leaf))))
            if node is None:
                raise Unsupported(f"pyframe.export: output {i} of {_describe(fn)} is a tensor the graph does "
                                  f"not compute, take or hold")
            returned.append(node)
        elif leaf is None or isinstance(leaf, (bool, int, float, complex, str, torch.dtype, torch.device)):
            returned.append(leaf)  # (what the trace found: the guards pin what it depends on)
        else:
            raise Unsupported(f"pyframe.export: output {i} of {_describe(fn)} is a {type(leaf).__name__}, "
                              f"which a graph cannot return")
    new.output(returned)
    new._codegen = _PyTreeCodeGen(_PyTreeInfo(_argument_names(fn, args, kwargs), in_spec, out_spec))
    gm = torch.fx.GraphModule(root, new)
    gm.meta["pyframe_exported"] = _describe(fn)
    return gm


def _attribute(root: torch.nn.Module, graph: torch.fx.Graph, name: str, value: Any,
               attribute_of: dict[int, torch.fx.Node]) -> torch.fx.Node:
    """A tensor the graph read from elsewhere than the arguments: a parameter (an nn.Parameter) or a
    buffer of the exported module, read by a get_attr node."""
    if not isinstance(value, torch.Tensor):
        raise Unsupported(f"pyframe.export: the graph input {name} is a {type(value).__name__} that is not "
                          f"one of the arguments")
    if isinstance(value, torch.nn.Parameter):
        root.register_parameter(name, value)
    else:
        root.register_buffer(name, value)
    node = attribute_of[id(value)] = graph.get_attr(name)
    return node


def _argument_names(fn: Callable, args: tuple, kwargs: dict) -> list[str]:
    """The exported forward's parameters: the names `fn`'s signature gives the positional
    arguments (`args_<i>` past them, or where it cannot be read), then the keyword arguments'."""
    target = fn.forward if isinstance(fn, torch.nn.Module) else fn
    try:
        parameters = [p for p in inspect.signature(target).parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        parameters = []
    names = [parameters[i].name if i < len(parameters) else f"args_{i}" for i in range(len(args))]
    return names + list(kwargs)


def _describe(fn: Callable) -> str:
    if isinstance(fn, torch.nn.Module):
        return f"{type(fn).__name__}.forward"
    return getattr(fn, "__qualname__", None) or repr(fn)

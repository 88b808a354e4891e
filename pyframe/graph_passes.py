"""Passes over a finished graph before it goes to the backend (OutputGraph.compile): nodes
torch._dynamo's graphs would not have are dropped, what the graph cannot compute is refused, and
the calls made for an effect outside the tensors are kept. Also asked by higher-order ops of their
subgraphs: does a graph change anything in place."""
from __future__ import annotations

import operator
from typing import Any

import torch
import torch._functorch.predispatch as predispatch
import torch.fx

from .exc import Unsupported


def check_own_nodes(graph: torch.fx.Graph) -> None:
    """Unsupported if a node reads a node of another graph: a tensor made inside an
    autograd.Function's traced forward or backward that escaped it (stored somewhere the trace
    could not see when the function returned), which the frame's graph cannot compute."""
    for node in graph.nodes:
        for arg in node.all_input_nodes:
            if arg.graph is not graph:
                raise Unsupported(f"a tensor computed inside a traced autograd.Function ({arg.name}) "
                                  f"is used outside it")


def drop_unused_bookkeeping(graph: torch.fx.Graph) -> None:
    """Drop unused nodes torch._dynamo would not have: `getitem` projections of a multi-output op
    (`values, indices = x.max(0)` with only `values` read) and calls that made no tensor (helpers
    such as F._canonical_mask(None), which torch._dynamo runs inline)."""
    for node in reversed(list(graph.nodes)):
        if node.op != "call_function" or node.users or _mutates(node) or node.target in _KEPT_FOR_EFFECT \
                or node.meta.get("kept_unused"):
            continue
        if node.target is operator.getitem or not _holds_tensor(node.meta.get("example_value")):
            graph.erase_node(node)


def drop_cancelling_grad_mode_pairs(graph: torch.fx.Graph, grad_enabled: bool) -> None:
    """Drop `_set_grad_enabled(not m); _set_grad_enabled(m)` pairs of adjacent nodes (m the mode
    so far, from the mode the graph starts in), as torch._dynamo 2.13 cleans its graphs: left when
    a graph break leaves a block and its resume function enters it again, or blocks are nested."""
    nodes = list(graph.nodes)
    erased: set[torch.fx.Node] = set()
    for first, second in zip(nodes, nodes[1:]):
        if first in erased or not _sets_grad_mode(first, not grad_enabled):
            continue
        grad_enabled = not grad_enabled
        if _sets_grad_mode(second, not grad_enabled):
            grad_enabled = not grad_enabled
            erased.update((first, second))
    for node in erased:
        graph.erase_node(node)


def drop_unused_size_arithmetic(graph: torch.fx.Graph) -> None:
    """Arithmetic and comparisons on symbolic sizes nothing uses (`n > 16`, decided while tracing
    and kept as a guard), and size reads (`sym_size`): torch._dynamo drops them the same way."""
    for node in reversed(graph.nodes):
        if node.op == "call_function" and not node.users and _is_size_computation(node):
            graph.erase_node(node)


def has_size_arithmetic(graph: torch.fx.Graph) -> bool:
    """Whether the graph recorded arithmetic or comparisons on symbolic sizes (or size reads)."""
    return any(node.op == "call_function" and _is_size_computation(node) for node in graph.nodes)


def _is_size_computation(node: torch.fx.Node) -> bool:
    if node.target is torch.ops.aten.sym_size.int:
        return True
    if not isinstance(node.meta.get("example_value"), (torch.SymInt, torch.SymBool, torch.SymFloat)):
        return False
    return all(isinstance(a, (int, float, bool)) or
               (isinstance(a, torch.fx.Node) and isinstance(a.meta.get("example_value"), (torch.SymInt, torch.SymBool, torch.SymFloat)))
               for a in (*node.args, *node.kwargs.values()))


def _sets_grad_mode(node: torch.fx.Node, mode: bool) -> bool:
    return node.target is torch._C._set_grad_enabled and tuple(node.args) == (mode,)


# Calls made for an effect outside the tensors, which torch._dynamo records (and keeps) too
# (nn.Module.__init__'s, for a module made while tracing; the check an `assert <tensor>` becomes;
# torch.vmap's levels, pushed and popped around the ops between: variables/functorch.py; facts
# stated about sizes, which the runtime-assert pass reads: fake/unbacked.py)
_KEPT_FOR_EFFECT = {torch._C._log_api_usage_once, torch._assert_async, predispatch._vmap_increment_nesting,
                    predispatch._vmap_decrement_nesting, predispatch.lazy_load_decompositions,
                    torch._check, torch._check_is_size}

_MUTATING_FUNCTIONS = {torch._C._set_grad_enabled, torch.amp._enter_autocast, torch.amp._exit_autocast,
                       operator.setitem, operator.delitem, operator.iadd, operator.isub, operator.imul,
                       operator.itruediv, operator.ifloordiv, operator.imod, operator.ipow, operator.imatmul,
                       operator.iand, operator.ior, operator.ixor, operator.ilshift, operator.irshift}


def _mutates(node: torch.fx.Node) -> bool:
    if node.kwargs.get("inplace") is True or "out" in node.kwargs:
        return True
    if node.op == "call_method":
        name = node.target
    elif node.target in _MUTATING_FUNCTIONS:
        return True
    else:
        name = getattr(node.target, "__name__", "")
    # torch's convention: a trailing underscore marks the in-place variant (add_, relu_, copy_).
    return name.endswith("_") and not name.endswith("__")


def changes_in_place(graph: torch.fx.Graph) -> bool:
    """Whether any call of `graph` writes a tensor in place (`x.add_(1)`, `x[i] = v`) or global
    state (grad mode)."""
    return any(_mutates(node) for node in graph.nodes if node.op in ("call_function", "call_method"))


def _holds_tensor(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return True
    if isinstance(value, (list, tuple)):
        return any(_holds_tensor(v) for v in value)
    return False

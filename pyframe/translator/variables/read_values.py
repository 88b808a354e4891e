"""Values read from tensors into Python, as torch._dynamo captures them when asked to
(torch._dynamo.config.capture_scalar_outputs, or fullgraph: ShapePolicy.scalar_outputs).

`x.item()` is recorded in the graph and its value is an unbacked symbol of the trace's ShapeEnv
(fake/unbacked.py), a SymNodeVariable used symbolically from then on; `x.tolist()` of an integer
tensor reads each element so; `int()`/`float()` of such a value are `torch.sym_int`/`sym_float`; a
float handed back to Python leaves the graph as a 0-d tensor. A static trace meeting a read is
traced again over a ShapeEnv (NeedsSymbolicTrace); what cannot be captured is a graph break.
"""
from __future__ import annotations

import math
import operator
from typing import Any, Sequence

import torch
import torch.fx
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

from ...exc import Unsupported
from ...fake.shapes import NeedsSymbolicTrace
from .base import VariableTracker
from .constant import ConstantVariable
from .lists import ListVariable
from .tensor import FLOAT_OUTPUT, SymNodeVariable, TensorVariable, call_in_graph, register_data_reader, wrap_node


def captured_item(tx, tensor: TensorVariable) -> VariableTracker:
    """`x.item()` with scalar outputs captured (torch._dynamo.config.capture_scalar_outputs, or
    fullgraph: ShapePolicy.scalar_outputs): the `item` call recorded, its value an unbacked symbol
    of the trace's ShapeEnv (a static trace is traced again over one), used symbolically from then
    on, as torch._dynamo records it. A branch on its value is a question no guard can answer: a
    graph break."""
    _needs_symbolic_trace(tx, "item")
    return call_in_graph(tx, "call_method", "item", [tensor], {})


def _needs_symbolic_trace(tx, name: str) -> None:
    if not tx.output.symbolic:
        if not tx.output.shapes.symbolic_allowed:  # (the symbolic trace failed: read as by default)
            raise Unsupported(f"Tensor.{name}() reads tensor data into Python")
        raise NeedsSymbolicTrace(f"Tensor.{name}() with capture_scalar_outputs")


_INTEGER_DTYPES = (torch.int8, torch.int16, torch.int32, torch.int64)


def captured_tolist(tx, tensor: TensorVariable) -> VariableTracker:
    """`x.tolist()` with scalar outputs captured, as torch._dynamo records it: of an integer tensor,
    nested lists (one a dimension) of its elements, each `x[i][j]` read by `item()` in the graph, an
    unbacked symbol (a 0-d tensor: its item). Of any other dtype a graph break, as under
    torch._dynamo; so is a dimension of an unknown size (read from a tensor)."""
    if tensor.example.dtype not in _INTEGER_DTYPES:
        raise Unsupported(f"Tensor.tolist() of a {tensor.example.dtype} tensor (an integer tensor's is traced)")
    _needs_symbolic_trace(tx, "tolist")
    return _elements(tx, tensor.node)


def _elements(tx, node: torch.fx.Node) -> VariableTracker:
    example = node.meta["example_value"]
    if example.dim() == 0:
        return wrap_node(tx, tx.output.create_node("call_method", "item", (node,), {}))
    size = example.shape[0]
    if free_unbacked_symbols(size):
        raise Unsupported("Tensor.tolist() of a tensor whose size is read from a tensor")
    return ListVariable([_elements(tx, tx.output.create_node("call_function", operator.getitem, (node, i), {}))
                         for i in range(int(size))])  # (a symbolic size: specialized, guarded)


def float_outputs_as_tensors(tx, outputs: list[torch.fx.Node]) -> list[torch.fx.Node]:
    """The graph's outputs with each symbolic float (a float `Tensor.item()`) handed back as a 0-d
    float64 tensor made at the end of the graph (`torch.scalar_tensor(item, dtype=torch.float64)`),
    its `item()` read by the transformed code, as torch._dynamo's codegen hands such floats back
    (one tensor per value). Symbolic ints and bools stay as they are."""
    if not any(type(node.meta.get("example_value")) is torch.SymFloat for node in outputs):
        return outputs
    replaced = []
    for node in outputs:
        if type(node.meta.get("example_value")) is torch.SymFloat:
            if FLOAT_OUTPUT not in node.meta:
                node.meta[FLOAT_OUTPUT] = tx.output.create_node("call_function", torch.scalar_tensor, (node,),
                                                                {"dtype": torch.float64})
            node = node.meta[FLOAT_OUTPUT]
        replaced.append(node)
    return replaced


def number_of_read_value(tx, cls: type, value: SymNodeVariable) -> VariableTracker:
    """`int(n)` / `float(n)` of a value read from a tensor (a captured `Tensor.item()`): recorded as
    `torch.sym_int` / `torch.sym_float`, as torch._dynamo records them; of its own kind, itself."""
    if value.python_type() is cls:
        return value
    return call_in_graph(tx, "call_function", torch.sym_int if cls is int else torch.sym_float, [value], {})


def number_of_tensor(tx, cls: type, tensor: TensorVariable) -> VariableTracker:
    """`int(t)` / `float(t)` of a one-element tensor with scalar outputs captured: its item, then
    `torch.sym_int` / `torch.sym_float` of it, as torch._dynamo records them (the runtime-assert
    pass folds a conversion of a value to its own kind into the item)."""
    if tensor.example.dtype.is_complex:
        raise Unsupported(f"{cls.__name__}() of a complex tensor (Python raises)")
    value = captured_item(tx, tensor)
    return call_in_graph(tx, "call_function", torch.sym_int if cls is int else torch.sym_float, [value], {})


# Builtins on a value read from a tensor, recorded as torch._dynamo records them on a SymNode.
_SYMBOLIC_BUILTINS = {max: torch.sym_max, min: torch.sym_min, abs: operator.abs, math.sqrt: torch._sym_sqrt}


def builtin_of_read_value(tx, fn: Any, args: Sequence[VariableTracker], kwargs: dict) -> VariableTracker | None:
    """`max(u, 1)`, `min`, `abs(u)`, `math.sqrt(u)`, `bool(u)`, `round(u)` with `u` read from a tensor
    (an unbacked symbol, no value to compute them on): recorded in the graph, as torch._dynamo records
    them (`torch.sym_max`, `operator.abs`, `torch._sym_sqrt`, `u != 0`, `u.__round__()`). None for
    any other call (a size known while tracing is computed on its value, guarded, as before)."""
    if kwargs or not any(isinstance(a, SymNodeVariable) and not a.is_python_constant() for a in args):
        return None
    if not all(isinstance(a, SymNodeVariable) or (isinstance(a, ConstantVariable) and type(a.value) in (int, float, bool))
               for a in args):
        return None
    if fn in (max, min) and len(args) == 2 or fn in (abs, math.sqrt) and len(args) == 1:
        return call_in_graph(tx, "call_function", _SYMBOLIC_BUILTINS[fn], args, {})
    if fn is bool and len(args) == 1:
        return call_in_graph(tx, "call_function", operator.ne, [args[0], ConstantVariable(0)], {})
    if fn is round and len(args) == 1:
        return call_in_graph(tx, "call_method", "__round__", args, {})
    return None


register_data_reader("item", captured_item)
register_data_reader("tolist", captured_tolist)

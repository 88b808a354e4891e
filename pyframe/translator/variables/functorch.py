"""torch.vmap, traced as torch._dynamo 2.13 traces it: its Python inlined, its levels in the graph.

`torch.vmap(f)(x)` is Python down to four C calls (torch/_functorch/vmap.py, through the wrappers of
torch/_functorch/predispatch.py): `_vmap_increment_nesting(batch_size, randomness)` pushes a vmap
level onto functorch's interpreter stack, `_add_batch_dim(x, dim, level)` makes a batched tensor of
each input, `f` runs on them (each op goes through functorch's batching rules), and
`_remove_batch_dim(y, level, batch_size, out_dim)` and `_vmap_decrement_nesting()` undo it. The
translator inlines that Python (transformers' mask functions and torch's generic associative_scan
reach vmap this way) and records each of the four calls as a node of the graph, as torch._dynamo
does; `f`'s own ops are recorded between them as they are traced.

Propagation needs the level to exist while tracing too: ops on batched FakeTensors dispatch
through functorch's stack. So the increment and decrement are also made for real while tracing,
and every level a trace pushed is popped when the trace ends, however it ends
(OutputGraph.pop_vmap_levels), so an aborted trace never leaves functorch's stack changed. While a
level is pushed, propagation runs every op on the FakeTensors (the memo and the shape rules know
nothing of batching), and a graph break is not taken inside it: the frame's call that entered
vmap is the break (translate.py), as torch._dynamo allows no graph break inside a vmap.

The level numbers a trace saw are constants of its graph (`_add_batch_dim(x, 0, 1)`): they are
the depth of functorch's stack, which is empty when the frame is entered (a frame entered with
functorch tensors is not traced: builder.py; with a transform active, the guards reject: the C
TENSOR_MATCH checks no tensor input is a functorch wrapper).
"""
from __future__ import annotations

from typing import Any

import torch
import torch._functorch.predispatch as predispatch

from ...exc import Unsupported
from .base import VariableTracker
from .constant import ConstantVariable
from .tensor import SymNodeVariable, call_in_graph

# Recorded as nodes with their own function as target, as torch._dynamo's trace rules list them
# (TorchInGraphFunctionVariable): the batched/unbatched conversions run on FakeTensors like any op.
BATCH_DIM_FUNCTIONS = (predispatch._add_batch_dim, predispatch._remove_batch_dim)
# Functions with an effect on functorch's state: made while tracing and recorded.
NESTING_FUNCTIONS = (predispatch._vmap_increment_nesting, predispatch._vmap_decrement_nesting,
                     predispatch.lazy_load_decompositions)
FUNCTORCH_FUNCTIONS = frozenset(BATCH_DIM_FUNCTIONS + NESTING_FUNCTIONS)


def call_functorch(tx, fn: Any, args: list[VariableTracker], kwargs: dict[str, VariableTracker]) -> VariableTracker:
    """`fn(*args, **kwargs)` for one of FUNCTORCH_FUNCTIONS."""
    if fn in BATCH_DIM_FUNCTIONS:
        return call_in_graph(tx, "call_function", fn, args, kwargs)
    if kwargs:
        raise Unsupported(f"{fn.__name__}() with keyword arguments")
    output = tx.output
    if fn is predispatch.lazy_load_decompositions:
        fn()  # (registers vmap's Python decompositions once per process: idempotent)
        output.record_effect(fn, ())
        return ConstantVariable(None)
    if fn is predispatch._vmap_decrement_nesting:
        if args or not output.vmap_levels:
            raise Unsupported("_vmap_decrement_nesting() without a vmap level the trace pushed")
        level = output.pop_vmap_level()
        output.record_effect(fn, ())
        return ConstantVariable(level)
    if len(args) != 2:
        raise Unsupported("_vmap_increment_nesting() takes (batch_size, randomness)")
    batch_size, randomness = args
    if isinstance(batch_size, SymNodeVariable) or not batch_size.is_python_constant() \
            or not randomness.is_python_constant():
        raise Unsupported("vmap over a batch size or randomness that is not a constant of the trace")
    size, mode = batch_size.as_python_constant(), randomness.as_python_constant()
    if type(size) is not int or type(mode) is not str:
        raise Unsupported(f"_vmap_increment_nesting({size!r}, {mode!r})")
    level = output.push_vmap_level(size, mode)
    output.record_effect(fn, (size, mode))
    return ConstantVariable(level)

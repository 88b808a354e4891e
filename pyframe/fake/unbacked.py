"""Data-dependent values in the graph: unbacked symbols, as torch._dynamo captures them.

With `capture_scalar_outputs` (pyframe.config's or torch._dynamo.config's, or fullgraph) `x.item()`
is recorded in the graph and its value, unknown while tracing, is an *unbacked* symbol of the trace's ShapeEnv (`u0`);
with `capture_dynamic_output_shape_ops`, `x.nonzero()`, `x[mask]`, `torch.unique(x)` are recorded
and the sizes of their outputs are unbacked symbols. A static trace meeting either is traced again
over a ShapeEnv that allows them (ShapePolicy's `scalar_outputs` and `dynamic_output_shapes`);
without the setting the op is a graph break, as under torch._dynamo (`data_dependent_break`).

An unbacked symbol has no value to guard on: what the trace learns of it (`torch._check(u >= 0)`,
`torch.zeros(u)` needing a size of at least 0, the bounds of a nonzero's size) the ShapeEnv keeps
as deferred runtime asserts and value ranges. As torch._dynamo does, each node that makes fresh
symbols records where they are in its output (`meta["unbacked_bindings"]`, `bind_fresh_symbols`),
and the finished graph gets torch's pass that turns the ShapeEnv's knowledge into asserts in the
graph (`sym_size_int = torch.ops.aten.sym_size.int(nonzero, 0)`, `ge = sym_size_int >= 0`,
`torch.ops.aten._assert_scalar.default(ge, ...)`), then the reads nothing uses are dropped, as
torch._dynamo drops them (`insert_runtime_asserts`). Graphs without unbacked symbols or checks
never run either step.
"""
from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx
from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException
from torch.fx.experimental.symbolic_shapes import ShapeEnv, compute_unbacked_bindings, is_accessor_node
from torch.fx.passes.runtime_assert import insert_deferred_runtime_asserts

from .shapes import NeedsSymbolicTrace, ShapePolicy

# The calls that state facts about symbols (torch._dynamo records them, and its pass turns them into
# asserts in the graph): kept while tracing, though they make nothing.
CHECKS = (torch._check, torch._check_is_size)


def data_dependent_break(error: BaseException, shapes: ShapePolicy, symbolic: bool) -> str:
    """An op whose output is data-dependent failed to propagate (`error`, from FakeTensorMode): on
    a static trace with that kind captured, the frame is traced again over a ShapeEnv that allows
    it (NeedsSymbolicTrace). Otherwise the op is a graph break, as under torch._dynamo: the reason."""
    if isinstance(error, DynamicOutputShapeException):
        if shapes.dynamic_output_shapes and not symbolic and shapes.symbolic_allowed:
            raise NeedsSymbolicTrace(f"{error.func} with capture_dynamic_output_shape_ops")
        return (f"{error.func}'s output shape depends on the data (captured with "
                f"pyframe.config.capture_dynamic_output_shape_ops or torch._dynamo.config's)")
    if isinstance(error, DataDependentOutputException) and error.func in _SCALAR_READS:
        if shapes.scalar_outputs and not symbolic and shapes.symbolic_allowed:
            raise NeedsSymbolicTrace(f"{error.func} with capture_scalar_outputs")
        return f"{error.func} reads tensor data into Python (captured with pyframe.config.capture_scalar_outputs or torch._dynamo.config's)"
    return f"{getattr(error, 'func', 'an operator')}'s output depends on the data"


# What reads a tensor's value as an unbacked symbol when scalar outputs are captured
_SCALAR_READS = (torch.ops.aten._local_scalar_dense.default, torch.ops.aten.item.default)


def is_data_dependent_error(error: BaseException) -> bool:
    return isinstance(error, (DynamicOutputShapeException, DataDependentOutputException))


def bind_fresh_symbols(shape_env: ShapeEnv, node: torch.fx.Node) -> bool:
    """Record on `node` where the unbacked symbols its propagation just made are in its value
    (`meta["unbacked_bindings"]`, read by the runtime-assert pass); whether there were any."""
    bindings = compute_unbacked_bindings(shape_env, node.meta["example_value"])
    if not bindings:
        return False
    node.meta["unbacked_bindings"] = bindings
    return True


def insert_runtime_asserts(gm: torch.fx.GraphModule, shape_env: ShapeEnv, name: str) -> None:
    """The ShapeEnv's deferred asserts and unbacked symbols' ranges as asserts in `gm`'s graph (and
    in each graph of a higher-order op it holds), by torch's pass, as torch._dynamo runs it; then
    unused reads of symbols and projections dropped, as torch._dynamo's cleanup drops them."""
    for sub in gm.children():
        if isinstance(sub, torch.fx.GraphModule):
            insert_deferred_runtime_asserts(sub, shape_env, name)
            sub.recompile()
    insert_deferred_runtime_asserts(gm, shape_env, name)
    _drop_unused_reads(gm.graph)
    gm.recompile()


def _drop_unused_reads(graph: torch.fx.Graph) -> None:
    for node in reversed(list(graph.nodes)):
        if node.users:
            continue
        if is_accessor_node(node) or (node.op == "call_function" and node.target is operator.getitem) \
                or _is_static_true_check(node):
            graph.erase_node(node)


def _is_static_true_check(node: torch.fx.Node) -> bool:
    """`torch._check(c)` whose condition the ShapeEnv knows holds."""
    if node.op != "call_function" or node.target is not torch._check or not node.args:
        return False
    cond = node.args[0]
    if cond is True:
        return True
    value = cond.meta.get("example_value") if isinstance(cond, torch.fx.Node) else None
    return isinstance(value, torch.SymBool) and value.node.maybe_as_bool() is True


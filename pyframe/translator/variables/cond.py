"""`torch.cond(pred, true_fn, false_fn, operands)`: the `cond` higher-order op, as torch._dynamo 2.13
records it.

With a tensor predicate, each branch is traced into a graph of its own (`cond_true_0`,
`cond_false_0`: attributes of the frame's graph module) by a SubgraphTracer
(autograd_function.py), which lifts every tensor of the frame a branch uses, an operand or a
tensor it reads from a closure, a global or a module, to one of its placeholders. The two branches
then take the same inputs, in torch._dynamo's order: the tensors both use, then those only the
true branch uses, then those only the false branch uses, each group sorted by node name (an
operand neither uses is not passed). The frame's graph calls the op and takes the outputs from the
tuple it returns:

    cond_true_0 = self.cond_true_0
    cond_false_0 = self.cond_false_0
    cond = torch.ops.higher_order.cond(gt, cond_true_0, cond_false_0, (l_x_, y))
    getitem = cond[0]

The predicate may also be a bool read from the data (`u > 0`, u a captured `Tensor.item()`: an
unbacked SymBool, fake/unbacked.py), recorded as its node (`gt = item > 0`). A predicate known
while tracing (a Python bool, a static size compared) picks its branch, which is inlined where cond
is called, as torch._dynamo and eager do. What the op cannot express is a graph
break at the call (eager then runs torch.cond): a branch that changes objects of the frame or a
tensor in place, returns an input itself, or returns anything but tensors (one, or a flat tuple or
list of them, the same kind and length in both branches); operands that are not tensors.
"""
from __future__ import annotations

from typing import Any

import torch
import torch.fx

from ...exc import Unsupported
from ...fake.mode import use_fake_kernel_of
from ...graph import rename_node
from ...graph_passes import changes_in_place
from .autograd_function import SubgraphTracer
from .base import VariableTracker
from .lists import ListVariable, TupleVariable
from .tensor import SymNodeVariable, TensorVariable, wrap_node

COND = torch.cond
use_fake_kernel_of(torch.ops.higher_order.cond)
_PARAMETERS = ("pred", "true_fn", "false_fn", "operands")


def _call_branch(fn, *operands):
    """What cond calls (inlined into a branch's graph: its calls record there)."""
    return fn(*operands)


class CondVariable(VariableTracker):
    """`torch.cond`, read from the frame (guarded by identity)."""

    def real_object(self) -> Any:
        return COND

    def python_type(self) -> type:
        return type(COND)

    def as_python_constant(self) -> Any:
        return COND

    def call(self, tx, args, kwargs) -> VariableTracker:
        args, kwargs = list(args), dict(kwargs)
        for name in _PARAMETERS[len(args):]:
            if name in kwargs:
                args.append(kwargs.pop(name))
        if len(args) == 3:
            args.append(TupleVariable([]))  # operands=()
        if len(args) != 4 or kwargs:
            raise Unsupported("torch.cond() called with other arguments than (pred, true_fn, false_fn, operands)")
        pred, true_fn, false_fn, operands = args
        if not isinstance(operands, (TupleVariable, ListVariable)) or type(operands) not in (TupleVariable, ListVariable):
            raise Unsupported(f"torch.cond with operands {operands!r} (a tuple or list of tensors is traced)")
        if pred.is_python_constant():  # the branch is known: eager calls it, as here
            branch = true_fn if pred.as_python_constant() else false_fn
            return tx.inline_call(_call_branch, [branch, *operands.items], {})
        if not isinstance(pred, TensorVariable) and not (isinstance(pred, SymNodeVariable) and pred.python_type() is bool):
            raise Unsupported(f"torch.cond with the predicate {pred!r} (a tensor, a symbolic bool or a constant is traced)")
        if not all(isinstance(vt, TensorVariable) for vt in operands.items):
            raise Unsupported("torch.cond with an operand that is not a tensor")
        for vt in (pred, *operands.items):
            if vt.node.op == "placeholder":  # an input of the frame, realized here (as torch._dynamo
                tx.output.realize(vt.node)   # realizes the op's arguments before tracing the branches)
        true_graph, true_out, true_items = _trace_branch(tx, true_fn, operands.items, "true")
        false_graph, false_out, false_items = _trace_branch(tx, false_fn, operands.items, "false")
        if type(true_out) is not type(false_out) or len(true_items) != len(false_items):
            raise Unsupported("the branches of torch.cond return different structures")
        inputs = _merge_inputs(true_graph, false_graph)
        main = tx.output
        true_attr = main.install_subgraph("cond_true", torch.fx.GraphModule(torch.nn.Module(), true_graph.graph))
        false_attr = main.install_subgraph("cond_false", torch.fx.GraphModule(torch.nn.Module(), false_graph.graph))
        node = main.create_node("call_function", torch.ops.higher_order.cond,
                                (pred.node, true_attr, false_attr, tuple(inputs)), {})
        results = wrap_node(tx, node).unpack(tx)  # (a store names them, as in torch._dynamo's graph)
        if isinstance(true_out, TensorVariable):
            return results[0]
        return type(true_out)(list(results))

    def __repr__(self) -> str:
        return "CondVariable()"


def _trace_branch(tx, fn: VariableTracker, operands: list[VariableTracker],
                  which: str) -> tuple[SubgraphTracer, VariableTracker, list[VariableTracker]]:
    """Trace one branch into a graph of its own: the graph (its output set), what it returned and
    the tensors in it."""
    body = SubgraphTracer(tx.output)
    effects = tx.side_effects.effects
    out = tx.inline_call(_call_branch, [fn, *operands], {}, output=body)
    what = f"the {which} branch of torch.cond"
    if tx.side_effects.effects != effects:
        raise Unsupported(f"{what} changes objects of the frame")
    if changes_in_place(body.graph):  # (an input, or a view of one, perhaps: left to eager to judge)
        raise Unsupported(f"{what} changes a tensor in place")
    if isinstance(out, TensorVariable):
        items = [out]
    elif type(out) in (TupleVariable, ListVariable) and out.items \
            and all(isinstance(vt, TensorVariable) for vt in out.items):
        items = list(out.items)
    else:
        raise Unsupported(f"{what} returns {out!r} (a tensor, or a tuple or list of tensors, is traced)")
    nodes = [body.lift(vt.node) for vt in items]
    if any(node.op == "placeholder" for node in nodes):
        raise Unsupported(f"{what} returns one of its inputs")
    body.graph.output(tuple(nodes))
    return body, out, items


def _merge_inputs(true_graph: SubgraphTracer, false_graph: SubgraphTracer) -> list[torch.fx.Node]:
    """Give both branch graphs the same placeholders, in torch._dynamo's order (module docstring),
    and return the frame's nodes passed for them. A tensor only one branch uses gets a placeholder
    named for that branch (`y_true_branch`) in both graphs."""
    def by_name(nodes):
        return sorted(nodes, key=lambda node: node.name)

    used_true, used_false = true_graph.lifted, false_graph.lifted
    shared = by_name(n for n in used_true if n in used_false)
    only_true = by_name(n for n in used_true if n not in used_false)
    only_false = by_name(n for n in used_false if n not in used_true)
    order = [(n, "") for n in shared] + [(n, "_true_branch") for n in only_true] \
        + [(n, "_false_branch") for n in only_false]
    for body in (true_graph, false_graph):
        graph = body.graph
        first = next(n for n in graph.nodes if n.op != "placeholder")
        for outer, suffix in order:  # each moved (or made) in turn just before the first op
            node = body.lifted.get(outer)
            if node is None:
                with graph.inserting_before(first):
                    node = graph.placeholder(f"{outer.name}{suffix}")
                node.meta["example_value"] = outer.meta["example_value"]
            else:
                rename_node(node, f"{outer.name}{suffix}")
                first.prepend(node)
    return [n for n, _ in order]

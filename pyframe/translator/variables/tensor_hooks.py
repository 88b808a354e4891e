"""`y.register_hook(fn)` on a tensor the graph makes: the `register_hook` higher-order op, as
torch._dynamo 2.13 records it.

The hook is traced into a graph of its own (`hook_body_0`, an attribute of the frame's graph
module) by a SubgraphTracer, called with the tensor itself standing for the gradient (its first
placeholder); a tensor of the frame the hook reads from a closure is lifted to a placeholder after
it and passed to the op. From there on the frame uses the op's result, the same tensor with the
hook registered on it:

    hook_body_0 = self.hook_body_0
    register_hook = torch.ops.higher_order.register_hook(y, hook_body_0, k)
    sum_1 = register_hook.sum()

The op registers the hook when the graph runs, so it fires in backward as eager's would. A hook on
a tensor passed in is registered after the graph instead (side_effects.py); what the op cannot
express is a graph break at the registration: a hook that changes objects of the frame or a
tensor in place, or returns anything but a tensor or None.
"""
from __future__ import annotations

import torch
import torch.fx
from torch._higher_order_ops.register_hook import register_hook_op

from ...exc import Unsupported
from ...graph_passes import changes_in_place
from .autograd_function import SubgraphTracer
from .base import VariableTracker
from .tensor import HookHandleVariable, TensorVariable, register_hook_tracer

REGISTER_HOOK = register_hook_op  # (torch.ops.higher_order.register_hook once imported)


def _call_hook(fn, grad):
    """What the op calls (inlined into the hook's graph: its calls record there)."""
    return fn(grad)


def register_hook_in_graph(tx, tensor: TensorVariable, fn: VariableTracker) -> VariableTracker:
    """`tensor.register_hook(fn)` on a tensor the graph made: the op recorded, `tensor` now its result."""
    if not tensor.example.requires_grad:  # (eager raises: left to it)
        raise Unsupported("Tensor.register_hook() on a tensor that does not require grad")
    body = SubgraphTracer(tx.output)
    body.lift(tensor.node)  # the gradient's stand-in: the first placeholder
    effects = tx.side_effects.effects
    out = tx.inline_call(_call_hook, [fn, tensor], {}, output=body)
    if tx.side_effects.effects != effects:
        raise Unsupported("a tensor hook that changes objects of the frame")
    if changes_in_place(body.graph):
        raise Unsupported("a tensor hook that changes a tensor in place")
    if isinstance(out, TensorVariable):
        body.graph.output(body.lift(out.node))
    elif out.is_python_constant() and out.as_python_constant() is None:
        body.graph.output(None)
    else:
        raise Unsupported(f"a tensor hook that returns {out!r} (a tensor or None is traced)")
    main = tx.output
    freevars = [outer for outer in body.lifted if outer is not tensor.node]
    hook_attr = main.install_subgraph("hook_body", torch.fx.GraphModule(torch.nn.Module(), body.graph))
    node = main.graph.create_node("call_function", REGISTER_HOOK, (tensor.node, hook_attr, *freevars), {},
                                  name="register_hook")
    node.meta["example_value"] = tensor.example  # the op returns the tensor it was given
    if tensor.node in main._node_keys:
        main._node_keys[node] = main._node_keys[tensor.node]
    tensor.node = node
    return HookHandleVariable(tx.root.ip - 1)


register_hook_tracer(register_hook_in_graph)

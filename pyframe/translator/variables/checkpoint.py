"""`torch.utils.checkpoint.checkpoint(fn, *args, **kwargs)`: the `tag_activation_checkpoint`
higher-order op, as torch._dynamo 2.13 records it.

The function is traced into a graph of its own (`wrap_body_0`, an attribute of the frame's graph
module): its tensor arguments are its first inputs, then every tensor of the frame it reads (a
block's parameters), lifted in as it reads them (autograd_function.SubgraphTracer); other
arguments are constants of the body. The frame's graph calls the op on the body and those tensors,
checkpoint's own keyword arguments (`use_reentrant=False`, `preserve_rng_state`...) passed on as
given, and takes the body's outputs from the tuple it returns:

    wrap_body_0 = self.wrap_body_0
    tag_activation_checkpoint = torch.ops.higher_order.tag_activation_checkpoint(
        wrap_body_0, l_x_, l_self_modules_lin_parameters_weight_, ..., use_reentrant = False)
    x = tag_activation_checkpoint[0]

A backend that trains through it (aot_autograd) recomputes the body in backward instead of saving
its activations, as eager's checkpoint does. What the op cannot express is left to eager, the call
a graph break as before: a body with side effects on the frame's objects, one that returns
anything but tensors, `context_fn` (a function).
"""
from __future__ import annotations

from typing import Any

import torch
import torch.fx
import torch.utils.checkpoint

from ...exc import Unsupported
from .autograd_function import SubgraphTracer
from .base import VariableTracker
from .lists import TupleVariable
from .tensor import TensorVariable, wrap_node

CHECKPOINT = torch.utils.checkpoint.checkpoint
# checkpoint's own keyword arguments (the others go to the function), all plain values but context_fn
_OWN_KWARGS = {"use_reentrant", "context_fn", "determinism_check", "debug", "preserve_rng_state", "early_stop"}


def _call_checkpointed(fn, *args, **kwargs):
    """What checkpoint calls (inlined into the body's graph: its calls record there)."""
    return fn(*args, **kwargs)


class CheckpointVariable(VariableTracker):
    """`torch.utils.checkpoint.checkpoint`, read from the frame (guarded by identity)."""

    def real_object(self) -> Any:
        return CHECKPOINT

    def python_type(self) -> type:
        return type(CHECKPOINT)

    def as_python_constant(self) -> Any:
        return CHECKPOINT

    def call(self, tx, args, kwargs) -> VariableTracker:
        if not args:
            raise Unsupported("torch.utils.checkpoint.checkpoint() without a function")
        own = {k: v for k, v in kwargs.items() if k in _OWN_KWARGS}
        if "context_fn" in own or not all(v.is_python_constant() for v in own.values()):
            raise Unsupported("torch.utils.checkpoint.checkpoint with a context_fn or non-constant options")
        fn_kwargs = {k: v for k, v in kwargs.items() if k not in _OWN_KWARGS}
        body = SubgraphTracer(tx.output)
        seen: set[torch.fx.Node] = set()

        def lifted(vt: VariableTracker) -> VariableTracker:  # a tensor argument: an input of the body
            if not isinstance(vt, TensorVariable):
                return vt
            if vt.node in seen:
                raise Unsupported("torch.utils.checkpoint.checkpoint with the same tensor passed twice")
            seen.add(vt.node)
            if vt.node.op == "placeholder":  # an input of the frame, realized here (as torch._dynamo
                tx.output.realize(vt.node)   # realizes the op's arguments before tracing the body)
            return TensorVariable(body.lift(vt.node), class_type=vt.class_type)

        inner_args = [lifted(vt) for vt in args[1:]]
        inner_kwargs = {k: lifted(vt) for k, vt in fn_kwargs.items()}
        effects = tx.side_effects.effects
        out = tx.inline_call(_call_checkpointed, [args[0], *inner_args], inner_kwargs, output=body)
        if tx.side_effects.effects != effects:
            raise Unsupported("a function checkpointed by torch.utils.checkpoint changes objects of the frame")
        if isinstance(out, TensorVariable):
            items, single = [out], True
        elif type(out) is TupleVariable and out.items and all(isinstance(vt, TensorVariable) for vt in out.items):
            items, single = list(out.items), False
        else:
            raise Unsupported(f"a function checkpointed by torch.utils.checkpoint returns {out!r} (tensors are traced)")
        body.graph.output(tuple(body.lift(vt.node) for vt in items))
        main = tx.output
        attr = main.install_subgraph("wrap_body", torch.fx.GraphModule(torch.nn.Module(), body.graph))
        node = main.create_node("call_function", torch.ops.higher_order.tag_activation_checkpoint,
                                (attr, *body.lifted), {k: v.as_python_constant() for k, v in own.items()})
        results = wrap_node(tx, node).unpack(tx)
        for inner, outer in zip(items, results):
            # (a store names an op's output once: an output the body had already stored to a local
            # keeps its `getitem` name in the frame's graph, as torch._dynamo's output keeps the
            # body's tracker state)
            outer.name_hint_set = inner.name_hint_set
        return results[0] if single else TupleVariable(list(results))

    def __repr__(self) -> str:
        return "CheckpointVariable()"

"""torch.autograd.Function: `MyFn.apply(...)` traced as torch._dynamo 2.13 traces it.

When no input needs a gradient (none requires grad, or grad mode is off), autograd never calls the
backward: `apply` is just its forward, so the forward is inlined into the frame's graph with a
symbolic `ctx` (what it saves is never read).

Otherwise the custom backward must be the one autograd uses, so the forward cannot simply be
inlined (autograd would differentiate its ops instead). As in torch._dynamo, the forward and the
backward are each traced into a graph of their own, and the frame's graph gets one higher-order op:

    fwd_body_0 = get_attr fwd_body_0                  (forward: its tensor inputs -> its tensor
    bwd_body_0 = get_attr bwd_body_0                   outputs, and the tensors backward reads)
    out = autograd_function_apply(fwd_body_0, bwd_body_0, x, ..., non_differentiable_idx=[..],
                                  saved_for_backward_idx=[..])
    y = out[0]

At run time `autograd_function_apply` (torch._functorch.autograd_function) builds a real
autograd.Function whose forward runs fwd_body and whose backward runs bwd_body: the user's
backward, as traced. The two graphs are wired like this:

- fwd_body's inputs are every tensor argument of `apply`, in order, then any other tensor of the
  frame the forward (or the backward) reads: a global, a parameter, an intermediate passed in a
  list. Those extra inputs get no gradient (None), as in eager, where autograd never sees them.
- fwd_body returns `((outputs...), (saved...))`: the tensor outputs of forward, and every tensor
  made or read by forward that backward uses (saved with `ctx.save_for_backward`, stored as
  `ctx.attr`, or an extra input); bwd_body receives them after the gradients.
- bwd_body takes one gradient per tensor output (a non-tensor output's gradient is None) and
  returns one gradient per fwd_body input. Unlike torch._dynamo's, it does not switch grad mode
  off: it runs in the mode autograd gives backward (on under `create_graph=True`), as eager does.
- `ctx.mark_non_differentiable` and `ctx.mark_dirty` become the op's `non_differentiable_idx` and
  `dirty_idx` (positions among the tensor outputs), which the run-time Function applies to its ctx;
  `saved_for_backward_idx` says which saved tensors came from `ctx.save_for_backward`.

Each graph is traced by a SubgraphTracer: an OutputGraph of its own that lifts a tensor of the
enclosing graph to one of its placeholders the first time it is used. Guards, the fake mode and
graph inputs (read from the frame in forward or backward) are the frame's.

What is not traced breaks the graph at the `apply` call, which then runs eagerly (and its forward
is compiled as a frame of its own): ctx.save_for_forward, ctx.set_materialize_grads(False), a
custom jvp or vjp, keyword-only forward arguments, the same tensor passed twice (torch._dynamo
breaks there too), outputs that are neither tensors nor constants, a tensor made by forward and
stored outside it, a backward that mutates objects outside itself or raises, and whatever the
translator cannot trace in forward or backward.
"""
from __future__ import annotations

import inspect
import types
from typing import Any

import torch
import torch.fx
from torch._functorch.autograd_function import autograd_function_apply

from ...exc import Unsupported
from ...graph import OutputGraph
from ...source import AttrSource, Source
from .base import BoundMethodVariable, VariableTracker
from .constant import ConstantVariable
from .exceptions import RaisedException
from .dicts import DictVariable
from .lists import BaseListVariable, TupleVariable
from .functions import UserFunctionVariable
from .nn_module import NNModuleVariable
from .objects import NewObjectVariable, PythonObjectVariable
from .tensor import TensorVariable, wrap_node

_Function = torch.autograd.Function
_APPLY = _Function.apply.__func__  # what `MyFn.apply` binds to MyFn


def is_autograd_function(value: Any) -> bool:
    """A subclass of torch.autograd.Function (the class itself, not Function)."""
    return isinstance(value, type) and issubclass(value, _Function) and value is not _Function


def is_function_apply(attr: Any) -> bool:
    """Function.apply itself, as found in a class's dict (a classmethod)."""
    return isinstance(attr, classmethod) and attr.__func__ is _APPLY


def is_bound_apply(value: Any) -> bool:
    """`MyFn.apply` read as a value (`apply = MyFn.apply` at module level)."""
    return isinstance(value, types.MethodType) and value.__func__ is _APPLY and is_autograd_function(value.__self__)


class AutogradFunctionVariable(PythonObjectVariable):
    """A torch.autograd.Function subclass: its `apply` is traced; other attributes are read as for
    any class."""

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name == "apply" and is_function_apply(inspect.getattr_static(self.value, "apply", None)):
            return AutogradApplyVariable(self)  # (an `apply` of the class's own is inlined as a classmethod)
        return super().var_getattr(tx, name)

    def call(self, tx, args, kwargs) -> VariableTracker:
        raise Unsupported(f"instantiating the autograd.Function {self.value.__qualname__} (call its apply)")

    def __repr__(self) -> str:
        return f"AutogradFunctionVariable({self.value.__qualname__})"


class AutogradApplyVariable(VariableTracker):
    """`MyFn.apply`, about to be called."""

    def __init__(self, fn_cls: AutogradFunctionVariable):
        super().__init__()
        self.fn_cls = fn_cls

    def python_type(self) -> type:
        return types.MethodType

    def call(self, tx, args, kwargs) -> VariableTracker:
        return trace_apply(tx, self.fn_cls, list(args), dict(kwargs))

    def rebuilt_from(self) -> list[VariableTracker]:
        return [self.fn_cls]

    def reconstruct(self, cg) -> None:
        self.fn_cls.reconstruct(cg)
        cg.emit("LOAD_ATTR", "apply")

    def __repr__(self) -> str:
        return f"AutogradApplyVariable({self.fn_cls.value.__qualname__})"


# -- ctx --------------------------------------------------------------------------------------------

# What the ctx of a traced apply refuses (a graph break at the apply call): features whose effect
# the traced graphs cannot reproduce.
_UNSUPPORTED_CTX_METHODS = {"save_for_forward", "mark_shared_storage"}


class AutogradContextVariable(VariableTracker):
    """The `ctx` of one traced apply, made while tracing: what forward saves and marks on it, and
    the attributes it stores (read back by backward). It never exists for real: it cannot outlive
    the trace (reconstruct is refused, as for any value without a source)."""

    def __init__(self, fn_cls: type, needs_input_grad: tuple[bool, ...]):
        super().__init__()
        self.fn_cls = fn_cls
        self.needs_input_grad = needs_input_grad
        self.saved: list[VariableTracker] | None = None  # ctx.save_for_backward(...)
        self.non_differentiable: list[TensorVariable] = []  # ctx.mark_non_differentiable(...)
        self.dirty: list[TensorVariable] = []  # ctx.mark_dirty(...): inputs forward changed in place
        self.attrs: dict[str, VariableTracker] = {}
        self.in_backward = False

    def python_type(self) -> type:
        return self.fn_cls._backward_cls  # what eager passes: an instance of `MyFnBackward`

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name in self.attrs:
            return self.attrs[name]
        if name == "needs_input_grad":
            return TupleVariable([ConstantVariable(flag) for flag in self.needs_input_grad])
        if name in ("saved_tensors", "saved_variables"):
            if not self.in_backward:
                raise Unsupported(f"ctx.{name} read outside backward")
            return TupleVariable(list(self.saved or ()))
        if name in ("save_for_backward", "mark_non_differentiable", "mark_dirty", "set_materialize_grads") \
                or name in _UNSUPPORTED_CTX_METHODS:
            return BoundMethodVariable(self, name)
        raise Unsupported(f"attribute {name!r} of the ctx of {self.fn_cls.__qualname__}")

    def call_method(self, tx, name, args, kwargs) -> VariableTracker:
        what = f"ctx.{name}() in {self.fn_cls.__qualname__}"
        if kwargs:
            raise Unsupported(f"{what} with keyword arguments")
        if name == "save_for_backward":
            if not all(isinstance(a, TensorVariable) or _is_none(a) for a in args):
                raise Unsupported(f"{what} of a value that is not a tensor or None")  # eager: TypeError
            self.saved = list(args)
            return ConstantVariable(None)
        if name in ("mark_non_differentiable", "mark_dirty"):
            if not all(isinstance(a, TensorVariable) for a in args):
                raise Unsupported(f"{what} of a value that is not a tensor")
            (self.dirty if name == "mark_dirty" else self.non_differentiable).extend(args)
            return ConstantVariable(None)
        if name == "set_materialize_grads":
            # True is the default; False would hand backward None for unused outputs' gradients,
            # where the traced backward was given tensors.
            if len(args) == 1 and args[0].is_python_constant() and args[0].as_python_constant() is True:
                return ConstantVariable(None)
            raise Unsupported(f"{what} other than True")
        raise Unsupported(what)

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        if hasattr(self.fn_cls._backward_cls, name):  # ctx's own machinery (saved_tensors, ...)
            raise Unsupported(f"assignment to ctx.{name} in {self.fn_cls.__qualname__}")
        self.attrs[name] = value

    def __repr__(self) -> str:
        return f"AutogradContextVariable({self.fn_cls.__qualname__})"


def _is_none(vt: VariableTracker) -> bool:
    return isinstance(vt, ConstantVariable) and vt.value is None


# -- apply ------------------------------------------------------------------------------------------

def trace_apply(tx, fn_var: AutogradFunctionVariable, args: list[VariableTracker],
                kwargs: dict[str, VariableTracker]) -> VariableTracker:
    """`MyFn.apply(*args, **kwargs)`: the forward inlined, or the higher-order op (module docstring)."""
    fn_cls = fn_var.value
    for name in ("jvp", "vjp"):
        if getattr(fn_cls, name) is not getattr(_Function, name):
            raise Unsupported(f"autograd.Function {fn_cls.__qualname__} defines a custom {name}")
    with_setup_context = fn_cls.setup_context is not torch.autograd.function._SingleLevelFunction.setup_context
    forward = _method(tx, fn_var, "forward")
    inputs = _resolve_inputs(tx, forward, args, kwargs, with_setup_context)
    for vt in (inputs if with_setup_context else args):
        # Function.apply's `unwrap_dead_wrappers(args)`, `tuple(... for arg in args)`, which
        # torch._dynamo traces: its store names a tensor made for the call `arg`
        vt.set_name_hint("arg")
    ctx = AutogradContextVariable(fn_cls, tuple(isinstance(v, TensorVariable) and v.example.requires_grad
                                                for v in inputs))
    needs_graphs = tx.output.grad_enabled and any(_requires_grad(v) for v in inputs)
    if not needs_graphs:
        return _inline_forward(tx, fn_var, forward, ctx, inputs, with_setup_context)
    return _HigherOrderApply(tx, fn_var, forward, ctx, inputs, with_setup_context).trace()


def _method(tx, fn_var: AutogradFunctionVariable, name: str) -> VariableTracker:
    """`MyFn.forward` (or backward, setup_context), read through the class as a guarded function."""
    value = getattr(fn_var.value, name)
    if not isinstance(value, types.FunctionType):
        raise Unsupported(f"{fn_var.value.__qualname__}.{name} is not a plain function (a staticmethod)")
    source = AttrSource(fn_var.source, name) if fn_var.source is not None else None
    wrapped = tx.wrap(value, source, guard=source is not None)
    if not isinstance(wrapped, UserFunctionVariable):  # torch._dynamo.disable'd, ...
        raise Unsupported(f"{fn_var.value.__qualname__}.{name} cannot be traced ({wrapped!r})")
    return wrapped


def _resolve_inputs(tx, forward: VariableTracker, args, kwargs, with_setup_context: bool) -> list[VariableTracker]:
    """The inputs of forward as eager's apply makes them: keyword arguments moved to their
    positions (forward's ctx aside); with setup_context, defaults filled in too (apply binds them)."""
    fn = forward.as_python_constant()
    signature = inspect.signature(fn)
    parameters = list(signature.parameters.values())[0 if with_setup_context else 1:]
    try:
        bound = signature.replace(parameters=parameters).bind(*args, **kwargs)
    except TypeError as e:  # eager raises it again
        raise Unsupported(f"{fn.__qualname__}: {e}") from e
    if with_setup_context:
        bound.apply_defaults()
    if bound.kwargs:  # keyword-only, or after a skipped positional with a default
        raise Unsupported(f"autograd.Function forward {fn.__qualname__} with arguments passed by keyword only")
    return [v if isinstance(v, VariableTracker) else tx.wrap_constant(v) for v in bound.args]


def _requires_grad(vt: VariableTracker) -> bool:
    """Whether autograd sees this argument as needing a gradient (torch._dynamo's test: any tensor in
    it that requires grad, or a module in training mode)."""
    if isinstance(vt, TensorVariable):
        return vt.example.requires_grad
    if isinstance(vt, NNModuleVariable):
        return vt.module.training
    return any(_requires_grad(item) for item in _items(vt))


def _items(vt: VariableTracker) -> list[VariableTracker]:
    if isinstance(vt, BaseListVariable):
        return list(vt.items)
    if isinstance(vt, DictVariable):
        return list(vt.items.values())
    return []


def _call_forward(tx, fn_var, forward: VariableTracker, ctx: AutogradContextVariable,
                  inputs: list[VariableTracker], with_setup_context: bool,
                  output: OutputGraph | None = None) -> VariableTracker:
    """forward(ctx, *inputs), or out = forward(*inputs); setup_context(ctx, inputs, out)."""
    fn, source = forward.as_python_constant(), forward.source
    if not with_setup_context:
        return tx.inline_call(fn, [ctx, *inputs], {}, fn_source=source, output=output)
    out = tx.inline_call(fn, list(inputs), {}, fn_source=source, output=output)
    setup = _method(tx, fn_var, "setup_context")
    tx.inline_call(setup.as_python_constant(), [ctx, TupleVariable(list(inputs)), out], {},
                   fn_source=setup.source, output=output)
    return out


def _inline_forward(tx, fn_var, forward, ctx, inputs, with_setup_context) -> VariableTracker:
    """No input needs a gradient: autograd runs forward and nothing else, so it is inlined where
    apply is called, as torch._dynamo does (no grad-mode node recorded around it)."""
    output = tx.output
    if not output.grad_enabled:
        return _call_forward(tx, fn_var, forward, ctx, inputs, with_setup_context)
    # Eager runs forward under no_grad: forward sees grad mode off (torch.is_grad_enabled()) and
    # its ops run on FakeTensors under it, while the graph runs them with grad on. The two agree
    # as long as no op takes a tensor that requires grad (a parameter forward reads) and forward
    # does not switch grad mode itself; otherwise the apply runs eagerly.
    last = next(reversed(output.graph.nodes), None)
    output.grad_enabled = False
    try:
        out = _call_forward(tx, fn_var, forward, ctx, inputs, with_setup_context)
    finally:
        output.grad_enabled = True
    for node in reversed(output.graph.nodes):
        if node is last:
            break
        if node.target is torch._C._set_grad_enabled:  # (every change of mode records one)
            raise Unsupported(f"forward of {fn_var.value.__qualname__} changes grad mode")
        if node.op != "placeholder" and any(_requires_grad_node(arg) for arg in node.all_input_nodes):
            raise Unsupported(f"forward of {fn_var.value.__qualname__} computes with tensors that "
                              f"require grad while no input does")
    return out


def _requires_grad_node(node: torch.fx.Node) -> bool:
    example = node.meta.get("example_value")
    return isinstance(example, torch.Tensor) and example.requires_grad


class _HigherOrderApply:
    """One apply traced into fwd_body and bwd_body, and the higher-order op that calls them."""

    def __init__(self, tx, fn_var: AutogradFunctionVariable, forward: VariableTracker,
                 ctx: AutogradContextVariable, inputs: list[VariableTracker], with_setup_context: bool):
        self.tx, self.fn_var, self.forward, self.ctx = tx, fn_var, forward, ctx
        self.inputs, self.with_setup_context = inputs, with_setup_context
        self.name = fn_var.value.__qualname__

    def trace(self) -> VariableTracker:
        tx = self.tx
        seen: set[torch.fx.Node] = set()
        for vt in self.inputs:
            if isinstance(vt, TensorVariable):
                if vt.node in seen:  # as torch._dynamo 2.13 ("duplicate tensor input")
                    raise Unsupported(f"{self.name}.apply with the same tensor passed twice")
                seen.add(vt.node)
        fwd = SubgraphTracer(tx.output)
        out_items, single = self.trace_forward(fwd)
        # (an output forward did not compute, an argument or a global, is an input of fwd_body)
        out_nodes = [fwd.lift(vt.node) for vt in out_items if isinstance(vt, TensorVariable)]
        bwd = SubgraphTracer(fwd)
        grads = self.trace_backward(bwd, out_items)

        # bwd_body: one gradient per fwd_body input; those after the arguments were read by forward
        # or backward from elsewhere in the frame, and get none. (Nothing is lifted into fwd_body
        # after this.)
        arg_count = sum(isinstance(vt, TensorVariable) for vt in self.inputs)
        grads += [None] * (len(fwd.lifted) - arg_count)
        bwd.graph.output(tuple(grads))
        # fwd_body: its outputs, then what bwd_body reads of it (bwd_body's inputs after the grads).
        saved = list(bwd.lifted)
        fwd.graph.output((tuple(out_nodes), tuple(saved)))

        def fwd_nodes(values: list[VariableTracker]) -> set[torch.fx.Node]:
            return {fwd.lifted.get(vt.node, vt.node) for vt in values if isinstance(vt, TensorVariable)}

        marked, saved_by_ctx = fwd_nodes(self.ctx.non_differentiable), fwd_nodes(self.ctx.saved or [])
        kwargs = {"non_differentiable_idx": [i for i, n in enumerate(out_nodes) if n in marked],
                  "saved_for_backward_idx": [i for i, n in enumerate(saved) if n in saved_by_ctx]}
        dirty = fwd_nodes(self.ctx.dirty)
        if dirty:  # inputs changed in place by forward: autograd rebases their history on apply's
            if not dirty <= set(out_nodes):  # as torch._dynamo 2.13, which breaks there too
                raise Unsupported(f"forward of {self.name} marks dirty an input it does not return")
            kwargs["dirty_idx"] = [i for i, n in enumerate(out_nodes) if n in dirty]
        main = tx.output
        fwd_attr = main.install_subgraph("fwd_body", torch.fx.GraphModule(torch.nn.Module(), fwd.graph))
        bwd_attr = main.install_subgraph("bwd_body", torch.fx.GraphModule(torch.nn.Module(), bwd.graph))
        node = main.create_node("call_function", autograd_function_apply,
                                (fwd_attr, bwd_attr, *fwd.lifted), kwargs)
        results = iter(wrap_node(tx, node).unpack(tx))
        # (the op's outputs keep their `getitem` names, as torch._dynamo leaves them: a store of
        # them to a local does not rename them)
        items = [next(results) if isinstance(vt, TensorVariable) else vt for vt in out_items]
        for item in items:
            if isinstance(item, TensorVariable):
                item.name_hint_set = True
        if dirty:
            # A dirty output is the input itself (eager returns that very object, its history
            # rebased): the input's tracker now stands for the op's output, so `y is x` holds and
            # later uses of x read it after apply.
            arg_of = {fwd.lifted[vt.node]: vt for vt in self.inputs if isinstance(vt, TensorVariable)}
            tensor_items = [i for i, vt in enumerate(out_items) if isinstance(vt, TensorVariable)]
            for index in kwargs["dirty_idx"]:
                arg = arg_of.get(out_nodes[index])
                if arg is not None:
                    position = tensor_items[index]
                    arg.node = items[position].node
                    items[position] = arg
        return items[0] if single else TupleVariable(items)

    def trace_forward(self, fwd: "SubgraphTracer") -> tuple[list[VariableTracker], bool]:
        """Trace forward into `fwd`: its output items, and whether it returned a single value."""
        args = []
        for vt in self.inputs:  # every tensor argument is an input of fwd_body, used or not
            if isinstance(vt, TensorVariable):
                vt = TensorVariable(fwd.lift(vt.node), class_type=vt.class_type)
            args.append(vt)
        _enter_no_grad(fwd)
        side_effects = self.tx.side_effects
        out = _call_forward(self.tx, self.fn_var, self.forward, self.ctx, args, self.with_setup_context, fwd)
        _leave_no_grad(fwd)
        if isinstance(out, TensorVariable):
            items, single = [out], True
        elif isinstance(out, TupleVariable) and type(out) is TupleVariable:
            items, single = list(out.items), False
        else:
            raise Unsupported(f"forward of {self.name} returns a {out!r} (a tensor or a tuple is traced)")
        if not any(isinstance(vt, TensorVariable) for vt in items):
            raise Unsupported(f"forward of {self.name} returns no tensor")
        if not all(isinstance(vt, (TensorVariable, ConstantVariable)) for vt in items):
            raise Unsupported(f"forward of {self.name} returns a value that is neither a tensor nor a constant")
        # Forward's mutations of the frame's objects are replayed after the graph, as for any inlined
        # call; a tensor of fwd_body among them (or stored on an argument) could not be. (Elsewhere,
        # the frame's graph refuses it when it is compiled: graph.check_own_nodes.)
        if _holds_subgraph_tensor([*side_effects.live_values(), *self.inputs], self.tx.output.graph):
            raise Unsupported(f"forward of {self.name} stores a tensor it made outside the function")
        return items, single

    def trace_backward(self, bwd: "SubgraphTracer", out_items: list[VariableTracker]) -> list[torch.fx.Node | None]:
        """Trace backward into `bwd`: one gradient node (or None) per tensor argument of apply."""
        tx = self.tx
        backward = _method(tx, self.fn_var, "backward")
        fn = backward.as_python_constant()
        names = list(inspect.signature(fn).parameters)[1:]
        grads: list[VariableTracker] = []
        for i, vt in enumerate(out_items):
            if isinstance(vt, TensorVariable):  # a fresh tensor like the output (autograd materializes it)
                name = names[i] if i < len(names) and names[i].isidentifier() else f"grad_{i}"
                grads.append(TensorVariable(bwd.placeholder(name, _fake_like(tx.output.fake_mode, vt.example))))
            else:
                grads.append(ConstantVariable(None))
        # The engine runs backward under no_grad, unless `.backward(create_graph=True)` asks for
        # a graph of the backward itself (a gradient penalty differentiates the gradient). So
        # bwd_body is traced under no_grad but records no grad-mode switch, unlike torch._dynamo's
        # (whose `_set_grad_enabled(False)` silently drops that second-order path): it runs in
        # the mode autograd gives it, as eager's backward does.
        bwd.grad_enabled = False
        self.ctx.in_backward = True
        before = _side_effect_state(tx.side_effects)
        try:
            result = tx.inline_call(fn, [self.ctx, *grads], {}, fn_source=backward.source, output=bwd)
        except RaisedException as raised:  # eager raises it in .backward(), not at the apply call
            raise Unsupported(f"backward of {self.name} raises {raised.value.exc_type.__name__}") from None
        finally:
            self.ctx.in_backward = False
        if _side_effect_state(tx.side_effects) != before:  # they would happen at each backward, not here
            raise Unsupported(f"backward of {self.name} mutates objects outside it")

        if type(result) is TupleVariable:
            returned = list(result.items)
        elif isinstance(result, TensorVariable) or _is_none(result):
            returned = [result]
        else:  # eager raises, at backward time ("expected Variable or None")
            raise Unsupported(f"backward of {self.name} returns a {result!r} (a tensor, None or a tuple of them)")
        expected = len(self.inputs)
        if len(returned) > expected and all(_is_none(vt) for vt in returned[expected:]):
            returned = returned[:expected]  # autograd ignores trailing Nones
        if len(returned) != expected:
            raise Unsupported(f"backward of {self.name} returns {len(returned)} gradients for {expected} inputs")
        nodes: list[torch.fx.Node | None] = []
        for arg, grad in zip(self.inputs, returned):
            if not (_is_none(grad) or isinstance(grad, TensorVariable)):
                raise Unsupported(f"backward of {self.name} returns a {grad!r} as a gradient")
            if not isinstance(arg, TensorVariable):
                if not _is_none(grad):  # eager raises: a gradient for an input that is not a tensor
                    raise Unsupported(f"backward of {self.name} returns a gradient for a non-tensor input")
                continue
            nodes.append(None if _is_none(grad) else bwd.lift(grad.node))
        return nodes


def _enter_no_grad(fwd: "SubgraphTracer") -> None:
    """Autograd runs forward under no_grad: the switch is recorded at the top of fwd_body, as
    torch._dynamo records it (and forward's FakeTensors are propagated under it)."""
    if fwd.grad_enabled:
        fwd.record_effect(torch._C._set_grad_enabled, (False,))
        fwd.grad_enabled = False


def _leave_no_grad(fwd: "SubgraphTracer") -> None:
    """...and back to the caller's mode at its end."""
    if fwd.grad_enabled != fwd.initial_grad_enabled:
        fwd.record_effect(torch._C._set_grad_enabled, (fwd.initial_grad_enabled,))
        fwd.grad_enabled = fwd.initial_grad_enabled


def _fake_like(mode, example: torch.Tensor) -> torch.Tensor:
    with mode, torch.no_grad():
        return torch.empty_strided(example.shape, example.stride(), dtype=example.dtype, device=example.device)


def _holds_subgraph_tensor(values: list[VariableTracker], graph: torch.fx.Graph) -> bool:
    stack = list(values)
    while stack:
        vt = stack.pop()
        if isinstance(vt, TensorVariable) and vt.node.graph is not graph:
            return True
        stack.extend(_items(vt))
        if isinstance(vt, NewObjectVariable):
            stack.extend(vt.attrs.values())
    return False


def _side_effect_state(side_effects) -> tuple:
    """What the replay after the graph would do, as comparable data (trackers by identity)."""
    containers = tuple((key, tuple(map(id, _items(vt)))) for key, vt in side_effects.mutated.items())
    stores = tuple((key, tuple((name, id(value)) for name, value in attrs.items()))
                   for key, (_, attrs) in side_effects.stores.items())
    global_stores = tuple((key, tuple((name, id(value)) for name, value in names.items()))
                          for key, (_, names) in side_effects.global_stores.items())
    return containers, stores, global_stores


# -- the graphs of forward and backward ---------------------------------------------------------------

class SubgraphTracer(OutputGraph):
    """The graph of a traced forward or backward, recorded apart from the frame's graph (`parent`:
    the frame's OutputGraph, or for backward, forward's tracer).

    A tensor of an enclosing graph used here (an argument, a tensor read from the frame, one
    forward saved for backward) becomes a placeholder of this graph the first time it is used:
    `lifted` maps the enclosing graph's node to it, in order. Guards and graph inputs are the
    frame's: a tensor read from the frame is an input of the frame's graph, lifted in."""

    def __init__(self, parent: OutputGraph):
        super().__init__(parent.backend, parent.backend_name)
        self.parent = parent
        self.guards = parent.guards
        self._node_keys = parent._node_keys  # one FakeTensor may be a value of both graphs
        # the frame's FakeTensorMode (and ShapeEnv, with dynamic shapes): one set of FakeTensors
        self.symbolic, self.fake_mode, self.shape_env = parent.symbolic, parent.fake_mode, parent.shape_env
        self.fast_propagation, self._sym_exprs = parent.fast_propagation, parent._sym_exprs
        self.shapes, self.data_dependent = parent.shapes, parent.data_dependent
        self.memo, self._memo_state = parent.memo, parent._memo_state
        self.initial_grad_enabled = self.grad_enabled = parent.grad_enabled
        self.autocast_stack = list(parent.autocast_stack)
        self.lifted: dict[torch.fx.Node, torch.fx.Node] = {}

    def placeholder(self, name: str, example: Any) -> torch.fx.Node:
        """A new input of this graph, after the others."""
        last = self._last_placeholder
        with self.graph.inserting_after(last) if last is not None else self.graph.inserting_before(None):
            node = self.graph.placeholder(name)
        self._last_placeholder = node
        node.meta["example_value"] = example
        return node

    def lift(self, node: torch.fx.Node) -> torch.fx.Node:
        """`node` as a node of this graph: itself, or the placeholder standing for it."""
        if node.graph is self.graph:
            return node
        if isinstance(self.parent, SubgraphTracer):
            outer = self.parent.lift(node)
        elif node.graph is self.parent.graph:
            outer = node
        else:
            raise Unsupported(f"a tensor of another traced autograd.Function ({node.name}) is used here")
        inner = self.lifted.get(outer)
        if inner is None:
            inner = self.lifted[outer] = self.placeholder(outer.name.lower(), outer.meta["example_value"])
        return inner

    def add_input(self, source: Source, value: torch.Tensor, module_state: bool = False) -> torch.fx.Node:
        return self.lift(self.parent.add_input(source, value, module_state))

    def create_node(self, op: str, target: Any, args: tuple, kwargs: dict) -> torch.fx.Node:
        return super().create_node(op, target, _map_nodes(args, self.lift), _map_nodes(kwargs, self.lift))

    def install_subgraph(self, prefix: str, gm: torch.fx.GraphModule) -> torch.fx.Node:
        # forward and backward run under no_grad: an apply inside them is inlined, unless it
        # turns grad mode back on
        raise Unsupported("an autograd.Function that needs gradients inside another one's forward or backward")

    def compile(self, outputs):
        raise AssertionError("a subgraph is compiled with the frame's graph")


def _map_nodes(value: Any, fn) -> Any:
    """`value` with every fx node in it replaced by fn(node), containers keeping their types."""
    if isinstance(value, torch.fx.Node):
        return fn(value)
    if type(value) in (tuple, list):
        return type(value)(_map_nodes(v, fn) for v in value)
    if type(value) is dict:
        return {k: _map_nodes(v, fn) for k, v in value.items()}
    if type(value) is slice:
        return slice(_map_nodes(value.start, fn), _map_nodes(value.stop, fn), _map_nodes(value.step, fn))
    return value

"""Tensors in the graph, and the glue that turns calls on symbolic values into fx nodes.

A TensorVariable is an fx node plus its FakeTensor. Under static shapes everything about a tensor
but its data is known while tracing (shape, dtype, device, requires_grad), so `x.shape[0] + 1` is a
constant and `x.size()`, `x.dim()`, `x.numel()` fold away, all covered by the TENSOR_MATCH guard
on the graph input they derive from. Reading the data (`.item()`, a branch on `x.sum() > 0`) needs a
graph break, unless torch._dynamo's flags capture the read (read_values.py).

With dynamic shapes (fake/shapes.py) a size may be a `torch.SymInt`: `x.shape[0]` is then a
SymNodeVariable, the graph's placeholder of that symbol (`s77`) or a `sym_size` node, and Python
arithmetic on it is recorded (`n // 2`, `n * 3`). A branch on it (`if n > 16:`) is decided by its
value on this call, the ShapeEnv keeping the relation as a guard; where a plain int is needed
(`range(n)`, a constant-folded call) it is specialized, guarded to equal its value.
"""
from __future__ import annotations

import operator
import types
from typing import Any, Callable, Sequence

import torch
import torch.fx
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

from ...exc import Unsupported
from ...graph import rename_node
from ...guards import GuardKind
from ...source import AttrSource, Source
from .base import BoundMethodVariable, VariableTracker
from .constant import ConstantVariable, is_constant_value, is_numpy_scalar, python_scalar
from .dicts import DictVariable
from .lists import BaseListVariable, ListVariable, SizeVariable, TupleVariable
from .namedtuples import NamedTupleVariable
from . import torch_function_modes

# Tensor attributes and no-argument methods whose value is metadata, known while tracing.
_METADATA_ATTRS = {"dtype", "device", "layout", "ndim", "requires_grad", "is_cuda", "is_cpu", "is_meta",
                   "is_sparse", "is_quantized", "is_mkldnn", "is_nested", "is_leaf", "itemsize", "nbytes"}
# Of those, the ones torch._dynamo has no rule for: it records `getattr(x, name)` in the graph (and
# takes the value from its example), a node nothing uses; pyframe records it too.
_RECORDED_METADATA_ATTRS = {"is_cpu", "is_meta", "is_mkldnn", "is_leaf", "itemsize", "nbytes"}
_METADATA_METHODS = {"dim", "ndimension", "numel", "nelement", "is_contiguous", "is_floating_point",
                     "is_complex", "is_signed", "element_size", "get_device", "stride", "storage_offset",
                     "is_inference"}
# Methods that read tensor data into Python: a graph break (as torch._dynamo does by default).
_DATA_METHODS = {"item", "tolist", "numpy", "__bool__", "__int__", "__float__", "__index__", "data_ptr"}
# Autograd's own machinery runs outside the graph (torch._dynamo breaks on these too).
_AUTOGRAD_METHODS = {"backward", "register_hook", "retain_grad", "register_post_accumulate_grad_hook"}


# The key of a symbolic float's node meta holding the 0-d tensor node the graph hands it back as.
FLOAT_OUTPUT = "pyframe_float_output"

# `x.item()` and `x.tolist()` with scalar outputs captured: set by read_values.py (above this module)
_DATA_READERS: dict[str, Callable] = {}


def register_data_reader(name: str, read: Callable) -> None:
    _DATA_READERS[name] = read


# `y.register_hook(fn)` on a tensor the graph makes, traced as the register_hook op: set by
# tensor_hooks.py (it traces the hook with autograd_function.py's SubgraphTracer, above this module)
_HOOK_TRACERS: list[Any] = []


def register_hook_tracer(trace: Any) -> None:
    _HOOK_TRACERS.append(trace)


# `x.numpy()`: the array over x's memory, traced as torch._dynamo traces it (set by ndarray.py,
# whose NdarrayVariable is a kind of TensorVariable, above this module)
_NUMPY_VIEWS: list[Any] = []


def register_numpy_view(make: Any) -> None:
    _NUMPY_VIEWS.append(make)


def _is_python_function(vt: VariableTracker) -> bool:
    try:
        return vt.python_type() is types.FunctionType
    except Unsupported:
        return False


def _requires_grad_in_graph(tx, tensor: "TensorVariable") -> "TensorVariable":
    """`t.requires_grad_()` on a tensor the graph made (a leaf that requires no grad), recorded as
    torch._dynamo 2.13 records it: between two calls that let functorch allow it in place. The
    tensor becomes a leaf that requires grad; if it, or a tensor made from it that requires grad,
    would be an output of the graph (whose compilation would drop the flag), the frame is traced
    again with a break at this call instead (finish.py, `check_requires_grad_leaks`)."""
    allowed = torch._C._functorch.set_inplace_requires_grad_allowed
    graph = tx.output.graph
    previous = torch._C._functorch.get_inplace_requires_grad_allowed()
    for op, target, args in (("call_function", allowed, (True,)), ("call_method", "requires_grad_", (tensor.node,)),
                             ("call_function", allowed, (previous,))):
        node = graph.create_node(op, target, args, {})
        node.meta["example_value"] = None  # (run for its effect: no value, and kept unused)
        node.meta["kept_unused"] = True
    allowed(True)
    try:
        tensor.example.requires_grad_(True)
    finally:
        allowed(previous)
    tx.output._node_keys.pop(tensor.node, None)  # (its memo key holds requires_grad: read again)
    tx.output.requires_grad_taints.append((tensor.node, tx.root.ip - 1))
    return tensor


class HookHandleVariable(VariableTracker):
    """What `x.register_hook(fn)` returns in the trace (the hook itself is registered after the
    graph, side_effects.py): the real handle exists only then, so a use of it (`h.remove()`, the
    handle kept or returned) traces the frame again, breaking at the registration instead."""

    def __init__(self, made_at: int):
        super().__init__()
        self.made_at = made_at  # the compiled frame's instruction that registered it

    def _used(self) -> Unsupported:
        e = Unsupported("the handle of a hook registered on a tensor passed in is used")
        e.break_index = self.made_at
        return e

    def var_getattr(self, tx, name: str) -> VariableTracker:
        raise self._used()

    def call_method(self, tx, name, args, kwargs) -> VariableTracker:
        raise self._used()

    def reconstruct(self, cg) -> None:
        raise self._used()

    def describe(self) -> str:
        return "the handle of a hook registered in the trace"


class SymNodeVariable(VariableTracker):
    """A symbolic int, bool or float of a graph with dynamic shapes: an fx node whose example
    value is a torch.SymInt (SymBool, SymFloat) of the trace's ShapeEnv."""

    def __init__(self, node: torch.fx.Node, source: Source | None = None):
        super().__init__(source)
        self.node = node

    @property
    def example(self) -> Any:
        return self.node.meta["example_value"]

    def python_type(self) -> type:
        return {torch.SymInt: int, torch.SymBool: bool, torch.SymFloat: float}[type(self.example)]

    is_symbolic = True

    def is_python_constant(self) -> bool:
        # ... at the price of a guard (see as_python_constant); never a value read from a tensor
        return not free_unbacked_symbols(self.example)

    def as_python_constant(self) -> Any:
        """Its value on this call, specialized: the ShapeEnv guards that it stays this value. A
        value read from a tensor has none while tracing: Unsupported (a graph break)."""
        if free_unbacked_symbols(self.example):
            raise Unsupported("a value read from a tensor (Tensor.item()) used as a Python constant")
        return self.python_type()(self.example)

    def truth(self) -> bool:
        """`if n > 16:`: decided on this call's sizes; the ShapeEnv guards the relation. A value
        read from a tensor (`Tensor.item()` captured) has no size to decide it: the branch breaks
        the graph, as a branch on a tensor's data does."""
        if free_unbacked_symbols(self.example):
            raise Unsupported("a branch on a value read from a tensor (Tensor.item()) is data-dependent")
        return bool(self.example)

    def call_method(self, tx, name: str, args: Sequence[VariableTracker],
                    kwargs: dict[str, VariableTracker]) -> VariableTracker:
        if name in ("__index__", "__int__") and not args and not kwargs:
            return ConstantVariable(self.as_python_constant())
        return ConstantVariable(self.as_python_constant()).call_method(tx, name, args, kwargs)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        return ConstantVariable(self.as_python_constant()).var_getattr(tx, name)

    def reconstruct(self, cg) -> None:
        as_tensor = self.node.meta.get(FLOAT_OUTPUT)
        if as_tensor is not None:  # (a float handed back as a 0-d tensor, `float_outputs_as_tensors`)
            cg.load_tensor(TensorVariable(as_tensor))
            cg.emit("LOAD_METHOD", "item")
            cg.call(0)
            return
        cg.load_tensor(self)  # a graph output kept in a temporary, or the size's source

    def describe(self) -> str:
        if free_unbacked_symbols(self.example):
            return f"a value read from a tensor ({self.example})"
        return f"a size ({self.example}) of a graph with dynamic shapes"

    def __repr__(self) -> str:
        return f"SymNodeVariable({self.node.name}: {self.example})"


class SymSliceVariable(VariableTracker):
    """`slice(None, n // 2)` with a symbolic bound: indexing a tensor with it stays symbolic
    (`l_y_[slice(None, floordiv, None)]`); anything else specializes its bounds."""

    def __init__(self, parts: Sequence[VariableTracker]):
        super().__init__()
        self.parts = list(parts)

    def python_type(self) -> type:
        return slice

    def as_python_constant(self) -> Any:
        return slice(*(p.as_python_constant() for p in self.parts))

    def reconstruct(self, cg) -> None:
        cg.push_null()
        cg.load_const(slice)
        for p in self.parts:
            p.reconstruct(cg)
        cg.call(len(self.parts))

    def describe(self) -> str:
        return "a slice with a symbolic bound"


def sym_operation(tx, fn: Any, args: Sequence[VariableTracker]) -> VariableTracker | None:
    """`fn(*args)` on sizes, where one of them is symbolic and the others are numbers: recorded as
    torch._dynamo records it (`floordiv = s77 // 2`). None for what is no such call."""
    if not any(isinstance(a, SymNodeVariable) for a in args):
        return None
    if not all(isinstance(a, SymNodeVariable) or (isinstance(a, ConstantVariable) and type(a.value) in (int, float, bool))
               for a in args):
        return None
    node_args = tuple(a.node if isinstance(a, SymNodeVariable) else a.value for a in args)
    return wrap_node(tx, tx.output.create_node("call_function", fn, node_args, {}))


def symbolic_metadata(tx, value: Any, compute: Callable[[], tuple]) -> VariableTracker:
    """A tensor's size, stride or numel: a constant where static; where symbolic, the node that
    already computes that expression (the placeholder `s77` of `x.shape[0]`), else the node
    `compute()` gives (op, target, args)."""
    if type(value) is int:
        return ConstantVariable(value)
    known = tx.output.sym_node(value)
    if known is not None:
        return SymNodeVariable(known, known.meta.get("source"))
    return wrap_node(tx, tx.output.create_node(*compute(), {}))


def size_item(tx, tensor: "TensorVariable", dim: int) -> VariableTracker:
    """`x.shape[dim]` (symbolic where not found: `torch.ops.aten.sym_size.int(x, dim)`; a size read
    from the data, `x.size(dim)`, which the runtime-assert pass gives the node binding it, as
    torch._dynamo's graphs have it: fake/unbacked.py)."""
    size = tensor.example.shape[dim]
    if tx.output.data_dependent and type(size) is not int and free_unbacked_symbols(size):  # (none made: none)
        return symbolic_metadata(tx, size, lambda: ("call_method", "size", (tensor.node, dim)))
    return symbolic_metadata(tx, size, lambda: ("call_function", torch.ops.aten.sym_size.int, (tensor.node, dim)))


def _sizes(tx, tensor: "TensorVariable", values: Sequence[Any]) -> list[VariableTracker]:
    """The items of `x.shape`/`x.size()` (values: the FakeTensor's sizes)."""
    if all(type(n) is int for n in values):
        return [ConstantVariable(n) for n in values]
    return [size_item(tx, tensor, d) for d in range(len(values))]


class TensorVariable(VariableTracker):
    def __init__(self, node: torch.fx.Node, source: Source | None = None, class_type: type = torch.Tensor):
        super().__init__(source)
        self.node = node
        self.class_type = class_type
        self.name_hint_set = node.op == "placeholder"

    @property
    def example(self) -> torch.Tensor:
        return self.node.meta["example_value"]

    def python_type(self) -> type:
        return self.class_type

    def identity(self) -> Any:
        # One FakeTensor per real input (however many sources read it), and what an op gives back
        # of its input unchanged (`x.to(x.dtype)`, in-place ops) is that input's FakeTensor.
        return self.example

    def set_name_hint(self, name: str) -> None:
        """Name the node after the local it is first stored to (`a = torch.cos(x)` -> node `a`)."""
        if not self.name_hint_set:
            rename_node(self.node, name)
            self.name_hint_set = True

    def truth(self) -> bool:
        raise Unsupported("data-dependent branch on a tensor")

    def realize(self, tx) -> None:
        """The trace looks at this tensor (an attribute, a method, `is None`): where torch._dynamo
        realizes a lazy graph input (see graph_inputs.order_inputs_as_dynamo)."""
        if self.node.op == "placeholder":
            tx.output.realize(self.node)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        self.realize(tx)
        if name in ("shape",):
            return SizeVariable(_sizes(tx, self, self.example.shape))
        if name in _METADATA_ATTRS:
            value = getattr(self.example, name)
            if name in _RECORDED_METADATA_ATTRS:
                tx.output.record_metadata_read(self.node, name, value)
            return ConstantVariable(value)
        if callable(getattr(torch.Tensor, name, None)):
            return BoundMethodVariable(self, name)
        if name in ("T", "mT", "H", "mH", "real", "imag"):
            result = wrap_node(tx, tx.output.create_node("call_function", getattr, (self.node, name), {}))
            if self.source is not None:
                # As torch._dynamo's: a view read of a tensor the frame can reach is reached the same
                # way after the graph (`x.mT` read again), not handed out of the graph.
                result.source = AttrSource(self.source, name)
            return result
        stored = tx.side_effects.load_attr(self, name)
        if stored is not None:  # `x.tag = ...` earlier in the trace
            return stored
        graph_input = tx.output.input_of(self.example)
        if graph_input is not None and not hasattr(self.class_type, name) \
                and name in getattr(graph_input.example, "__dict__", {}):
            # a Python attribute of an input (`p.scale = 2.0` on a Parameter): read, guarded
            return tx.wrap(graph_input.example.__dict__[name], AttrSource(graph_input.source, name))
        if name == "grad" and graph_input is None and self.example.grad_fn is None \
                and self.class_type in (torch.Tensor, torch.nn.Parameter):
            # A leaf the graph made: no backward ran since (Tensor.backward breaks the graph) and
            # `.grad =` is not traced, so it has none, as torch._dynamo answers too
            return ConstantVariable(None)
        raise Unsupported(f"tensor attribute {name!r}")

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        """`x.tag = value`: a Python attribute of the tensor object, recorded and replayed after the
        graph (on the input, or on the tensor the graph gives back). Tensor's own attributes
        (`requires_grad`, `data`, `grad`...) have meanings of their own: not traced."""
        if hasattr(self.class_type, name):
            raise Unsupported(f"assignment to the tensor attribute {name!r}")
        self.realize(tx)
        tx.side_effects.store_attr(self, name, value)

    def has_attr(self, tx, name: str) -> bool:
        """hasattr(x, name): the class's attributes (its type is guarded by TENSOR_MATCH); a Python
        attribute of an input tensor, which may be set after compiling (`x.scale = 3.0`), is
        guarded either way; a tensor the graph makes has none. (Never the FakeTensor's: it has
        attributes of its own, and none of the real tensor's.)"""
        if hasattr(self.class_type, name) or tx.side_effects.load_attr(self, name) is not None:
            return True
        graph_input = tx.output.input_of(self.example)
        if graph_input is None:
            return False
        answer = hasattr(graph_input.example, name)
        tx.output.guards.add(AttrSource(graph_input.source, name), GuardKind.HASATTR_MATCH, answer)
        return answer

    def call_method(self, tx, name: str, args: Sequence[VariableTracker],
                    kwargs: dict[str, VariableTracker]) -> VariableTracker:
        self.realize(tx)
        if name in _DATA_READERS and not args and not kwargs and tx.output.shapes.scalar_outputs:
            return _DATA_READERS[name](tx, self)
        if name == "numpy" and _NUMPY_VIEWS and not args and set(kwargs) <= {"force"}:
            return _NUMPY_VIEWS[0](tx, self, kwargs.get("force"))
        if name in _DATA_METHODS:  # as torch._dynamo by default (capture_scalar_outputs off)
            raise Unsupported(f"Tensor.{name}() reads tensor data into Python")
        if name == "register_hook" and len(args) == 1 and not kwargs and self.node.op == "placeholder" \
                and _is_python_function(args[0]):
            # on a tensor passed in: registered after the graph, as torch._dynamo does (the hook
            # fires in backward, which runs after the frame); its handle is not modelled
            tx.side_effects.register_hook(self, args[0])
            return HookHandleVariable(tx.root.ip - 1)
        if name == "register_hook" and len(args) == 1 and not kwargs and _HOOK_TRACERS \
                and _is_python_function(args[0]):
            return _HOOK_TRACERS[0](tx, self, args[0])  # on a tensor the graph made (tensor_hooks.py)
        if name in _AUTOGRAD_METHODS:
            raise Unsupported(f"Tensor.{name}() runs autograd outside the graph")
        if name == "requires_grad_":
            # As torch._dynamo 2.13: a no-op when the flag is already what is asked (transformers'
            # enable_input_require_grads hook on an embedding's output in training), recorded by no
            # node; changing it on a tensor of the graph is a graph break.
            flag = (args[0] if args else kwargs.get("requires_grad", ConstantVariable(True)))
            if not flag.is_python_constant() or len(args) + len(kwargs) > 1:
                raise Unsupported("Tensor.requires_grad_() with a flag that is not a constant")
            if bool(flag.as_python_constant()) == self.example.requires_grad:
                return self
            if flag.as_python_constant() and self.node.op != "placeholder" and self.node.graph is tx.output.graph \
                    and getattr(tx.output, "parent", None) is None:
                return _requires_grad_in_graph(tx, self)
            raise Unsupported("Tensor.requires_grad_() changes requires_grad of a tensor of the graph")
        if name == "__getitem__" and len(args) == 1 and not kwargs:  # `x[i]`, recorded as torch._dynamo records it
            if isinstance(args[0], SymNodeVariable) and args[0].python_type() is int:
                return call_in_graph(tx, "call_function", torch.select, [self, ConstantVariable(0), args[0]], {})
            return call_in_graph(tx, "call_function", operator.getitem, [self, python_scalar(args[0])], {})
        if name == "size" and tx.output.symbolic and not kwargs and len(args) <= 1:
            if not args:
                return SizeVariable(_sizes(tx, self, self.example.shape))
            dim = args[0].as_python_constant()
            return size_item(tx, self, dim if dim >= 0 else dim + self.example.dim())
        if name == "stride" and tx.output.symbolic and not kwargs and len(args) <= 1:
            strides = self.example.stride()
            dims = range(len(strides)) if not args else [args[0].as_python_constant() % max(len(strides), 1)]
            items = [symbolic_metadata(tx, strides[d], lambda d=d: ("call_function", torch.ops.aten.sym_stride.int,
                                                                     (self.node, d))) for d in dims]
            return TupleVariable(items) if not args else items[0]
        if name == "numel" and tx.output.symbolic and not args and not kwargs:
            return symbolic_metadata(tx, self.example.numel(), lambda: ("call_method", "numel", (self.node,)))
        if name in ("size", "stride") or name in _METADATA_METHODS:
            if name == "storage_offset":  # folded: not covered by TENSOR_MATCH unless asked for
                tx.output.guards.storage_offsets_read = True
            pargs = [a.as_python_constant() for a in args]
            pkwargs = {k: v.as_python_constant() for k, v in kwargs.items()}
            value = getattr(self.example, name)(*pargs, **pkwargs)
            if tx.output.symbolic:  # (numel(), a stride: specialized to this call's value, guarded)
                value = _specialized(value)
            if isinstance(value, tuple):  # x.size(): a torch.Size; x.stride(): a plain tuple
                items = [ConstantVariable(d) for d in value]
                return SizeVariable(items) if isinstance(value, torch.Size) else TupleVariable(items)
            return ConstantVariable(value)
        if name == "__len__":
            if tx.output.symbolic and self.example.dim() > 0:
                return size_item(tx, self, 0)
            return ConstantVariable(len(self.example))
        if name == "type" and not args and not kwargs:
            return ConstantVariable(self.example.type())
        if name == "new" and _is_size_request(args):
            # x.new(torch.Size) / x.new(2, 3) make an uninitialized tensor of that size; the graph's
            # code would print the Size as a plain tuple, which `new` reads as data: new_empty,
            # its sizes as given (`x.new_empty(2, 3)`), as torch._dynamo records it.
            name, args = "new_empty", list(args)
        result = call_in_graph(tx, "call_method", name, [self, *args], kwargs)
        if is_inplace_method(name):
            return self.inplace_result(result)
        return result

    def inplace_result(self, result: VariableTracker) -> VariableTracker:
        """What `x.add_(1)` (or `x += 1`) gives back: x itself, mutated. As torch._dynamo tracks
        it, a tracker of its own for the op's node (a later `y = x.add_(1)` names that node `y`,
        and reads of y use it), the same tensor as x: same FakeTensor (its identity), same class."""
        if isinstance(result, TensorVariable) and result.example is self.example:
            result.class_type = self.class_type
            return result
        return self

    def unpack(self, tx) -> list[VariableTracker]:
        if self.example.dim() == 0:
            raise Unsupported("iteration over a 0-d tensor")
        return [wrap_node(tx, tx.output.create_node("call_function", operator.getitem, (self.node, i), {}))
                for i in range(int(self.example.shape[0]))]

    def reconstruct(self, cg) -> None:
        cg.load_tensor(self)

    def describe(self) -> str:
        return "a tensor"

    def __repr__(self) -> str:
        return f"TensorVariable({self.node.name})"


def _specialized(value: Any) -> Any:
    """A symbolic int (or a tuple of them) as its value on this call, guarded to stay it."""
    if isinstance(value, tuple):
        return type(value)(_specialized(v) for v in value)
    return int(value) if isinstance(value, torch.SymInt) else value


def _is_size_request(args: Sequence[VariableTracker]) -> bool:
    if len(args) == 1 and isinstance(args[0], SizeVariable):
        return True
    return bool(args) and all(a.is_python_constant() and type(a.as_python_constant()) is int for a in args)


def is_inplace_method(name: str) -> bool:
    """torch's convention: a trailing underscore marks the in-place variant (add_, relu_)."""
    return name.endswith("_") and not name.endswith("__")


def as_node_arg(vt: VariableTracker) -> Any:
    """An argument of an fx node: nodes for tensors, plain values for constants, nested as given."""
    if isinstance(vt, (TensorVariable, SymNodeVariable)):
        return vt.node
    if isinstance(vt, SymSliceVariable):
        return slice(*(as_node_arg(p) for p in vt.parts))
    if isinstance(vt, SizeVariable):
        if any(isinstance(v, SymNodeVariable) for v in vt.items):
            return tuple(as_node_arg(v) for v in vt.items)
        return torch.Size(vt.as_python_constant())
    if isinstance(vt, BaseListVariable):
        return vt.container_type(as_node_arg(v) for v in vt.items)
    if isinstance(vt, DictVariable):
        return {k: as_node_arg(v) for k, v in vt.items.items()}
    if vt.is_python_constant():
        value = vt.as_python_constant()
        if is_numpy_scalar(value):  # an fx graph's code cannot name it; torch functions may
            raise Unsupported(f"a NumPy scalar ({value!r}) passed to a tensor operation")  # read its dtype
        if is_constant_value(value):
            return _plain_number(value)
        if isinstance(value, (list, dict)):
            return value
    scalar = vt.builtin_scalar()  # (an instance of an int subclass: torch reads the int)
    if scalar is not None:
        return _plain_number(scalar)
    known = vt.real_object()
    if type(known) is type and known in _SCALAR_TYPE_DTYPES:
        # `x.to(int)`, `torch.zeros(n, dtype=float)`: torch reads Python's scalar types as these
        # dtypes; the graph names the dtype, as torch._dynamo's does (fx cannot print the class)
        return _SCALAR_TYPE_DTYPES[known]
    raise Unsupported(f"a {vt!r} passed to a tensor operation")


_SCALAR_TYPE_DTYPES = {int: torch.int64, float: torch.float64, bool: torch.bool, complex: torch.complex128}


def _plain_number(value: Any) -> Any:
    """A constant as an argument of the graph: a number of a subclass of int or float (an IntEnum
    member) as the plain number torch reads it as, which the graph's code writes (`x * 2`, not
    `x * Color.G`), as torch._dynamo writes it; inside tuples too."""
    kind = type(value)
    if kind is tuple:
        return tuple(_plain_number(v) for v in value)
    if kind is not int and kind is not bool and isinstance(value, int):
        return int(value)
    if kind is not float and isinstance(value, float):
        return float(value)
    return value


def call_in_graph(tx, op: str, target: Any, args: Sequence[VariableTracker],
                  kwargs: dict[str, VariableTracker]) -> VariableTracker:
    """Record `target(*args, **kwargs)` in the graph and wrap what it returns (through the
    __torch_function__ of a torch function mode the trace entered, where eager would call it)."""
    if tx.output.torch_function_modes:
        for arg in (*args, *kwargs.values()):  # looked at in the order the call takes them
            for item in (arg.items if isinstance(arg, BaseListVariable) else (arg,)):
                if isinstance(item, TensorVariable):
                    item.realize(tx)
        pattern = tuple(isinstance(a, TensorVariable) for a in args)
        routed = torch_function_modes.call_through_mode(tx, op, target, list(args), dict(kwargs), pattern)
        if routed is not None:
            return routed
    node_args = tuple(as_node_arg(a) for a in args)
    node_kwargs = {k: as_node_arg(v) for k, v in kwargs.items()}
    result = wrap_node(tx, tx.output.create_node(op, target, node_args, node_kwargs))
    subclass = _result_subclass((*args, *kwargs.values()))
    if subclass is not None:
        for vt in (result.items if isinstance(result, BaseListVariable) else (result,)):
            if isinstance(vt, TensorVariable) and not issubclass(vt.class_type, subclass):
                vt.class_type = subclass
    return result


_DEFAULT_TORCH_FUNCTION = torch.Tensor.__torch_function__.__func__  # (a classmethod: compared unbound)


def _result_subclass(args: Sequence[VariableTracker]) -> type | None:
    """The class torch.Tensor.__torch_function__ gives the tensors an operation returns when an
    argument is an instance of a tensor subclass that keeps that default (`class MyT(Tensor)`):
    the most derived such class among the arguments (the one torch's dispatch asks first), into
    which its `_convert` turns every plain Tensor result. None when no argument is one
    (nn.Parameter disables __torch_function__: its results are plain tensors)."""
    chosen = None
    for vt in args:
        items = vt.items if isinstance(vt, BaseListVariable) else (vt,)
        for item in items:
            if not isinstance(item, TensorVariable):
                continue
            cls = item.class_type
            if cls is torch.Tensor or getattr(cls.__torch_function__, "__func__", None) is not _DEFAULT_TORCH_FUNCTION:
                continue
            if chosen is None or issubclass(cls, chosen):
                chosen = cls
    return chosen


def wrap_node(tx, node: torch.fx.Node) -> VariableTracker:
    """The symbolic value of a node, from its example value."""
    example = node.meta["example_value"]
    if isinstance(example, torch.Tensor):
        return TensorVariable(node)
    if isinstance(example, (torch.SymInt, torch.SymBool, torch.SymFloat)):
        constant = example.node.maybe_as_int() if isinstance(example, torch.SymInt) else None
        if constant is not None or (isinstance(example, torch.SymBool) and example.node.maybe_as_bool() is not None):
            tx.output.graph.erase_node(node)  # (`s77 * 0`: known while tracing)
            return ConstantVariable(constant if constant is not None else example.node.maybe_as_bool())
        known = tx.output.sym_node(example)
        if known is not None and not node.users:  # (`n + 0` is n: the node that computes it, as Dynamo finds it)
            tx.output.graph.erase_node(node)
            return SymNodeVariable(known, known.meta.get("source"))
        tx.output.remember_sym(node)
        return SymNodeVariable(node)
    if isinstance(example, torch.Size):
        if not all(type(d) is int for d in example):
            return SizeVariable([wrap_node(tx, tx.output.getitem(node, i)) for i in range(len(example))])
        tx.output.graph.erase_node(node)
        return SizeVariable([ConstantVariable(d) for d in example])
    if isinstance(example, (tuple, list)) and all(isinstance(e, torch.Tensor) or e is None for e in example):
        # (out, None) from F.multi_head_attention_forward(need_weights=False), and the like
        items = [TensorVariable(tx.output.getitem(node, i)) if e is not None else ConstantVariable(None)
                 for i, e in enumerate(example)]
        if isinstance(example, list):
            return ListVariable(items)
        if type(example) is not tuple:  # torch.return_types.max and friends
            return NamedTupleVariable(items, type(example))
        return TupleVariable(items)
    if example is None:  # an operation run for its effect (setitem, backward, ...): it stays
        return ConstantVariable(None)
    raise Unsupported(f"a tensor operation returned a {type(example).__name__}")

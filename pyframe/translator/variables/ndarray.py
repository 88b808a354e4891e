"""NumPy arrays in the graph: an array the trace follows is a tensor node, its NumPy code recorded.

torch._dynamo traces NumPy code on arrays made from tensors through `torch._numpy` (NumPy's API
over torch tensors); pyframe does the same, recording the calls of numpy_ops.py:

- `x.numpy()` on a tensor of the graph is `x.view_as(x)`, a tensor the trace holds as an array (an
  `NdarrayVariable`: a TensorVariable whose Python type is `np.ndarray`); a NumPy array passed to
  the frame is a graph input, the tensor over its memory (builder.py: guarded by its type, dtype,
  shape and strides; `L_a_ : torch.Tensor` in the graph);
- a NumPy function or ufunc called on arrays or tensors (`np.sin(a)`, `np.where(m, a, 0.0)`,
  `np.concatenate([a, b])`) is a call of its torch._numpy counterpart (`wrapped_sin`); NumPy's
  methods (`a.reshape(2, 6)`, `a.sum(axis=0)`) and operators (`a + 1`, `a @ b`, `a > 0`, `a[1:]`,
  `a += 1`, `a[0] = v`) likewise; `a.T` reads the attribute through `numpy_attr_wrapper`; `a.shape`,
  `a.ndim`, `a.size` are constants;
- an operator between an array and a tensor is the tensor's (eager gives a tensor: the array
  defers to it), and torch functions take an array as its tensor (`torch.from_numpy(a)` and
  `torch.as_tensor(a)` are `torch.as_tensor` of it, as torch._dynamo records them);
- an array the frame hands back to Python (returned, live across a break) is a graph output made an
  array again after the graph (numpy_ops.to_numpy), or the NumPy scalar NumPy would have given
  where the value is one (a reduction, an element: `scalar`).

What is not modelled is a graph break with its reason, never a different result: reading the data
(`a.tolist()`, `float(a)`, a branch on it), `a.dtype`, `a.flags`, `a.base` (as torch._dynamo), NumPy
functions without a torch._numpy counterpart, `numpy.random` (it draws from NumPy's own generator),
NumPy scalars as operands (NumPy types them strongly; the graph cannot), iterating an array.
"""
from __future__ import annotations

import operator
import sys
from typing import Any, Sequence

import torch

from ...exc import Unsupported
from ...source import NumpyTensorSource, Source
from .base import BoundMethodVariable, VariableTracker
from .constant import ConstantVariable, is_numpy_scalar
from .lists import BaseListVariable, ListVariable, TupleVariable
from .numpy_eager import UNKNOWN, dtype_differs, eager_result, is_numpy_scalar_result
from .numpy_ops import NumpyFunctionCall, NumpyMethodCall, NumpyOperatorCall, numpy_attr_wrapper, tnp, to_numpy, \
    to_numpy_scalar
from .tensor import TensorVariable, as_node_arg, register_numpy_view

# Attributes that are arrays, read through numpy_attr_wrapper (as torch._dynamo reads them).
_ARRAY_ATTRS = frozenset({"T", "real", "imag"})
# Attributes torch._dynamo does not trace: a graph break there too.
_UNTRACED_ATTRS = frozenset({"dtype", "base", "flags", "flat", "strides", "ctypes", "data", "__array_interface__"})
# Methods that hand the array's data to Python, or that torch._numpy does not model.
_DATA_METHODS = frozenset({"tolist", "item", "tobytes", "tostring", "tofile", "dump", "dumps", "__bool__",
                           "__int__", "__float__", "__index__", "__complex__", "__iter__", "__array__",
                           "__delattr__", "__reduce__", "__reduce_ex__", "__deepcopy__", "__copy__", "__format__",
                           "__repr__", "__str__", "__hash__", "__contains__", "__buffer__", "__dlpack__"})
# Calls whose 0-d result NumPy gives as an array: everything else (ufuncs, reductions, operators,
# an element) gives a 0-d result as a NumPy scalar (`a.sum()` is an np.float32).
_ARRAY_PRESERVING = frozenset({"array", "asarray", "asanyarray", "ascontiguousarray", "asfortranarray", "copy",
                               "reshape", "squeeze", "astype", "view", "transpose", "swapaxes", "moveaxis",
                               "broadcast_to", "empty_like", "zeros_like", "ones_like", "full_like", "empty",
                               "zeros", "ones", "full", "__setitem__", "T", "real", "imag", "fill"})
# Python's operators on arrays, recorded as NumPy's (NumpyOperatorCall).
_OPERATORS = frozenset({
    operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv, operator.mod, operator.pow,
    operator.matmul, operator.and_, operator.or_, operator.xor, operator.lshift, operator.rshift,
    operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ifloordiv, operator.imod,
    operator.ipow, operator.imatmul, operator.iand, operator.ior, operator.ixor, operator.ilshift, operator.irshift,
    operator.lt, operator.le, operator.eq, operator.ne, operator.gt, operator.ge,
    operator.neg, operator.pos, operator.invert, operator.abs, operator.getitem,
})
# NumPy's modules and their torch._numpy counterparts, by name (numpy.random has one, which draws
# from torch's generator, not NumPy's: left out, its calls break the graph).
_COUNTERPART_MODULES = (("numpy", ""), ("numpy.linalg", "linalg"), ("numpy.fft", "fft"))


class NdarrayVariable(TensorVariable):
    """A NumPy array of the traced frame, backed by the tensor node it is in the graph. `scalar`:
    eager NumPy holds this 0-d value as a NumPy scalar (np.float32), not as an array."""

    def __init__(self, node: torch.fx.Node, source: Source | None = None, scalar: bool = False):
        super().__init__(node, source)
        self.scalar = scalar

    def python_type(self) -> type:
        numpy = sys.modules["numpy"]
        if self.scalar:
            return numpy.dtype(str(self.example.dtype).removeprefix("torch.")).type
        return numpy.ndarray

    def truth(self) -> bool:
        raise Unsupported("a branch on the data of a numpy.ndarray")

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name in _ARRAY_ATTRS:
            return _record(tx, numpy_attr_wrapper, [self, ConstantVariable(name)], {}, name,
                           lambda a, k: getattr(a[0], name))
        if name in ("ndim", "size", "shape", "itemsize", "nbytes"):
            example = tnp().ndarray(self.example)
            value = getattr(example, name)
            values = value if isinstance(value, tuple) else (value,)
            if not all(type(v) is int for v in values):
                raise Unsupported(f"numpy.ndarray.{name} of an array with symbolic sizes")
            return tx.wrap_constant(tuple(int(v) for v in value) if isinstance(value, tuple) else int(value))
        if name in _UNTRACED_ATTRS or name.startswith("__array"):
            raise Unsupported(f"numpy.ndarray.{name} is not traced (as torch._dynamo)")
        if callable(getattr(sys.modules["numpy"].ndarray, name, None)):
            return BoundMethodVariable(self, name)
        raise Unsupported(f"numpy.ndarray attribute {name!r}")

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        raise Unsupported(f"assignment to numpy.ndarray.{name}")

    def has_attr(self, tx, name: str) -> bool:
        return hasattr(self.python_type(), name)

    def call_method(self, tx, name: str, args: Sequence[VariableTracker],
                    kwargs: dict[str, VariableTracker]) -> VariableTracker:
        if name in _DATA_METHODS:
            raise Unsupported(f"numpy.ndarray.{name}() reads the array's data into Python")
        if name == "__len__" and not args and not kwargs:
            if self.example.dim() == 0:
                raise Unsupported("len() of a 0-d numpy.ndarray")
            return ConstantVariable(int(self.example.shape[0]))
        if name == "astype" and _asks_for_objects(args, kwargs):
            raise Unsupported("numpy.ndarray.astype(object): no tensor holds Python objects")
        if name == "clip":  # (NumPy's old keyword names, torch._numpy's new ones)
            kwargs = {{"a_min": "min", "a_max": "max"}.get(k, k): v for k, v in kwargs.items()}
        if name == "__getitem__" and len(args) == 1 and not kwargs:
            return ndarray_operator(tx, operator.getitem, [self, args[0]])
        return _record(tx, NumpyMethodCall(name), [self, *args], kwargs, name,
                       lambda a, k: getattr(a[0], name)(*a[1:], **k))

    def unpack(self, tx) -> list[VariableTracker]:
        """`for row in a`: its rows (elements of a 1-d array: NumPy scalars), each `a[i]` recorded
        as torch._dynamo records it (a plain getitem of the tensor)."""
        if self.example.dim() == 0:
            raise Unsupported("iteration over a 0-d numpy.ndarray")
        if type(self.example.shape[0]) is not int:
            raise Unsupported("iteration over a numpy.ndarray of a symbolic length")
        return [NdarrayVariable(tx.output.create_node("call_function", operator.getitem, (self.node, i), {}),
                                scalar=self.example.dim() == 1)
                for i in range(self.example.shape[0])]

    def reconstruct(self, cg) -> None:
        source = self.source
        if isinstance(source, NumpyTensorSource) and self.node.op == "placeholder":
            cg.load_source(source.base)  # the frame's own array, unchanged
            return
        cg.push_null()
        cg.load_const(to_numpy_scalar if self.scalar else to_numpy)
        cg.load_tensor(self)
        cg.call(1)

    def describe(self) -> str:
        return f"a NumPy scalar (numpy.{self.python_type().__name__})" if self.scalar else "a numpy.ndarray"

    def __repr__(self) -> str:
        return f"NdarrayVariable({self.node.name})"


def is_ndarray(vt: VariableTracker) -> bool:
    return isinstance(vt, NdarrayVariable)


def _numpy_view(tx, tensor: TensorVariable, force: VariableTracker | None) -> VariableTracker:
    """`x.numpy()` (Tensor.numpy, set on tensor.py's registry): `x.view_as(x)`, the array over
    the tensor's memory; with `force=True`, the tensor detached and on the CPU, as eager makes it."""
    if tensor.example.layout is not torch.strided:
        raise Unsupported("Tensor.numpy() of a tensor that is not strided")
    if force is not None and force.as_python_constant():
        detached = tensor.call_method(tx, "detach", [], {})
        node = tx.output.create_node("call_method", "cpu", (detached.node,), {})
    else:
        if tensor.example.requires_grad or tensor.example.device.type != "cpu":
            raise Unsupported("Tensor.numpy() of a tensor that requires grad or is not on the CPU raises")
        node = tx.output.create_node("call_method", "view_as", (tensor.node, tensor.node), {})
    return NdarrayVariable(node)


register_numpy_view(_numpy_view)


def _asks_for_objects(args: Sequence[VariableTracker], kwargs: dict[str, VariableTracker]) -> bool:
    dtype = kwargs.get("dtype", args[0] if args else None)
    if dtype is None:
        return False
    value = dtype.real_object() if not dtype.is_python_constant() else dtype.as_python_constant()
    return value is object or value == "O"


def numpy_node_arg(tx, vt: VariableTracker) -> Any:
    """An argument of a NumPy call as the graph holds it: arrays and tensors as their nodes (in
    lists and tuples too), a NumPy type or dtype as its name (`'float64'`, as torch._dynamo writes
    it), constants as they are. A NumPy scalar (`np.float64(2.0)`), which NumPy types strongly
    where a number is not, is made in the graph by its type (`wrapped_float64(2.0)`, a 0-d array of
    that dtype), as torch._dynamo makes it."""
    if isinstance(vt, TensorVariable):
        return vt.node
    if isinstance(vt, BaseListVariable) and not vt.is_python_constant():
        return vt.container_type(numpy_node_arg(tx, v) for v in vt.items)
    numpy = sys.modules["numpy"]
    value = vt.real_object() if not vt.is_python_constant() else vt.as_python_constant()
    if isinstance(value, numpy.dtype) or (isinstance(value, type) and issubclass(value, numpy.generic)):
        return numpy.dtype(value).name
    if is_numpy_scalar(value):
        kind = type(value).__name__  # (np.bool_ is `bool` in NumPy 2, `bool_` in torch._numpy)
        make = getattr(tnp(), kind, None) or getattr(tnp(), kind + "_", None)
        if make is None:
            raise Unsupported(f"a NumPy scalar of type {type(value).__name__} passed to NumPy code on arrays")
        return tx.output.create_node("call_function", NumpyFunctionCall(make), (value.item(),), {})
    return as_node_arg(vt)


def _record(tx, target: Any, args: Sequence[VariableTracker], kwargs: dict[str, VariableTracker],
            name: str, run: Any) -> VariableTracker:
    """Record `target(*args, **kwargs)` and wrap what it gives as arrays (see wrap_result); `run`
    makes the same call with NumPy itself (numpy_eager.py), on stand-ins of the arguments."""
    node_args = tuple(numpy_node_arg(tx, a) for a in args)
    node_kwargs = {k: numpy_node_arg(tx, v) for k, v in kwargs.items()}
    expected = eager_result(run, args, kwargs)
    return wrap_result(tx, tx.output.create_node("call_function", target, node_args, node_kwargs), name, expected)


def wrap_result(tx, node: torch.fx.Node, name: str, expected: Any = UNKNOWN) -> VariableTracker:
    """What a NumPy call recorded as `node` gives: an array, or a NumPy scalar where NumPy gives one
    (`expected`: what NumPy itself gives, numpy_eager.py; where it cannot say, a 0-d result of any
    call but those that keep arrays), a tuple or list of them, None (an in-place call), or a
    constant computed from metadata alone (its node dropped). A dtype other than NumPy's is
    Unsupported: the graph would compute another result than eager."""
    example = node.meta["example_value"]
    if isinstance(example, torch.Tensor):
        differs = dtype_differs(example, expected)
        if differs is not None:
            raise Unsupported(f"numpy {name}: {differs}")
        if expected is not UNKNOWN:
            scalar = is_numpy_scalar_result(expected)
        else:
            scalar = example.dim() == 0 and name not in _ARRAY_PRESERVING
        return NdarrayVariable(node, scalar=scalar)
    if isinstance(example, (tuple, list)) and example and all(isinstance(e, torch.Tensor) for e in example):
        if not isinstance(expected, (tuple, list)) or len(expected) != len(example):
            expected = [UNKNOWN] * len(example)
        items = [wrap_result(tx, tx.output.getitem(node, i), name, e) for i, e in enumerate(expected)]
        return TupleVariable(items) if isinstance(example, tuple) else ListVariable(items)
    if example is None:  # (`a.__setitem__(i, v)`, `a.fill(0)`: run for its effect, kept)
        node.meta["kept_unused"] = True
        return ConstantVariable(None)
    if isinstance(example, (bool, int, float)) or (isinstance(example, tuple) and all(type(e) is int for e in example)):
        tx.output.graph.erase_node(node)  # (a value of the metadata: `np.ndim(a)`, `np.shape(a)`)
        return tx.wrap_constant(example)
    raise Unsupported(f"a NumPy call gave a {type(example).__name__}")


def ndarray_operator(tx, fn: Any, args: Sequence[VariableTracker]) -> VariableTracker | None:
    """`a + b`, `-a`, `a[i]`, `a += 1`... where an operand is an array and none is a tensor: NumPy's
    operator, recorded; None where that is not the case (a tensor operand: the tensor's operator,
    which eager gives, as the array defers to the tensor)."""
    if fn not in _OPERATORS or not any(isinstance(a, NdarrayVariable) for a in args):
        return None
    if fn is operator.getitem and isinstance(args[0], NdarrayVariable) and _holds_a_tensor(args[1]):
        raise Unsupported("a numpy.ndarray indexed by a tensor (NumPy converts the index by its own rules)")
    if any(isinstance(a, TensorVariable) and not isinstance(a, NdarrayVariable) for a in args):
        return None
    return _record(tx, NumpyOperatorCall(fn), args, {}, fn.__name__, lambda a, k: fn(*a))


# NumPy functions that make an array of a tensor as `Tensor.numpy()` does (its `__array__`).
_CONVERTERS = frozenset({"asarray", "array", "asanyarray", "ascontiguousarray"})


def _holds_a_tensor(vt: VariableTracker) -> bool:
    """A tensor that is not an array, or a list or tuple holding one."""
    if isinstance(vt, BaseListVariable):
        return any(_holds_a_tensor(v) for v in vt.items)
    return isinstance(vt, TensorVariable) and not isinstance(vt, NdarrayVariable)


def _holds_an_array(vt: VariableTracker) -> bool:
    if isinstance(vt, BaseListVariable):
        return any(_holds_an_array(v) for v in vt.items)
    return isinstance(vt, NdarrayVariable)


def _counterparts() -> dict[int, Any]:
    """id of a NumPy callable -> its torch._numpy function (same name, same module's counterpart)."""
    found = _COUNTERPARTS
    if not found:
        torch_numpy = tnp()
        for module_name, sub in _COUNTERPART_MODULES:
            module = sys.modules.get(module_name)
            counterpart = getattr(torch_numpy, sub) if sub else torch_numpy
            if module is None:
                continue
            for name, fn in vars(counterpart).items():
                original = getattr(module, name, None)
                if callable(fn) and callable(original) and not name.startswith("_") \
                        and (not isinstance(original, type) or issubclass(original, sys.modules["numpy"].generic)):
                    found[id(original)] = (original, fn)
    return found


_COUNTERPARTS: dict[int, tuple[Any, Any]] = {}


def torch_numpy_counterpart(fn: Any) -> Any | None:
    """The torch._numpy function that computes NumPy's `fn`, or None."""
    entry = _counterparts().get(id(fn))
    return entry[1] if entry is not None and entry[0] is fn else None


def call_numpy_function(tx, fn: Any, args: Sequence[VariableTracker],
                        kwargs: dict[str, VariableTracker]) -> VariableTracker:
    """`np.<fn>(*args, **kwargs)` on arrays or tensors: its torch._numpy counterpart recorded in
    the graph (`wrapped_sin`), its result an array; Unsupported where there is none."""
    name = getattr(fn, "__name__", repr(fn))
    if name not in _CONVERTERS and any(_holds_a_tensor(a) for a in (*args, *kwargs.values())):
        # (eager NumPy takes a tensor through its own protocols: `np.sin(x)` gives a Tensor back)
        raise Unsupported(f"numpy.{name}() of a tensor (not of an array) is not traced")
    if name in _CONVERTERS and any(isinstance(a, TensorVariable) and a.example.requires_grad for a in args):
        raise Unsupported(f"numpy.{name}() of a tensor that requires grad raises")
    counterpart = torch_numpy_counterpart(fn)
    if counterpart is None:
        raise Unsupported(f"numpy.{name}() has no torch._numpy counterpart: not traced on arrays")
    if name == "clip":
        kwargs = {{"a_min": "min", "a_max": "max"}.get(k, k): v for k, v in kwargs.items()}
    return _record(tx, NumpyFunctionCall(counterpart), args, kwargs, name, lambda a, k: fn(*a, **k))


def to_torch(tx, fn: Any, args: Sequence[VariableTracker], kwargs: dict[str, VariableTracker]) -> VariableTracker | None:
    """`torch.from_numpy(a)` / `torch.as_tensor(a, ...)` of an array the trace holds: the tensor it
    is, through `torch.as_tensor`, as torch._dynamo records both; None for a call that takes no
    array. Any other torch function given an array is Unsupported (eager's raise TypeError, or
    convert it by rules of their own: `torch.tensor(a)`)."""
    holds_an_array = any(_holds_an_array(a) for a in (*args, *kwargs.values()))
    if not holds_an_array:
        return None
    if fn not in (torch.from_numpy, torch.as_tensor) or not isinstance(args[0], NdarrayVariable) \
            or any(_holds_an_array(a) for a in (*args[1:], *kwargs.values())) \
            or (fn is torch.from_numpy and (len(args) != 1 or kwargs)):
        raise Unsupported(f"torch.{getattr(fn, '__name__', fn)}() of a numpy.ndarray is not traced")
    node_kwargs = {k: as_node_arg(v) for k, v in kwargs.items()}
    node = tx.output.create_node("call_function", torch.as_tensor, (args[0].node, *map(as_node_arg, args[1:])),
                                 node_kwargs)
    return TensorVariable(node)

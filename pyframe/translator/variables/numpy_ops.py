"""The callables a graph records for NumPy code on arrays, and the conversions around them.

A NumPy array the trace follows is a tensor in the graph (ndarray.py): each NumPy operation on it is
recorded as a call of one of these objects, which runs the operation's `torch._numpy` counterpart
(NumPy's API written over torch tensors) on `torch._numpy.ndarray` views of the tensors it is given,
and gives back plain tensors again. So the graph holds only tensors, as every backend expects, and
FakeTensor propagation runs these calls like any other.

- `NumpyFunctionCall(fn)`: `np.sin(a)`, `np.sum(a, axis=0)`, `np.concatenate([a, b])` (fn: the
  torch._numpy function of that name);
- `NumpyMethodCall(name)`: `a.reshape(2, 6)`, `a.astype("float64")`, `a.__setitem__(i, v)`;
- `NumpyOperatorCall(op)`: `a + b`, `a @ b`, `a > 0`, `-a`, `a += 1` (op: the operator module's);
- `numpy_attr_wrapper(t, name)`: an attribute that is an array (`a.T`, `a.real`).

Each object is made for one node, and called like a function; its `__name__` (`wrapped_sin`) names
the node. They are named as torch._dynamo names its own (its `torch._dynamo.utils` wrappers, one
object per node): a graph's code then reads as torch._dynamo's (`torch__dynamo_utils_wrapped_sin(a)`),
node for node. The name is only how the graph's code spells its global; the global is bound to the
object here, and nothing imports it by that name.

`torch._numpy` itself is loaded the first time a trace meets NumPy code on an array (`tnp()`), not
when pyframe is imported.
"""
from __future__ import annotations

import importlib
import sys
from typing import Any

import torch

from ...graph import PER_NODE_CALLABLES

# The module the graph's code names these callables after (see the docstring).
_GRAPH_MODULE = "torch._dynamo.utils"


def tnp() -> Any:
    """torch._numpy, loaded on first use (a trace meeting NumPy code on an array)."""
    module = sys.modules.get("torch._numpy")
    if module is None:
        module = importlib.import_module("torch._numpy")
    return module


def to_tensors(value: Any) -> Any:
    """What a torch._numpy call gave, as the graph holds it: arrays as their tensors (in tuples
    and lists too), anything else as it is."""
    if isinstance(value, tnp().ndarray):
        return value.tensor
    if isinstance(value, (tuple, list)):
        return type(value)(to_tensors(v) for v in value)
    return value


def _as_array(value: Any) -> Any:
    return tnp().ndarray(value) if isinstance(value, torch.Tensor) else value


# NumPy's functions and methods that write into their first argument (besides `out=`, which
# rerun.py reads from the node's keyword arguments).
_WRITING_FUNCTIONS = frozenset({"copyto", "put", "place", "putmask", "fill_diagonal", "put_along_axis"})
_WRITING_METHODS = frozenset({"__setitem__", "fill", "sort", "put", "partition", "resize", "itemset", "setfield"})
_INPLACE_OPERATORS = frozenset({"iadd", "isub", "imul", "itruediv", "ifloordiv", "imod", "ipow", "imatmul", "iand",
                                "ior", "ixor", "ilshift", "irshift"})


class _GraphCallable:
    """One node's callable: compared and hashed by identity (each node has its own).
    `mutates_first_argument`: the call writes into the array it is given first (`a += 1`,
    `a[0] = v`), which rerun.py must know (a graph that raised after it cannot run again)."""

    __name__: str
    mutates_first_argument = False

    def __repr__(self) -> str:
        return f"<pyframe {self.__name__}>"


class NumpyFunctionCall(_GraphCallable):
    """`fn(*args, **kwargs)` for a torch._numpy function `fn`, its array results as tensors (its
    arguments are tensors where NumPy's were arrays: torch._numpy takes them as arrays)."""

    def __init__(self, fn: Any):
        self.fn = fn
        self.__name__ = f"wrapped_{fn.__name__}"
        self.mutates_first_argument = fn.__name__ in _WRITING_FUNCTIONS

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return to_tensors(self.fn(*args, **kwargs))


class NumpyMethodCall(_GraphCallable):
    """`array.<name>(*args, **kwargs)` on the array its first argument (a tensor) is."""

    def __init__(self, name: str):
        self.name = name
        self.__name__ = f"wrapped_{name}"
        self.mutates_first_argument = name in _WRITING_METHODS or name.startswith("__i")

    def __call__(self, obj: Any, *args: Any, **kwargs: Any) -> Any:
        return to_tensors(getattr(_as_array(obj), self.name)(*args, **kwargs))


class NumpyOperatorCall(_GraphCallable):
    """`op(*operands)` (operator.add, operator.matmul, operator.iadd...) with the tensors among the
    operands taken as arrays: NumPy's operators, not torch's."""

    def __init__(self, op: Any):
        self.op = op
        self.__name__ = f"wrapped_{op.__name__}"
        self.mutates_first_argument = op.__name__ in _INPLACE_OPERATORS

    def __call__(self, *operands: Any) -> Any:
        return to_tensors(self.op(*map(_as_array, operands)))


for _kind in (NumpyFunctionCall, NumpyMethodCall, NumpyOperatorCall):
    _kind.__module__ = _GRAPH_MODULE  # (what the graph's code names them after: see the docstring)
    PER_NODE_CALLABLES.add(_kind)


def numpy_attr_wrapper(obj: Any, name: str) -> Any:
    """`array.<name>` (`T`, `real`, `imag`) of the array the tensor `obj` is, as a tensor."""
    return to_tensors(getattr(_as_array(obj), name))


numpy_attr_wrapper.__module__ = _GRAPH_MODULE  # (named in the graph's code as torch._dynamo's)


def to_numpy(value: torch.Tensor) -> Any:
    """A graph's output that the frame holds as a NumPy array, made one again: an array over the
    tensor's memory, as `Tensor.numpy()` makes it."""
    return value.detach().numpy(force=True)


def to_numpy_scalar(value: torch.Tensor) -> Any:
    """A 0-d output that NumPy would have given as a scalar (a reduction's result, an element):
    that scalar (`np.float32(...)`)."""
    return value.detach().numpy(force=True)[()]

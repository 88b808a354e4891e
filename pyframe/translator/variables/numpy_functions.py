"""NumPy's functions called by traced code: folded on constants, traced on arrays.

Library code computes sizes with NumPy (`np.lcm(a, b)`, `np.prod(shape)`, `np.ceil(n / k)`,
`np.log2(...)`): on ints and floats known while tracing, such a call is folded into its result, a
constant. pyframe does this for every NumPy callable (a ufunc, a function NumPy's
`__array_function__` protocol dispatches, a C function or a Python function of the numpy package, a
scalar type such as `np.float64`), read from the frame or a module and guarded by identity: the call
runs once, while tracing, on the constants, and its result (a NumPy or Python scalar, or a tuple of
them) is a constant of the trace. A call on arrays or tensors, or one that makes an array
(`np.ones((3, 4))`), is recorded in the graph through its torch._numpy counterpart, as torch._dynamo
records it (ndarray.py). `numpy.random` is never called while tracing: its calls break the graph.
"""
from __future__ import annotations

import sys
import types
from typing import Any

from ...exc import Unsupported
from .base import VariableTracker
from .constant import ConstantVariable
from .descriptions import describe_value
from .ndarray import call_numpy_function


def is_numpy_callable(value: Any) -> bool:
    """A function, ufunc or dispatcher of the numpy package, or one of its scalar types
    (`np.float64(2.0)`: a NumPy scalar made of a constant, or an array's elements converted); not
    another class."""
    numpy = sys.modules.get("numpy")
    if numpy is None or not callable(value):
        return False
    if isinstance(value, type):
        return issubclass(value, numpy.generic) and value.__module__ == "numpy"
    if _is_numpy_random(value):  # (`np.random.rand`: a method of NumPy's global generator)
        return True
    if isinstance(value, numpy.ufunc):
        return True
    module = getattr(value, "__module__", None) or ""
    return (module == "numpy" or module.startswith("numpy.")) and isinstance(
        value, (types.FunctionType, types.BuiltinFunctionType, type(numpy.prod)))


def _is_numpy_random(value: Any) -> bool:
    module = getattr(value, "__module__", None) or ""
    return module == "numpy.random" or module.startswith("numpy.random.")


def _folded_scalar(value: Any) -> bool:
    """A value a folded call may give: a Python or NumPy scalar, or a tuple of them."""
    numpy = sys.modules["numpy"]
    if isinstance(value, tuple):
        return all(_folded_scalar(v) for v in value)
    return isinstance(value, (int, float, bool, complex, numpy.number, numpy.bool_)) or value is None


class NumpyFunctionVariable(VariableTracker):
    """A NumPy callable: called on constants, folded to its result (see the module's docstring)."""

    def __init__(self, value: Any, source=None):
        super().__init__(source)
        self.value = value

    def python_type(self) -> type:
        return type(self.value)

    def real_object(self) -> Any:
        return self.value

    def as_python_constant(self) -> Any:
        return self.value

    def is_python_constant(self) -> bool:
        return True

    def call(self, tx, args, kwargs) -> VariableTracker:
        name = getattr(self.value, "__name__", describe_value(self.value))
        if _is_numpy_random(self.value):  # (never run while tracing, nor torch._numpy's: its own generator)
            raise Unsupported(f"numpy.random.{name}() draws from NumPy's random generator: not traced")
        if not all(a.is_python_constant() for a in (*args, *kwargs.values())):
            return call_numpy_function(tx, self.value, args, kwargs)  # on arrays or tensors: in the graph
        pargs = [a.as_python_constant() for a in args]
        pkwargs = {k: v.as_python_constant() for k, v in kwargs.items()}
        if not all(_folded_scalar(v) for v in (*pargs, *pkwargs.values())):
            # (`np.array([1.0, 3.0])`, `np.ones((3, 4))`: an array made in the graph)
            return call_numpy_function(tx, self.value, args, kwargs)
        try:
            result = self.value(*pargs, **pkwargs)
        except Exception as e:  # raised again when the frame runs as Python
            raise Unsupported(f"numpy.{name}() raises {type(e).__name__}: {e}") from e
        if not _folded_scalar(result):  # (`np.ones((3, 4))`: an array, made in the graph instead)
            return call_numpy_function(tx, self.value, args, kwargs)
        return ConstantVariable(result)

    def reconstruct(self, cg) -> None:
        if self.source is not None:
            cg.load_source(self.source)
        else:
            cg.load_const(self.value)

    def describe(self) -> str:
        return describe_value(self.value)

    def __repr__(self) -> str:
        return f"NumpyFunctionVariable({self.describe()})"

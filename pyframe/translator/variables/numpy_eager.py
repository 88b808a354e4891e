"""What NumPy itself gives for a call the graph records through torch._numpy: its kind and dtype.

torch._numpy follows NumPy closely but not everywhere: dividing integer arrays gives torch's default
float type (float32) where NumPy gives float64, a sum of uint8 gives int64 where NumPy gives
uint64, `np.sqrt` of bools float64 where NumPy gives float16. And NumPy gives a 0-d result of a
ufunc, a reduction or an element as a NumPy scalar (np.float32), where torch._numpy gives an array.
So for each NumPy call it records, the trace asks NumPy too: the same call, run on stand-ins of the
arrays (each one element seen through zero strides: the array's shape and dtype, almost no memory)
with the same constants. A dtype that differs from the FakeTensor's is a graph break (never a
result of another dtype than eager's); the kind (array or scalar) is what the trace holds. Where
NumPy cannot run on the stand-ins (a value that matters: a singular matrix), the trace relies on
torch._numpy's answer (`UNKNOWN`). The check costs what the call costs NumPy (its output is made
in full), once per trace.
"""
from __future__ import annotations

import sys
import warnings
from typing import Any, Callable, Sequence

import torch

from .base import VariableTracker
from .lists import BaseListVariable
from .tensor import TensorVariable

UNKNOWN = object()  # NumPy could not say


def numpy_dtype(dtype: torch.dtype) -> Any:
    """NumPy's dtype of a torch dtype (None for one NumPy has not: bfloat16)."""
    try:
        return torch.empty(0, dtype=dtype).numpy().dtype
    except (TypeError, RuntimeError):
        return None


def _stand_in(vt: VariableTracker) -> Any:
    """The value NumPy is given in place of `vt`: an array (or scalar, see NdarrayVariable.scalar)
    of the tensor's dtype and shape, its elements one element, or the constant itself."""
    numpy = sys.modules["numpy"]
    if isinstance(vt, TensorVariable):
        example = vt.example
        dtype = numpy_dtype(example.dtype)
        shape = tuple(n if type(n) is int else getattr(n.node, "hint", None) for n in example.shape)
        if dtype is None or None in shape:  # (a symbolic size stands for its value on this call)
            raise _NoStandIn
        if getattr(vt, "scalar", False):
            return dtype.type(1)
        one = numpy.ones(1, dtype=dtype)
        return numpy.lib.stride_tricks.as_strided(one, shape=shape, strides=(0,) * len(shape))
    if isinstance(vt, BaseListVariable) and not vt.is_python_constant():
        return vt.container_type(_stand_in(v) for v in vt.items)
    if vt.is_python_constant():
        return vt.as_python_constant()
    raise _NoStandIn


class _NoStandIn(Exception):
    pass


def eager_result(run: Callable[[list, dict], Any], args: Sequence[VariableTracker],
                 kwargs: dict[str, VariableTracker]) -> Any:
    """`run(args, kwargs)` on NumPy's stand-ins of the arguments: what NumPy gives (its values
    meaningless, its kind and dtype NumPy's), or UNKNOWN."""
    numpy = sys.modules["numpy"]
    try:
        pargs = [_stand_in(a) for a in args]
        pkwargs = {k: _stand_in(v) for k, v in kwargs.items()}
    except _NoStandIn:
        return UNKNOWN
    with warnings.catch_warnings(), numpy.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            return run(pargs, pkwargs)
        except Exception:  # noqa: BLE001 (a value NumPy needs: torch._numpy's answer stands)
            return UNKNOWN


def is_numpy_scalar_result(expected: Any) -> bool:
    numpy = sys.modules["numpy"]
    return isinstance(expected, numpy.generic)


def dtype_differs(example: torch.Tensor, expected: Any) -> str | None:
    """Why the graph's value (a FakeTensor) is not what NumPy gives (`expected`), or None: a dtype
    of its own, or NumPy giving no array at all."""
    numpy = sys.modules["numpy"]
    if expected is UNKNOWN:
        return None
    if not isinstance(expected, (numpy.ndarray, numpy.generic)):
        return f"NumPy gives a {type(expected).__name__}, torch._numpy an array"
    ours = numpy_dtype(example.dtype)
    if ours is not None and ours != expected.dtype:
        return f"torch._numpy gives {ours} where NumPy gives {expected.dtype}"
    return None

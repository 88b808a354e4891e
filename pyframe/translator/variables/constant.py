"""Python constants: numbers, strings, None, dtypes, devices, slices, Ellipsis, ranges.

Work on constants is done while tracing (constant folding); whatever the result depended on was
guarded when the constant was read from the frame.
"""
from __future__ import annotations

import re
import sys
import types
import typing
from typing import Any, Callable

import torch

from ...source import Source
from .base import BoundMethodVariable, VariableTracker, constant_args

# Compiled regular expressions and their matches: immutable, their methods give new values from
# constants, so they are constants of the trace too (read from the frame, pinned by identity).
REGEX_TYPES = (re.Pattern, re.Match)

# Type expressions (`list[int]`, `int | None`, `Optional[T]`, `Callable[[Any], bool]`, a TypeVar):
# immutable descriptions of types, made by subscripting a class or a typing form and by `|`, as a
# nested function's annotations are evaluated at its `def`. Constants of the trace (read from the
# frame, pinned by identity). typing._Final is the base of typing's forms and aliases.
TYPE_EXPRESSION_TYPES = (types.GenericAlias, types.UnionType, typing._Final)

# Values that can be compared, hashed and embedded in co_consts or fx graphs as they are.
CONSTANT_TYPES = (type(None), bool, int, float, complex, str, bytes, type(Ellipsis), type(NotImplemented),
                  torch.dtype, torch.device, torch.memory_format, torch.layout, slice, range)


def is_constant_value(value: Any) -> bool:
    if isinstance(value, (tuple, frozenset)):
        return all(is_constant_value(v) for v in value)
    if isinstance(value, slice):  # (its bounds may be any objects: `t[:obj]` calls obj.__index__)
        return all(is_constant_value(v) for v in (value.start, value.stop, value.step))
    return isinstance(value, CONSTANT_TYPES)


def is_numpy_scalar(value: Any) -> bool:
    """A NumPy number or bool (np.int64(8), np.float32(0.5), np.True_: what comparing two NumPy
    numbers gives): a constant guarded by its value and exact type."""
    numpy = sys.modules.get("numpy")  # (a value cannot be one unless numpy is imported)
    return numpy is not None and isinstance(value, (numpy.number, numpy.bool_))


def python_scalar(vt: VariableTracker) -> VariableTracker:
    """A NumPy number as the Python number torch's argument parser reads it as (an operand of a
    tensor operator); any other value as it is. Not np.bool_, which torch's operators read as a
    float where they read a bool as a bool (as_node_arg then declines it)."""
    if isinstance(vt, ConstantVariable) and is_numpy_scalar(vt.value) and not isinstance(vt.value, sys.modules["numpy"].bool_):
        return ConstantVariable(vt.value.item())
    return vt


class ConstantVariable(VariableTracker):
    def __init__(self, value: Any, source: Source | None = None):
        self.source = source  # (VariableTracker.__init__'s one field, set here: constants are made by the thousand)
        self.value = value

    @classmethod
    def lazy(cls, value: Any, source: Source, on_use: Callable[[], None], may_be_symbolic: bool) -> "ConstantVariable":
        """A number, bool or string read from `source` whose guard waits until the trace uses its
        value (torch._dynamo's LazyConstantVariable): one only passed through (returned, handed to a
        resume function, stored) is rebuilt from its source, unguarded, so a call with another value
        compiles nothing. `on_use` guards the value, at its first use (reading `value`, its type
        included). `may_be_symbolic`: an int or float that could become a symbolic input, which
        torch._dynamo realizes when a builtin (isinstance, setattr) is called on it, to know its kind."""
        vt = cls.__new__(cls)
        vt.source, vt._lazy = source, (value, on_use, may_be_symbolic)
        return vt

    def __getattr__(self, name: str) -> Any:
        # (only for an attribute the instance lacks: `value` of a lazy constant, at its first use)
        lazy = self.__dict__.get("_lazy") if name == "value" else None
        if lazy is None:
            raise AttributeError(name)
        del self._lazy
        self.value = lazy[0]
        lazy[1]()
        return lazy[0]

    def realize_for_dispatch(self) -> None:
        """A builtin is called on it (or it is stored as an attribute): a lazy number that may
        be symbolic is used now, as torch._dynamo realizes it to pick the builtin's handler."""
        lazy = self.__dict__.get("_lazy")
        if lazy is not None and lazy[2]:
            self.value  # noqa: B018 (its use)

    def real_object(self) -> Any:
        return self.value

    def python_type(self) -> type:
        return type(self.value)

    def as_python_constant(self) -> Any:
        return self.value

    def var_getattr(self, tx, name: str) -> VariableTracker:
        try:
            attr = getattr(self.value, name)
        except AttributeError as e:  # (`None.shape`: Python's own error, which the code may catch)
            tx.raise_error(AttributeError, str(e))
            raise AssertionError("unreachable") from None
        if callable(attr):
            return BoundMethodVariable(self, name)
        return tx.wrap_constant(attr)

    def call_method(self, tx, name, args, kwargs) -> VariableTracker:
        if name == "join" and isinstance(self.value, (str, bytes)) and len(args) == 1 and not kwargs \
                and not args[0].is_python_constant():
            # `sep.join(p.upper() for p in parts)`: join takes all of its iterable's items first
            # (PySequence_Fast), so a generator or a list of constants is joined as a tuple of them
            args = [tx.make_tuple(args[0].unpack(tx))]
        pargs, pkwargs = constant_args(args, kwargs, f"{type(self.value).__name__}.{name}()")
        return tx.wrap_constant(getattr(self.value, name)(*pargs, **pkwargs))

    def reconstruct(self, cg) -> None:
        if "_lazy" in self.__dict__:  # passed through unused: read again where it came from
            cg.load_source(self.source)
            return
        cg.load_const(self.value)

    def unpack(self, tx) -> list[VariableTracker]:
        if isinstance(self.value, (str, bytes, range, tuple, frozenset)):
            return [tx.wrap_constant(v) for v in self.value]
        return super().unpack(tx)

    def __repr__(self) -> str:
        lazy = self.__dict__.get("_lazy")
        return f"ConstantVariable({lazy[0]!r}, unused)" if lazy is not None else f"ConstantVariable({self.value!r})"

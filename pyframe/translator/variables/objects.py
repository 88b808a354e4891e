"""Python objects the translator does not model in detail: classes, and instances of user classes.

Their attributes are read while tracing (the object is real: it came from the frame) and each
value read is guarded on its Source like any other input. Reads that would run user code
(properties, `__getattr__`) are left to Python.
"""
from __future__ import annotations

import inspect
import types
from typing import Any

from ...exc import Unsupported
from ...source import AttrSource, Source
from .base import BoundMethodVariable, VariableTracker, constant_args


class PythonObjectVariable(VariableTracker):
    """An opaque Python value used as a constant: a class, an enum member, a frozen config..."""

    def __init__(self, value: Any, source: Source | None = None):
        super().__init__(source)
        self.value = value

    def python_type(self) -> type:
        return type(self.value)

    def as_python_constant(self) -> Any:
        return self.value

    def var_getattr(self, tx, name: str) -> VariableTracker:
        value = _static_attr(self.value, name)
        source = AttrSource(self.source, name) if self.source is not None else None
        return tx.wrap(value, source, guard=self.source is not None)

    def call(self, tx, args, kwargs) -> VariableTracker:
        # Classes of values we can fold (torch.Size, torch.device, int, ...) are built while tracing.
        if isinstance(self.value, type) and getattr(self.value, "__module__", "").split(".")[0] in ("torch", "builtins"):
            pargs, pkwargs = constant_args(args, kwargs, f"{self.value.__name__}()")
            return tx.wrap_constant(self.value(*pargs, **pkwargs))
        raise Unsupported(f"call to {_describe(self.value)}")

    def reconstruct(self, cg) -> None:
        if self.source is not None:
            cg.load_source(self.source)
        else:
            cg.load_const(self.value)

    def __repr__(self) -> str:
        return f"PythonObjectVariable({_describe(self.value)})"


class UserObjectVariable(VariableTracker):
    """An instance of a user class, read from the frame (guarded by its type)."""

    def __init__(self, value: Any, source: Source | None = None):
        super().__init__(source)
        self.value = value

    def python_type(self) -> type:
        return type(self.value)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        stored = tx.side_effects.load_attr(self, name)
        if stored is not None:
            return stored
        static = inspect.getattr_static(type(self.value), name, None)
        if isinstance(static, property) and static.fget is not None and name not in getattr(self.value, "__dict__", {}):
            return tx.inline_call(static.fget, [self], {})
        value = _static_attr(self.value, name)
        if isinstance(value, types.MethodType):
            return BoundMethodVariable(self, name)
        source = AttrSource(self.source, name) if self.source is not None else None
        return tx.wrap(value, source)

    def call_method(self, tx, name, args, kwargs) -> VariableTracker:
        method = inspect.getattr_static(self.value, name)
        if isinstance(method, types.FunctionType):
            return tx.inline_call(method, [self, *args], kwargs)
        raise Unsupported(f"method {type(self.value).__name__}.{name}")

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        check_plain_store(type(self.value), name)
        tx.side_effects.store_attr(self, name, value)


def check_plain_store(cls: type, name: str) -> None:
    """Unsupported unless `obj.name = value` only puts value in the instance's __dict__."""
    if type(cls).__setattr__ is not type.__setattr__ or cls.__setattr__ is not object.__setattr__:
        raise Unsupported(f"assignment to attribute {name!r} of {cls.__qualname__}, which defines __setattr__")
    static = inspect.getattr_static(cls, name, None)
    if hasattr(type(static), "__set__") or hasattr(type(static), "__delete__"):
        raise Unsupported(f"assignment to attribute {name!r} of {cls.__qualname__} through a descriptor")


# Descriptors whose __get__ runs no Python code: reading through them is safe while tracing.
_PLAIN_DESCRIPTORS = (types.FunctionType, staticmethod, classmethod, types.BuiltinFunctionType,
                      types.MethodDescriptorType, types.GetSetDescriptorType, types.MemberDescriptorType,
                      types.WrapperDescriptorType, types.ClassMethodDescriptorType)


def _static_attr(obj: Any, name: str) -> Any:
    """getattr(obj, name) when it runs no user code (no property, custom descriptor, __getattr__)."""
    try:
        static = inspect.getattr_static(obj, name)
    except AttributeError as e:
        raise Unsupported(f"{_describe(obj)} has no attribute {name!r}") from e
    if hasattr(type(static), "__get__") and not isinstance(static, _PLAIN_DESCRIPTORS):
        kind = "property" if isinstance(static, property) else f"descriptor {type(static).__name__}"
        raise Unsupported(f"{kind} {name!r} of {_describe(obj)}")
    return getattr(obj, name)


def _describe(value: Any) -> str:
    if isinstance(value, type):
        return f"class {value.__qualname__}"
    return f"{type(value).__name__} object"

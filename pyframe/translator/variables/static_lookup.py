"""Reading attributes of real objects without running user code.

A trace may read `obj.name` of a real object only when the read runs nothing of the user's: the
instance dict, a class attribute, a plain descriptor (a function, a slot, a builtin method). A
property, a custom descriptor or a `__getattr__` would run user code (which the translator inlines
elsewhere, or leaves to Python). These helpers answer from the class's and instance's dicts.
"""
from __future__ import annotations

import types
from typing import Any

import torch

from ...exc import Unsupported
from .base import class_attribute, static_attribute
from .descriptions import describe_value


# Descriptors whose __get__ runs no Python code: reading through them is safe while tracing.
PLAIN_DESCRIPTORS = (types.FunctionType, staticmethod, classmethod, types.BuiltinFunctionType,
                      types.MethodDescriptorType, types.GetSetDescriptorType, types.MemberDescriptorType,
                      types.WrapperDescriptorType, types.ClassMethodDescriptorType)


def has_own_getattribute(cls: type) -> bool:
    """The class defines `__getattribute__` in Python (inlined for every attribute read)."""
    return isinstance(class_attribute(cls, "__getattribute__", None), types.FunctionType)


def plain_protocol(cls: type) -> bool:
    """`obj.name` is the type's own lookup: no Python __getattribute__, no __getattr__."""
    return not has_own_getattribute(cls) and class_attribute(cls, "__getattr__", None) is None


def is_data_descriptor(attr: Any) -> bool:
    return hasattr(type(attr), "__set__") or hasattr(type(attr), "__delete__")


def instance_dict_of(obj: Any) -> dict:
    """The instance dict, read as object's lookup reads it (no class's __getattribute__ asked)."""
    try:
        found = object.__getattribute__(obj, "__dict__")
    except AttributeError:
        return {}
    return found if isinstance(found, dict) else {}


def has_static_attr(obj: Any, name: str) -> bool:
    try:
        static_attribute(obj, name)
    except AttributeError:
        return False
    return True


def static_attr(obj: Any, name: str, generic: bool = False) -> Any:
    """getattr(obj, name) when it runs no user code (no property, custom descriptor, __getattr__);
    `generic`: object.__getattribute__(obj, name), the class's own __getattribute__ not asked."""
    try:
        static = static_attribute(obj, name)
    except AttributeError as e:
        raise Unsupported(f"{describe_value(obj)} has no attribute {name!r}") from e
    if hasattr(type(static), "__get__") and not isinstance(static, PLAIN_DESCRIPTORS):
        kind = "property" if isinstance(static, property) else f"descriptor {type(static).__name__}"
        raise Unsupported(f"{kind} {name!r} of {describe_value(obj)}")
    return object.__getattribute__(obj, name) if generic else getattr(obj, name)


def is_plain_class(cls: type) -> bool:
    """A Python class whose instances object.__new__ makes and whose attributes live in __dict__
    or in the slots its `__slots__` makes (a `__setattr__` of its own is inlined: it ends in
    object's)."""
    return (isinstance(cls, type) and cls.__new__ is object.__new__
            and (cls.__setattr__ is object.__setattr__ or isinstance(class_attribute(cls, "__setattr__", None),
                                                                     types.FunctionType))
            and all(base is object or base.__module__ != "builtins" for base in cls.__mro__)
            and not issubclass(cls, (torch.nn.Module, torch.Tensor)))

"""Reading attributes of real objects without running user code.

A trace may read `obj.name` of a real object only when the read runs nothing of the user's: the
instance dict, a class attribute, a plain descriptor (a function, a slot, a builtin method). A
property, a custom descriptor or a `__getattr__` would run user code (which the translator inlines
elsewhere, or leaves to Python). These helpers answer from the class's and instance's dicts.
"""
from __future__ import annotations

import abc
import enum
import inspect
import types
from typing import Any, Iterator

import torch

from ...exc import Unsupported
from .base import class_attribute, mro_lookup, static_attribute
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
    if not type(obj).__dictoffset__ and mro_lookup(type(obj), "__dict__") is None:
        return {}  # (no instance dict, and no class attribute `__dict__`: object's lookup raises)
    try:
        found = object.__getattribute__(obj, "__dict__")
    except AttributeError:
        return {}
    return found if isinstance(found, dict) else {}


# What static_attribute(obj, name, ABSENT) gives when obj has no attribute name.
ABSENT = object()


def is_unset_slot(obj: Any, found: Any) -> bool:
    """`found` (what static_attribute found for a name of obj) is a `__slots__` member that holds
    nothing in obj: reading it raises AttributeError, as for a missing attribute."""
    if not isinstance(found, types.MemberDescriptorType):
        return False
    try:
        found.__get__(obj, type(obj))
    except AttributeError:
        return True
    return False


def has_static_attr(obj: Any, name: str) -> bool:
    return static_attribute(obj, name, ABSENT) is not ABSENT


def static_attr(obj: Any, name: str, generic: bool = False) -> Any:
    """getattr(obj, name) when it runs no user code (no property, custom descriptor, __getattr__);
    `generic`: object.__getattribute__(obj, name), the class's own __getattribute__ not asked."""
    try:
        static = static_attribute(obj, name)
    except AttributeError as e:
        raise Unsupported(f"{describe_value(obj)} has no attribute {name!r}") from e
    return read_static(obj, name, static, generic)


def read_static(obj: Any, name: str, static: Any, generic: bool = False) -> Any:
    """static_attr, given what static_attribute found for `name` (`static`, not ABSENT)."""
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


def bound_init_arguments(cls: type, args: tuple, kwargs: dict) -> tuple:
    """The arguments of `cls(*args, **kwargs)` as its __init__ takes them, in order, defaults
    filled in (`self` left out)."""
    bound = inspect.signature(cls.__init__).bind(None, *args, **kwargs)
    bound.apply_defaults()
    return tuple(bound.arguments.values())[1:]


_ENUM_MISSING = {enum.Enum._missing_.__func__, enum.Flag._missing_.__func__}


def is_enum_lookup(cls: type, args, kwargs) -> bool:
    """`cls(value)` of an enum class with members: EnumMeta.__call__'s lookup by value (a class
    of its own __call__ or _missing_ may run other code; with no members, it is the functional API
    making a new class)."""
    return isinstance(cls, enum.EnumMeta) and type(cls).__call__ is enum.EnumMeta.__call__ \
        and len(args) == 1 and not kwargs and args[0].is_python_constant() and len(cls.__members__) > 0 \
        and getattr(cls._missing_, "__func__", None) in _ENUM_MISSING


# Metaclass instance checks that decide by the object's type alone, as issubclass(type(obj), cls)
# does (nn.Parameter's also accepts a tensor marked `_is_param`: what pyframe's tensors carry as
# their class).
_TYPE_BASED_INSTANCECHECKS = (type.__instancecheck__, abc.ABCMeta.__instancecheck__,
                              torch.nn.parameter._ParameterMeta.__instancecheck__)


def checks_by_type(cls: Any) -> bool:
    return getattr(type(cls), "__instancecheck__", None) in _TYPE_BASED_INSTANCECHECKS


def flatten_classinfo(kinds: tuple) -> Iterator[Any]:
    for k in kinds:
        if isinstance(k, tuple):
            yield from flatten_classinfo(k)
        else:
            yield k


def is_legacy_tensor_type(cls: Any) -> bool:
    return type(cls).__name__ == "tensortype" and type(cls).__module__ == "torch"

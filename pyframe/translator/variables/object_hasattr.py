"""hasattr(obj, name) for instances of user classes, decided without running user code where
CPython's lookup would run none (builtins.py's hasattr asks it before reading the attribute)."""
from __future__ import annotations

import types

from ...guards import GuardKind
from ...source import AttrSource
from .base import plain_getattr, static_attribute
from .frame_objects import UserObjectVariable
from .objects import NewObjectVariable
from .static_lookup import PLAIN_DESCRIPTORS

_MISSING = object()


def object_has_attr(tx, obj: "UserObjectVariable | NewObjectVariable", name: str) -> bool | None:
    """hasattr(obj, name) for an instance of a user class, when it runs no user code: no
    `__getattr__`, no Python `__getattribute__`, and the attribute (if the class defines it) is
    not a property or a descriptor written in Python. None when that cannot be decided.

    An instance read from the frame gets a HASATTR guard: the answer holds while its class and
    its instance dict do not gain or lose the attribute."""
    if isinstance(obj, UserObjectVariable):
        assigned = tx.side_effects.load_attr(obj, name) is not None
    else:
        assigned = name in obj.attrs
    if assigned or tx.side_effects.load_class_attr(obj.python_type(), name) is not None:  # earlier in this trace
        return True
    if isinstance(obj, UserObjectVariable) and tx.side_effects.is_deleted(obj, name):
        return None  # (read: the class's, or AttributeError)
    cls = obj.python_type()
    if not plain_getattr(cls):
        return None
    if isinstance(obj, NewObjectVariable):  # made in the trace: its attributes are all in `attrs`
        static = next((vars(klass)[name] for klass in cls.__mro__ if name in vars(klass)), _MISSING)
        if isinstance(static, types.MemberDescriptorType):
            return None  # a base class's slot (not modelled: it may be unset)
        answer = static is not _MISSING
    else:
        static = static_attribute(obj.value, name, _MISSING)
        answer = None
    if static is not _MISSING and hasattr(type(static), "__get__") and not isinstance(static, PLAIN_DESCRIPTORS):
        return None  # a property or a descriptor may raise AttributeError
    if answer is None:
        answer = hasattr(obj.value, name)  # (a slot, or a builtin descriptor: C code only)
        if obj.source is not None:
            tx.output.guards.add(AttrSource(obj.source, name), GuardKind.HASATTR_MATCH, answer)
    return answer

"""The builtins that look at an object itself, not at its items: getattr, hasattr, setattr,
delattr, vars, type and id (and `id(a) == id(b)` on ids of objects made while tracing).

An attribute is read as `obj.name` is (tx.load_attr: descriptors, __getattr__, properties
inlined); hasattr answers without running user code where the answer is decidable, guarding what
it read; type() reads a user class through the object, so what the trace reads of the class is
guarded; id() pins the object it was asked about.
"""
from __future__ import annotations

from typing import Callable

from ...exc import Unsupported
from ...guards import GuardKind
from ...source import AttrSource
from .base import UNKNOWN_OBJECT, VariableTracker, plain_getattr
from .constant import ConstantVariable
from .dicts import DictVariable, DictViewVariable
from .dict_keys import FakeIdVariable
from .lists import BaseListVariable
from .sets import SetVariable
from .exceptions import RaisedException
from .functions import UserFunctionVariable
from .nn_module import NNModuleVariable
from .frame_objects import UserObjectVariable
from .objects import NewObjectVariable
from .object_hasattr import object_has_attr
from .special_methods import is_fresh_container
from .tensor import TensorVariable


def getattr_(tx, obj: VariableTracker, name: VariableTracker, *default: VariableTracker) -> VariableTracker:
    attr = name.as_python_constant()
    if default:
        found = lookup_attr(tx, obj, attr)
        return default[0] if found is None else found
    return tx.load_attr(obj, attr)


def lookup_attr(tx, obj: VariableTracker, name: str) -> VariableTracker | None:
    """`obj.name`, or None where Python's lookup raises AttributeError (getattr with a default,
    a class pattern's attributes). A read that cannot be traced is Unsupported, unless the
    attribute is known to be absent."""
    try:
        return tx.load_attr(obj, name)
    except RaisedException as raised:  # from an inlined __getattr__ or property
        if issubclass(raised.value.exc_type, AttributeError):
            return None
        raise
    except Unsupported:
        if _has_attr(tx, obj, name) is False:
            return None
        raise


def _has_attr(tx, obj: VariableTracker, attr: str) -> bool | None:
    """hasattr, when it is decidable without running user code; None when it is not."""
    if isinstance(obj, TensorVariable):
        return obj.has_attr(tx, attr)
    if isinstance(obj, (BaseListVariable, DictVariable, SetVariable, DictViewVariable)):
        # Instances of these types (namedtuples included) take their attributes from the class;
        # one whose instances have a __dict__ (a namedtuple's subclass) may hold more. (Not from
        # as_python_constant(): that is a new container, without what the instance dict holds.)
        cls = obj.python_type()
        if any(attr in vars(klass) for klass in cls.__mro__):
            return True
        if cls.__dictoffset__ == 0 and plain_getattr(cls):
            return False
        return None
    if isinstance(obj, UserFunctionVariable):
        return None  # read, its absence guarded: a decorator may set the attribute later
    if isinstance(obj, NNModuleVariable):
        return None  # read (its absence guarded): `self.extra = ...` may come later
    if obj.is_python_constant():
        value = obj.as_python_constant()
        if isinstance(value, type) and tx.side_effects.load_class_attr(value, attr) is not None:
            return True  # a class attribute the trace assigned
        answer = hasattr(value, attr)
        if obj.source is not None and hasattr(value, "__dict__"):
            # a class, a module, a function read from the frame: it may gain or lose the attribute
            if not plain_getattr(type(value)):
                return None
            tx.output.guards.add(AttrSource(obj.source, attr), GuardKind.HASATTR_MATCH, answer)
        return answer
    if isinstance(obj, (UserObjectVariable, NewObjectVariable)):
        return object_has_attr(tx, obj, attr)
    return None


def hasattr_(tx, obj: VariableTracker, name: VariableTracker) -> VariableTracker:
    attr = name.as_python_constant()
    answer = _has_attr(tx, obj, attr)
    if answer is None:
        # What hasattr itself does: the attribute read (a __getattr__ or a property inlined),
        # an AttributeError meaning False (a read that cannot be traced stays Unsupported).
        answer = lookup_attr(tx, obj, attr) is not None
    return ConstantVariable(answer)


def type_(tx, obj: VariableTracker) -> VariableTracker:
    if isinstance(obj, TensorVariable):
        obj.realize(tx)
    return class_of(tx, obj)


def class_of(tx, obj: VariableTracker) -> VariableTracker:
    """type(obj). A user class is read through the object (`L['self'].__class__`, or the source of
    the class an object made here was made from), so what the trace reads of the class (a counter
    in a class attribute) is guarded; a class of torch's or a builtin is a constant."""

    cls = obj.python_type()
    if getattr(cls, "__module__", "builtins").split(".")[0] in ("torch", "builtins"):
        return tx.wrap(cls, None, guard=False)
    if isinstance(obj, NewObjectVariable):
        return tx.wrap(cls, obj.cls_source, guard=obj.cls_source is not None)
    if obj.source is not None:
        return tx.wrap(cls, AttrSource(obj.source, "__class__"))
    return tx.wrap(cls, None, guard=False)


def id_(tx, obj: VariableTracker) -> VariableTracker:
    """id() of an object the trace holds (guarded to stay that object, as torch._dynamo guards
    it); of a tensor the graph makes or an object made while tracing, a FakeIdVariable (its number
    unknown, its identity known); others are Unsupported."""
    known = obj.real_object()
    if known is UNKNOWN_OBJECT and obj.source is not None:  # a list or dict the frame read
        known = tx.side_effects.real_value(obj, UNKNOWN_OBJECT)
    if isinstance(obj, ConstantVariable) and (obj.value is None or type(obj.value) is bool):
        return ConstantVariable(id(obj.value))  # (singletons: one object for the whole process)
    if isinstance(obj, TensorVariable):
        graph_input = tx.output.input_of(obj.example)
        if graph_input is None:
            return FakeIdVariable(obj.example)  # (one FakeTensor per tensor the graph makes)
        source = obj.source or graph_input.source
        # (an input passed in: the tensor the frame holds, recorded for the guard on its aliasing)
        known = tx.output.guards.aliasing.get(source, UNKNOWN_OBJECT)
        if known is UNKNOWN_OBJECT:
            raise Unsupported(f"id() of {obj}")
        tx.output.guards.add(source, GuardKind.ID_MATCH, known)
        return ConstantVariable(id(known))
    if known is UNKNOWN_OBJECT and obj.source is None and not isinstance(obj, ConstantVariable):
        token = obj if is_fresh_container(obj) else obj.identity()  # (made while tracing: its one tracker)
        if token is not UNKNOWN_OBJECT:
            return FakeIdVariable(token)
    if known is UNKNOWN_OBJECT or isinstance(obj, ConstantVariable):
        raise Unsupported(f"id() of {obj}")
    if obj.source is not None:
        tx.output.guards.add(obj.source, GuardKind.ID_MATCH, known)
    return ConstantVariable(id(known))


def fake_id_compare(fn: Callable) -> Callable:
    """`id(a) == id(b)` where either is a FakeIdVariable: equal when they are ids of one object; a
    fake id against any other number is not known while tracing."""
    def handler(tx, a: VariableTracker, b: VariableTracker) -> VariableTracker | None:
        if not (isinstance(a, FakeIdVariable) or isinstance(b, FakeIdVariable)):
            return None
        if not (isinstance(a, FakeIdVariable) and isinstance(b, FakeIdVariable)):
            raise Unsupported("an id() of an object made while tracing compared with another number")
        return ConstantVariable(fn(a.token is b.token, True))
    return handler


def vars_(tx, obj: VariableTracker) -> VariableTracker:
    """vars(obj) is the `__dict__` attribute, read as `obj.__dict__` is (`vars()` is locals(),
    BuiltinVariable.call)."""
    return tx.load_attr(obj, "__dict__")


def delattr_(tx, obj: VariableTracker, name: VariableTracker) -> VariableTracker:
    obj.delete_attr(tx, name.as_python_constant())
    return ConstantVariable(None)


def setattr_(tx, obj: VariableTracker, name: VariableTracker, value: VariableTracker) -> VariableTracker:
    obj.store_attr(tx, name.as_python_constant(), value)
    return ConstantVariable(None)

"""Object's attribute protocol for instances of user classes, as CPython's slots for a Python class
run it: the class's own `__getattribute__`, `__getattr__` and `__setattr__` inlined, descriptors
written in Python (`__get__`/`__set__`) inlined, `__slots__` members stored plainly, and `for v in
obj` through the class's `__iter__`. objects.py's trackers (an instance read from the frame, one
made in the trace) call these; each takes the instance's tracker and its class.
"""
from __future__ import annotations

import functools
import types
from typing import Any, Callable

import torch

from ...exc import Unsupported
from ...guards import GuardKind
from ...source import AttrSource, ItemSource, Source
from .base import VariableTracker, class_attribute, mro_lookup
from .constant import ConstantVariable
from .exceptions import RaisedException
from .iterators import iterate
from .methods import InlinedMethodVariable, inline_getattribute
from .static_lookup import PLAIN_DESCRIPTORS, is_data_descriptor
from .tensor import TensorVariable


def getattr_protocol(tx, obj: VariableTracker, cls: type, class_attr_source: Callable[[str], Source | None],
                     name: str) -> VariableTracker:
    """`obj.name` as CPython's slot for a Python class does it: the class's own `__getattribute__`
    (inlined) or object's generic lookup (`obj.generic_getattr`); if that raises AttributeError
    (in the trace), the class's `__getattr__`, inlined."""
    getattribute = class_attribute(cls, "__getattribute__", None)
    try:
        if isinstance(getattribute, types.FunctionType):
            return _inline_getattribute(tx, obj, getattribute, class_attr_source, name)
        return obj.generic_getattr(tx, name)
    except RaisedException as raised:
        fallback = class_attribute(cls, "__getattr__", None)
        if fallback is None or not issubclass(raised.value.exc_type, AttributeError):
            raise
        if not isinstance(fallback, types.FunctionType):
            raise Unsupported(f"{cls.__qualname__}.__getattr__ is a {type(fallback).__name__}") from None
        return tx.inline_call(fallback, [obj, ConstantVariable(name)], {}, fn_source=class_attr_source("__getattr__"))


def _inline_getattribute(tx, obj: VariableTracker, getattribute: types.FunctionType,
                         class_attr_source: Callable[[str], Source | None], name: str) -> VariableTracker:
    """The class's own `__getattribute__(obj, name)`, inlined, or the value its last inlining gave
    (inline_getattribute)."""
    return inline_getattribute(tx, obj, getattribute, class_attr_source("__getattribute__"), name)


def setattr_protocol(tx, obj: VariableTracker, cls: type, class_attr_source: Callable[[str], Source | None],
                     name: str, value: VariableTracker) -> None:
    """`obj.name = value`: the class's own `__setattr__` (inlined; it ends in
    `super().__setattr__`, object's store), or object's store itself."""
    # (the metaclass's own __setattr__ is for stores on the class: it has no say here)
    setattr_fn = mro_lookup(cls, "__setattr__")
    if isinstance(setattr_fn, types.FunctionType):
        tx.inline_call(setattr_fn, [obj, ConstantVariable(name), value], {}, fn_source=class_attr_source("__setattr__"))
        return
    if python_descriptor(cls, name, setter=True) is None and property_setter(cls, name) is None:
        check_plain_store(cls, name)
    elif setattr_fn is not object.__setattr__:
        raise Unsupported(f"assignment to attribute {name!r} of {cls.__qualname__}, which defines __setattr__")
    obj.generic_setattr(tx, name, value)


def delattr_protocol(tx, obj: VariableTracker, cls: type, class_attr_source: Callable[[str], Source | None],
                     name: str) -> None:
    """`del obj.name`: the class's own `__delattr__` (inlined; it ends in
    `object.__delattr__(self, name)`), or object's deletion itself (`obj.generic_delattr`)."""
    delattr_fn = class_attribute(cls, "__delattr__", None)
    if isinstance(delattr_fn, types.FunctionType) and type(cls).__delattr__ is type.__delattr__:
        tx.inline_call(delattr_fn, [obj, ConstantVariable(name)], {}, fn_source=class_attr_source("__delattr__"))
        return
    if delattr_fn is not object.__delattr__:
        raise Unsupported(f"deletion of attribute {name!r} of a {cls.__qualname__}, whose __delattr__ is a "
                          f"{type(delattr_fn).__name__}")
    obj.generic_delattr(tx, name)


def check_plain_delete(cls: type, name: str) -> None:
    """Unsupported unless object's `del obj.name` only takes name out of the instance's __dict__
    (a descriptor of the class, a `__slots__` member included, would run instead)."""
    static = class_attribute(cls, name, None)
    if is_data_descriptor(static):
        raise Unsupported(f"deletion of attribute {name!r} of a {cls.__qualname__} through a descriptor")


_LOOKED_UP = object()


def python_descriptor(cls: type, name: str, setter: bool = False, static: Any = _LOOKED_UP) -> Any:
    """The class attribute `name` of cls if it is a descriptor whose `__get__` (`setter`: whose
    `__set__`) is a Python function, as a descriptor class the user wrote; None otherwise
    (properties and partialmethods are modelled apart, functions and builtin descriptors read
    plainly). `static`: `class_attribute(cls, name, None)`, when the caller has it already."""
    if static is _LOOKED_UP:
        static = class_attribute(cls, name, None)
    if static is None or isinstance(static, (property, functools.partialmethod, *PLAIN_DESCRIPTORS)):
        return None
    method = class_attribute(type(static), "__set__" if setter else "__get__", None)
    return static if isinstance(method, types.FunctionType) else None


def property_setter(cls: type, name: str) -> types.FunctionType | None:
    """The Python setter of a property `cls` holds under `name` (the one `obj.name = v` calls),
    or None: no property there, or one whose setter is missing or not a Python function."""
    static = class_attribute(cls, name, None)
    if isinstance(static, property) and isinstance(static.fset, types.FunctionType):
        return static.fset
    return None


def _descriptor_tracker(tx, cls: type, cls_source: Source | None, name: str, descriptor: Any) -> VariableTracker:
    """The descriptor object, read from the dict of the class on cls's MRO that holds it (reading
    `cls.name` would call its __get__); guarded like any object read from the frame."""
    if cls_source is None:
        return tx.wrap(descriptor, None)
    index = next(i for i, klass in enumerate(cls.__mro__) if name in vars(klass))
    source = ItemSource(AttrSource(ItemSource(AttrSource(cls_source, "__mro__"), index), "__dict__"), name)
    tx.output.guards.add(source, GuardKind.ID_MATCH, descriptor)  # the class still holds this one
    return tx.wrap(descriptor, source)


def descriptor_get(tx, obj: VariableTracker, cls: VariableTracker, name: str, descriptor: Any) -> VariableTracker:
    """`obj.name` through a descriptor of the class: `type(d).__get__(d, obj, cls)`, inlined."""
    d = _descriptor_tracker(tx, cls.as_python_constant(), cls.source, name, descriptor)
    return tx.inline_call(class_attribute(type(descriptor), "__get__", None), [d, obj, cls], {})


def descriptor_set(tx, obj: VariableTracker, cls: VariableTracker, name: str, descriptor: Any,
                   value: VariableTracker) -> None:
    """`obj.name = value` through a data descriptor: `type(d).__set__(d, obj, value)`, inlined."""
    d = _descriptor_tracker(tx, cls.as_python_constant(), cls.source, name, descriptor)
    tx.inline_call(class_attribute(type(descriptor), "__set__", None), [d, obj, value], {})


def iterate_object(tx, obj: VariableTracker, cls: type,
                   class_attr_source: Callable[[str], Source | None]) -> list[VariableTracker]:
    """The items of `for v in obj`: the iterator the class's own `__iter__` returns (inlined; a
    generator, `iter(a dict)`...), taken to its end."""
    method = class_attribute(cls, "__iter__", None)
    getitem = class_attribute(cls, "__getitem__", None)
    if method is None and isinstance(getitem, types.FunctionType):
        return _index_until_error(tx, obj, getitem, class_attr_source("__getitem__"))
    if not isinstance(method, types.FunctionType):
        raise Unsupported(f"iteration over a {cls.__qualname__}"
                          f"{'' if method is None else ', whose __iter__ is a ' + type(method).__name__}")
    iterator = tx.inline_call(method, [obj], {}, fn_source=class_attr_source("__iter__"))
    next_method = class_attribute(iterator.python_type(), "__next__", None)
    if isinstance(next_method, types.FunctionType):  # an iterator class of the user's (often obj itself)
        return _drain(tx, iterator, next_method, class_attr_source("__next__") if iterator is obj else None)
    if iterator is obj:
        raise Unsupported(f"iteration over a {cls.__qualname__}, its own iterator, whose __next__ is "
                          f"a {type(next_method).__name__}")
    return list(iterate(tx, iterator))


_MAX_ITEMS = 10_000  # an iterator that never stops would trace forever


def _index_until_error(tx, obj: VariableTracker, getitem: types.FunctionType,
                       source: Source | None) -> list[VariableTracker]:
    """The items of a class with `__getitem__` and no `__iter__` (the old sequence protocol, as
    CPython's iter() makes it): obj[0], obj[1]... inlined until one raises IndexError or
    StopIteration."""
    items = []
    while len(items) < _MAX_ITEMS:
        try:
            items.append(tx.inline_call(getitem, [obj, ConstantVariable(len(items))], {}, fn_source=source))
        except RaisedException as raised:
            if issubclass(raised.value.exc_type, (IndexError, StopIteration)):
                return items
            raise
    raise Unsupported(f"a {obj.python_type().__qualname__} indexed for over {_MAX_ITEMS} items")


def _drain(tx, iterator: VariableTracker, next_method: types.FunctionType, source: Source | None) -> list[VariableTracker]:
    """The items of a user's iterator: its Python `__next__` inlined until it raises StopIteration
    (any other exception leaves the loop, as in Python)."""
    items = []
    while len(items) < _MAX_ITEMS:
        try:
            items.append(tx.inline_call(next_method, [iterator], {}, fn_source=source))
        except RaisedException as raised:
            if issubclass(raised.value.exc_type, StopIteration):
                return items
            raise
    raise Unsupported(f"an iterator of a {iterator.python_type().__qualname__} that gives over {_MAX_ITEMS} items")


def metaclass_getattr(tx, cls_var: VariableTracker, name: str) -> VariableTracker | None:
    """`cls.name` where type.__getattribute__ takes the answer from cls's metaclass, a Python
    subclass of type: a property or Python descriptor of the metaclass (a data descriptor there
    comes before the class's own attribute), a method of the metaclass bound to the class (when
    the class's MRO has no such attribute), or, when neither has it, the metaclass's own
    `__getattr__`, inlined. None: the class's own lookup answers (read statically by the caller).
    What the trace takes from the metaclass is read from its MRO's dicts and pinned by identity."""
    cls = cls_var.as_python_constant()
    meta = type(cls)
    if meta is type:
        return None
    if isinstance(mro_lookup(meta, "__getattribute__"), types.FunctionType):
        raise Unsupported(f"attribute {name!r} of class {cls.__qualname__}, whose metaclass defines __getattribute__")
    meta_var = tx.wrap(meta, AttrSource(cls_var.source, "__class__") if cls_var.source is not None else None)
    found = mro_lookup(meta, name)
    if found is not None and is_data_descriptor(found) and not isinstance(found, PLAIN_DESCRIPTORS):
        if isinstance(found, property):
            if not isinstance(found.fget, types.FunctionType):
                raise Unsupported(f"property {name!r} of the metaclass of {cls.__qualname__}, whose getter is not Python")
            _descriptor_tracker(tx, meta, meta_var.source, name, found)  # (pins the property)
            return tx.inline_call(found.fget, [cls_var], {})
        if python_descriptor(meta, name, static=found) is not None:
            return descriptor_get(tx, cls_var, meta_var, name, found)
        return None
    if any(name in vars(klass) for klass in cls.__mro__):
        return None
    if isinstance(found, types.FunctionType):  # a method of the metaclass: bound to the class
        _descriptor_tracker(tx, meta, meta_var.source, name, found)
        return InlinedMethodVariable(found, cls_var)
    if found is not None:
        return None
    fallback = mro_lookup(meta, "__getattr__")
    if not isinstance(fallback, types.FunctionType):
        return None
    fn = _descriptor_tracker(tx, meta, meta_var.source, "__getattr__", fallback)
    return tx.inline_call(fallback, [cls_var, ConstantVariable(name)], {}, fn_source=fn.source)


def check_plain_store(cls: type, name: str, own_setattr_ran: bool = False) -> None:
    """Unsupported unless `obj.name = value` (or, `own_setattr_ran`, object.__setattr__ at the end
    of the class's own __setattr__) only puts value in the instance's __dict__. What the instance
    sees is its class's MRO (not the metaclass's `__setattr__`, nor its `__name__`)."""
    if not own_setattr_ran and mro_lookup(cls, "__setattr__") is not object.__setattr__:
        raise Unsupported(f"assignment to attribute {name!r} of {cls.__qualname__}, which defines __setattr__")
    static = mro_lookup(cls, name)
    if is_plain_member(static):  # a `__slots__` member (or one like it): stored in the object, as plainly
        return
    if is_data_descriptor(static):
        raise Unsupported(f"assignment to attribute {name!r} of {cls.__qualname__} through a descriptor")


_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement (not a builtin's)


def store_class_attribute(tx, cls_var: VariableTracker, name: str, value: VariableTracker,
                          through_type: bool = False) -> None:
    """`Cls.name = value` (`Cls.count += 1`, a class attribute written in the frame): replayed
    after the graph as a store on the class (side_effects.py), and seen by every later read in the
    trace of `Cls.name`, of a subclass's and of an instance's that reaches the class
    (SideEffects.load_class_attr). A plain value over a plain value: a store that would change
    how instances behave (a special method, a function, a descriptor, through the metaclass's
    __setattr__ or a data descriptor of the metaclass) is Unsupported, since those lookups read
    the real class while tracing.

    A metaclass's own `__setattr__` written in Python is inlined; it ends in type's store
    (`super().__setattr__(name, value)`: TypeSetattrVariable), which is this with `through_type`."""
    cls = cls_var.as_python_constant()
    where = f"assignment to attribute {name!r} of class {cls.__qualname__}"
    if not cls.__flags__ & _HEAPTYPE:
        raise Unsupported(f"{where} (a builtin class)")
    if type(cls).__setattr__ is not type.__setattr__ and not through_type:
        meta_setattr = mro_lookup(type(cls), "__setattr__")
        if not isinstance(meta_setattr, types.FunctionType):
            raise Unsupported(f"{where}, whose metaclass's __setattr__ is a {type(meta_setattr).__name__}")
        meta_source = AttrSource(cls_var.source, "__class__") if cls_var.source is not None else None
        fn = _descriptor_tracker(tx, type(cls), meta_source, "__setattr__", meta_setattr)
        tx.inline_call(meta_setattr, [cls_var, ConstantVariable(name), value], {}, fn_source=fn.source)
        return
    if name.startswith("__") and name.endswith("__"):
        raise Unsupported(f"{where} (a special attribute: it changes how the class works)")
    for meta in type(cls).__mro__:
        found = vars(meta).get(name)
        if found is not None and hasattr(type(found), "__set__"):
            raise Unsupported(f"{where} through a data descriptor of its metaclass")
    old = class_attribute(cls, name, None)
    try:
        new_type = value.python_type()
    except Unsupported:
        new_type = None
    if hasattr(type(old), "__get__") or new_type is None or hasattr(new_type, "__get__"):
        raise Unsupported(f"{where} (a method or descriptor, old or new)")
    tx.side_effects.store_attr(cls_var, name, value)


class TypeSetattrVariable(VariableTracker):
    """`type.__setattr__` bound to a class, reached through `super().__setattr__` in its
    metaclass's own `__setattr__`: the class attribute store itself (store_class_attribute)."""

    def __init__(self, cls_var: VariableTracker):
        super().__init__()
        self.cls_var = cls_var

    def call(self, tx, args, kwargs) -> VariableTracker:
        if len(args) != 2 or kwargs or not args[0].is_python_constant():
            raise Unsupported("type.__setattr__ called with other arguments than (name, value)")
        store_class_attribute(tx, self.cls_var, args[0].as_python_constant(), args[1], through_type=True)
        return ConstantVariable(None)


# The attributes of an autograd.Function's context (torch._C._FunctionBase, the `ctx` its forward
# gets when apply runs for real) that FunctionCtx's methods set: `save_for_backward` is
# `self.to_save = tensors`, `mark_non_differentiable` `self.non_differentiable = args`... Their C
# setters only keep the object they are given (python_function.cpp's setObject), read by apply
# after forward returns: a store through one is a plain store, replayed after the graph.
_STORING_GETSETS = frozenset(id(vars(torch._C._FunctionBase)[name]) for name in
                             ("to_save", "non_differentiable", "dirty_tensors", "saved_for_forward"))


def is_plain_member(static: Any) -> bool:
    """A member descriptor made by a class's `__slots__`, or a C getset of the autograd context
    that only keeps what it is given: setting it runs no Python code and stores the value as is."""
    return isinstance(static, types.MemberDescriptorType) or id(static) in _STORING_GETSETS


def realize_stored(tx, value: VariableTracker) -> None:
    """A graph input stored as an attribute of an object is realized there by torch._dynamo (its
    placeholder made then: see graph_inputs.order_inputs_as_dynamo), unlike one put in a list or
    passed to a function."""
    if isinstance(value, TensorVariable):
        value.realize(tx)

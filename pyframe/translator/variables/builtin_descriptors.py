"""Builtin methods reached as descriptors: a builtin class's own method (a slot wrapper such as
`dict.__setitem__` or `int.__add__`, a method descriptor such as `list.append` or `dict.get`) read
from a class and called with the instance first, or bound to an instance past the instance's own
lookup.

Python reaches one so in three ways, all of which end here:

  * on a class: `dict.__setitem__(self, k, v)`, `type(self).__getitem__(self, k)`, `Base.m(self)`
    (builder.py wraps the descriptor read from the class with wrap_builtin_descriptor; builtins.py,
    one read from a builtin);
  * through super(): `super().__setitem__(k, v)` in a dict subclass or in a mixin that precedes
    the builtin on the MRO (super_object.py binds the descriptor it finds to the instance);
  * as a method-wrapper or builtin method bound to an object (`super().__setitem__` held across a
    graph break: wrap_bound_builtin_method reads `__self__` and finds the descriptor);
  * in a class body (`push = list.append`), read through an instance: `bind_to_instance`.

`call_descriptor` maps the descriptor and the instance to what the instance's tracker already models
for the builtin's own method, whatever the instance's class overrides: object's attribute protocol
(`ObjectSlotMethodVariable`), a dict subclass's `call_builtin` (dict_subclass.py), the base's method
of a list, tuple, set, int, float or str subclass (container_subclass.py), or, on a plain builtin
value, the operation its tracker does (builtin_methods.py). An instance of the wrong class raises
Python's TypeError in the traced program; a method that is not modelled is a graph break naming it.
"""
from __future__ import annotations

import types
from typing import Any, Callable

from ...exc import Unsupported
from ...guards import GuardKind
from ...source import AttrSource, Source
from .base import UNKNOWN_OBJECT, VariableTracker
from .builtin_methods import OWNERS, call_on_plain_value, is_plain_value
from .constant import ConstantVariable
from .container_subclass import ContainerSubclassMixin, as_base_value
from .dict_subclass import DictSubclassMixin
from .exceptions import raise_symbolic
from .methods import ObjectSlotMethodVariable

_DESCRIPTOR_TYPES = (types.MethodDescriptorType, types.WrapperDescriptorType)
_BOUND_TYPES = (types.MethodWrapperType, types.BuiltinMethodType)

# object's methods modelled by modules above this one: name -> handler(tx, obj, args, kwargs)
# (reduction.py: the pickle protocol's __reduce_ex__, __reduce__ and __getstate__)
_OBJECT_METHODS: dict[str, Callable[..., VariableTracker]] = {}


def register_object_method(name: str, handler: Callable[..., VariableTracker]) -> None:
    """Let `object.<name>(obj, *args, **kwargs)` be `handler(tx, obj, args, kwargs)`."""
    _OBJECT_METHODS[name] = handler


def is_builtin_descriptor(value: Any) -> bool:
    """A method of one of the modelled builtin classes as its class holds it (`list.append`,
    `int.__add__`, `object.__setattr__`)."""
    if not isinstance(value, _DESCRIPTOR_TYPES):
        return False
    owner = value.__objclass__
    return owner in OWNERS and vars(owner).get(value.__name__) is value


def descriptor_of_bound(method: Any) -> Any:
    """For a method-wrapper or builtin method bound to an object (`d.__setitem__`, or what
    `super().__setitem__` gave), the builtin descriptor it is bound from; None if it is none of the
    modelled ones (a method bound to a class or a module, a function of an extension)."""
    if not isinstance(method, _BOUND_TYPES):
        return None
    obj = method.__self__
    if obj is None or isinstance(obj, (type, types.ModuleType)):
        return None
    for klass in type(obj).__mro__:
        found = vars(klass).get(method.__name__)
        if is_builtin_descriptor(found) and found.__get__(obj) == method:
            return found
    return None


class BuiltinDescriptorVariable(VariableTracker):
    """A builtin's method read from its class (`obj` None: the instance is the first argument of a
    call), or bound to an instance past the instance's own lookup (`super().__setitem__`)."""

    def __init__(self, descriptor: Any, obj: VariableTracker | None = None, source: Source | None = None):
        super().__init__(source)
        self.descriptor, self.obj = descriptor, obj

    @property
    def owner(self) -> type:
        return self.descriptor.__objclass__

    @property
    def name(self) -> str:
        return self.descriptor.__name__

    def real_object(self) -> Any:
        return self.descriptor if self.obj is None else UNKNOWN_OBJECT

    def python_type(self) -> type:
        if self.obj is None:
            return type(self.descriptor)
        return types.MethodWrapperType if isinstance(self.descriptor, types.WrapperDescriptorType) \
            else types.BuiltinMethodType

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name == "__self__" and self.obj is not None:
            return self.obj
        if name == "__objclass__" and self.obj is None:
            return tx.wrap(self.owner, None, guard=False)
        if name in ("__name__", "__qualname__", "__doc__"):
            return ConstantVariable(getattr(self.descriptor, name))
        return super().var_getattr(tx, name)

    def bind_to_instance(self, tx, obj: VariableTracker) -> VariableTracker:
        return BuiltinDescriptorVariable(self.descriptor, obj) if self.obj is None else super().bind_to_instance(tx, obj)

    def call(self, tx, args, kwargs) -> VariableTracker:
        if self.obj is not None:
            return call_descriptor(tx, self.descriptor, self.obj, list(args), kwargs)
        if not args:
            raise_symbolic(TypeError, f"unbound method {self.owner.__name__}.{self.name}() needs an argument")
        return call_descriptor(tx, self.descriptor, args[0], list(args[1:]), kwargs)

    def rebuilt_from(self) -> list[VariableTracker]:
        return [] if self.obj is None else [self.obj]

    def reconstruct(self, cg) -> None:
        if self.obj is None:
            if self.source is not None:
                cg.load_source(self.source)
            else:
                cg.load_const(self.descriptor)
            return
        # the descriptor bound to the instance: owner.name.__get__(obj)
        cg.load_const(self.descriptor)
        cg.emit("LOAD_METHOD", "__get__")
        self.obj.reconstruct(cg)
        cg.call(1)

    def describe(self) -> str:
        bound = f" bound to {self.obj.describe()}" if self.obj is not None else ""
        return f"the builtin method {self.owner.__name__}.{self.name}{bound}"

    def __repr__(self) -> str:
        bound = f" of {self.obj!r}" if self.obj is not None else ""
        return f"BuiltinDescriptorVariable({self.owner.__name__}.{self.name}{bound})"


def call_descriptor(tx, descriptor: Any, obj: VariableTracker, args: list[VariableTracker],
                    kwargs: dict[str, VariableTracker]) -> VariableTracker:
    """`descriptor(obj, *args, **kwargs)`: the builtin's own method on `obj`, as `obj`'s tracker
    models it, whatever `obj`'s class overrides."""
    owner, name = descriptor.__objclass__, descriptor.__name__
    cls = obj.python_type()
    if not issubclass(cls, owner):
        raise_symbolic(TypeError, f"descriptor '{name}' for '{owner.__name__}' objects doesn't apply to a "
                                  f"'{cls.__name__}' object")

    def what() -> str:  # (described for a break only, not on every call)
        return f"{owner.__name__}.{name}() on {obj.describe()}"

    if owner is object:
        if name in ObjectSlotMethodVariable.NAMES:  # the plain attribute lookup, store, deletion
            return ObjectSlotMethodVariable(name, obj).call(tx, args, kwargs)
        if name == "__init__" and not args and not kwargs:  # (with arguments, Python's TypeError: left to it)
            return ConstantVariable(None)
        if name == "__eq__" and len(args) == 1 and not kwargs:  # identity, else NotImplemented
            mine, other = obj.identity(), args[0].identity()
            if mine is not UNKNOWN_OBJECT and other is not UNKNOWN_OBJECT:
                return ConstantVariable(True if mine is other else NotImplemented)
        if name in _OBJECT_METHODS:
            return _OBJECT_METHODS[name](tx, obj, args, kwargs)
        raise Unsupported(f"{what()} (object's {name} is not modelled)")
    if isinstance(obj, DictSubclassMixin):
        return obj.call_builtin(tx, name, args, kwargs, owner)
    if isinstance(obj, ContainerSubclassMixin):
        if owner is not obj.base:
            raise Unsupported(f"{what()}, an instance of a {obj.base.__name__} subclass")
        return obj.call_builtin(tx, name, args, kwargs)
    if is_plain_value(obj):
        if owner in (int, float, str):  # (an int subclass's instance as an argument: its value)
            args = [as_base_value(a) for a in args]
        return call_on_plain_value(tx, descriptor, obj, args, kwargs)
    raise Unsupported(f"{what()}, which pyframe does not model as a {owner.__name__}")


# -- what builder.py tries on a real value (its kinds' signature: the guards are None when the value
# is not guarded) ----------------------------------------------------------------------------------

def wrap_builtin_descriptor(tx, value: Any, source: Source | None, guard: bool, guards: Any) -> VariableTracker | None:
    """A builtin's method read from its class (`dict.__setitem__`, `list.append`, `int.__add__`,
    `object.__setattr__`, or `type(obj).__getitem__` that resolves to one), guarded by identity."""
    if not is_builtin_descriptor(value):
        return None
    if guards is not None:
        guards.add(source, GuardKind.ID_MATCH, value)
    return BuiltinDescriptorVariable(value, None, source)


def wrap_bound_builtin_method(tx, value: Any, source: Source | None, guard: bool, guards: Any) -> VariableTracker | None:
    """A builtin's method bound to an object (a method-wrapper such as `d.__setitem__`, or what
    `super().__setitem__` gave, held across a graph break): the descriptor bound to `__self__`,
    read through the method. Made anew by each read, so guarded by its type and qualified name
    (the owner's and the method's: `dict.__setitem__`), `__self__` by its own guards."""
    descriptor = descriptor_of_bound(value)
    if descriptor is None:
        return None
    if guards is not None:
        guards.add(source, GuardKind.TYPE_MATCH, type(value))
        guards.add(AttrSource(source, "__qualname__"), GuardKind.EQUALS_MATCH, value.__qualname__)
    obj = tx.wrap(value.__self__, AttrSource(source, "__self__") if source is not None else None, guard)
    return BuiltinDescriptorVariable(descriptor, obj)

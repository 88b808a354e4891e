"""How builtins and operators reach a user class's special methods, as Python does.

`a + b` on an instance of a user class inlines its `__add__` (or the other operand's `__radd__`,
`NotImplemented` passing the turn), `len(obj)` its `__len__`; `a == b` of instances without their
own `__eq__` is `a is b`; `a is b` is decided from the objects the trackers stand for, their types,
or their freshness. builtins.py consults these before its generic rules.
"""
from __future__ import annotations

import operator
import types
from typing import Callable, Sequence

from ...exc import Unsupported
from ...guards import GuardKind
from ...source import AttrSource, Source
from .base import UNKNOWN_OBJECT, VariableTracker, class_attribute, guard_class_attribute
from .constant import ConstantVariable
from .dict_subclass import DictSubclassMixin
from .dicts import DictVariable, DictViewVariable
from .lists import BaseListVariable, ListVariable, TupleVariable
from .mappingproxy import MadeMappingProxyVariable, MappingProxyVariable
from .new_module import NewModuleContainerVariable
from .frame_objects import UserObjectVariable
from .objects import NewObjectVariable
from .sets import SetVariable
from .tensor import TensorVariable
from .weakrefs import same_weakref


def is_tensor(vt: VariableTracker) -> bool:
    return isinstance(vt, TensorVariable)


_ARITHMETIC = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor",
               "lshift", "rshift")


_REFLECTED = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne",
              **{name: "r" + name for name in _ARITHMETIC}}


# operator function -> (method, reflected method, in-place method or None)
DUNDERS: dict[Callable, tuple[str, str | None, str | None]] = {
    **{getattr(operator, n + ("_" if n in ("and", "or") else "")): (f"__{n}__", f"__{_REFLECTED[n]}__", None)
       for n in _REFLECTED},
    **{getattr(operator, "i" + n): (f"__{n}__", f"__r{n}__", f"__i{n}__") for n in _ARITHMETIC},
    operator.neg: ("__neg__", None, None), operator.pos: ("__pos__", None, None),
    operator.invert: ("__invert__", None, None),
}


def python_method(vt: VariableTracker, name: str) -> tuple[Callable, Source | None] | None:
    """The Python function a user object's class defines for `name`, with where it is read from
    (its closure cells are read through that); None for other values."""

    if isinstance(vt, NewObjectVariable):
        cls, cls_source = vt.cls, vt.cls_source
    elif isinstance(vt, UserObjectVariable):
        cls = type(vt.value)
        cls_source = AttrSource(vt.source, "__class__") if vt.source is not None else None
    else:
        return None
    method = class_attribute(cls, name, None)
    if not isinstance(method, types.FunctionType):
        return None
    return method, AttrSource(cls_source, name) if cls_source is not None else None


def inline_special(tx, obj: VariableTracker, name: str, args: Sequence[VariableTracker]) -> VariableTracker | None:
    """`obj[k] = v` (`__setitem__`), `del obj[k]` (`__delitem__`) on an instance of a user class
    whose class defines that special method in Python: inlined, looked up on the type as CPython
    does, and guarded to stay the class's (a class patched after compiling recompiles); None if
    the class defines no Python function of that name."""
    found = python_method(obj, name)
    if found is None:
        return None
    if isinstance(obj, NewObjectVariable):
        obj._guard_class_member(tx, name, found[0])
    else:
        guard_class_attribute(tx, obj, name, check_instance=False)
    return tx.inline_call(found[0], [obj, *args], {}, fn_source=found[1])


def user_operator(tx, fn: Callable, args: Sequence[VariableTracker]) -> VariableTracker | None:
    """`a + b` where a (or, reflected, b) is an instance of a user class: its __add__ (__radd__)
    inlined, NotImplemented passing the turn as Python does; None if no user method applies."""
    name, reflected, inplace = DUNDERS[fn]
    if len(args) == 1:
        found = python_method(args[0], name)
        return tx.inline_call(found[0], [args[0]], {}, fn_source=found[1]) if found is not None else None
    a, b = args
    for method_name, this, other in ((inplace, a, b), (name, a, b), (reflected, b, a)):
        found = python_method(this, method_name) if method_name else None
        if found is not None:
            result = tx.inline_call(found[0], [this, other], {}, fn_source=found[1])
            if not (result.is_python_constant() and result.as_python_constant() is NotImplemented):
                return result
    if python_method(a, name) or python_method(b, reflected or name):
        raise Unsupported(f"operator {name} returned NotImplemented for both operands")
    if fn in (operator.eq, operator.ne) and identity_equality(a, b):
        return identity(fn is operator.ne)(tx, a, b)
    return None


def identity_equality(a: VariableTracker, b: VariableTracker) -> bool:
    """`a == b` is `a is b`: one is an instance of a user class that no class on its MRO gives
    __eq__/__ne__, and the other is too, or a builtin scalar (whose __eq__ declines a foreign type)."""

    def default_eq(vt: VariableTracker) -> bool:
        if isinstance(vt, NewObjectVariable):
            cls = vt.cls
        elif isinstance(vt, UserObjectVariable):
            cls = type(vt.value)
        else:
            return False
        return all(class_attribute(cls, m, None) is getattr(object, m) for m in ("__eq__", "__ne__"))

    def scalar(vt: VariableTracker) -> bool:
        return isinstance(vt, ConstantVariable) and type(vt.value) in (type(None), bool, int, float, str)

    return (default_eq(a) or default_eq(b)) and all(default_eq(v) or scalar(v) for v in (a, b))


# Mutable containers made while tracing: each BUILD_LIST / BUILD_MAP / BUILD_SET (or list(),
# dict(), a slice...) makes a new object with a tracker of its own, which every name bound to it
# shares (the tracker is the object), so two trackers are two objects.
_FRESH_CONTAINERS = (ListVariable, DictVariable, SetVariable)


def is_fresh_container(vt: VariableTracker) -> bool:
    """A list, dict or set made while tracing: its tracker is the object."""
    return type(vt) in _FRESH_CONTAINERS and vt.source is None


def identity(negate: bool) -> Callable:
    """`a is b` / `a is not b`: decided from the real objects the trackers stand for, from types
    (objects of different types are distinct), or from freshness (an object made while tracing is
    none of the frame's objects); Unsupported when none of these decides it."""
    def handler(tx, a: VariableTracker, b: VariableTracker) -> VariableTracker | None:
        if a.is_python_constant() and b.is_python_constant() and isinstance(a, ConstantVariable) \
                and isinstance(b, ConstantVariable):
            return None  # folded on the values themselves
        if a is b:
            return ConstantVariable(not negate)
        same = same_weakref(tx, a, b, _same_object)  # (a weakref made here: its referent decides)
        if same is not None:
            return ConstantVariable(same != negate)
        if is_tensor(a) and is_tensor(b):
            if a.node is not b.node and a.node.op == "placeholder" and b.node.op == "placeholder":
                # Two inputs (two locals naming one tensor, handed to a resume function): one
                # tensor under two sources has one FakeTensor (OutputGraph.add_input), and the
                # aliasing guard keeps the answer true, as torch._dynamo's DUPLICATE_INPUT does
                inputs = [tx.output.inputs.get(node.meta.get("source")) for node in (a.node, b.node)]
                if None in inputs:  # (a subgraph's own placeholder)
                    raise Unsupported("identity of two tensor inputs of a subgraph")
                for inp in inputs:
                    tx.output.guards.add_aliasing(inp.source, inp.example)
                if inputs[0].example is inputs[1].example:  # (realized in order: the first lends its name)
                    a.realize(tx)
                    b.realize(tx)
                    tx.output.compared_twins.update(inp.source for inp in inputs)
                return ConstantVariable((inputs[0].example is inputs[1].example) != negate)
            # A tensor made by the graph is a new object, distinct from every other.
            return ConstantVariable((a.node is b.node) != negate)
        for const, other in ((a, b), (b, a)):
            # `obj is None`: an object of the frame (its type guarded) is not a singleton of
            # another type; no need to pin it by identity (a new one each call is fine)
            if isinstance(const, ConstantVariable) and (const.value is None or type(const.value) is bool) \
                    and other.source is not None and tx.output.guards.has(other.source, GuardKind.TYPE_MATCH) \
                    and other.python_type() is not type(const.value):
                return ConstantVariable(negate)
        known_a, known_b = a.real_object(), b.real_object()
        if known_a is not UNKNOWN_OBJECT and known_b is not UNKNOWN_OBJECT:
            for vt, known in ((a, known_a), (b, known_b)):  # the answer holds while they are these objects
                if vt.source is not None and not isinstance(vt, ConstantVariable):
                    tx.output.guards.add(vt.source, GuardKind.ID_MATCH, known)
            return ConstantVariable((known_a is known_b) != negate)
        for known, other in ((known_a, b), (known_b, a)):
            if known is UNKNOWN_OBJECT:
                continue
            if other.source is None and not isinstance(other, TupleVariable):  # made while tracing
                return ConstantVariable(negate)
            try:
                other_type = other.python_type()
            except Unsupported:
                break
            if not isinstance(known, other_type):
                return ConstantVariable(negate)
        if isinstance(a, NewObjectVariable) or isinstance(b, NewObjectVariable):
            return ConstantVariable(negate)  # an instance made while tracing has one tracker: a is not b
        if all(is_fresh_container(vt) for vt in (a, b)):
            return ConstantVariable(negate)  # so has a list, dict or set made while tracing
        raise Unsupported(f"identity of {a} and {b}")
    return handler


def _same_object(tx, a: VariableTracker, b: VariableTracker) -> bool:
    """`a is b`, decided as `identity` decides it (two constants by their values)."""
    found = identity(False)(tx, a, b)
    return found.value if found is not None else a.as_python_constant() is b.as_python_constant()


def length(tx, obj: VariableTracker) -> VariableTracker | None:
    if isinstance(obj, TensorVariable):
        return obj.call_method(tx, "__len__", [], {})
    if isinstance(obj, (BaseListVariable, DictVariable, SetVariable, DictViewVariable)):
        return ConstantVariable(len(obj.items))
    if isinstance(obj, (MappingProxyVariable, MadeMappingProxyVariable, NewModuleContainerVariable)):
        return obj.call_method(tx, "__len__", [], {})
    found = python_method(obj, "__len__")
    if found is not None:  # a user class's __len__, inlined; len() insists on an int >= 0
        result = tx.inline_call(found[0], [obj], {}, fn_source=found[1])
        value = result.as_python_constant() if result.is_python_constant() else None
        if type(value) is not int or value < 0:
            raise Unsupported(f"len() of a {obj.python_type().__name__} whose __len__ returns {result}")
        return ConstantVariable(value)
    if isinstance(obj, DictSubclassMixin):  # a dict subclass keeping dict's __len__
        return obj.call_special(tx, "__len__", [])
    return None


def truth(tx, value: VariableTracker) -> bool:
    """bool(value), as a branch, `not` and bool() take it: for an instance of a user class its
    Python `__bool__` inlined (which must give a bool known while tracing), else its `__len__`
    (non-zero), else True when its class defines neither; the value's own `truth()` otherwise."""
    if not isinstance(value, (NewObjectVariable, UserObjectVariable)):
        return value.truth()
    cls = value.cls if isinstance(value, NewObjectVariable) else type(value.value)
    for name in ("__bool__", "__len__"):
        static = class_attribute(cls, name, None)
        if static is None:
            continue
        if not isinstance(static, types.FunctionType):
            return value.truth()  # (a builtin base's: not modelled here)
        result = inline_special(tx, value, name, [])
        known = result.as_python_constant() if result.is_python_constant() else None
        if name == "__bool__" and type(known) is not bool or name == "__len__" and (type(known) is not int or known < 0):
            raise Unsupported(f"bool() of a {cls.__qualname__} whose {name} returns {result}")
        return bool(known)
    if isinstance(value, UserObjectVariable):  # neither defined: the class must not gain them
        guard_class_attribute(tx, value, "__bool__", check_instance=False)
        guard_class_attribute(tx, value, "__len__", check_instance=False)
    return True


def text_of(kind: type) -> Callable:
    """The handler of `str(obj)` (kind `str`) or `repr(obj)` (kind `repr`) for an instance of a
    user class: its Python `__str__` / `__repr__` inlined (str falls to `__repr__` through
    object.__str__, as CPython's does), which must give a string known while tracing; None for
    other values and for a class whose method is a builtin's (object's own repr names an address)."""
    names = ("__str__", "__repr__") if kind is str else ("__repr__",)

    def handler(tx, obj: VariableTracker, *rest: VariableTracker, **kwargs: VariableTracker) -> VariableTracker | None:
        if rest or kwargs or not isinstance(obj, (NewObjectVariable, UserObjectVariable)):
            return None
        cls = obj.cls if isinstance(obj, NewObjectVariable) else type(obj.value)
        for name in names:
            static = class_attribute(cls, name, None)
            if isinstance(static, types.FunctionType):
                result = inline_special(tx, obj, name, [])
                if not (result.is_python_constant() and type(result.as_python_constant()) is str):
                    raise Unsupported(f"{kind.__name__}() of a {cls.__qualname__} whose {name} returns {result}")
                return result
            if static is not object.__str__:
                scalar = obj.builtin_scalar()  # an int, float or str subclass: the base's text of its value
                return ConstantVariable(static(scalar)) if scalar is not None else None
        return None

    return handler


def contains(tx, container: VariableTracker, item: VariableTracker) -> VariableTracker | None:
    """`item in container`: a user class's __contains__ inlined, or the container's own test."""
    if isinstance(container, DictSubclassMixin):  # its __contains__, inlined, or dict's
        result = container.call_special(tx, "__contains__", [item])
        return ConstantVariable(result.truth())  # `in` makes a bool of what __contains__ returns
    found = python_method(container, "__contains__")
    if found is not None:  # a user class's __contains__, inlined (`in` makes a bool of its result)
        return ConstantVariable(tx.inline_call(found[0], [container, item], {}, fn_source=found[1]).truth())
    if isinstance(container, (DictVariable, MappingProxyVariable, MadeMappingProxyVariable)):
        return container.call_method(tx, "__contains__", [item], {})
    if isinstance(container, SetVariable):
        return ConstantVariable(container.contains(tx, item))
    if isinstance(container, DictViewVariable) and container.kind == "keys":
        return container.call_method(tx, "__contains__", [item], {})
    if isinstance(container, BaseListVariable) and item.is_python_constant():
        return container.call_method(tx, "__contains__", [item], {})
    known, members = item.real_object(), container.real_object()
    if known is not UNKNOWN_OBJECT and type(members) is frozenset:  # a set of functions, classes...
        for vt, obj in ((item, known), (container, members)):  # (immutable: its identity fixes it)
            if vt.source is not None and not isinstance(vt, ConstantVariable):
                tx.output.guards.add(vt.source, GuardKind.ID_MATCH, obj)
        return ConstantVariable(known in members)
    return None

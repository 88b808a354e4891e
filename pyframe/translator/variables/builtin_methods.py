"""A builtin class's own method called on a plain value of that class: `list.append(l, x)`,
`tuple.__add__(t, u)`, `dict.__or__(a, b)`, `int.__add__(3, 4)`, `str.join(",", parts)`.

The value's class is the builtin itself, or a class that keeps the builtin's method under that name
(a bool's `int.__add__`, a named tuple's `tuple.__getitem__`): then `owner.name(value, *args)` is
`value.name(*args)`, which the value's tracker models (`call_method`), or, for a special method, the
protocol that calls it (`t[i]`, `len(l)`, `a | b`), which the builtins' handlers model. A binary
special method is its operator only where the operator cannot ask the other operand first (an
operand of the same class: no reflected method, no NotImplemented). A constant is computed with the
method itself. Anything else is a graph break that names the call (variables/builtin_descriptors.py
calls here for plain values; instances of user subclasses go to their own trackers).
"""
from __future__ import annotations

import collections
import operator
from typing import Any

from ...exc import Unsupported
from .base import VariableTracker, class_attribute, constant_args
from .constant import ConstantVariable
from .dicts import DictVariable
from .exceptions import raise_symbolic
from .lists import BaseListVariable
from .sets import SetVariable

# The builtin classes whose methods pyframe maps to what their values' trackers model.
OWNERS = (object, dict, collections.OrderedDict, list, tuple, set, frozenset, int, float, str, bool)

# Special methods whose protocol is the builtin or operator that calls them on the value's class.
_UNARY = {"__getitem__": operator.getitem, "__contains__": operator.contains, "__len__": len, "__iter__": iter,
          "__reversed__": reversed}
_BINARY = {"__add__": operator.add, "__mul__": operator.mul, "__rmul__": operator.mul, "__or__": operator.or_,
           "__and__": operator.and_, "__sub__": operator.sub, "__xor__": operator.xor, "__eq__": operator.eq,
           "__ne__": operator.ne, "__lt__": operator.lt, "__le__": operator.le, "__gt__": operator.gt,
           "__ge__": operator.ge, "__iadd__": operator.iadd, "__imul__": operator.imul, "__ior__": operator.ior,
           "__iand__": operator.iand, "__isub__": operator.isub, "__ixor__": operator.ixor}
_REPEATS = ("__mul__", "__rmul__", "__imul__")  # (a sequence times an int)

# dict's methods that read without the order: the same on an OrderedDict (or defaultdict), whose
# class has its own versions of some (dict's own keys, values, items and iteration follow the dict's
# storage, which an OrderedDict's move_to_end does not reorder: not modelled).
DICT_UNORDERED_READS = {"__getitem__", "__len__", "__contains__", "get"}


def is_plain_value(obj: VariableTracker) -> bool:
    """A value of a builtin class itself (a constant, a list, tuple, dict or set the trace holds),
    not an instance of a user's class."""
    return isinstance(obj, (ConstantVariable, DictVariable, BaseListVariable, SetVariable))


def call_on_plain_value(tx, descriptor: Any, obj: VariableTracker, args: list[VariableTracker],
                        kwargs: dict[str, VariableTracker]) -> VariableTracker:
    """`descriptor(obj, *args, **kwargs)`, `descriptor` being a method of one of OWNERS read from the
    class, and `obj` a plain value of a subclass of that class (checked by the caller)."""
    owner, name = descriptor.__objclass__, descriptor.__name__
    cls = obj.python_type()
    what = f"{owner.__name__}.{name}() on a {cls.__name__}"
    if isinstance(obj, ConstantVariable):
        return _fold(tx, descriptor, obj, args, kwargs, what)
    if class_attribute(cls, name, None) is not descriptor and not (owner is dict and name in DICT_UNORDERED_READS):
        raise Unsupported(f"{what}, whose class has a {name} of its own")
    if name in _UNARY:
        return tx.wrap(_UNARY[name], None, guard=False).call(tx, [obj, *args], kwargs)
    if name in _BINARY:
        if kwargs or len(args) != 1:
            raise Unsupported(f"{what} with {len(args)} arguments")
        other = args[0].python_type()
        if not (other is cls or (name in _REPEATS and other in (int, bool))):
            # (the operator would ask the other operand first, or where this method gives NotImplemented)
            raise Unsupported(f"{what} with a {other.__name__}")
        return tx.wrap(_BINARY[name], None, guard=False).call(tx, [obj, args[0]], {})
    if name.startswith("__") and name not in ("__setitem__", "__delitem__"):  # (the trackers' own methods)
        raise Unsupported(f"{what} (not modelled)")
    return obj.call_method(tx, name, args, kwargs)


def _fold(tx, descriptor: Any, obj: ConstantVariable, args: list[VariableTracker],
          kwargs: dict[str, VariableTracker], what: str) -> VariableTracker:
    """The method called on constants, now (`int.__add__(3, 4)`: 7; `int.__add__(3, 4.0)`:
    NotImplemented, as Python gives it). Its error is raised in the traced program."""
    if descriptor.__name__ == "join" and len(args) == 1 and not kwargs and not args[0].is_python_constant():
        # `",".join(p.upper() for p in parts)`: join takes all of its iterable's items first
        args = [tx.make_tuple(args[0].unpack(tx))]
    pargs, pkwargs = constant_args(args, kwargs, what)
    try:
        result = descriptor(obj.as_python_constant(), *pargs, **pkwargs)
    except Exception as e:
        if type(e).__module__ == "builtins" and all(type(a) in (str, int) for a in e.args):
            raise_symbolic(type(e), *e.args)
        raise Unsupported(f"{what} raises {type(e).__name__}: {e}") from e
    return tx.wrap_constant(result)

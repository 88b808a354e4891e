"""`copy.copy(x)` and `copy.deepcopy(x)` of the values a trace holds, as CPython's copy module
defines them, for instances of user classes and the containers that hold them.

copy.copy(x) of a user object (read from the frame, or made while tracing) is what copy.copy does:
`type(x).__copy__(x)` if the class has one (inlined); else the object's reduce, `x.__reduce_ex__(4)`
(a class's own inlined; object's is reduction.py's model of CPython's: `(copyreg.__newobj__, (cls,),
state, None, None)`, the state being the instance `__dict__` itself, paired with its slots' values
where it has `__slots__`), which `copy._reconstruct` turns into the copy (`reconstruct` below):
`cls.__new__(cls)` (a new object made in the trace, a NewObjectVariable, built after the graph if it
outlives it), then the state put in it: the class's `__setstate__(state)` (inlined) if it has one,
else `y.__dict__.update(state)` and `setattr(y, name, value)` for each slot. A shallow copy: its
attributes are the original's values, the same objects.

copy.deepcopy keys its memo by `id()`, which constants and objects made while tracing do not have, so
it is not inlined for these: what it would do is done here, with the same outcome, the memo keyed by
tracker (one tracker per object; each original kept alive while the memo is, as `copy._keep_alive`
keeps it). Constants are copied for real; functions and classes are their own copies (copy's
`_deepcopy_atomic`); lists, dicts, tuples and sets of constants are copied item by item (a tuple whose
items all copy to themselves is itself, as `copy._deepcopy_tuple` returns it); a user object is
copied through its reduce as copy.copy does, its arguments and state deep-copied (`_reconstruct`
with a memo), the copy in the memo before its state is copied. A user object whose lookup finds a
`__deepcopy__` is copied by it, given a new memo dict, when it is the object copy.deepcopy was called
with; met inside another (the memo then holds ids of copies made in the trace) it is a graph break.
Anything else at the top (a tensor, a module...) is left to the real copy.deepcopy, inlined.

Both leave to the real functions, inlined, an instance of a class that `copyreg.dispatch_table` or
copy's own tables name (their entries are read when tracing, not guarded: registering a class there
later is not seen by a compiled frame).
"""
from __future__ import annotations

import copy
import copyreg
import types
from typing import Any

from ...exc import Unsupported
from .base import VariableTracker
from .object_builtins import class_of, lookup_attr
from .constant import ConstantVariable
from .dicts import DictVariable
from .functions import UserFunctionVariable
from .frame_objects import UserObjectVariable
from .lists import FrameListVariable, ListVariable, TupleVariable
from .objects import NewObjectVariable
from .reduction import object_method
from .sets import SetVariable

_Memo = dict[int, tuple[VariableTracker, VariableTracker]]  # id(original tracker) -> (original, copy)


class DeepcopyFunctionVariable(UserFunctionVariable):
    """copy.deepcopy: a call with one argument whose copy is modelled here is done here; any other
    inlines the real function."""

    def call(self, tx, args, kwargs) -> VariableTracker:
        if len(args) == 1 and not kwargs and _copyable(tx, args[0]):
            return deep_copy(tx, args[0], {}, top=True)
        return super().call(tx, args, kwargs)


class CopyFunctionVariable(UserFunctionVariable):
    """copy.copy: a user object is copied here by copy's protocol (its `__copy__`, else its reduce);
    any other argument inlines the real function."""

    def call(self, tx, args, kwargs) -> VariableTracker:
        if len(args) == 1 and not kwargs and _copies_by_protocol(args[0]):
            return shallow_copy(tx, args[0])
        return super().call(tx, args, kwargs)


def _copies_by_protocol(obj: VariableTracker) -> bool:
    """obj is a user object whose copy this module makes: read from the frame (a source: its
    attributes can be read) or made while tracing, of a class no table of copy's or copyreg's
    names (those are left to the real functions)."""
    if not isinstance(obj, (UserObjectVariable, NewObjectVariable)):
        return False
    if isinstance(obj, UserObjectVariable) and obj.source is None:
        return False
    cls = obj.python_type()
    return cls not in copyreg.dispatch_table and cls not in copy._copy_dispatch \
        and cls not in copy._deepcopy_dispatch and not issubclass(cls, type)


def shallow_copy(tx, obj: VariableTracker) -> VariableTracker:
    """`copy.copy(obj)` of a user object (`_copies_by_protocol`): `cls.__copy__(obj)`, else the
    reduce `obj.__reduce_ex__(4)` reconstructed."""
    copier = lookup_attr(tx, class_of(tx, obj), "__copy__")  # (on the class: `getattr(cls, "__copy__", None)`)
    if copier is not None:
        return copier.call(tx, [obj], {})
    return _from_reduce(tx, obj, None)


def _from_reduce(tx, obj: VariableTracker, memo: _Memo | None) -> VariableTracker:
    """What copy.copy (memo None) and copy.deepcopy do with an object they have no copier for:
    `rv = obj.__reduce_ex__(4)`; a string means the object is its own copy; else
    `_reconstruct(obj, memo, *rv)`."""
    reductor = object_method(tx, obj, "__reduce_ex__")
    if reductor is None:
        raise Unsupported(f"copy of {obj.describe()}, which has no __reduce_ex__")
    rv = reductor.call(tx, [ConstantVariable(4)], {})
    if isinstance(rv, ConstantVariable) and isinstance(rv.value, str):
        return obj
    return reconstruct(tx, obj, rv, memo)


def _is_none(vt: VariableTracker) -> bool:
    return isinstance(vt, ConstantVariable) and vt.value is None


def reconstruct(tx, x: VariableTracker, rv: VariableTracker, memo: _Memo | None) -> VariableTracker:
    """`copy._reconstruct(x, memo, *rv)`, rv being a reduce value `(func, args[, state[, listiter[,
    dictiter]]])`: `y = func(*args)` (the arguments deep-copied when there is a memo, y put in it),
    then the state (deep-copied likewise) given to `y.__setstate__` if y has one, else put in
    `y.__dict__` (`update`) and, for the second of a `(dict, slots)` pair, set with setattr."""
    parts = rv.unpack(tx) if rv.python_type() is tuple else None
    if parts is None or not 2 <= len(parts) <= 5:
        raise Unsupported(f"copy of {x.describe()}, whose reduce gave {rv.describe()}")
    func, args, state, listiter, dictiter = [*parts, *[ConstantVariable(None)] * (5 - len(parts))]
    if not (_is_none(listiter) and _is_none(dictiter)):
        raise Unsupported(f"copy of {x.describe()}, whose reduce gives items to append or set")
    deep = memo is not None
    args = list(args.unpack(tx))
    if deep:
        args = [deep_copy(tx, arg, memo) for arg in args]
    y = func.call(tx, args, {})
    if deep:
        memo[id(x)] = (x, y)
    if _is_none(state):
        return y
    if deep:
        state = deep_copy(tx, state, memo)
    if lookup_attr(tx, y, "__setstate__") is not None:  # hasattr(y, '__setstate__')
        tx.load_attr(y, "__setstate__").call(tx, [state], {})
        return y
    slotstate = None
    if issubclass(state.python_type(), tuple) and len(state.unpack(tx)) == 2:
        state, slotstate = state.unpack(tx)
    if not _is_none(state):
        tx.load_attr(y, "__dict__").call_method(tx, "update", [state], {})
    if slotstate is not None and not _is_none(slotstate):
        if not isinstance(slotstate, DictVariable):
            raise Unsupported(f"copy of {x.describe()}, whose slot state is {slotstate.describe()}")
        for key, value in list(slotstate.items.items()):
            if type(key) is not str:
                raise Unsupported(f"copy of {x.describe()}, whose slot state has a key {key!r}")
            y.store_attr(tx, key, value)  # setattr(y, key, value)
    return y


def _copyable(tx, vt: VariableTracker) -> bool:
    """The deep copy of vt is one this module makes (checked before any copy: what is not is left
    to the real copy.deepcopy). A user object's state is what its reduce gives, known only when it
    runs: met there, a value this module does not copy is a graph break."""
    if isinstance(vt, ConstantVariable) or _atomic(vt):
        return True
    if type(vt) in (TupleVariable, ListVariable, FrameListVariable):
        return all(_copyable(tx, item) for item in vt.unpack(tx))
    if isinstance(vt, DictVariable) and vt.python_type() is dict:
        return all(type(k) in (str, int) for k in vt.items) and all(_copyable(tx, v) for v in vt.items.values())
    if isinstance(vt, SetVariable):
        return vt.set_type in (set, frozenset) and vt.is_python_constant()
    return _copies_by_protocol(vt)


def _atomic(vt: VariableTracker) -> bool:
    """A value copy.deepcopy gives back as it is (`_deepcopy_atomic`): a class, a function."""
    try:
        cls = vt.python_type()
    except Unsupported:
        return False
    return issubclass(cls, type) or cls in (types.FunctionType, types.BuiltinFunctionType)


def deep_copy(tx, vt: VariableTracker, memo: _Memo, top: bool = False) -> VariableTracker:
    """The tracker of `copy.deepcopy(vt, memo)` (`top`: of `copy.deepcopy(vt)`, its memo new)."""
    if id(vt) in memo:
        return memo[id(vt)][1]
    if isinstance(vt, ConstantVariable):
        value = vt.as_python_constant()
        copied = copy.deepcopy(value)
        return vt if copied is value else ConstantVariable(copied)
    if _atomic(vt):
        return vt
    if type(vt) is TupleVariable:
        items = [deep_copy(tx, item, memo) for item in vt.items]
        if id(vt) in memo:  # (a list in it held the tuple itself)
            return memo[id(vt)][1]
        result: VariableTracker = vt if all(a is b for a, b in zip(items, vt.items)) else TupleVariable(items)
    elif type(vt) in (ListVariable, FrameListVariable):
        result = ListVariable([])
        memo[id(vt)] = (vt, result)
        result.items.extend(deep_copy(tx, item, memo) for item in vt.unpack(tx))
    elif isinstance(vt, DictVariable) and vt.python_type() is dict:
        result = DictVariable({})
        memo[id(vt)] = (vt, result)
        for key, value in list(vt.items.items()):
            if type(key) not in (str, int):
                raise Unsupported(f"copy.deepcopy of a dict with a key {key!r}")
            result.items[key] = deep_copy(tx, value, memo)
    elif isinstance(vt, SetVariable) and vt.set_type in (set, frozenset) and vt.is_python_constant():
        # set's reduce `(set, (list(s),), None)`: a new set of the copies of its constants (themselves)
        result = SetVariable(set(vt.values), None, vt.set_type)
    elif _copies_by_protocol(vt):
        copier = lookup_attr(tx, vt, "__deepcopy__")  # (the instance's lookup: `getattr(x, "__deepcopy__", None)`)
        if copier is None:
            result = _from_reduce(tx, vt, memo)
        elif top:  # `copier(memo)`, the memo a new dict (what the copier puts there is seen by no one else)
            result = copier.call(tx, [DictVariable({})], {})
        else:
            raise Unsupported(f"copy.deepcopy of {vt.describe()}, whose __deepcopy__ would take copy's memo, "
                              f"a dict keyed by ids")
        if result is vt:  # (its own copy: not in the memo)
            return result
    else:
        raise Unsupported(f"copy.deepcopy of {vt.describe()}, met in a value pyframe copies")
    memo[id(vt)] = (vt, result)
    return result


def is_deepcopy(value: Any) -> bool:
    return value is copy.deepcopy and isinstance(value, types.FunctionType)


def is_copy(value: Any) -> bool:
    return value is copy.copy and isinstance(value, types.FunctionType)

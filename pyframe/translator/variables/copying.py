"""`copy.deepcopy(x)` and `copy.copy(x)` of the values a trace holds: user objects whose copy is
their `__dict__`'s.

copy.deepcopy keys its memo by `id()`, which objects made while tracing do not have, so it is not
inlined for these: what it would do is done here, with the same outcome. A user object whose class
copies the default way (object's `__reduce_ex__` and `__getstate__`, no `__deepcopy__`, no
`__setstate__`, no `copyreg` entry) becomes a new instance (`object.__new__(cls)`, a NewObjectVariable)
whose attributes are the deep copies of the original's, as `copy._reconstruct` makes it; lists, dicts
and tuples are copied item by item (a tuple whose items all copy to themselves is itself, as
`copy._deepcopy_tuple` returns it); constants are copied for real. One object reached twice is copied
once (the memo, keyed by tracker: one tracker per object). Anything else (a tensor, a module...) is
left to the real copy.deepcopy, inlined.
"""
from __future__ import annotations

import copy
import copyreg
import types
from typing import Any

from .base import VariableTracker, class_attribute
from .builtins import lookup_attr
from .constant import ConstantVariable
from .dicts import DictVariable
from .lists import FrameListVariable, ListVariable, TupleVariable
from .functions import UserFunctionVariable
from .frame_objects import UserObjectVariable
from .objects import NewObjectVariable
from .static_lookup import is_plain_class


class DeepcopyFunctionVariable(UserFunctionVariable):
    """copy.deepcopy: a call with one argument whose copy is modelled here is done here; any other
    inlines the real function."""

    def call(self, tx, args, kwargs) -> VariableTracker:
        if len(args) == 1 and not kwargs and _copyable(tx, args[0]):
            return deep_copy(tx, args[0], {})
        return super().call(tx, args, kwargs)


class CopyFunctionVariable(UserFunctionVariable):
    """copy.copy: a user object that copies the default way (as for deepcopy, with no `__copy__`)
    becomes a new instance holding the same attribute values, as `copy._reconstruct` makes it
    without a memo; any other argument inlines the real function."""

    def call(self, tx, args, kwargs) -> VariableTracker:
        if len(args) == 1 and not kwargs and isinstance(args[0], (UserObjectVariable, NewObjectVariable)) \
                and _copies_by_dict(tx, args[0], "__copy__"):
            return _new_instance_like(tx, args[0], dict(_state(tx, args[0])))
        return super().call(tx, args, kwargs)


def _new_instance_like(tx, vt: VariableTracker, attrs: dict[str, VariableTracker]) -> NewObjectVariable:
    cls = vt.python_type()
    cls_source = vt.cls_source if isinstance(vt, NewObjectVariable) else vt._class_attr_source("__class__").base
    result = NewObjectVariable(cls, cls_source)
    tx.side_effects.note()
    result.attrs.update(attrs)
    return result


def _copyable(tx, vt: VariableTracker) -> bool:
    """The deep copy of vt is one this module makes (checked all the way down before any copy)."""
    if isinstance(vt, ConstantVariable):
        return True
    if type(vt) in (TupleVariable, ListVariable, FrameListVariable):
        return all(_copyable(tx, item) for item in vt.unpack(tx))
    if isinstance(vt, DictVariable) and vt.python_type() is dict:
        return all(type(k) in (str, int) for k in vt.items) and all(_copyable(tx, v) for v in vt.items.values())
    if isinstance(vt, (UserObjectVariable, NewObjectVariable)) and _copies_by_dict(tx, vt):
        return all(_copyable(tx, v) for v in _state(tx, vt).values())
    return False


def _copies_by_dict(tx, obj: VariableTracker, hook: str = "__deepcopy__") -> bool:
    """copy.deepcopy copies `obj` as `copy._reconstruct` does for object's `__reduce_ex__`: a new
    instance of its class, its __dict__ deep-copied into the new instance's."""
    cls = obj.python_type()
    if isinstance(obj, UserObjectVariable) and obj.source is None:
        return False
    if not is_plain_class(cls) or cls in copyreg.dispatch_table or issubclass(cls, (dict, list, tuple)):
        return False
    for name, default in (("__reduce_ex__", object.__reduce_ex__), ("__reduce__", object.__reduce__),
                          ("__getstate__", object.__getstate__), ("__getattr__", None)):
        if class_attribute(cls, name, None) is not default:
            return False
    # what copy.deepcopy asks of the object, through its class's attribute protocol (traced)
    return lookup_attr(tx, obj, hook) is None and not _has_setstate(cls)


def _has_setstate(cls: type) -> bool:
    return class_attribute(cls, "__setstate__", None) is not None


def _state(tx, obj: VariableTracker) -> dict[str, VariableTracker]:
    """The attributes copied: object's __getstate__ is the instance dict."""
    if isinstance(obj, NewObjectVariable):
        return obj.attrs
    return obj.instance_dict_tracker(tx).items


def deep_copy(tx, vt: VariableTracker, memo: dict[int, VariableTracker]) -> VariableTracker:
    """The tracker of `copy.deepcopy(vt)` (vt is `_copyable`)."""
    if id(vt) in memo:
        return memo[id(vt)]
    if isinstance(vt, ConstantVariable):
        value = vt.as_python_constant()
        copied = copy.deepcopy(value)
        return vt if copied is value else ConstantVariable(copied)
    if type(vt) is TupleVariable:
        items = [deep_copy(tx, item, memo) for item in vt.items]
        result: VariableTracker = vt if all(a is b for a, b in zip(items, vt.items)) else TupleVariable(items)
    elif type(vt) in (ListVariable, FrameListVariable):
        result = memo[id(vt)] = ListVariable([])
        result.items.extend(deep_copy(tx, item, memo) for item in vt.unpack(tx))
    elif isinstance(vt, DictVariable):
        result = memo[id(vt)] = DictVariable({})
        for key, value in list(vt.items.items()):
            result.items[key] = deep_copy(tx, value, memo)
    else:
        cls = vt.python_type()
        cls_source = vt.cls_source if isinstance(vt, NewObjectVariable) else vt._class_attr_source("__class__").base
        result = memo[id(vt)] = NewObjectVariable(cls, cls_source)
        tx.side_effects.note()
        for name, value in list(_state(tx, vt).items()):
            result.attrs[name] = deep_copy(tx, value, memo)
    memo[id(vt)] = result
    return result


def is_deepcopy(value: Any) -> bool:
    return value is copy.deepcopy and isinstance(value, types.FunctionType)


def is_copy(value: Any) -> bool:
    return value is copy.copy and isinstance(value, types.FunctionType)

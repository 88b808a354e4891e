"""Calls that read nothing of their argument but its class: inlined once per class, then repeated.

`dataclasses.fields(obj)` is `getattr(obj, "__dataclass_fields__")`, then the `Field`s of that
dict whose `_field_type` is `_FIELD`. On an object made while tracing, whose instance dict the
trace holds (`attrs`) and whose class has Python's own attribute lookup, that getattr finds the
class's dict: the answer is a function of the class and of objects that existed before the frame
(the class, its fields dict, the Field objects, the dataclasses module's globals). A Hugging Face
`ModelOutput` calls it from its `__setattr__`, once per field it sets, so a model's output is made
with `fields()` inlined a dozen times over (a generator over the fields each time).

The first call on a class is inlined as any call is, and its guards are installed then. A later
call with an object of the same class (reached through the same class source) gives a new tuple
of the same items while the state the first call read is unchanged (SideEffects.remember_read: if
it found only objects from before the frame, as they were at entry, none of them changed since),
the object still has no attribute of that name of its own, and the first call changed nothing,
recorded no graph op and gave Fields from before the frame (every item has a source).
"""
from __future__ import annotations

import dataclasses
import types
from typing import Any

from .base import VariableTracker
from .lists import TupleVariable
from .static_lookup import plain_protocol

# The function, and the one attribute it reads of its argument (found on the argument's class).
CLASS_READS: dict[types.FunctionType, str] = {dataclasses.fields: "__dataclass_fields__"}


def call_reading_class(tx, fn: VariableTracker, args: list[VariableTracker],
                       kwargs: dict[str, VariableTracker]) -> VariableTracker:
    """`fn(obj)` for a function of CLASS_READS: repeated from the first call on `obj`'s class, or
    inlined (and remembered)."""
    key = _key(fn, args, kwargs)
    reads, side_effects = tx.output.class_reads, tx.side_effects
    if key is not None:
        last = side_effects.repeat_read(reads, key)
        if last is not None:
            return TupleVariable(list(last))
    start, ops = side_effects.start_read(), len(tx.output.graph.nodes)
    result = tx.inline_call(fn.fn, list(args), kwargs, fn_source=fn.source)
    if (key is not None and len(tx.output.graph.nodes) == ops and type(result) is TupleVariable
            and all(item.source is not None for item in result.items)):
        side_effects.remember_read(reads, key, start, tuple(result.items))
    return result


def _key(fn: VariableTracker, args: list[VariableTracker], kwargs: dict[str, VariableTracker]) -> Any:
    """(function, its source, class, class source) when the call reads only the class: one
    argument, an object made while tracing without the attribute in its own dict, of a class
    with Python's own attribute lookup; None otherwise."""
    if len(args) != 1 or kwargs or fn.source is None:
        return None
    made = args[0].made_instance()
    if made is None:
        return None
    cls, cls_source, attrs = made
    if CLASS_READS[fn.fn] in attrs or not plain_protocol(cls):
        return None
    return fn.fn, fn.source, cls, cls_source

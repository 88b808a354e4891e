"""Containers read from the frame, wrapped with their guards: the kinds of builder.py's `_KINDS`
that hold other values (lists, tuples, torch.Size, deques, tuple iterators, named tuples, dicts and
dict subclasses, mappingproxies, instances of container subclasses, sets of constants).

A container is guarded by its type and its length or keys; each item is wrapped (tx.wrap, which is
builder.wrap) on a source of its own, so its guards are its own. A list, a dict or an object the
trace may mutate gets one tracker per object (`track_mutable`: side_effects.py).
"""
from __future__ import annotations

import collections
import functools
import types
from typing import Any

import torch

from ...exc import Unsupported
from ...resume import STACK_ARG_PREFIX
from ...guards import GuardKind, KeysById
from ...source import (
    AttrSource, BaseItemSource, DictItemSource, DictKeySource, DictValueSource, ItemSource, LocalSource,
    Source, TupleIteratorRestSource,
)
from .base import Tracer, VariableTracker, class_attribute
from .constant import ConstantVariable, is_constant_value
from .dicts import DictVariable
from .dict_keys import ObjectKey, hashes_by_identity, is_constant_key
from .iterators import ListIteratorVariable
from .lists import DequeVariable, FrameListVariable, ListVariable, SizeVariable, TupleVariable
from .namedtuples import NamedTupleVariable
from .container_subclass import UserContainerObjectVariable, container_base, make_instance
from .sets import SetVariable
from .dict_subclass import UserDictObjectVariable, dict_base
from .mappingproxy import MappingProxyVariable, is_modelled_proxy

_TUPLE_ITERATOR = type(iter(()))


def add_guard(guards: Any, source: Source | None, kind: GuardKind, payload: Any = None) -> None:
    """A guard on `source`, when the value is guarded (`guards` is None otherwise)."""
    if guards is not None:
        guards.add(source, kind, payload)


_DEQUE_ITEMS = 64  # the longest deque read from the frame whose items are modelled


def wrap_sequence(tx: Tracer, value: Any, source: Source | None, guard: bool,
                  guards: Any) -> VariableTracker | None:
    """A list, tuple, torch.Size, tuple iterator or named tuple: a container guarded by its type and
    length, each item wrapped on a source of its own."""
    if type(value) is list and source is not None:
        add_guard(guards, source, GuardKind.TYPE_MATCH, list)
        add_guard(guards, source, GuardKind.LEN_MATCH, len(value))

        def read_item(i: int) -> VariableTracker:  # when the trace first reads item i
            return tx.wrap(value[i], ItemSource(source, i), guard)

        return track_mutable(tx, source, value, FrameListVariable(len(value), read_item, source))
    if type(value) in (tuple, list, torch.Size):
        add_guard(guards, source, GuardKind.TYPE_MATCH, type(value))
        add_guard(guards, source, GuardKind.LEN_MATCH, len(value))
        items = [tx.wrap(v, ItemSource(source, i) if source is not None else None, guard)
                 for i, v in enumerate(value)]
        if type(value) is torch.Size:
            return SizeVariable(items, source)
        if type(value) is tuple:
            return TupleVariable(items, source)
        return track_mutable(tx, source, value, ListVariable(items, source))
    if type(value) is collections.deque and source is not None and len(value) <= _DEQUE_ITEMS:
        # guarded as a list, and by its maxlen (fixed for the object, read by appends); a long one
        # (a replay buffer) stays an opaque object: each item wrapped would be a guard
        add_guard(guards, source, GuardKind.TYPE_MATCH, collections.deque)
        add_guard(guards, source, GuardKind.LEN_MATCH, len(value))
        if value.maxlen is None:
            add_guard(guards, AttrSource(source, "maxlen"), GuardKind.NONE_MATCH, None)
        else:
            add_guard(guards, AttrSource(source, "maxlen"), GuardKind.EQUALS_MATCH, value.maxlen)
        deque_var = DequeVariable([tx.wrap(v, ItemSource(source, i), guard) for i, v in enumerate(value)],
                                  value.maxlen)
        deque_var.source = source  # (changes replayed: `d.clear(); d.extend(items)`, side_effects.py)
        return track_mutable(tx, source, value, deque_var)
    if type(value) is _TUPLE_ITERATOR and source is not None and not _is_stack_slot(source):
        # An iterator live across a graph break (`it = iter(t)`; ListIteratorVariable.reconstruct
        # hands a resume function a tuple iterator): its items still to come, guarded as a tuple's;
        # the replay moves the real one on. A for loop's own iterator (a value on the stack at the
        # break) stays opaque, as the loop is not traced on: one cache entry per number of items
        # left would run into the recompile limit on any long loop.
        add_guard(guards, source, GuardKind.TYPE_MATCH, _TUPLE_ITERATOR)
        rest_source = TupleIteratorRestSource(source)
        rest = tx.hooks.tuple_iterator_rest(value)
        if guards is not None:
            guards.add(rest_source, GuardKind.LEN_MATCH, len(rest))
        items = [tx.wrap(v, ItemSource(rest_source, i), guard) for i, v in enumerate(rest)]
        return track_mutable(tx, source, value, ListIteratorVariable(items, _TUPLE_ITERATOR, source=source))
    if isinstance(value, tuple) and hasattr(type(value), "_fields"):  # a namedtuple
        add_guard(guards, source, GuardKind.TYPE_MATCH, type(value))
        items = [tx.wrap(v, AttrSource(source, f) if source is not None else None, guard)
                 for f, v in zip(type(value)._fields, value)]
        return NamedTupleVariable(items, type(value), source)
    return None


def wrap_mapping(tx: Tracer, value: Any, source: Source | None, guard: bool,
                 guards: Any) -> VariableTracker | None:
    """A dict (guarded by its keys), or an instance of a dict subclass (a user object with a dict inside)."""
    if type(value) in (dict, collections.OrderedDict, collections.defaultdict) and _keys_supported(value):
        return _wrap_dict(tx, value, source, guard, guards)
    if isinstance(value, dict) and (entries := _dict_subclass_entries(value)) is not None:
        # An instance of a dict subclass (a ModelOutput, a config): a user object with a dict inside.
        # Its items are read from its storage, not through the subclass's __getitem__.
        if id(value) in _WRAPPING:
            raise Unsupported(f"a {type(value).__qualname__} that contains itself")
        add_guard(guards, source, GuardKind.TYPE_MATCH, type(value))
        add_guard(guards, source, GuardKind.DICT_KEYS_MATCH, tuple(k for k, _ in entries))
        _WRAPPING.add(id(value))
        try:
            items = {k: tx.wrap(v, DictItemSource(source, k, i) if source is not None else None, guard)
                     for i, (k, v) in enumerate(entries)}
        finally:
            _WRAPPING.discard(id(value))
        return track_mutable(tx, source, value, UserDictObjectVariable(value, items, source))
    return None


def wrap_mapping_proxy(tx: Tracer, value: Any, source: Source | None, guard: bool,
                       guards: Any) -> VariableTracker | None:
    """A mappingproxy (a class's `__dict__`) read from the frame: its keys in order, guarded
    (DICT_KEYS_MATCH reads the dict behind the proxy); its values are wrapped when read."""
    if source is None or not is_modelled_proxy(value):
        return None
    add_guard(guards, source, GuardKind.TYPE_MATCH, types.MappingProxyType)
    tracker = MappingProxyVariable(value, source)
    add_guard(guards, source, GuardKind.DICT_KEYS_MATCH, tracker.keys)
    return tracker


# The value an instance of an int, float or str subclass holds, whatever the subclass overrides.
_SCALAR_VALUE = {int: int.__int__, float: float.__float__, str: str.__str__}


def wrap_container_subclass(tx: Tracer, value: Any, source: Source | None, guard: bool,
                            guards: Any) -> VariableTracker | None:
    """An instance of a list, tuple, set or frozenset subclass: a user object with a container
    inside, guarded by its type and its length (items read by the base's own indexing, on sources of
    their own) or, for a set, its value; of an int, float or str subclass, by its type and value. A class that indexes or compares in Python (its guards
    would run it) stays a plain user object."""
    base = container_base(type(value))
    if base is None or source is None:
        return None
    cls = type(value)
    if base in _SCALAR_VALUE:  # an int, float or str subclass: its value, read by the base's own slot
        if class_attribute(cls, "__eq__", None) is not base.__eq__:
            return None
        plain = _SCALAR_VALUE[base](value)
        add_guard(guards, source, GuardKind.TYPE_MATCH, cls)
        add_guard(guards, source, GuardKind.EQUALS_MATCH, make_instance(cls, plain, {}))  # (of the same type)
        return track_mutable(tx, source, value, UserContainerObjectVariable(value, plain, source))
    if base in (list, tuple):
        if class_attribute(cls, "__getitem__", None) is not base.__getitem__ or \
                class_attribute(cls, "__len__", None) is not base.__len__:
            return None
        add_guard(guards, source, GuardKind.TYPE_MATCH, cls)
        add_guard(guards, source, GuardKind.LEN_MATCH, len(value))
        items = [tx.wrap(v, BaseItemSource(source, i, base), guard) for i, v in enumerate(value)]
        return track_mutable(tx, source, value, UserContainerObjectVariable(value, items, source))
    if class_attribute(cls, "__eq__", None) is not base.__eq__ or not is_constant_key(frozenset(value)):
        return None
    add_guard(guards, source, GuardKind.TYPE_MATCH, cls)
    add_guard(guards, source, GuardKind.EQUALS_MATCH, make_instance(cls, tuple(value), {}))  # (of the same type)
    return track_mutable(tx, source, value, UserContainerObjectVariable(value, list(value), source))


def wrap_constant_collection(tx: Tracer, value: Any, source: Source | None, guard: bool,
                             guards: Any) -> VariableTracker | None:
    """A set, slice, range or frozenset of constants, guarded by its value."""
    if type(value) in (set, frozenset) and source is None and is_constant_key(frozenset(value)):
        # computed while tracing (`{1, 2} | {3}`, a set of enum members): rebuilt item by item
        return SetVariable(set(value), None, type(value))
    if type(value) is set and is_constant_key(frozenset(value)):
        add_guard(guards, source, GuardKind.EQUALS_MATCH, set(value))  # read from the frame: its contents, guarded
        return SetVariable(set(value), source)
    if isinstance(value, (slice, range, frozenset)) and is_constant_value(value):
        add_guard(guards, source, GuardKind.EQUALS_MATCH, value)
        return ConstantVariable(value, source)
    return None


def _is_stack_slot(source: Source) -> bool:
    """A resume function's argument holding a value of the stack at the break (resume.py)."""
    return isinstance(source, LocalSource) and source.local_name.startswith(STACK_ARG_PREFIX)


_WRAPPING: set[int] = set()  # dict-subclass instances whose items are being wrapped (one inside itself)


def _dict_subclass_entries(value: dict) -> list[tuple[Any, Any]] | None:
    """The items of an instance of a supported dict subclass with str and int keys, in the order of
    its base (dict or OrderedDict: the subclass's own __iter__ is not asked); None for others."""
    base = dict_base(type(value))
    if base is None:
        return None
    entries = list(base.items(value))
    return entries if all(type(k) in (str, int) for k, _ in entries) else None


def _keys_supported(value: dict) -> bool:
    return all(is_constant_key(k) or hashes_by_identity(type(k), k) for k in value)


def _wrap_dict(tx: Tracer, value: dict, source: Source | None, guard: bool,
               guards: Any) -> VariableTracker:
    """A dict, OrderedDict or defaultdict, guarded by its type and its keys in order: str and int
    keys by value (DICT_KEYS_MATCH); with any other key, constants by type and value and keys that
    hash by identity (tensors, modules, classes...) by identity (DICT_KEYS_ID_MATCH). The value of
    a constant key is read as `d[key]`, any other as the value of the dict's i-th key."""
    keys = list(value)  # (an OrderedDict's own order)
    add_guard(guards, source, GuardKind.TYPE_MATCH, type(value))
    if all(type(k) in (str, int) for k in keys):
        add_guard(guards, source, GuardKind.DICT_KEYS_MATCH, tuple(keys))
    else:
        by_id = KeysById(tuple(keys), tuple(not is_constant_key(k) for k in keys))
        add_guard(guards, source, GuardKind.DICT_KEYS_ID_MATCH, by_id)
    factory = None
    if type(value) is collections.defaultdict:  # what a missing key's value is made by
        factory = tx.wrap(value.default_factory,
                       AttrSource(source, "default_factory") if source is not None else None, guard)
    items: dict[Any, VariableTracker] = {}
    for i, k in enumerate(keys):
        if is_constant_key(k):
            items[k] = tx.wrap(value[k], ItemSource(source, k) if source is not None else None, guard)
            continue
        key_source = DictKeySource(source, i) if source is not None else None
        # its tracker is made when the trace uses the key as a value (ObjectKey)
        make_var = functools.partial(tx.wrap, k, key_source, guard)
        items[ObjectKey(k, source=key_source, make_var=make_var)] = \
            tx.wrap(value[k], DictValueSource(source, i) if source is not None else None, guard)
    return track_mutable(tx, source, value, DictVariable(items, source, type(value), factory))


def track_mutable(tx: Tracer, source: Source | None, value: Any,
                  tracker: VariableTracker) -> VariableTracker:
    """A tracker of a list, dict or object that the trace may mutate: one per object (see
    SideEffects.track)."""
    return tx.side_effects.track(source, value, tracker, tx.output.guards) if source is not None else tracker

"""Sets and frozensets: their elements hashed as Python hashes them, and the set algebra.

A set's elements are kept as a dict's keys are (dicts.py's `dict_key`): constants by value (1, "a",
an enum member, a tuple of these), and objects that hash by identity (a tensor, a module, a function,
a class, a plain instance) as `ObjectKey`s, never compared with ==. The tracker holds a real Python
set of those keys, so `|`, `&`, `-`, `^`, the comparisons and the methods are Python's own on them,
and a set of constants iterates in the order CPython gives it.

The operators take sets, frozensets (a constant frozenset is a ConstantVariable) and the keys view
of a dict (`d.keys() & e.keys()` is a set), in any mix, with CPython's rules for the result's type
(`frozenset | set` is a frozenset; a view's result is a set). A set read from the frame is guarded by
its value (builder.py) and is not mutated while tracing.
"""
from __future__ import annotations

import operator
from typing import Any, Callable, Iterable

from ...exc import Unsupported
from ...source import Source
from .base import BoundMethodVariable, VariableTracker
from .constant import ConstantVariable
from .dicts import DictViewVariable
from .dict_keys import ObjectKey, constant_of_key, dict_key, key_var, relate_identities
from .exceptions import ExceptionVariable, RaisedException, raise_symbolic
from .iterators import ListIteratorVariable, iterate

_SET_TYPES = (set, frozenset)


def set_keys(tx, items: Iterable[VariableTracker], known: Iterable[Any] = ()) -> list[Any]:
    """The keys of `items` as elements of a set (`dict_key`), in order. Whether a tensor of the frame
    is one of the other tensors of the frame (in `items` or among `known` keys) depends on which
    tensors the frame is given: that is guarded, as a dict guards its tensor keys."""
    keys = [dict_key(tx, item) for item in items]
    frame_tensors = {t.source: t for k in [*known, *keys] if isinstance(k, ObjectKey) for t in k.frame_tensors()}
    if len(frame_tensors) > 1:
        relate_identities(tx, list(frame_tensors.values()))
    return keys


class SetVariable(VariableTracker):
    """A set or frozenset built in the frame (or a set of constants read from it): `values` is a
    real set of its keys, constants and ObjectKeys."""

    def __init__(self, values: set, source: Source | None = None, set_type: type = set):
        super().__init__(source)
        self.values = values  # a copy, when read from the frame (with `source`): never mutated
        self.set_type = set_type

    @classmethod
    def of(cls, tx, items: Iterable[VariableTracker], set_type: type = set) -> "SetVariable":
        """`{a, b, c}`, `set(iterable)`: each item hashed (a list is unhashable, TypeError)."""
        items = list(items)
        if all(type(item) is ConstantVariable for item in items):
            try:
                return cls(set(item.value for item in items), None, set_type)
            except TypeError:
                pass  # an unhashable constant: dict_key raises the TypeError in the program
        return cls(set(set_keys(tx, items)), None, set_type)

    @property
    def items(self) -> list[VariableTracker]:
        return [key_var(k) for k in self.values]

    def held(self) -> list[VariableTracker]:
        """The elements that are values of the trace (rebuilding the set rebuilds them)."""
        return [k.var for k in self.values if isinstance(k, ObjectKey) and (k.made_var is not None or k.source is None)]

    def python_type(self) -> type:
        return self.set_type

    def is_python_constant(self) -> bool:
        return not any(isinstance(k, ObjectKey) for k in self.values)

    def as_python_constant(self) -> Any:
        return self.set_type(constant_of_key(k) for k in self.values)

    def truth(self) -> bool:
        return bool(self.values)

    def unpack(self, tx) -> list[VariableTracker]:
        return self.items

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if callable(getattr(self.set_type, name, None)):
            return BoundMethodVariable(self, name)
        raise Unsupported(f"attribute {name!r} of a {self.set_type.__name__}")

    def _key(self, tx, item: VariableTracker) -> Any:
        return set_keys(tx, [item], self.values)[0]

    def contains(self, tx, item: VariableTracker) -> bool:
        if type(item) is ConstantVariable:
            try:
                return item.value in self.values
            except TypeError:
                pass
        return self._key(tx, item) in self.values

    def call_method(self, tx, name, args, kwargs) -> VariableTracker:
        if kwargs:
            raise Unsupported(f"{self.set_type.__name__}.{name}() with keyword arguments")
        if name == "__contains__" and len(args) == 1:
            return ConstantVariable(self.contains(tx, args[0]))
        if name == "__len__" and not args:
            return ConstantVariable(len(self.values))
        if name == "__iter__" and not args:
            return ListIteratorVariable(self.items, type(iter(set())))  # (iter(s): the items now)
        if name == "copy" and not args:
            return SetVariable(set(self.values), None, self.set_type)
        if name in _STOPS_EARLY and len(args) == 1 and set_like_keys(tx, args[0]) is None:
            return ConstantVariable(self._decided_early(tx, name, args[0]))
        if name in _READS:
            others = [self._other_keys(tx, a) for a in args]
            result = getattr(self.values, name)(*others)
            return SetVariable(result, None, self.set_type) if isinstance(result, _SET_TYPES) else ConstantVariable(result)
        if self.set_type is set and name in _MUTATIONS:
            if self.source is not None:
                raise Unsupported(f"set.{name}() on a set that outlives the frame")
            tx.side_effects.note()
            if name in ("add", "discard", "remove") and len(args) == 1:
                key = self._key(tx, args[0])
                if name == "remove" and key not in self.values:
                    _raise_key_error(key)
                getattr(self.values, name)(key)
            elif name == "pop" and not args:
                if not self.values:
                    raise_symbolic(KeyError, "pop from an empty set")
                return key_var(self.values.pop())
            else:
                getattr(self.values, name)(*[self._other_keys(tx, a) for a in args])
            return ConstantVariable(None)
        raise Unsupported(f"{self.set_type.__name__}.{name}() with these arguments")

    def _decided_early(self, tx, name: str, other: VariableTracker) -> bool:
        """`s.isdisjoint(it)`, `s.issuperset(it)` of an iterable that is not a set: CPython takes its
        items one at a time and stops at the first that decides (one in `s`, one not in `s`), so a
        generator keeps the items after it."""
        for item in iterate(tx, other):
            if (self._key(tx, item) in self.values) == (name == "isdisjoint"):
                return False
        return True

    def _other_keys(self, tx, other: VariableTracker) -> set:
        """The argument of a method (`s.union(iterable)`): any iterable, its items hashed."""
        keys = set_like_keys(tx, other)
        return keys if keys is not None else set(set_keys(tx, iterate(tx, other), self.values))

    def reconstruct(self, cg) -> None:
        if self.source is not None:
            cg.load_source(self.source)
            return

        def build() -> None:
            if self.set_type is frozenset:
                cg.push_null()
                cg.load_const(frozenset)
            for key in self.values:
                if isinstance(key, ObjectKey):
                    key.reconstruct(cg)
                else:
                    cg.load_const(key)
            cg.emit("BUILD_SET", len(self.values))
            if self.set_type is frozenset:
                cg.call(1)

        cg.rebuild_once(self, build)

    def __repr__(self) -> str:
        return f"SetVariable({self.set_type.__name__}, {self.values!r})"


def _raise_key_error(key: Any) -> None:
    if isinstance(key, ObjectKey):
        raise RaisedException(ExceptionVariable(KeyError, [key.var]))
    raise_symbolic(KeyError, key)


# Methods that read (their arguments may be any iterables), and those that change a set.
_READS = {"union", "intersection", "difference", "symmetric_difference", "issubset", "issuperset",
          "isdisjoint"}
_STOPS_EARLY = {"isdisjoint", "issuperset"}  # (on an argument that is not a set: see _decided_early)
_MUTATIONS = {"add", "discard", "remove", "pop", "clear", "update", "intersection_update",
              "difference_update", "symmetric_difference_update"}


# -- the operators ----------------------------------------------------------------------------------

def set_like_keys(tx, vt: VariableTracker) -> set | None:
    """The keys of an operand the set operators take (a set, a frozenset, a dict's keys view),
    or None for any other value."""
    if isinstance(vt, SetVariable):
        return vt.values
    if type(vt) is ConstantVariable and isinstance(vt.value, _SET_TYPES):
        return set(vt.value)
    if isinstance(vt, DictViewVariable) and vt.kind == "keys":
        return set(vt.dict_var.items)
    return None


def _result_type(a: VariableTracker) -> type:
    """A binary operator's result is the left operand's type for sets and frozensets (CPython's
    set_or and friends copy the left one), and a set for a dict view's."""
    return a.python_type() if isinstance(a, SetVariable) or type(a) is ConstantVariable else set


_ALGEBRA: dict[Callable, Callable[[set, set], Any]] = {
    operator.or_: operator.or_, operator.and_: operator.and_, operator.sub: operator.sub,
    operator.xor: operator.xor, operator.eq: operator.eq, operator.ne: operator.ne,
    operator.lt: operator.lt, operator.le: operator.le, operator.gt: operator.gt, operator.ge: operator.ge,
}
_IN_PLACE = {operator.ior: operator.or_, operator.iand: operator.and_, operator.isub: operator.sub,
             operator.ixor: operator.xor}


def _operator(fn: Callable) -> Callable:
    """The handler of `fn` on two set-like operands none of which is all constants: the operation
    on their keys. Other operands fall through (None) to the generic rules."""
    base = _IN_PLACE.get(fn, fn)

    def handler(tx, a: VariableTracker, b: VariableTracker) -> VariableTracker | None:
        if a.is_python_constant() and b.is_python_constant() and fn is base:
            return None  # folded on the constants
        left, right = set_like_keys(tx, a), set_like_keys(tx, b)
        if left is None or right is None:
            return None
        if isinstance(a, DictViewVariable) and isinstance(b, DictViewVariable) and base in _COMPARISONS:
            return None  # (a view compared with a view: dicts.py)
        set_keys(tx, [], [*left, *right])  # tensors of the frame in both: related by guards
        if fn is not base and isinstance(a, SetVariable) and a.set_type is set:
            if a.source is not None:
                raise Unsupported("an in-place operator on a set that outlives the frame")
            tx.side_effects.note()
            a.values = base(a.values, right)  # (the same tracker: `s |= t` keeps s)
            return a
        result = base(left, right)
        if isinstance(result, bool):
            return ConstantVariable(result)
        return SetVariable(result, None, _result_type(a))

    return handler


_COMPARISONS = {operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge}

SET_HANDLERS: dict[Callable, Callable] = {fn: _operator(fn) for fn in [*_ALGEBRA, *_IN_PLACE]}


def build_set(tx, set_type: type, iterable: VariableTracker | None = None) -> VariableTracker:
    """set(iterable), frozenset(iterable): made in the frame from any iterable's items."""
    if iterable is None:
        return SetVariable(set(), None, set_type)
    keys = set_like_keys(tx, iterable)
    if keys is not None:
        return SetVariable(set(keys), None, set_type)
    return SetVariable.of(tx, iterate(tx, iterable), set_type)

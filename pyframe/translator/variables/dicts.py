"""Dicts (dict, OrderedDict, defaultdict) and their views.

A dict's keys are constants or objects compared by identity as CPython compares them
(dict_keys.py). One read from the frame
is guarded by its keys, in order (keys that hash by identity, by identity); mutating it is a side
effect, recorded for the transformed code to replay (side_effects.py).
"""
from __future__ import annotations

import collections
import operator
from typing import Any, Callable

from ...exc import Unsupported
from ...source import Source
from .base import BoundMethodVariable, VariableTracker, constant_args
from .constant import ConstantVariable
from .iterators import ListIteratorVariable
from .lists import BaseListVariable, TupleVariable
from .dict_keys import ObjectKey, constant_of_key, dict_key, key_var, raise_key_error, relate_identities


def _last_flag(args, kwargs, index: int) -> bool:
    """OrderedDict's `last` argument (popitem, move_to_end), given by position or by name."""
    if len(args) > index:
        return bool(args[index].as_python_constant())
    return bool(kwargs["last"].as_python_constant()) if "last" in kwargs else True


class DictVariable(VariableTracker):
    """A dict and its symbolic values, in insertion order. Keys are constants (str, int, enum
    members..., compared by value) or ObjectKeys (tensors, modules, functions, classes, compared by
    identity), mixed as Python allows."""

    def __init__(self, items: dict[Any, VariableTracker], source: Source | None = None,
                 dict_type: type = dict, default_factory: VariableTracker | None = None):
        super().__init__(source)
        self.items = dict(items)
        self.dict_type = dict_type  # dict, collections.OrderedDict or collections.defaultdict
        self.default_factory = default_factory  # a defaultdict's (None is a constant None there)

    def python_type(self) -> type:
        return self.dict_type

    def as_python_constant(self) -> Any:
        return {constant_of_key(k): v.as_python_constant() for k, v in self.items.items()}

    def truth(self) -> bool:
        return bool(self.items)

    def unpack(self, tx) -> list[VariableTracker]:
        return [key_var(k) for k in self.items]

    def key_of(self, tx, key: VariableTracker) -> Any:
        """`key` as a key of this dict (dict_key). Whether a tensor of the frame is one of this dict's
        other tensors of the frame depends on which tensors the frame is given: that is guarded
        (relate_identities), and the answer holds for as long as the guards do."""
        return self._relate(tx, dict_key(tx, key))

    def _relate(self, tx, key: Any) -> Any:
        if isinstance(key, ObjectKey) and key.frame_tensors():
            mine = key.frame_tensors()
            sources = {k.source for k in mine}
            others = [o for k in self.items if isinstance(k, ObjectKey) for o in k.frame_tensors() if o.source not in sources]
            if others or len(sources) > 1:
                relate_identities(tx, list({k.source: k for k in [*mine, *others]}.values()))
        return key

    def store(self, tx, key: VariableTracker, value: VariableTracker) -> None:
        """`d[key] = value` on the tracker (the caller records the mutation if it is one)."""
        self.items[self.key_of(tx, key)] = value

    def getitem(self, tx, key: VariableTracker) -> VariableTracker:
        k = self.key_of(tx, key)
        if k not in self.items:
            if self.default_factory is None or self.default_factory.is_python_constant() \
                    and self.default_factory.as_python_constant() is None:
                raise_key_error(k)
            value = self.default_factory.call(tx, [], {})  # a defaultdict stores what it makes
            tx.side_effects.mutate(self)
            self.items[k] = value
        return self.items[k]

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if callable(getattr(self.dict_type, name, None)):
            return BoundMethodVariable(self, name)
        raise Unsupported(f"attribute {name!r} of a {self.dict_type.__name__}")

    def call_method(self, tx, name, args, kwargs) -> VariableTracker:
        if kwargs and name != "update":
            args, kwargs = positional_args(self.dict_type, name, args, kwargs)
        if name == "__getitem__" and len(args) == 1:
            return self.getitem(tx, args[0])
        if name == "get" and 1 <= len(args) <= 2:
            return self.items.get(self.key_of(tx, args[0]), args[1] if len(args) == 2 else ConstantVariable(None))
        if name in ("keys", "values", "items") and not args:
            return DictViewVariable(self, name)
        if name == "__contains__" and len(args) == 1:
            return ConstantVariable(self.key_of(tx, args[0]) in self.items)
        if name == "copy" and not args:  # shallow: the same values under the same keys
            return DictVariable(self.items, None, self.dict_type, self.default_factory)
        if name in ("__setitem__", "__delitem__", "update", "pop", "setdefault", "clear", "popitem", "move_to_end"):
            tx.side_effects.mutate(self)
            if name == "__setitem__" and len(args) == 2:
                self.store(tx, args[0], args[1])
                return ConstantVariable(None)
            if name == "__delitem__" and len(args) == 1:
                k = self.key_of(tx, args[0])
                if k not in self.items:
                    raise_key_error(k)
                del self.items[k]
                return ConstantVariable(None)
            if name == "pop" and 1 <= len(args) <= 2:
                k = self.key_of(tx, args[0])
                if k in self.items:
                    return self.items.pop(k)
                if len(args) == 2:
                    return args[1]
                raise_key_error(k)
            if name == "setdefault" and 1 <= len(args) <= 2:
                return self.items.setdefault(self.key_of(tx, args[0]),
                                             args[1] if len(args) == 2 else ConstantVariable(None))
            if name == "update" and len(args) <= 1:
                if args and isinstance(args[0], DictVariable):
                    self.update(tx, args[0])
                elif args:  # an iterable of (key, value) pairs
                    if not isinstance(args[0], (BaseListVariable, ListIteratorVariable, DictViewVariable)):
                        # (a mapping is read through its keys(): not an iterable of pairs)
                        raise Unsupported(f"dict.update() from {args[0]}")
                    for pair in args[0].unpack(tx):
                        key, value = pair.unpack(tx)
                        self.store(tx, key, value)
                self.items.update(kwargs)
                return ConstantVariable(None)
            if name == "clear" and not args:
                self.items.clear()
                return ConstantVariable(None)
            ordered = self.dict_type is collections.OrderedDict
            if name == "popitem" and self.items and (ordered or not args and not kwargs):
                last = _last_flag(args, kwargs, 0)  # OrderedDict.popitem(last=False)
                key = next(reversed(self.items)) if last else next(iter(self.items))
                return TupleVariable([key_var(key), self.items.pop(key)])
            if name == "move_to_end" and ordered and 1 <= len(args) <= 2:
                key = self.key_of(tx, args[0])
                if key not in self.items:
                    raise_key_error(key)
                value = self.items.pop(key)
                if _last_flag(args, kwargs, 1):
                    self.items[key] = value
                else:
                    self.items = {key: value, **self.items}
                return ConstantVariable(None)
        raise Unsupported(f"dict.{name}() with these arguments")

    def update(self, tx, other: "DictVariable") -> None:
        """`self.update(other)`: other's keys, compared with ours as `_key` compares them."""
        for key, value in other.items.items():
            self.items[self._relate(tx, key)] = value

    def rebuilt_from(self) -> list[VariableTracker]:
        return [self.default_factory] if self.default_factory is not None and self.source is None else []

    def reconstruct(self, cg) -> None:
        if self.source is not None:
            cg.load_source(self.source)
            return

        def build() -> None:
            if self.dict_type is not dict:  # OrderedDict({...}), defaultdict(factory, {...})
                cg.push_null()
                cg.load_const(self.dict_type)
                if self.default_factory is not None:
                    self.default_factory.reconstruct(cg)
            build_dict_items(cg, self.items)
            if self.dict_type is not dict:
                cg.call(1 if self.default_factory is None else 2)

        cg.rebuild_once(self, build)

    def __repr__(self) -> str:
        return f"DictVariable({self.items!r})"


# The OrderedDict methods that take keyword arguments (dict's own take theirs by position only).
_ORDERED_DICT_KEYWORDS = {"popitem": ("last",), "move_to_end": ("key", "last"), "pop": ("key", "default"),
                          "setdefault": ("key", "default")}


def positional_args(dict_type: type, name: str, args: list[VariableTracker],
                    kwargs: dict[str, VariableTracker]) -> tuple[list[VariableTracker], dict]:
    """The arguments of `dict_type.name(...)` by position (`od.move_to_end(k, last=False)`);
    Unsupported for keywords the method does not take (Python raises TypeError)."""
    params = _ORDERED_DICT_KEYWORDS.get(name, ()) if issubclass(dict_type, collections.OrderedDict) else ()
    args, rest = list(args), dict(kwargs)
    for param in params[len(args):]:
        if param not in rest:
            break
        args.append(rest.pop(param))
    if rest:
        raise Unsupported(f"{dict_type.__name__}.{name}() with keyword arguments {sorted(rest)}")
    return args, {}


def build_dict_items(cg, items: dict[Any, VariableTracker]) -> None:
    """BUILD_MAP of `items`: constant keys as constants, the others rebuilt (a tensor key the graph
    made is one of its outputs; a key read from the frame is loaded from where it was read)."""
    for key, value in items.items():
        if isinstance(key, ObjectKey):
            key.reconstruct(cg)
        else:
            cg.load_const(key)
        value.reconstruct(cg)
    cg.emit("BUILD_MAP", len(items))


class DictViewVariable(VariableTracker):
    """`d.keys()`, `d.values()`, `d.items()`: live views, as Python's are. They read the dict's
    tracker on every use, so a key added after the view was made is in it."""

    _TYPES = {"keys": type({}.keys()), "values": type({}.values()), "items": type({}.items())}

    def __init__(self, dict_var: DictVariable, kind: str):
        super().__init__()
        self.dict_var, self.kind = dict_var, kind

    @property
    def items(self) -> list[VariableTracker]:
        entries = self.dict_var.items
        if self.kind == "keys":
            return [key_var(k) for k in entries]
        if self.kind == "values":
            return list(entries.values())
        return [TupleVariable([key_var(k), v]) for k, v in entries.items()]

    def python_type(self) -> type:
        return self._TYPES[self.kind]

    def as_python_constant(self) -> Any:
        # A view of a snapshot: compares (keys views as sets) and combines as the real view would.
        if self.kind == "keys":  # only the keys: constant even where the values are tensors
            return dict.fromkeys(constant_of_key(k) for k in self.dict_var.items).keys()
        return getattr(self.dict_var.as_python_constant(), self.kind)()

    def truth(self) -> bool:
        return bool(self.dict_var.items)

    def unpack(self, tx) -> list[VariableTracker]:
        return self.items

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if callable(getattr(self.python_type(), name, None)):
            return BoundMethodVariable(self, name)
        raise Unsupported(f"attribute {name!r} of a dict view")

    def call_method(self, tx, name, args, kwargs) -> VariableTracker:
        if name == "__contains__" and len(args) == 1 and self.kind == "keys":
            return ConstantVariable(self.dict_var.key_of(tx, args[0]) in self.dict_var.items)
        if name == "__len__" and not args:
            return ConstantVariable(len(self.dict_var.items))
        pargs, pkwargs = constant_args(args, kwargs, f"dict_{self.kind}.{name}()")
        return ConstantVariable(getattr(self.as_python_constant(), name)(*pargs, **pkwargs))

    def rebuilt_from(self) -> list[VariableTracker]:
        return [self.dict_var]  # the view is rebuilt as `d.<kind>()` of the dict rebuilt

    def reconstruct(self, cg) -> None:
        self.dict_var.reconstruct(cg)
        cg.emit("LOAD_METHOD", self.kind)
        cg.call(0)

    def __repr__(self) -> str:
        return f"DictViewVariable({self.dict_var!r}.{self.kind}())"


# -- dict | dict and dict |= ... (PEP 584) ------------------------------------------------------------

def _merge(tx, a: VariableTracker, b: VariableTracker) -> VariableTracker | None:
    """`a | b` of two plain dicts (dict, OrderedDict, defaultdict; not a subclass of theirs, whose
    class may define its own): a copy of `a` (its type, its default_factory) updated from `b`."""
    if type(a) is not DictVariable or type(b) is not DictVariable:
        return None
    merged = DictVariable(a.items, None, a.dict_type, a.default_factory)
    merged.update(tx, b)
    return merged


def _merge_in_place(tx, a: VariableTracker, b: VariableTracker) -> VariableTracker | None:
    """`a |= b`: `a.update(b)` (b a mapping or an iterable of pairs), the same dict after."""
    if type(a) is not DictVariable:
        return None
    a.call_method(tx, "update", [b], {})
    return a

DICT_HANDLERS: dict[Callable, Callable] = {operator.or_: _merge, operator.ior: _merge_in_place}

"""Tuples, lists, torch.Size and dicts whose items are themselves variable trackers.

Containers built in the frame are plain symbolic values: their mutation is done on the tracker.
Containers read from the frame carry a Source and are guarded by type and length (dicts: keys);
mutating one of those is a side effect on a live object: done on the tracker too, and recorded for
the transformed code to replay (side_effects.py).
"""
from __future__ import annotations

import collections
import types
from typing import Any, Iterator

import torch

from ...exc import Unsupported
from ...source import Source
from .base import BoundMethodVariable, VariableTracker, constant_args
from .constant import ConstantVariable
from .exceptions import raise_symbolic


def _index(key: VariableTracker) -> Any:
    if not key.is_python_constant():
        raise Unsupported("container indexed by a value unknown while tracing")
    return key.as_python_constant()


class BaseListVariable(VariableTracker):
    container_type: type = list

    def __init__(self, items: list[VariableTracker], source: Source | None = None):
        super().__init__(source)
        self.items = list(items)

    def python_type(self) -> type:
        return self.container_type

    def as_python_constant(self) -> Any:
        return self.container_type(v.as_python_constant() for v in self.items)

    def truth(self) -> bool:
        return bool(self.items)

    def unpack(self, tx) -> list[VariableTracker]:
        return list(self.items)

    def getitem(self, tx, key: VariableTracker) -> VariableTracker:
        index = _index(key)
        if isinstance(index, slice):
            return type(self)(self.items[index])
        try:
            return self.items[index]
        except (IndexError, TypeError) as e:
            raise Unsupported(f"{self.container_type.__name__} index {index!r}: {e}") from e

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if callable(getattr(self.container_type, name, None)):
            return BoundMethodVariable(self, name)
        raise Unsupported(f"attribute {name!r} of a {self.container_type.__name__}")

    def call_method(self, tx, name, args, kwargs) -> VariableTracker:
        if name == "__getitem__" and len(args) == 1:
            return self.getitem(tx, args[0])
        if name in ("index", "count", "__contains__"):
            # Comparisons of constants only: a tensor item makes these data dependent.
            value = self.as_python_constant()
            pargs, pkwargs = constant_args(args, kwargs, f"{self.container_type.__name__}.{name}()")
            return ConstantVariable(getattr(value, name)(*pargs, **pkwargs))
        raise Unsupported(f"{self.container_type.__name__}.{name}()")

    def reconstruct(self, cg) -> None:
        if self.source is not None:  # the very object the frame holds: identity matters
            cg.load_source(self.source)
            return

        def build() -> None:
            for item in self.items:
                item.reconstruct(cg)
            cg.build(self.container_type, len(self.items))

        if self.container_type is list:
            cg.rebuild_once(self, build)
        else:
            build()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.items!r})"


class TupleVariable(BaseListVariable):
    container_type = tuple

    def reconstruct(self, cg) -> None:
        if self.source is None and self.is_python_constant():
            cg.load_const(self.as_python_constant())
        else:
            super().reconstruct(cg)


class SizeVariable(TupleVariable):
    """torch.Size: under static shapes every dimension is a guarded constant."""

    container_type = torch.Size

    def getitem(self, tx, key: VariableTracker) -> VariableTracker:
        result = super().getitem(tx, key)
        return SizeVariable(result.items) if isinstance(result, BaseListVariable) else result

    def call_method(self, tx, name, args, kwargs) -> VariableTracker:
        if name == "numel" and not args and not kwargs:
            return ConstantVariable(self.as_python_constant().numel())
        return super().call_method(tx, name, args, kwargs)


class NamedTupleVariable(TupleVariable):
    """A namedtuple or a structseq (torch.return_types.max: `.values`, `.indices`)."""

    def __init__(self, items: list[VariableTracker], tuple_type: type, source: Source | None = None):
        super().__init__(items, source)
        self.container_type = tuple_type
        self.fields = tuple(getattr(tuple_type, "_fields", None) or tuple_type.__match_args__)

    def as_python_constant(self) -> Any:
        values = [v.as_python_constant() for v in self.items]
        return self.container_type(*values) if hasattr(self.container_type, "_fields") else self.container_type(values)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name in self.fields:
            return self.items[self.fields.index(name)]
        return super().var_getattr(tx, name)

    def getitem(self, tx, key: VariableTracker) -> VariableTracker:
        result = super().getitem(tx, key)
        return TupleVariable(result.items) if isinstance(result, NamedTupleVariable) else result

    def reconstruct(self, cg) -> None:
        if self.source is not None:
            super().reconstruct(cg)
            return
        # A namedtuple is built from its fields (`cls._make(items)`), a structseq from one sequence.
        make = getattr(self.container_type, "_make", None) if hasattr(self.container_type, "_fields") else None
        if make is not None:
            cg.push_null()
            cg.load_const(make)
        for item in self.items:
            item.reconstruct(cg)
        if make is not None:
            cg.emit("BUILD_TUPLE", len(self.items))
            cg.call(1)
        else:
            cg.build(self.container_type, len(self.items))


class ListVariable(BaseListVariable):
    container_type = list

    def call_method(self, tx, name, args, kwargs) -> VariableTracker:
        mutating = {"append", "extend", "insert", "pop", "clear", "reverse", "remove", "sort", "__delitem__"}
        if name not in mutating:
            return super().call_method(tx, name, args, kwargs)
        if name == "__delitem__" and len(args) == 1 and isinstance(_index(args[0]), (int, slice)):
            index = _index(args[0])
            if isinstance(index, int) and not -len(self.items) <= index < len(self.items):
                raise_symbolic(IndexError, "list assignment index out of range")
            tx.side_effects.mutate(self)
            del self.items[index]
            return ConstantVariable(None)
        tx.side_effects.mutate(self)
        if name == "append" and len(args) == 1:
            self.items.append(args[0])
        elif name == "extend" and len(args) == 1:
            self.items.extend(args[0].unpack(tx))
        elif name == "insert" and len(args) == 2:
            self.items.insert(_index(args[0]), args[1])
        elif name == "pop" and len(args) <= 1:
            return self.items.pop(_index(args[0]) if args else -1)
        elif name == "clear" and not args:
            self.items.clear()
        elif name == "reverse" and not args:
            self.items.reverse()
        else:
            raise Unsupported(f"list.{name}() with these arguments")
        return ConstantVariable(None)


class DequeVariable(ListVariable):
    """A collections.deque made while tracing (its maxlen drops items from the other end)."""

    container_type = collections.deque

    def __init__(self, items: list[VariableTracker], maxlen: int | None = None):
        super().__init__(items if maxlen is None else items[len(items) - maxlen:] if maxlen else [])
        self.maxlen = maxlen

    def as_python_constant(self) -> Any:
        return collections.deque((v.as_python_constant() for v in self.items), self.maxlen)

    def getitem(self, tx, key: VariableTracker) -> VariableTracker:
        if not isinstance(_index(key), int):
            raise Unsupported("deque index that is not an int")
        return super().getitem(tx, key)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name == "maxlen":
            return ConstantVariable(self.maxlen)
        return super().var_getattr(tx, name)

    def call_method(self, tx, name, args, kwargs) -> VariableTracker:
        ends = {"appendleft", "popleft", "extendleft", "rotate"}
        if name in ("append", "extend") and len(args) == 1 and not kwargs:
            tx.side_effects.mutate(self)
            for item in ([args[0]] if name == "append" else args[0].unpack(tx)):
                self.items.append(item)
                if self.maxlen is not None and len(self.items) > self.maxlen:
                    self.items.pop(0)
            return ConstantVariable(None)
        if name not in ends:
            if name in ("pop", "insert") and (args or not self.items):
                raise Unsupported(f"deque.{name}() with these arguments")
            return super().call_method(tx, name, args, kwargs)
        tx.side_effects.mutate(self)
        if name in ("appendleft", "extendleft") and len(args) == 1:
            for item in ([args[0]] if name == "appendleft" else args[0].unpack(tx)):
                self.items.insert(0, item)
                if self.maxlen is not None and len(self.items) > self.maxlen:
                    self.items.pop()
            return ConstantVariable(None)
        if name == "popleft" and not args and self.items:
            return self.items.pop(0)
        if name == "rotate" and len(args) <= 1:
            n = _index(args[0]) if args else 1
            if self.items:
                n %= len(self.items)
                self.items[:] = self.items[-n:] + self.items[:-n] if n else self.items
            return ConstantVariable(None)
        raise Unsupported(f"deque.{name}() with these arguments")

    def reconstruct(self, cg) -> None:
        def build() -> None:
            cg.push_null()
            cg.load_const(collections.deque)
            for item in self.items:
                item.reconstruct(cg)
            cg.build(list, len(self.items))
            cg.load_const(self.maxlen)
            cg.call(2)

        cg.rebuild_once(self, build)


class DictVariable(VariableTracker):
    """A dict with constant keys (str, int, ...) and symbolic values, in insertion order."""

    def __init__(self, items: dict[Any, VariableTracker], source: Source | None = None,
                 dict_type: type = dict, default_factory: VariableTracker | None = None):
        super().__init__(source)
        self.items = dict(items)
        self.dict_type = dict_type  # dict, collections.OrderedDict or collections.defaultdict
        self.default_factory = default_factory  # a defaultdict's (None is a constant None there)

    def python_type(self) -> type:
        return self.dict_type

    def as_python_constant(self) -> Any:
        return {k: v.as_python_constant() for k, v in self.items.items()}

    def truth(self) -> bool:
        return bool(self.items)

    def unpack(self, tx) -> list[VariableTracker]:
        return [ConstantVariable(k) for k in self.items]

    def getitem(self, tx, key: VariableTracker) -> VariableTracker:
        k = _index(key)
        if k not in self.items:
            if self.default_factory is None or self.default_factory.is_python_constant() \
                    and self.default_factory.as_python_constant() is None:
                raise_symbolic(KeyError, k)
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
            return self.items.get(_index(args[0]), args[1] if len(args) == 2 else ConstantVariable(None))
        if name in ("keys", "values", "items") and not args:
            return DictViewVariable(self, name)
        if name == "__contains__" and len(args) == 1:
            return ConstantVariable(_index(args[0]) in self.items)
        if name == "copy" and not args:  # shallow: the same values under the same keys
            return DictVariable(self.items, None, self.dict_type, self.default_factory)
        if name in ("__setitem__", "__delitem__", "update", "pop", "setdefault", "clear", "popitem", "move_to_end"):
            tx.side_effects.mutate(self)
            if name == "__setitem__" and len(args) == 2:
                self.items[_index(args[0])] = args[1]
                return ConstantVariable(None)
            if name == "__delitem__" and len(args) == 1:
                k = _index(args[0])
                if k not in self.items:
                    raise_symbolic(KeyError, k)
                del self.items[k]
                return ConstantVariable(None)
            if name == "pop" and 1 <= len(args) <= 2:
                k = _index(args[0])
                if k in self.items:
                    return self.items.pop(k)
                if len(args) == 2:
                    return args[1]
            if name == "setdefault" and 1 <= len(args) <= 2:
                return self.items.setdefault(_index(args[0]), args[1] if len(args) == 2 else ConstantVariable(None))
            if name == "update" and len(args) <= 1:
                if args and isinstance(args[0], DictVariable):
                    self.items.update(args[0].items)
                elif args:  # an iterable of (key, value) pairs
                    for pair in args[0].unpack(tx):
                        key, value = pair.unpack(tx)
                        self.items[_index(key)] = value
                self.items.update(kwargs)
                return ConstantVariable(None)
            if name == "clear" and not args:
                self.items.clear()
                return ConstantVariable(None)
            if name == "popitem" and self.items and (not args or self.dict_type is collections.OrderedDict):
                last = args[0].as_python_constant() if args else True  # OrderedDict.popitem(last=False)
                key = next(reversed(self.items)) if last else next(iter(self.items))
                return TupleVariable([ConstantVariable(key), self.items.pop(key)])
            if name == "move_to_end" and self.dict_type is collections.OrderedDict and 1 <= len(args) <= 2:
                key = _index(args[0])
                if key not in self.items:
                    raise_symbolic(KeyError, key)
                value = self.items.pop(key)
                if len(args) == 1 or args[1].as_python_constant():
                    self.items[key] = value
                else:
                    self.items = {key: value, **self.items}
                return ConstantVariable(None)
        raise Unsupported(f"dict.{name}() with these arguments")

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
            for key, value in self.items.items():
                cg.load_const(key)
                value.reconstruct(cg)
            cg.build(dict, len(self.items))
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
            return [ConstantVariable(k) for k in entries]
        if self.kind == "values":
            return list(entries.values())
        return [TupleVariable([ConstantVariable(k), v]) for k, v in entries.items()]

    def python_type(self) -> type:
        return self._TYPES[self.kind]

    def as_python_constant(self) -> Any:
        # A view of a snapshot: compares (keys views as sets) and combines as the real view would.
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
            return ConstantVariable(_index(args[0]) in self.dict_var.items)
        if name == "__len__" and not args:
            return ConstantVariable(len(self.dict_var.items))
        pargs, pkwargs = constant_args(args, kwargs, f"dict_{self.kind}.{name}()")
        return ConstantVariable(getattr(self.as_python_constant(), name)(*pargs, **pkwargs))

    def reconstruct(self, cg) -> None:
        self.dict_var.reconstruct(cg)
        cg.emit("LOAD_METHOD", self.kind)
        cg.call(0)

    def __repr__(self) -> str:
        return f"DictViewVariable({self.dict_var!r}.{self.kind}())"


class SetVariable(VariableTracker):
    """A set of constants (ints, strings, ...) built in the frame: a real set, so iteration has
    Python's own order."""

    def __init__(self, values: set, source: Source | None = None):
        super().__init__(source)
        self.values = values  # a copy, when read from the frame (with `source`): never mutated

    @classmethod
    def of(cls, items: list[VariableTracker]) -> "SetVariable":
        if not all(item.is_python_constant() for item in items):
            raise Unsupported("a set of values unknown while tracing (tensors hash by identity)")
        return cls({item.as_python_constant() for item in items})

    @property
    def items(self) -> list[VariableTracker]:
        return [ConstantVariable(v) for v in self.values]

    def python_type(self) -> type:
        return set

    def as_python_constant(self) -> Any:
        return set(self.values)

    def truth(self) -> bool:
        return bool(self.values)

    def unpack(self, tx) -> list[VariableTracker]:
        return self.items

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if callable(getattr(set, name, None)):
            return BoundMethodVariable(self, name)
        raise Unsupported(f"attribute {name!r} of a set")

    def call_method(self, tx, name, args, kwargs) -> VariableTracker:
        if name in ("add", "discard", "remove", "update", "clear", "difference_update",
                    "intersection_update"):
            if self.source is not None:
                raise Unsupported(f"set.{name}() on a set that outlives the frame")
            others = [SetVariable.of(a.unpack(tx)).values if name.endswith("update") else a.as_python_constant()
                      for a in args]
            getattr(self.values, name)(*others)
            return ConstantVariable(None)
        pargs, pkwargs = constant_args(args, kwargs, f"set.{name}()")
        result = getattr(self.values, name)(*pargs, **pkwargs)
        return SetVariable(result) if isinstance(result, set) else ConstantVariable(result)

    def reconstruct(self, cg) -> None:
        if self.source is not None:
            cg.load_source(self.source)
            return

        def build() -> None:
            for value in self.values:
                cg.load_const(value)
            cg.emit("BUILD_SET", len(self.values))

        cg.rebuild_once(self, build)

    def __repr__(self) -> str:
        return f"SetVariable({self.values!r})"


class ListIteratorVariable(VariableTracker):
    """An iterator: what GET_ITER leaves on the stack, and what iter(), zip(), map(), enumerate(),
    reversed(), filter(), itertools and generators return. `items` holds the items it has
    produced; a lazy one (map, zip, a generator...) produces the rest from `pending`, one at a
    time as its consumer asks, so calls traced for them interleave with the consumer's as in Python.
    `kind` is the type Python would give it (zip, map, list_iterator...)."""

    def __init__(self, items: list[VariableTracker], kind: type = type(iter(())),
                 pending: Iterator[VariableTracker] | None = None):
        super().__init__()
        self.items = items
        self.index = 0
        self.kind = kind
        self.pending = pending

    def python_type(self) -> type:
        return self.kind

    def next(self) -> VariableTracker | None:
        if self.index == len(self.items) and not self._produce():
            return None
        self.index += 1
        return self.items[self.index - 1]

    def unpack(self, tx) -> list[VariableTracker]:
        rest, self.index = self.remaining(), len(self.items)
        return rest

    def remaining(self) -> list[VariableTracker]:
        """The items still to come, without consuming them (a lazy iterator computes them now)."""
        while self._produce():
            pass
        return self.items[self.index:]

    def _produce(self) -> bool:
        if self.pending is None:
            return False
        item = next(self.pending, None)
        if item is None:
            self.pending = None
            return False
        self.items.append(item)
        return True

    def reconstruct(self, cg) -> None:
        """`iter((items still to come))`: a graph break inside a loop continues the same iterations."""
        rest = self.remaining()

        def build() -> None:
            for item in rest:
                item.reconstruct(cg)
            cg.emit("BUILD_TUPLE", len(rest))
            cg.emit("GET_ITER")

        cg.rebuild_once(self, build)  # one iterator, however many places hold it


class GeneratorVariable(ListIteratorVariable):
    """The generator an inlined generator function returns. Its body runs lazily, to the next
    `yield` each time the consumer asks for an item, so the graph interleaves producer and consumer
    as Python (and torch._dynamo) runs them: `sum(x * i for i in range(3))` records mul, add, mul,
    add..."""

    def __init__(self, translator: Any):
        # the generator function's own InstructionTranslator: each resumption runs to the next yield
        super().__init__([], types.GeneratorType, iter(translator.resume_generator, None))
        self.translator = translator

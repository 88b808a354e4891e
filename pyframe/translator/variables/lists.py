"""Tuples, lists, torch.Size, named tuples and deques whose items are variable trackers.

A sequence built in the frame is a plain symbolic value: its mutation is done on the tracker. One
read from the frame carries a Source and is guarded by type and length; mutating it is a side
effect on a live object, done on the tracker too and recorded for the transformed code to replay
(side_effects.py). Dicts are in dicts.py, sets in sets.py, iterators in iterators.py.
"""
from __future__ import annotations

import collections
from typing import Any, Callable

import torch

from ...exc import Unsupported
from ...source import Source
from .base import BoundMethodVariable, VariableTracker, constant_args
from .constant import ConstantVariable
from .exceptions import raise_symbolic
from .iterators import extension_items


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

    def is_python_constant(self) -> bool:
        return all(not v.is_symbolic and v.is_python_constant() for v in self.items)

    def truth(self) -> bool:
        return bool(self.items)

    def unpack(self, tx) -> list[VariableTracker]:
        return list(self.items)

    def getitem(self, tx, key: VariableTracker) -> VariableTracker:
        index = _index(key)
        if isinstance(index, slice):
            return self.sliced(self.items[index])
        if type(index) is not int and not hasattr(type(index), "__index__"):
            raise Unsupported(f"{self.container_type.__name__} index {index!r}")
        if not -len(self.items) <= index < len(self.items):
            # raised in the traced program, as CPython words it: a try or with block may catch it
            raise_symbolic(IndexError, f"{'list' if issubclass(self.container_type, list) else 'tuple'} index out of range")
        return self.items[index]

    def sliced(self, items: list[VariableTracker]) -> VariableTracker:
        """`self[a:b]` made of `items`: a new plain list or tuple, as CPython makes it for every
        list and tuple, subclasses (a namedtuple) and the frame's own lists included (torch.Size
        keeps its type: SizeVariable)."""
        if issubclass(self.container_type, list):
            return ListVariable(items)
        if issubclass(self.container_type, tuple):
            return TupleVariable(items)
        raise Unsupported(f"a slice of a {self.container_type.__name__}")

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
        """One constant where every call's tuple would be equal and hold nothing a program could
        change or tell from a new one; otherwise built from its items (a list, dict or set in it is
        a new one at each call, or the very one the frame holds)."""
        if self.source is None and self.is_python_constant():
            value = self.as_python_constant()
            if _shareable(value):
                cg.load_const(value)
                return
        super().reconstruct(cg)


def _shareable(value: Any) -> bool:
    """A constant one object may stand for at every call: no list, dict, set, bytearray or deque in
    it (a tracker's as_python_constant makes those anew, so the frame's own would be lost too)."""
    if isinstance(value, (tuple, frozenset)):
        return all(_shareable(item) for item in value)
    return not isinstance(value, (list, dict, set, bytearray, collections.deque))


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


class ListVariable(BaseListVariable):
    container_type = list

    def store_item(self, index: Any, value: Any) -> None:
        """`lst[index] = value` (for a slice, `value` is the list of new items)."""
        self.items[index] = value

    def call_method(self, tx, name, args, kwargs) -> VariableTracker:
        mutating = {"append", "extend", "insert", "pop", "clear", "reverse", "remove", "sort", "__delitem__"}
        if name == "copy" and not args and not kwargs:  # a shallow copy: the same item trackers
            return ListVariable(list(self.items))
        if name == "__setitem__" and len(args) == 2 and not kwargs and args[0].is_python_constant() \
                and isinstance(args[0].as_python_constant(), (int, slice)):  # (`list.__setitem__(l, i, v)`)
            index = args[0].as_python_constant()
            tx.side_effects.mutate(self)
            self.store_item(index, args[1].unpack(tx) if isinstance(index, slice) else args[1])
            return ConstantVariable(None)
        if name not in mutating:
            return super().call_method(tx, name, args, kwargs)
        if name == "remove" and len(args) == 1 and not kwargs:
            index = _first_equal(self.items, args[0])
            if index is None:
                raise_symbolic(ValueError, "list.remove(x): x not in list")
            tx.side_effects.mutate(self)
            del self.items[index]
            return ConstantVariable(None)
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
            # one item at a time, as list.extend takes an iterator's: a generator that reads the
            # list sees the items already added (`lst.extend(lst[i] + 1 for i in ...)`)
            for item in extension_items(tx, self, args[0]):
                self.items.append(item)
        elif name == "insert" and len(args) == 2:
            self.items.insert(_index(args[0]), args[1])
        elif name == "pop" and len(args) <= 1:
            return self.items.pop(_index(args[0]) if args else -1)
        elif name == "clear" and not args:
            self.items.clear()
        elif name == "reverse" and not args:
            self.items.reverse()
        elif name == "sort" and not args and set(kwargs) <= {"key", "reverse"}:
            self.items[:] = sort_trackers(tx, self.items, kwargs.get("key"), kwargs.get("reverse"))
        else:
            raise Unsupported(f"list.{name}() with these arguments")
        return ConstantVariable(None)


def _first_equal(items: list[VariableTracker], value: VariableTracker) -> int | None:
    """The index of the first item equal to `value`, as list.remove and list.index compare (the
    item itself first, then ==), when every comparison up to it is known while tracing: the very
    tracker, or two constants. An item unknown while tracing (a tensor) before the match makes the
    answer data dependent: Unsupported."""
    known = value.is_python_constant() and not value.is_symbolic
    for i, item in enumerate(items):
        if item is value:
            return i
        if not (known and item.is_python_constant() and not item.is_symbolic):
            raise Unsupported("list.remove() comparing values unknown while tracing")
        if item.as_python_constant() == value.as_python_constant():
            return i
    return None


def sort_trackers(tx, items: list[VariableTracker], key: VariableTracker | None,
                  reverse: VariableTracker | None) -> list[VariableTracker]:
    """`items` in the order sorted() gives them: by their values, or by what `key` returns for each
    (called as Python calls it, once per item, in order), which must be known while tracing; stable,
    also in reverse, as Python's sort is."""
    if key is not None and not (key.is_python_constant() and key.as_python_constant() is None):
        keys = [key.call(tx, [item], {}) for item in items]
    else:
        keys = items
    if not all(k.is_python_constant() for k in keys):
        raise Unsupported("sorting by values unknown while tracing")
    values = [k.as_python_constant() for k in keys]
    descending = bool(reverse.as_python_constant()) if reverse is not None else False
    order = sorted(range(len(items)), key=values.__getitem__, reverse=descending)
    return [items[i] for i in order]


class _Unread:
    """An item of a list the frame holds that the trace has not read yet: its original index."""

    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index

    def __repr__(self) -> str:
        return f"<unread item {self.index}>"


class FrameListVariable(ListVariable):
    """A list the frame holds (it has a Source). Each item is wrapped, and so guarded, when the
    trace first reads it, as torch._dynamo's lazy trackers are: an item the trace only replaces
    (YOLOv5's `self.grid[i] = self._make_grid(...)`) is never guarded, so the new value stored
    there does not fail the guards of the next call. Any use of `items` reads them all."""

    def __init__(self, length: int, read_item: Callable[[int], VariableTracker], source: Source):
        self._read_item = read_item  # original index -> the item's tracker, guarded
        super().__init__([_Unread(i) for i in range(length)], source)

    @property
    def items(self) -> list[VariableTracker]:
        if self._unread:
            items = self._items
            for j, item in enumerate(items):
                if type(item) is _Unread:
                    items[j] = self._read_item(item.index)
            self._unread = 0
        return self._items

    @items.setter
    def items(self, items: list) -> None:
        self._items = items
        self._unread = sum(type(item) is _Unread for item in items)

    def _item(self, index: int) -> VariableTracker:
        item = self._items[index]
        if type(item) is _Unread:
            item = self._items[index] = self._read_item(item.index)
            self._unread -= 1
        return item

    def getitem(self, tx, key: VariableTracker) -> VariableTracker:
        index = _index(key)
        if type(index) is int and -len(self._items) <= index < len(self._items):
            return self._item(index)
        if isinstance(index, slice):  # reads (and guards) only the items it selects
            return self.sliced([self._item(i) for i in range(len(self._items))[index]])
        return super().getitem(tx, key)

    def store_item(self, index: Any, value: Any) -> None:
        if type(index) is int and -len(self._items) <= index < len(self._items):
            if type(self._items[index]) is _Unread:
                self._unread -= 1
            self._items[index] = value
        else:
            super().store_item(index, value)


class DequeVariable(ListVariable):
    """A collections.deque made while tracing (its maxlen drops items from the other end)."""

    container_type = collections.deque

    def __init__(self, items: list[VariableTracker], maxlen: int | None = None):
        # the last `maxlen` items (all of them when there are fewer: never a negative start)
        super().__init__(items if maxlen is None else items[max(len(items) - maxlen, 0):])
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
            for item in ([args[0]] if name == "append" else extension_items(tx, self, args[0])):
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
            for item in ([args[0]] if name == "appendleft" else extension_items(tx, self, args[0])):
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

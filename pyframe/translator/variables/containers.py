"""Tuples, lists, torch.Size and dicts whose items are themselves variable trackers.

Containers built in the frame are plain symbolic values: their mutation is done on the tracker.
Containers read from the frame carry a Source and are guarded by type and length (dicts: their
keys, in order; keys that hash by identity, such as tensors and modules, by identity);
mutating one of those is a side effect on a live object: done on the tracker too, and recorded for
the transformed code to replay (side_effects.py).
"""
from __future__ import annotations

import collections
import enum
import types
from typing import Any, Callable, Iterator

import torch

from ...exc import Unsupported
from ...guards import GuardKind
from ...source import DictKeySource, Source
from .base import UNKNOWN_OBJECT, BoundMethodVariable, VariableTracker, constant_args
from .constant import ConstantVariable, is_constant_value
from .exceptions import ExceptionVariable, RaisedException, raise_symbolic


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
            return self.sliced(self.items[index])
        try:
            return self.items[index]
        except (IndexError, TypeError) as e:
            raise Unsupported(f"{self.container_type.__name__} index {index!r}: {e}") from e

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


_NAMEDTUPLE_CODES = {name: getattr(collections.namedtuple("_Probe", "a"), name).__code__
                     for name in ("_replace", "_asdict")}


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

    def call_method(self, tx, name, args, kwargs) -> VariableTracker:
        # collections.namedtuple's own _replace and _asdict (one code object for every namedtuple
        # class; a class that overrides them is inlined as any method)
        method = getattr(self.container_type, name, None)
        code = getattr(method, "__code__", None)
        if code is _NAMEDTUPLE_CODES["_replace"] and not args:
            unknown = [k for k in kwargs if k not in self.fields]
            if unknown:
                raise_symbolic(ValueError, f"Got unexpected field names: {unknown!r}")
            items = [kwargs.get(f, item) for f, item in zip(self.fields, self.items)]
            return NamedTupleVariable(items, self.container_type)
        if code is _NAMEDTUPLE_CODES["_asdict"] and not args and not kwargs:
            return DictVariable(dict(zip(self.fields, self.items)))
        return super().call_method(tx, name, args, kwargs)

    def reconstruct(self, cg) -> None:
        if self.source is not None:
            super().reconstruct(cg)
            return
        # A namedtuple is built from its fields (`cls._make(items)`), a structseq from one sequence.
        make = getattr(self.container_type, "_make", None) if hasattr(self.container_type, "_fields") else None

        def build() -> None:
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

        # Once: an instance of a subclass has a __dict__ (an attribute set on it at a graph break
        # must be on the object the rest of the frame sees), and `is` holds between its uses.
        cg.rebuild_once(self, build)


class ListVariable(BaseListVariable):
    container_type = list

    def store_item(self, index: Any, value: Any) -> None:
        """`lst[index] = value` (for a slice, `value` is the list of new items)."""
        self.items[index] = value

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
            # one item at a time, as list.extend takes an iterator's: a generator that reads the
            # list sees the items already added (`lst.extend(lst[i] + 1 for i in ...)`)
            for item in _extension(tx, self, args[0]):
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
            for item in ([args[0]] if name == "append" else _extension(tx, self, args[0])):
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
            for item in ([args[0]] if name == "appendleft" else _extension(tx, self, args[0])):
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


def is_constant_key(value: Any) -> bool:
    """A dict key compared by value: a constant (1, "a", None, a dtype...), an enum member, or a
    tuple or frozenset of these. Such keys are the dict's own keys while tracing, so 1, 1.0 and
    True are one key, as in Python."""
    if isinstance(value, (tuple, frozenset)):
        return all(is_constant_key(v) for v in value)
    return is_constant_value(value) or isinstance(value, enum.Enum)


def hashes_by_identity(value_type: type, value: Any = None) -> bool:
    """Objects of `value_type` are dict keys by identity: tensors (whose == is elementwise, and
    whose hash is their id), and objects whose type keeps object's __eq__ and __hash__ (modules,
    functions, classes, plain instances). A builtin function of a module (`len`, `torch.add`) is
    made once, so its own == is identity in practice."""
    if issubclass(value_type, torch.Tensor):
        return value_type.__hash__ is torch.Tensor.__hash__
    if value_type is types.BuiltinFunctionType:
        owner = getattr(value, "__self__", UNKNOWN_OBJECT)
        return owner is None or isinstance(owner, types.ModuleType)
    return value_type.__hash__ is object.__hash__ and value_type.__eq__ is object.__eq__


class ObjectKey:
    """A key of a traced dict that hashes by identity (see `hashes_by_identity`): two are one key
    when their `token`s are one object, and a tensor key is never compared with ==.

    The token is the object the key is: the real object when the trace holds it (read from the
    frame; for a tensor, the graph input it is), the FakeTensor of a tensor the graph makes (a new
    object, distinct from every other), the tracker of an object made while tracing (which has
    one tracker). `source` is where a key read from the frame was read: for a tensor, whether it is
    another tensor of the frame depends on which tensors the frame is given, so the trace guards
    that when it matters (`relate_identities`). A key of a dict read from the frame makes
    its tracker (`var`) only when the trace uses the key as a value, so a parameter key that is only
    looked up costs no graph input and no guard of its own."""

    __slots__ = ("token", "source", "made_var", "_make_var")

    def __init__(self, token: Any, var: VariableTracker | None = None, source: Source | None = None,
                 make_var: Callable[[], VariableTracker] | None = None):
        self.token, self.source = token, source
        self.made_var, self._make_var = var, make_var  # made_var: None until the tracker is made

    @property
    def var(self) -> VariableTracker:
        """The key as a value (the tracker the dict holds it by: the first one stored, as a dict
        keeps the first of equal keys)."""
        if self.made_var is None:
            self.made_var = self._make_var()
        return self.made_var

    @property
    def is_frame_tensor(self) -> bool:
        return self.source is not None and isinstance(self.token, torch.Tensor)

    def is_stable(self, guards) -> bool:
        """Read through an object guarded by identity (a module's parameter), or a key of a dict
        whose keys are guarded by identity: the frame is expected to give this very tensor again."""
        if _pinned_by_keys_guard(guards, self.source):
            return True
        source = self.source
        while source is not None:
            if guards.has(source, GuardKind.ID_MATCH):
                return True
            source = getattr(source, "base", None)
        return False

    def reconstruct(self, cg) -> None:
        if self.made_var is None and self.source is not None:
            cg.load_source(self.source)
        else:
            self.var.reconstruct(cg)

    def __hash__(self) -> int:
        return id(self.token)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObjectKey) and other.token is self.token

    def __repr__(self) -> str:
        return f"ObjectKey({self.made_var if self.made_var is not None else type(self.token).__name__})"


def dict_key(tx, key: VariableTracker) -> Any:
    """`key` as a key of a traced dict: its value if it is compared by value (is_constant_key),
    else an ObjectKey. A key that is neither (an object with its own __eq__ or __hash__, a value
    unknown while tracing) is Unsupported; an unhashable constant raises TypeError."""
    if key.is_python_constant():
        value = key.as_python_constant()
        if is_constant_key(value):
            try:
                hash(value)
            except TypeError:
                raise_symbolic(TypeError, f"unhashable type: '{type(value).__name__}'")
            return value
    token = key.identity()
    try:
        key_type = key.python_type()
    except Unsupported:
        key_type = None
    if token is UNKNOWN_OBJECT or key_type is None or not hashes_by_identity(key_type, token):
        raise Unsupported(f"a dict key that does not hash by identity nor is a constant ({key})")
    if issubclass(key_type, torch.Tensor):
        graph_input = tx.output.input_of(token)  # token: the tensor's FakeTensor
        if graph_input is None:
            return ObjectKey(token, key)  # made by the graph
        return ObjectKey(graph_input.example, key, key.source or graph_input.source)
    if key.source is not None and not _pinned_by_keys_guard(tx.output.guards, key.source):
        tx.output.guards.add(key.source, GuardKind.ID_MATCH, token)  # (modules, functions: already)
    return ObjectKey(token, key)


def _pinned_by_keys_guard(guards, source: Source | None) -> bool:
    """A key of a dict whose keys are guarded by identity (DICT_KEYS_ID_MATCH) already."""
    return isinstance(source, DictKeySource) and guards.has(source.base, GuardKind.DICT_KEYS_ID_MATCH)


def relate_identities(tx, keys: list[ObjectKey]) -> None:
    """The trace decided which of these tensors of the frame (read from different sources) are one
    object: guard that. Tensors the frame is expected to give again (`is_stable`: parameters of a
    module guarded by identity, keys of a frame dict) are pinned by identity; otherwise (tensors
    passed in, new at each call) one guard checks that they alias as they did now, as torch._dynamo
    checks its tensor inputs, and no new tensor recompiles."""
    guards = tx.output.guards
    if all(k.is_stable(guards) for k in keys):
        for k in keys:
            if not _pinned_by_keys_guard(guards, k.source):
                guards.add(k.source, GuardKind.ID_MATCH, k.token)
        return
    for k in keys:
        guards.add_aliasing(k.source, k.token)


def made_keys(items: dict[Any, VariableTracker]) -> list[VariableTracker]:
    """The keys of `items` that are values the trace holds (a tensor the graph made, a module...),
    not constants nor keys of a frame dict it never used as values (those are loaded from their
    source)."""
    return [k.made_var for k in items if isinstance(k, ObjectKey) and k.made_var is not None]


def key_var(key: Any) -> VariableTracker:
    """A key of a DictVariable's items, as a value."""
    return key.var if isinstance(key, ObjectKey) else ConstantVariable(key)


def _constant_of_key(key: Any) -> Any:
    """A key as a Python constant (the dict as a constant: `d == {...}`): a tensor never is one, and
    asking makes no tracker for a key of a frame dict."""
    if isinstance(key, ObjectKey):
        if key.made_var is None and isinstance(key.token, torch.Tensor):
            raise Unsupported("a dict keyed by a tensor is not a Python constant")
        return key.var.as_python_constant()
    return key


def _last_flag(args, kwargs, index: int) -> bool:
    """OrderedDict's `last` argument (popitem, move_to_end), given by position or by name."""
    if len(args) > index:
        return bool(args[index].as_python_constant())
    return bool(kwargs["last"].as_python_constant()) if "last" in kwargs else True


def _raise_key_error(key: Any) -> None:
    if isinstance(key, ObjectKey):
        raise RaisedException(ExceptionVariable(KeyError, [key.var]))
    raise_symbolic(KeyError, key)


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
        return {_constant_of_key(k): v.as_python_constant() for k, v in self.items.items()}

    def truth(self) -> bool:
        return bool(self.items)

    def unpack(self, tx) -> list[VariableTracker]:
        return [key_var(k) for k in self.items]

    def _key(self, tx, key: VariableTracker) -> Any:
        """`key` as a key of this dict (dict_key). Whether a tensor of the frame is one of this dict's
        other tensors of the frame depends on which tensors the frame is given: that is guarded
        (relate_identities), and the answer holds for as long as the guards do."""
        return self._relate(tx, dict_key(tx, key))

    def _relate(self, tx, key: Any) -> Any:
        if isinstance(key, ObjectKey) and key.is_frame_tensor:
            others = [o for o in self.items if isinstance(o, ObjectKey) and o.is_frame_tensor and o.source != key.source]
            if others:
                relate_identities(tx, [key, *others])
        return key

    def store(self, tx, key: VariableTracker, value: VariableTracker) -> None:
        """`d[key] = value` on the tracker (the caller records the mutation if it is one)."""
        self.items[self._key(tx, key)] = value

    def getitem(self, tx, key: VariableTracker) -> VariableTracker:
        k = self._key(tx, key)
        if k not in self.items:
            if self.default_factory is None or self.default_factory.is_python_constant() \
                    and self.default_factory.as_python_constant() is None:
                _raise_key_error(k)
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
            return self.items.get(self._key(tx, args[0]), args[1] if len(args) == 2 else ConstantVariable(None))
        if name in ("keys", "values", "items") and not args:
            return DictViewVariable(self, name)
        if name == "__contains__" and len(args) == 1:
            return ConstantVariable(self._key(tx, args[0]) in self.items)
        if name == "copy" and not args:  # shallow: the same values under the same keys
            return DictVariable(self.items, None, self.dict_type, self.default_factory)
        if name in ("__setitem__", "__delitem__", "update", "pop", "setdefault", "clear", "popitem", "move_to_end"):
            tx.side_effects.mutate(self)
            if name == "__setitem__" and len(args) == 2:
                self.store(tx, args[0], args[1])
                return ConstantVariable(None)
            if name == "__delitem__" and len(args) == 1:
                k = self._key(tx, args[0])
                if k not in self.items:
                    _raise_key_error(k)
                del self.items[k]
                return ConstantVariable(None)
            if name == "pop" and 1 <= len(args) <= 2:
                k = self._key(tx, args[0])
                if k in self.items:
                    return self.items.pop(k)
                if len(args) == 2:
                    return args[1]
                _raise_key_error(k)
            if name == "setdefault" and 1 <= len(args) <= 2:
                return self.items.setdefault(self._key(tx, args[0]),
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
                key = self._key(tx, args[0])
                if key not in self.items:
                    _raise_key_error(key)
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
            return dict.fromkeys(_constant_of_key(k) for k in self.dict_var.items).keys()
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
            return ConstantVariable(self.dict_var._key(tx, args[0]) in self.dict_var.items)
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


_TUPLE_ITERATOR, _LIST_ITERATOR = type(iter(())), type(iter([]))


def iterate(tx, iterable: VariableTracker) -> Iterator[VariableTracker]:
    """The items of `iterable`, an iterator's (a generator's) taken one at a time as Python would."""
    if isinstance(iterable, ListIteratorVariable):
        while (item := iterable.next()) is not None:
            yield item
    else:
        yield from iterable.unpack(tx)


def _extension(tx, container: VariableTracker, iterable: VariableTracker) -> Iterator[VariableTracker]:
    """What `container.extend(iterable)` adds, as CPython takes it: a copy first when extending with
    itself, else one item at a time (a generator reading the container sees it grow)."""
    return iter(iterable.unpack(tx)) if iterable is container else iterate(tx, iterable)


class ListIteratorVariable(VariableTracker):
    """An iterator: what GET_ITER leaves on the stack, and what iter(), zip(), map(), enumerate(),
    reversed(), filter(), itertools and generators return. `items` holds the items it has
    produced; a lazy one (map, zip, a generator...) produces the rest from `pending`, one at a
    time as its consumer asks, so calls traced for them interleave with the consumer's as in Python.
    `kind` is the type Python would give it (zip, map, list_iterator...). One read from the frame
    (a tuple iterator, as a loop's iterator reaches a resume function) has a source: its items are
    the ones it has still to give, and the side-effect replay moves the real one on by `index`."""

    def __init__(self, items: list[VariableTracker], kind: type = type(iter(())),
                 pending: Iterator[VariableTracker] | None = None, source: Source | None = None):
        super().__init__(source)
        self.items = items
        self.index = 0
        self.kind = kind
        self.pending = pending

    def python_type(self) -> type:
        return self.kind

    # What the StopIteration of the last next() that found it exhausted carries (`yield from`'s
    # value): None but for a generator returning a value.
    stop_value: VariableTracker | None = None

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
        """`iter((items still to come))`: a graph break inside a loop continues the same iterations.
        One read from the frame is itself, moved on by the replay (side_effects.py)."""
        if self.source is not None:
            cg.load_source(self.source)
            return
        rest = self.remaining()

        def build() -> None:
            for item in rest:
                item.reconstruct(cg)
            # iter() of a list is a list_iterator, as the one the trace stands for was
            cg.emit("BUILD_LIST" if self.kind is _LIST_ITERATOR else "BUILD_TUPLE", len(rest))
            cg.emit("GET_ITER")

        cg.rebuild_once(self, build)  # one iterator, however many places hold it

    def rebuilt_as_itself(self) -> bool:
        """Whether reconstruct() gives back an iterator of the type Python gave (a tuple or a
        list iterator, or the frame's own); a map, zip, generator... is rebuilt as a tuple
        iterator, which only a loop's hidden iterator may be."""
        return self.source is not None or self.kind in (_TUPLE_ITERATOR, _LIST_ITERATOR)


class GeneratorVariable(ListIteratorVariable):
    """The generator an inlined generator function returns. Its body runs lazily, to the next
    `yield` each time the consumer asks for an item, so the graph interleaves producer and consumer
    as Python (and torch._dynamo) runs them: `sum(x * i for i in range(3))` records mul, add, mul,
    add..."""

    def __init__(self, translator: Any):
        # the generator function's own InstructionTranslator: each resumption runs to the next yield
        super().__init__([], types.GeneratorType, iter(translator.resume_generator, None))
        self.translator = translator
        self.finished = False

    def next(self) -> VariableTracker | None:
        item = super().next()
        if item is None:
            # The first next() to find it done gets its return value (items produced ahead, for a
            # break, do not move that), as CPython raises StopIteration(value) once; later ones None.
            self.stop_value = None if self.finished else self.translator.return_value
            self.finished = True
        return item

"""Dicts (dict, OrderedDict, defaultdict), their views, and the keys that hash by identity.

A dict's keys are constants (compared by value), objects compared by identity as CPython
compares them (a tensor, a module, a class: `ObjectKey`), never with `==`, or tuples holding such
objects (`TupleKey`, compared item by item). One read from the frame
is guarded by its keys, in order (keys that hash by identity, by identity); mutating it is a side
effect, recorded for the transformed code to replay (side_effects.py).
"""
from __future__ import annotations

import collections
import dataclasses
import enum
import operator
import types
from typing import Any, Callable

import torch

from ...exc import Unsupported
from ...guards import GuardKind
from ...source import DictKeySource, Source
from .base import UNKNOWN_OBJECT, BoundMethodVariable, VariableTracker, constant_args
from .constant import ConstantVariable, is_constant_value
from .exceptions import ExceptionVariable, RaisedException, raise_symbolic
from .iterators import ListIteratorVariable
from .lists import BaseListVariable, TupleVariable


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


    def frame_tensors(self) -> list["ObjectKey"]:
        """The keys within this one that are tensors of the frame (whose identities are guarded)."""
        return [self] if self.is_frame_tensor else []


class TupleKey(ObjectKey):
    """A tuple key holding a key that is not a constant (`(x, 1)`, a tensor in it): equal to another
    tuple of equal keys, element by element, and hashing as such, as Python's tuples do (whose
    comparison of items starts with their identity, so a tensor in a tuple is compared by it)."""

    __slots__ = ()

    def __init__(self, keys: tuple, var: VariableTracker):
        super().__init__(keys, var)

    def frame_tensors(self) -> list[ObjectKey]:
        return [inner for k in self.token if isinstance(k, ObjectKey) for inner in k.frame_tensors()]

    def __hash__(self) -> int:
        return hash(self.token)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TupleKey) and other.token == self.token

    def __repr__(self) -> str:
        return f"TupleKey{self.token!r}"


class DataclassKey(TupleKey):
    """An instance of a dataclass whose `__eq__` and `__hash__` are the ones dataclasses writes
    (`frozen=True`, or `unsafe_hash=True`): equal to another of its class with equal fields, and
    hashing as the tuple of its fields does, as those methods compute it."""

    __slots__ = ()

    def __init__(self, cls: type, fields: tuple, var: VariableTracker):
        ObjectKey.__init__(self, (cls, fields), var)

    def frame_tensors(self) -> list[ObjectKey]:
        return [inner for k in self.token[1] if isinstance(k, ObjectKey) for inner in k.frame_tensors()]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DataclassKey) and other.token[0] is self.token[0] and other.token[1] == self.token[1]

    __hash__ = TupleKey.__hash__  # (defining __eq__ alone would make it unhashable)

    def __repr__(self) -> str:
        return f"DataclassKey({self.token[0].__name__}{self.token[1]!r})"


class ScalarKey(ObjectKey):
    """An instance of an int, float or str subclass that keeps its base's `__eq__` and `__hash__`
    (`class Idx(int)`, an IntEnum-like tag): equal to its value and to any key equal to it, and
    hashing as it does, so `d[3]` finds the key `Idx(3)`; the dict keeps the first of equal keys,
    the object itself (its tracker), as Python's does."""

    __slots__ = ()

    def frame_tensors(self) -> list[ObjectKey]:
        return []

    def __hash__(self) -> int:
        return hash(self.token)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ScalarKey):
            return other.token == self.token
        if isinstance(other, ObjectKey):
            return False
        return bool(other == self.token)  # (a plain constant key: 3 == Idx(3), as Python compares)

    def __repr__(self) -> str:
        return f"ScalarKey({type(self.token).__name__} {self.token!r})"


class FakeIdVariable(VariableTracker):
    """`id(obj)` of an object the program never sees for real: a tensor the graph makes, an object
    made while tracing. Its number is not known while tracing, but what the program can do with it
    is: compare it with another such id, or use it as a key of a dict or an element of a set,
    where two are one when they are the id of one object (as torch._dynamo's FakeIdVariable). It
    cannot outlive the trace (no source: a graph break where it would be rebuilt)."""

    def __init__(self, token: Any):
        super().__init__()
        self.token = token  # the object's identity (VariableTracker.identity)

    def python_type(self) -> type:
        return int

    def __repr__(self) -> str:
        return f"FakeIdVariable({type(self.token).__name__})"


class FakeIdKey(ObjectKey):
    """A FakeIdVariable as a dict key: equal to the id of the same object, to nothing else."""

    __slots__ = ()

    def frame_tensors(self) -> list[ObjectKey]:
        return []

    def __hash__(self) -> int:
        return hash(("id", id(self.token)))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FakeIdKey) and other.token is self.token

    def __repr__(self) -> str:
        return f"FakeIdKey({type(self.token).__name__})"


def _generated_by_dataclasses(cls: type, name: str) -> bool:
    method = cls.__dict__.get(name)
    code = getattr(method, "__code__", None)
    return code is not None and code.co_filename == "<string>" and method.__qualname__ == f"{cls.__qualname__}.{name}"


def value_fields(cls: type) -> list[str] | None:
    """The fields a dataclass instance is compared and hashed by, when its class has the `__eq__`
    and `__hash__` dataclasses generates (both over the same fields); None for any other class."""
    if not dataclasses.is_dataclass(cls) or not all(_generated_by_dataclasses(cls, n) for n in ("__eq__", "__hash__")):
        return None
    fields = dataclasses.fields(cls)
    compared = [f.name for f in fields if f.compare]
    hashed = [f.name for f in fields if (f.compare if f.hash is None else f.hash)]
    return compared if compared == hashed else None


def type_name(cls: type) -> str:
    """A class's name as CPython's errors give it (its tp_name): a class defined in C outside the
    builtins names its module too (`numpy.ndarray`), one made by a class statement does not."""
    if cls.__module__ == "builtins" or cls.__flags__ & _HEAPTYPE:
        return cls.__name__
    return f"{cls.__module__}.{cls.__name__}"


_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE


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
    if type(key) is TupleVariable:
        return TupleKey(tuple(dict_key(tx, item) for item in key.items), key)
    if isinstance(key, FakeIdVariable):
        return FakeIdKey(key.token, key)
    token = key.pinned_identity(tx)
    try:
        key_type = key.python_type()
    except Unsupported:
        key_type = None
    fields = value_fields(key_type) if key_type is not None else None
    scalar = key.builtin_scalar() if hasattr(key, "builtin_scalar") else None
    if scalar is not None and key_type.__hash__ is type(scalar).__hash__ and key_type.__eq__ is type(scalar).__eq__:
        return ScalarKey(scalar, key)  # an int, float or str subclass's instance (container_subclass.py)
    if fields is not None:
        return DataclassKey(key_type, tuple(dict_key(tx, tx.load_attr(key, name)) for name in fields), key)
    if key_type is not None and key_type.__hash__ is None:  # (a NumPy array, a list: what hash() raises)
        raise_symbolic(TypeError, f"unhashable type: '{type_name(key_type)}'")
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


def name_as_constructed(key: Any, value: VariableTracker) -> None:
    """An item a dict is made with (`dict(...)`, `OrderedDict(...)`, a dict subclass's
    `dict.__init__`) names its values as torch._dynamo's polyfill of that construction does: its
    `for key, value in data.items(): self[key] = value` (or over pairs, or over the keywords)
    stores each to the locals `key` and `value`, which name a tensor not named yet."""
    if isinstance(key, VariableTracker):
        key.set_name_hint("key")
    elif isinstance(key, ObjectKey) and key.made_var is not None:
        key.made_var.set_name_hint("key")
    value.set_name_hint("value")


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


def raise_key_error(key: Any) -> None:
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

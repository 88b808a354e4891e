"""The keys of the dicts and sets a trace holds, compared as CPython compares them.

A key is a constant (compared by value), an object compared by identity (a tensor, a module, a
class: `ObjectKey`, never compared with `==`), or a tuple (or a frozen dataclass) holding such
objects (`TupleKey`, `DataclassKey`, compared item by item). An `id()` of an object made while
tracing is a FakeIdVariable, its number unknown and its identity known (`FakeIdKey`). A dict read
from the frame is guarded by its keys (dicts.py); `relate_identities` guards what the trace
assumed about keys compared by identity.
"""
from __future__ import annotations

import dataclasses
import enum
import types
from typing import Any, Callable

import torch

from ...exc import Unsupported
from ...guards import GuardKind
from ...source import DictKeySource, Source
from .base import UNKNOWN_OBJECT, VariableTracker
from .constant import ConstantVariable, is_constant_value
from .exceptions import ExceptionVariable, RaisedException, raise_symbolic
from .lists import TupleVariable


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


def constant_of_key(key: Any) -> Any:
    """A key as a Python constant (the dict as a constant: `d == {...}`): a tensor never is one, and
    asking makes no tracker for a key of a frame dict."""
    if isinstance(key, ObjectKey):
        if key.made_var is None and isinstance(key.token, torch.Tensor):
            raise Unsupported("a dict keyed by a tensor is not a Python constant")
        return key.var.as_python_constant()
    return key


def raise_key_error(key: Any) -> None:
    if isinstance(key, ObjectKey):
        raise RaisedException(ExceptionVariable(KeyError, [key.var]))
    raise_symbolic(KeyError, key)

"""Guards: the facts a trace relied on, as checks on Sources.

The translator calls `GuardSet.add` while it reads values from the frame (a tensor's metadata, a
global's identity, a constant's value). When the frame is done, guard_tree.py lowers the set to a
`pyframe._C.RootGuardManager`. Every guard also renders as readable Python-like text, used by
explain(), the logs and the recompile reasons. This module knows nothing of the translator.
"""
from __future__ import annotations

import dataclasses
import enum
import types
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional

import torch

from .source import AttrSource, GlobalSource, GlobalsDictSource, ItemSource, LocalSource, Source, remembered


class GuardKind(enum.IntEnum):
    # The value is the cost rank: the C++ tree runs cheaper checks first.
    ID_MATCH = 0
    TYPE_MATCH = 1
    NONE_MATCH = 2
    NOT_NONE_MATCH = 3
    EQUALS_MATCH = 4
    LEN_MATCH = 5
    DICT_KEYS_MATCH = 6
    # a dict's keys, in order, some compared by identity (tensors, modules, classes...): KeysById
    DICT_KEYS_ID_MATCH = 7
    TENSOR_MATCH = 8
    # hasattr(base, attr) == value, for source `base.attr` (an attribute found missing is never read)
    HASATTR_MATCH = 9
    # (name in d) == value, for source `d[name]` or the frame's `G[name]`: a global found missing,
    # its builtin used instead (a global of that name defined later shadows it)
    DICT_CONTAINS_MATCH = 10
    # for source `base.attr`: object's lookup of attr on base finds the class's ClassAttr.value
    # through the MRO (None: nothing there), not shadowed by base's instance dict
    CLASS_ATTR_MATCH = 11
    # len(getattr(base, name)) == n for each (name, n) of the value, a tuple of pairs: a module's
    # four hook tables, one check on the module (a model calls a hundred modules)
    ATTRS_LEN_MATCH = 12


@dataclass(frozen=True)
class TensorMeta:
    """What TENSOR_MATCH checks: the tensor's exact type and static metadata; and, when not None,
    its storage offset and its storage's size in bytes. Those two are checked only where a trace
    depends on them (GuardSet.storage_facts): it read an offset, or inputs shared a storage."""

    type: type
    dtype: torch.dtype
    device: torch.device
    sizes: tuple[int, ...]
    strides: tuple[int, ...]
    requires_grad: bool
    storage_offset: Optional[int] = None
    storage_nbytes: Optional[int] = None

    @classmethod
    def of(cls, t: torch.Tensor, fake: Optional[torch.Tensor] = None) -> "TensorMeta":
        """`t`'s metadata; with `fake`, its FakeTensor in a graph with dynamic shapes, the sizes
        and strides that are symbolic there are None (left to the shape guards, ShapeGuard)."""
        sizes, strides = tuple(t.shape), tuple(t.stride())
        if fake is not None:
            sizes = tuple(n if type(f) is int else None for n, f in zip(sizes, fake.shape))
            strides = tuple(n if type(f) is int else None for n, f in zip(strides, fake.stride()))
        return cls(type(t), t.dtype, t.device, sizes, strides, t.requires_grad)

    def with_storage(self, t: torch.Tensor) -> "TensorMeta":
        """The same check, also of `t`'s storage offset and storage size (not where some size is
        dynamic: the storage grows with it)."""
        dynamic = None in self.sizes or None in self.strides
        nbytes = t.untyped_storage().nbytes() if _has_storage(t) and not dynamic else None
        return dataclasses.replace(self, storage_offset=t.storage_offset(), storage_nbytes=nbytes)


def _has_storage(t: torch.Tensor) -> bool:
    try:
        t.untyped_storage()
        return True
    except (RuntimeError, NotImplementedError):  # sparse, nested, a subclass without one
        return False


def storage_key(value: Any) -> int:
    """Which storage a value lives on, as an int: a tensor's storage, else the object itself."""
    if isinstance(value, torch.Tensor) and _has_storage(value):
        return value.untyped_storage()._cdata
    return id(value)


@dataclass(frozen=True, eq=False)
class ClassAttr:
    """What CLASS_ATTR_MATCH checks: `type(obj)`'s MRO holds `value` under the name (None: it
    holds nothing), and, `check_instance`, obj's instance dict does not shadow it. A method or a
    property the trace inlined is a fact about the class (patched there or on a base) and about
    the instance (`obj.act = fn`); both fail this guard, which reads no attribute through Python."""

    value: Any
    check_instance: bool = True


@dataclass(frozen=True, eq=False)
class KeysById:
    """What DICT_KEYS_ID_MATCH checks: the dict's keys in order, those flagged `by_id` (keys that
    hash by identity) by identity, the others (constants) by type and value. The guard holds the
    identity keys weakly when they allow it. (Never compared with ==: a tensor's == is elementwise.)"""

    keys: tuple
    by_id: tuple[bool, ...]

    def ids(self) -> list:
        """`[id(k) if by identity else k for k in keys]`, as the guard's text shows them."""
        return [id(k) if by_id else k for k, by_id in zip(self.keys, self.by_id)]


@dataclass(frozen=True)
class Guard:
    source: Source
    kind: GuardKind
    value: Any = None

    def __init__(self, source: Source, kind: GuardKind, value: Any = None) -> None:
        # (the frozen dataclass's own sets each field through object.__setattr__: three times the
        # cost, for the thousand guards of a trace)
        fields = self.__dict__
        fields["source"], fields["kind"], fields["value"] = source, kind, value

    def text(self) -> str:
        return self._text  # made once: the C++ tree and the frame's record both keep it

    def with_value(self, value: Any) -> "Guard":
        """This guard holding `value` for its own (a weak reference to it, or its name for another
        process: warm/), with this one's text."""
        guard = Guard(self.source, self.kind, value)
        guard.__dict__["_text"] = self.text()
        return guard

    @remembered
    def _text(self) -> str:
        return _TEXTS[self.kind](self.source.name(), self)


def _tensor_match_text(name: str, g: Guard) -> str:
    m: TensorMeta = g.value
    storage = "" if m.storage_offset is None else f", storage_offset={m.storage_offset}"
    if m.storage_nbytes is not None:
        storage += f", storage_nbytes={m.storage_nbytes}"
    return (f"check_tensor({name}, {_type_name(m.type)}, {m.dtype}, device={str(m.device)!r}, "
            f"size={list(m.sizes)}, stride={list(m.strides)}, requires_grad={m.requires_grad}{storage})")


def _keys_by_id_text(name: str, g: Guard) -> str:
    described = ", ".join(_key_repr(k) for k, by_id in zip(g.value.keys, g.value.by_id) if by_id)
    return f"keys_by_id({name}) == {g.value.ids()!r}  # ids of: {described}"


def _class_attr_text(name: str, g: Guard) -> str:
    base, attr, value = g.source.base.name(), g.source.attr, g.value
    found = "<missing>" if value.value is None else _short_repr(value.value)
    shadow = f" and {attr!r} not in {base}.__dict__" if value.check_instance else ""
    return f"type({base}).{attr} is {found}{shadow}"


def _dict_contains_text(name: str, g: Guard) -> str:
    key, mapping = dict_entry(g.source)
    return f"{key!r} {'in' if g.value else 'not in'} {mapping.name()}"


# The readable text of each kind of guard: (its source's name, the guard) -> str. A table, as the
# C++ leaves of guard_tree.py are (_LEAVES): a trace names hundreds of guards, and in 3.11 every read of an
# enum member through its class (`GuardKind.LEN_MATCH`) costs five times a plain attribute's.
_TEXTS: dict[GuardKind, Callable[[str, Guard], str]] = {
    GuardKind.ID_MATCH: lambda name, g: f"id({name}) == {id(g.value)}  # {_short_repr(g.value)}",
    GuardKind.TYPE_MATCH: lambda name, g: f"type({name}) is {_type_name(g.value)}",
    GuardKind.NONE_MATCH: lambda name, g: f"{name} is None",
    GuardKind.NOT_NONE_MATCH: lambda name, g: f"{name} is not None",
    GuardKind.EQUALS_MATCH: lambda name, g: f"{name} == {g.value!r}",
    GuardKind.LEN_MATCH: lambda name, g: f"len({name}) == {g.value}",
    GuardKind.DICT_KEYS_MATCH: lambda name, g: f"list({name}.keys()) == {list(g.value)!r}",
    GuardKind.DICT_KEYS_ID_MATCH: _keys_by_id_text,
    GuardKind.TENSOR_MATCH: _tensor_match_text,
    GuardKind.HASATTR_MATCH: lambda name, g: f"{'' if g.value else 'not '}hasattr({g.source.base.name()}, "
                                             f"{g.source.attr!r})",
    GuardKind.CLASS_ATTR_MATCH: _class_attr_text,
    GuardKind.DICT_CONTAINS_MATCH: _dict_contains_text,
    GuardKind.ATTRS_LEN_MATCH: lambda name, g: f"[len(getattr({name}, a)) for a in {tuple(a for a, _ in g.value)!r}] "
                                               f"== {[n for _, n in g.value]!r}",
}


@dataclass(frozen=True)
class AliasingGuard:
    """The values at `sources` are one object where their `classes` are equal and distinct
    objects where they differ (and the same for their storages). It names every tensor input that
    is not a parameter or a buffer (variables/builder.py: which inputs are one tensor is part of
    what the graph means to a backend that functionalizes it), as torch._dynamo guards its tensor
    inputs, leaving out parameters and buffers as it does (but for one tensor reached through two
    sources, graph.py); a list, dict or object reached through two sources (side_effects.py); and
    every value the trace compared by identity (objects of the frame as keys of a dict, dicts.py)."""

    sources: tuple[Source, ...]
    classes: tuple[int, ...]
    # the same for the storages the values live on (a tensor's; anything else is its own)
    storage_classes: tuple[int, ...] = ()

    def text(self) -> str:
        names = ", ".join(s.name() for s in self.sources)
        text = f"aliasing({names}) == {list(self.classes)}"
        if self.storage_classes:
            text += f" and storages({names}) == {list(self.storage_classes)}"
        return text + "  # the same number: the same object (storage)"


@dataclass(frozen=True)
class ShapeGuard:
    """A relation between sizes the trace relied on, with dynamic shapes (`2 <= L['x'].size()[0]`,
    `L['x'].size()[0] == L['y'].size()[1]`): `program` (csrc/guard_shapes.h's words, made by
    fake/shapes.py) run on the int values at `sources` gives true."""

    expression: str
    sources: tuple[Source, ...]
    program: tuple[int, ...]

    def text(self) -> str:
        return self.expression


@dataclass(frozen=True)
class GlobalStateGuard:
    """Interpreter-wide torch state a trace depends on, checked in C++ (torch_leaves.cpp) from
    torch's own thread-locals. `state` names it for `RootGuardManager.add_torch_state_match`;
    `expected` is a bool, a dtype, or for autocast None (off) or the autocast dtype."""

    state: str
    expected: Any

    def text(self) -> str:
        if self.state.startswith("autocast_"):
            device = self.state.removeprefix("autocast_")
            if self.expected is None:
                return f"torch.is_autocast_enabled({device!r}) == False"
            return f"torch.get_autocast_dtype({device!r}) == {self.expected} (autocast on)"
        if self.state == "handled_exception":
            return f"(sys.exc_info()[1] is not None) == {self.expected!r}"
        if self.state == "module_hooks":
            return f"any(torch.nn.modules.module._global_{{forward,forward_pre,backward,backward_pre}}_hooks) == {self.expected!r}"
        getter = {"grad_mode": "torch.is_grad_enabled", "inference_mode": "torch.is_inference_mode_enabled",
                  "default_dtype": "torch.get_default_dtype"}[self.state]
        return f"{getter}() == {self.expected!r}"


def _autocast_state(device: str) -> Optional[torch.dtype]:
    return torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else None


def global_state_guards() -> list[GlobalStateGuard]:
    """The torch state every trace depends on: grad mode and autocast change the graph and the
    dtypes Python code sees; inference mode and the default dtype change what tensors are made."""
    return [
        GlobalStateGuard("grad_mode", torch.is_grad_enabled()),
        GlobalStateGuard("inference_mode", torch.is_inference_mode_enabled()),
        GlobalStateGuard("default_dtype", torch.get_default_dtype()),
        GlobalStateGuard("autocast_cpu", _autocast_state("cpu")),
        GlobalStateGuard("autocast_cuda", _autocast_state("cuda")),
    ]


@dataclass(frozen=True)
class PinnedObject:
    """An object an ID_MATCH guard pins, held weakly when it can be (as the C++ leaf holds it)."""

    object_id: int
    ref: Optional[weakref.ref] = None

    @classmethod
    def of(cls, obj: Any) -> "PinnedObject":
        try:
            return cls(id(obj), weakref.ref(obj))
        except TypeError:  # no weak references to it (a dtype, say): lives as long as its module
            return cls(id(obj))

    def is_dead(self) -> bool:
        return self.ref is not None and self.ref() is None

    def is_(self, obj: Any) -> bool:
        return not self.is_dead() and id(obj) == self.object_id


class GuardSet:
    """The guards of one trace, deduplicated, in the order they were added."""

    def __init__(self) -> None:
        self._guards: dict[tuple[Source, GuardKind], Guard] = {}
        self._code_guarded: set[Source] = set()  # functions whose __code__ is guarded (add_code)
        self.global_state = global_state_guards()
        # Sources whose identities the graph or the trace relied on (every tensor input but
        # parameters and buffers; objects compared by identity as dict keys), with the object
        # each held: one guard checks that they alias as they did (AliasingGuard).
        self.aliasing: dict[Source, Any] = {}
        # Set when the trace read a tensor's storage offset (`x.storage_offset()`): the offsets of
        # every tensor input are then guarded (a view's offset is its base's plus its own).
        self.storage_offsets_read = False
        # Each tensor input's storage (storage_key) and its TENSOR_MATCH with the storage facts.
        self._storages: dict[Source, tuple[int, TensorMeta]] = {}
        # With dynamic shapes: the relations between sizes the trace relied on (fake/shapes.py).
        self.shape_guards: list[ShapeGuard] = []

    def add_handled_exception(self, handled: bool) -> None:
        """The trace read sys.exc_info(): whether the frame runs inside an except block (of a
        caller) is part of what it decided."""
        guard = GlobalStateGuard("handled_exception", handled)
        if guard not in self.global_state:
            self.global_state.append(guard)

    def add_module_hooks(self, registered: bool) -> None:
        """The trace inlined a module call: whether nn.Module's global hook tables hold a hook
        (register_module_forward_hook...) is part of what it decided."""
        guard = GlobalStateGuard("module_hooks", registered)
        if guard not in self.global_state:
            self.global_state.append(guard)

    def add(self, source: Source, kind: GuardKind, value: Any = None) -> None:
        key = (source, kind)
        if key not in self._guards:  # (the first stands; a trace adds most guards more than once)
            self._guards[key] = Guard(source, kind, value)

    def add_code(self, function_source: Source, code: types.CodeType) -> None:
        """ID_MATCH on `function_source.__code__` (the function's identity does not pin its code:
        `fn.__code__ = other.__code__`). Asked at every inlined call of a function read from the
        frame, so the repeated ones make no source or guard."""
        if function_source not in self._code_guarded:
            self._code_guarded.add(function_source)
            self.add(AttrSource(function_source, "__code__"), GuardKind.ID_MATCH, code)

    def add_tensor(self, source: Source, value: torch.Tensor, fake: Optional[torch.Tensor] = None) -> None:
        """TENSOR_MATCH on an input tensor (`fake`: its FakeTensor when it has symbolic sizes);
        its storage facts are added by storage_facts()."""
        meta = TensorMeta.of(value, fake)
        self.add(source, GuardKind.TENSOR_MATCH, meta)
        self._storages.setdefault(source, (storage_key(value), meta.with_storage(value)))

    def has(self, source: Source, kind: GuardKind) -> bool:
        return (source, kind) in self._guards

    def add_aliasing(self, source: Source, value: Any) -> None:
        """The trace relied on which of the sources given here hold one object: `value` is the
        object `source` holds now."""
        self.aliasing.setdefault(source, value)

    def aliasing_guard(self) -> Optional["AliasingGuard"]:
        if len(self.aliasing) < 2:
            return None
        return AliasingGuard(tuple(self.aliasing), _classes(map(id, self.aliasing.values())),
                             _classes(map(storage_key, self.aliasing.values())))

    def _shared_storages(self) -> set[int]:
        """The storages more than one of the compared values lives on (views of one base)."""
        counts: dict[int, int] = {}
        for v in self.aliasing.values():
            if isinstance(v, torch.Tensor):
                counts[storage_key(v)] = counts.get(storage_key(v), 0) + 1
        return {key for key, n in counts.items() if n > 1}

    def storage_facts(self) -> None:
        """Complete the tensor guards with the storage facts the trace relied on: inputs sharing a
        storage were traced as views of one base (a functionalized graph reads their offsets and
        the base's size), and an offset read is folded as a constant."""
        shared = self._shared_storages()
        if not shared and not self.storage_offsets_read:
            return
        for source, (storage, with_storage) in self._storages.items():
            key = (source, GuardKind.TENSOR_MATCH)
            if key in self._guards and (self.storage_offsets_read or storage in shared):
                self._guards[key] = Guard(source, GuardKind.TENSOR_MATCH, with_storage)

    def __iter__(self) -> Iterator[Guard]:
        return iter(self._guards.values())

    def keep_only(self, keep: Callable[[Guard], bool]) -> None:
        """Drop the guards `keep` refuses (guard_filter.py: the user's guard_filter_fn)."""
        self._guards = {key: g for key, g in self._guards.items() if keep(g)}

    def __len__(self) -> int:
        return len(self._guards)

    def pinned_locals(self) -> dict[str, "PinnedObject"]:
        """The arguments guarded by identity, by name."""
        id_match = GuardKind.ID_MATCH
        return {g.source.local_name: PinnedObject.of(g.value) for g in self
                if g.kind == id_match and isinstance(g.source, LocalSource)}

    def texts(self) -> list[str]:
        self.storage_facts()
        aliasing = self.aliasing_guard()
        return [g.text() for g in self.global_state] + [g.text() for g in self] + \
            ([aliasing.text()] if aliasing is not None else []) + [g.text() for g in self.shape_guards]

def dict_entry(source: Source) -> tuple[Any, Source]:
    """(key, source of the dict) of a DICT_CONTAINS_MATCH guard's source."""
    if isinstance(source, GlobalSource):
        return source.global_name, GlobalsDictSource()
    if isinstance(source, ItemSource):
        return source.key, source.base
    raise TypeError(f"no dict entry for source {source!r}")


def _classes(keys: Iterator[int]) -> tuple[int, ...]:
    """Equal keys, equal numbers: each key numbered in order of first appearance."""
    first: dict[int, int] = {}
    return tuple(first.setdefault(k, len(first)) for k in keys)


def _type_name(tp: type) -> str:
    module = tp.__module__
    if module == "builtins":
        return tp.__qualname__
    if module.startswith("torch"):
        public = {torch.Tensor: "torch.Tensor", torch.nn.Parameter: "torch.nn.Parameter"}
        return public.get(tp, f"{module}.{tp.__qualname__}")
    return f"{module}.{tp.__qualname__}"


def _key_repr(key: Any) -> str:
    """A key compared by identity, in a few words (its repr may be a tensor's data)."""
    if isinstance(key, torch.Tensor):
        return f"{type(key).__name__}(size={list(key.shape)})"
    return _short_repr(key)


def _short_repr(value: Any) -> str:
    if isinstance(value, types.ModuleType):
        return f"module {value.__name__}"
    if isinstance(value, (types.FunctionType, type)):
        return f"{type(value).__name__} {value.__qualname__}"
    if isinstance(value, torch.nn.Module):  # its repr prints every submodule: long, and slow to make
        return f"{type(value).__qualname__} module"
    if not _repr_runs_no_python(value):  # a class's own __repr__ may have effects, or raise
        return f"{type(value).__qualname__} object"
    text = repr(value)
    return text if len(text) <= 60 else f"{type(value).__name__} object"


def _repr_runs_no_python(value: Any) -> bool:
    """repr(value) is written in C and asks no other object's repr (containers ask their items')."""
    if isinstance(value, (tuple, list, dict, set, frozenset)):  # (a module's globals: too long anyway)
        return len(value) <= 8 and all(_repr_runs_no_python(item) for item in
                                       (value.items() if isinstance(value, dict) else value))
    method = getattr(type(value), "__repr__", None)
    return not isinstance(method, types.FunctionType)

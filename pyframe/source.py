"""Sources: where a traced value came from, as a path from the frame.

Every value the translator reads from the frame carries a Source. Guards are checks on sources,
graph inputs are loaded through them by the transformed code, and their `name()` is the readable
text shown in guards and used (as torch._dynamo does) to name graph placeholders: `L['x']` becomes
the placeholder `L_x_`. This module is plain data: it knows nothing of the translator or of C.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any


class remembered:
    """A property computed once per object and kept in its `__dict__` (where later reads find it
    without calling this): `functools.cached_property` without 3.11's lock, which every first
    read takes (as 3.12's cached_property is). Sources and guards are made by the thousand in a
    trace, each named once, by one thread."""

    def __init__(self, compute: Any) -> None:
        self.compute = compute
        self.attr = compute.__name__
        self.__doc__ = compute.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.attr = name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        value = obj.__dict__[self.attr] = self.compute(obj)
        return value


_NOT_ALPHANUMERIC = re.compile(r"[^a-zA-Z0-9]+")
# Every ASCII character but a letter or a digit, as "_" (bytes.translate's table).
_ASCII_UNDERSCORES = bytes(c if chr(c).isascii() and chr(c).isalnum() else ord("_") for c in range(256))


def identifier_of(text: str) -> str:
    """`text` with every run of characters other than ASCII letters and digits made one `_`
    (`L['self']._modules['lin']` -> `L_self_modules_lin_`). An ASCII name (every source's, in
    practice) is mapped by bytes.translate and its runs of `_` merged by str.replace (a deep
    module path names a dozen runs, each of a few characters: the regular expression's search
    costs ~10x as much, for every placeholder); anything else by the regular expression."""
    if not text.isascii():
        return _NOT_ALPHANUMERIC.sub("_", text)
    mapped = text.encode("ascii").translate(_ASCII_UNDERSCORES).decode("ascii")
    while "__" in mapped:
        mapped = mapped.replace("__", "_")
    return mapped


class Source:
    """Base of every source. Subclasses are frozen dataclasses, so sources hash and compare."""

    def name(self) -> str:
        raise NotImplementedError

    def placeholder_name(self) -> str:
        """`L['self']._modules['linear']` -> `L_self_modules_linear_` (torch._dynamo's naming)."""
        return identifier_of(self.name())

    def __str__(self) -> str:
        return self.name()



@dataclass(frozen=True)
class LocalSource(Source):
    """A fast local of the frame (an argument, at frame entry)."""

    local_name: str

    def name(self) -> str:
        return f"L[{self.local_name!r}]"


@dataclass(frozen=True)
class CellContentsSource(Source):
    """A cell variable whose slot already holds a cell at frame entry (a resume function's
    argument passed as the caller's cell): guards read the cell's contents, code reads LOAD_DEREF."""

    local_name: str

    def name(self) -> str:
        return f"L[{self.local_name!r}].cell_contents"

    def placeholder_name(self) -> str:
        """`L_scale_`: torch._dynamo hands a resume function the caller's cells as its closure and
        names their contents as the variables themselves (`L['scale']`)."""
        return LocalSource(self.local_name).placeholder_name()


@dataclass(frozen=True)
class GlobalSource(Source):
    """A name in the frame's globals."""

    global_name: str

    def name(self) -> str:
        return f"G[{self.global_name!r}]"


@dataclass(frozen=True)
class GlobalsDictSource(Source):
    """The frame's globals dict itself (only guards read it: a name found missing from it)."""

    def name(self) -> str:
        return "G"


@dataclass(frozen=True)
class BuiltinSource(Source):
    """A name found in the frame's builtins (absent from its globals)."""

    builtin_name: str

    def name(self) -> str:
        return f"G['__builtins__'][{self.builtin_name!r}]"


@dataclass(frozen=True)
class ClosureSource(Source):
    """The contents of the function's closure cell for a free variable."""

    var_name: str
    index: int

    def name(self) -> str:
        return f"L[{self.var_name!r}]"


@dataclass(frozen=True)
class FreeCellSource(Source):
    """The frame's own closure cell for a free variable: the cell object itself (LOAD_CLOSURE),
    whose contents are ClosureSource. Only code reads it (a store replayed into the cell), never
    a guard."""

    var_name: str
    index: int

    def name(self) -> str:
        return f"<cell of L[{self.var_name!r}]>"

    def contents(self) -> ClosureSource:
        return ClosureSource(self.var_name, self.index)


@dataclass(frozen=True)
class ChildSource(Source):
    base: Source

    def name(self) -> str:
        return self._name  # made once: guards, placeholders and code all name deep module paths

    @remembered
    def _name(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class AttrSource(ChildSource):
    attr: str

    @remembered
    def _name(self) -> str:
        return f"{self.base.name()}.{self.attr}"


@dataclass(frozen=True)
class GenericAttrSource(AttrSource):
    """`object.__getattribute__(base, attr)`: an attribute of an object whose class has its own
    Python `__getattribute__`, read as that method ends (`super().__getattribute__(name)`), so a
    guard reads it without running Python."""

    @remembered
    def _name(self) -> str:
        return f"object.__getattribute__({self.base.name()}, {self.attr!r})"


@dataclass(frozen=True)
class ItemSource(ChildSource):
    """`base[key]` for a constant key (an int, a str, ...). A key compared by identity (a tensor)
    never goes here: its source would compare keys with ==; see DictKeySource, DictValueSource."""

    key: Any

    @remembered
    def _name(self) -> str:
        return f"{self.base.name()}[{self.key!r}]"


@dataclass(frozen=True)
class DictItemSource(ItemSource):
    """`dict.__getitem__(base, key)`: an item of a dict subclass read from its storage, without
    calling the subclass's own __getitem__ (guards read dicts so already: see csrc/guard_check.cpp).
    Named as torch._dynamo names it, by the key's position (`index`) in the dict's own order:
    `dict.__getitem__(L['out'], list(dict.keys(L['out']))[1])`, whatever the key."""

    index: int

    @remembered
    def _name(self) -> str:
        return f"dict.__getitem__({self.base.name()}, {_key_at(self.base, self.index)})"


@dataclass(frozen=True)
class BaseItemSource(ItemSource):
    """`list.__getitem__(base, key)` (or tuple's): an item of a list or tuple subclass, read by the
    base's own indexing (the subclass keeps it: builder.py checks), named as torch._dynamo names it."""

    owner: type = list

    @remembered
    def _name(self) -> str:
        return f"{self.owner.__name__}.__getitem__({self.base.name()}, {self.key!r})"


@dataclass(frozen=True)
class DictKeySource(ChildSource):
    """The `index`-th key of the dict at `base`, in its iteration order: a key that is not a
    constant (a tensor, a module, a class...), which a source cannot name by value."""

    index: int

    @remembered
    def _name(self) -> str:
        return _key_at(self.base, self.index)


@dataclass(frozen=True)
class DictValueSource(ChildSource):
    """The value of the `index`-th key of the dict at `base` (a key that is not a constant)."""

    index: int

    @remembered
    def _name(self) -> str:
        return f"{self.base.name()}[{_key_at(self.base, self.index)}]"


def _key_at(base: Source, index: int) -> str:
    """The `index`-th key of the dict at `base`, in its storage order (a subclass's own `keys()`
    is not asked), as torch._dynamo writes it: `list(dict.keys(L['d']))[1]`."""
    return f"list(dict.keys({base.name()}))[{index}]"


@dataclass(frozen=True)
class TupleIteratorRestSource(ChildSource):
    """The items the tuple iterator at `base` has still to give, as a tuple (a loop's iterator a
    resume function is handed: `iter(<the items still to come>)`, see ListIteratorVariable)."""

    @remembered
    def _name(self) -> str:
        return f"___tuple_iterator_rest({self.base.name()})"


@dataclass(frozen=True)
class WeakRefCallSource(ChildSource):
    """`base()` for the weakref.ref at `base`: its referent as it is when read, None once it died
    (a module's weak references to its own parameters: nn.LSTM's `_flat_weight_refs`). Named as
    torch._dynamo names it, `L['self']._flat_weight_refs[0]()`, which also names its placeholder
    (`L_self_flat_weight_refs_0_`)."""

    @remembered
    def _name(self) -> str:
        return f"{self.base.name()}()"


@dataclass(frozen=True)
class TensorPropertySource(ChildSource):
    """A tensor's size or stride in dimension `dim`, or its storage offset (`prop`: "size",
    "stride", "storage_offset"): where a symbolic size of a graph with dynamic shapes comes from,
    named as torch._dynamo names it (`L['x'].size()[0]`), which also names its symbol."""

    prop: str
    dim: int = 0

    @remembered
    def _name(self) -> str:
        if self.prop == "storage_offset":
            return f"{self.base.name()}.storage_offset()"
        return f"{self.base.name()}.{self.prop}()[{self.dim}]"


@dataclass(frozen=True)
class NumpyTensorSource(ChildSource):
    """The tensor over the memory of the NumPy array at `base` (`torch.as_tensor(<base>)`): how a
    graph takes an array passed to the frame, named as torch._dynamo names it
    (`___from_numpy(L['a'])`); its placeholder is named after the array (`L_a_`)."""

    @remembered
    def _name(self) -> str:
        return f"___from_numpy({self.base.name()})"

    def placeholder_name(self) -> str:
        return self.base.placeholder_name()


def _remember_hashes(cls: type) -> None:
    """Make each source hash its fields once, when it is made: a source is a key of the trace's
    input, guard and constant tables, and the dataclass hash walks the whole chain
    (`self.features.block1.conv.weight`) every time. Hashing at birth also spares the first hash
    an AttributeError raised and caught (a third of a source's cost).

    The dataclass's `__init__` gives way to one that fills the instance dict and the hash
    directly (_quick_init): a frozen dataclass sets each field through `object.__setattr__`, then
    calls `__post_init__`, and a trace makes two thousand sources."""
    for sub in cls.__subclasses__():
        compute = sub.__dict__.get("__hash__")
        if compute is not None and compute is not _remembered_hash:
            sub._hash_fields = compute  # the dataclass's own hash of the fields
            sub.__hash__ = _remembered_hash
            sub.__init__ = _quick_init(sub)
        _remember_hashes(sub)


def _quick_init(cls: type) -> Any:
    """An `__init__` for the frozen dataclass `cls` with the dataclass's parameters (and defaults)
    that stores each field in the instance dict and the hash of the fields, as the dataclass's
    `__hash__` makes it (the tuple of the fields), under `_hash`; a field that does not hash
    leaves no `_hash` (hash(source) then raises, as a dataclass's does)."""
    fields = dataclasses.fields(cls)
    defaults = {f"_default_{f.name}": f.default for f in fields if f.default is not dataclasses.MISSING}
    params = ", ".join(f.name if f"_default_{f.name}" not in defaults else f"{f.name}=_default_{f.name}"
                       for f in fields)
    hashed = "".join(f"{f.name}, " for f in fields if f.compare and f.hash is not False)
    stores = "".join(f"    d[{f.name!r}] = {f.name}\n" for f in fields)
    source = (f"def __init__(self, {params}):\n    d = self.__dict__\n{stores}"
              f"    try:\n        d['_hash'] = hash(({hashed}))\n    except TypeError:\n        pass\n")
    namespace: dict[str, Any] = {}
    exec(source, defaults, namespace)  # noqa: S102 (code made here from field names)
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init


def _remembered_hash(self: Source) -> int:
    try:
        return self._hash
    except AttributeError:  # (a field did not hash at birth: raises again, or a field hashes now)
        found = self.__dict__["_hash"] = self._hash_fields()
        return found


_remember_hashes(Source)

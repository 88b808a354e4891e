"""The base of the symbolic values ("variable trackers") the translator pushes on its stack.

Each VariableTracker stands for one Python value of the traced frame. It knows where the value
came from (its Source, if it was read from the frame) and answers the questions the opcode
handlers ask: attribute reads, calls, iteration, its constant value. What a kind of value does not
support raises Unsupported, which becomes a graph break or a frame that runs normally.
"""
from __future__ import annotations

import contextlib
import inspect
import types
import weakref
from typing import Any, Callable, Iterator, Protocol, Sequence

from ...exc import Unsupported
from ...guards import ClassAttr, GuardKind
from ...source import AttrSource, Source
from .descriptions import describe_instance



class Tracer(Protocol):
    """What trackers ask of the translator running them (translator/instructions.py implements it;
    trackers never import it: they sit below it). `output` is the OutputGraph (graph.py),
    `side_effects` the SideEffects record (side_effects.py), `hooks` what convert_frame handed the
    trace (hooks.py); the rest are named for what they do."""

    output: Any
    side_effects: Any
    hooks: Any
    code: Any
    root: "Tracer"
    # root only: the trace asked torch.compiler.is_compiling() (or another query answered otherwise
    # than when the frame runs as Python), so it may follow a path eager does not take
    took_compiled_path: bool
    parent: "Tracer | None"
    f_globals: dict  # the globals of the code being traced (an inlined function's own)

    def wrap(self, value: Any, source: Source | None, guard: bool = True) -> "VariableTracker": ...
    def wrap_constant(self, value: Any) -> "VariableTracker": ...
    def make_tuple(self, items: list["VariableTracker"]) -> "VariableTracker": ...
    def bind_builtin_descriptor(self, descriptor: Any, obj: "VariableTracker") -> "VariableTracker | None": ...
    def raise_error(self, exc_type: type, *args: Any) -> None: ...
    def inline_call(self, fn: types.FunctionType, args: list["VariableTracker"],
                    kwargs: dict[str, "VariableTracker"], **options: Any) -> "VariableTracker": ...
    def load_attr(self, obj: "VariableTracker", name: str) -> "VariableTracker": ...
    def read_local(self, name: str) -> "VariableTracker": ...
    def super_class(self) -> Any: ...
    def locals_snapshot(self) -> "VariableTracker": ...
    def install_global(self, value: Any) -> Source: ...


UNKNOWN_OBJECT = object()


class VariableTracker:
    """A symbolic Python value. Subclasses keep only what their kind needs."""

    def __init__(self, source: Source | None = None):
        self.source = source

    # -- what the value is ------------------------------------------------------------------
    def python_type(self) -> type:
        raise Unsupported(f"the type of {self._describe_without_type()} is not known while tracing")

    def made_instance(self) -> "tuple[type, Source | None, dict[str, VariableTracker]] | None":
        """For an instance of a user class made while tracing: its class, where the class was read
        from, and its instance dict as the trace holds it; None for anything else."""
        return None

    def describe(self) -> str:
        """This value as its user would name it, for graph-break reasons (`a list`, `an instance of
        Foo (defined at foo.py:12)`, `the method forward of module Net`): descriptions.py. Never a
        tracker's class name; a subclass that knows more says more."""
        if type(self).python_type is VariableTracker.python_type:
            return self._describe_without_type()
        try:
            return describe_instance(self.python_type())
        except Unsupported:
            return self._describe_without_type()

    def _describe_without_type(self) -> str:
        if type(self).describe is not VariableTracker.describe:
            return self.describe()  # (a subclass's own, which does not ask python_type)
        return "a value pyframe does not model here" + (f" (read from {self.source.name()})" if self.source else "")

    # A symbolic size of a graph with dynamic shapes (SymNodeVariable): a constant only at the
    # price of specializing it, so a container holding one is not a constant (its items stay).
    is_symbolic = False

    def is_python_constant(self) -> bool:
        if type(self).as_python_constant is VariableTracker.as_python_constant:
            return False  # (it raises, with a reason made for nothing)
        try:
            self.as_python_constant()
            return True
        except Unsupported:
            return False

    def as_python_constant(self) -> Any:
        raise Unsupported(f"{self.describe()} is not a Python constant")

    def truth(self) -> bool:
        """bool(value), when it is known while tracing (a branch on it needs no graph break)."""
        return bool(self.as_python_constant())

    def set_name_hint(self, name: str) -> None:
        """The value is stored to a local called `name` (STORE_FAST, STORE_DEREF): a tensor's
        node takes that name if it has none yet (tensor.py); anything else ignores it."""

    def builtin_scalar(self) -> Any:
        """The int, float or str an instance of a user subclass of one holds, where the subclass
        leaves the base's conversions alone (a tensor operation or a format reads that value);
        None for any other value."""
        return None

    def real_object(self) -> Any:
        """The very object this tracker stands for, when it holds it (`a is b` compares these);
        UNKNOWN_OBJECT otherwise."""
        return UNKNOWN_OBJECT

    def identity(self) -> Any:
        """What the value is compared by where Python compares identities (a key of a dict that
        hashes by identity): the real object when the tracker holds it; a tensor's FakeTensor; the
        tracker itself for an object made while tracing (it has one tracker); else UNKNOWN_OBJECT."""
        return self.real_object()

    def pinned_identity(self, tx: Tracer) -> Any:
        """identity(), for a use that depends on which object this is (a key of a dict that hashes
        by identity). A tracker that stands for a value by what it is made of (a partial read
        from the frame, guarded by its fields) pins the object itself here (ID_MATCH)."""
        return self.identity()

    # -- what can be done with it -----------------------------------------------------------
    def var_getattr(self, tx: Tracer, name: str) -> "VariableTracker":
        raise Unsupported(f"attribute {name!r} of {self.describe()}")

    def store_attr(self, tx: Tracer, name: str, value: "VariableTracker") -> None:
        """`self.name = value` (STORE_ATTR, setattr())."""
        raise Unsupported(f"assignment to attribute {name!r} of {self.describe()}")

    def delete_attr(self, tx: Tracer, name: str) -> None:
        """`del self.name` (DELETE_ATTR, delattr())."""
        raise Unsupported(f"deletion of attribute {name!r} of {self.describe()}")

    def generic_getattr(self, tx: Tracer, name: str) -> "VariableTracker":
        """`object.__getattribute__(self, name)`: the lookup a class's own `__getattribute__`
        ends in (`super().__getattribute__(key)`), without that method and without `__getattr__`."""
        raise Unsupported(f"object.__getattribute__ of {self.describe()}")

    def generic_setattr(self, tx: Tracer, name: str, value: "VariableTracker") -> None:
        """`object.__setattr__(self, name, value)`: the store a class's own `__setattr__` ends in."""
        raise Unsupported(f"object.__setattr__ of {self.describe()}")

    def generic_delattr(self, tx: Tracer, name: str) -> None:
        """`object.__delattr__(self, name)`: the deletion a class's own `__delattr__` ends in."""
        raise Unsupported(f"object.__delattr__ of {self.describe()}")

    def call(self, tx: Tracer, args: Sequence["VariableTracker"],
             kwargs: dict[str, "VariableTracker"]) -> "VariableTracker":
        raise Unsupported(f"calling {self.describe()}, which pyframe cannot trace")

    def bind_to_instance(self, tx: Tracer, obj: "VariableTracker") -> "VariableTracker":
        """This value, a builtin method descriptor read from a class's dict, as the instance `obj`
        reads it (`push = list.append` in a class body: `obj.push` is bound to obj)."""
        raise Unsupported(f"{self.describe()}, bound to {obj.describe()}")

    def call_method(self, tx: Tracer, name: str, args: Sequence["VariableTracker"],
                    kwargs: dict[str, "VariableTracker"]) -> "VariableTracker":
        return self.var_getattr(tx, name).call(tx, args, kwargs)

    def python_function(self, tx: Tracer) -> tuple[Any, Source, bool] | None:
        """For a Python function or a method bound to one: that function, the source its
        attributes are read and guarded through, and whether a call binds its first parameter
        (inspect.signature, `method.__func__`). None for any other value."""
        return None

    def unpack(self, tx: Tracer) -> list["VariableTracker"]:
        """The items of an iterable of known length (UNPACK_SEQUENCE, FOR_ITER, *args)."""
        raise Unsupported(f"iteration over {self.describe()}")

    def rebuilt_from(self) -> list["VariableTracker"]:
        """The other trackers `reconstruct` rebuilds to make this value (a dict view's dict, a
        bound method's object). Finishing a trace walks them (translator/live_values.py, `walk`): a
        tensor among them that the graph made must become a graph output, or the transformed code
        has nothing to load it from. A subclass whose `reconstruct` calls another tracker's must
        list that tracker here (containers list their items in `_children` there)."""
        return []

    def reconstruct(self, cg: Any) -> None:
        """Emit bytecode that puts this value on the stack (cg is a codegen.PyCodegen)."""
        if self.source is None:
            raise Unsupported(f"cannot rebuild {self.describe()} in the transformed code")
        cg.load_source(self.source)

    def __repr__(self) -> str:
        where = f" from {self.source.name()}" if self.source is not None else ""
        return f"{type(self).__name__}{where}"


class NullVariable(VariableTracker):
    """The NULL that PUSH_NULL / LOAD_GLOBAL(push_null) / LOAD_METHOD put below a callable."""

    def reconstruct(self, cg: Any) -> None:
        cg.push_null()

    def __repr__(self) -> str:
        return "NULL"


class DeferredMethodVariable(VariableTracker):
    """`obj.name` for a LOAD_METHOD whose lookup cannot be traced: left to the CALL that follows,
    where a graph break can go (a break cannot be placed at LOAD_METHOD itself). Any use fails
    with the lookup's own reason; at the break, the transformed code reads the attribute."""

    def __init__(self, obj: VariableTracker, name: str, reason: str):
        super().__init__()
        self.obj, self.name, self.reason = obj, name, reason

    def call(self, tx, args, kwargs) -> VariableTracker:
        raise Unsupported(self.reason)

    def rebuilt_from(self) -> list[VariableTracker]:
        return [self.obj]

    def reconstruct(self, cg: Any) -> None:
        self.obj.reconstruct(cg)
        cg.emit("LOAD_ATTR", self.name)

    def describe(self) -> str:
        return f"the method {self.name} of {self.obj.describe()}"

    def __repr__(self) -> str:
        return f"DeferredMethodVariable({self.obj!r}.{self.name})"


class BoundMethodVariable(VariableTracker):
    """`obj.name` where the attribute is a method: calling it asks `obj.call_method`.

    LOAD_METHOD pushes (NULL, this) so that PRECALL/CALL treat it as a plain callable.
    """

    def __init__(self, obj: VariableTracker, name: str, source: Source | None = None):
        super().__init__(source)
        self.obj, self.name = obj, name

    def call(self, tx, args, kwargs) -> VariableTracker:
        return self.obj.call_method(tx, self.name, args, kwargs)

    def _class_attribute(self) -> Any:
        """What the object's class holds under the name (None for an object that is a class)."""
        cls = self.obj.python_type()
        return None if issubclass(cls, type) else class_attribute(cls, self.name, None)

    def python_type(self) -> type:
        """A method object's type, as Python makes it from the class attribute."""
        static = self._class_attribute()
        if isinstance(static, (types.FunctionType, classmethod)):
            return types.MethodType
        if isinstance(static, staticmethod):
            return type(static.__func__)
        if isinstance(static, (types.MethodDescriptorType, types.ClassMethodDescriptorType)):
            return types.BuiltinMethodType  # `[].append`, `x.add`
        if isinstance(static, types.WrapperDescriptorType):
            return types.MethodWrapperType
        return super().python_type()

    def python_function(self, tx) -> tuple[Any, Source, bool] | None:
        static = self._class_attribute()
        if not isinstance(static, types.FunctionType):
            return None
        if self.obj.source is not None:  # type(obj).name, as the call itself reads it
            return static, AttrSource(AttrSource(self.obj.source, "__class__"), self.name), True
        return static, tx.root.install_global(static), True

    def var_getattr(self, tx, name: str) -> VariableTracker:
        """`method.__self__`, `method.__func__`; other attributes are the function's."""
        found = self.python_function(tx)
        if found is None:
            return super().var_getattr(tx, name)
        if name == "__self__":
            return self.obj
        fn = tx.wrap(found[0], found[1])
        return fn if name == "__func__" else fn.var_getattr(tx, name)

    def reconstruct(self, cg: Any) -> None:
        self.obj.reconstruct(cg)
        cg.emit("LOAD_ATTR", self.name)

    def describe(self) -> str:
        return f"the method {self.name} of {self.obj.describe()}"

    def __repr__(self) -> str:
        return f"BoundMethodVariable({self.obj!r}.{self.name})"


def constant_args(args: Sequence[VariableTracker], kwargs: dict[str, VariableTracker],
                  what: str) -> tuple[list[Any], dict[str, Any]]:
    """The Python values of all-constant arguments, or Unsupported naming the call."""
    if not all(a.is_python_constant() for a in args) or not all(v.is_python_constant() for v in kwargs.values()):
        raise Unsupported(f"{what} with non-constant arguments")
    return [a.as_python_constant() for a in args], {k: v.as_python_constant() for k, v in kwargs.items()}


_getattr_static = inspect.getattr_static
_type_dict = type.__dict__["__dict__"].__get__


_STATIC_MISSING = object()
_generic_getattr = object.__getattribute__
_getset_descriptor = type(type.__dict__["__dict__"])


class IdentityCache:
    """A cache of facts about objects, by identity, that lets its objects die: a
    WeakKeyDictionary's job, with a lookup of a dict by `id` (a WeakKeyDictionary's get is Python
    code that makes a weak reference and hashes the object: a code object's hash walks its
    constants). An entry holds a weak reference to its object, so a dead object's id, reused by a
    new one, finds no answer; its callback drops the entry when the object dies."""

    def __init__(self) -> None:
        self._entries: dict[int, tuple[weakref.ref, Any]] = {}

    def get(self, obj: Any) -> Any:
        """The fact remembered for `obj` (None if none)."""
        entry = self._entries.get(id(obj))
        return entry[1] if entry is not None and entry[0]() is obj else None

    def __setitem__(self, obj: Any, fact: Any) -> None:
        key, entries = id(obj), self._entries
        entries[key] = (weakref.ref(obj, lambda _, key=key: entries.pop(key, None)), fact)

    def pop(self, obj: Any, default: Any = None) -> Any:
        found = self.get(obj)
        if found is None:
            return default
        del self._entries[id(obj)]
        return found


_plain_metaclasses = IdentityCache()


def _is_plain_metaclass(meta: type) -> bool:
    """`type`, or a metaclass none of whose classes puts its own `__dict__` in place of type's
    (ABCMeta, EnumType...): the classes it makes keep their attributes in their own dicts, which
    getattr_static then reads as they are. Decided once per metaclass."""
    if meta is type:
        return True
    plain = _plain_metaclasses.get(meta)
    if plain is None:
        plain = all(type(d) is _getset_descriptor and d.__objclass__ is entry
                    for entry in meta.__mro__ if "__dict__" in (d_map := _type_dict(entry)) for d in (d_map["__dict__"],))
        _plain_metaclasses[meta] = plain
    return plain


def has_plain_metaclasses(cls: type) -> bool:
    """Every class on cls's MRO made by a plain metaclass (_is_plain_metaclass): its instances'
    attributes are where getattr_static looks. A metaclass of its own (`__call__`, `__setattr__`,
    `__instancecheck__`...) changes how the class is called and read, never how its instances are.
    Remembered while a trace runs, as class_attribute's answers are (by the class's version)."""
    version = _class_version(cls) if _class_version is not None else 0
    if version:
        known = _plain_mros.get(id(cls))
        if known is not None and known[0] is cls and known[1] == version:
            return known[2]
    plain = all(type(entry) is type or _is_plain_metaclass(type(entry)) for entry in cls.__mro__)
    if version:
        _plain_mros[id(cls)] = (cls, version, plain)
    return plain


def static_attribute(obj: Any, name: str, default: Any = _STATIC_MISSING) -> Any:
    """`inspect.getattr_static(obj, name[, default])`, with the common case read directly: an
    instance (not a class) of a class whose MRO's metaclasses are plain (`type`, ABCMeta...) and
    whose `__dict__` is the usual one. Its instance dict's entry, unless the class's is a data
    descriptor; else the class's (class_attribute). Raises AttributeError when missing and no
    default is given."""
    cls = type(obj)
    # (`issubclass(cls, type)`, not `isinstance(obj, type)`: isinstance asks an object that is no
    # class for its `__class__`, which runs a class's own Python `__getattribute__`). A class of
    # `__slots__` only (dataclasses.Field: no `__dict__` on the MRO, no instance dict) is read so
    # too: getattr_static finds no instance dict there either.
    dict_descriptor = _mro_attribute(cls, "__dict__")
    slots_only = dict_descriptor is _STATIC_MISSING and not cls.__dictoffset__
    if issubclass(cls, type) or not has_plain_metaclasses(cls) or \
            (type(dict_descriptor) is not _getset_descriptor and not slots_only):
        return _getattr_static(obj, name) if default is _STATIC_MISSING else _getattr_static(obj, name, default)
    found = _mro_attribute(cls, name)
    if slots_only:
        instance_dict = None
    else:
        try:
            instance_dict = _generic_getattr(obj, "__dict__")
        except AttributeError:
            instance_dict = None
    if type(instance_dict) is dict and name in instance_dict:
        if found is _STATIC_MISSING:
            return instance_dict[name]
        kind = type(found)
        data_descriptor = class_attribute(kind, "__get__", None) is not None and (
            class_attribute(kind, "__set__", None) is not None or class_attribute(kind, "__delete__", None) is not None)
        return found if data_descriptor else instance_dict[name]
    if found is not _STATIC_MISSING:
        return found
    if default is _STATIC_MISSING:
        raise AttributeError(name)
    return default


def _mro_attribute(cls: type, name: str) -> Any:
    """What the dicts of `cls`'s MRO hold for `name` (not its metaclass's), or _STATIC_MISSING."""
    for entry in cls.__mro__:
        entry_dict = _type_dict(entry)
        if name in entry_dict:
            return entry_dict[name]
    return _STATIC_MISSING


def class_attribute(cls: type, name: str, default: Any) -> Any:
    """`inspect.getattr_static(cls, name, default)` for a class: what its MRO's dicts hold, then its
    metaclass's. Module attribute reads ask this of their class on every access; getattr_static
    re-checks every metaclass of the MRO for a `__dict__` that shadows the real one, which no plain
    metaclass (`type`, ABCMeta...: _is_plain_metaclass) has, so for those the dicts are read directly
    (a seventh of the time).

    A trace asks the same few questions a thousand times (`__getattribute__` of every object it
    reads an attribute of): while one runs (remembering_class_reads), an answer is remembered as
    long as the class's version says that neither the class, nor a class of its MRO, nor its
    metaclass changed since."""
    version = _class_version(cls) if _class_version is not None else 0
    if not version:
        return _class_attribute(cls, name, default)
    key = (id(cls), name)
    known = _class_reads.get(key)
    if known is not None and known[0] is cls and known[1] == version:
        return default if known[2] is _STATIC_MISSING else known[2]
    found = _class_attribute(cls, name, _STATIC_MISSING)
    if len(_class_reads) >= _MAX_CLASS_READS:
        _class_reads.clear()
    _class_reads[key] = (cls, version, found)
    return default if found is _STATIC_MISSING else found


@contextlib.contextmanager
def remembering_class_reads(class_version: Callable[[type], int]) -> Iterator[None]:
    """While a trace runs: class_attribute remembers its answers, each valid while `class_version`
    (the hooks' `_C.class_version`) of its class stays the same. Forgotten when the trace ends:
    the memo holds its classes and their attributes alive."""
    global _class_version
    _class_version = class_version
    try:
        yield
    finally:
        _class_version = None
        _class_reads.clear()
        _plain_mros.clear()


# What class_attribute found while a trace runs, by (id(cls), name): (cls, its class_version, the
# attribute or _STATIC_MISSING).
_class_reads: dict[tuple[int, str], tuple[type, int, Any]] = {}
_MAX_CLASS_READS = 4096
# has_plain_metaclasses's answers while a trace runs, by id(cls): (cls, its class_version, answer).
_plain_mros: dict[int, tuple[type, int, bool]] = {}
_class_version: Callable[[type], int] | None = None


def _class_attribute(cls: type, name: str, default: Any) -> Any:
    meta = type(cls)
    if not _is_plain_metaclass(meta):
        return _getattr_static(cls, name, default)
    for entry in cls.__mro__:
        if type(entry) is not type and not _is_plain_metaclass(type(entry)):
            return _getattr_static(cls, name, default)
        entry_dict = _type_dict(entry)
        if name in entry_dict:
            return entry_dict[name]
    for entry in meta.__mro__:  # the metaclass's own attributes, as getattr_static reads them
        entry_dict = _type_dict(entry)
        if name in entry_dict:
            return entry_dict[name]
    return default


def mro_lookup(cls: type, name: str) -> Any:
    """What CPython's _PyType_Lookup finds: the first of cls's MRO dicts holding name (None if none
    does). Unlike class_attribute, the metaclass is not asked: this is what instances see."""
    for entry in cls.__mro__:
        entry_dict = _type_dict(entry)
        if name in entry_dict:
            return entry_dict[name]
    return None


def guard_class_attribute(tx: Tracer, obj: VariableTracker, name: str,
                          check_instance: bool = True) -> None:
    """The trace took `obj.name` from obj's class (a method bound or inlined, a property's getter
    inlined, the class's `__call__`), or found it missing from class and instance alike: guard that
    the lookup still finds the same (CLASS_ATTR_MATCH). The class or a base patched after
    compiling, or (`check_instance`) an instance attribute of that name, fail it. A special
    method (`__call__` for `obj(...)`) is looked up on the type only: check_instance=False."""
    if obj.source is None:
        return
    found = mro_lookup(obj.python_type(), name)
    if found is None and any(name in _type_dict(entry) for entry in obj.python_type().__mro__):
        return  # a class attribute that is None: read as a value, guarded by it
    tx.output.guards.add(AttrSource(obj.source, name), GuardKind.CLASS_ATTR_MATCH, ClassAttr(found, check_instance))


def plain_getattr(cls: type) -> bool:
    """Attribute reads on instances of cls run no Python code when the attribute is missing: no
    Python __getattribute__ or __getattr__."""
    return not isinstance(class_attribute(cls, "__getattribute__", None), types.FunctionType) \
        and class_attribute(cls, "__getattr__", None) is None

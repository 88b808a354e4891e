"""Objects named so that another process finds them again, and the pickler that names them.

A cache entry is data but for the objects it points at: a guard that pins a module, a function or
a code object by identity, a constant of the transformed code that is a torch function or a class.
Another process has its own objects, so each is written as a *name* it can be found by (a module
by its name, a function by its module and qualified name with the hash of its code, a module's
globals by the module's name) and looked up when the entry is installed. Plain values (numbers,
strings, dtypes, pyframe's own records: Sources, Guards) are written as they are.

Anything else (an nn.Module instance pinned by identity, a tensor, a user object in a constant)
cannot be named: `Unsaveable` says which, and the entry is left out of the file (the report of
`pyframe.save` names it). Nothing is ever written by value where identity counts: a guard read in
the new process checks the object the name resolves to there, or the entry is not loaded.

The pickler takes `persistent` (the entry's own objects: its graphs, its resume functions) so
this module knows nothing of graphs or resume functions.
"""
from __future__ import annotations

import dataclasses
import enum
import importlib
import io
import marshal
import pickle
import sys
import types
import weakref
from typing import Any, Callable

import torch

from ..graph import PER_NODE_CALLABLES
from .codes import code_hash, module_of_code


class Unsaveable(Exception):
    """An object another process could not find again: what it is."""


class Stale(Exception):
    """A name that no longer finds the object it named (a function whose code changed, a module gone)."""


@dataclasses.dataclass(frozen=True)
class ById:
    """A guard's value compared by identity: written only as a name (`Unsaveable` otherwise), or
    for a code object no name finds, as the `source` its guard reads it at (CodeAtSource)."""

    value: Any
    source: Any = None


@dataclasses.dataclass(frozen=True)
class CodeAtSource:
    """A code object compared by identity that no name finds (a dataclass's generated `__init__`):
    the guard's own `source` finds it in the loading frame, used only if its hash is `digest`
    (store.py), so the guard pins the same bytecode it pinned when saved."""

    digest: str
    source: Any


class Weak:
    """An object held weakly by a captured entry (an ID_MATCH's `self`): it may die before a save."""

    __slots__ = ("ref",)

    def __init__(self, obj: Any) -> None:
        self.ref = weakref.ref(obj)

    def get(self) -> Any:
        obj = self.ref()
        if obj is None:
            raise Unsaveable("an object a guard pins by identity has died since")
        return obj


def held(obj: Any) -> Any:
    """`obj`, weakly when it can be (a dict, a code object or a dtype cannot: they stay)."""
    try:
        return Weak(obj)
    except TypeError:
        return obj


def unheld(obj: Any) -> Any:
    return obj.get() if type(obj) is Weak else obj


# Values written as they are: immutable, and equal to themselves in another process.
_PLAIN = (int, float, complex, str, bytes, bool, type(None), slice, range, torch.dtype, torch.device,
          torch.layout, torch.memory_format, torch.Size, type(Ellipsis), type(NotImplemented))
# Objects pickle names by module and qualified name (checking the name finds them again).
_BY_NAME = (type, types.BuiltinFunctionType, types.MethodDescriptorType, types.WrapperDescriptorType,
            types.ClassMethodDescriptorType, types.GetSetDescriptorType, types.MemberDescriptorType,
            types.MethodWrapperType, types.MethodType)


# The classes of the `types` module, which pickle cannot find by their own names (`builtins.function`).
_TYPES_NAMES = {value: name for name, value in vars(types).items() if isinstance(value, type)}


def find_type_of_types(name: str) -> type:
    return getattr(types, name)


def describe(obj: Any) -> str:
    if isinstance(obj, torch.nn.Module):
        return f"a {type(obj).__qualname__} module"
    if isinstance(obj, torch.Tensor):
        return f"a tensor of size {list(obj.shape)}"
    name = getattr(obj, "__qualname__", None)
    return f"{type(obj).__name__} {name}" if isinstance(name, str) else f"a {type(obj).__qualname__} object"


def _module_name(module: types.ModuleType) -> str:
    """The name sys.modules holds the module under: its own, or another (`_collections_abc`, whose
    `__name__` says `collections.abc`, a module of its own)."""
    name = getattr(module, "__name__", None)
    if isinstance(name, str) and sys.modules.get(name) is module:
        return name
    for key, value in list(sys.modules.items()):
        if value is module:
            return key
    raise Unsaveable(f"module {name!r}, which is not in sys.modules")


def _globals_module(d: dict) -> str | None:
    """The name of the module whose globals `d` is, or None."""
    name = d.get("__name__")
    module = sys.modules.get(name) if isinstance(name, str) else None
    return name if module is not None and getattr(module, "__dict__", None) is d else None


def _walk(module_name: str, qualname: str) -> Any:
    obj: Any = sys.modules.get(module_name) or importlib.import_module(module_name)
    for part in qualname.split("."):
        if part == "<locals>":
            raise Stale(f"{qualname} is local to a function")
        obj = getattr(obj, part)
    return obj


def _codes_along(obj: Any) -> list[types.CodeType]:
    """The code of a function found by name, and of those under it: a decorator's `__wrapped__`,
    a method's `__func__` (the outermost first)."""
    codes = []
    for _ in range(8):
        code = getattr(obj, "__code__", None)
        if isinstance(code, types.CodeType) and code not in codes:  # (a bound method shows its __func__'s)
            codes.append(code)
        obj = getattr(obj, "__wrapped__", None) or getattr(obj, "__func__", None)
        if obj is None:
            break
    return codes


def find_function(module_name: str, qualname: str, digest: str, unwraps: int = 0) -> types.FunctionType:
    """The function of that name (through `unwraps` decorators' `__wrapped__`), of that code."""
    fn = _walk(module_name, qualname)
    for _ in range(unwraps):
        fn = getattr(fn, "__wrapped__", None)
    if not isinstance(fn, types.FunctionType) or code_hash(fn.__code__) != digest:
        raise Stale(f"function {module_name}.{qualname} changed since it was saved")
    return fn


def _codes_at(module_name: str, qualname: str) -> list[types.CodeType]:
    """The code objects `qualname` may name in the module: a function's (and those under its
    decorators), or for a function made inside another (`deco.<locals>.wrapper`: one code object,
    a constant of the outer code, shared by every function it makes) the constant of that
    qualified name in the outer function's code, when there is one only."""
    outer, _, _ = qualname.partition(".<locals>.")
    codes = _codes_along(_walk(module_name, outer))
    if outer == qualname:
        return codes
    found = [c for code in codes for c in _nested_codes(code) if c.co_qualname == qualname]
    return found if len(found) == 1 else []


def _nested_codes(code: types.CodeType) -> list[types.CodeType]:
    nested = []
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            nested += [const, *_nested_codes(const)]
    return nested


def find_code(module_name: str, qualname: str, digest: str, index: int = 0) -> types.CodeType:
    codes = _codes_at(module_name, qualname)
    code = codes[index] if index < len(codes) else None
    if code is None or code_hash(code) != digest:
        raise Stale(f"the code of {module_name}.{qualname} changed since it was saved")
    return code


def _descriptor_function(obj: Any) -> Any:
    """The function a property, staticmethod or classmethod wraps (None for other objects)."""
    if isinstance(obj, property):
        return obj.fget
    if isinstance(obj, (staticmethod, classmethod)):
        return obj.__func__
    return None


def _class_attr_name(obj: Any, fn: Any) -> tuple:
    """(owner class, attribute name, code hash) of a descriptor in a class's __dict__, found by
    the qualified name of the function it wraps (`Config.hidden_size`'s getter)."""
    code = getattr(fn, "__code__", None)
    owner_name, _, attr = getattr(fn, "__qualname__", "").rpartition(".")
    try:
        owner = _walk(fn.__module__, owner_name) if owner_name and code is not None else None
    except Exception:  # noqa: BLE001
        owner = None
    if not isinstance(owner, type) or owner.__dict__.get(attr) is not obj:
        raise Unsaveable(f"{describe(obj)} of {getattr(fn, '__qualname__', '?')}, which its class does not hold "
                         f"under that name")
    return owner, attr, code_hash(code)


def find_class_attr(owner: type, attr: str, digest: str) -> Any:
    obj = owner.__dict__.get(attr)
    fn = _descriptor_function(obj)
    if fn is None or code_hash(fn.__code__) != digest:
        raise Stale(f"{owner.__qualname__}.{attr} changed since it was saved")
    return obj


def find_module(name: str) -> types.ModuleType:
    return sys.modules.get(name) or importlib.import_module(name)


def find_globals(name: str) -> dict:
    return find_module(name).__dict__


def _function_name(fn: types.FunctionType) -> tuple:
    """(module, name, code hash, unwraps): the function is found by its qualified name, or by its
    name (a function made by another and published in a module: torch's `max_pool2d`), or in the
    module of its file (a function that names another module: the graph's `numpy_attr_wrapper`), either
    directly or under it through decorators' `__wrapped__` (a class's `forward` decorated, the
    undecorated one inlined)."""
    claimed = getattr(fn, "__module__", None)
    for module, name in dict.fromkeys(((claimed, fn.__qualname__), (claimed, fn.__name__),
                                       (module_of_code(fn.__code__), fn.__qualname__))):
        try:
            found = _walk(module, name) if isinstance(module, str) else None
        except Exception:  # noqa: BLE001 (any failure: not findable by this name)
            continue
        for unwraps in range(8):
            if found is fn:
                return (module, name, code_hash(fn.__code__), unwraps)
            found = getattr(found, "__wrapped__", None)
            if found is None:
                break
    raise Unsaveable(f"function {fn.__qualname__}, which its module does not hold under that name")


def _code_name(code: types.CodeType) -> tuple:
    module = module_of_code(code)
    try:
        found = _codes_at(module, code.co_qualname) if module is not None else []
    except Exception:  # noqa: BLE001
        found = []
    index = next((i for i, c in enumerate(found) if c is code), None)
    if index is None:
        raise Unsaveable(f"the code of {code.co_qualname}, which no function of its module holds")
    return (module, code.co_qualname, code_hash(code), index)


def _make_code(body: bytes, consts: tuple) -> types.CodeType:
    """A code object from its marshalled body and its constants (which marshal cannot all hold)."""
    return marshal.loads(body).replace(co_consts=consts)


class Pickler(pickle.Pickler):
    """pickle, with every object either plain data, named (above), pyframe's own record, or one of
    the entry's own objects (`persistent(obj)` gives its id, or None)."""

    def __init__(self, file: io.BytesIO, persistent: Callable[[Any], Any] = lambda obj: None) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self._persistent = persistent
        # The first ById written of each object a name finds (by id; the object kept so the id
        # stays its own): a later one is written as that one (`_identity` of it), so a load looks
        # a name up once however many guards pin its object (Linear.forward's code: once a layer).
        self._named: dict[int, tuple[Any, Any]] = {}

    def persistent_id(self, obj: Any) -> Any:
        kind = type(obj)
        if kind is dict:  # (pickle asks reducer_override nothing of a dict)
            name = _globals_module(obj)
            return None if name is None else ("globals", name)
        if kind in _PLAIN or kind in (tuple, list, frozenset, set):
            return None
        return self._persistent(obj)

    def reducer_override(self, obj: Any) -> Any:  # noqa: C901 (one case per kind of object)
        kind = type(obj)
        if kind in _PLAIN or isinstance(obj, enum.Enum):
            return NotImplemented
        if kind is ById or kind is Weak:
            value = obj.value if kind is ById else obj.get()
            first = self._named.get(id(value))
            if first is not None:
                return _identity, (first[1],)
            reduced = self._by_id(value, obj.source if kind is ById else None)
            if reduced[0] is not CodeAtSource:  # (that one is found at its own guard's source)
                self._named[id(value)] = (value, obj)
            return reduced
        if kind is types.CodeType:
            return _make_code, (_marshal_without_consts(obj), obj.co_consts)
        if kind is types.FunctionType:
            if obj.__module__.startswith("pyframe."):  # pyframe's own (the version stamp pins them)
                return NotImplemented
            return find_function, _function_name(obj)
        if kind is types.ModuleType:
            return find_module, (_module_name(obj),)
        if kind in (property, staticmethod, classmethod) and _descriptor_function(obj) is not None:
            return find_class_attr, _class_attr_name(obj, _descriptor_function(obj))
        if kind is type and obj in _TYPES_NAMES:
            return find_type_of_types, (_TYPES_NAMES[obj],)
        if isinstance(obj, _BY_NAME):
            return NotImplemented  # pickle names them, and checks the name finds them
        if dataclasses.is_dataclass(obj) and kind.__module__.startswith("pyframe."):
            # a Source, a Guard, a TensorMeta...: plain records, with the guard texts they remember
            # (made again, they are a third of a load), but not a remembered hash (a string's hash
            # differs in another process: PYTHONHASHSEED) nor a source's name (_NOT_KEPT)
            state = obj.__dict__
            if "_hash" in state or "_name" in state:
                state = {k: v for k, v in state.items() if k not in _NOT_KEPT}
            return make_record, (kind, state)
        if kind.__module__.startswith("torch._ops"):  # torch.ops.aten.add.Tensor: named by torch
            return NotImplemented
        if isinstance(obj, torch._ops.HigherOrderOperator):  # cond, autograd_function_apply...
            if getattr(torch.ops.higher_order, obj.__name__, None) is not obj:
                raise Unsaveable(f"higher-order operator {obj.__name__}, not in torch.ops.higher_order")
            return find_higher_order, (obj.__name__,)
        if kind in PER_NODE_CALLABLES:  # a graph's own callable (NumPy's calls): its class, its state
            return make_instance, (*_class_location(kind), dict(obj.__dict__))
        if kind.__module__.startswith("pyframe."):
            return NotImplemented  # pyframe's own helpers (a graph's NumPy calls): their state is checked too
        raise Unsaveable(describe(obj))

    def _by_id(self, obj: Any, source: Any) -> Any:
        """A value compared by identity, read at `source`: a name, never a copy."""
        if obj is None or obj is True or obj is False or obj is Ellipsis or obj is NotImplemented:
            return _identity, (obj,)
        kind = type(obj)
        if kind is types.CodeType:
            try:
                return find_code, _code_name(obj)
            except Unsaveable:
                if source is None:
                    raise
                return CodeAtSource, (code_hash(obj), source)
        if kind is dict:
            name = _globals_module(obj)
            if name is None:
                raise Unsaveable("a dict compared by identity that is no module's globals")
            return find_globals, (name,)
        if kind in (types.FunctionType, types.ModuleType, property, staticmethod, classmethod, torch.dtype) or \
                isinstance(obj, (type, enum.Enum)) or (isinstance(obj, _BY_NAME) and kind is not types.MethodType):
            return _identity, (obj,)  # named by reducer_override or by pickle itself
        raise Unsaveable(f"{describe(obj)}, compared by identity")


# What records remember and a save leaves out: a source's name (made again when asked: a deep
# module path repeats its base's in every source below it) and a hash.
_NOT_KEPT = frozenset({"_hash", "_name"})


def make_record(kind: type, state: dict) -> Any:
    """A pyframe record (a frozen dataclass) from its __dict__, as pickle's default makes it: no
    __init__ run."""
    obj = object.__new__(kind)
    obj.__dict__.update(state)
    return obj


def find_higher_order(name: str) -> Any:
    return getattr(torch.ops.higher_order, name)


def _class_location(kind: type) -> tuple[str, str]:
    """Where a class is found by name: its module, or (a class that names another module, as the
    graph's callables name torch._dynamo's) the module of the file its methods were compiled from."""
    for method in vars(kind).values():
        code = getattr(method, "__code__", None)
        module = module_of_code(code) if code is not None else None
        if module is not None and getattr(sys.modules[module], kind.__qualname__, None) is kind:
            return module, kind.__qualname__
    raise Unsaveable(f"class {kind.__qualname__}, which no module holds under its name")


def make_instance(module_name: str, qualname: str, state: dict) -> Any:
    kind = _walk(module_name, qualname)
    obj = kind.__new__(kind)
    obj.__dict__.update(state)
    return obj


def _identity(obj: Any) -> Any:
    return obj


def _marshal_without_consts(code: types.CodeType) -> bytes:
    return marshal.dumps(code.replace(co_consts=()))


def dumps(obj: Any, persistent: Callable[[Any], Any] = lambda obj: None) -> bytes:
    buffer = io.BytesIO()
    Pickler(buffer, persistent).dump(obj)
    return buffer.getvalue()


class Unpickler(pickle.Unpickler):
    def __init__(self, data: bytes, persistent_load: Callable[[Any], Any]) -> None:
        super().__init__(io.BytesIO(data))
        self._load = persistent_load

    def persistent_load(self, pid: Any) -> Any:
        if pid[0] == "globals":
            return find_globals(pid[1])
        return self._load(pid)


def loads(data: bytes, persistent_load: Callable[[Any], Any] = lambda pid: None) -> Any:
    return Unpickler(data, persistent_load).load()

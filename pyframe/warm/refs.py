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

from .codes import code_hash, module_of_code


class Unsaveable(Exception):
    """An object another process could not find again: what it is."""


class Stale(Exception):
    """A name that no longer finds the object it named (a function whose code changed, a module gone)."""


@dataclasses.dataclass(frozen=True)
class ById:
    """A guard's value compared by identity: written only as a name (`Unsaveable` otherwise)."""

    value: Any


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
    name = getattr(module, "__name__", None)
    if not isinstance(name, str) or sys.modules.get(name) is not module:
        raise Unsaveable(f"module {name!r}, which is not in sys.modules under its name")
    return name


def _globals_module(d: dict) -> str | None:
    """The name of the module whose globals `d` is, or None."""
    name = d.get("__name__")
    module = sys.modules.get(name) if isinstance(name, str) else None
    return name if module is not None and getattr(module, "__dict__", None) is d else None


def _walk(module_name: str, qualname: str) -> Any:
    obj: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        if part == "<locals>":
            raise Stale(f"{qualname} is local to a function")
        obj = getattr(obj, part)
    return obj


def _unwrapped_code(obj: Any) -> types.CodeType | None:
    """The code of a function found by name: through a decorator's `__wrapped__`, a method's `__func__`."""
    for _ in range(8):
        code = getattr(obj, "__code__", None)
        if isinstance(code, types.CodeType):
            return code
        obj = getattr(obj, "__wrapped__", None) or getattr(obj, "__func__", None)
        if obj is None:
            return None
    return None


def find_function(module_name: str, qualname: str, digest: str) -> types.FunctionType:
    fn = _walk(module_name, qualname)
    if not isinstance(fn, types.FunctionType) or code_hash(fn.__code__) != digest:
        raise Stale(f"function {module_name}.{qualname} changed since it was saved")
    return fn


def find_code(module_name: str, qualname: str, digest: str) -> types.CodeType:
    code = _unwrapped_code(_walk(module_name, qualname))
    if code is None or code_hash(code) != digest:
        raise Stale(f"the code of {module_name}.{qualname} changed since it was saved")
    return code


def find_module(name: str) -> types.ModuleType:
    return importlib.import_module(name)


def find_globals(name: str) -> dict:
    return importlib.import_module(name).__dict__


def _function_name(fn: types.FunctionType) -> tuple:
    module = getattr(fn, "__module__", None)
    try:
        found = _walk(module, fn.__qualname__) if isinstance(module, str) else None
    except (Stale, Exception):  # noqa: BLE001 (any failure: not findable by name)
        found = None
    if found is not fn:
        raise Unsaveable(f"function {fn.__qualname__}, which its module does not hold under that name")
    return (module, fn.__qualname__, code_hash(fn.__code__))


def _code_name(code: types.CodeType) -> tuple:
    module = module_of_code(code)
    try:
        found = _unwrapped_code(_walk(module, code.co_qualname)) if module is not None else None
    except Exception:  # noqa: BLE001
        found = None
    if found is not code:
        raise Unsaveable(f"the code of {code.co_qualname}, which no function of its module holds")
    return (module, code.co_qualname, code_hash(code))


def _make_code(body: bytes, consts: tuple) -> types.CodeType:
    """A code object from its marshalled body and its constants (which marshal cannot all hold)."""
    return marshal.loads(body).replace(co_consts=consts)


class Pickler(pickle.Pickler):
    """pickle, with every object either plain data, named (above), pyframe's own record, or one of
    the entry's own objects (`persistent(obj)` gives its id, or None)."""

    def __init__(self, file: io.BytesIO, persistent: Callable[[Any], Any] = lambda obj: None) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self._persistent = persistent

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
        if kind is ById:
            return self._by_id(obj.value)
        if kind is Weak:
            return self._by_id(obj.get())
        if kind is types.CodeType:
            return _make_code, (_marshal_without_consts(obj), obj.co_consts)
        if kind is types.FunctionType:
            if obj.__module__.startswith("pyframe."):  # pyframe's own (the version stamp pins them)
                return NotImplemented
            return find_function, _function_name(obj)
        if kind is types.ModuleType:
            return find_module, (_module_name(obj),)
        if kind is type and obj in _TYPES_NAMES:
            return find_type_of_types, (_TYPES_NAMES[obj],)
        if isinstance(obj, _BY_NAME):
            return NotImplemented  # pickle names them, and checks the name finds them
        if dataclasses.is_dataclass(obj) and kind.__module__.startswith("pyframe."):
            return NotImplemented  # a Source, a Guard, a TensorMeta...: plain records
        if kind.__module__.startswith("torch._ops"):  # torch.ops.aten.add.Tensor: named by torch
            return NotImplemented
        raise Unsaveable(describe(obj))

    def _by_id(self, obj: Any) -> Any:
        """A value compared by identity: a name, never a copy."""
        if obj is None or obj is True or obj is False or obj is Ellipsis or obj is NotImplemented:
            return _identity, (obj,)
        kind = type(obj)
        if kind is types.CodeType:
            return find_code, _code_name(obj)
        if kind is dict:
            name = _globals_module(obj)
            if name is None:
                raise Unsaveable("a dict compared by identity that is no module's globals")
            return find_globals, (name,)
        if kind in (types.FunctionType, types.ModuleType) or isinstance(obj, (type, enum.Enum)) or \
                kind in (types.BuiltinFunctionType, types.MethodDescriptorType, types.WrapperDescriptorType,
                         torch.dtype):
            return _identity, (obj,)  # named by reducer_override or by pickle itself
        raise Unsaveable(f"{describe(obj)}, compared by identity")


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

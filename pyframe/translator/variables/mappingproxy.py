"""A mappingproxy read from the frame: `Cls.__dict__`, `vars(Cls)`, `type(obj).__dict__`.

A class's `__dict__` is a read-only view of the class's own dict, a new proxy at each read. The
tracker knows the keys, in order, guarded on the proxy's source (DICT_KEYS_MATCH: the C leaf reads
the dict behind a mappingproxy); a value is read only when the trace asks for it
(`attrs["scale"]`), on a source of its own (`G['Cfg'].__dict__['scale']`) and with that value's
guard, so iterating a class's keys costs no guard on each of its methods. Only views of an exact
dict with constant keys are modelled; a proxy the frame makes itself (`types.MappingProxyType(d)`)
is not.

A class attribute the trace assigns (`Cls.count += 1`, replayed after the graph) would show in
the live view: reading the proxy of a class the trace stored to is Unsupported.
"""
from __future__ import annotations

import gc
import types
from typing import Any

from ...exc import Unsupported
from ...source import ItemSource, Source
from .base import BoundMethodVariable, VariableTracker, constant_args
from .constant import ConstantVariable
from .dicts import DictVariable, DictViewVariable
from .dict_keys import is_constant_key
from .exceptions import raise_symbolic
from .iterators import ListIteratorVariable

def proxied_mapping(proxy: types.MappingProxyType) -> Any:
    """The mapping a mappingproxy reads (its one referent), found without calling into it."""
    referents = gc.get_referents(proxy)
    return referents[0] if len(referents) == 1 else None


def is_modelled_proxy(value: Any) -> bool:
    """A mappingproxy over an exact dict whose keys are strings or ints (a class's __dict__)."""
    if type(value) is not types.MappingProxyType:
        return False
    mapping = proxied_mapping(value)
    return type(mapping) is dict and all(type(k) in (str, int) for k in mapping)


class MappingProxyVariable(VariableTracker):
    """A mappingproxy read from the frame: its keys (guarded), its values read lazily."""

    def __init__(self, value: types.MappingProxyType, source: Source):
        super().__init__(source)
        self.value = value
        self.mapping = proxied_mapping(value)
        self.keys = tuple(self.mapping)
        self._values: dict[Any, VariableTracker] = {}

    def python_type(self) -> type:
        return types.MappingProxyType

    def real_object(self) -> Any:
        return self.value

    def truth(self) -> bool:
        return bool(self.keys)

    def _check_unchanged(self, tx) -> None:
        """The trace assigned no attribute of the class whose dict this is (the view would show it)."""
        for obj, _ in tx.side_effects.stores.values():
            owner = getattr(obj, "value", None)
            if isinstance(owner, type) and proxied_mapping(vars(owner)) is self.mapping:
                raise Unsupported(f"{owner.__qualname__}.__dict__ read after the trace assigned a class attribute")

    def value_of(self, tx, key: Any) -> VariableTracker:
        """The tracker of the value under `key` (one of the keys), guarded where it is read."""
        found = self._values.get(key)
        if found is None:
            found = self._values[key] = tx.wrap(self.mapping[key], ItemSource(self.source, key))
        return found

    def _constant_key(self, key: VariableTracker) -> Any:
        if not key.is_python_constant() or not is_constant_key(key.as_python_constant()):
            raise Unsupported(f"a mappingproxy looked up by {key}")
        return key.as_python_constant()

    def getitem(self, tx, key: VariableTracker) -> VariableTracker:
        self._check_unchanged(tx)
        k = self._constant_key(key)
        if k not in self.keys:
            raise_symbolic(KeyError, k)
        return self.value_of(tx, k)

    def as_dict(self, tx) -> DictVariable:
        """A new dict of every item (`proxy.copy()`, and what its `values()`/`items()` read)."""
        self._check_unchanged(tx)
        return DictVariable({k: self.value_of(tx, k) for k in self.keys})

    def unpack(self, tx) -> list[VariableTracker]:  # iteration: the keys
        self._check_unchanged(tx)
        return [ConstantVariable(k) for k in self.keys]

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if callable(getattr(types.MappingProxyType, name, None)):
            return BoundMethodVariable(self, name)
        raise Unsupported(f"attribute {name!r} of a mappingproxy")

    def call_method(self, tx, name, args, kwargs) -> VariableTracker:
        self._check_unchanged(tx)
        if name == "__getitem__" and len(args) == 1 and not kwargs:
            return self.getitem(tx, args[0])
        if name == "get" and 1 <= len(args) <= 2 and not kwargs:
            k = self._constant_key(args[0])
            if k in self.keys:
                return self.value_of(tx, k)
            return args[1] if len(args) == 2 else ConstantVariable(None)
        if name == "__contains__" and len(args) == 1 and not kwargs:
            return ConstantVariable(self._constant_key(args[0]) in self.keys)
        if name == "__len__" and not args and not kwargs:
            return ConstantVariable(len(self.keys))
        if name == "keys" and not args and not kwargs:
            # a view of the keys alone: the dict it is rebuilt from holds no value worth reading
            return DictViewVariable(DictVariable(dict.fromkeys(self.keys, ConstantVariable(None))), "keys")
        if name in ("values", "items") and not args and not kwargs:
            return DictViewVariable(self.as_dict(tx), name)
        if name == "copy" and not args and not kwargs:
            return self.as_dict(tx)
        if name in ("__iter__", "__reversed__") and not args and not kwargs:
            keys = self.unpack(tx)
            reverse = name == "__reversed__"
            return ListIteratorVariable(keys[::-1] if reverse else keys, type(iter(reversed({}) if reverse else {})))
        constant_args(args, kwargs, f"mappingproxy.{name}()")
        raise Unsupported(f"mappingproxy.{name}()")

    def reconstruct(self, cg) -> None:
        cg.load_source(self.source)

    def __repr__(self) -> str:
        return f"MappingProxyVariable({self.source.name()})"


class InstanceDictViewVariable(MappingProxyVariable):
    """`module.__dict__` of an nn.Module read from the frame (a `__getattr__` of the user's
    that looks in it): read as a mappingproxy is, its keys guarded and its values read lazily,
    each on its own source (`L['self'].__dict__['_internal']`), so a module's hundred attributes
    cost no guard each. Read-only: a store into it is not modelled (a graph break), and a read
    after the trace assigned an attribute of the module is Unsupported (the view would show it)."""

    def __init__(self, value: dict, source: Source, owner: VariableTracker):
        VariableTracker.__init__(self, source)
        self.value = self.mapping = value
        self.keys = tuple(value)
        self._values = {}
        self.owner = owner

    def python_type(self) -> type:
        return dict

    def _check_unchanged(self, tx) -> None:
        if id(self.owner) in tx.side_effects.stores:
            raise Unsupported(f"{self.source.name()} read after the trace assigned an attribute of its object")

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name in _READS:
            return BoundMethodVariable(self, name)
        raise Unsupported(f"attribute {name!r} of {self.source.name()}")

    def __repr__(self) -> str:
        return f"InstanceDictViewVariable({self.source.name()})"


# What a mappingproxy reads through to its mapping; it has no method that changes it.
_READS = frozenset({"__getitem__", "get", "__contains__", "__len__", "keys", "values", "items", "copy",
                    "__iter__", "__reversed__", "__eq__", "__ne__", "__or__"})


class MadeMappingProxyVariable(VariableTracker):
    """`types.MappingProxyType(d)` made in the frame over a dict of the trace: a read-only live
    view, every read asked of the dict's tracker (a later store into d shows through it); rebuilt
    as `types.MappingProxyType(d)` over the rebuilt dict."""

    def __init__(self, dict_var: DictVariable):
        super().__init__()
        self.dict_var = dict_var

    @staticmethod
    def make(tx, cls: type, cls_source: Source | None, args, kwargs) -> "MadeMappingProxyVariable":
        if len(args) != 1 or kwargs or not isinstance(args[0], DictVariable):
            raise Unsupported("types.MappingProxyType() of anything but a dict of the trace")
        return MadeMappingProxyVariable(args[0])

    def python_type(self) -> type:
        return types.MappingProxyType

    def truth(self) -> bool:
        return self.dict_var.truth()

    def unpack(self, tx) -> list[VariableTracker]:  # iteration: the keys
        return self.dict_var.unpack(tx)

    def getitem(self, tx, key: VariableTracker) -> VariableTracker:
        return self.dict_var.getitem(tx, key)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name in _READS:
            return BoundMethodVariable(self, name)
        raise Unsupported(f"attribute {name!r} of a mappingproxy")

    def call_method(self, tx, name, args, kwargs) -> VariableTracker:
        if name not in _READS:
            raise Unsupported(f"mappingproxy.{name}()")
        if name == "__len__" and not args and not kwargs:
            return ConstantVariable(len(self.dict_var.items))
        return self.dict_var.call_method(tx, name, args, kwargs)

    def rebuilt_from(self) -> list[VariableTracker]:
        return [self.dict_var]

    def reconstruct(self, cg) -> None:
        cg.push_null()
        cg.load_const(types.MappingProxyType)
        self.dict_var.reconstruct(cg)
        cg.call(1)

    def __repr__(self) -> str:
        return "MadeMappingProxyVariable()"

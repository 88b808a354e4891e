"""Instances of dict and OrderedDict subclasses: user objects with a dict inside.

`class Out(OrderedDict)` decorated by `@dataclass` (Hugging Face's ModelOutput), `class Config(dict)`
with a method or a `__getattr__`, `class OD(OrderedDict)` whose `__getitem__` calls super(): each
instance is two things at once, and its tracker keeps both:

  * a user object: attributes (instance ones, and the class's), Python methods, `__setattr__`,
    operators: what UserObjectVariable (read from the frame) and NewObjectVariable (made while
    tracing) do, which the two classes here extend;
  * a dict: `dict_var` holds its items (constant keys, symbolic values, in order).

Every operation goes where Python sends it. A method or special method the class (or a Python base)
defines is inlined; one that resolves to dict's or OrderedDict's own is done on `dict_var`
(`call_builtin`), with CPython's semantics: `OrderedDict.update` and `__init__` store each item
through `self[key] = value` (the subclass's `__setitem__`), `dict.update` does not, `OrderedDict.copy`
makes `type(self)()` and copies through `__getitem__`/`__setitem__`, `dict(obj)` reads through
`keys()` and `__getitem__` unless the class keeps dict's own `__iter__`. `super().__setitem__`,
`super().__setattr__`, `dict.__setitem__(self, ...)` reach the same builtin operations
(builtin_descriptors.py calls `call_builtin`).

An instance made while tracing is built for real only if it outlives the trace, by `dict.__new__`
and the base's own `__setitem__` and `object.__setattr__` (the subclass's overrides already ran in
the trace). One read from the frame is guarded by type and keys, its items read from its storage
(`DictItemSource`: no `__getitem__` call); a mutation of its items or attributes is replayed after
the graph the same way, through the base's methods.
"""
from __future__ import annotations

import collections
import types
from typing import Any, Sequence

from ...exc import Unsupported
from ...source import AttrSource, Source
from .base import BoundMethodVariable, VariableTracker, has_plain_metaclasses, mro_lookup
from .builtin_methods import DICT_UNORDERED_READS
from .constant import ConstantVariable
from .dicts import DictVariable, DictViewVariable, positional_args
from .dict_keys import ObjectKey, key_var, name_as_constructed, raise_key_error
from .iterators import ListIteratorVariable, iterate
from .lists import BaseListVariable
from .static_lookup import is_data_descriptor
from .frame_objects import UserObjectVariable
from .objects import NewObjectVariable, PythonObjectVariable, register_constructor, store_raw_attributes

# The builtin classes a supported subclass may inherit from (every other class on its MRO is a
# Python class, whose methods are inlined).
_BUILTIN_BASES = (collections.OrderedDict, dict, object)
_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement
_METHOD_DESCRIPTORS = (types.MethodDescriptorType, types.WrapperDescriptorType)
_DICT_ITER = dict.__dict__["__iter__"]


def dict_base(cls: type) -> type | None:
    """dict or OrderedDict: the builtin class whose storage and methods instances of `cls` use;
    None unless `cls` is a Python subclass of one of them (and of no other builtin class: not
    defaultdict, not a class written in C) with a plain metaclass."""
    if not isinstance(cls, type) or not has_plain_metaclasses(cls) or cls in _BUILTIN_BASES:
        return None
    if not issubclass(cls, dict) or any(not klass.__flags__ & _HEAPTYPE and klass not in _BUILTIN_BASES
                                        for klass in cls.__mro__):
        return None
    return collections.OrderedDict if issubclass(cls, collections.OrderedDict) else dict


def is_constructible(cls: type) -> bool:
    """`cls(...)` can be traced: a dict subclass whose instances dict.__new__ makes."""
    return dict_base(cls) is not None and cls.__new__ is dict.__new__


def _lookup(cls: type, name: str) -> tuple[type | None, Any]:
    """(the class on cls's MRO that defines `name`, what it defines), or (None, None)."""
    for klass in cls.__mro__:
        if name in vars(klass):
            return klass, vars(klass)[name]
    return None, None


def _key(key: VariableTracker) -> Any:
    if not key.is_python_constant():
        raise Unsupported(f"a dict key unknown while tracing ({key})")
    return key.as_python_constant()


class _DictPart(DictVariable):
    """The items of a dict-subclass instance. Views made from it (`obj.keys()`) are rebuilt from
    the instance itself."""

    def __init__(self, owner: "DictSubclassMixin", items: dict[Any, VariableTracker], base: type):
        super().__init__(items, None, base)
        self.owner = owner

    def rebuilt_from(self) -> list[VariableTracker]:
        return [self.owner]

    def reconstruct(self, cg) -> None:
        self.owner.reconstruct(cg)

    def __repr__(self) -> str:
        return f"_DictPart({self.items!r})"


class DictSubclassMixin:
    """What instances of dict subclasses add to user objects (mixed into the two classes below)."""

    # Attribute stores recorded for replay are `object.__setattr__` itself (the class's own
    # `__setattr__`, if any, was inlined and ended there): side_effects.py replays them so.
    dict_var: _DictPart

    def _init_dict_part(self, items: dict[Any, VariableTracker]) -> None:
        self.base = dict_base(self.python_type())
        self.dict_var = _DictPart(self, items, self.base)

    # -- where a name leads --------------------------------------------------------------------------
    def _class_source(self) -> Source | None:
        raise NotImplementedError

    def _in_instance_dict(self, tx, name: str) -> bool:
        raise NotImplementedError

    def _builtin_method(self, tx, name: str) -> type | None:
        """The builtin class (dict, OrderedDict, object) whose method `obj.name` is, or None."""
        owner, attr = _lookup(self.python_type(), name)
        if owner in _BUILTIN_BASES and isinstance(attr, _METHOD_DESCRIPTORS) and not self._in_instance_dict(tx, name):
            return owner
        return None

    def generic_getattr(self, tx, name: str) -> VariableTracker:
        if self._builtin_method(tx, name) is not None:
            return BoundMethodVariable(self, name)
        return super().generic_getattr(tx, name)

    def generic_setattr(self, tx, name: str, value: VariableTracker) -> None:
        self.raw_setattr(tx, name, value)

    def call_method(self, tx, name, args, kwargs) -> VariableTracker:
        owner = self._builtin_method(tx, name)
        if owner is not None:
            return self.call_builtin(tx, name, list(args), kwargs, owner)
        return super().call_method(tx, name, args, kwargs)

    def call_special(self, tx, name: str, args: Sequence[VariableTracker]) -> VariableTracker:
        """`type(obj).name(obj, *args)`, as the interpreter calls special methods (`obj[k]`,
        `len(obj)`, `k in obj`, `obj.x = v`): looked up on the class only."""
        owner, attr = _lookup(self.python_type(), name)
        if isinstance(attr, types.FunctionType):
            source = self._class_source()
            return tx.inline_call(attr, [self, *args], {},
                                  fn_source=AttrSource(source, name) if source is not None else None)
        if owner in _BUILTIN_BASES:
            return self.call_builtin(tx, name, list(args), {}, owner)
        raise Unsupported(f"{name} of a {self.python_type().__qualname__} is a {type(attr).__name__}")

    # -- the protocols -----------------------------------------------------------------------------
    def getitem(self, tx, key: VariableTracker) -> VariableTracker:
        return self.call_special(tx, "__getitem__", [key])

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        self.call_special(tx, "__setattr__", [ConstantVariable(name), value])

    def truth(self) -> bool:
        # bool(obj) is __bool__, else __len__: a Python one of those would have to be inlined
        for special in ("__bool__", "__len__"):
            if isinstance(_lookup(self.python_type(), special)[1], types.FunctionType):
                raise Unsupported(f"truth of a {self.python_type().__qualname__}, which defines {special}")
        return bool(self.dict_var.items)

    def unpack(self, tx) -> list[VariableTracker]:
        return list(iterate(tx, self.call_special(tx, "__iter__", [])))

    def mapping_pairs(self, tx, dict_merge: bool) -> list[tuple[Any, VariableTracker]]:
        """The (key, value) pairs Python reads from this mapping to copy it: `dict(obj)`,
        `{**obj}`, `f(**obj)` and `dict.update` (`dict_merge`) copy the storage directly when
        the class keeps dict's own `__iter__`; otherwise (and for OrderedDict.update) Python calls
        `obj.keys()` and `obj[key]`, the class's own methods if it has them."""
        if dict_merge and _lookup(self.python_type(), "__iter__")[1] is _DICT_ITER:
            return list(self.dict_var.items.items())
        keys = self.call_method(tx, "keys", [], {})
        return [(_key(k), self.call_special(tx, "__getitem__", [k])) for k in list(iterate(tx, keys))]

    # -- dict's and OrderedDict's own methods -------------------------------------------------------
    def _mutate(self, tx) -> None:
        tx.side_effects.mutate(self)  # replayed for an instance read from the frame

    def call_builtin(self, tx, name: str, args: list[VariableTracker], kwargs: dict[str, VariableTracker],
                     owner: type) -> VariableTracker:
        """`owner.name(self, *args, **kwargs)`, owner being dict, OrderedDict or object."""
        cls, items = self.python_type(), self.dict_var.items
        what = f"{owner.__name__}.{name}() on a {cls.__qualname__}"
        if owner is dict and self.base is collections.OrderedDict and name not in DICT_UNORDERED_READS:
            raise Unsupported(f"{what} (dict's method would bypass the OrderedDict's order)")
        if owner is object:
            if name == "__setattr__" and len(args) == 2 and not kwargs:
                self.raw_setattr(tx, _key(args[0]), args[1])
                return ConstantVariable(None)
            if name == "__init__" and not args and not kwargs:
                return ConstantVariable(None)
            raise Unsupported(what)
        if name == "__getitem__" and len(args) == 1 and not kwargs:
            key = self.dict_var.key_of(tx, args[0])
            if key in items:
                return items[key]
            missing = _lookup(cls, "__missing__")[1]  # dict.__getitem__ asks a subclass's __missing__
            if isinstance(missing, types.FunctionType):
                return self.call_special(tx, "__missing__", args)
            raise_key_error(key)
        if name in ("__init__", "update") and len(args) <= 1:
            self._update(tx, args, kwargs, through_setitem=owner is collections.OrderedDict,
                         constructing=name == "__init__")
            return ConstantVariable(None)
        args, kwargs = positional_args(owner, name, args, kwargs)  # (OrderedDict's take keywords)
        if name in ("keys", "values", "items") and not args:
            return DictViewVariable(self.dict_var, name)
        if name in ("__iter__", "__reversed__") and not args:
            keys = [key_var(k) for k in items]
            return ListIteratorVariable(keys[::-1] if name == "__reversed__" else keys,
                                        type(iter({})) if name == "__iter__" else type(reversed({})))
        if name == "__len__" and not args:
            return ConstantVariable(len(items))
        if name == "__contains__" and len(args) == 1:
            return ConstantVariable(self.dict_var.key_of(tx, args[0]) in items)
        if name == "get":
            return self.dict_var.call_method(tx, name, args, {})
        if name == "copy" and not args:
            return self._copy(tx, owner)
        if name == "setdefault" and owner is collections.OrderedDict and 1 <= len(args) <= 2:
            # OrderedDict.setdefault on a subclass goes through `in`, `self[k]` and `self[k] = v`
            default = args[1] if len(args) == 2 else ConstantVariable(None)
            if self.call_special(tx, "__contains__", [args[0]]).truth():
                return self.call_special(tx, "__getitem__", [args[0]])
            self.call_special(tx, "__setitem__", [args[0], default])
            return default
        if name in _MUTATIONS:
            if name == "move_to_end" and self.base is not collections.OrderedDict:
                raise Unsupported(what)
            self._mutate(tx)
            return self.dict_var.call_method(tx, name, args, {})
        raise Unsupported(what)

    def _update(self, tx, args: list[VariableTracker], kwargs: dict[str, VariableTracker],
                through_setitem: bool, constructing: bool = False) -> None:
        """dict.update / dict.__init__ (items stored directly), or OrderedDict's (each one through
        `self[key] = value`, the subclass's __setitem__ if it has one)."""
        pairs = mapping_or_pairs(tx, args[0], dict_merge=not through_setitem) if args else []
        pairs += list(kwargs.items())
        for key, value in pairs:
            if constructing:
                name_as_constructed(key, value)
            if through_setitem:
                self.call_special(tx, "__setitem__", [ConstantVariable(key), value])
            else:
                self._mutate(tx)
                self.dict_var.items[key] = value

    def _copy(self, tx, owner: type) -> VariableTracker:
        if owner is dict:  # dict.copy makes a plain dict
            return DictVariable(dict(self.dict_var.items))
        # OrderedDict.copy of a subclass: type(self)(), then copy[k] = self[k] for each key
        cls_var = PythonObjectVariable(self.python_type(), self._class_source())
        copy = cls_var.call(tx, [], {})
        for key in list(self.dict_var.items):
            value = self.call_special(tx, "__getitem__", [ConstantVariable(key)])
            copy.call_special(tx, "__setitem__", [ConstantVariable(key), value])
        return copy

    def raw_setattr(self, tx, name: str, value: VariableTracker) -> None:
        """object.__setattr__(self, name, value): into the instance dict, unless a data descriptor
        of the class takes it (not modelled)."""
        static = mro_lookup(self.python_type(), name)  # (what the instance sees: not the metaclass's)
        if is_data_descriptor(static):
            raise Unsupported(f"assignment to attribute {name!r} of {self.python_type().__qualname__} "
                              f"through a descriptor")
        if self.python_type().__dictoffset__ == 0:
            raise Unsupported(f"assignment to attribute {name!r} of a {self.python_type().__qualname__} "
                              f"without a __dict__")
        self._store_raw(tx, name, value)

    def _store_raw(self, tx, name: str, value: VariableTracker) -> None:
        raise NotImplementedError


# Methods of dict that mutate.
_MUTATIONS = {"__setitem__", "__delitem__", "pop", "popitem", "setdefault", "clear", "move_to_end"}


class UserDictObjectVariable(DictSubclassMixin, UserObjectVariable):
    """An instance of a dict subclass read from the frame (guarded by type and keys)."""

    def __init__(self, value: Any, items: dict[Any, VariableTracker], source: Source | None = None):
        super().__init__(value, source)
        self._init_dict_part(items)

    def _class_source(self) -> Source | None:
        return AttrSource(self.source, "__class__") if self.source is not None else None

    def _in_instance_dict(self, tx, name: str) -> bool:
        return tx.side_effects.load_attr(self, name) is not None or name in getattr(self.value, "__dict__", {})

    def _store_raw(self, tx, name: str, value: VariableTracker) -> None:
        self.record_store(tx, name, value)

    def _mutate(self, tx) -> None:
        if self.source is None:  # (a real object the replay could not reach)
            raise Unsupported(f"mutation of a {type(self.value).__qualname__} that has no source")
        tx.side_effects.mutate(self)

    def __repr__(self) -> str:
        where = f" from {self.source.name()}" if self.source is not None else ""
        return f"UserDictObjectVariable({type(self.value).__qualname__}{where})"


class NewDictObjectVariable(DictSubclassMixin, NewObjectVariable):
    """An instance of a dict subclass made while tracing: `dict.__new__(cls)`, then its items and
    attributes as its `__init__` (inlined, or dict's) sets them."""

    def __init__(self, cls: type, cls_source: Source | None):
        super().__init__(cls, cls_source)
        self._init_dict_part({})

    @classmethod
    def make(cls, tx, klass: type, klass_source: Source | None, args, kwargs) -> "NewDictObjectVariable":
        """`klass(*args, **kwargs)`."""
        obj = cls(klass, klass_source)
        init_owner, init = _lookup(klass, "__init__")
        if isinstance(init, types.FunctionType):
            fn_source = AttrSource(klass_source, "__init__") if klass_source is not None else None
            tx.inline_call(init, [obj, *args], kwargs, fn_source=fn_source)
        elif init_owner in _BUILTIN_BASES:
            obj.call_builtin(tx, "__init__", list(args), kwargs, init_owner)
        else:
            raise Unsupported(f"{klass.__qualname__}.__init__ is a {type(init).__name__}")
        return obj

    def _class_source(self) -> Source | None:
        return self.cls_source

    def _in_instance_dict(self, tx, name: str) -> bool:
        return name in self.attrs

    def _store_raw(self, tx, name: str, value: VariableTracker) -> None:
        tx.side_effects.note()
        self.attrs[name] = value

    def reconstruct(self, cg) -> None:
        if self._building:
            raise Unsupported(f"a {self.cls.__qualname__} made while tracing refers to itself")

        def build() -> None:
            # dict.__new__(cls), then the base's own __setitem__ for each item and object's
            # __setattr__ for each attribute, the object kept on the stack: nothing of the
            # subclass's (`__init__`, `__setitem__`, `__setattr__`) runs again.
            self._building = True
            base = dict_base(self.cls)
            setitem = collections.OrderedDict.__setitem__ if base is collections.OrderedDict else dict.__setitem__
            cg.push_null()
            cg.load_const(dict.__new__)
            if self.cls_source is not None:
                cg.load_source(self.cls_source)
            else:
                cg.load_const(self.cls)
            cg.call(1)
            for key, value in self.dict_var.items.items():
                cg.push_null()
                cg.load_const(setitem)
                cg.emit("COPY", 3)  # the object, below the NULL and the method
                key.reconstruct(cg) if isinstance(key, ObjectKey) else cg.load_const(key)
                value.reconstruct(cg)
                cg.call(3)
                cg.emit("POP_TOP")
            store_raw_attributes(cg, self.cls, self.attrs)
            self._building = False

        cg.rebuild_once(self, build)

    def __repr__(self) -> str:
        return f"NewDictObjectVariable({self.cls.__qualname__})"


def mapping_or_pairs(tx, other: VariableTracker, dict_merge: bool) -> list[tuple[Any, VariableTracker]]:
    """What `dict.update(other)` (`dict_merge`) or `OrderedDict.update(other)` reads from `other`:
    a mapping's items, or an iterable's (key, value) pairs."""
    if isinstance(other, DictSubclassMixin):
        return other.mapping_pairs(tx, dict_merge)
    if isinstance(other, DictVariable):
        return list(other.items.items())
    if not isinstance(other, (BaseListVariable, ListIteratorVariable, DictViewVariable)):
        raise Unsupported(f"update of a dict from {other}")
    pairs = []
    for pair in iterate(tx, other):
        entry = pair.unpack(tx)
        if len(entry) != 2:
            raise Unsupported("dict update sequence element that is not a pair")
        pairs.append((_key(entry[0]), entry[1]))
    return pairs


# -- what the transformed code calls ----------------------------------------------------------------

def refill(target: Any, items: dict) -> None:
    """The replay of a traced mutation of a dict-subclass instance's items: the base's own clear and
    __setitem__ (the subclass's overrides ran in the trace; ModelOutput's update even raises)."""
    base = dict_base(type(target))
    base.clear(target)
    for key, value in items.items():
        base.__setitem__(target, key, value)


# `class Out(OrderedDict)` called in the trace: a user object with a dict inside (objects.py asks).
register_constructor(is_constructible, NewDictObjectVariable.make)

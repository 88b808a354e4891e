"""Instances of user classes read from the frame: real objects, read while tracing.

Each attribute value read is guarded on its Source like any other input; the attribute protocol
(a class's own `__getattribute__`, `__getattr__`, `__setattr__`, descriptors, properties) is
inlined where it is Python (attribute_protocol.py); assignments are side effects (side_effects.py).
Instances made while tracing are objects.py's NewObjectVariable.
"""

from __future__ import annotations

import functools
import types
from typing import Any

from ...exc import Unsupported
from ...guards import GuardKind
from ...source import AttrSource, GenericAttrSource, ItemSource, Source
from .base import BoundMethodVariable, VariableTracker, class_attribute, guard_class_attribute, mro_lookup, static_attribute
from .dicts import DictVariable
from .exceptions import raise_symbolic
from .partials import PartialVariable
from .methods import InlinedMethodVariable
from .attribute_protocol import (
    check_plain_delete, check_plain_store, delattr_protocol, descriptor_get, descriptor_set, getattr_protocol,
    is_plain_member, iterate_object, property_setter, python_descriptor, realize_stored, setattr_protocol,
)
from .static_lookup import (
    ABSENT, has_own_getattribute, instance_dict_of, is_data_descriptor, is_unset_slot, plain_protocol, read_static,
)
from .objects import PythonObjectVariable, bind_lru_cache_method, is_lru_cache_method


class UserObjectVariable(VariableTracker):
    """An instance of a user class, read from the frame (guarded by its type)."""

    def __init__(self, value: Any, source: Source | None = None):
        super().__init__(source)
        self.value = value

    def real_object(self) -> Any:
        return self.value

    def python_type(self) -> type:
        return type(self.value)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        return getattr_protocol(tx, self, type(self.value), self._class_attr_source, name)

    def generic_getattr(self, tx, name: str) -> VariableTracker:
        """object.__getattribute__(obj, name): what the trace assigned, a property (inlined), the
        instance dict, the class. A missing attribute raises AttributeError in the trace, guarded
        to stay missing.

        A plain value read from an object of the frame (a slot, the instance dict, the class: no
        descriptor of Python's run) is a function of the state at entry, guarded already: it is
        repeated, as long as nothing the replay would change has changed (SideEffects.repeat_read),
        without the lookups (`field.name` of each dataclass field, at every attribute a Hugging
        Face ModelOutput sets)."""
        reads, side_effects = tx.output.attribute_reads, tx.side_effects
        if self.source is not None:
            last = side_effects.repeat_read(reads, (self.source, name))
            if last is not None:
                return last
        start = side_effects.start_read()
        stored = tx.side_effects.load_attr(self, name)
        if stored is not None:
            return stored
        if tx.side_effects.is_deleted(self, name):
            return self._class_value_after_del(tx, name)
        # What the class's MRO holds for `name`, looked up once for this read (no code runs
        # between here and its last use that could change a class).
        static = class_attribute(type(self.value), name, None)
        descriptor = python_descriptor(type(self.value), name, static=static)
        if descriptor is not None and (is_data_descriptor(descriptor) or name not in instance_dict_of(self.value)):
            guard_class_attribute(tx, self, name)
            cls = tx.wrap(type(self.value), AttrSource(self.source, "__class__") if self.source is not None else None)
            return descriptor_get(tx, self, cls, name, descriptor)
        dict_var = self._dict_tracker(tx)
        if dict_var is not None and not is_data_descriptor(static):
            if name in dict_var.items:  # what the trace did to `obj.__dict__` is what obj shows
                return dict_var.items[name]
            if name in instance_dict_of(self.value):
                raise Unsupported(f"attribute {name!r} removed from a {type(self.value).__qualname__}'s __dict__")
        instance_dict = instance_dict_of(self.value)
        stored = tx.side_effects.load_class_attr(type(self.value), name) if name not in instance_dict else None
        if stored is not None:  # a class attribute the trace assigned (`Cls.count += 1`)
            if self.source is not None and type(self.value).__dictoffset__:  # not shadowed by the instance
                tx.output.guards.add(ItemSource(self._dict_source(), name), GuardKind.DICT_CONTAINS_MATCH, False)
            return stored
        if isinstance(static, property) and static.fget is not None and name not in instance_dict:
            guard_class_attribute(tx, self, name)
            return tx.inline_call(static.fget, [self], {})
        if isinstance(static, functools.partialmethod) and isinstance(static.func, types.FunctionType) \
                and name not in instance_dict:
            guard_class_attribute(tx, self, name)
            # a partialmethod reads as partial(<its function bound to obj>, *args, **keywords)
            constant = functools.partial(tx.wrap, source=None, guard=False)
            return PartialVariable(InlinedMethodVariable(static.func, self), [constant(a) for a in static.args],
                                   {k: constant(v) for k, v in static.keywords.items()})
        if is_lru_cache_method(static) and name not in instance_dict:
            guard_class_attribute(tx, self, name)
            return bind_lru_cache_method(tx, static, self)
        found = static_attribute(self.value, name, ABSENT)
        if found is ABSENT or is_unset_slot(self.value, found):  # (a slot never set: missing too)
            self._guard_missing(tx, name)
            raise_symbolic(AttributeError, f"{type(self.value).__name__!r} object has no attribute {name!r}")
        if name == "__dict__" and self.source is not None:
            return self.instance_dict_tracker(tx)
        if name not in instance_dict and self.source is not None:
            bound = tx.bind_builtin_descriptor(found, self)
            if bound is not None:
                # a builtin's method on the class (`obj.__reduce_ex__`, `obj.__setattr__`): bound to
                # obj, guarded where it lives (the class), not through the bound method each read
                # makes anew, which no check of an unchanged object could skip
                guard_class_attribute(tx, self, name)
                return bound
        own_getattribute = has_own_getattribute(type(self.value))
        value = read_static(self.value, name, found, generic=own_getattribute)
        if isinstance(value, types.MethodType) and name not in instance_dict:
            guard_class_attribute(tx, self, name)  # `obj.act = fn` later, or `C.act = ...`
            return BoundMethodVariable(self, name)
        if self.source is None:
            return tx.wrap(value, None)
        # Guards and the transformed code read the value as the trace did: where the class has
        # its own __getattribute__, by object's lookup, without running that Python method.
        source_type = GenericAttrSource if own_getattribute else AttrSource
        result = tx.wrap(value, source_type(self.source, name))
        side_effects.remember_read(reads, (self.source, name), start, result)
        return result

    def _class_value_after_del(self, tx, name: str) -> VariableTracker:
        """`obj.name` after the trace deleted the instance's own: the class's plain value (a
        default the instance had shadowed), or AttributeError in the trace."""
        cls = type(self.value)
        stored = tx.side_effects.load_class_attr(cls, name)
        if stored is not None:
            return stored
        static = mro_lookup(cls, name)
        if static is None and not any(name in vars(klass) for klass in cls.__mro__):
            tx.output.guards.add(self._class_attr_source(name), GuardKind.HASATTR_MATCH, False)
            raise_symbolic(AttributeError, f"{cls.__name__!r} object has no attribute {name!r}")
        if hasattr(type(static), "__get__"):
            raise Unsupported(f"attribute {name!r} of a {cls.__qualname__}, read from its class after `del`")
        return tx.wrap(static, self._class_attr_source(name))

    def generic_delattr(self, tx, name: str) -> None:
        """object.__delattr__(obj, name): out of its instance dict, replayed after the graph. Whether
        the real object has it is guarded; if it has not (and the trace stored none), AttributeError
        in the trace."""
        cls = type(self.value)
        check_plain_delete(cls, name)
        if self.source is None or not cls.__dictoffset__:
            raise Unsupported(f"deletion of attribute {name!r} of {self.describe()}")
        in_real_object = name in self._guarded_instance_dict()
        tx.output.guards.add(ItemSource(self._dict_source(), name), GuardKind.DICT_CONTAINS_MATCH, in_real_object)
        side = tx.side_effects
        present = side.load_attr(self, name) is not None or (in_real_object and not side.is_deleted(self, name))
        if not present:
            raise_symbolic(AttributeError, name)
        side.delete_attr(self, name, in_real_object)
        dict_var = self._dict_tracker(tx)
        if dict_var is not None:
            dict_var.items.pop(name, None)

    def delete_attr(self, tx, name: str) -> None:
        delattr_protocol(tx, self, type(self.value), self._class_attr_source, name)

    def _guard_missing(self, tx, name: str) -> None:
        """Guard that object's lookup of `name` keeps failing. Where that lookup is the whole of
        `obj.name` (no __getattribute__ or __getattr__ of the class's own), `hasattr(obj, name)`
        says it; otherwise the class must keep lacking it and the instance dict its keys."""
        if self.source is None:
            return
        guards = tx.output.guards
        if plain_protocol(type(self.value)):
            guards.add(AttrSource(self.source, name), GuardKind.HASATTR_MATCH, False)
            return
        instance_dict = self._guarded_instance_dict()
        if hasattr(type(self.value), name) or not all(type(k) is str for k in instance_dict):
            raise Unsupported(f"attribute {name!r} missing from a {type(self.value).__qualname__} (unguardable)")
        guards.add(AttrSource(AttrSource(self.source, "__class__"), name), GuardKind.HASATTR_MATCH, False)
        guards.add(self._dict_source(), GuardKind.DICT_KEYS_MATCH, tuple(instance_dict))

    def _guarded_instance_dict(self) -> dict:
        """The instance dict, which guards and the transformed code read as `obj.__dict__`
        (through the class's own __getattribute__, if any: it must give the dict itself)."""
        instance_dict = instance_dict_of(self.value)
        if getattr(self.value, "__dict__", None) is not instance_dict:
            raise Unsupported(f"{type(self.value).__qualname__}.__getattribute__ maps '__dict__' elsewhere")
        return instance_dict

    def generic_setattr(self, tx, name: str, value: VariableTracker) -> None:
        setter = property_setter(type(self.value), name)
        if setter is not None:  # `obj.scale = v` through a property: its setter inlined
            guard_class_attribute(tx, self, name, check_instance=False)
            tx.inline_call(setter, [self, value], {})
            return
        descriptor = python_descriptor(type(self.value), name, setter=True)
        if descriptor is not None:
            guard_class_attribute(tx, self, name)
            cls = tx.wrap(type(self.value), AttrSource(self.source, "__class__") if self.source is not None else None)
            descriptor_set(tx, self, cls, name, descriptor, value)
            return
        check_plain_store(type(self.value), name, own_setattr_ran=True)
        self.record_store(tx, name, value)

    def record_store(self, tx, name: str, value: VariableTracker) -> None:
        """An attribute stored into the instance dict (replayed after the graph), seen through
        `obj.__dict__` too if the trace read it."""
        realize_stored(tx, value)
        tx.side_effects.store_attr(self, name, value)
        dict_var = self._dict_tracker(tx)
        if dict_var is not None and not is_plain_member(class_attribute(type(self.value), name, None)):
            dict_var.items[name] = value

    def _dict_tracker(self, tx) -> VariableTracker | None:
        """The tracker of `obj.__dict__`, if the trace read it."""
        return tx.side_effects.known(self._dict_source()) if self.source is not None else None

    def _dict_source(self) -> AttrSource:
        """Where guards and the transformed code read the instance dict: by object's lookup where
        the class has its own __getattribute__ (the dict the trace modelled, no Python run)."""
        source_type = GenericAttrSource if has_own_getattribute(type(self.value)) else AttrSource
        return source_type(self.source, "__dict__")

    def instance_dict_tracker(self, tx) -> VariableTracker:
        """`obj.__dict__`: the real dict, guarded by its keys, showing what the trace assigned."""
        dict_var = self._dict_tracker(tx)
        if dict_var is not None:
            return dict_var
        dict_var = tx.wrap(self._guarded_instance_dict(), self._dict_source())
        if not isinstance(dict_var, DictVariable):
            raise Unsupported(f"__dict__ of a {type(self.value).__qualname__} with keys the trace does not model")
        stores = tx.side_effects.stores.get(id(self))
        for name, value in (stores[1].items() if stores is not None else ()):
            dict_var.items[name] = value  # (replayed as attribute stores: not a mutation of the dict)
        for name in tx.side_effects.deleted_names(self):
            dict_var.items.pop(name, None)
        return dict_var

    def call_method(self, tx, name, args, kwargs) -> VariableTracker:
        if name in instance_dict_of(self.value) and not is_data_descriptor(class_attribute(type(self.value), name, None)):
            return self.var_getattr(tx, name).call(tx, args, kwargs)  # the instance's own, not bound
        return self._call_class_method(tx, name, args, kwargs, check_instance=True)

    def _call_class_method(self, tx, name, args, kwargs, check_instance: bool) -> VariableTracker:
        """The class's function `name`, called bound to obj (inlined); guarded to stay the class's."""
        method = class_attribute(type(self.value), name, None)
        if isinstance(method, types.FunctionType):
            guard_class_attribute(tx, self, name, check_instance)
            return tx.inline_call(method, [self, *args], kwargs, fn_source=self._class_attr_source(name))
        if name == "__getitem__" and len(args) == 1 and isinstance(self.value, dict) \
                and class_attribute(type(self.value), "__getitem__", None) is dict.__getitem__:
            return self.getitem(tx, args[0])
        raise Unsupported(f"method {type(self.value).__name__}.{name}")

    def call(self, tx, args, kwargs) -> VariableTracker:
        """`obj(...)`: its class's __call__, inlined (Python looks it up on the type): a hook
        object such as spectral_norm's SpectralNorm, a callable of the user's."""
        if isinstance(class_attribute(type(self.value), "__call__", None), types.FunctionType):
            # (a special method: looked up on the type, the instance dict not asked)
            return self._call_class_method(tx, "__call__", args, kwargs, check_instance=False)
        raise Unsupported(f"calling {self.describe()}, which has no __call__ pyframe can trace")

    def getitem(self, tx, key: VariableTracker) -> VariableTracker:
        """`obj[key]` on a typing construct (`typing.List[int]` in an annotation), through a
        user class's __getitem__ (inlined: a Sequence or Mapping subclass), or on an instance of a
        dict subclass that keeps dict's own __getitem__."""
        if type(self.value).__module__ == "typing" and key.is_python_constant():
            return PythonObjectVariable(self.value[key.as_python_constant()])
        if isinstance(class_attribute(type(self.value), "__getitem__", None), types.FunctionType):
            return self.call_method(tx, "__getitem__", [key], {})
        if not isinstance(self.value, dict) or \
                class_attribute(type(self.value), "__getitem__", None) is not dict.__getitem__:
            raise Unsupported(f"subscript of a {type(self.value).__name__}")
        k = key.as_python_constant()
        if type(k) not in (str, int) or k not in self.value:
            raise Unsupported(f"{type(self.value).__name__} item {k!r}")
        return tx.wrap(self.value[k], ItemSource(self.source, k) if self.source is not None else None)

    def _class_attr_source(self, name: str) -> Source | None:
        return AttrSource(AttrSource(self.source, "__class__"), name) if self.source is not None else None

    def unpack(self, tx) -> list[VariableTracker]:
        return iterate_object(tx, self, type(self.value), self._class_attr_source)

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        setattr_protocol(tx, self, type(self.value), self._class_attr_source, name, value)

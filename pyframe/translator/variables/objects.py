"""Python objects the translator does not model in detail: classes, and instances of user classes.

An instance read from the frame is real: its attributes are read while tracing and each value read
is guarded on its Source like any other input; assignments to them are side effects
(side_effects.py). An instance made while tracing (`Point(x, y)`, a dataclass, any class whose
`__new__` is object's) is symbolic: its `__init__` is inlined, its attributes are trackers, and it
is built for real only if it outlives the trace. Reads that would run user code the translator
cannot inline (custom descriptors, `__getattr__`) are left to Python.
"""
from __future__ import annotations

import collections
import enum
import functools
import itertools
import types
from typing import Any, Callable

import torch

from ...exc import Unsupported
from ...guards import GuardKind
from ...source import AttrSource, GenericAttrSource, ItemSource, Source
from .base import (
    BoundMethodVariable, VariableTracker, class_attribute, constant_args, guard_class_attribute, mro_lookup,
    static_attribute,
)
from .iterators import iterate
from .constant import ConstantVariable
from .dicts import DictVariable
from .lists import DequeVariable
from .namedtuples import new_namedtuple
from .exceptions import ExceptionVariable, is_exception_class, raise_symbolic
from .partials import PartialVariable
from .methods import InlinedMethodVariable
from .nn_module import MadeCrossEntropyLossVariable, NNModuleVariable, record_module_init
from .descriptions import describe_value
from .attribute_protocol import (
    check_plain_delete, check_plain_store, delattr_protocol, descriptor_get, descriptor_set, getattr_protocol, is_plain_member,
    iterate_object, metaclass_getattr, property_setter, python_descriptor, realize_stored, setattr_protocol,
    store_class_attribute,
)
from .static_lookup import (
    ABSENT, bound_init_arguments, has_own_getattribute, instance_dict_of, is_data_descriptor,
    is_enum_lookup, is_plain_class, is_unset_slot, plain_protocol, read_static, static_attr,
)

_MISSING = object()


# Class calls that make kinds of value defined above this module: `(claims(cls), make(tx, cls,
# cls_source, args, kwargs))`, consulted in order before a plain class is made. The module that
# defines the kind registers it when imported (builtins.py: OrderedDict() and defaultdict();
# dict_subclass.py: instances of dict subclasses); the package's __init__ imports them all.
_CONSTRUCTORS: list[tuple[Callable[[type], bool], Callable[..., VariableTracker]]] = []


# torch's module containers whose items may be modules made while tracing: class -> maker(tx, cls,
# args, kwargs), registered by new_module.py (containers of constants are made for real, as below)
_MODULE_CONTAINERS: dict[type, Callable[..., VariableTracker]] = {}


def register_module_container(cls: type, make: Callable[..., VariableTracker]) -> None:
    _MODULE_CONTAINERS[cls] = make


def register_constructor(claims: Callable[[type], bool], make: Callable[..., VariableTracker]) -> None:
    """Let a class call `cls(*args, **kwargs)` with `claims(cls)` true make its instance by `make`."""
    _CONSTRUCTORS.append((claims, make))


def _traced_like_a_users(cls: type) -> bool:
    """A class of torch written in Python as a user writes one (pytree's TreeSpec, a frozen slots
    dataclass): its instances are made in the trace (its __init__ inlined) as a user class's,
    so they may hold values of the trace and be rebuilt when they outlive it. Modules are still
    made for real (parameter-free ones only), as are contexts and C-backed classes."""
    return is_plain_class(cls) and not issubclass(cls, torch.nn.Module) \
        and isinstance(class_attribute(cls, "__init__", None), types.FunctionType) \
        and class_attribute(cls, "__enter__", None) is None


_ENUM_MEMBERS = vars(enum.EnumMeta)["__members__"]


class PythonObjectVariable(VariableTracker):
    """An opaque Python value used as a constant: a class, an enum member, a frozen config..."""

    def __init__(self, value: Any, source: Source | None = None):
        super().__init__(source)
        self.value = value

    def real_object(self) -> Any:
        return self.value

    def python_type(self) -> type:
        return type(self.value)

    def as_python_constant(self) -> Any:
        return self.value

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if isinstance(self.value, type):  # a class attribute the trace assigned
            stored = tx.side_effects.load_class_attr(self.value, name)
            if stored is not None:
                return stored
        source = AttrSource(self.source, name) if self.source is not None else None
        if name == "__members__" and isinstance(self.value, enum.EnumMeta) \
                and class_attribute(type(self.value), name, None) is _ENUM_MEMBERS:
            # EnumType's property: a new mappingproxy of the members at each read (fixed since the
            # class statement ran), read for real: it runs no user code
            return tx.wrap(self.value.__members__, source, guard=self.source is not None)
        if isinstance(self.value, type) and type(self.value) is not type:
            found = metaclass_getattr(tx, self, name)  # the metaclass's property, method or __getattr__
            if found is not None:
                return found
        if isinstance(self.value, type) and class_attribute(type(self.value), name, None) is None:
            descriptor = python_descriptor(self.value, name)
            if descriptor is not None:  # `cls.name`: type(d).__get__(d, None, cls), inlined
                return descriptor_get(tx, ConstantVariable(None), self, name, descriptor)
        value = static_attr(self.value, name)
        return tx.wrap(value, source, guard=self.source is not None)

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        if not isinstance(self.value, type):
            super().store_attr(tx, name, value)
        store_class_attribute(tx, self, name, value)

    def call(self, tx, args, kwargs) -> VariableTracker:
        """`cls(...)`: its metaclass's `__call__` if it is a Python function (inlined: it ends in
        `super().__call__(...)`, type's, which is `construct`), else type's: `construct`."""
        cls = self.value
        if not isinstance(cls, type):
            raise Unsupported(f"call to {describe_value(cls)}")
        meta_call = class_attribute(type(cls), "__call__", None)
        if isinstance(meta_call, types.FunctionType):
            source = AttrSource(AttrSource(self.source, "__class__"), "__call__") if self.source is not None else None
            if source is not None:  # (the class is pinned by identity; its metaclass's method is not)
                tx.output.guards.add(source, GuardKind.ID_MATCH, meta_call)
            return tx.inline_call(meta_call, [self, *args], kwargs, fn_source=source)
        if type(cls).__call__ is not type.__call__:
            raise Unsupported(f"call to {describe_value(cls)}, whose metaclass's __call__ is not Python's")
        return self.construct(tx, args, kwargs)

    def construct(self, tx, args, kwargs) -> VariableTracker:
        """`type.__call__(cls, ...)`: a new instance of the class, made as its kind is made."""
        cls = self.value
        for claims, make in _CONSTRUCTORS:  # `OrderedDict(...)`, `class Out(OrderedDict)`, types.MethodType...
            if claims(cls):
                return make(tx, cls, self.source, args, kwargs)
        # Classes of values we can fold (torch.Size, torch.device, int, ...) are built while tracing.
        if issubclass(cls, torch.Generator):
            # an RNG state of its own: made at run time (a graph break), never once while tracing
            # for every call to share, as torch._dynamo leaves it to Python too
            raise Unsupported(f"{cls.__name__}(): a random-number generator is made by Python")
        if getattr(cls, "__module__", "").split(".")[0] in ("torch", "builtins") and not _traced_like_a_users(cls):
            if cls in _MODULE_CONTAINERS and not all(a.is_python_constant() for a in (*args, *kwargs.values())):
                # nn.Sequential / nn.ModuleList of modules made in the frame (new_module.py)
                return _MODULE_CONTAINERS[cls](tx, cls, args, kwargs)
            pargs, pkwargs = constant_args(args, kwargs, f"{cls.__name__}()")
            # Built now, once: the torch RNG state is kept, since the frame may still run normally
            # (nn.Linear's init draws from it); a module that owns tensors would be shared by all
            # calls, where each call of the function makes its own.
            rng = torch.random.get_rng_state()
            try:
                value = cls(*pargs, **pkwargs)
            except Exception as e:  # raised again when the frame runs normally
                raise Unsupported(f"{cls.__name__}() raises {type(e).__name__}: {e}") from e
            finally:
                torch.random.set_rng_state(rng)
            if isinstance(value, torch.nn.Module):
                if any(True for _ in value.state_dict(keep_vars=True)):
                    raise Unsupported(f"{cls.__name__}() made in the frame owns parameters or buffers")
                if cls is not torch.nn.CrossEntropyLoss:  # torch._dynamo makes none: it calls F.cross_entropy
                    record_module_init(tx)
            tracker = tx.wrap_constant(value)
            if isinstance(tracker, NNModuleVariable) and tracker.source is None:
                # rebuilt, where it outlives the trace, as the frame made it (it owns no tensors)
                tracker.made_by = functools.partial(cls, *pargs, **pkwargs)
            if cls is torch.nn.CrossEntropyLoss:  # called as F.cross_entropy, as torch._dynamo calls it
                tracker = MadeCrossEntropyLossVariable(value, [ConstantVariable(v) for v in bound_init_arguments(
                    cls, pargs, pkwargs)])
            if cls is torch.autocast:  # its graph node takes the arguments as given (contexts.AutocastVariable)
                tracker.autocast_args = bound_init_arguments(cls, pargs, pkwargs)
            return tracker
        if is_exception_class(cls):
            return ExceptionVariable.make(cls, list(args), kwargs)
        if is_enum_lookup(cls, args, kwargs):  # `Color(2)`: the member of that value
            try:
                return tx.wrap_constant(cls(args[0].as_python_constant()))
            except ValueError as e:
                raise_symbolic(ValueError, str(e))
        if cls is collections.deque and len(args) <= 2 and set(kwargs) <= {"iterable", "maxlen"}:
            iterable = args[0] if args else kwargs.get("iterable")
            maxlen = args[1] if len(args) == 2 else kwargs.get("maxlen")
            return DequeVariable(list(iterate(tx, iterable)) if iterable is not None else [],
                                 maxlen.as_python_constant() if maxlen is not None else None)
        if issubclass(cls, tuple) and hasattr(cls, "_fields") and hasattr(cls, "_make"):
            return new_namedtuple(tx, cls, args, kwargs)
        if is_plain_class(cls):
            obj = NewObjectVariable(cls, self.source)
            obj.init_args = list(args)
            init = class_attribute(cls, "__init__", None)
            if isinstance(init, types.FunctionType):
                fn_source = AttrSource(self.source, "__init__") if self.source is not None else None
                tx.inline_call(init, [obj, *args], kwargs, fn_source=fn_source)
            elif args or kwargs:
                raise Unsupported(f"{cls.__qualname__}() takes no arguments")
            return obj
        raise Unsupported(f"call to {describe_value(cls)}")

    def unpack(self, tx) -> list[VariableTracker]:
        if isinstance(self.value, enum.EnumMeta) and type(self.value).__iter__ is enum.EnumMeta.__iter__:
            # an enum class's members, in definition order: fixed when the class statement ran
            return [tx.wrap_constant(member) for member in self.value]
        return super().unpack(tx)

    def reconstruct(self, cg) -> None:
        if self.source is not None:
            cg.load_source(self.source)
        else:
            cg.load_const(self.value)

    def describe(self) -> str:
        return describe_value(self.value)

    def __repr__(self) -> str:
        return f"PythonObjectVariable({describe_value(self.value)})"


# The lookups of a value that isn't a member enum's own classes do (Flag's makes the combination):
# deterministic, so `Color(2)` can be asked of the real class while tracing.
class DisabledFunctionVariable(PythonObjectVariable):
    """A function wrapped by pyframe.disable(): calling it breaks the graph, and it runs as plain
    Python with pyframe off."""

    def call(self, tx, args, kwargs) -> VariableTracker:
        raise Unsupported(f"call to a pyframe.disable()-wrapped function ({self.value.fn!r})")


class GraphBreakFunctionVariable(PythonObjectVariable):
    """torch._dynamo.graph_break: a break where the user asks for one, as torch._dynamo makes it."""

    def call(self, tx, args, kwargs) -> VariableTracker:
        message = args[0] if args else kwargs.get("msg")
        text = message.as_python_constant() if message is not None and message.is_python_constant() else ""
        raise Unsupported(f"torch._dynamo.graph_break() called{': ' + text if text else ''}")


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
        found = static_attribute(self.value, name, ABSENT)
        if found is ABSENT or is_unset_slot(self.value, found):  # (a slot never set: missing too)
            self._guard_missing(tx, name)
            raise_symbolic(AttributeError, f"{type(self.value).__name__!r} object has no attribute {name!r}")
        if name == "__dict__" and self.source is not None:
            return self.instance_dict_tracker(tx)
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


_MADE = itertools.count()


class NewObjectVariable(VariableTracker):
    """An instance of a user class made while tracing: `object.__new__(cls)`, then its attributes."""

    def __init__(self, cls: type, cls_source: Source | None):
        super().__init__()
        self.cls, self.cls_source = cls, cls_source
        self.attrs: dict[str, VariableTracker] = {}
        self._building = False
        self.made = next(_MADE)  # objects made earlier are rebuilt first (translator/live_values.py)
        self.init_args: list[VariableTracker] = []  # the call's positional arguments: `cls(*init_args)`

    def python_type(self) -> type:
        return self.cls

    def made_instance(self) -> tuple[type, Source | None, dict[str, VariableTracker]]:
        return self.cls, self.cls_source, self.attrs

    def identity(self) -> Any:
        return self

    def var_getattr(self, tx, name: str) -> VariableTracker:
        return getattr_protocol(tx, self, self.cls, self._class_attr_source, name)

    def _class_attr_source(self, name: str) -> Source | None:
        return AttrSource(self.cls_source, name) if self.cls_source is not None else None

    def unpack(self, tx) -> list[VariableTracker]:
        return iterate_object(tx, self, self.cls, self._class_attr_source)

    def generic_getattr(self, tx, name: str) -> VariableTracker:
        """object.__getattribute__(obj, name): every instance attribute is in `attrs`; then the
        class's (a property inlined, a function bound); `__dict__` is a live view of `attrs`. A
        name found nowhere raises AttributeError in the trace."""
        static = class_attribute(self.cls, name, _MISSING)
        if isinstance(static, property) and static.fget is not None:  # (a data descriptor: first)
            self._guard_class_member(tx, name, static)
            return tx.inline_call(static.fget, [self], {})
        descriptor = python_descriptor(self.cls, name)
        if descriptor is not None and (is_data_descriptor(descriptor) or name not in self.attrs):
            # (pinned where the class's dict holds it: `C.name` would call its __get__)
            return descriptor_get(tx, self, PythonObjectVariable(self.cls, self.cls_source), name, descriptor)
        if name in self.attrs:
            return self.attrs[name]
        stored = tx.side_effects.load_class_attr(self.cls, name)
        if stored is not None:  # a class attribute the trace assigned (`Cls.count += 1`)
            return stored
        if name == "__class__":
            return PythonObjectVariable(self.cls, self.cls_source)
        if isinstance(static, types.FunctionType):
            self._guard_class_member(tx, name, static)
            return BoundMethodVariable(self, name)
        if name == "__dict__" and isinstance(static, types.GetSetDescriptorType):
            return InstanceDictVariable(self)
        member = next((vars(k)[name] for k in self.cls.__mro__ if name in vars(k)), None)
        if isinstance(member, types.MemberDescriptorType):  # a slot never set (its class's layout is fixed)
            raise_symbolic(AttributeError, f"{self.cls.__name__!r} object has no attribute {name!r}")
        if isinstance(member, types.GetSetDescriptorType):
            # `__weakref__`: a descriptor of the instances (read from the class, it is something else)
            raise Unsupported(f"attribute {name!r} of a {self.cls.__qualname__} made while tracing")
        if static is _MISSING or not any(name in vars(k) for k in self.cls.__mro__):
            if hasattr(self.cls, name):  # (the metaclass's: not an attribute of the instances)
                raise Unsupported(f"attribute {name!r} of a {self.cls.__qualname__} made while tracing")
            if self.cls_source is not None:  # the class must keep lacking it
                tx.output.guards.add(AttrSource(self.cls_source, name), GuardKind.HASATTR_MATCH, False)
            raise_symbolic(AttributeError, f"{self.cls.__name__!r} object has no attribute {name!r}")
        source = AttrSource(self.cls_source, name) if self.cls_source is not None else None
        value = static_attr(self.cls, name)
        if isinstance(value, (types.MethodDescriptorType, types.WrapperDescriptorType)):
            # a builtin's method in the class's dict (`push = list.append`): bound to the instance
            return tx.wrap(value, source).bind_to_instance(tx, self)
        return tx.wrap(value, source)

    def _guard_class_member(self, tx, name: str, member: Any) -> None:
        """The class (read from the frame) still holds `member` (a function, a property) under
        name: `C.act = ...` or a base's patched after compiling recompiles. (`C.name` of a
        function or a property is the object itself.)"""
        if self.cls_source is not None:
            tx.output.guards.add(AttrSource(self.cls_source, name), GuardKind.ID_MATCH, member)

    def generic_setattr(self, tx, name: str, value: VariableTracker) -> None:
        setter = property_setter(self.cls, name)
        if setter is not None:  # `obj.scale = v` through a property: its setter inlined
            self._guard_class_member(tx, name, class_attribute(self.cls, name, None))
            tx.inline_call(setter, [self, value], {})
            return
        descriptor = python_descriptor(self.cls, name, setter=True)
        if descriptor is not None:
            descriptor_set(tx, self, PythonObjectVariable(self.cls, self.cls_source), name, descriptor, value)
            return
        check_plain_store(self.cls, name, own_setattr_ran=True)
        tx.side_effects.note()
        realize_stored(tx, value)
        self.attrs[name] = value

    def delete_attr(self, tx, name: str) -> None:
        delattr_protocol(tx, self, self.cls, self._class_attr_source, name)

    def generic_delattr(self, tx, name: str) -> None:
        """object.__delattr__(obj, name): out of the instance dict (an AttributeError in the trace
        if it is not there)."""
        check_plain_delete(self.cls, name)
        if name not in self.attrs:
            raise_symbolic(AttributeError, name)
        tx.side_effects.note()
        del self.attrs[name]

    def call_method(self, tx, name, args, kwargs) -> VariableTracker:
        method = class_attribute(self.cls, name, None)
        if name not in self.attrs and isinstance(method, types.FunctionType):
            self._guard_class_member(tx, name, method)
            fn_source = AttrSource(self.cls_source, name) if self.cls_source is not None else None
            return tx.inline_call(method, [self, *args], kwargs, fn_source=fn_source)
        return self.var_getattr(tx, name).call(tx, args, kwargs)

    def call(self, tx, args, kwargs) -> VariableTracker:
        return self.call_method(tx, "__call__", args, kwargs)

    def getitem(self, tx, key: VariableTracker) -> VariableTracker:
        """`obj[key]`: the class's __getitem__, inlined."""
        if not isinstance(class_attribute(self.cls, "__getitem__", None), types.FunctionType):
            raise Unsupported(f"subscript of a {self.cls.__qualname__}")
        return self.call_method(tx, "__getitem__", [key], {})

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        setattr_protocol(tx, self, self.cls, self._class_attr_source, name, value)

    def reconstruct(self, cg) -> None:
        if self._building:
            raise Unsupported(f"a {self.cls.__qualname__} made while tracing refers to itself")

        def build() -> None:
            self._building = True
            cg.push_null()
            cg.load_const(object.__new__)
            if self.cls_source is not None:
                cg.load_source(self.cls_source)
            else:
                cg.load_const(self.cls)
            cg.call(1)
            if self.cls.__setattr__ is not object.__setattr__:  # the class's own ran in the trace
                store_raw_attributes(cg, self.cls, self.attrs)
            else:
                for name, value in self.attrs.items():
                    value.reconstruct(cg)
                    cg.emit("COPY", 2)
                    cg.emit("STORE_ATTR", name)
            self._building = False

        cg.rebuild_once(self, build)

    def __repr__(self) -> str:
        return f"NewObjectVariable({self.cls.__qualname__})"


def store_raw_attributes(cg, cls: type, attrs: dict[str, VariableTracker]) -> None:
    """Replay `object.__setattr__(obj, name, value)` for each attribute of an object made while
    tracing (the object on top of the stack, left there). Where every one of those stores lands
    in the instance dict (no data descriptor of the class takes any of the names, and `__dict__`
    is the layout's own), it is one store of the whole dict, in the same order:
    `object.__setattr__(obj, '__dict__', {name: value, ...})`, a fraction of the time of one call
    per attribute (a Hugging Face ModelOutput has six)."""
    whole_dict = len(attrs) > 1 and type(mro_lookup(cls, "__dict__")) is types.GetSetDescriptorType and not any(
        is_data_descriptor(mro_lookup(cls, name)) for name in attrs)
    if whole_dict:
        cg.push_null()
        cg.load_const(object.__setattr__)
        cg.emit("COPY", 3)  # the object, below the NULL and the method
        cg.load_const("__dict__")
        for value in attrs.values():
            value.reconstruct(cg)
        cg.load_const(tuple(attrs))
        cg.emit("BUILD_CONST_KEY_MAP", len(attrs))
        cg.call(3)
        cg.emit("POP_TOP")
        return
    for name, value in attrs.items():
        cg.push_null()
        cg.load_const(object.__setattr__)
        cg.emit("COPY", 3)
        cg.load_const(name)
        value.reconstruct(cg)
        cg.call(3)
        cg.emit("POP_TOP")



class InstanceDictVariable(DictVariable):
    """`obj.__dict__` / `vars(obj)` of an object made while tracing: a live view of its
    attributes (the same dict of trackers: a store through either is seen through both)."""

    def __init__(self, owner: NewObjectVariable):
        super().__init__({})
        self.owner = owner
        self.items = owner.attrs

    def rebuilt_from(self) -> list[VariableTracker]:
        return [self.owner]

    def reconstruct(self, cg) -> None:
        self.owner.reconstruct(cg)
        cg.emit("LOAD_ATTR", "__dict__")

    def __repr__(self) -> str:
        return f"InstanceDictVariable(of {self.owner!r})"

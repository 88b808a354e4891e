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
from ...source import AttrSource, Source
from .base import BoundMethodVariable, VariableTracker, class_attribute, constant_args, mro_lookup
from .iterators import iterate
from .constant import ConstantVariable
from .dicts import DictVariable
from .lists import DequeVariable
from .namedtuples import new_namedtuple
from .exceptions import ExceptionVariable, is_exception_class, raise_symbolic
from .partials import PartialVariable
from .nn_module import MadeCrossEntropyLossVariable, NNModuleVariable, record_module_init
from .descriptions import describe_value
from .attribute_protocol import (
    check_plain_delete, check_plain_store, delattr_protocol, descriptor_get, descriptor_set, getattr_protocol,
    iterate_object, metaclass_getattr, property_setter, python_descriptor, realize_stored, setattr_protocol,
    store_class_attribute,
)
from .static_lookup import (
    bound_init_arguments, is_data_descriptor, is_enum_lookup, is_plain_class, static_attr,
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
        if is_lru_cache_method(static):
            self._guard_class_member(tx, name, static)
            return bind_lru_cache_method(tx, static, self)
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


def is_lru_cache_method(static: Any) -> bool:
    """A function wrapped by functools.lru_cache stored on a class (transformers' Logger.warning_once):
    the wrapper is a descriptor that binds like the function it wraps."""
    return isinstance(static, functools._lru_cache_wrapper) and \
        isinstance(getattr(static, "__wrapped__", None), types.FunctionType)


def bind_lru_cache_method(tx, wrapper: Any, obj: VariableTracker) -> VariableTracker:
    """`obj.method` for an lru_cache-wrapped function of obj's class: the wrapper with obj as its
    first argument; a call traces the wrapped function, the cache ignored (LruCacheWrapperVariable)."""
    return PartialVariable(tx.wrap(wrapper, None, guard=False), [obj], {})


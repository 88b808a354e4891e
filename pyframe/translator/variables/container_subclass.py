"""Instances of list, tuple, set and frozenset subclasses, and of int, float and str subclasses:
user objects with a builtin value inside.

`class Stack(list)` with a `push` method, `class Tags(set)` overriding `add`, `class Point(tuple)`
with a property: each instance is a user object (attributes, Python methods, operators the class
defines, all inlined as for any user object: UserObjectVariable and NewObjectVariable, which the
classes here extend) and a container of its base type, whose tracker (`base_var`: a ListVariable,
TupleVariable or SetVariable) holds its items.

What the class does not define in Python is the base's: `obj.append(x)`, `obj[i]`, `len(obj)`,
`x in obj`, `obj | other`, iteration, and the base's method reached past the class
(`super().append(x)`, `list.append(obj, x)`: builtin_descriptors.py) are done on `base_var`, with
CPython's semantics (the base's binary operators make a plain list, tuple or set; `obj += [...]` on
a list subclass extends it and keeps the object). dict subclasses have their own
module (dict_subclass.py): their base methods call each other through the subclass.

An instance made while tracing is built for real only if it outlives the trace, by the base's
`__new__` and its own `extend`/`update` (the subclass's overrides already ran in the trace). One
read from the frame is guarded by type and length (a list or tuple, items read by the base's own
indexing) or by type and value (a set of constants); the trace does not mutate it.

An int, float or str subclass (`class Idx(int)`, `class Tag(str)`) holds a constant (`base_var`: a
ConstantVariable), given by the base's `__new__`: the base's methods and operators compute on it
(they make plain ints, floats and strs, as CPython's do); one read from the frame is guarded by type
and value.
"""
from __future__ import annotations

import types
from typing import Any, Sequence

from ...exc import Unsupported
from ...source import AttrSource, Source
from .base import BoundMethodVariable, VariableTracker, class_attribute, has_plain_metaclasses
from .builtin_methods import call_on_plain_value
from .constant import ConstantVariable
from .descriptions import describe_value
from .dict_keys import ObjectKey
from .exceptions import raise_symbolic
from .iterators import ListIteratorVariable, iterate
from .lists import ListVariable, TupleVariable
from .frame_objects import UserObjectVariable
from .objects import NewObjectVariable, register_constructor
from .sets import SetVariable, build_set

_SCALARS = (int, float, str)
_BASES = (list, tuple, set, frozenset, *_SCALARS)
# What reads an int, float or str as the builtin value (torch's argument parsing, format())
_CONVERSIONS = ("__index__", "__int__", "__float__", "__str__", "__repr__", "__format__")
_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement
_METHOD_DESCRIPTORS = (types.MethodDescriptorType, types.WrapperDescriptorType)


def container_base(cls: Any) -> type | None:
    """list, tuple, set, frozenset, int, float or str: the builtin class whose storage and methods instances of
    `cls` use; None unless `cls` is a Python subclass of exactly one of them (a plain metaclass, no
    other class written in C on its MRO; a named tuple is a kind of its own)."""
    if not isinstance(cls, type) or not has_plain_metaclasses(cls) or cls in _BASES or not issubclass(cls, _BASES):
        return None
    bases = [b for b in _BASES if issubclass(cls, b)]
    if len(bases) != 1 or hasattr(cls, "_fields"):
        return None
    if any(not k.__flags__ & _HEAPTYPE and k not in (bases[0], object) for k in cls.__mro__):
        return None
    return bases[0]


def _lookup(cls: type, name: str) -> tuple[type | None, Any]:
    """(the class on cls's MRO that defines `name`, what it defines), or (None, None)."""
    for klass in cls.__mro__:
        if name in vars(klass):
            return klass, vars(klass)[name]
    return None, None


class ContainerSubclassMixin:
    """What instances of list, tuple, set and frozenset subclasses add to user objects."""

    base: type
    base_var: VariableTracker

    def _init_base_var(self, items: Any) -> None:
        """`items`: the items of a container, the value itself of an int, float or str."""
        self.base = container_base(self.python_type())
        if self.base in _SCALARS:
            self.base_var = ConstantVariable(self.base(items))
        elif self.base is list:
            self.base_var = ListVariable(list(items))
        elif self.base is tuple:
            self.base_var = TupleVariable(list(items))
        else:
            self.base_var = SetVariable(set(items), None, self.base)

    def _class_source(self) -> Source | None:
        raise NotImplementedError

    def builtin_scalar(self) -> Any:
        if self.base not in _SCALARS or any(self.defines(name) for name in _CONVERSIONS):
            return None
        return self.base_var.value

    def _in_instance_dict(self, tx, name: str) -> bool:
        raise NotImplementedError

    def check_mutable(self, tx) -> None:
        """Before the trace changes the items (an instance read from the frame may not)."""

    # -- where a name leads --------------------------------------------------------------------------
    def _builtin_method(self, tx, name: str) -> bool:
        """`obj.name` is a method of the base class (not one the subclass defines, nor an
        attribute of the instance)."""
        owner, attr = _lookup(self.python_type(), name)
        return owner is self.base and isinstance(attr, _METHOD_DESCRIPTORS) and not self._in_instance_dict(tx, name)

    def generic_getattr(self, tx, name: str) -> VariableTracker:
        if self._builtin_method(tx, name):
            return BoundMethodVariable(self, name)
        return super().generic_getattr(tx, name)

    def call_method(self, tx, name, args, kwargs) -> VariableTracker:
        if self._builtin_method(tx, name):
            return self.call_builtin(tx, name, list(args), kwargs)
        return super().call_method(tx, name, args, kwargs)

    def call_special(self, tx, name: str, args: Sequence[VariableTracker]) -> VariableTracker:
        """`type(obj).name(obj, *args)`, as the interpreter calls special methods: the class's
        Python method inlined, or the base's."""
        owner, attr = _lookup(self.python_type(), name)
        if isinstance(attr, types.FunctionType):
            source = self._class_source()
            return tx.inline_call(attr, [self, *args], {},
                                  fn_source=AttrSource(source, name) if source is not None else None)
        if owner is self.base:
            return self.call_builtin(tx, name, list(args), {})
        if attr is None and name in _MISSING_ITEM_METHODS:  # (`t[0] = v` on a tuple subclass)
            raise_symbolic(TypeError, f"'{self.python_type().__name__}' object {_MISSING_ITEM_METHODS[name]}")
        raise Unsupported(f"{name} of a {self.python_type().__qualname__} is a {type(attr).__name__}")

    def defines(self, name: str) -> bool:
        """The class (or a Python base) defines the special method `name` itself."""
        return isinstance(_lookup(self.python_type(), name)[1], types.FunctionType)

    # -- the protocols -----------------------------------------------------------------------------
    def getitem(self, tx, key: VariableTracker) -> VariableTracker:
        return self.call_special(tx, "__getitem__", [key])

    def truth(self) -> bool:
        for special in ("__bool__", "__len__"):  # a Python one of those would have to be inlined
            if self.defines(special):
                raise Unsupported(f"truth of a {self.python_type().__qualname__}, which defines {special}")
        return self.base_var.truth()

    def unpack(self, tx) -> list[VariableTracker]:
        if self.defines("__iter__"):
            return list(iterate(tx, self.call_special(tx, "__iter__", [])))
        return self.base_var.unpack(tx)

    # -- the base's own methods ------------------------------------------------------------------
    def call_builtin(self, tx, name: str, args: list[VariableTracker], kwargs: dict[str, VariableTracker]) -> VariableTracker:
        """`base.name(self, *args, **kwargs)`, on the items."""
        what = f"{self.base.__name__}.{name}() on a {self.python_type().__qualname__}"
        if self.base in _SCALARS:
            return self._call_scalar_method(tx, name, args, kwargs, what)
        if name == "__init__":
            if self.base in (tuple, frozenset):  # (their __new__ took the items)
                return ConstantVariable(None)
            if kwargs or len(args) > 1:
                raise Unsupported(what)
            self.check_mutable(tx)
            self._fill(tx, args[0] if args else None)
            return ConstantVariable(None)
        if name == "__iter__" and not args and not kwargs:
            return ListIteratorVariable(list(self.base_var.unpack(tx)), type(iter(self.base())))
        if name == "__len__" and not args:
            return ConstantVariable(len(self.base_var.items))
        if name == "__getitem__" and len(args) == 1:
            return self.base_var.getitem(tx, args[0]) if hasattr(self.base_var, "getitem") else \
                self.base_var.call_method(tx, name, args, kwargs)
        if self.base in (list, set) and name not in _READS:
            self.check_mutable(tx)
            tx.side_effects.note()
        if name == "__setitem__" and self.base is list and len(args) == 2 and not kwargs \
                and args[0].is_python_constant() and isinstance(args[0].as_python_constant(), (int, slice)):
            index = args[0].as_python_constant()  # (as STORE_SUBSCR stores into a list)
            self.base_var.store_item(index, args[1].unpack(tx) if isinstance(index, slice) else args[1])
            return ConstantVariable(None)
        if name in ("__iadd__", "__ior__", "__iand__", "__isub__", "__ixor__") and len(args) == 1:
            from_base = {"__iadd__": "extend", "__ior__": "update", "__iand__": "intersection_update",
                         "__isub__": "difference_update", "__ixor__": "symmetric_difference_update"}[name]
            self.base_var.call_method(tx, from_base, args, {})
            return self
        # what the base's own method does on a plain value of the base (`tuple.__add__`, `list.index`)
        return call_on_plain_value(tx, vars(self.base)[name], self.base_var, [as_base_value(a) for a in args], kwargs)

    def _call_scalar_method(self, tx, name: str, args: list[VariableTracker], kwargs: dict[str, VariableTracker],
                            what: str) -> VariableTracker:
        """`int.name(self, ...)`, `str.name(...)`: computed on the value (the base's methods read
        nothing of the subclass, and make plain ints, floats and strs). Arguments must be
        constants, or values of such subclasses (their values)."""
        if name == "__init__":  # (object's: the base's __new__ took the value)
            return ConstantVariable(None)
        args = [as_base_value(a) for a in args]
        kwargs = {k: as_base_value(v) for k, v in kwargs.items()}
        if not all(a.is_python_constant() for a in [*args, *kwargs.values()]):
            raise Unsupported(f"{what} with arguments that are not constants")
        method = getattr(self.base, name)
        try:
            result = method(self.base_var.value, *(a.as_python_constant() for a in args),
                            **{k: v.as_python_constant() for k, v in kwargs.items()})
        except Exception as e:
            raise Unsupported(f"{what} raises {type(e).__name__}: {e}") from e
        return tx.wrap_constant(result)

    def _fill(self, tx, iterable: VariableTracker | None) -> None:
        """list.__init__ / set.__init__: the items of `iterable` (a list's cleared first)."""
        if self.base is list:
            self.base_var.items[:] = list(iterate(tx, iterable)) if iterable is not None else []
        else:
            self.base_var.values = build_set(tx, set, iterable).values

    def held(self) -> list[VariableTracker]:
        """The items (values of the trace, rebuilt with the instance)."""
        if self.base in _SCALARS:
            return []
        if isinstance(self.base_var, SetVariable):
            return self.base_var.held()
        return list(self.base_var.items)


# What Python's TypeError says of an item operation the type has no method for.
_MISSING_ITEM_METHODS = {"__setitem__": "does not support item assignment",
                         "__delitem__": "doesn't support item deletion"}

# Methods of the bases that only read.
_READS = {"__getitem__", "__len__", "__contains__", "__iter__", "count", "index", "copy", "union",
          "intersection", "difference", "symmetric_difference", "issubset", "issuperset", "isdisjoint",
          "__add__", "__mul__", "__or__", "__and__", "__sub__", "__xor__", "__eq__", "__ne__", "__lt__",
          "__le__", "__gt__", "__ge__"}


class UserContainerObjectVariable(ContainerSubclassMixin, UserObjectVariable):
    """An instance of a list, tuple, set or frozenset subclass read from the frame."""

    def __init__(self, value: Any, items: list[Any], source: Source | None = None):
        super().__init__(value, source)
        self._init_base_var(items)

    def _class_source(self) -> Source | None:
        return AttrSource(self.source, "__class__") if self.source is not None else None

    def _in_instance_dict(self, tx, name: str) -> bool:
        return tx.side_effects.load_attr(self, name) is not None or name in getattr(self.value, "__dict__", {})

    def check_mutable(self, tx) -> None:
        """A list subclass's items are replayed after the graph (side_effects.py:
        `list.__setitem__(obj, slice(None), items)`); a set subclass's are not modelled."""
        if self.base is list and self.source is not None:
            tx.side_effects.mutate(self)
            return
        raise Unsupported(f"mutation of the items of a {type(self.value).__qualname__} that outlives the frame")

    def __repr__(self) -> str:
        where = f" from {self.source.name()}" if self.source is not None else ""
        return f"UserContainerObjectVariable({type(self.value).__qualname__}{where})"


class NewContainerObjectVariable(ContainerSubclassMixin, NewObjectVariable):
    """An instance of a list, tuple, set or frozenset subclass made while tracing."""

    def __init__(self, cls: type, cls_source: Source | None, items: list[Any]):
        super().__init__(cls, cls_source)
        self._init_base_var(items)

    @classmethod
    def make(cls, tx, klass: type, klass_source: Source | None, args, kwargs) -> VariableTracker:
        """`klass(*args, **kwargs)`: __new__ (the class's, inlined, or the base's: a tuple's, a
        frozenset's and a scalar's take the value), then, if it made an instance of klass,
        __init__ (the class's, inlined, or the base's), as type.__call__ does."""
        new = class_attribute(klass, "__new__", None)
        if isinstance(new, staticmethod) and isinstance(new.__func__, types.FunctionType):
            fn_source = AttrSource(klass_source, "__new__") if klass_source is not None else None
            klass_var = tx.wrap(klass, klass_source, guard=False)
            obj = tx.inline_call(new.__func__, [klass_var, *args], kwargs, fn_source=fn_source)
            if not (isinstance(obj, ContainerSubclassMixin) and issubclass(obj.python_type(), klass)):
                return obj  # (type.__call__ runs no __init__ then)
        else:
            obj = cls.new(tx, klass, klass_source, args, kwargs)
        init = class_attribute(klass, "__init__", None)
        if isinstance(init, types.FunctionType):
            fn_source = AttrSource(klass_source, "__init__") if klass_source is not None else None
            tx.inline_call(init, [obj, *args], kwargs, fn_source=fn_source)
        else:
            obj.call_builtin(tx, "__init__", list(args), kwargs)
        return obj

    @classmethod
    def new(cls, tx, klass: type, klass_source: Source | None, args, kwargs) -> "NewContainerObjectVariable":
        """`base.__new__(klass, *args, **kwargs)`: a new instance, holding the value a tuple's,
        frozenset's or scalar's __new__ takes from its argument (a list or set: no items yet)."""
        base = container_base(klass)
        items: Any = []
        if base in _SCALARS:  # int(...), float(...), str(...) of constants (or of such subclasses' values)
            base_args = [as_base_value(a) for a in args]
            if kwargs or not all(a.is_python_constant() for a in base_args):
                raise Unsupported(f"{klass.__qualname__}() with arguments that are not constants")
            try:
                items = base(*(a.as_python_constant() for a in base_args))
            except Exception as e:  # (eager raises it: `Idx("x")`)
                raise Unsupported(f"{klass.__qualname__}() raises {type(e).__name__}: {e}") from e
        elif base in (tuple, frozenset):
            if len(args) > 1 or kwargs:
                raise Unsupported(f"{klass.__qualname__}() with {len(args)} positional arguments")
            if args and base is tuple:
                items = list(iterate(tx, args[0]))
            elif args:
                items = list(build_set(tx, frozenset, args[0]).values)
        return cls(klass, klass_source, items)

    def _class_source(self) -> Source | None:
        return self.cls_source

    def _in_instance_dict(self, tx, name: str) -> bool:
        return name in self.attrs

    def reconstruct(self, cg) -> None:
        if self._building:
            raise Unsupported(f"a {self.cls.__qualname__} made while tracing refers to itself")

        def build() -> None:  # make_instance(cls, (items...), {attributes})
            self._building = True
            cg.push_null()
            cg.load_const(make_instance)
            if self.cls_source is not None:
                cg.load_source(self.cls_source)
            else:
                cg.load_const(self.cls)
            if self.base in _SCALARS:
                cg.load_const(self.base_var.value)
            elif isinstance(self.base_var, SetVariable):
                for key in self.base_var.values:
                    key.reconstruct(cg) if isinstance(key, ObjectKey) else cg.load_const(key)
                cg.emit("BUILD_TUPLE", len(self.base_var.values))
            else:
                for item in self.base_var.items:
                    item.reconstruct(cg)
                cg.emit("BUILD_TUPLE", len(self.base_var.items))
            for key, value in self.attrs.items():
                cg.load_const(key)
                value.reconstruct(cg)
            cg.emit("BUILD_MAP", len(self.attrs))
            cg.call(3)
            self._building = False

        cg.rebuild_once(self, build)

    def __repr__(self) -> str:
        return f"NewContainerObjectVariable({self.cls.__qualname__})"


def as_base_value(vt: VariableTracker) -> VariableTracker:
    """An operand of a builtin operation the subclass does not define: its items as the base's."""
    return vt.base_var if isinstance(vt, ContainerSubclassMixin) else vt


def is_constructible(cls: type) -> bool:
    """`cls(...)` can be traced: a subclass of one of the bases whose instances the base's __new__
    makes, or whose own __new__ is a Python function (inlined: it calls the base's)."""
    base = container_base(cls)
    if base is None:
        return False
    new = class_attribute(cls, "__new__", None)
    return cls.__new__ is base.__new__ or (isinstance(new, staticmethod) and isinstance(new.__func__, types.FunctionType))


class BaseNewVariable(VariableTracker):
    """`super().__new__` in the `__new__` of a subclass of one of the bases, reaching the base's:
    `base.__new__(klass, *args)` makes the instance (the subclass's __init__ runs after, from
    the class call)."""

    def __init__(self, base: type):
        super().__init__()
        self.base = base

    def call(self, tx, args, kwargs) -> VariableTracker:
        if not args or not args[0].is_python_constant():
            raise Unsupported(f"{self.base.__name__}.__new__ without a class")
        klass = args[0].as_python_constant()
        if container_base(klass) is not self.base:
            raise Unsupported(f"{self.base.__name__}.__new__({describe_value(klass)})")
        return NewContainerObjectVariable.new(tx, klass, args[0].source, list(args[1:]), kwargs)


# -- what the transformed code calls ----------------------------------------------------------------

def make_instance(cls: type, items: tuple, attrs: dict) -> Any:
    """An instance of a container subclass made while tracing, with the items and attributes the
    trace gave it: nothing of the subclass's own (`__init__`, `append`, `__setattr__`) runs again."""
    base = container_base(cls)
    if base in (tuple, frozenset, *_SCALARS):  # (`items`: the value itself, for int, float and str)
        obj = base.__new__(cls, items)
    else:
        obj = base.__new__(cls)
        (list.extend if base is list else set.update)(obj, items)
    for name, value in attrs.items():
        object.__setattr__(obj, name, value)
    return obj


# `class Stack(list)` called in the trace (objects.py asks).
register_constructor(is_constructible, NewContainerObjectVariable.make)

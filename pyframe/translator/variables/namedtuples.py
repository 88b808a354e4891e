"""Named tuples (`collections.namedtuple` and `typing.NamedTuple` classes): tuples with fields.

Their methods (`_replace`, `_asdict`) are recognized by their code objects, the ones
collections.namedtuple generates for every class, and done on the tracker; `_make` is inlined, its
`tuple.__new__(cls, iterable)` making the instance (`tuple_new`). Methods and properties a class
defines itself (`class Point(NamedTuple): def norm(self): ...`) are inlined.

`collections.namedtuple(...)` called in the frame with constant arguments makes its class while
tracing, as torch._dynamo does (NamedTupleFactoryVariable). Each call of the function makes a new
class, so the one made while tracing must not outlive the trace: neither it nor an instance of it
is rebuilt in the transformed code (a graph break there instead).
"""
from __future__ import annotations

import collections
import inspect
import types
import weakref
from typing import Any

from ...exc import Unsupported
from ...source import AttrSource, Source
from .base import BoundMethodVariable, VariableTracker, class_attribute
from .constant import ConstantVariable, is_constant_value
from .dicts import DictVariable
from .exceptions import raise_symbolic
from .iterators import iterate
from .lists import TupleVariable


# The classes collections.namedtuple made while tracing (see the module docstring).
_MADE_IN_TRACE: "weakref.WeakSet[type]" = weakref.WeakSet()


def made_in_trace(cls: type) -> bool:
    return cls in _MADE_IN_TRACE


_NAMEDTUPLE_CODES = {name: getattr(collections.namedtuple("_Probe", "a"), name).__code__
                     for name in ("_replace", "_asdict")}


class NamedTupleVariable(TupleVariable):
    """A namedtuple or a structseq (torch.return_types.max: `.values`, `.indices`)."""

    def __init__(self, items: list[VariableTracker], tuple_type: type, source: Source | None = None):
        super().__init__(items, source)
        self.container_type = tuple_type
        self.fields = tuple(getattr(tuple_type, "_fields", None) or tuple_type.__match_args__)

    def as_python_constant(self) -> Any:
        if made_in_trace(self.container_type):
            raise Unsupported(f"an instance of {self.container_type.__qualname__}, a class made while tracing")
        values = [v.as_python_constant() for v in self.items]
        return self.container_type(*values) if hasattr(self.container_type, "_fields") else self.container_type(values)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name in self.fields:
            return self.items[self.fields.index(name)]
        if name in ("_fields", "__match_args__", "n_fields", "n_sequence_fields") and "__dict__" not in dir(self.container_type):
            value = getattr(self.container_type, name, None)  # what the class says (no instance can override it)
            if is_constant_value(value):
                return ConstantVariable(value)
        own = self._own_attribute(name)
        if isinstance(own, property) and isinstance(own.fget, types.FunctionType):
            return tx.inline_call(own.fget, [self], {})  # (the class is guarded; as objects.py does)
        if isinstance(own, types.FunctionType):
            return BoundMethodVariable(self, name)
        return super().var_getattr(tx, name)

    def _own_attribute(self, name: str) -> Any:
        """What a class of the user's (below tuple in the MRO, not namedtuple's generated code)
        holds under `name`: a function or a property to inline; None for the rest."""
        attr = class_attribute(self.container_type, name, None)
        if isinstance(attr, types.FunctionType) and attr.__code__ in _NAMEDTUPLE_CODES.values():
            return None
        if getattr(attr, "__module__", None) == "collections":  # _make and the generated others
            return None
        return attr if isinstance(attr, (types.FunctionType, property)) else None

    def _class_attr_source(self, name: str) -> Source | None:
        return AttrSource(AttrSource(self.source, "__class__"), name) if self.source is not None else None

    def getitem(self, tx, key: VariableTracker) -> VariableTracker:
        result = super().getitem(tx, key)
        return TupleVariable(result.items) if isinstance(result, NamedTupleVariable) else result

    def call_method(self, tx, name, args, kwargs) -> VariableTracker:
        # collections.namedtuple's own _replace and _asdict (one code object for every namedtuple
        # class; a class that overrides them is inlined as any method)
        method = getattr(self.container_type, name, None)
        code = getattr(method, "__code__", None)
        if code is _NAMEDTUPLE_CODES["_replace"] and not args:
            unknown = [k for k in kwargs if k not in self.fields]
            if unknown:
                raise_symbolic(ValueError, f"Got unexpected field names: {unknown!r}")
            items = [kwargs.get(f, item) for f, item in zip(self.fields, self.items)]
            return NamedTupleVariable(items, self.container_type)
        if code is _NAMEDTUPLE_CODES["_asdict"] and not args and not kwargs:
            return DictVariable(dict(zip(self.fields, self.items)))
        own = self._own_attribute(name)
        if isinstance(own, types.FunctionType):
            return tx.inline_call(own, [self, *args], kwargs, fn_source=self._class_attr_source(name))
        return super().call_method(tx, name, args, kwargs)

    def reconstruct(self, cg) -> None:
        if self.source is not None:
            super().reconstruct(cg)
            return
        if made_in_trace(self.container_type):  # (each call makes its own class: module docstring)
            raise Unsupported(f"an instance of {self.container_type.__qualname__}, a class made while tracing, "
                              "outlives the trace")
        # A namedtuple is built from its fields (`cls._make(items)`), a structseq from one sequence.
        make = getattr(self.container_type, "_make", None) if hasattr(self.container_type, "_fields") else None

        def build() -> None:
            if make is not None:
                cg.push_null()
                cg.load_const(make)
            for item in self.items:
                item.reconstruct(cg)
            if make is not None:
                cg.emit("BUILD_TUPLE", len(self.items))
                cg.call(1)
            else:
                cg.build(self.container_type, len(self.items))

        # Once: an instance of a subclass has a __dict__ (an attribute set on it at a graph break
        # must be on the object the rest of the frame sees), and `is` holds between its uses.
        cg.rebuild_once(self, build)


def new_namedtuple(tx, cls: type, args, kwargs) -> VariableTracker:
    """`cls(*args, **kwargs)` for a namedtuple class: its fields bound as its __new__ binds them."""
    parameters = [inspect.Parameter(f, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                    default=cls._field_defaults.get(f, inspect.Parameter.empty))
                  for f in cls._fields]
    try:
        bound = inspect.Signature(parameters).bind(*args, **kwargs)
    except TypeError as e:
        raise Unsupported(f"{cls.__qualname__}(): {e}") from e
    bound.apply_defaults()
    items = [value if isinstance(value, VariableTracker) else tx.wrap_constant(value)
             for value in bound.arguments.values()]
    return NamedTupleVariable(items, cls)


def tuple_new(tx, cls: VariableTracker, iterable: VariableTracker | None = None) -> VariableTracker:
    """`tuple.__new__(cls, iterable)` (a namedtuple's `_make` calls it): a tuple, or an instance
    of a namedtuple class holding the items as its fields."""
    klass = cls.as_python_constant() if cls.is_python_constant() else None
    items = list(iterate(tx, iterable)) if iterable is not None else []
    if klass is tuple:
        return TupleVariable(items)
    if isinstance(klass, type) and issubclass(klass, tuple) and hasattr(klass, "_fields") and hasattr(klass, "_make"):
        return NamedTupleVariable(items, klass)  # (what construct calls a namedtuple class)
    raise Unsupported(f"tuple.__new__({cls.describe()})")


class NamedTupleFactoryVariable(VariableTracker):
    """`collections.namedtuple` (read from the frame, guarded by identity): called with
    constant arguments, the class is made now (module docstring)."""

    def real_object(self) -> Any:
        return collections.namedtuple

    def python_type(self) -> type:
        return types.FunctionType

    def as_python_constant(self) -> Any:
        return collections.namedtuple

    def call(self, tx, args, kwargs) -> VariableTracker:
        if not all(v.is_python_constant() for v in [*args, *kwargs.values()]):
            raise Unsupported("collections.namedtuple() with arguments that are not constants")
        options = {k: v.as_python_constant() for k, v in kwargs.items()}
        # (its __module__ is the caller's, which namedtuple finds with sys._getframe: here, pyframe's)
        options.setdefault("module", tx.f_globals.get("__name__", "__main__"))
        try:
            cls = collections.namedtuple(*(a.as_python_constant() for a in args), **options)
        except (TypeError, ValueError) as e:
            raise_symbolic(type(e), str(e))
        _MADE_IN_TRACE.add(cls)
        return tx.wrap(cls, None, guard=False)

    def __repr__(self) -> str:
        return "NamedTupleFactoryVariable()"

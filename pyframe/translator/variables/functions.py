"""Python functions: user functions read from the frame, and functions made inside it.

Calls are inlined into the caller's trace. A function made in the frame (a nested def, a lambda,
a comprehension: 3.11 compiles those as nested functions) closes over cells of the frame; here a
cell is a reference to the frame's symbolic local, so the inner function sees later assignments
and `nonlocal` writes land in the outer frame, as in Python.
"""
from __future__ import annotations

import enum
import inspect
import types
import warnings
from typing import Any

from ...exc import Unsupported
from ...guards import GuardKind
from ...source import AttrSource, ItemSource, Source
from .base import BoundMethodVariable, VariableTracker, constant_args
from .class_reads import CLASS_READS, call_reading_class
from .constant import ConstantVariable, is_constant_value
from .dicts import DictVariable
from .lists import TupleVariable
from .exceptions import raise_symbolic


class UserFunctionVariable(VariableTracker):
    def __init__(self, fn: types.FunctionType, source: Source | None = None):
        super().__init__(source)
        self.fn = fn

    def real_object(self) -> Any:
        return self.fn

    def python_type(self) -> type:
        return types.FunctionType

    def as_python_constant(self) -> Any:
        return self.fn

    def call(self, tx, args, kwargs) -> VariableTracker:
        if self.fn in CLASS_READS:  # `dataclasses.fields(obj)`: repeated per class (class_reads.py)
            return call_reading_class(tx, self, args, kwargs)
        return tx.inline_call(self.fn, list(args), kwargs, fn_source=self.source)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        """Its names (`fn.__name__`: fixed for a function guarded by identity, as torch._dynamo reads
        them); anything else it holds (`__code__`, `__defaults__`, `__wrapped__`, a decorator's
        marker) read through its source and guarded, so that rebinding it recompiles; a missing
        attribute is an AttributeError in the traced program, its absence guarded."""
        stored = tx.side_effects.load_attr(self, name)
        if stored is not None:  # `fn.calls = 0` earlier in the trace
            return stored
        if name in _FUNCTION_NAME_ATTRS and is_constant_value(getattr(self.fn, name)):
            return ConstantVariable(getattr(self.fn, name))
        source = self.python_function(tx)[1]
        if name == "__dict__" and tx.side_effects.stores_to(self):
            raise Unsupported(f"the __dict__ of function {self.fn.__qualname__} after the trace assigned "
                              f"its attributes")
        if name == "__closure__":  # (its length is its code's: guarded)
            if self.fn.__closure__ is None:
                return ConstantVariable(None)
            closure = AttrSource(source, "__closure__")
            return TupleVariable([tx.cell_tracker(cell, ItemSource(closure, i))
                                  for i, cell in enumerate(self.fn.__closure__)])
        if name in _GUARDED_FUNCTION_ATTRS or name in self.fn.__dict__:
            return tx.wrap(getattr(self.fn, name), AttrSource(source, name))
        if not hasattr(self.fn, name):
            tx.output.guards.add(AttrSource(source, name), GuardKind.HASATTR_MATCH, False)
            raise_symbolic(AttributeError, f"'function' object has no attribute '{name}'")
        return super().var_getattr(tx, name)

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        """`fn.calls = 0`: an attribute of its own, in its __dict__, recorded and replayed after the
        graph. What makes the function what it is (`__code__`, `__defaults__`...) is not traced."""
        if hasattr(types.FunctionType, name) or name in _GUARDED_FUNCTION_ATTRS:
            raise Unsupported(f"assignment to attribute {name!r} of function {self.fn.__qualname__}")
        tx.side_effects.store_attr(self, name, value)

    def python_function(self, tx) -> tuple[types.FunctionType, Source, bool]:
        """Its attributes are read through its source; a function reached without one (returned by
        a call, held by an object made while tracing) through a global of the compiled frame
        holding it."""
        return self.fn, self.source if self.source is not None else tx.root.install_global(self.fn), False

    def reconstruct(self, cg) -> None:
        # A function that exists outside the trace (found through a module imported in the frame,
        # say): the same object, as a constant of the transformed code.
        if self.source is not None:
            cg.load_source(self.source)
        else:
            cg.load_const(self.fn)

    def describe(self) -> str:
        return f"function {self.fn.__qualname__}"

    def __repr__(self) -> str:
        return f"UserFunctionVariable({self.fn.__qualname__})"


_FUNCTION_NAME_ATTRS = ("__name__", "__qualname__", "__module__", "__doc__")
# What a function holds besides its __dict__, read through its source (its globals are not: a
# module's whole namespace; `fn.__globals__[name]` is how globals are read, see global_source).
_GUARDED_FUNCTION_ATTRS = ("__code__", "__defaults__", "__kwdefaults__", "__annotations__", "__dict__")


class CodeObjectVariable(VariableTracker):
    """A code object (`fn.__code__`), guarded by identity: its `co_*` attributes cannot change, so
    they are constants (transformers' decorators find argument names in `co_varnames`)."""

    def __init__(self, code: types.CodeType, source: Source | None = None):
        super().__init__(source)
        self.code = code

    def real_object(self) -> Any:
        return self.code

    def python_type(self) -> type:
        return types.CodeType

    def as_python_constant(self) -> Any:
        return self.code

    def var_getattr(self, tx, name: str) -> VariableTracker:
        value = getattr(self.code, name, None)
        if name.startswith("co_") and is_constant_value(value):
            return ConstantVariable(value)
        return super().var_getattr(tx, name)

    def reconstruct(self, cg) -> None:
        cg.load_const(self.code)

    def __repr__(self) -> str:
        return f"CodeObjectVariable({self.code.co_qualname})"


class CellReference(VariableTracker):
    """What LOAD_CLOSURE pushes: a cell variable of translator `owner` (or a free variable of it).
    One per (owner, name): a new function rebuilt from two closures shares their cells."""

    def __init__(self, owner: Any, name: str, free: bool):
        super().__init__()
        self.owner, self.name, self.free = owner, name, free

    def load(self) -> VariableTracker:
        return self.owner.read_free_var(self.name) if self.free else self.owner.read_local(self.name)

    def python_type(self) -> type:
        return types.CellType

    def var_getattr(self, tx, name: str) -> VariableTracker:
        """A cell of `fn.__closure__` (for a function made in the frame): `cell_contents` is the
        variable's current value."""
        if name == "cell_contents":
            return self.load()
        return super().var_getattr(tx, name)

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        if name != "cell_contents":
            raise Unsupported(f"assignment to attribute {name!r} of a cell")
        self.store(value)

    def describe(self) -> str:
        return f"the cell of variable {self.name!r}"

    def store(self, value: VariableTracker) -> None:
        self.owner.side_effects.note()  # a nonlocal write
        if self.free:
            self.owner.store_free_var(self.name, value)
        else:
            self.owner.bind_local(self.name, value)

    def target(self) -> "CellReference":
        """The reference to the variable itself: a free variable of a function made while tracing
        is the cell variable (or the free variable) of the function that made it."""
        ref = self
        while ref.free and ref.owner.parent is not None and ref.name in ref.owner.closure_refs:
            ref = ref.owner.closure_refs[ref.name]
        return ref

    def is_inlined_variable(self) -> bool:
        """A local of an inlined call: no real cell holds it, one is made if a closure escapes."""
        ref = self.target()
        return ref.owner.parent is not None and not ref.free

    def escaping_value(self) -> VariableTracker | None:
        """What the cell made for an inlined call's variable holds (None: never bound)."""
        ref = self.target()
        return ref.owner.locals.get(ref.name) if self.is_inlined_variable() else None

    def load_cell(self, cg, made: list["CellReference"]) -> None:
        """The real cell on the stack: the root frame's own (LOAD_CLOSURE), an inlined function's
        closure cell (read through its source), or a new empty cell for a variable of an inlined
        call, made once per transformed code and appended to `made` (the caller fills it once the
        function holding it exists: the variable may hold that very function)."""
        ref = self.target()
        if ref.owner.parent is None:
            cg.load_closure(ref.name, ref.free)
        elif ref.free:
            ref.owner.closure_cell(ref.name).reconstruct(cg)
        else:
            def new_cell() -> None:
                cg.push_null()
                cg.load_const(types.CellType)
                cg.call(0)
                made.append(ref)

            cg.rebuild_once(ref, new_cell)


class CellVariable(VariableTracker):
    """A real closure cell that outlives the frame (the compiled function's own, or one of an inlined
    function made elsewhere): what `fn.__closure__[i]` gives, and the target of the stores the
    trace makes to it (replayed after the graph as side effects). Its source loads the cell object
    itself."""

    def __init__(self, cell: types.CellType, source: Source | None):
        super().__init__(source)
        self.cell = cell

    def real_object(self) -> Any:
        return self.cell

    def python_type(self) -> type:
        return types.CellType

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name == "cell_contents":
            return tx.read_cell(self)
        return super().var_getattr(tx, name)

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        if name != "cell_contents":
            raise Unsupported(f"assignment to attribute {name!r} of a cell")
        tx.store_cell(self, value)

    def reconstruct(self, cg) -> None:
        cg.load_source(self.source)


class NestedFunctionVariable(VariableTracker):
    """A function made by MAKE_FUNCTION while tracing (it exists only symbolically)."""

    def __init__(self, code: types.CodeType, f_globals: dict, defaults: tuple, kwdefaults: dict,
                 closure: list[CellReference], fn_source: Source | None):
        super().__init__()
        self.code, self.f_globals = code, f_globals
        self.defaults, self._kwdefaults, self.closure = defaults, kwdefaults, closure
        self.kwdefaults_var: DictVariable | None = None  # `__kwdefaults__`, once read (stores into it count)
        self.fn_source = fn_source  # the enclosing function's: globals are read through it
        self.names: dict[str, VariableTracker] = {}  # `inner.__name__ = ...` (functools.wraps too)
        self.annotated = False  # made with annotations (not modelled: MAKE_FUNCTION drops them)
        self.foreign_globals = False  # its globals are not the compiled frame's (ops_calls.py)
        self.dict_var: DictVariable | None = None  # its __dict__ (`__wrapped__`, a marker), once given one

    @property
    def kwdefaults(self) -> dict:
        """The keyword-only defaults: `__kwdefaults__`'s items once the trace has read that dict."""
        if self.kwdefaults_var is None:
            return self._kwdefaults
        if not all(type(k) is str for k in self.kwdefaults_var.items):
            raise Unsupported(f"the __kwdefaults__ of {self.code.co_name} were given a key that is not a string")
        return dict(self.kwdefaults_var.items)

    def python_type(self) -> type:
        return types.FunctionType

    def identity(self) -> Any:
        return self

    def var_getattr(self, tx, name: str) -> VariableTracker:
        """What functools.wraps reads and gives: its names, `__annotations__`, `__dict__` and the
        attributes stored there (`__wrapped__`); a missing one is an AttributeError."""
        if name in self.names:
            return self.names[name]
        if name in ("__name__", "__qualname__"):
            return ConstantVariable(getattr(self.code, "co_" + name.strip("_")))
        if name == "__module__":
            return ConstantVariable(self.f_globals.get("__name__"))
        if name == "__code__":
            return CodeObjectVariable(self.code)
        if name == "__doc__":  # 3.11: the first constant is the docstring, or None (a lambda's too)
            doc = self.code.co_consts[0] if self.code.co_consts else None
            return ConstantVariable(doc if isinstance(doc, str) else None)
        if name == "__defaults__":  # (a tuple: immutable, rebound only by assignment)
            return TupleVariable(list(self.defaults)) if self.defaults else ConstantVariable(None)
        if name == "__kwdefaults__":
            if not self.kwdefaults:
                return ConstantVariable(None)
            if self.kwdefaults_var is None:  # the dict calls read their defaults from from now on
                self.kwdefaults_var = DictVariable(dict(self.kwdefaults))
            return self.kwdefaults_var
        if name == "__closure__":  # its cells, in co_freevars order; each reads the variable itself
            return TupleVariable(list(self.closure)) if self.closure else ConstantVariable(None)
        if name == "__annotations__" and not self.annotated:
            value = self.names[name] = DictVariable({})  # (Python makes it on first read, too)
            return value
        if name == "__dict__":
            return self.function_dict()
        if self.dict_var is not None and name in self.dict_var.items:
            return self.dict_var.items[name]
        if not hasattr(types.FunctionType, name):
            raise_symbolic(AttributeError, f"'function' object has no attribute '{name}'")
        return super().var_getattr(tx, name)

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        if name in _FUNCTION_NAME_ATTRS and value.is_python_constant() or \
                name == "__annotations__" and isinstance(value, DictVariable):
            self.names[name] = value
        elif hasattr(types.FunctionType, name) or name in _GUARDED_FUNCTION_ATTRS:
            raise Unsupported(f"assignment to attribute {name!r} of function {self.code.co_name}")
        else:  # an attribute of its own (`wrapper.__wrapped__ = func`): kept in its __dict__
            self.function_dict().store(tx, ConstantVariable(name), value)

    def function_dict(self) -> "DictVariable":
        if self.dict_var is None:
            self.dict_var = DictVariable({})
        return self.dict_var

    def signature_function(self) -> types.FunctionType:
        """A real function with this code, whose defaults are the symbolic default values."""
        cells = tuple(types.CellType() for _ in self.code.co_freevars)
        fn = types.FunctionType(self.code, self.f_globals, self.code.co_name, self.defaults or None, cells)
        fn.__kwdefaults__ = self.kwdefaults or None
        return fn

    def call(self, tx, args, kwargs) -> VariableTracker:
        return tx.inline_nested(self, list(args), kwargs)

    def reconstruct(self, cg) -> None:
        """MAKE_FUNCTION again, for real: its cells are the frame's own, holding the traced values,
        and new cells for the variables of inlined calls, filled once the function is made."""
        made: list[CellReference] = []

        def build() -> None:
            if self.foreign_globals:
                return self._build_with_its_globals(cg, made)
            flags = 0
            if self.defaults:
                for value in self.defaults:
                    value.reconstruct(cg)
                cg.emit("BUILD_TUPLE", len(self.defaults))
                flags |= 0x01
            if self.kwdefaults:
                for key, value in self.kwdefaults.items():
                    cg.load_const(key)
                    value.reconstruct(cg)
                cg.emit("BUILD_MAP", len(self.kwdefaults))
                flags |= 0x02
            if self.closure:
                for ref in self.closure:
                    ref.load_cell(cg, made)
                cg.emit("BUILD_TUPLE", len(self.closure))
                flags |= 0x08
            cg.load_const(self.code)
            cg.emit("MAKE_FUNCTION", flags)
            self._store_attributes(cg)

        cg.rebuild_once(self, build)
        for ref in made:
            value = ref.escaping_value()
            if value is not None:
                value.reconstruct(cg)
                ref.load_cell(cg, made)
                cg.emit("STORE_ATTR", "cell_contents")

    def _build_with_its_globals(self, cg, made: list[CellReference]) -> None:
        """`types.FunctionType(code, globals, None, defaults, closure)`: MAKE_FUNCTION would give
        the function the compiled frame's globals, where its own names are not found."""
        cg.push_null()
        cg.load_const(types.FunctionType)
        cg.load_const(self.code)
        cg.load_const(self.f_globals)
        cg.load_const(None)
        for value in self.defaults:
            value.reconstruct(cg)
        cg.emit("BUILD_TUPLE", len(self.defaults))
        for ref in self.closure:
            ref.load_cell(cg, made)
        cg.emit("BUILD_TUPLE", len(self.closure))
        cg.call(5)
        if self.kwdefaults:
            for key, value in self.kwdefaults.items():
                cg.load_const(key)
                value.reconstruct(cg)
            cg.emit("BUILD_MAP", len(self.kwdefaults))
            cg.emit("COPY", 2)
            cg.emit("STORE_ATTR", "__kwdefaults__")
        self._store_attributes(cg)

    def _store_attributes(self, cg) -> None:
        """Its attributes set in the trace (`__name__`, what functools.wraps copies), on the
        function on top of the stack."""
        attributes = dict(self.names)
        if self.dict_var is not None:
            attributes.update((key, value) for key, value in self.dict_var.items.items() if type(key) is str)
        for name, value in attributes.items():
            value.reconstruct(cg)
            cg.emit("COPY", 2)
            cg.emit("STORE_ATTR", name)

    def escaping_values(self) -> list[VariableTracker]:
        """The values of inlined calls it closes over: cells holding them are made if it escapes."""
        values = (ref.escaping_value() for ref in self.closure)
        return [value for value in values if value is not None]

    def describe(self) -> str:
        return f"function {self.code.co_qualname} (made in the frame)"

    def __repr__(self) -> str:
        return f"NestedFunctionVariable({self.code.co_qualname})"


class LruCacheWrapperVariable(VariableTracker):
    """A function wrapped by functools.lru_cache or functools.cache: a call traces the wrapped
    function (`__wrapped__`) and ignores the cache, as torch._dynamo does. A cached result is what
    a new call would compute unless the function is impure, so the first call at each place warns
    (not for torch's own cached helpers)."""

    def __init__(self, wrapper: Any, wrapped: VariableTracker, source: Source | None = None):
        super().__init__(source)
        self.wrapper, self.wrapped = wrapper, wrapped

    def real_object(self) -> Any:
        return self.wrapper

    def python_type(self) -> type:
        return type(self.wrapper)

    def call(self, tx, args, kwargs) -> VariableTracker:
        if not (self.wrapper.__wrapped__.__module__ or "").startswith("torch"):
            where = tx.location()
            warnings.warn(f"pyframe: the call to {self.wrapper.__wrapped__.__qualname__}, a functools.lru_cache-"
                          f"wrapped function, at {where.filename}:{where.lineno} is traced through the "
                          f"wrapped function: its cache is ignored", stacklevel=1)
        return self.wrapped.call(tx, args, kwargs)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name == "__wrapped__":
            return self.wrapped
        return self.wrapped.var_getattr(tx, name) if name in _FUNCTION_NAME_ATTRS else super().var_getattr(tx, name)

    def reconstruct(self, cg) -> None:
        """The wrapper itself (its cache is the process's, shared with every caller)."""
        if self.source is not None:
            cg.load_source(self.source)
        else:
            cg.load_const(self.wrapper)

    def __repr__(self) -> str:
        return f"LruCacheWrapperVariable({self.wrapped!r})"


class InspectSignatureVariable(VariableTracker):
    """inspect.signature itself. A call on a Python function or a bound method is answered while
    tracing, from the real function, instead of tracing inspect's own code (Parameter objects,
    mapping proxies): the signature depends only on facts the guards pin, for each function of
    the `__wrapped__` chain it follows: its code, its defaults, its keyword defaults, its
    annotations and the keys of its `__dict__` (where `__wrapped__` and `__signature__` live)."""

    def __init__(self, fn: Any, source: Source | None = None):
        super().__init__(source)
        self.fn = fn

    def real_object(self) -> Any:
        return self.fn

    def python_type(self) -> type:
        return types.FunctionType

    def as_python_constant(self) -> Any:
        return self.fn

    def call(self, tx, args, kwargs) -> VariableTracker:
        if len(args) != 1 or set(kwargs) - {"follow_wrapped"}:
            raise Unsupported("inspect.signature() with these arguments")
        follow = kwargs["follow_wrapped"].as_python_constant() if "follow_wrapped" in kwargs else True
        fn, source, bound = function_of(tx, args[0])
        _guard_signature_facts(tx, fn, source, follow)
        target = types.MethodType(fn, _BOUND_PLACEHOLDER) if bound else fn
        return InspectValueVariable(inspect.signature(target, follow_wrapped=follow))

    def reconstruct(self, cg) -> None:
        cg.load_const(self.fn)


_BOUND_PLACEHOLDER = object()  # the `self` of a bound method: its signature does not depend on it


def function_of(tx, callee: VariableTracker) -> tuple[types.FunctionType, Source, bool]:
    """The Python function behind a callable tracker (see VariableTracker.python_function)."""
    found = callee.python_function(tx)
    if found is None or not isinstance(found[0], types.FunctionType):
        raise Unsupported(f"inspect.signature() of {callee}")
    return found


def _guard_signature_facts(tx, fn: types.FunctionType, source: Source, follow: bool) -> None:
    """Guard what inspect.signature reads of `fn` (and of the functions it wraps, when followed)."""
    while True:
        if any(name in fn.__dict__ for name in ("__signature__", "_partialmethod", "__partialmethod__")):
            raise Unsupported(f"inspect.signature() of {fn.__qualname__}, which advertises its own signature")
        guards = tx.output.guards
        guards.add(AttrSource(source, "__dict__"), GuardKind.DICT_KEYS_MATCH, tuple(fn.__dict__))
        guards.add(AttrSource(source, "__code__"), GuardKind.ID_MATCH, fn.__code__)
        guards.add(AttrSource(source, "__defaults__"), GuardKind.NONE_MATCH if fn.__defaults__ is None
                   else GuardKind.ID_MATCH, fn.__defaults__)  # (a tuple: its items cannot change)
        for name in ("__kwdefaults__", "__annotations__"):
            value = getattr(fn, name)
            if value is None:
                guards.add(AttrSource(source, name), GuardKind.NONE_MATCH)
            elif all(map(_compares_plainly, value.values())):  # compared with a copy of it now
                guards.add(AttrSource(source, name), GuardKind.EQUALS_MATCH, dict(value))
            else:  # (a tensor default: `==` would not give a bool)
                raise Unsupported(f"inspect.signature() of {fn.__qualname__}: its {name} hold objects "
                                  f"a guard cannot compare")
        wrapped = fn.__dict__.get("__wrapped__")
        if not follow or wrapped is None:
            return
        if not isinstance(wrapped, types.FunctionType):
            raise Unsupported(f"inspect.signature() of a function wrapping a {type(wrapped).__name__}")
        fn, source = wrapped, AttrSource(source, "__wrapped__")
        guards.add(source, GuardKind.ID_MATCH, fn)


def _compares_plainly(value: Any) -> bool:
    """A default or annotation whose `==` gives a plain bool: constants, classes, typing's forms."""
    return is_constant_value(value) or isinstance(value, type) or \
        type(value).__module__ in ("typing", "types") or isinstance(value, enum.Enum)


# What a signature holds that is itself immutable: kept as the real objects.
_INSPECT_VALUE_TYPES = (inspect.Signature, inspect.Parameter, types.MappingProxyType,
                        type({}.keys()), type({}.values()), type({}.items()))


class InspectValueVariable(ConstantVariable):
    """An inspect.Signature computed while tracing, a Parameter of it, or its `parameters` mapping
    (a read-only proxy) and that mapping's views: immutable, so worked on as constants; what they
    hold is a constant, a class, or another of these."""

    def var_getattr(self, tx, name: str) -> VariableTracker:
        try:
            attr = getattr(self.value, name)
        except AttributeError as e:
            raise Unsupported(f"{type(self.value).__name__} has no attribute {name!r}") from e
        if callable(attr) and not isinstance(attr, type):
            return BoundMethodVariable(self, name)
        return inspect_value(tx, attr)

    def call_method(self, tx, name, args, kwargs) -> VariableTracker:
        pargs, pkwargs = constant_args(args, kwargs, f"{type(self.value).__name__}.{name}()")
        return inspect_value(tx, getattr(self.value, name)(*pargs, **pkwargs))

    def unpack(self, tx) -> list[VariableTracker]:
        return [inspect_value(tx, v) for v in self.value]

    def __repr__(self) -> str:
        return f"InspectValueVariable({self.value!r})"


def inspect_value(tx, value: Any) -> VariableTracker:
    """The tracker of a value read from a signature (a parameter's default, kind, annotation...)."""
    if is_constant_value(value) or isinstance(value, (type, enum.Enum)):
        return tx.wrap_constant(value)
    if isinstance(value, _INSPECT_VALUE_TYPES):
        return InspectValueVariable(value)
    if type(value) is tuple:
        return TupleVariable([inspect_value(tx, v) for v in value])
    raise Unsupported(f"a {type(value).__name__} read from an inspect.Signature")

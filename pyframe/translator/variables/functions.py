"""Python functions: user functions read from the frame, and functions made inside it.

Calls are inlined into the caller's trace. A function made in the frame (a nested def, a lambda,
a comprehension: 3.11 compiles those as nested functions) closes over cells of the frame; here a
cell is a reference to the frame's symbolic local, so the inner function sees later assignments
and `nonlocal` writes land in the outer frame, as in Python.
"""
from __future__ import annotations

import functools
import types
import warnings
from typing import Any

from ...exc import Unsupported
from ...source import AttrSource, ItemSource, Source
from .base import VariableTracker
from .constant import ConstantVariable, is_constant_value
from .containers import TupleVariable


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
        return tx.inline_call(self.fn, list(args), kwargs, fn_source=self.source)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        """Its names and constant attributes (`fn.__name__`, a decorator's marker): the function is
        guarded by identity, and these are not rebound in practice (torch._dynamo reads them alike)."""
        if name in _FUNCTION_NAME_ATTRS or name in self.fn.__dict__:
            value = getattr(self.fn, name)
            if is_constant_value(value):
                return ConstantVariable(value)
        if name == "__closure__" and self.source is not None:  # (its length is its code's: guarded)
            if self.fn.__closure__ is None:
                return ConstantVariable(None)
            closure = AttrSource(self.source, "__closure__")
            return TupleVariable([tx.cell_tracker(cell, ItemSource(closure, i))
                                  for i, cell in enumerate(self.fn.__closure__)])
        return super().var_getattr(tx, name)

    def reconstruct(self, cg) -> None:
        # A function that exists outside the trace (found through a module imported in the frame,
        # say): the same object, as a constant of the transformed code.
        if self.source is not None:
            cg.load_source(self.source)
        else:
            cg.load_const(self.fn)

    def __repr__(self) -> str:
        return f"UserFunctionVariable({self.fn.__qualname__})"


_FUNCTION_NAME_ATTRS = ("__name__", "__qualname__", "__module__", "__doc__")


class CellReference(VariableTracker):
    """What LOAD_CLOSURE pushes: a cell variable of translator `owner` (or a free variable of it).
    One per (owner, name): a new function rebuilt from two closures shares their cells."""

    def __init__(self, owner: Any, name: str, free: bool):
        super().__init__()
        self.owner, self.name, self.free = owner, name, free

    def load(self) -> VariableTracker:
        return self.owner.read_free_var(self.name) if self.free else self.owner.read_local(self.name)

    def store(self, value: VariableTracker) -> None:
        self.owner.side_effects.note()  # a nonlocal write
        if self.free:
            self.owner.store_free_var(self.name, value)
        else:
            self.owner.locals[self.name] = value
            self.owner.frame_values.pop(self.name, None)

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
        self.defaults, self.kwdefaults, self.closure = defaults, kwdefaults, closure
        self.fn_source = fn_source  # the enclosing function's: globals are read through it
        self.names: dict[str, VariableTracker] = {}  # `inner.__name__ = ...` (functools.wraps too)

    def python_type(self) -> type:
        return types.FunctionType

    def identity(self) -> Any:
        return self

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name in self.names:
            return self.names[name]
        if name in ("__name__", "__qualname__"):
            return ConstantVariable(getattr(self.code, "co_" + name.strip("_")))
        if name == "__module__":
            return ConstantVariable(self.f_globals.get("__name__"))
        return super().var_getattr(tx, name)

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        if name not in _FUNCTION_NAME_ATTRS or not value.is_python_constant():
            raise Unsupported(f"assignment to attribute {name!r} of function {self.code.co_name}")
        self.names[name] = value

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
            for name, value in self.names.items():
                value.reconstruct(cg)
                cg.emit("COPY", 2)
                cg.emit("STORE_ATTR", name)

        cg.rebuild_once(self, build)
        for ref in made:
            value = ref.escaping_value()
            if value is not None:
                value.reconstruct(cg)
                ref.load_cell(cg, made)
                cg.emit("STORE_ATTR", "cell_contents")

    def escaping_values(self) -> list[VariableTracker]:
        """The values of inlined calls it closes over: cells holding them are made if it escapes."""
        values = (ref.escaping_value() for ref in self.closure)
        return [value for value in values if value is not None]

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

    def __repr__(self) -> str:
        return f"LruCacheWrapperVariable({self.wrapped!r})"


class PartialVariable(VariableTracker):
    """functools.partial(func, *args, **keywords), read from the frame or made in it: a call passes
    the stored arguments first, as partial does."""

    def __init__(self, func: VariableTracker, args: list[VariableTracker],
                 keywords: dict[str, VariableTracker], source: Source | None = None):
        super().__init__(source)
        self.func, self.args, self.keywords = func, args, keywords

    def python_type(self) -> type:
        return functools.partial

    def call(self, tx, args, kwargs) -> VariableTracker:
        return self.func.call(tx, [*self.args, *args], {**self.keywords, **kwargs})

    def reconstruct(self, cg) -> None:
        if self.source is not None:
            cg.load_source(self.source)
            return
        cg.push_null()
        cg.load_const(functools.partial)
        for value in (self.func, *self.args, *self.keywords.values()):
            value.reconstruct(cg)
        if self.keywords:
            cg.emit("KW_NAMES", tuple(self.keywords))
        cg.call(1 + len(self.args) + len(self.keywords))

    def __repr__(self) -> str:
        return f"PartialVariable({self.func!r})"

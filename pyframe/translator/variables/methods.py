"""Methods bound to a symbolic object: a Python function inlined with it as `self`, and object's
own `__getattribute__`, `__setattr__` and `__delattr__` (where a class's own versions end).
"""
from __future__ import annotations

import types
from typing import Any

from ...exc import Unsupported
from ...source import AttrSource, Source
from .base import VariableTracker
from .constant import ConstantVariable


class ObjectSlotMethodVariable(VariableTracker):
    """`object.__getattribute__` / `__setattr__` / `__delattr__` bound to an instance (reached
    through super(), or called on the class with the instance first): the plain attribute lookup,
    store or deletion, where a class's own `__getattribute__` / `__setattr__` / `__delattr__` ends."""

    NAMES = ("__getattribute__", "__setattr__", "__delattr__")

    def __init__(self, name: str, obj: VariableTracker | None = None, source=None):
        super().__init__(source)
        self.name, self.obj = name, obj

    def real_object(self) -> Any:
        return getattr(object, self.name) if self.obj is None else super().real_object()

    def call(self, tx, args, kwargs) -> VariableTracker:
        obj, args = (self.obj, list(args)) if self.obj is not None else (args[0] if args else None, list(args[1:]))
        expected = 2 if self.name == "__setattr__" else 1
        if obj is None or kwargs or len(args) != expected or not args[0].is_python_constant() \
                or type(args[0].as_python_constant()) is not str:
            raise Unsupported(f"object.{self.name}() with these arguments")
        if self.name == "__getattribute__":
            return obj.generic_getattr(tx, args[0].as_python_constant())
        if self.name == "__delattr__":
            obj.generic_delattr(tx, args[0].as_python_constant())
            return ConstantVariable(None)
        obj.generic_setattr(tx, args[0].as_python_constant(), args[1])
        return ConstantVariable(None)

    def rebuilt_from(self) -> list[VariableTracker]:
        return [] if self.obj is None else [self.obj]

    def reconstruct(self, cg) -> None:
        if self.obj is None:
            cg.load_const(getattr(object, self.name))
            return
        bind_slot_wrapper(cg, getattr(object, self.name), self.obj)

    def __repr__(self) -> str:
        return f"ObjectSlotMethodVariable(object.{self.name}{' of ' + repr(self.obj) if self.obj else ''})"


def bind_slot_wrapper(cg, wrapper: Any, owner: VariableTracker) -> None:
    """`wrapper.__get__(<owner>)`: a builtin slot wrapper (object.__setattr__, type.__call__) bound
    to the rebuilt owner, as `super()` gave it."""
    cg.load_const(wrapper)
    cg.emit("LOAD_METHOD", "__get__")
    owner.reconstruct(cg)
    cg.call(1)


class TypeCallVariable(VariableTracker):
    """`type.__call__` bound to a class, reached through `super().__call__` in a metaclass's own
    `__call__`: makes the instance as calling a plain class does (the tracker's `construct`)."""

    def __init__(self, cls_var: VariableTracker):
        super().__init__()
        self.cls_var = cls_var

    def call(self, tx, args, kwargs) -> VariableTracker:
        return self.cls_var.construct(tx, args, kwargs)

    def rebuilt_from(self) -> list[VariableTracker]:
        return [self.cls_var]

    def reconstruct(self, cg) -> None:
        bind_slot_wrapper(cg, type.__call__, self.cls_var)

    def __repr__(self) -> str:
        return f"TypeCallVariable({self.cls_var!r})"


class InlinedMethodVariable(VariableTracker):
    """A Python function bound to a symbolic `self` (a super() attribute, or a bound method read
    from the frame, `source` being the method object): calls are inlined."""

    def __init__(self, fn: types.FunctionType, obj: VariableTracker, source=None):
        super().__init__(source)
        self.fn, self.obj = fn, obj

    def python_type(self) -> type:
        return types.MethodType

    def call(self, tx, args, kwargs) -> VariableTracker:
        fn_source = AttrSource(self.source, "__func__") if self.source is not None else None
        if self.fn.__name__ == "__getattribute__" and len(args) == 1 and not kwargs and args[0].is_python_constant() \
                and type(args[0].as_python_constant()) is str:
            # `super().__getattribute__(name)` in a class's own __getattribute__, reaching a base's
            return inline_getattribute(tx, self.obj, self.fn, fn_source, args[0].as_python_constant())
        return tx.inline_call(self.fn, [self.obj, *args], kwargs, fn_source=fn_source)

    def python_function(self, tx) -> tuple[types.FunctionType, Source, bool]:
        source = AttrSource(self.source, "__func__") if self.source is not None else tx.root.install_global(self.fn)
        return self.fn, source, True

    def var_getattr(self, tx, name: str) -> VariableTracker:
        """`method.__self__`, `method.__func__`; other attributes are the function's, as Python
        reads them (`method.__wrapped__`, `method.__name__`)."""
        if name == "__self__":
            return self.obj
        _, source, _ = self.python_function(tx)
        fn = tx.wrap(self.fn, source)
        return fn if name == "__func__" else fn.var_getattr(tx, name)

    def rebuilt_from(self) -> list[VariableTracker]:
        return [self.obj] if self.source is None else []

    def reconstruct(self, cg) -> None:
        if self.source is not None:
            cg.load_source(self.source)
            return
        cg.push_null()  # types.MethodType(fn, obj): the method a super() lookup found, bound again
        cg.load_const(types.MethodType)
        cg.load_const(self.fn)
        self.obj.reconstruct(cg)
        cg.call(2)


def make_method(tx, cls: type, cls_source, args, kwargs) -> VariableTracker:
    """`types.MethodType(fn, obj)` on a Python function (contextlib.ExitStack binds a context's
    __exit__ so): the function bound to the symbolic object, its calls inlined."""
    fn = args[0].real_object() if len(args) == 2 and not kwargs else None
    if not isinstance(fn, types.FunctionType):
        raise Unsupported("types.MethodType() of what is not a Python function")
    return InlinedMethodVariable(fn, args[1])


def inline_getattribute(tx, obj: VariableTracker, getattribute: types.FunctionType, fn_source: Source | None,
                        name: str) -> VariableTracker:
    """A Python `__getattribute__(obj, name)`, inlined (`fn_source`: where the function is read
    from), or the value its last inlining gave.

    Library objects read on every line (a Hugging Face config: `self.config.use_cache`, through
    `PretrainedConfig.__getattribute__`, whose `super().__getattribute__` is a base's own again)
    would have the same function inlined hundreds of times. A read of an object from the frame (it
    has a source) that changed nothing, recorded no graph op and gave a constant or an object from
    the frame is a function of the state it read: it is repeated, with grad mode and autocast as
    traced the same, while that state is unchanged (SideEffects.remember_read: no object from
    before the frame changed, if that is all it read; nothing changed at all, otherwise). Its
    guards are in place already."""
    key = (getattribute, obj.source, name, tx.output.grad_enabled, tuple(tx.output.autocast_stack)) \
        if obj.source is not None else None
    reads, side_effects = tx.output.getattribute_reads, tx.side_effects
    if key is not None:
        last = side_effects.repeat_read(reads, key)
        if last is not None:
            return last
    start, ops = side_effects.start_read(), len(tx.output.graph.nodes)
    value = tx.inline_call(getattribute, [obj, ConstantVariable(name)], {}, fn_source=fn_source)
    if key is not None and len(tx.output.graph.nodes) == ops and \
            (type(value) is ConstantVariable or value.source is not None):
        side_effects.remember_read(reads, key, start, value)
    return value

"""Grad-mode and autocast context managers, and super().

`with torch.no_grad():` is recorded as torch._dynamo 2.13 records it: a call
`torch._C._set_grad_enabled(False)` on entry and one restoring the previous mode on exit, and the
nodes in between are traced (their FakeTensors propagated) under that mode. `with torch.autocast(...)`
likewise: `torch.amp._enter_autocast(device, dtype, enabled, cache_enabled)` on entry, whose result
`torch.amp._exit_autocast` takes on exit, and the nodes in between propagated under autocast.
"""
from __future__ import annotations

import inspect
import types
from typing import Any

import torch

from ...exc import Unsupported
from ...resume import Reentry
from ...source import AttrSource, Source
from .base import VariableTracker
from .constant import ConstantVariable

GRAD_MODE_CLASSES = (torch.no_grad, torch.enable_grad, torch.set_grad_enabled)


def set_grad_mode(tx, enabled: bool) -> None:
    """Recorded only when it changes the mode, as torch._dynamo coalesces them."""
    if tx.output.grad_enabled != enabled:
        tx.output.record_effect(torch._C._set_grad_enabled, (enabled,))
        tx.output.grad_enabled = enabled


class GradModeClassVariable(VariableTracker):
    """torch.no_grad / torch.enable_grad / torch.set_grad_enabled, before they are called."""

    def __init__(self, cls: type, source=None):
        super().__init__(source)
        self.cls = cls

    def as_python_constant(self) -> Any:
        return self.cls

    def call(self, tx, args, kwargs) -> VariableTracker:
        previous = tx.output.grad_enabled
        if self.cls is torch.set_grad_enabled:
            if len(args) != 1 or kwargs:
                raise Unsupported("torch.set_grad_enabled() takes one argument")
            enabled = bool(args[0].as_python_constant())
            set_grad_mode(tx, enabled)  # the mode changes when the object is made
            return GradModeVariable(previous, None, inside=enabled)
        if args or kwargs:
            raise Unsupported(f"{self.cls.__name__}() with arguments")
        return GradModeVariable(previous, self.cls is torch.enable_grad)


class GradModeVariable(VariableTracker):
    """A grad-mode context manager: `enter_mode` on __enter__ (None: already set), restore on exit.
    `inside`: the mode in its block."""

    def __init__(self, previous: bool, enter_mode: bool | None, inside: bool | None = None):
        super().__init__()
        self.previous = previous
        self.enter_mode = enter_mode
        self.inside = enter_mode if inside is None else inside

    def enter(self, tx) -> VariableTracker:
        if self.enter_mode is not None:  # (set_grad_enabled changed the mode when it was made:
            self.previous = tx.output.grad_enabled  # what it found then is what exit restores)
            set_grad_mode(tx, self.enter_mode)
        return ConstantVariable(None)

    def exit_callable(self) -> VariableTracker:
        return GradModeExitVariable(self)


class GeneratorContextVariable(VariableTracker):
    """A @contextlib.contextmanager made while tracing, entered: its generator runs to the yield on
    __enter__ and on to its end on the normal __exit__ (a second yield is refused, as Python
    raises "generator didn't stop")."""

    def __init__(self, generator: VariableTracker):
        super().__init__()
        self.generator = generator

    @classmethod
    def of(cls, manager: VariableTracker) -> "GeneratorContextVariable":
        generator = getattr(manager, "attrs", {}).get("gen")
        if generator is None or not hasattr(generator, "next"):
            raise Unsupported(f"with-statement on {manager}")
        return cls(generator)

    def enter(self, tx) -> VariableTracker:
        value = self.generator.next()
        if value is None:
            raise Unsupported("a @contextmanager generator that does not yield")
        return value

    def exit_callable(self) -> VariableTracker:
        return _GeneratorContextExit(self.generator)


class _GeneratorContextExit(VariableTracker):
    def __init__(self, generator: VariableTracker):
        super().__init__()
        self.generator = generator

    def call(self, tx, args, kwargs) -> VariableTracker:
        if self.generator.next() is not None:
            raise Unsupported("a @contextmanager generator that yields twice")
        return ConstantVariable(False)


class AutocastVariable(VariableTracker):
    """A torch.autocast (or torch.cpu.amp.autocast) made while tracing, about to be entered."""

    def __init__(self, manager: torch.autocast):
        super().__init__()
        self.state = (manager.device, manager.fast_dtype, manager._enabled, manager._cache_enabled)

    def enter(self, tx) -> VariableTracker:
        device = self.state[0]
        outer = [s for s in tx.output.autocast_stack if s[0] == device]
        if outer:  # what this region's exit puts back: the enclosing traced region's settings
            _, dtype, enabled, cache_enabled = outer[-1]
            self.previous = (device, bool(enabled), dtype, bool(cache_enabled))
        else:  # or the state the call was made in (guarded: the autocast state of each device)
            self.previous = (device, torch.is_autocast_enabled(device), torch.get_autocast_dtype(device),
                             torch.is_autocast_cache_enabled())
        self.node = tx.output.record_effect(torch.amp._enter_autocast, self.state)
        tx.output.autocast_stack.append(self.state)
        return ConstantVariable(None)

    def exit_callable(self) -> VariableTracker:
        return AutocastExitVariable(self)


class AutocastExitVariable(VariableTracker):
    def __init__(self, context: AutocastVariable):
        super().__init__()
        self.context = context

    def call(self, tx, args, kwargs) -> VariableTracker:
        stack = tx.output.autocast_stack
        if not stack or stack[-1] != self.context.state:
            raise Unsupported("autocast regions exited out of order")
        tx.output.record_effect(torch.amp._exit_autocast, (self.context.node,))
        stack.pop()
        return ConstantVariable(None)

    def reconstruct(self, cg) -> None:
        # At a graph break inside the region (the graph entered it): an __exit__ that leaves it.
        cg.load_const(_AutocastRestore(*self.context.previous))

    def reentry(self) -> Reentry:
        """How the code after a graph break in the region enters it again: a new torch.autocast."""
        return Reentry(torch.autocast, self.context.state)


class _AutocastRestore:
    """The __exit__ of an autocast region entered by a graph: what torch.autocast.__exit__ does,
    with the settings it would have saved on entry."""

    def __init__(self, device: str, enabled: bool, dtype: torch.dtype, cache_enabled: bool):
        self.device, self.enabled, self.dtype, self.cache_enabled = device, enabled, dtype, cache_enabled

    def __call__(self, exc_type=None, exc=None, tb=None) -> None:
        if torch.autocast_decrement_nesting() == 0:
            torch.clear_autocast_cache()
        torch.set_autocast_enabled(self.device, self.enabled)
        torch.set_autocast_dtype(self.device, self.dtype)
        torch.set_autocast_cache_enabled(self.cache_enabled)

    def __repr__(self) -> str:
        return f"<leave autocast on {self.device}: back to enabled={self.enabled}, {self.dtype}>"


class GradModeExitVariable(VariableTracker):
    """The bound __exit__ BEFORE_WITH leaves on the stack; the normal exit calls it with Nones."""

    def __init__(self, context: GradModeVariable):
        super().__init__()
        self.context = context

    def call(self, tx, args, kwargs) -> VariableTracker:
        set_grad_mode(tx, self.context.previous)
        return ConstantVariable(None)

    def reconstruct(self, cg) -> None:
        # At a graph break inside the block: an __exit__ that restores the mode found on entry.
        cg.load_const(_RESTORE_GRAD_MODE[self.context.previous])

    def reentry(self) -> Reentry:
        """How the code after a graph break in the block enters it again: `torch.set_grad_enabled`
        with the block's mode (it restores, on exit, the mode it found)."""
        return Reentry(torch.set_grad_enabled, (self.context.inside,))


class _GradModeRestore:
    """The __exit__ of a grad-mode block entered while tracing: puts back the mode found on entry
    (and lets an exception through, as torch.no_grad's __exit__ does)."""

    def __init__(self, mode: bool):
        self.mode = mode

    def __call__(self, exc_type=None, exc=None, tb=None) -> None:
        torch._C._set_grad_enabled(self.mode)

    def __repr__(self) -> str:
        return f"<restore grad mode {self.mode}>"


_RESTORE_GRAD_MODE = {True: _GradModeRestore(True), False: _GradModeRestore(False)}


class SuperVariable(VariableTracker):
    """`super()` inside a method: attribute reads start after `cls` in type(obj)'s MRO."""

    def __init__(self, cls: type, obj: VariableTracker):
        super().__init__()
        self.cls, self.obj = cls, obj

    def var_getattr(self, tx, name: str) -> VariableTracker:
        # super() in a classmethod has the class as its second argument: its own MRO is searched
        of_class = issubclass(self.obj.python_type(), type)
        owner = self.obj.as_python_constant() if of_class else self.obj.python_type()
        mro = owner.__mro__
        if self.cls not in mro:
            raise Unsupported(f"super({self.cls.__qualname__}, ...) of an unrelated object")
        for klass in mro[mro.index(self.cls) + 1:]:
            if name in klass.__dict__:
                attr = klass.__dict__[name]
                if isinstance(attr, classmethod):
                    cls_vt = self.obj if of_class else tx.wrap(owner, None, guard=False)
                    return InlinedMethodVariable(attr.__func__, cls_vt)
                if isinstance(attr, staticmethod):
                    return tx.wrap(attr.__func__, None, guard=False)
                if isinstance(attr, types.FunctionType):
                    if of_class:  # a plain function read through the class: not bound
                        return tx.wrap(attr, None, guard=False)
                    return InlinedMethodVariable(attr, self.obj)
                if isinstance(attr, property) and attr.fget is not None and not of_class:
                    return tx.inline_call(attr.fget, [self.obj], {})
                if klass is object and name in ObjectSlotMethodVariable.NAMES and not of_class:
                    # `super().__getattribute__(key)` in a class's own __getattribute__: object's
                    return ObjectSlotMethodVariable(name, self.obj)
                from .dict_subclass import BuiltinMethodOfVariable, DictSubclassMixin  # (imports this module)
                if isinstance(self.obj, DictSubclassMixin) and isinstance(attr, (types.MethodDescriptorType,
                                                                                 types.WrapperDescriptorType)):
                    # `super().__setitem__(k, v)` in a dict subclass: dict's (or object's) own method
                    return BuiltinMethodOfVariable(klass, name, self.obj)
                if attr is object.__init__ and not of_class:  # `super().__init__()` at the top
                    return _ObjectInitVariable()
                raise Unsupported(f"super().{name} is a {type(attr).__name__}")
        raise Unsupported(f"super() has no attribute {name!r}")

    def rebuilt_from(self) -> list[VariableTracker]:
        return [self.obj]

    def reconstruct(self, cg) -> None:
        """`super(cls, obj)` (at a graph break with it on the stack)."""
        cg.push_null()
        cg.load_const(super)
        cg.load_const(self.cls)
        self.obj.reconstruct(cg)
        cg.call(2)


class ObjectSlotMethodVariable(VariableTracker):
    """`object.__getattribute__` / `object.__setattr__` bound to an instance (reached through
    super(), or called on the class with the instance first): the plain attribute lookup or store,
    where a class's own `__getattribute__` / `__setattr__` ends."""

    NAMES = ("__getattribute__", "__setattr__")

    def __init__(self, name: str, obj: VariableTracker | None = None, source=None):
        super().__init__(source)
        self.name, self.obj = name, obj

    def real_object(self) -> Any:
        return getattr(object, self.name) if self.obj is None else super().real_object()

    def call(self, tx, args, kwargs) -> VariableTracker:
        obj, args = (self.obj, list(args)) if self.obj is not None else (args[0] if args else None, list(args[1:]))
        expected = 1 if self.name == "__getattribute__" else 2
        if obj is None or kwargs or len(args) != expected or not args[0].is_python_constant() \
                or type(args[0].as_python_constant()) is not str:
            raise Unsupported(f"object.{self.name}() with these arguments")
        if self.name == "__getattribute__":
            return obj.generic_getattr(tx, args[0].as_python_constant())
        obj.generic_setattr(tx, args[0].as_python_constant(), args[1])
        return ConstantVariable(None)

    def rebuilt_from(self) -> list[VariableTracker]:
        return [] if self.obj is None else [self.obj]

    def reconstruct(self, cg) -> None:
        if self.obj is None:
            cg.load_const(getattr(object, self.name))
            return
        cg.load_const(getattr(object, self.name))  # the slot wrapper bound to the instance
        cg.emit("LOAD_METHOD", "__get__")
        self.obj.reconstruct(cg)
        cg.call(1)

    def __repr__(self) -> str:
        return f"ObjectSlotMethodVariable(object.{self.name}{' of ' + repr(self.obj) if self.obj else ''})"


class _ObjectInitVariable(VariableTracker):
    """object.__init__ bound to an instance, reached through super(): does nothing when called
    without arguments (with some, Python raises TypeError: left to it)."""

    def call(self, tx, args, kwargs) -> VariableTracker:
        if args or kwargs:
            raise Unsupported("object.__init__() called with arguments")
        return ConstantVariable(None)


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


def zero_arg_super(tx) -> SuperVariable:
    """super() with no arguments: the `__class__` cell and the first argument of the method."""
    code = tx.code
    if "__class__" not in code.co_freevars or code.co_argcount == 0:
        raise Unsupported("super() outside a method")
    cls = tx.read_free_var("__class__").as_python_constant()
    if not inspect.isclass(cls):
        raise Unsupported("super(): __class__ is not a class")
    return SuperVariable(cls, tx.read_local(code.co_varnames[0]))

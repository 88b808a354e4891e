"""Grad-mode, autocast and no-op context managers.

`with torch.no_grad():` is recorded as torch._dynamo 2.13 records it: a call
`torch._C._set_grad_enabled(False)` on entry and one restoring the previous mode on exit, and the
nodes in between are traced (their FakeTensors propagated) under that mode. `with torch.autocast(...)`
likewise: `torch.amp._enter_autocast(device, dtype, enabled, cache_enabled)` on entry, whose result
`torch.amp._exit_autocast` takes on exit, and the nodes in between propagated under autocast.
`with contextlib.nullcontext():` records nothing. A graph break inside such a block leaves it
(the graph's part) and enters it again after the break (the exit's `reentry`).
"""
from __future__ import annotations

import contextlib
from typing import Any

import torch

from ...exc import Unsupported
from ...resume import Reentry
from .base import VariableTracker
from .constant import ConstantVariable
from .exceptions import ExceptionVariable, RaisedException

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

    def call(self, tx, args, kwargs) -> VariableTracker:
        """`torch.no_grad()(fn)`, the decorator: fn run in the block's mode at each call."""
        if len(args) != 1 or kwargs or self.enter_mode is None:
            raise Unsupported("a grad-mode context manager called with these arguments")
        return GradModeFunctionVariable(args[0], self.inside)


class GradModeFunctionVariable(VariableTracker):
    """A function decorated by a grad-mode context manager (`@torch.no_grad()` on a function made
    in the frame): each call sets the mode, runs the function, and puts the mode found back, as
    the decorator's wrapper does (also when the function raises)."""

    def __init__(self, fn: VariableTracker, mode: bool):
        super().__init__()
        self.fn, self.mode = fn, mode

    def call(self, tx, args, kwargs) -> VariableTracker:
        previous = tx.output.grad_enabled
        set_grad_mode(tx, self.mode)
        try:
            return self.fn.call(tx, args, kwargs)
        finally:
            set_grad_mode(tx, previous)

    def rebuilt_from(self) -> list[VariableTracker]:
        return [self.fn]

    def reconstruct(self, cg) -> None:
        # the same decorator applied to the function again: `torch.no_grad()(fn)`
        cg.push_null()  # (for the call of the decorator object)
        cg.push_null()
        cg.load_const(torch.enable_grad if self.mode else torch.no_grad)
        cg.call(0)
        self.fn.reconstruct(cg)
        cg.call(1)


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
        """contextlib's `_GeneratorContextManager.__exit__(type, value, tb)`: without an
        exception, the generator runs on to its end; with one, the exception is thrown in at the
        yield: the generator finishing swallows it (True), the same exception coming out lets it
        go on (False), another one replaces it."""
        exc = args[1] if len(args) == 3 else None
        if exc is None or exc.is_python_constant() and exc.as_python_constant() is None:
            if self.generator.next() is not None:
                raise Unsupported("a @contextmanager generator that yields twice")
            return ConstantVariable(False)
        if not isinstance(exc, ExceptionVariable):
            raise Unsupported(f"a @contextmanager's exit with {exc.describe()}")
        try:
            self.generator.call_method(tx, "throw", [exc], {})
        except RaisedException as raised:
            if raised.value is exc or raised.value.cause is exc:  # (PEP 479 wraps a StopIteration)
                return ConstantVariable(False)
            if issubclass(raised.value.exc_type, StopIteration):
                return ConstantVariable(True)
            raise
        raise Unsupported("a @contextmanager generator that yields again after throw() (RuntimeError)")


class AutocastVariable(VariableTracker):
    """A torch.autocast (or torch.cpu.amp.autocast) made while tracing, about to be entered."""

    def __init__(self, manager: torch.autocast, args: tuple | None = None):
        super().__init__()
        self.state = (manager.device, manager.fast_dtype, manager._enabled, manager._cache_enabled)
        # what the graph's `_enter_autocast` node takes: torch.autocast's arguments as the call gave
        # them, its defaults included (`dtype=None` is the device's autocast dtype), as
        # torch._dynamo records them; the state they resolve to when made outside the frame
        self.args = args if args is not None else self.state

    def enter(self, tx) -> VariableTracker:
        device = self.state[0]
        outer = [s for s in tx.output.autocast_stack if s[0] == device]
        if outer:  # what this region's exit puts back: the enclosing traced region's settings
            _, dtype, enabled, cache_enabled = outer[-1]
            self.previous = (device, bool(enabled), dtype, bool(cache_enabled))
        else:  # or the state the call was made in (guarded: the autocast state of each device)
            self.previous = (device, torch.is_autocast_enabled(device), torch.get_autocast_dtype(device),
                             torch.is_autocast_cache_enabled())
        self.node = tx.output.record_effect(torch.amp._enter_autocast, self.args)
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
        return Reentry(torch.autocast, self.context.args)


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


class NullContextExitVariable(VariableTracker):
    """The __exit__ of a `contextlib.nullcontext()` block, left on the stack by BEFORE_WITH: it
    does nothing, and a graph break inside the block enters a new nullcontext after the break, as
    torch._dynamo's NullContextVariable lets it."""

    def call(self, tx, args, kwargs) -> VariableTracker:
        return ConstantVariable(None)

    def reconstruct(self, cg) -> None:
        cg.load_const(_leave_null_context)

    def reentry(self) -> Reentry:
        return Reentry(contextlib.nullcontext, ())


def _leave_null_context(exc_type=None, exc=None, tb=None) -> None:
    """The __exit__ of a nullcontext entered by a graph: nothing to undo."""

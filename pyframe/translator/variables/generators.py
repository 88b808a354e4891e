"""Generators made by inlined generator functions, as iterators and as objects.

The generator's body is run by its own InstructionTranslator (the `Tracer` it was inlined by made
it), lazily: each item its consumer asks for runs the body to its next `yield`. Besides iteration
it answers the generator protocol as CPython 3.11 does: `send(v)` makes `v` the value of the paused
`yield` expression, `throw(exc)` raises `exc` there (the body's own handlers may catch it),
`close()` throws GeneratorExit; an exception leaving the body finishes the generator, and a
StopIteration leaving it becomes a RuntimeError (PEP 479). Its state (`gi_running`,
`gi_suspended`, `gi_frame is None` once finished) is known while tracing.
"""
from __future__ import annotations

import types
from typing import Any

from ...exc import Unsupported
from .base import BoundMethodVariable, VariableTracker
from .constant import ConstantVariable
from .exceptions import ExceptionVariable, RaisedException, is_exception_class
from .functions import CodeObjectVariable
from .iterators import ListIteratorVariable

_METHODS = ("send", "throw", "close", "__next__", "__iter__")


class GeneratorVariable(ListIteratorVariable):
    """The generator an inlined generator function returns. Its body runs lazily, to the next
    `yield` each time the consumer asks for an item, so the graph interleaves producer and consumer
    as Python (and torch._dynamo) runs them: `sum(x * i for i in range(3))` records mul, add, mul,
    add..."""

    def __init__(self, translator: Any):
        # the generator function's own InstructionTranslator: each resumption runs to the next yield
        super().__init__([], types.GeneratorType, iter(self._resume, None))
        self.translator = translator
        self.finished = False
        self.started = False  # it has run to a first yield (a value may be sent in)
        self.running = False  # its body is running (gi_running; a generator's own code sees True)

    def _resume(self) -> VariableTracker | None:
        """Run the body to its next yield: the value yielded, or None once it has returned. An
        exception leaving the body finishes it (PEP 479: a StopIteration is a RuntimeError then)."""
        if self.running:
            raise Unsupported("a generator resumed by its own body (ValueError: generator already executing)")
        self.running, self.started = True, True
        try:
            return self.translator.resume_generator()
        except RaisedException as raised:
            self.pending, self.finished = None, True
            if issubclass(raised.value.exc_type, StopIteration):
                error = ExceptionVariable(RuntimeError, [ConstantVariable("generator raised StopIteration")])
                error.cause = raised.value
                raise RaisedException(error) from None
            raise
        finally:
            self.running = False

    def next(self) -> VariableTracker | None:
        item = super().next()
        if item is None:
            # The first next() to find it done gets its return value (items produced ahead, for a
            # break, do not move that), as CPython raises StopIteration(value) once; later ones None.
            self.stop_value = None if self.finished else self.translator.return_value
            self.finished = True
        return item

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name in _METHODS:
            return BoundMethodVariable(self, name)
        if name == "gi_running":
            return ConstantVariable(self.running)
        if name == "gi_suspended":  # (3.12's name; inspect.getgeneratorstate's GEN_SUSPENDED)
            return ConstantVariable(self.started and not self.finished and not self.running)
        if name == "gi_frame":  # None once finished; else a frame, known only to be one
            return ConstantVariable(None) if self._exhausted() else GeneratorFrameVariable(self)
        if name in ("__name__", "__qualname__"):
            return ConstantVariable(getattr(self.translator.code, "co_" + name.strip("_")))
        if name == "gi_code":
            return CodeObjectVariable(self.translator.code)
        return super().var_getattr(tx, name)

    def _exhausted(self) -> bool:
        return self.finished or (self.pending is None and self.index == len(self.items))

    def call_method(self, tx, name: str, args, kwargs) -> VariableTracker:
        if kwargs:
            raise Unsupported(f"generator.{name}() with keyword arguments")
        if name in ("__iter__",):
            return self
        if name == "__next__":
            return self._step(tx)
        if name == "send" and len(args) == 1:
            return self._send(tx, args[0])
        if name == "throw" and len(args) == 1:
            return self._throw(tx, self._exception(args[0]))
        if name == "close" and not args:
            return self._close(tx)
        raise Unsupported(f"generator.{name}() with {len(args)} arguments")

    # -- the protocol ------------------------------------------------------------------------------
    def _step(self, tx) -> VariableTracker:
        """What next(g) gives: the next item, or StopIteration(its return value) raised."""
        item = self.next()
        if item is not None:
            return item
        value = self.stop_value
        raise RaisedException(ExceptionVariable(StopIteration, [] if value is None else [value]))

    def _paused_here(self) -> None:
        """send/throw reach the body where it is paused: no items taken ahead of the consumer."""
        if self.index != len(self.items):
            raise Unsupported("send() or throw() to a generator whose items were produced ahead")

    def _send(self, tx, value: VariableTracker) -> VariableTracker:
        self._paused_here()
        sends_none = value.is_python_constant() and value.as_python_constant() is None
        if not self.started and not self._exhausted():
            if not sends_none:
                raise RaisedException(ExceptionVariable(
                    TypeError, [ConstantVariable("can't send non-None value to a just-started generator")]))
        elif not self._exhausted():
            self.translator.send_value(value)
        return self._step(tx)

    def _exception(self, exc: VariableTracker) -> ExceptionVariable:
        if isinstance(exc, ExceptionVariable):
            return exc
        if exc.is_python_constant() and is_exception_class(exc.as_python_constant()):
            return ExceptionVariable.make(exc.as_python_constant(), [], {})
        raise Unsupported(f"generator.throw() of {exc.describe()}")

    def _throw(self, tx, exc: ExceptionVariable) -> VariableTracker:
        """Raise `exc` at the paused yield: the next value the body yields after handling it, or
        the exception (or StopIteration) coming out of it. A generator not started, or finished,
        raises it at once (and is finished)."""
        self._paused_here()
        if not self.started or self._exhausted():
            self.pending, self.finished, self.started = None, True, True
            raise RaisedException(exc)
        self.translator.throw_value(exc)
        return self._step(tx)

    def _close(self, tx) -> VariableTracker:
        """GeneratorExit thrown in: finishing or letting it (or StopIteration) out is a clean close;
        yielding again is a RuntimeError."""
        if not self.started or self._exhausted():
            self.pending, self.finished, self.started = None, True, True
            return ConstantVariable(None)
        try:
            self._throw(tx, ExceptionVariable(GeneratorExit, []))
        except RaisedException as raised:
            if issubclass(raised.value.exc_type, (GeneratorExit, StopIteration)):
                return ConstantVariable(None)
            raise
        raise RaisedException(ExceptionVariable(RuntimeError, [ConstantVariable("generator ignored GeneratorExit")]))

    def describe(self) -> str:
        return f"the generator {self.translator.code.co_qualname}"


class GeneratorFrameVariable(VariableTracker):
    """`gen.gi_frame` of a generator not finished: a frame object that exists only symbolically
    (the generator's body runs in the trace). What can be asked of it is what it is (`is None`,
    its type); reading it is not traced."""

    def __init__(self, generator: GeneratorVariable):
        super().__init__()
        self.generator = generator

    def python_type(self) -> type:
        return types.FrameType

    def identity(self) -> Any:
        return self

    def describe(self) -> str:
        return f"the frame of {self.generator.describe()}"

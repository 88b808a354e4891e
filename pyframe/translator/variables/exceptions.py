"""Exceptions raised and caught while tracing.

`raise ValueError("bad")` in traced code makes an ExceptionVariable and unwinds the symbolic
interpreter with RaisedException (a Python exception of the translator, carrying the symbolic one).
The translator of each frame it passes through looks up its exception table: a handler catches it
(the stack is cut to the handler's depth and the exception pushed, as CPython does), or it moves on
to the caller. One that leaves the frame being compiled is not modelled: the frame breaks there,
and Python raises it for real.
"""
from __future__ import annotations

from typing import Any

from ...exc import Unsupported
from .base import VariableTracker
from .constant import ConstantVariable


class ExceptionVariable(VariableTracker):
    """An exception instance made while tracing: its class and its arguments."""

    def __init__(self, exc_type: type, args: list[VariableTracker]):
        super().__init__()
        self.exc_type = exc_type
        self.args = args
        self.cause: VariableTracker | None = None
        self.suppress_context = False  # `raise ... from cause` ran (`from None` too)
        # the exception being handled where this one was raised (CPython chains it then): known
        # once the translator that saw it raised has set it (InstructionTranslator.catch)
        self.context: VariableTracker | None = None
        self.context_known = False

    @classmethod
    def make(cls, exc_type: type, args: list[VariableTracker], kwargs: dict[str, VariableTracker]) -> "ExceptionVariable":
        if kwargs:
            raise Unsupported(f"{exc_type.__name__}() with keyword arguments")
        for klass in exc_type.__mro__:
            if klass.__module__ == "builtins":
                break
            if "__init__" in vars(klass) or "__new__" in vars(klass):
                raise Unsupported(f"{exc_type.__qualname__} defines its own __init__")
        return cls(exc_type, list(args))

    def python_type(self) -> type:
        return self.exc_type

    def as_python_constant(self) -> Any:
        return self.exc_type(*(a.as_python_constant() for a in self.args))

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name == "args":
            return tx.make_tuple(list(self.args))  # (lists.py raises these exceptions: it sits above)
        if name == "value" and issubclass(self.exc_type, StopIteration):  # a generator's return value
            return self.args[0] if self.args else ConstantVariable(None)
        if name == "__cause__":
            return self.cause if self.cause is not None else ConstantVariable(None)
        if name == "__suppress_context__":
            return ConstantVariable(self.suppress_context)
        if name == "__context__" and self.context_known:
            return self.context if self.context is not None else ConstantVariable(None)
        if name == "__class__":
            return tx.wrap(self.exc_type, None, guard=False)
        return super().var_getattr(tx, name)

    def reconstruct(self, cg) -> None:
        cg.push_null()
        cg.load_const(self.exc_type)
        for arg in self.args:
            arg.reconstruct(cg)
        cg.call(len(self.args))

    def __repr__(self) -> str:
        return f"ExceptionVariable({self.exc_type.__name__})"


def is_exception_class(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, BaseException)


class RaisedException(Exception):
    """The translator's own unwinding for a symbolic exception (never seen by user code)."""

    def __init__(self, value: ExceptionVariable):
        super().__init__(value.exc_type.__name__)
        self.value = value


def raise_symbolic(exc_type: type, *args: Any) -> None:
    """Raise `exc_type(*args)` in the traced program (StopIteration from next(), KeyError...)."""
    raise RaisedException(ExceptionVariable(exc_type, [ConstantVariable(a) for a in args]))

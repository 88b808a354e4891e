"""Opcode handlers: entering a `with` block (BEFORE_WITH), and leaving it by an exception
(WITH_EXCEPT_START).

Grad mode, autocast, `contextlib.nullcontext` and `@contextmanager` generators are modelled
(variables/contexts.py); any other
manager has its `__enter__` inlined and its bound `__exit__` left on the stack for the block's exit.
An exception raised in the block (by the traced code, or by a builtin such as `[][1]`) reaches the
block's handler through the exception table; the handler calls that `__exit__` (inlined), whose
answer decides whether the exception is swallowed (`contextlib.suppress`) or re-raised.
"""
from __future__ import annotations

import contextlib

import torch
from bytecode import Instr

from .variables.constant import ConstantVariable
from .variables.contexts import AutocastVariable, GeneratorContextVariable, GradModeVariable, NullContextExitVariable
from .variables.objects import NewObjectVariable


class WithOps:
    """Context managers."""

    def BEFORE_WITH(self, inst: Instr) -> None:
        """Push the manager's bound __exit__, then what its __enter__ returns. The normal way out
        of the block calls that __exit__ with three Nones; a break inside the block is refused."""
        context = self.pop()
        if isinstance(context.real_object(), torch.autocast):
            context = AutocastVariable(context.real_object(), getattr(context, "autocast_args", None))
        if isinstance(context, (GradModeVariable, GeneratorContextVariable, AutocastVariable)):
            self.push(context.exit_callable())
            self.push(context.enter(self))
            return
        if _is_null_context(context):  # its __enter__ gives its enter_result; its exit does nothing
            self.push(NullContextExitVariable())
            self.push(context.var_getattr(self, "__enter__").call(self, [], {}))
            return
        if isinstance(context, NewObjectVariable) and issubclass(context.cls, contextlib._GeneratorContextManager):
            context = GeneratorContextVariable.of(context)
            self.push(context.exit_callable())
            self.push(context.enter(self))
            return
        exit_method = context.var_getattr(self, "__exit__")
        self.push(exit_method)
        self.push(context.var_getattr(self, "__enter__").call(self, [], {}))

    def WITH_EXCEPT_START(self, inst: Instr) -> None:
        """3.11: the stack ends with __exit__, the offset of the raising instruction, the
        exception handled before, and the exception: push `__exit__(type(exc), exc, tb)`. The
        traceback is not modelled: __exit__ is given None for it (as torch._dynamo gives)."""
        exc, exit_method = self.stack[-1], self.stack[-4]
        exc_type = self.wrap(exc.python_type(), None)
        self.push(exit_method.call(self, [exc_type, exc, ConstantVariable(None)], {}))


def _is_null_context(context) -> bool:
    """A `contextlib.nullcontext` (not a subclass: one may define its own __exit__)."""
    if isinstance(context, NewObjectVariable):
        return context.cls is contextlib.nullcontext
    return type(context.real_object()) is contextlib.nullcontext

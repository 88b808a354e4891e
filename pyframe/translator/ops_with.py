"""Opcode handlers: entering a `with` block (BEFORE_WITH).

Grad mode, autocast and `@contextmanager` generators are modelled (variables/contexts.py); any other
manager has its `__enter__` inlined and its bound `__exit__` left on the stack for the block's exit.
"""
from __future__ import annotations

import contextlib

import torch
from bytecode import Instr

from .variables.contexts import AutocastVariable, GeneratorContextVariable, GradModeVariable
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
        if isinstance(context, NewObjectVariable) and issubclass(context.cls, contextlib._GeneratorContextManager):
            context = GeneratorContextVariable.of(context)
            self.push(context.exit_callable())
            self.push(context.enter(self))
            return
        exit_method = context.var_getattr(self, "__exit__")
        self.push(exit_method)
        self.push(context.var_getattr(self, "__enter__").call(self, [], {}))

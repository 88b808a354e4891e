"""Opcode handlers: jumps, loops and returns.

A branch on a value known while tracing (a constant, `self.training`, `x.dim() == 2`) is simply
followed. A branch on a tensor's data raises Unsupported from `truth()`. Loops over iterables of
known length are unrolled: GET_ITER turns the iterable into a list of its items. `assert <tensor>`
becomes torch._assert_async in the graph, as torch._dynamo rewrites it.
"""
from __future__ import annotations

import sys

import torch
from bytecode import Instr

from ..exc import Unsupported
from .variables import ConstantVariable, ListVariable, TensorVariable
from .variables.torch import TorchFunctionVariable
from .variables.iterators import ListIteratorVariable
from .variables.lists import FrameListVariable
from .variables.special_methods import truth


class JumpOps:
    def _branch(self, inst: Instr, jump_if: bool) -> None:
        value = self.pop()
        if truth(self, value) == jump_if:
            self.jump_to(inst.arg)

    def _branch_none(self, inst: Instr, jump_if_none: bool) -> None:
        value = self.pop()
        if isinstance(value, TensorVariable):
            value.realize(self)
        is_none = value.is_python_constant() and value.as_python_constant() is None
        if is_none == jump_if_none:
            self.jump_to(inst.arg)

    def _assert_message(self) -> str | None:
        """The message of the `assert` whose jump is the current instruction (the jump over
        LOAD_ASSERTION_ERROR [LOAD_CONST msg PRECALL CALL] RAISE_VARARGS), "assertion error" for
        one without; None where the jump is no assert's, or the message is not a constant."""
        following = [i for i in self.instructions[self.ip:self.ip + 8] if isinstance(i, Instr)][:5]
        names = [i.name for i in following]
        if names[:2] == ["LOAD_ASSERTION_ERROR", "RAISE_VARARGS"]:
            return "assertion error"
        if names == ["LOAD_ASSERTION_ERROR", "LOAD_CONST", "PRECALL", "CALL", "RAISE_VARARGS"]:
            return following[1].arg
        return None

    def POP_JUMP_FORWARD_IF_TRUE(self, inst: Instr) -> None:
        value = self.stack[-1]
        if isinstance(value, TensorVariable) and not sys.flags.optimize:
            message = self._assert_message()
            if message is not None:
                # torch._dynamo's rewrite_assert_with_torch_assert: the check runs in the graph
                # (failing when the graph runs) and the trace goes on past the assert.
                self.pop()
                TorchFunctionVariable(torch._assert_async).call(self, [value, ConstantVariable(message)], {})
                self.jump_to(inst.arg)
                return
        self._branch(inst, True)

    def POP_JUMP_FORWARD_IF_FALSE(self, inst: Instr) -> None:
        self._branch(inst, False)

    def POP_JUMP_FORWARD_IF_NONE(self, inst: Instr) -> None:
        self._branch_none(inst, True)

    def POP_JUMP_FORWARD_IF_NOT_NONE(self, inst: Instr) -> None:
        self._branch_none(inst, False)

    POP_JUMP_BACKWARD_IF_TRUE = POP_JUMP_FORWARD_IF_TRUE

    POP_JUMP_BACKWARD_IF_FALSE = POP_JUMP_FORWARD_IF_FALSE

    POP_JUMP_BACKWARD_IF_NONE = POP_JUMP_FORWARD_IF_NONE

    POP_JUMP_BACKWARD_IF_NOT_NONE = POP_JUMP_FORWARD_IF_NOT_NONE

    def JUMP_IF_TRUE_OR_POP(self, inst: Instr) -> None:
        if truth(self, self.stack[-1]):
            self.jump_to(inst.arg)
        else:
            self.pop()

    def JUMP_IF_FALSE_OR_POP(self, inst: Instr) -> None:
        if not truth(self, self.stack[-1]):
            self.jump_to(inst.arg)
        else:
            self.pop()

    def JUMP_FORWARD(self, inst: Instr) -> None:
        self.jump_to(inst.arg)

    JUMP_BACKWARD = JUMP_FORWARD

    JUMP_BACKWARD_NO_INTERRUPT = JUMP_FORWARD

    def GET_ITER(self, inst: Instr) -> None:
        iterable = self.pop()
        if isinstance(iterable, ListIteratorVariable):
            self.push(iterable)
        elif type(iterable) in (ListVariable, FrameListVariable):
            # A list iterator sees items appended while it runs: it reads the tracker's own list.
            self.push(ListIteratorVariable(iterable.items))
        else:
            self.push(ListIteratorVariable(iterable.unpack(self)))

    def FOR_ITER(self, inst: Instr) -> None:
        iterator = self.stack[-1]
        if not isinstance(iterator, ListIteratorVariable):
            raise Unsupported(f"for loop over {iterator}")
        item = iterator.next()
        if item is None:
            self.pop()
            self.jump_to(inst.arg)
        else:
            self.push(item)

    def RETURN_VALUE(self, inst: Instr) -> None:
        self.return_value = self.pop()

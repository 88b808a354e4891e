"""Opcode handlers: jumps and loops.

A branch on a value known while tracing (a constant, `self.training`, `x.dim() == 2`) is simply
followed. A branch on a tensor's data raises Unsupported from `truth()`. Loops over iterables of
known length are unrolled: GET_ITER turns the iterable into a list of its items.
"""
from __future__ import annotations

from bytecode import Instr

from ..exc import Unsupported
from .variables import VariableTracker


class ListIteratorVariable(VariableTracker):
    """The iterator GET_ITER leaves on the stack: the items still to come."""

    def __init__(self, items: list[VariableTracker]):
        super().__init__()
        self.items = items
        self.index = 0

    def next(self) -> VariableTracker | None:
        if self.index >= len(self.items):
            return None
        self.index += 1
        return self.items[self.index - 1]

    def unpack(self, tx) -> list[VariableTracker]:
        rest, self.index = self.items[self.index:], len(self.items)
        return rest

    def reconstruct(self, cg) -> None:
        """`iter((items still to come))`: a graph break inside a loop continues the same iterations."""
        def build() -> None:
            for item in self.items[self.index:]:
                item.reconstruct(cg)
            cg.emit("BUILD_TUPLE", len(self.items) - self.index)
            cg.emit("GET_ITER")

        cg.rebuild_once(self, build)  # one iterator, however many places hold it


class JumpOps:
    def _branch(self, inst: Instr, jump_if: bool) -> None:
        value = self.pop()
        if value.truth() == jump_if:
            self.jump_to(inst.arg)

    def _branch_none(self, inst: Instr, jump_if_none: bool) -> None:
        value = self.pop()
        is_none = value.is_python_constant() and value.as_python_constant() is None
        if is_none == jump_if_none:
            self.jump_to(inst.arg)

    def POP_JUMP_FORWARD_IF_TRUE(self, inst: Instr) -> None:
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
        if self.stack[-1].truth():
            self.jump_to(inst.arg)
        else:
            self.pop()

    def JUMP_IF_FALSE_OR_POP(self, inst: Instr) -> None:
        if not self.stack[-1].truth():
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

    def RAISE_VARARGS(self, inst: Instr) -> None:
        raise Unsupported("raise statement reached while tracing")


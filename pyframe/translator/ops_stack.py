"""Opcode handlers: stack shuffles (NOP, POP_TOP, COPY, SWAP)."""
from __future__ import annotations

from bytecode import Instr


class StackOps:
    """Moving values on the stack: nothing is computed."""

    def NOP(self, inst: Instr) -> None:
        pass

    RESUME = NOP

    def POP_TOP(self, inst: Instr) -> None:
        self.pop()

    def COPY(self, inst: Instr) -> None:
        self.push(self.stack[-inst.arg])

    def SWAP(self, inst: Instr) -> None:
        self.stack[-1], self.stack[-inst.arg] = self.stack[-inst.arg], self.stack[-1]

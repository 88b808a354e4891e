"""Opcode handlers: generator functions, run lazily by their consumer.

An inlined generator function runs to its next YIELD_VALUE each time its consumer asks for an
item (InstructionTranslator.run_call, variables/iterators.py GeneratorVariable), so the graph
interleaves producer and consumer as Python runs them.
"""
from __future__ import annotations

from bytecode import Instr

from ..exc import Unsupported
from .variables import ConstantVariable
from .variables.iterators import ListIteratorVariable


class GeneratorOps:
    """RETURN_GENERATOR, YIELD_VALUE, `yield from` (GET_YIELD_FROM_ITER, SEND)."""

    def RETURN_GENERATOR(self, inst: Instr) -> None:
        self._require_generator_inlining()
        self.push(ConstantVariable(None))  # what the first resumption sends; POP_TOP drops it

    def YIELD_VALUE(self, inst: Instr) -> None:
        self._require_generator_inlining()
        self.yielded_value = self.pop()
        self.push(ConstantVariable(None))  # the value of the yield expression: nothing is sent
        self.suspended = True  # run() returns; the consumer resumes us for the next item

    def GET_YIELD_FROM_ITER(self, inst: Instr) -> None:
        self.GET_ITER(inst)

    def SEND(self, inst: Instr) -> None:
        """`yield from`: pass the inner iterator's items through, then continue with its return
        value (a generator's `return v`; None for any other iterator)."""
        self.pop()  # the sent value (always None here)
        iterator = self.stack[-1]
        if not isinstance(iterator, ListIteratorVariable):
            raise Unsupported(f"yield from {iterator}")
        item = iterator.next()
        if item is None:
            value = iterator.stop_value
            self.stack[-1] = ConstantVariable(None) if value is None else value
            self.jump_to(inst.arg)
        else:
            self.push(item)

    def _require_generator_inlining(self) -> None:
        if not self.is_generator:
            raise Unsupported("generator code outside an inlined generator call")

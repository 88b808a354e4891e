"""Opcode handlers: generator functions, run lazily by their consumer.

An inlined generator function runs to its next YIELD_VALUE each time its consumer asks for an
item (InstructionTranslator.run_call, variables/generators.py GeneratorVariable), so the graph
interleaves producer and consumer as Python runs them. A value sent in becomes the value of the
paused `yield` expression; an exception thrown in is raised by the paused YIELD_VALUE, or, in a
`yield from`, thrown into the generator it delegates to first, as CPython 3.11's gen_throw does.
"""
from __future__ import annotations

from bytecode import Instr

from ..exc import Unsupported
from .variables import ConstantVariable, VariableTracker
from .variables.exceptions import ExceptionVariable, RaisedException
from .variables.generators import GeneratorVariable
from .variables.iterators import ListIteratorVariable


class GeneratorOps:
    """RETURN_GENERATOR, YIELD_VALUE, `yield from` (GET_YIELD_FROM_ITER, SEND); resuming a
    generator's body with a value sent or an exception thrown in."""

    def RETURN_GENERATOR(self, inst: Instr) -> None:
        self._require_generator_inlining()
        self.push(ConstantVariable(None))  # what the first resumption sends; POP_TOP drops it

    def YIELD_VALUE(self, inst: Instr) -> None:
        self._require_generator_inlining()
        self.yielded_value = self.pop()
        self.push(ConstantVariable(None))  # the value of the yield expression, unless one is sent
        self.suspended = True  # run() returns; the consumer resumes us for the next item

    def GET_YIELD_FROM_ITER(self, inst: Instr) -> None:
        self.GET_ITER(inst)

    def SEND(self, inst: Instr) -> None:
        """`yield from`: pass the inner iterator's items through (and what is sent in, to a
        generator), then continue with its return value (a generator's `return v`; None for any
        other iterator)."""
        sent = self.pop()
        iterator = self.stack[-1]
        if not isinstance(iterator, ListIteratorVariable):
            raise Unsupported(f"yield from {iterator.describe()}")
        if sent.is_python_constant() and sent.as_python_constant() is None:
            item = iterator.next()
            done, value = item is None, iterator.stop_value
        elif isinstance(iterator, GeneratorVariable):
            try:
                item, done = iterator.call_method(self, "send", [sent], {}), False
            except RaisedException as raised:
                if not issubclass(raised.value.exc_type, StopIteration):
                    raise
                item, done, value = None, True, raised.value.args[0] if raised.value.args else None
        else:
            raise Unsupported(f"a value sent through `yield from` a {iterator.python_type().__name__}")
        if done:
            self.stack[-1] = ConstantVariable(None) if value is None else value
            self.jump_to(inst.arg)
        else:
            self.push(item)

    # -- resuming the generator's body (GeneratorVariable asks) -------------------------------------
    def resume_generator(self) -> VariableTracker | None:
        """Run an inlined generator to its next yield: the value yielded, or None once it returns."""
        self.suspended = False
        thrown, self.thrown = self.thrown, None
        if thrown is not None and self._throw_at_yield(thrown):
            return self.yielded_value  # the generator it delegates to yielded again
        self.run()
        return self.yielded_value if self.suspended else None

    def send_value(self, value: VariableTracker) -> None:
        """`gen.send(value)`: the paused yield expression's value (YIELD_VALUE pushed None)."""
        self.stack[-1] = value

    def throw_value(self, exc: ExceptionVariable) -> None:
        """`gen.throw(exc)`: raised at the paused yield when the body is resumed."""
        self.thrown = exc

    def _throw_at_yield(self, exc: ExceptionVariable) -> bool:
        """Raise `exc` at the paused YIELD_VALUE (its handler runs next, or it leaves the body). In
        a `yield from` loop (SEND; YIELD_VALUE) it goes to the delegated generator first: True if
        that yielded a value, which this body passes on, paused at the same yield."""
        yield_index = self.ip - 1
        self.pop()  # the yield expression's value
        before = self.instructions[yield_index - 1]
        delegate = self.stack[-1] if getattr(before, "name", None) == "SEND" else None
        if isinstance(delegate, GeneratorVariable):
            method, args = ("close", []) if exc.exc_type is GeneratorExit else ("throw", [exc])
            try:
                item = delegate.call_method(self, method, args, {})
            except RaisedException as raised:
                if not issubclass(raised.value.exc_type, StopIteration) or method == "close":
                    self.catch(yield_index, raised)
                    return False
                value = raised.value.args[0] if raised.value.args else ConstantVariable(None)
                self.stack[-1] = value  # `yield from` is done: on past the loop with its value
                self.jump_to(before.arg)
                return False
            if method == "throw":
                self.yielded_value, self.suspended = item, True
                self.push(ConstantVariable(None))
                return True
            # the delegate closed cleanly: GeneratorExit is raised here next
        self.catch(yield_index, RaisedException(exc))
        return False

    def _require_generator_inlining(self) -> None:
        if not self.is_generator:
            raise Unsupported("generator code outside an inlined generator call")

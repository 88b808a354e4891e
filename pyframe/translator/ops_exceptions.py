"""Opcode handlers: raise, and the handlers of 3.11's exception table (PUSH_EXC_INFO,
CHECK_EXC_MATCH, POP_EXCEPT, RERAISE). See variables/exceptions.py for how an exception unwinds."""
from __future__ import annotations

from bytecode import Instr

from ..exc import Unsupported
from .variables.constant import ConstantVariable
from .variables.exceptions import ExceptionVariable, RaisedException, is_exception_class


class ExceptionOps:
    def RAISE_VARARGS(self, inst: Instr) -> None:
        if inst.arg == 0:  # bare `raise`: the exception being handled
            current = self.handled_exception()
            if current is None:
                raise Unsupported("bare raise with no exception being handled")
            raise RaisedException(current)
        cause = self.pop() if inst.arg == 2 else None
        exc = self.pop()
        if not isinstance(exc, ExceptionVariable):
            if not (exc.is_python_constant() and is_exception_class(exc.as_python_constant())):
                raise Unsupported(f"raise of {exc}")
            exc = ExceptionVariable.make(exc.as_python_constant(), [], {})  # `raise ValueError`
        if cause is not None:
            exc.cause, exc.suppress_context = cause, True
        raise RaisedException(exc)

    def PUSH_EXC_INFO(self, inst: Instr) -> None:
        exc = self.pop()
        current = self.handled_exception()
        self.push(current if current is not None else ConstantVariable(None))
        self.push(exc)
        self.exception_stack.append(exc)

    def CHECK_EXC_MATCH(self, inst: Instr) -> None:
        kinds = self.pop()
        exc = self.stack[-1]
        self.push(ConstantVariable(issubclass(exc.python_type(), kinds.as_python_constant())))

    def POP_EXCEPT(self, inst: Instr) -> None:
        self.pop()  # the exception handled before this one (sys.exc_info() is restored to it)
        if self.exception_stack:
            self.exception_stack.pop()

    def RERAISE(self, inst: Instr) -> None:
        exc = self.pop()
        if inst.arg:
            self.pop()  # the instruction offset to report: CPython sets f_lasti from it
        if not isinstance(exc, ExceptionVariable):
            raise Unsupported(f"re-raise of {exc}")
        raise RaisedException(exc)

"""Opcode handlers: the 3.11 call sequence.

`[PUSH_NULL | LOAD_GLOBAL(push_null)] callable args... [KW_NAMES] PRECALL n; CALL n`, where
LOAD_METHOD leaves (NULL, bound method) below the arguments, and CALL_FUNCTION_EX takes a tuple
(and a dict when its flag is set) above (NULL, callable).
"""
from __future__ import annotations

from bytecode import Instr

from ..exc import Unsupported
from .variables import DictVariable, NullVariable, VariableTracker
from .variables.functions import CellReference, NestedFunctionVariable


class CallOps:
    def PUSH_NULL(self, inst: Instr) -> None:
        self.push(NullVariable())

    def KW_NAMES(self, inst: Instr) -> None:
        self.kw_names = tuple(inst.arg)

    def PRECALL(self, inst: Instr) -> None:
        pass  # CALL does the work; the NULL/self slot is resolved there

    def CALL(self, inst: Instr) -> None:
        args = self.popn(inst.arg)
        callable_or_self = self.pop()
        null_or_method = self.pop()
        if not isinstance(null_or_method, NullVariable):  # (method, self): self is the first argument
            fn, args = null_or_method, [callable_or_self, *args]
        else:
            fn = callable_or_self
        kw_names, self.kw_names = self.kw_names, ()
        kwargs: dict[str, VariableTracker] = {}
        if kw_names:
            kwargs = dict(zip(kw_names, args[-len(kw_names):]))
            args = args[:-len(kw_names)]
        self.push(fn.call(self, args, kwargs))

    def CALL_FUNCTION_EX(self, inst: Instr) -> None:
        kwargs_var = self.pop() if inst.arg & 1 else None
        args_var = self.pop()
        fn = self.pop()
        null = self.pop()
        if not isinstance(null, NullVariable):
            raise Unsupported("CALL_FUNCTION_EX without NULL")
        kwargs: dict[str, VariableTracker] = {}
        if kwargs_var is not None:
            if not isinstance(kwargs_var, DictVariable):
                raise Unsupported(f"**{kwargs_var} in a call")
            if not all(type(k) is str for k in kwargs_var.items):
                raise Unsupported("**mapping with keys that are not strings in a call")
            kwargs = dict(kwargs_var.items)
        self.push(fn.call(self, args_var.unpack(self), kwargs))

    def MAKE_FUNCTION(self, inst: Instr) -> None:
        # 3.11 stack: [defaults] [kwdefaults] [annotations] [closure] code
        code = self.pop().as_python_constant()
        closure = self.pop().unpack(self) if inst.arg & 0x08 else []
        # 3.11: the annotations are a flat tuple (name, value, name, value...); kept as the
        # function's `__annotations__` (read, and set where it is rebuilt)
        annotations = self.pop().unpack(self) if inst.arg & 0x04 else None
        kwdefaults = self.pop() if inst.arg & 0x02 else None
        defaults = self.pop() if inst.arg & 0x01 else None
        if not all(isinstance(c, CellReference) for c in closure):
            raise Unsupported("closure of a function made while tracing")
        fn = NestedFunctionVariable(
            code, self.f_globals,
            tuple(defaults.unpack(self)) if defaults is not None else (),
            dict(kwdefaults.items) if isinstance(kwdefaults, DictVariable) else {},
            closure, self.fn_source)
        fn.annotated = bool(inst.arg & 0x04)
        if annotations is not None:
            names = [name.as_python_constant() for name in annotations[::2]]
            fn.names["__annotations__"] = DictVariable(dict(zip(names, annotations[1::2])))
        # made by an inlined function of another module: rebuilt with that module's globals
        fn.foreign_globals = self.f_globals is not self.root.f_globals
        self.push(fn)

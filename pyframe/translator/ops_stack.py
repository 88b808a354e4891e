"""Opcode handlers: stack shuffles, operators, subscripts, building and unpacking containers."""
from __future__ import annotations

import contextlib
import operator

import torch
from bytecode import BinaryOp, Compare, Instr

from ..exc import Unsupported
from .variables import (
    BuiltinVariable, ConstantVariable, DictVariable, ListVariable, TensorVariable, TupleVariable, VariableTracker,
)
from .variables.lists import FrameListVariable
from .variables.sets import SetVariable
from .variables.dict_subclass import DictSubclassMixin, mapping_or_pairs
from .variables.contexts import AutocastVariable, GeneratorContextVariable, GradModeVariable
from .variables.objects import NewObjectVariable
from .variables.tensor import call_in_graph

_BINARY_OPS = {
    BinaryOp.ADD: operator.add, BinaryOp.AND: operator.and_, BinaryOp.FLOOR_DIVIDE: operator.floordiv,
    BinaryOp.LSHIFT: operator.lshift, BinaryOp.MATRIX_MULTIPLY: operator.matmul, BinaryOp.MULTIPLY: operator.mul,
    BinaryOp.REMAINDER: operator.mod, BinaryOp.OR: operator.or_, BinaryOp.POWER: operator.pow,
    BinaryOp.RSHIFT: operator.rshift, BinaryOp.SUBTRACT: operator.sub, BinaryOp.TRUE_DIVIDE: operator.truediv,
    BinaryOp.XOR: operator.xor, BinaryOp.INPLACE_ADD: operator.iadd, BinaryOp.INPLACE_AND: operator.iand,
    BinaryOp.INPLACE_FLOOR_DIVIDE: operator.ifloordiv, BinaryOp.INPLACE_LSHIFT: operator.ilshift,
    BinaryOp.INPLACE_MATRIX_MULTIPLY: operator.imatmul, BinaryOp.INPLACE_MULTIPLY: operator.imul,
    BinaryOp.INPLACE_REMAINDER: operator.imod, BinaryOp.INPLACE_OR: operator.ior,
    BinaryOp.INPLACE_POWER: operator.ipow, BinaryOp.INPLACE_RSHIFT: operator.irshift,
    BinaryOp.INPLACE_SUBTRACT: operator.isub, BinaryOp.INPLACE_TRUE_DIVIDE: operator.itruediv,
    BinaryOp.INPLACE_XOR: operator.ixor,
}
_COMPARE_OPS = {Compare.LT: operator.lt, Compare.LE: operator.le, Compare.EQ: operator.eq,
                Compare.NE: operator.ne, Compare.GT: operator.gt, Compare.GE: operator.ge}
_FORMAT_CONVERSIONS = {0: None, 1: str, 2: repr, 3: ascii}


class StackOps:
    def _apply(self, fn, *args) -> None:
        self.push(BuiltinVariable(fn).call(self, list(args), {}))

    # -- shuffles --------------------------------------------------------------------------------
    def NOP(self, inst: Instr) -> None:
        pass

    RESUME = NOP

    def POP_TOP(self, inst: Instr) -> None:
        self.pop()

    def COPY(self, inst: Instr) -> None:
        self.push(self.stack[-inst.arg])

    def SWAP(self, inst: Instr) -> None:
        self.stack[-1], self.stack[-inst.arg] = self.stack[-inst.arg], self.stack[-1]

    def RETURN_VALUE(self, inst: Instr) -> None:
        self.return_value = self.pop()

    # -- operators -------------------------------------------------------------------------------
    def BINARY_OP(self, inst: Instr) -> None:
        b, a = self.pop(), self.pop()
        self._apply(_BINARY_OPS[inst.arg], a, b)

    def COMPARE_OP(self, inst: Instr) -> None:
        b, a = self.pop(), self.pop()
        self._apply(_COMPARE_OPS[inst.arg], a, b)

    def IS_OP(self, inst: Instr) -> None:
        b, a = self.pop(), self.pop()
        for value in (a, b):
            if isinstance(value, TensorVariable):
                value.realize(self)
        self._apply(operator.is_not if inst.arg else operator.is_, a, b)

    def CONTAINS_OP(self, inst: Instr) -> None:
        container, item = self.pop(), self.pop()
        result = BuiltinVariable(operator.contains).call(self, [container, item], {})
        self.push(ConstantVariable(not result.truth()) if inst.arg else result)

    def UNARY_NEGATIVE(self, inst: Instr) -> None:
        self._apply(operator.neg, self.pop())

    def UNARY_POSITIVE(self, inst: Instr) -> None:
        self._apply(operator.pos, self.pop())

    def UNARY_INVERT(self, inst: Instr) -> None:
        self._apply(operator.invert, self.pop())

    def UNARY_NOT(self, inst: Instr) -> None:
        self._apply(operator.not_, self.pop())

    # -- subscripts ------------------------------------------------------------------------------
    def BINARY_SUBSCR(self, inst: Instr) -> None:
        key, obj = self.pop(), self.pop()
        self._apply(operator.getitem, obj, key)

    def STORE_SUBSCR(self, inst: Instr) -> None:
        key, obj, value = self.pop(), self.pop(), self.pop()
        if isinstance(obj, TensorVariable):
            call_in_graph(self, "call_function", operator.setitem, [obj, key, value], {})
        elif isinstance(obj, DictVariable):
            obj.call_method(self, "__setitem__", [key, value], {})
        elif isinstance(obj, DictSubclassMixin):  # its __setitem__, inlined, or dict's
            obj.call_special(self, "__setitem__", [key, value])
        elif isinstance(obj, ListVariable) and isinstance(key.as_python_constant(), (int, slice)):
            index = key.as_python_constant()
            self.side_effects.mutate(obj)
            obj.store_item(index, value.unpack(self) if isinstance(index, slice) else value)
        else:
            raise Unsupported(f"item assignment on {obj}")

    def DELETE_SUBSCR(self, inst: Instr) -> None:
        """`del obj[key]` on a dict or list (a mapping pattern's `**rest` deletes the matched keys
        from its copy of the subject)."""
        key, obj = self.pop(), self.pop()
        if isinstance(obj, DictSubclassMixin):
            obj.call_special(self, "__delitem__", [key])
            return
        if not (isinstance(obj, DictVariable) or type(obj) in (ListVariable, FrameListVariable)):
            raise Unsupported(f"item deletion on {obj}")
        obj.call_method(self, "__delitem__", [key], {})

    def BUILD_SLICE(self, inst: Instr) -> None:
        parts = self.popn(inst.arg)
        self._apply(slice, *parts)

    # -- building --------------------------------------------------------------------------------
    def BUILD_TUPLE(self, inst: Instr) -> None:
        self.push(TupleVariable(self.popn(inst.arg)))

    def BUILD_LIST(self, inst: Instr) -> None:
        self.push(ListVariable(self.popn(inst.arg)))

    def BUILD_SET(self, inst: Instr) -> None:
        self.push(SetVariable.of(self.popn(inst.arg)))

    def SET_ADD(self, inst: Instr) -> None:
        value = self.pop()
        self.stack[-inst.arg].call_method(self, "add", [value], {})

    def SET_UPDATE(self, inst: Instr) -> None:
        values = self.pop()
        self.stack[-inst.arg].call_method(self, "update", [values], {})

    def BUILD_MAP(self, inst: Instr) -> None:
        flat = self.popn(2 * inst.arg)
        built = DictVariable({})
        for i in range(0, len(flat), 2):  # in order: a later equal key keeps the first key object
            built.store(self, flat[i], flat[i + 1])
        self.push(built)

    def BUILD_CONST_KEY_MAP(self, inst: Instr) -> None:
        keys = self.pop().as_python_constant()
        self.push(DictVariable(dict(zip(keys, self.popn(inst.arg)))))

    def _growing(self, depth: int) -> VariableTracker:
        """The container LIST_APPEND, LIST_EXTEND, MAP_ADD or DICT_UPDATE adds to. It is one the
        code is building, but in a resume function it may be a frame value (`{**create()}` broken
        at `create()`: the empty dict is passed in on the stack): then its growth is a mutation,
        replayed on the real one."""
        target = self.stack[-depth]
        if target.source is not None:
            self.side_effects.mutate(target)
        return target

    def LIST_APPEND(self, inst: Instr) -> None:
        value = self.pop()
        self._growing(inst.arg).items.append(value)

    def LIST_EXTEND(self, inst: Instr) -> None:
        values = self.pop()
        self._growing(inst.arg).items.extend(values.unpack(self))

    def LIST_TO_TUPLE(self, inst: Instr) -> None:
        self.push(TupleVariable(self.pop().unpack(self)))

    def MAP_ADD(self, inst: Instr) -> None:
        value, key = self.pop(), self.pop()
        self._growing(inst.arg).store(self, key, value)

    def DICT_UPDATE(self, inst: Instr) -> None:
        other = self.pop()
        if isinstance(other, DictSubclassMixin):  # `{**obj}`, `f(**obj)`: read as dict.update reads it
            self._growing(inst.arg).items.update(mapping_or_pairs(self, other, dict_merge=True))
            return
        if not isinstance(other, DictVariable):
            raise Unsupported(f"dict update from {other}")
        self._growing(inst.arg).update(self, other)

    DICT_MERGE = DICT_UPDATE

    def FORMAT_VALUE(self, inst: Instr) -> None:
        flags = inst.arg
        spec = self.pop().as_python_constant() if flags & 0x04 else ""
        value = self.pop().as_python_constant()
        conversion = _FORMAT_CONVERSIONS[flags & 0x03]
        if conversion is not None:
            value = conversion(value)
        self.push(ConstantVariable(format(value, spec)))

    def BUILD_STRING(self, inst: Instr) -> None:
        self.push(ConstantVariable("".join(p.as_python_constant() for p in self.popn(inst.arg))))

    # -- context managers --------------------------------------------------------------------------
    def BEFORE_WITH(self, inst: Instr) -> None:
        """Push the manager's bound __exit__, then what its __enter__ returns. The normal way out
        of the block calls that __exit__ with three Nones; a break inside the block is refused."""
        context = self.pop()
        if isinstance(context.real_object(), torch.autocast):
            context = AutocastVariable(context.real_object())
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

    # -- unpacking -------------------------------------------------------------------------------
    def UNPACK_SEQUENCE(self, inst: Instr) -> None:
        items = self.pop().unpack(self)
        if len(items) != inst.arg:
            raise Unsupported(f"unpacking {len(items)} values into {inst.arg}")
        self.stack.extend(reversed(items))

    def UNPACK_EX(self, inst: Instr) -> None:
        before, after = inst.arg & 0xFF, inst.arg >> 8
        items = self.pop().unpack(self)
        if len(items) < before + after:
            raise Unsupported(f"unpacking {len(items)} values into {before + after} or more")
        middle = ListVariable(items[before:len(items) - after])
        self.stack.extend(reversed([*items[:before], middle, *items[len(items) - after:]]))

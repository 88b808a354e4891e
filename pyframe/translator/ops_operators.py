"""Opcode handlers: operators and subscripts.

Every operator goes through BuiltinVariable (`a + b` is `BuiltinVariable(operator.add)`): on
tensors it records a graph node, on constants it folds, on user objects it inlines their dunder
methods (variables/builtins.py).
"""
from __future__ import annotations

import operator

from bytecode import BinaryOp, Compare, Instr

from ..exc import Unsupported
from .variables import BuiltinVariable, ConstantVariable, DictVariable, ListVariable, TensorVariable
from .variables.container_subclass import ContainerSubclassMixin
from .variables.dict_subclass import DictSubclassMixin
from .variables.lists import FrameListVariable
from .variables.ndarray import NdarrayVariable
from .variables.special_methods import inline_special
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


# Operators folded directly on plain numbers and strings (what BuiltinVariable's rules come to
# there: no handler takes them, the operator runs on the values, a constant is made of the result).
_FOLDED = frozenset({*(op for op in _BINARY_OPS.values() if op not in (operator.matmul, operator.imatmul)),
                     *_COMPARE_OPS.values(), operator.neg, operator.pos, operator.invert})
_SCALARS = frozenset({int, float, bool, str})
_SLICE_BOUNDS = frozenset({int, type(None)})


class OperatorOps:
    """Binary, unary and comparison operators, `is`, `in`, subscripts and slices."""

    def _apply(self, fn, *args) -> None:
        if fn in _FOLDED and all(type(a) is ConstantVariable and type(a.value) in _SCALARS for a in args):
            try:
                result = fn(*(a.value for a in args))
            except Exception:  # noqa: BLE001 (the rules below say why, as Unsupported)
                result = None
            if type(result) in _SCALARS:
                self.push(ConstantVariable(result))
                return
        self.push(BuiltinVariable(fn).call(self, list(args), {}))

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

    def BINARY_SUBSCR(self, inst: Instr) -> None:
        key, obj = self.pop(), self.pop()
        self._apply(operator.getitem, obj, key)

    def STORE_SUBSCR(self, inst: Instr) -> None:
        key, obj, value = self.pop(), self.pop(), self.pop()
        if isinstance(obj, NdarrayVariable):  # `a[0] = v`: NumPy's, recorded (`wrapped___setitem__`)
            obj.call_method(self, "__setitem__", [key, value], {})
        elif isinstance(obj, TensorVariable):
            call_in_graph(self, "call_function", operator.setitem, [obj, key, value], {})
        elif isinstance(obj, DictVariable):
            obj.call_method(self, "__setitem__", [key, value], {})
        elif isinstance(obj, (DictSubclassMixin, ContainerSubclassMixin)):  # its own, inlined, or the base's
            obj.call_special(self, "__setitem__", [key, value])
        elif isinstance(obj, ListVariable) and isinstance(key.as_python_constant(), (int, slice)):
            index = key.as_python_constant()
            self.side_effects.mutate(obj)
            obj.store_item(index, value.unpack(self) if isinstance(index, slice) else value)
        elif inline_special(self, obj, "__setitem__", [key, value]) is None:  # a user class's, inlined
            raise Unsupported(f"item assignment on {obj}")

    def DELETE_SUBSCR(self, inst: Instr) -> None:
        """`del obj[key]` on a dict or list (a mapping pattern's `**rest` deletes the matched keys
        from its copy of the subject)."""
        key, obj = self.pop(), self.pop()
        if isinstance(obj, (DictSubclassMixin, ContainerSubclassMixin)):  # its own, inlined, or the base's
            obj.call_special(self, "__delitem__", [key])
            return
        if inline_special(self, obj, "__delitem__", [key]) is not None:  # a user class's, inlined
            return
        if not (isinstance(obj, DictVariable) or type(obj) in (ListVariable, FrameListVariable)):
            raise Unsupported(f"item deletion on {obj}")
        obj.call_method(self, "__delitem__", [key], {})

    def BUILD_SLICE(self, inst: Instr) -> None:
        parts = self.popn(inst.arg)
        if all(type(p) is ConstantVariable and type(p.value) in _SLICE_BOUNDS for p in parts):
            self.push(ConstantVariable(slice(*[p.value for p in parts])))  # `x[:, :-1]`: a constant
            return
        self._apply(slice, *parts)

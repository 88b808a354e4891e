"""Torch function modes entered in traced code: `with Mode():` for a torch.overrides.TorchFunctionMode.

In eager, entering a mode pushes it on torch's torch-function stack (`_push_on_torch_function_stack`)
and every overridable torch call made while it is there (a torch function, a Tensor method, an
operator on tensors, an aten op through torch.ops) calls the top mode's
`__torch_function__(func, types, args, kwargs)` instead, with that mode popped for the duration of
the call, so that `func(*args)` inside it goes on to the next mode or runs.

The translator keeps the same stack symbolically (OutputGraph.torch_function_modes: the modes'
trackers; nothing is pushed for real, so an aborted trace leaves nothing behind) and routes the
calls it records (tensor.call_in_graph, the funnel of every tensor op) through the top mode: its
`__torch_function__` is inlined with the func eager would pass, so what the mode does (transformers'
masks index through torch._dynamo's TransformGetItemToIndex, which turns `t[i]` into an aten.index)
is what the graph records, as torch._dynamo 2.13 traces it (TorchFunctionModeVariable).

Not modelled: a mode active when the frame is entered (its calls are not traced through it), and
the property reads a mode sees in eager (`x.shape` calls it with `Tensor.shape.__get__`; the trace
reads the metadata). A graph break while a mode entered by the frame itself is on the stack runs
the frame as Python (translate.py): the code after the break would run without it.
"""
from __future__ import annotations

import operator
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from ...exc import Unsupported
from .base import VariableTracker
from .constant import ConstantVariable
from .dicts import DictVariable

# torch._C's stack operations, traced on the symbolic stack.
STACK_FUNCTIONS = frozenset({torch._C._push_on_torch_function_stack, torch._C._pop_torch_function_stack,
                             torch._C._len_torch_function_stack})

_UNARY = (operator.neg, operator.pos, operator.invert, operator.abs)
_BINARY = (operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv, operator.mod,
           operator.pow, operator.matmul, operator.lt, operator.le, operator.eq, operator.ne, operator.gt,
           operator.ge, operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ifloordiv,
           operator.imod, operator.ipow)
_BITWISE = (operator.and_, operator.or_, operator.xor, operator.lshift, operator.rshift, operator.iand,
            operator.ior, operator.ixor)  # (asked on integer tensors)
_OPERATORS = frozenset((*_UNARY, *_BINARY, *_BITWISE, operator.getitem))


def call_stack_function(tx, fn: Any, args: list[VariableTracker]) -> VariableTracker:
    """torch._C's push, pop and length of the torch-function stack (TorchFunctionMode.__enter__,
    __exit__; the length counts the modes active when the frame was entered too)."""
    modes = tx.output.torch_function_modes
    if fn is torch._C._push_on_torch_function_stack:
        if len(args) != 1 or not issubclass(args[0].python_type(), TorchFunctionMode):
            raise Unsupported("_push_on_torch_function_stack() of what is not a TorchFunctionMode")
        modes.append(args[0])
        return ConstantVariable(None)
    if fn is torch._C._pop_torch_function_stack:
        if not modes:
            raise Unsupported("_pop_torch_function_stack() of a mode the trace did not push")
        return modes.pop()
    return ConstantVariable(len(modes) + torch._C._len_torch_function_stack())


def _operator_table() -> dict[tuple, tuple[Any, tuple[int, ...]]]:
    """What eager passes a mode for each operator on tensors, found by asking torch: for
    (operator, which operands are tensors), the func and the order of the operands in its args
    (`2 - x` calls it with Tensor.__rsub__ and (x, 2))."""
    table: dict[tuple, tuple[Any, tuple[int, ...]]] = {}
    seen: list[tuple[Any, tuple]] = []

    class Record(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append((func, args))
            return func(*args, **(kwargs or {}))

    for op in _OPERATORS:
        dtype = torch.int64 if op in _BITWISE or op is operator.invert else torch.float32
        if op in _UNARY:
            patterns = [(True,)]
        elif op is operator.getitem:  # (the indexed operand is the tensor)
            patterns = [(True, True), (True, False)]
        else:
            patterns = [(True, True), (True, False), (False, True)]
        for pattern in patterns:
            operands = [torch.ones(2, dtype=dtype) if is_tensor else 1 for is_tensor in pattern]
            if op is operator.getitem and pattern[1]:
                operands[1] = torch.zeros((), dtype=torch.int64)
            seen.clear()
            try:
                with Record():
                    op(*operands)
            except Exception:  # noqa: BLE001 (an operator torch does not define on these operands)
                continue
            if not seen:
                continue
            func, args = seen[0]
            order = tuple(i for a in args for i, o in enumerate(operands) if o is a)
            if len(order) == len(operands):
                table[(op, pattern)] = (func, order)
    return table


_TABLE: dict | None = None


def _mode_func(op: str, target: Any, args: list[VariableTracker],
               pattern: tuple[bool, ...]) -> tuple[Any, list[VariableTracker]] | None:
    """The func and args eager's dispatch would hand a mode for the call the trace records, or None
    for a call it does not route (torch's own machinery). `pattern`: which args are tensors."""
    global _TABLE
    if op == "call_method":
        func = getattr(torch.Tensor, target, None)
        return (func, list(args)) if func is not None else None
    if op != "call_function":
        return None
    if target in _OPERATORS:
        if _TABLE is None:
            _TABLE = _operator_table()
        found = _TABLE.get((target, pattern))
        if found is None:
            return None
        func, order = found
        return func, [args[i] for i in order]
    if isinstance(target, (torch._ops.OpOverloadPacket, torch._ops.OpOverload)):
        return target, list(args)
    return (target, list(args)) if target in _overridable() else None


_OVERRIDABLE: frozenset | None = None


def _overridable() -> frozenset:
    global _OVERRIDABLE
    if _OVERRIDABLE is None:
        functions = torch.overrides.get_overridable_functions()
        _OVERRIDABLE = frozenset(f for fs in functions.values() for f in fs)
    return _OVERRIDABLE


def call_through_mode(tx, op: str, target: Any, args: list[VariableTracker], kwargs: dict[str, VariableTracker],
                      pattern: tuple[bool, ...]) -> VariableTracker | None:
    """The call inlined through the top mode's __torch_function__, the mode popped meanwhile; None
    when eager would not route it to a mode. `pattern`: which args are tensors (tensor.py, which
    has realized them in order, as recording the call would)."""
    routed = _mode_func(op, target, args, pattern)
    if routed is None:
        return None
    func, func_args = routed
    modes = tx.output.torch_function_modes
    mode = modes.pop()
    try:
        kwargs_vt = DictVariable(dict(kwargs)) if kwargs else ConstantVariable(None)
        return mode.call_method(tx, "__torch_function__",
                                [tx.wrap_constant(func), ConstantVariable(()), tx.make_tuple(func_args), kwargs_vt], {})
    finally:
        modes.append(mode)

"""Where torch._dynamo realizes graph inputs as a side effect of asking whether a value is a constant.

pyframe makes a tensor's placeholder when the trace reads it, and orders the placeholders at the end
as torch._dynamo creates them (graph_inputs.order_inputs_as_dynamo): a tensor read from the frame is
a lazy value there, made a graph input when first used or looked at (`TensorVariable.realize` marks
that moment here). Some of torch._dynamo's steps look at a container's items by converting it to a
Python constant, which realizes its items in order and stops at the first that is not a constant:
its GET_LEN (the `len` of a match statement's subject), and the inlining of a function made in the
frame, whose closure cells (then defaults) it tries to turn into a real function first.
"""
from __future__ import annotations

import torch

from ...exc import Unsupported
from .base import VariableTracker
from .dicts import DictVariable
from .dict_keys import ObjectKey
from .functions import CellReference, NestedFunctionVariable
from .lists import BaseListVariable
from .tensor import TensorVariable


def realize_as_a_constant_test(tx, value: VariableTracker, converting: frozenset[int] = frozenset()) -> bool:
    """Walk `value` as a conversion to a constant does (list and tuple items, a dict's keys and
    values, in order): realize the graph input met, and stop at the first value that is not a
    constant. True if every one was."""
    if isinstance(value, TensorVariable):
        value.realize(tx)
        return False
    if isinstance(value, BaseListVariable):
        return all(realize_as_a_constant_test(tx, item, converting) for item in value.items)
    if isinstance(value, DictVariable):
        return all(not isinstance(key, ObjectKey) and realize_as_a_constant_test(tx, item, converting)
                   for key, item in value.items.items())
    if isinstance(value, NestedFunctionVariable):
        return realize_as_a_function(tx, value, converting)
    if isinstance(value.real_object(), torch.nn.Module):  # (a user object to torch._dynamo: no constant)
        return False
    return value.is_python_constant()


def realize_as_a_function(tx, fn: NestedFunctionVariable, converting: frozenset[int] = frozenset()) -> bool:
    """Before inlining a function made in the frame (not a generator function), torch._dynamo
    tries to make it a real one: its closure cells' contents (in co_freevars order), then its
    defaults, as constants. A function met again while converting it (a recursive helper that
    closes over itself) stops the conversion, as it stops torch._dynamo's."""
    if id(fn) in converting:
        return False
    converting = converting | {id(fn)}
    for cell in fn.closure:
        try:
            value = cell.load() if isinstance(cell, CellReference) else cell
        except Unsupported:  # (a cell not yet filled: the conversion stops there)
            return False
        if not realize_as_a_constant_test(tx, value, converting):
            return False
    try:
        kwdefaults = fn.kwdefaults
    except Unsupported:  # (a __kwdefaults__ given a key that is not a str: inlining says so)
        return False
    parts = (*(fn.defaults or ()), *kwdefaults.values())
    return all(realize_as_a_constant_test(tx, part, converting) for part in parts)

"""The operators on lists, tuples and dicts the trace holds that builtins.py's handlers give over
to: `a + b` and `a * n` of lists and tuples (a new container of the same items), `l += items` and
`l *= n` (the list itself, changed: never a copy, even of constants), and `operator.setitem` /
`operator.delitem` called as functions (stored as `obj[k] = v` stores). Constants and tensors fall
through to the generic rules.
"""
from __future__ import annotations

import operator
from typing import Callable

import torch

from .base import VariableTracker
from .constant import ConstantVariable
from .container_subclass import ContainerSubclassMixin
from .dict_subclass import DictSubclassMixin
from .dicts import DictVariable
from .lists import BaseListVariable, FrameListVariable, ListVariable, SizeVariable, TupleVariable
from .special_methods import is_tensor

_INPLACE_TO_BINARY = {operator.iadd: operator.add, operator.imul: operator.mul}


def binary(fn: Callable) -> Callable:
    """Container forms of + and * (tuple + tuple, list * 2); constants and tensors fall through."""
    def handler(tx, a: VariableTracker, b: VariableTracker) -> VariableTracker | None:
        if is_tensor(a) or is_tensor(b):
            return None
        if type(a) in (ListVariable, FrameListVariable) and fn in (operator.iadd, operator.imul):
            # `l += items`, `l *= n`: the list itself, changed (never a copy, even of constants)
            if fn is operator.iadd:
                a.call_method(tx, "extend", [b], {})
                return a
            if b.is_python_constant() and type(b.as_python_constant()) in (int, bool):
                tx.side_effects.mutate(a)
                a.items[:] = a.items * b.as_python_constant()
                return a
            return None
        if a.is_python_constant() and b.is_python_constant():
            return None
        base = _INPLACE_TO_BINARY.get(fn, fn)
        if isinstance(a, BaseListVariable) and base is operator.add and isinstance(b, BaseListVariable) \
                and a.container_type is b.container_type:
            return type(a)(a.items + b.items)
        if isinstance(a, BaseListVariable) and base is operator.add and isinstance(b, BaseListVariable) \
                and a.container_type in (tuple, torch.Size) and b.container_type in (tuple, torch.Size):
            # (torch.Size's reflected + wins over tuple's: `(-1,) + x.shape[1:]` is a torch.Size)
            is_size = torch.Size in (a.container_type, b.container_type)
            return (SizeVariable if is_size else TupleVariable)(a.items + b.items)
        if isinstance(a, BaseListVariable) and base is operator.mul and b.is_python_constant():
            return type(a)(a.items * b.as_python_constant())
        return None
    return handler


def item_store(name: str) -> Callable:
    """`operator.setitem(obj, k, v)` / `operator.delitem(obj, k)` called as functions, on a dict or
    list the trace holds (or an instance of their subclasses): as `obj[k] = v` stores (the object
    itself changed, never a copy); tensors fall through."""
    def handler(tx, obj: VariableTracker, *args: VariableTracker) -> VariableTracker | None:
        if isinstance(obj, (DictSubclassMixin, ContainerSubclassMixin)):
            obj.call_special(tx, name, list(args))
        elif isinstance(obj, DictVariable) or type(obj) in (ListVariable, FrameListVariable):
            obj.call_method(tx, name, list(args), {})
        else:
            return None
        return ConstantVariable(None)
    return handler


CONTAINER_OPERATORS: dict[Callable, Callable] = {
    **{fn: binary(fn) for fn in (operator.add, operator.iadd, operator.mul, operator.imul)},
    operator.iconcat: binary(operator.iadd),
    operator.setitem: item_store("__setitem__"), operator.delitem: item_store("__delitem__"),
}

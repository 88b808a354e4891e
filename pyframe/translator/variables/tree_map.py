"""torch.utils._pytree.tree_map over the containers the trace holds, as torch._dynamo maps it.

torch._dynamo 2.13 does not trace tree_map's Python when the tree is made of lists, tuples and
dicts with tensors and constants as leaves: it calls the function on each leaf itself, in the order
flattening gives them, and builds containers of the same types from the results. So no local of
pytree's (`child` in tree_flatten, `value` in map) ever holds a leaf, and the graph's nodes keep
their ops' names (`add`, `sin_2`). pyframe maps such trees the same way; any other subtree (a user
object, a namedtuple, an `is_leaf`) is mapped by the real tree_map, inlined.
"""
from __future__ import annotations

import collections
from typing import Any

import torch
import torch.utils._pytree as python_pytree

from .base import VariableTracker
from .constant import ConstantVariable
from .dicts import DictVariable
from .functions import UserFunctionVariable
from .lists import ListVariable, TupleVariable
from .tensor import TensorVariable

# Leaves both pytrees give the function as they are (None too: torch's pytrees make it a leaf).
_CONSTANT_LEAVES = (int, float, bool, complex, str, bytes, torch.dtype, type(None))


def is_tree_map(value: Any) -> bool:
    return value is python_pytree.tree_map


class TreeMapFunctionVariable(UserFunctionVariable):
    """`tree_map(fn, tree, *rests)`: the fast path above; with another keyword (a non-None
    `is_leaf`), the real function inlined."""

    def call(self, tx, args, kwargs) -> VariableTracker:
        is_leaf = kwargs.get("is_leaf")
        plain = set(kwargs) <= {"is_leaf"} and (is_leaf is None or _is_none(is_leaf))
        if not plain or len(args) < 2:
            return super().call(tx, args, kwargs)
        return self._map(tx, args[0], args[1], list(args[2:]), kwargs)

    def _map(self, tx, fn: VariableTracker, tree: VariableTracker, rests: list[VariableTracker],
             kwargs: dict) -> VariableTracker:
        if isinstance(tree, TensorVariable) or (
                isinstance(tree, ConstantVariable) and isinstance(tree.as_python_constant(), _CONSTANT_LEAVES)):
            return fn.call(tx, [tree, *rests], {})
        if type(tree) is TupleVariable or (isinstance(tree, ListVariable) and tree.python_type() is list):
            if all(type(r) is type(tree) and len(r.items) == len(tree.items) for r in rests):
                mapped = [self._map(tx, fn, item, [r.items[i] for r in rests], kwargs)
                          for i, item in enumerate(tree.items)]
                return TupleVariable(mapped) if type(tree) is TupleVariable else ListVariable(mapped)
        if isinstance(tree, DictVariable) and tree.python_type() in (dict, collections.OrderedDict):
            if all(isinstance(r, DictVariable) and r.items.keys() == tree.items.keys() for r in rests):
                mapped = {key: self._map(tx, fn, value, [r.items[key] for r in rests], kwargs)
                          for key, value in tree.items.items()}
                return DictVariable(mapped, None, tree.python_type())
        return super().call(tx, [fn, tree, *rests], kwargs)  # (torch._dynamo's fallback, for this subtree)


def _is_none(value: VariableTracker) -> bool:
    return value.is_python_constant() and value.as_python_constant() is None

"""What an int, float, bool, string or bytes read from the frame becomes, by torch._dynamo's rules.

- An int read from the frame's locals (an argument `n`, an item or attribute of one, `obj.n`,
  `sizes[0]`, a cell's contents), seen with another value before (automatic dynamic) or under
  `dynamic=True`: a SymInt input of the graph (`OutputGraph.add_int_input`). An nn.Module's ints,
  globals and a function's defaults stay static (torch._dynamo's `is_int_specialization_case`).
- Else a lazy constant (`ConstantVariable.lazy`, torch._dynamo's LazyConstantVariable): guarded by
  its value when the trace first uses it; one only passed through (returned as it is, handed to a
  resume function) is read again from its source, unguarded, so a call with another value
  compiles nothing. Its use is also when its value is seen for automatic dynamic.
"""
from __future__ import annotations

import functools
from typing import Any

from ...guards import GuardKind
from ...source import AttrSource, CellContentsSource, ChildSource, ClosureSource, LocalSource, Source
from .base import Tracer, VariableTracker
from .constant import ConstantVariable
from .nn_module import NNModuleVariable
from .tensor import SymNodeVariable

# torch._dynamo's LazyConstantVariable.supported_types, and bytes: torch._dynamo wraps a dict's values
# lazily, so of a table of bytes (os.environ's) only the values the trace reads are guarded
NUMBER_INPUT_TYPES = (int, float, bool, str, bytes)
_DEFAULTS_ATTRS = ("__defaults__", "__kwdefaults__")


def wrap_number_input(tx: Tracer, value: Any, source: Source) -> VariableTracker:
    """The tracker of `value` (of a NUMBER_INPUT_TYPES type) read from `source`, guarded."""
    unspecialized = type(value) is int and unspecialized_int_source(tx, source)
    if unspecialized and tx.output.shapes.int_may_be_dynamic(source, value):
        node = tx.output.add_int_input(source, value)
        if node is not None:
            tx.output.guards.add(source, GuardKind.TYPE_MATCH, int)
            return SymNodeVariable(node, source)
    # (an int that may become symbolic, and a float, torch._dynamo realizes to call a builtin on it)
    return ConstantVariable.lazy(value, source, functools.partial(_use, tx, source, value, unspecialized),
                                 unspecialized or type(value) is float)


def _use(tx: Tracer, source: Source, value: Any, unspecialized: bool) -> None:
    """A lazy constant's value is used: guarded by it, and (an int that may become dynamic) its
    value seen, as torch._dynamo sees it when it realizes one."""
    if unspecialized:
        tx.output.shapes.int_is_dynamic(source, value)
    tx.output.guards.add(source, GuardKind.EQUALS_MATCH, value)


def unspecialized_int_source(tx: Tracer, source: Source) -> bool:
    """Whether an int read from `source` may become a SymInt input, by torch._dynamo's rule
    (utils.is_int_specialization_case): it comes from the frame's locals (an argument, an item or
    attribute of one, a cell's contents), not from a global, a function's defaults or an
    nn.Module (a module's ints are its configuration, kept static)."""
    while isinstance(source, ChildSource):
        if isinstance(source, AttrSource) and source.attr in _DEFAULTS_ATTRS:
            return False
        source = source.base
        if isinstance(tx.side_effects.known(source), NNModuleVariable):
            return False
    return isinstance(source, (LocalSource, ClosureSource, CellContentsSource))

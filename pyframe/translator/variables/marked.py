"""Functions the user marked for the frontend (pyframe.markers: pyframe's markers and torch.compiler's).

- `disallow_in_graph`'d (`torch.sub`): a graph break at each call, which runs as Python.
- `disable(fn, recursive=False)`'s wrapper, pyframe's or torch's: a graph break; the call runs the
  wrapper, whose callee the miss path runs as Python while compiling what it calls.
- `substitute_in_graph(original)(polyfill)`: the polyfill inlined in place of `original`.
- `assume_constant_result`: called now, on constants, its result a constant of the trace (unguarded).
- `nonstrict_trace`: one node calling the function, its body never traced (run on FakeTensors).
"""
from __future__ import annotations

from typing import Any, Callable

from ... import markers
from ...exc import Unsupported
from ...guards import GuardKind
from ...source import Source
from .base import VariableTracker, constant_args
from .constant import ConstantVariable, is_constant_value
from .descriptions import describe_value
from .objects import PythonObjectVariable
from .tensor import call_in_graph


def _name(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or describe_value(fn)


def _call_on_constants(fn: Callable, args: list[VariableTracker], kwargs: dict[str, VariableTracker],
                       what: str) -> Any:
    """`fn` called now on the arguments' constant values; Unsupported (the call then runs as Python,
    raising again if it raises) when they are not constants or the call raises."""
    pargs, pkwargs = constant_args(args, kwargs, f"{what} called")
    try:
        return fn(*pargs, **pkwargs)
    except Exception as e:
        raise Unsupported(f"{what} raises {type(e).__name__} on these constants") from e


class DisallowedFunctionVariable(PythonObjectVariable):
    """A callable disallow_in_graph marked: each call is a graph break and runs as Python."""

    def call(self, tx, args, kwargs) -> VariableTracker:
        raise Unsupported(f"call to {_name(self.value)}, which disallow_in_graph keeps out of the graph")


class SkippedFrameFunctionVariable(PythonObjectVariable):
    """The wrapper disable(fn, recursive=False) made: a graph break; the wrapper runs for real, and
    the miss path runs `fn`'s frame as Python (what it calls is compiled)."""

    def call(self, tx, args, kwargs) -> VariableTracker:
        raise Unsupported(f"call to {_name(self.value)}, whose frame disable(recursive=False) runs as Python")


class SubstitutedFunctionVariable(PythonObjectVariable):
    """A function with a polyfill (substitute_in_graph): the polyfill is inlined in its place; on
    constants alone, with can_constant_fold_through, the original gives the result now."""

    def __init__(self, value: Any, original: Callable, polyfill: Callable, fold: bool, source=None):
        super().__init__(value, source)
        self.original, self.polyfill, self.fold = original, polyfill, fold

    def call(self, tx, args, kwargs) -> VariableTracker:
        if self.fold and all(a.is_python_constant() for a in (*args, *kwargs.values())):
            return tx.wrap_constant(_call_on_constants(self.original, args, kwargs, _name(self.original)))
        return tx.inline_call(self.polyfill, list(args), dict(kwargs))

    def describe(self) -> str:
        return f"{_name(self.value)} (substituted by {_name(self.polyfill)})"


class AssumedConstantFunctionVariable(PythonObjectVariable):
    """A function assume_constant_result marked: called now on constant arguments; its result is
    a constant of the trace, never guarded (the user vouches that it does not change)."""

    def call(self, tx, args, kwargs) -> VariableTracker:
        result = _call_on_constants(self.value, args, kwargs, f"{_name(self.value)}, marked assume_constant_result,")
        if not is_constant_value(result):
            raise Unsupported(f"{_name(self.value)}, marked assume_constant_result, returned "
                              f"{type(result).__name__}, not a constant")
        return ConstantVariable(result)


class NonstrictFunctionVariable(PythonObjectVariable):
    """A function nonstrict_trace marked: one node of the graph calling it, run on FakeTensors while
    tracing; its body is never traced (torch._dynamo records it through its flat_apply op)."""

    def call(self, tx, args, kwargs) -> VariableTracker:
        try:
            return call_in_graph(tx, "call_function", self.value, args, kwargs)
        except Unsupported:
            raise
        except Exception as e:  # (its body failed on FakeTensors: it runs as Python)
            raise Unsupported(f"{_name(self.value)}, marked nonstrict_trace, fails on FakeTensors "
                              f"({type(e).__name__}: {e})") from e


def wrap_marked(value: Any, source: Source | None, guards: Any) -> VariableTracker | None:
    """The tracker of a function marked with pyframe's or torch.compiler's markers, guarded by
    identity (when `guards` is given), or None for anything else. (allow_in_graph's functions are
    recorded as torch ops: variables/torch.py.)"""
    if not isinstance(value, markers.MARKABLE):  # (never an object whose __hash__ or __getattr__ runs code)
        return None
    kind = markers.marker_of(value)
    if kind is None:
        return None
    if kind is markers.SUBSTITUTED:
        tracker: VariableTracker = SubstitutedFunctionVariable(value, *markers.substitute_of(value), source)
    else:
        tracker = _TRACKERS[kind](value, source)
    if guards is not None and source is not None:
        guards.add(source, GuardKind.ID_MATCH, value)
    return tracker


_TRACKERS: dict[str, Callable[[Any, Source | None], VariableTracker]] = {
    markers.SKIPPED_FRAME: SkippedFrameFunctionVariable, markers.ASSUMED_CONSTANT: AssumedConstantFunctionVariable,
    markers.NONSTRICT: NonstrictFunctionVariable, markers.DISALLOWED: DisallowedFunctionVariable,
}

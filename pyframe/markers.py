"""What the user marks on functions for the translator: pyframe's markers and torch.compiler's.

torch.compiler's markers tell the frontend how to treat a function it meets while tracing; pyframe
offers the same markers (`pyframe.allow_in_graph`, ...: decorators.py checks what they are given
and records it here) and honours torch's own, so code written for torch.compile keeps its meaning.
Each is a registry by id, or an attribute on the function, that the translator asks
(`translator/variables/builder.py`):

- allowed in the graph (`allow_in_graph`): recorded as one node calling the function, run on
  FakeTensors while tracing (after a probe that it has no Python side effect, variables/torch.py);
- disallowed (`disallow_in_graph`, on what would be recorded as a node: `torch.sub`): a graph
  break at each call, the call run as Python;
- traced nonstrictly (`nonstrict_trace`): one node, its body never traced (graph breaks inside it
  are allowed), called on FakeTensors while tracing;
- substituted (`substitute_in_graph(original)(polyfill)`): where the trace calls `original`, it
  inlines `polyfill` instead (a C function, whose body cannot be traced, given a Python twin);
- assumed constant (`assume_constant_result`, torch's attribute `_dynamo_marked_constant`): called
  once while tracing, on constant arguments, and its result used as a constant, unguarded;
- `is_compiling()`: False when run, answered True while pyframe (or torch._dynamo) traces;
- skipped frame (`disable(fn, recursive=False)`): `fn`'s own frame runs as Python, the functions
  it calls are compiled. The wrapper's code is what the miss path looks for in the caller's frame
  (`NONRECURSIVE_WRAPPER_CODE`), as torch._dynamo looks for its own wrapper's.

torch's registries live in torch._dynamo, which pyframe does not import for this: they are read
only once torch._dynamo is loaded (nothing can be registered in them before).
"""
from __future__ import annotations

import functools
import sys
import types
import weakref
from typing import Any, Callable, TypeVar

import torch

F = TypeVar("F", bound=Callable[..., Any])

# What can be disallowed or substituted: functions, C functions and methods, aten ops (all hashed
# by identity; a user object's __hash__ or __getattr__ is never run to ask).
MARKABLE = (types.FunctionType, types.BuiltinFunctionType, types.MethodDescriptorType, types.WrapperDescriptorType,
            torch._ops.OpOverloadPacket, torch._ops.OpOverload)


class _IdRegistry:
    """Functions by id. One that can be weakly referenced leaves when it dies (its id may be reused
    by another object); one that cannot (a builtin, `torch.sub`) is kept alive by the registry."""

    def __init__(self) -> None:
        self._entries: dict[int, Any] = {}

    def add(self, fn: Any) -> None:
        key = id(fn)
        if key in self._entries:
            return
        try:
            self._entries[key] = weakref.finalize(fn, self._entries.pop, key, None)
        except TypeError:
            self._entries[key] = fn

    def discard(self, fn: Any) -> None:
        entry = self._entries.pop(id(fn), None)
        if isinstance(entry, weakref.finalize):
            entry.detach()

    def __contains__(self, fn: Any) -> bool:
        return id(fn) in self._entries

    def __bool__(self) -> bool:
        return bool(self._entries)


allowed = _IdRegistry()
disallowed = _IdRegistry()
nonstrict = _IdRegistry()
# id(original) and id(the wrapper substitute_in_graph returned) -> (original, polyfill,
# can_constant_fold_through); the pairs are kept alive, so that their ids stay theirs.
substitutes: dict[int, tuple[Any, Callable, bool]] = {}
substitute_holders: list[tuple[Any, Callable]] = []


def is_compiling() -> bool:
    """True while pyframe or torch._dynamo traces the code that asks, False when it runs (as
    torch.compiler.is_compiling: a branch on it is decided while tracing, not guarded)."""
    return torch.compiler.is_compiling()


def nonrecursive_disable(fn: F) -> F:
    """`fn` wrapped so that its own frame runs as Python while the functions it calls are compiled
    (pyframe.disable(fn, recursive=False)); calling the wrapper from traced code breaks the graph."""
    @functools.wraps(fn)
    def run_frame_as_python(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    run_frame_as_python._pyframe_disabled = fn  # type: ignore[attr-defined]
    return run_frame_as_python  # type: ignore[return-value]


# The code of every wrapper nonrecursive_disable makes: a frame called from it is not compiled.
NONRECURSIVE_WRAPPER_CODE = nonrecursive_disable(lambda: None).__code__


# ---- torch.compiler's registries, read once torch._dynamo is loaded ---------------------------

def _torch_rules() -> Any:
    return sys.modules.get("torch._dynamo.trace_rules")


def allowed_in_graph(fn: Any) -> bool:
    """Registered with pyframe.allow_in_graph or torch.compiler's allow_in_graph (not with
    torch's nonstrict_trace, whose functions share that registry of torch's: NONSTRICT)."""
    key = id(fn)
    if key in allowed._entries:
        return True
    rules = sys.modules.get("torch._dynamo.trace_rules")  # (nothing is registered before it loads)
    return rules is not None and key in rules._allowed_callable_ids and key not in rules._nonstrict_trace_callable_ids


def torch_nonstrict(fn: Any) -> bool:
    rules = _torch_rules()
    return rules is not None and id(fn) in rules._nonstrict_trace_callable_ids



def substitute_of(fn: Any) -> tuple[Any, Callable, bool] | None:
    """(original, polyfill, can_constant_fold_through) when the trace inlines a polyfill in place of
    `fn`: pyframe's substitute_in_graph, or torch.compiler.substitute_in_graph's for a function the
    user registered (torch's own polyfills of the standard library are not taken: pyframe models
    those functions itself)."""
    found = substitutes.get(id(fn))
    if found is not None:
        return found
    if isinstance(fn, types.FunctionType):  # the wrapper torch's substitute_in_graph returned
        polyfill = fn.__dict__.get("__torch_dynamo_polyfill__")
        if isinstance(polyfill, types.FunctionType) and not polyfill.__module__.startswith("torch."):
            return (fn.__dict__.get("__torch_dynamo_original__", fn), polyfill,
                    bool(fn.__dict__.get("__torch_dynamo_can_constant_fold_through__", False)))
    variables = sys.modules.get("torch._dynamo.variables")
    if variables is None or not isinstance(fn, MARKABLE):
        return None
    wrapper = variables.PolyfilledFunctionVariable._get_polyfill_handlers().get(fn)
    if wrapper is None or wrapper.__torch_dynamo_polyfill__.__module__.startswith("torch."):
        return None
    return (fn, wrapper.__torch_dynamo_polyfill__, bool(wrapper.__torch_dynamo_can_constant_fold_through__))


# What marker_of answers: the kind of marking the translator acts on.
SKIPPED_FRAME, ASSUMED_CONSTANT, NONSTRICT, DISALLOWED, SUBSTITUTED = (
    "skipped frame", "assumed constant", "nonstrict", "disallowed", "substituted")


def marker_of(fn: Any) -> str | None:
    """How `fn` (a function, C function or aten op, MARKABLE) is marked, pyframe's markers and
    torch.compiler's read together, or None. Asked of every function a trace reads, so it reads
    each registry once (allow_in_graph's functions are not asked here: variables/torch.py)."""
    key = id(fn)
    rules = sys.modules.get("torch._dynamo.trace_rules")
    if type(fn) is types.FunctionType:
        attributes = fn.__dict__
        if fn.__code__ is NONRECURSIVE_WRAPPER_CODE or attributes.get("_torchdynamo_disable_recursive") is False:
            return SKIPPED_FRAME
        if attributes.get("_dynamo_marked_constant") is True:
            return ASSUMED_CONSTANT
        if key in nonstrict._entries or (rules is not None and key in rules._nonstrict_trace_callable_ids):
            return NONSTRICT
    if key in disallowed._entries or (rules is not None and key in rules._disallowed_callable_ids
                                      and getattr(fn, "__module__", None) != "torch._dynamo.decorators"):
        # (torch._dynamo's graph_break, skip_frame and step_unsupported are in its disallowed set
        # too: the builder handles them apart)
        return DISALLOWED
    return SUBSTITUTED if substitute_of(fn) is not None else None




def torch_nonrecursive_wrapper_code() -> types.CodeType | None:
    """The code of torch.compiler.disable(fn, recursive=False)'s wrappers, once torch._dynamo is loaded."""
    decorators = sys.modules.get("torch._dynamo.decorators")
    return getattr(decorators, "_nonrecursive_disable_wrapper_code", None) if decorators is not None else None


def called_from_nonrecursive_wrapper(frame: types.FrameType | None) -> bool:
    """`frame` (the caller of a frame the hook met) is a wrapper of disable(fn, recursive=False), of
    pyframe's or torch's: the frame it calls runs as Python."""
    if frame is None:
        return False
    code = frame.f_code
    return code is NONRECURSIVE_WRAPPER_CODE or code is torch_nonrecursive_wrapper_code()

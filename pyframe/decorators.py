"""The markers and stances of torch.compiler, as pyframe's API: `pyframe.allow_in_graph`, ...

Each checks what it is given and records it where the translator looks (markers.py); the
translator honours torch.compiler's own markers the same way, so either spelling works in code
pyframe compiles. `set_stance` sets what entering a compiled region does (the C hook reads it,
`_C.stance()`; convert_frame.py acts on the stances that matter on a miss); torch.compiler's stance
is followed while pyframe's is the default. README "Markers and stances" lists each, with what
pyframe does.
"""
from __future__ import annotations

import functools
import inspect
import types
from typing import Any, Callable, TypeVar

from . import _C, markers
from .convert_frame import STANCES
from .translator.variables.torch import is_torch_op

F = TypeVar("F", bound=Callable[..., Any])

is_compiling = markers.is_compiling


def _check_callable(marker: str, fn: Any) -> None:
    if not callable(fn):
        raise TypeError(f"pyframe.{marker} expects a callable (a function, a torch op), "
                        f"not {type(fn).__name__}: {fn!r}")


def allow_in_graph(fn: F) -> F:
    """Record calls of `fn` as one node of the graph (torch.compiler.allow_in_graph): its body is not
    traced; it runs on FakeTensors while tracing, so it takes and returns tensors and constants. A
    list or tuple of functions marks each. A function found to have Python side effects (a probe
    traces it first, variables/torch.py) runs as Python at each call instead, so that they happen."""
    if isinstance(fn, (list, tuple)):
        return [allow_in_graph(f) for f in fn]  # type: ignore[return-value]
    _check_callable("allow_in_graph", fn)
    markers.disallowed.discard(fn)
    markers.allowed.add(fn)
    return fn


def disallow_in_graph(fn: F) -> F:
    """Break the graph at each call of `fn`, which then runs as Python between two graphs
    (torch._dynamo.disallow_in_graph). `fn` must be something the graph records as a node: a torch
    op (`torch.sub`) or a function allow_in_graph or nonstrict_trace marked. A list or tuple marks each."""
    if isinstance(fn, (list, tuple)):
        return [disallow_in_graph(f) for f in fn]  # type: ignore[return-value]
    _check_callable("disallow_in_graph", fn)
    if not (markers.allowed_in_graph(fn) or fn in markers.nonstrict or markers.torch_nonstrict(fn) or is_torch_op(fn)):
        raise TypeError(f"pyframe.disallow_in_graph expects a callable the graph records as a node (a torch op "
                        f"such as torch.sub, or a function marked with allow_in_graph), not {fn!r}; to break "
                        f"the graph at a function of your own, use pyframe.disable(fn)")
    markers.allowed.discard(fn)
    markers.nonstrict.discard(fn)
    markers.disallowed.add(fn)
    return fn


def nonstrict_trace(fn: F) -> F:
    """A function whose calls are recorded as one node calling `fn`, its body never traced
    (torch._dynamo.nonstrict_trace): `fn` may break the graph inside, since it runs as Python.
    While tracing it runs on FakeTensors; it takes and returns tensors, constants, and lists,
    tuples and dicts of them."""
    _check_callable("nonstrict_trace", fn)
    if fn in markers.nonstrict or markers.torch_nonstrict(fn):
        raise ValueError(f"pyframe.nonstrict_trace: {fn!r} is already marked")

    @functools.wraps(fn)
    def nonstrict_call(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    markers.nonstrict.add(nonstrict_call)
    return nonstrict_call  # type: ignore[return-value]


def substitute_in_graph(original_fn: Callable, *, can_constant_fold_through: bool = False,
                        skip_signature_check: bool = False) -> Callable[[types.FunctionType], Callable]:
    """Where the trace calls `original_fn` (a C function, whose body cannot be traced), inline the
    decorated Python function instead (torch.compiler.substitute_in_graph). Run eagerly, the
    function it returns calls `original_fn`. `can_constant_fold_through=True`: called on constants
    only, `original_fn` itself gives the result while tracing."""
    if not callable(original_fn) or isinstance(original_fn, type):
        raise TypeError(f"pyframe.substitute_in_graph expects a function, not {type(original_fn).__name__}: "
                        f"{original_fn!r}")

    def register(polyfill: types.FunctionType) -> Callable:
        if not isinstance(polyfill, types.FunctionType):
            raise TypeError(f"@pyframe.substitute_in_graph(...) decorates a Python function, not "
                            f"{type(polyfill).__name__}: {polyfill!r}")
        if not skip_signature_check:
            _check_same_signature(original_fn, polyfill)
        if markers.substitute_of(original_fn) is not None:
            raise ValueError(f"pyframe.substitute_in_graph: {original_fn!r} already has a substitute "
                             f"({markers.substitute_of(original_fn)[1].__qualname__})")

        @functools.wraps(polyfill)
        def call_original(*args: Any, **kwargs: Any) -> Any:
            return original_fn(*args, **kwargs)

        entry = (original_fn, polyfill, can_constant_fold_through)
        markers.substitutes[id(original_fn)] = markers.substitutes[id(call_original)] = entry
        markers.substitute_holders.append((original_fn, call_original))  # (their ids stay theirs)
        return call_original

    return register


def _check_same_signature(original: Callable, polyfill: types.FunctionType) -> None:
    """The polyfill takes what the original takes: the same positional names and defaults, the same
    keyword-only names (`*args, **kwargs` on either side matches anything), as torch checks it."""
    try:
        theirs = inspect.signature(original)
    except (TypeError, ValueError):  # a C function without a text signature: nothing to compare
        return
    ours = inspect.signature(polyfill)
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)

    def shape(sig: inspect.Signature) -> tuple:
        params = list(sig.parameters.values())
        return (tuple(p.name for p in params if p.kind not in variadic + (inspect.Parameter.KEYWORD_ONLY,)),
                {p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY},
                {p.name: p.default for p in params if p.kind not in variadic})

    anything = shape(inspect.signature(lambda *args, **kwargs: None))
    if shape(theirs) != shape(ours) and anything not in (shape(theirs), shape(ours)):
        raise TypeError(f"pyframe.substitute_in_graph: {polyfill.__qualname__}{ours} does not take what "
                        f"{getattr(original, '__qualname__', original)}{theirs} takes "
                        f"(skip_signature_check=True allows it)")


def assume_constant_result(fn: F) -> F:
    """While tracing, call `fn` on its (constant) arguments and use its result as a constant of the
    graph, never guarded (torch.compiler.assume_constant_result, whose mark, the attribute
    `_dynamo_marked_constant`, both engines read)."""
    if not isinstance(fn, types.FunctionType):
        raise TypeError(f"pyframe.assume_constant_result expects a Python function, not "
                        f"{type(fn).__name__}: {fn!r}")
    fn._dynamo_marked_constant = True  # type: ignore[attr-defined]
    return fn


class set_stance:
    """What entering a compiled region does from now on (torch.compiler.set_stance): a function,
    a context manager and a decorator.

        pyframe.set_stance("force_eager")        # from now on
        with pyframe.set_stance("eager_on_recompile"): ...
        @pyframe.set_stance("fail_on_recompile")
        def serve(batch): ...

    Stances: "default" (compile; torch.compiler's stance is followed while pyframe's is the
    default), "force_eager" (regions run as Python, their cached entries unused),
    "eager_on_recompile" (cached entries serve the calls their guards pass; a call that would
    compile runs as Python), "fail_on_recompile" (a call that would compile raises
    pyframe.exc.RecompileError, a RuntimeError). `skip_guard_eval_unsafe=True` is accepted and
    every guard is still checked (always safe, never faster). Not inside a compiled region."""

    def __init__(self, stance: str = "default", *, skip_guard_eval_unsafe: bool = False,
                 force_backend: Any = None) -> None:
        if stance not in STANCES:
            raise ValueError(f"pyframe.set_stance: unknown stance {stance!r}; stances: {', '.join(STANCES)}")
        if type(skip_guard_eval_unsafe) is not bool:
            raise TypeError(f"pyframe.set_stance(skip_guard_eval_unsafe=...) takes True or False, "
                            f"not {skip_guard_eval_unsafe!r}")
        if force_backend is not None:
            raise ValueError("pyframe.set_stance(force_backend=...) is not offered: give the backend to "
                             "pyframe.optimize or pyframe.compile")
        self.stance = stance
        self.skip_guard_eval_unsafe = skip_guard_eval_unsafe
        self._code = STANCES.index(stance)
        self.prev = _set_stance(self._code)

    def __enter__(self) -> None:
        _set_stance(self._code)

    def __exit__(self, *exc_info: Any) -> None:
        _set_stance(self.prev)

    def __call__(self, fn: F) -> F:
        _set_stance(self.prev)  # (a decorator: the stance applies while fn runs, not from now on)
        _check_callable("set_stance(...)", fn)
        code = self._code

        @functools.wraps(fn)
        def with_stance(*args: Any, **kwargs: Any) -> Any:
            prev = _set_stance(code)
            try:
                return fn(*args, **kwargs)
            finally:
                _set_stance(prev)

        return with_stance  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"pyframe.set_stance({self.stance!r})"


def _set_stance(code: int) -> int:
    """pyframe's stance set to `code`; the previous one. Refused inside a compiled region, as
    torch refuses it: a region's calls would run under two stances."""
    callback = _C.get_eval_frame()
    if callback is not None and callback is not False:
        raise RuntimeError("pyframe.set_stance called inside a compiled region: set it before "
                           "calling the compiled function")
    return _C.set_stance(code)


def current_stance() -> str:
    """The stance regions entered now follow (pyframe's own, else torch.compiler's)."""
    return STANCES[_C.stance()]

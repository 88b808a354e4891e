"""The user-facing wrappers: optimize() as decorator and context manager, OptimizedModule, disable().

`optimize(backend)(fn)` returns a `_C.CallbackScope`: a C callable that installs the compiler as
this thread's eval-frame callback, vectorcalls `fn`, and restores the previous callback. It is on
every call, so it does no Python-level work.
"""
from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Sized
from typing import Any, Callable, Sequence, TypeVar

import torch
import torch.fx._symbolic_trace as _fx_symbolic_trace

from . import _C, convert_frame, markers
from .backends import backend_name, lookup_backend
from .backends.settings import with_settings
from .exc import InvalidBackend
from .convert_frame import FORCE_EAGER, Compiler, FrameRecord, GuardFail, always_compile, force_trace, wrap_with_callback
from .guard_filter import GuardFilterEntry
from .warm import cache_dir as warm_cache_dir

F = TypeVar("F", bound=Callable[..., Any])


class OptimizeContext:
    """What `pyframe.optimize(...)` returns: apply it to a function or module, or use it in `with`.

    `recipe` is what `optimize` was given (backend, fullgraph, dynamic): a pickled OptimizedModule
    carries the recipe, not the compiler, and is optimized again when loaded."""

    def __init__(self, callback: Any, recipe: tuple[Any, bool, bool | None] | None = None):
        self.callback = callback
        self.recipe = recipe
        self._previous: list[Any] = []

    def __call__(self, target: Any = None, *args: Any, **kwargs: Any) -> Any:
        if args or kwargs or (target is not None and not callable(target)):
            raise TypeError(_called_with_arguments(self, target, args, kwargs))
        if isinstance(target, torch.nn.Module):
            return OptimizedModule(target, self)
        if target is None:
            raise TypeError("pyframe.optimize(...)(fn) expects a function or an nn.Module, not None")
        code = getattr(target, "__code__", None)
        if isinstance(code, types.CodeType):
            always_compile.add(code)  # compiled even without a tensor in its frame (torch._dynamo's rule)
        return wrap_with_callback(target, self.callback)

    def __enter__(self) -> "OptimizeContext":
        callback = self.callback
        if callback is not None and _C.stance() == FORCE_EAGER:  # (as a CallbackScope entered, in C)
            callback = None
        self._previous.append(_C.set_eval_frame(callback))
        return self

    def __exit__(self, *exc_info: Any) -> None:
        _C.set_eval_frame(self._previous.pop())

    def __reduce__(self) -> tuple:
        if self.recipe is None:
            raise TypeError("only what pyframe.optimize(backend) returns can be pickled")
        return (_rebuild_context, self.recipe)

    def __deepcopy__(self, memo: dict) -> "OptimizeContext":
        # A deep copy of an optimized module is optimized by the same backend and compiler (its
        # entries pin the copy's own module); the backend and its compiled graphs are not copied.
        return self


def _rebuild_context(backend: str | Callable, fullgraph: bool, dynamic: bool | None = None) -> OptimizeContext:
    return optimize(backend, fullgraph=fullgraph, dynamic=dynamic)


def _called_with_arguments(context: OptimizeContext, target: Any, args: tuple, kwargs: dict) -> str:
    """The message for `fn(x)` where `fn` is an OptimizeContext: `@pyframe.optimize` without its
    parentheses on a function that can take two arguments made the function the backend."""
    given = ", ".join([type(target).__name__] + [type(a).__name__ for a in args] + list(kwargs))
    backend = context.recipe[0] if context.recipe is not None else None
    if callable(backend) and not isinstance(backend, str):
        return (f"this is pyframe.optimize({backend_name(backend)}), called with ({given}): "
                f"pyframe.optimize takes a backend, so {backend_name(backend)!r} was taken as one. To compile "
                f"a function or module, write @pyframe.compile (or @pyframe.compile(backend=...)), or "
                f"@pyframe.optimize(\"eager\") with its parentheses")
    if args or kwargs:
        return f"pyframe.optimize(...)(fn) expects a function or an nn.Module alone, not ({given})"
    return f"pyframe.optimize(...)(fn) expects a function or an nn.Module, not {type(target).__name__}: {target!r}"


def _module_call(mod: torch.nn.Module) -> Any:
    """`mod(...)`, skipping nn.Module.__call__'s Python frames when they would only call forward
    (no hooks, no jit trace; csrc/module_call.c checks on every call)."""
    hooks = torch.nn.modules.module
    global_hooks = (hooks._global_forward_hooks, hooks._global_forward_pre_hooks,
                    hooks._global_backward_hooks, hooks._global_backward_pre_hooks)
    return _C.ModuleCall(mod, global_hooks, torch._C._get_tracing_state)


def _call_original_module(opt_mod: OptimizedModule, *args: Any, **kwargs: Any) -> Any:
    return opt_mod._orig_mod(*args, **kwargs)


class OptimizedModule(torch.nn.Module):
    """A module whose calls run through pyframe; parameters, buffers and state are the original's.

    It behaves as torch.compile's OptimizedModule (torch/_dynamo/eval_frame.py): `_orig_mod` is the
    original, its only submodule; attributes are read from and written to the original (`training`
    included, so `train()`/`eval()` on either agree); `len()`, `bool()` and `dir()` are the
    original's; pickle and `copy.deepcopy` rebuild it around the (copied) original with the same
    backend. Unlike torch's, `state_dict()` and `named_parameters()` keep the original's names
    (no `_orig_mod.` prefix), so a checkpoint loads into either."""

    # Attributes of the wrapper itself; every other attribute write goes to the original.
    _opt_mod_attributes = frozenset({"_orig_mod", "_context", "_call", "forward", "__dict__",
                                     "_super_module_initialized"})
    _orig_mod: torch.nn.Module

    def __init__(self, mod: torch.nn.Module, context: OptimizeContext):
        # First: attribute reads during nn.Module.__init__ go through __getattr__ to the original.
        object.__setattr__(self, "_orig_mod", mod)
        self._super_module_initialized = False
        super().__init__()
        self._super_module_initialized = True
        self._orig_mod = mod  # a submodule now: .parameters(), .to(), .train() reach the original
        self._context = context
        self._initialize()

    def _initialize(self) -> None:
        mod = self._orig_mod
        forward = getattr(type(mod).forward, "__code__", None)
        if forward is not None:
            force_trace.add(forward)  # traced even when the module class is torch's own
        self.__dict__["_call"] = _C.CallbackScope(_module_call(mod), self._context.callback)

    # `opt_mod(...)` is `self._call(...)`, dispatched in C (no Python frame before the compiled
    # one), except while torch.fx.symbolic_trace runs: a model holding this module records the
    # original's calls (torch.compile's OptimizedModule does so with error_on_nested_fx_trace=False).
    __call__ = forward = _C.InstanceCall("_call", vars(_fx_symbolic_trace), "_is_fx_tracing_flag",
                                         _call_original_module)

    @property  # type: ignore[override]
    def training(self) -> bool:
        return self._orig_mod.training

    @training.setter
    def training(self, value: bool) -> None:
        # nn.Module.__init__ sets the default before _orig_mod is a submodule: not the original's.
        if self._super_module_initialized:
            self._orig_mod.training = value

    def __getattr__(self, name: str) -> Any:
        if name == "_orig_mod":
            return self._modules["_orig_mod"]
        return getattr(self._orig_mod, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if hasattr(type(self), name) or name in OptimizedModule._opt_mod_attributes:
            return super().__setattr__(name, value)
        return setattr(self._orig_mod, name, value)

    def __delattr__(self, name: str) -> None:
        if hasattr(type(self), name) or name in OptimizedModule._opt_mod_attributes:
            return super().__delattr__(name)
        return delattr(self._orig_mod, name)

    def __len__(self) -> int:
        # As torch's: the original's length, and no length (so no truth value) when it has none.
        if isinstance(self._orig_mod, Sized):
            return len(self._orig_mod)
        raise TypeError(f"{type(self._orig_mod).__name__} does not support len()")

    def __dir__(self) -> list[str]:
        own = self._orig_mod.__dir__()
        return own + [name for name in super().__dir__() if name not in own]

    # Pickle and deepcopy: the original and the recipe of the context; the C callables are rebuilt.
    def __reduce__(self) -> tuple:
        return (self.__class__, (self._orig_mod, self._context))

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_call", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._initialize()

    # The original's state, under the original's names (a checkpoint loads into either).
    def state_dict(self, *args: Any, **kwargs: Any) -> Any:
        return self._orig_mod.state_dict(*args, **kwargs)

    def load_state_dict(self, *args: Any, **kwargs: Any) -> Any:
        return self._orig_mod.load_state_dict(*args, **kwargs)

    def named_parameters(self, *args: Any, **kwargs: Any) -> Any:
        return self._orig_mod.named_parameters(*args, **kwargs)

    def named_buffers(self, *args: Any, **kwargs: Any) -> Any:
        return self._orig_mod.named_buffers(*args, **kwargs)

    def __repr__(self) -> str:
        return f"OptimizedModule({self._orig_mod!r})"


def optimize(backend: str | Callable = "eager", *, fullgraph: bool = False, nopython: bool = False,
             dynamic: bool | None = None, guard_fail_fn: Callable[[GuardFail], None] | None = None,
             guard_filter_fn: Callable[[Sequence[GuardFilterEntry]], Sequence[bool]] | None = None) -> OptimizeContext:
    """Compile what runs under the returned context with `backend` (torch._dynamo.optimize's contract).

    `backend` is a callable `(gm, example_inputs) -> callable` or a registered name ("eager",
    "inductor", ...). With `fullgraph=True` (alias `nopython=True`) a graph break raises
    `pyframe.exc.Unsupported` instead of falling back to Python. `dynamic` is torch.compile's: None
    (automatic: a size that changes between compiles becomes symbolic), True (symbolic from the
    first compile), False (static: every new size compiles a new entry); fake/shapes.py.

    What is certainly not a backend is refused here, pointing to `pyframe.compile` (torch._dynamo
    takes it and fails when the first graph reaches it): an nn.Module, and a callable whose
    signature cannot take `(gm, example_inputs)` (`@pyframe.optimize` on `def fn(x)`). A function
    of two arguments cannot be told from a backend by its signature; if it is applied as a
    decorator, its first call says what happened.

    `guard_fail_fn` (torch._dynamo.optimize's): called with a `GuardFail(reason, orig_code)` for
    each cache entry of a frame whose guards a call failed, before it compiles again; what it
    raises is logged, never raised into the call. `guard_filter_fn` (torch.compile's option of
    that name): which guards each entry keeps (guard_filter.py).
    """
    _check_is_backend(backend)
    if guard_fail_fn is not None and not callable(guard_fail_fn):
        raise TypeError(f"pyframe.optimize(guard_fail_fn=...) takes a callable, not {guard_fail_fn!r}")
    if guard_filter_fn is not None and not callable(guard_filter_fn):
        raise TypeError(f"pyframe.optimize(guard_filter_fn=...) takes a callable, not {guard_filter_fn!r}")
    fn = lookup_backend(backend)
    if dynamic not in (None, True, False):
        raise TypeError(f"pyframe.optimize(dynamic=...) takes None, True or False, not {dynamic!r}")
    if getattr(fn, "static_shapes", False):  # a backend that compiles for fixed sizes only (onnxrt)
        dynamic = False
    return OptimizeContext(_compiler_for(fn, backend_name(backend), fullgraph or nopython, dynamic, guard_fail_fn,
                                         guard_filter_fn),
                           (backend, fullgraph or nopython, dynamic))


def compile(model: Callable | None = None, *, fullgraph: bool = False, dynamic: bool | None = None,
            backend: str | Callable = "inductor", mode: str | None = None,
            options: dict[str, Any] | None = None, disable: bool = False) -> Any:
    """torch.compile's signature and behaviour: `pyframe.compile(fn)`, `@pyframe.compile`,
    `@pyframe.compile(backend="eager", fullgraph=True)`; a module gives an OptimizedModule.

    `mode` ("default", "reduce-overhead", "max-autotune", ...) or `options` (inductor's config
    entries) are handed to the backend as torch.compile hands them (backends/settings.py); an
    unknown one, or one given to a backend that takes none, raises `InvalidCompileOption` now.
    `disable=True` returns `model` untouched. `dynamic`: see `optimize`.
    """
    if model is None:
        def decorator(model: Callable) -> Any:
            if model is None:
                raise TypeError("pyframe.compile(...)(model): model can't be None")
            return compile(model, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode,
                           options=options, disable=disable)
        return decorator
    if disable:
        return model
    guard_filter_fn = None
    if isinstance(options, dict) and "guard_filter_fn" in options:  # (torch.compile takes it out too)
        options = dict(options)
        guard_filter_fn = options.pop("guard_filter_fn")
    configured = with_settings(backend, mode, options or None, dynamic)
    return optimize(configured, fullgraph=fullgraph, dynamic=dynamic, guard_filter_fn=guard_filter_fn)(model)


def call_privately(target: Callable, args: tuple, kwargs: dict, backend: Callable, name: str,
                   **options: Any) -> tuple[Any, list[FrameRecord]]:
    """Call `target` once under a compiler of its own (`options`: Compiler's; a store of sizes of its
    own, so that automatic dynamic shapes learn nothing from the call), and return its result and
    the records of the frames it met. What the call compiled is dropped after it, its entries and
    records, however it ends: the call leaves nothing behind (explain, export)."""
    seen: list[tuple[types.CodeType, FrameRecord]] = []
    compiler = Compiler(backend, name, observer=lambda code, record: seen.append((code, record)), sizes={},
                        **options)
    try:
        result = OptimizeContext(compiler)(target)(*args, **kwargs)
    finally:
        for code, _ in seen:  # only what this call compiled: other backends' entries stay
            _C.clear_code(code, compiler)
            convert_frame.records.pop(code, None)
    return result, [record for _, record in seen]


def _check_is_backend(backend: Any) -> None:
    """Refuse what is certainly not a backend (see optimize)."""
    if isinstance(backend, str):
        return
    what = None
    if isinstance(backend, torch.nn.Module):
        what = f"the module {type(backend).__name__}"
    elif callable(backend) and not _takes_two_arguments(backend):
        what = f"{backend_name(backend)!r}, which cannot take (gm, example_inputs)"
    if what is not None:
        raise InvalidBackend(f"pyframe.optimize(backend) was given {what}, not a backend. To compile it, "
                             f"write pyframe.compile(model) or @pyframe.compile (as torch.compile), or "
                             f"pyframe.optimize(\"eager\")(model) with the backend first")


def _takes_two_arguments(fn: Callable) -> bool:
    """fn's signature accepts two positional arguments (True when it cannot be read: a builtin)."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return True
    try:
        signature.bind(None, None)
    except TypeError:
        return False
    return True


# Backends that take no attribute (bound methods, builtins): their compilers, by backend.
_detached_compilers: dict[Callable, dict[tuple[bool, bool | None], Compiler]] = {}


def _compiler_for(backend: Callable, name: str, fullgraph: bool, dynamic: bool | None = None,
                  guard_fail_fn: Callable | None = None, guard_filter_fn: Callable | None = None) -> Compiler:
    """One compiler per (backend, fullgraph, dynamic, guard_fail_fn, guard_filter_fn), living as long as the
    backend: cache entries belong to their compiler, so every optimize() of the same backend
    shares them."""
    warm_cache_dir.prepare()  # (config.warm_cache_dir: load what an earlier process saved there)
    compilers = getattr(backend, "_pyframe_compilers", None)
    if compilers is None:
        compilers = {}
        try:
            backend._pyframe_compilers = compilers  # a cycle with the backend, collected with it
        except (AttributeError, TypeError):
            compilers = _detached_compilers.setdefault(backend, compilers)
    key = (fullgraph, dynamic, guard_fail_fn, guard_filter_fn)
    if key not in compilers:
        compilers[key] = Compiler(backend, name, fullgraph=fullgraph, dynamic=dynamic, guard_fail_fn=guard_fail_fn,
                                  guard_filter_fn=guard_filter_fn)
    return compilers[key]


def mark_dynamic(t: torch.Tensor, index: int | list[int]) -> None:
    """Compile dimension(s) `index` of `t` with a symbolic size from the first compile (unless
    `dynamic=False`), as `torch._dynamo.mark_dynamic` does; either engine honours either mark."""
    _mark(t, index, "_dynamo_dynamic_indices")


def mark_static(t: torch.Tensor, index: int | list[int]) -> None:
    """Keep dimension(s) `index` of `t` static whatever its sizes, as `torch._dynamo.mark_static`."""
    _mark(t, index, "_dynamo_static_indices")


def _mark(t: torch.Tensor, index: int | list[int], attribute: str) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"expected a tensor, not {type(t).__name__}")
    indices = [index] if isinstance(index, int) else list(index)
    for i in indices:
        if not -t.dim() <= i < t.dim():
            raise IndexError(f"dimension {i} is out of range for a tensor of {t.dim()} dimensions")
    marks = getattr(t, attribute, set())
    marks.update(i % t.dim() for i in indices)
    setattr(t, attribute, marks)


def disable(fn: F | None = None, recursive: bool = True) -> Any:
    """Run `fn` with pyframe off, even inside an optimized region; `disable()` is a context manager
    (torch.compiler.disable). `recursive=False`: only `fn`'s own frame runs as Python, the
    functions it calls are compiled (torch._dynamo.skip; a call of it from traced code breaks the
    graph); `disable(recursive=False)` without `fn` is a decorator."""
    if type(recursive) is not bool:
        raise TypeError(f"pyframe.disable(recursive=...) takes True or False, not {recursive!r}")
    if not recursive:
        if fn is None:
            return functools.partial(disable, recursive=False)
        if not callable(fn):
            raise TypeError(f"pyframe.disable(fn, recursive=False) expects a callable, not {type(fn).__name__}")
        return markers.nonrecursive_disable(fn)
    if fn is None:
        return OptimizeContext(None)
    if not callable(fn):
        raise TypeError(f"pyframe.disable(fn) expects a callable, not {type(fn).__name__}")
    return wrap_with_callback(fn, None)


def run(fn: F) -> F:
    """Run `fn` with the cache entries already compiled, compiling nothing new."""
    return wrap_with_callback(fn, False)

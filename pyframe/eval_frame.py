"""The user-facing wrappers: optimize() as decorator and context manager, OptimizedModule, disable().

`optimize(backend)(fn)` returns a `_C.CallbackScope`: a C callable that installs the compiler as
this thread's eval-frame callback, vectorcalls `fn`, and restores the previous callback. It is on
every call, so it does no Python-level work.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar

import torch

from . import _C
from .backends import backend_name, lookup_backend
from .convert_frame import Compiler, force_trace

F = TypeVar("F", bound=Callable[..., Any])


class OptimizeContext:
    """What `pyframe.optimize(...)` returns: apply it to a function or module, or use it in `with`."""

    def __init__(self, callback: Any):
        self.callback = callback
        self._previous: list[Any] = []

    def __call__(self, target: Any) -> Any:
        if isinstance(target, torch.nn.Module):
            return OptimizedModule(target, self)
        if not callable(target):
            raise TypeError(f"pyframe.optimize(...) expects a function or an nn.Module, not "
                            f"{type(target).__name__}: {target!r}")
        return _wrap(target, self.callback)

    def __enter__(self) -> "OptimizeContext":
        self._previous.append(_C.set_eval_frame(self.callback))
        return self

    def __exit__(self, *exc_info: Any) -> None:
        _C.set_eval_frame(self._previous.pop())


def _wrap(fn: F, callback: Any) -> F:
    wrapper = _C.CallbackScope(fn, callback)
    functools.update_wrapper(wrapper, fn)
    return wrapper


def _module_call(mod: torch.nn.Module) -> Any:
    """`mod(...)`, skipping nn.Module.__call__'s Python frames when they would only call forward
    (no hooks, no jit trace; csrc/module_call.c checks on every call)."""
    hooks = torch.nn.modules.module
    global_hooks = (hooks._global_forward_hooks, hooks._global_forward_pre_hooks,
                    hooks._global_backward_hooks, hooks._global_backward_pre_hooks)
    return _C.ModuleCall(mod, global_hooks, torch._C._get_tracing_state)


class OptimizedModule(torch.nn.Module):
    """A module whose calls run through pyframe; parameters, buffers and state are the original's."""

    _orig_mod: torch.nn.Module

    def __init__(self, mod: torch.nn.Module, context: OptimizeContext):
        super().__init__()
        self._orig_mod = mod  # a submodule: .parameters(), .to(), .train() reach the original
        forward = getattr(type(mod).forward, "__code__", None)
        if forward is not None:
            force_trace.add(forward)  # traced even when the module class is torch's own
        self.__dict__["_call"] = _C.CallbackScope(_module_call(mod), context.callback)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(*args, **kwargs)

    forward = __call__

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)  # _orig_mod itself, and our own parameters (none)
        except AttributeError:
            return getattr(self._modules["_orig_mod"], name)

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
             dynamic: bool | None = None) -> OptimizeContext:
    """Compile what runs under the returned context with `backend` (torch.compile's contract).

    `backend` is a callable `(gm, example_inputs) -> callable` or a registered name ("eager",
    "inductor", ...). With `fullgraph=True` (alias `nopython=True`) a graph break raises
    `pyframe.exc.Unsupported` instead of falling back to Python. Shapes are static: `dynamic` is
    accepted for compatibility and a new shape compiles a new entry.
    """
    fn = lookup_backend(backend)
    return OptimizeContext(_compiler_for(fn, backend_name(backend), fullgraph or nopython))


# Backends that take no attribute (bound methods, builtins): their compilers, by backend.
_detached_compilers: dict[Callable, dict[bool, Compiler]] = {}


def _compiler_for(backend: Callable, name: str, fullgraph: bool) -> Compiler:
    """One compiler per (backend, fullgraph), living as long as the backend: cache entries belong
    to their compiler, so every optimize() of the same backend shares them."""
    compilers = getattr(backend, "_pyframe_compilers", None)
    if compilers is None:
        compilers = {}
        try:
            backend._pyframe_compilers = compilers  # a cycle with the backend, collected with it
        except (AttributeError, TypeError):
            compilers = _detached_compilers.setdefault(backend, compilers)
    if fullgraph not in compilers:
        compilers[fullgraph] = Compiler(backend, name, fullgraph=fullgraph)
    return compilers[fullgraph]


def disable(fn: F | None = None) -> Any:
    """Run `fn` with pyframe off, even inside an optimized region; `disable()` is a context manager."""
    if fn is None:
        return OptimizeContext(None)
    return _wrap(fn, None)


def run(fn: F) -> F:
    """Run `fn` with the cache entries already compiled, compiling nothing new."""
    return _wrap(fn, False)

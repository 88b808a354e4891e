"""Backends: the registry of names, and the call of a backend with pyframe's error policy.

A backend has torch.compile's contract: `backend(gm, example_inputs) -> callable`. A name is looked
up in pyframe's registry first, then in torch's own (so "inductor" and "aot_eager" work).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Callable

import torch

from .. import config
from ..exc import BackendCompilerFailed, InvalidBackend

_BACKENDS: dict[str, Callable] = {}


def register_backend(fn: Callable | None = None, name: str | None = None) -> Any:
    """Register `fn` under `name` (default: its __name__). Usable as `@register_backend`."""
    def register(f: Callable) -> Callable:
        _BACKENDS[name or f.__name__] = f
        return f
    return register(fn) if fn is not None else register


def list_backends() -> list[str]:
    return sorted(set(_BACKENDS) | set(_torch_backend_names()))


def lookup_backend(backend: str | Callable) -> Callable:
    """A callable backend as given, or the backend registered under a name."""
    if isinstance(backend, str):
        if backend in _BACKENDS:
            return _BACKENDS[backend]
        if backend in _torch_backend_names():
            from torch._dynamo.backends.registry import lookup_backend as torch_lookup
            return torch_lookup(backend)
        raise InvalidBackend(f"unknown backend {backend!r}; known backends: {', '.join(list_backends())}")
    if not callable(backend):
        raise TypeError(f"backend must be a callable (gm, example_inputs) -> callable or a backend name, "
                        f"not {type(backend).__name__}: {backend!r}")
    return backend


def backend_name(backend: str | Callable) -> str:
    if isinstance(backend, str):
        return backend
    return getattr(backend, "__name__", None) or type(backend).__name__


def _torch_backend_names() -> list[str]:
    from torch._dynamo.backends.registry import list_backends as torch_list
    return list(torch_list(exclude_tags=()))


@register_backend
def eager(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> Callable:
    """Run the captured graph as it is (what pyframe also falls back to when a backend fails)."""
    return gm.forward


@dataclass
class CompiledGraph:
    """One captured graph and what its backend made of it."""

    name: str
    gm: torch.fx.GraphModule
    fn: Callable              # what the transformed code calls: the backend's result, or gm.forward
    backend_name: str
    error: str | None = None  # why the backend's result is not used


def compile_with_backend(backend: Callable, name: str, gm: torch.fx.GraphModule,
                         example_inputs: list[torch.Tensor], graph_name: str) -> CompiledGraph:
    """Call the backend; on failure warn once and fall back to running the graph eagerly."""
    try:
        fn = backend(gm, example_inputs)
        if fn is None:
            raise RuntimeError("the backend returned None")
        if not callable(fn):
            raise RuntimeError(f"the backend returned a non-callable {type(fn).__name__}")
    except Exception as e:
        if not config.suppress_errors:
            raise BackendCompilerFailed(name, e) from e
        warnings.warn(f"pyframe: backend {name!r} failed on {graph_name} ({type(e).__name__}: {e}); "
                      f"running the graph eagerly", stacklevel=2)
        return CompiledGraph(graph_name, gm, gm.forward, name, error=f"{type(e).__name__}: {e}")
    return CompiledGraph(graph_name, gm, fn, name)

"""Backend names: what a string given to `pyframe.optimize(...)` means.

A name is looked up in three places, in this order:

1. pyframe's own registry: the built-in backends ("eager", "print", "onnxrt") and whatever was
   registered with `@pyframe.register_backend`;
2. the entry-point group `pyframe_backends` of installed packages, so a package can ship a backend
   without being imported first (in its pyproject.toml: `[project.entry-points.pyframe_backends]`
   `my_compiler = "my_package.compilers:my_compiler"`);
3. torch's own registry, so "inductor", "aot_eager" and every backend written for torch.compile
   (including those of torch's own `torch_dynamo_backends` entry points) work by name.

A backend may have a `check_requirements()` attribute: it is called when the backend is chosen, so a
missing optional package is reported by `pyframe.optimize(...)` itself, not graph by graph.
"""
from __future__ import annotations

import importlib.metadata
from typing import Any, Callable

from ..exc import InvalidBackend

#: The entry-point group installed packages declare their pyframe backends in.
ENTRY_POINT_GROUP = "pyframe_backends"

_BACKENDS: dict[str, Callable] = {}


def register_backend(fn: Callable | None = None, name: str | None = None) -> Any:
    """Register `fn` under `name` (default: its __name__). Usable as `@register_backend` and
    `@register_backend(name="...")`; a later registration of the same name replaces the earlier."""
    if name is not None and not isinstance(name, str):
        raise TypeError(f"register_backend(name=...) takes a str, not {name!r}")

    def register(f: Callable) -> Callable:
        if not callable(f):
            raise TypeError(f"register_backend takes a callable (gm, example_inputs) -> callable, "
                            f"not {type(f).__name__}: {f!r}")
        key = name or getattr(f, "__name__", None)
        if not isinstance(key, str):
            raise TypeError(f"register_backend: {f!r} has no __name__; pass name=\"...\"")
        _BACKENDS[key] = f
        return f
    return register(fn) if fn is not None else register


def list_backends() -> list[str]:
    """Every name `lookup_backend` accepts: pyframe's, installed packages', torch's."""
    return sorted(set(_BACKENDS) | set(_entry_point_names()) | set(_torch_backend_names()))


def lookup_backend(backend: str | Callable) -> Callable:
    """A callable backend as given, or the backend a name stands for; either way checked usable."""
    if isinstance(backend, str):
        fn = _find(backend)
        if fn is None:
            raise InvalidBackend(f"unknown backend {backend!r}; known backends: {', '.join(list_backends())}")
    else:
        fn = backend
    if not callable(fn):
        where = f"the backend named {backend!r}" if isinstance(backend, str) else "backend"
        raise TypeError(f"{where} must be a callable (gm, example_inputs) -> callable or a backend name, "
                        f"not {type(fn).__name__}: {fn!r}")
    check = getattr(fn, "check_requirements", None)
    if callable(check):
        check()
    return fn


def backend_name(backend: str | Callable) -> str:
    """The name warnings and records use for a backend: the name given, or the callable's name."""
    if isinstance(backend, str):
        return backend
    return getattr(backend, "__name__", None) or type(backend).__name__


def _find(name: str) -> Any:
    if name in _BACKENDS:
        return _BACKENDS[name]
    for entry_point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP, name=name):
        return entry_point.load()  # the first on sys.path, as an import of the same name would be
    if name in _torch_backend_names():
        from torch._dynamo.backends.registry import lookup_backend as torch_lookup
        return torch_lookup(name)
    return None


def _entry_point_names() -> list[str]:
    return [entry_point.name for entry_point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)]


def _torch_backend_names() -> list[str]:
    # torch._dynamo's registry imports its backends lazily: loaded on the first lookup only.
    from torch._dynamo.backends.registry import list_backends as torch_list
    return list(torch_list(exclude_tags=()))

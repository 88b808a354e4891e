"""Calling a backend with pyframe's error policy; the record of what it made of one graph.

`compile_with_backend` is what `pyframe/graph.py` calls when a graph is complete. A backend that raises,
returns None or returns something that cannot be called does not change results: pyframe warns once
for that graph, naming the backend and the reason, and runs the graph as it is (`gm.forward`). With
`pyframe.config.suppress_errors = False` it raises `BackendCompilerFailed` instead, the backend's own
exception chained as `__cause__`. What the backend returned is never called here: an error it raises
at run time reaches the user as the same code would raise it eagerly, once, without a retry.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Callable

import torch

from .. import config
from ..exc import BackendCompilerFailed


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

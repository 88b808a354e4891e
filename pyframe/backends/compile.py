"""Calling a backend with pyframe's error policy; the record of what it made of one graph.

`compile_with_backend` is what `pyframe/graph.py` calls when a graph is complete. A backend that raises,
returns None or returns something that cannot be called does not change results: pyframe warns once
for that graph, naming the backend and the reason, and runs the graph as it is (`gm.forward`). With
`pyframe.config.suppress_errors = False` it raises `BackendCompilerFailed` instead, the backend's own
exception chained as `__cause__`. What the backend returned is never called here. An error it raises
at run time is handled by the transformed code (pyframe/rerun.py): the frame runs again as Python,
whose exception is the user's; if that run does not raise, the backend was at fault, and pyframe
warns naming it (BackendCompilerFailed with `suppress_errors = False`).

A backend of torch's ("inductor", "aot_eager"...) is called as torch._dynamo calls it: in a
TracingContext whose FakeTensorMode has a ShapeEnv, the graph's inputs made FakeTensors in it with
their static sizes (`written_for_dynamo`, `static_mode`); inductor's FX graph cache and AOTAutograd's
cache are bypassed without one, so a warm start could not use the artifacts it loaded.

One thing is checked when the compiled graph first runs: that it returns as many outputs as the
graph (`FirstCallCheck`, which then takes itself out of the call path). A backend that returns
another number gives one warning naming it and what it returned, and the graph runs as it is from
then on (`BackendCompilerFailed` with `suppress_errors = False`).
"""
from __future__ import annotations

import contextlib
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv
from torch.multiprocessing.reductions import StorageWeakRef

from .. import config, gc_pause
from ..exc import BackendCompilerFailed


@dataclass
class CompiledGraph:
    """One captured graph and what its backend made of it."""

    name: str
    gm: torch.fx.GraphModule
    fn: Callable              # what the transformed code calls: the backend's result, or gm.forward
    backend_name: str
    error: str | None = None  # why the backend's result is not used
    seconds: float = 0.0      # the backend's compile time (the structured trace's backend_compile_time_s)

    def checked_fn(self) -> Callable:
        """What the transformed code calls: the backend's callable, checked on its first call."""
        if self.error is not None:
            return self.fn
        return FirstCallCheck(self.fn, self.gm, self.backend_name, self.name)


def compile_with_backend(backend: Callable, name: str, gm: torch.fx.GraphModule,
                         example_inputs: list[torch.Tensor], graph_name: str,
                         fake_mode: Any = None) -> CompiledGraph:
    """Call the backend; on failure warn once and fall back to running the graph eagerly. With
    `fake_mode` (a graph with dynamic shapes), the backend runs in a tracing context holding it,
    where aot_autograd and inductor find the ShapeEnv of the graph's symbols; a backend of torch's
    gets one for a static graph too (`static_mode`)."""
    start = time.perf_counter()
    try:
        caches = contextlib.nullcontext()
        if written_for_dynamo(backend):
            if fake_mode is None:
                fake_mode, fakes = static_mode(example_inputs)  # (fakes: kept alive through the call)
            if _share_memory(example_inputs):
                caches = torch._functorch.config.patch(enable_autograd_cache=False)
        with gc_pause.resumed():  # (user code: the collector on, as it is outside a compile)
            if fake_mode is not None:
                with caches, torch._guards.tracing(torch._guards.TracingContext(fake_mode)):
                    fn = backend(gm, example_inputs)
            else:
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
        return CompiledGraph(graph_name, gm, gm.forward, name, error=f"{type(e).__name__}: {e}",
                             seconds=time.perf_counter() - start)
    return CompiledGraph(graph_name, gm, fn, name, seconds=time.perf_counter() - start)


def written_for_dynamo(backend: Callable) -> bool:
    """Whether `backend` is one of torch's ("inductor", "aot_eager", compile_fx...: defined in a
    module of torch, or one with a mode or options, BackendWithSettings, over one). torch._dynamo
    calls every backend in a TracingContext whose FakeTensorMode has a ShapeEnv, and torch's
    backends rely on it: inductor's FX graph cache and AOTAutograd's cache are bypassed without
    one ("No shape env"). Other backends are called as they are: a context costs a FakeTensorMode
    per graph, and importing what a ShapeEnv's mode needs, on the first."""
    backend = getattr(backend, "fn", backend)  # (BackendWithSettings: the backend it calls)
    return (getattr(backend, "__module__", None) or "").startswith("torch.")


def _share_memory(example_inputs: list[Any]) -> bool:
    """Whether two of the graph's tensor inputs are views of one storage. AOTAutograd's cache does
    not key its entries on which inputs alias (torch 2.13): a graph compiled for inputs apart would
    be found again for the same graph on overlapping ones (pyframe's aliasing guard recompiles
    for them), whose mutations it would not see through. Such a graph is compiled without it."""
    storages = [StorageWeakRef(x.untyped_storage()) for x in example_inputs if isinstance(x, torch.Tensor)]
    return len(set(storages)) < len(storages)


def static_mode(example_inputs: list[Any]) -> tuple[FakeTensorMode, list[torch.Tensor]]:
    """A FakeTensorMode over a ShapeEnv of its own for a static graph's backend, and the FakeTensors
    of the graph's tensor inputs, made in it with static sizes. aot_autograd makes its inputs'
    FakeTensors with `mode.from_tensor(x)`, which over a ShapeEnv gives every size a symbol
    (dynamic=True's graph) unless the mode has one of x already: torch._dynamo made them while
    tracing, as these are made here. (The mode remembers them weakly: the caller keeps them.)"""
    mode = FakeTensorMode(shape_env=ShapeEnv())
    fakes = [mode.from_tensor(x, static_shapes=True) for x in example_inputs if isinstance(x, torch.Tensor)]
    return mode, fakes


def _output_count(gm: torch.fx.GraphModule) -> int | None:
    """How many values gm.forward returns (a tuple), or None when it returns something else."""
    output = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    result = output.args[0]
    return len(result) if isinstance(result, (tuple, list)) else None


class FirstCallCheck:
    """The backend's callable, checked on its first call for the number of outputs the graph has.

    The transformed code calls it through a `_C.CallbackScope` (`scope`): once the check passes the
    scope calls the backend's callable directly, so later calls pay nothing for the check."""

    def __init__(self, fn: Callable, gm: torch.fx.GraphModule, backend_name: str, graph_name: str):
        self.fn, self.gm, self.backend_name, self.graph_name = fn, gm, backend_name, graph_name
        self.expected = _output_count(gm)
        self.scope = None  # set by whoever wraps it (convert_frame.disable_wrap)

    def __call__(self, *args):
        outputs = self.fn(*args)
        if self.expected is None or (isinstance(outputs, (tuple, list)) and len(outputs) == self.expected):
            self._replace_with(self.fn)
            return outputs
        got = f"{len(outputs)} outputs" if isinstance(outputs, (tuple, list)) else f"a {type(outputs).__name__}"
        message = (f"the callable backend {self.backend_name!r} returned for {self.graph_name} gave {got} "
                   f"where the graph has {self.expected}")
        if not config.suppress_errors:
            raise BackendCompilerFailed(self.backend_name, RuntimeError(message))
        if any(_mutates(node) for node in self.gm.graph.nodes):
            # Running the graph again would apply its mutations twice: the user's result would change.
            raise BackendCompilerFailed(self.backend_name, RuntimeError(message + " (the graph mutates its "
                                                                        "inputs, so it cannot be run again)"))
        warnings.warn(f"pyframe: {message}; running the graph eagerly", stacklevel=2)
        self._replace_with(self.gm.forward)
        return self.gm.forward(*args)

    def _replace_with(self, fn: Callable) -> None:
        if self.scope is not None:
            self.scope.fn = fn
            self.scope = None


def _mutates(node: torch.fx.Node) -> bool:
    """An in-place op (a trailing underscore, `out=`, `inplace=True`, setitem)."""
    if node.op not in ("call_function", "call_method"):
        return False
    if node.kwargs.get("inplace") is True or "out" in node.kwargs:
        return True
    name = node.target if node.op == "call_method" else getattr(node.target, "__name__", "")
    return (name.endswith("_") and not name.endswith("__")) or name in ("setitem", "iadd", "isub", "imul", "itruediv")

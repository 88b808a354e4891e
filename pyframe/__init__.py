"""pyframe: a compact frame-evaluation JIT for PyTorch programs, built as TorchDynamo is built.

    import pyframe
    fast_fn = pyframe.optimize(my_backend)(fn)      # or "eager", "inductor", ...
    model = pyframe.compile(model)                   # torch.compile's signature

See docs/c_layer.md for the C layer and README.md for the data flow of one call.
"""
import torch  # noqa: F401  (first: it loads libc10 and libtorch_python, which _C links)

from . import _C, config, convert_frame, debug, exc  # noqa: F401  (submodules users reach: pyframe._C...)
from .convert_frame import GuardFail, reset
from .backends import list_backends, lookup_backend, register_backend
from .debug.explain import explain
from .decorators import (
    allow_in_graph, assume_constant_result, disallow_in_graph, is_compiling, nonstrict_trace, set_stance,
    substitute_in_graph,
)
from .eval_frame import OptimizedModule, compile, disable, mark_dynamic, mark_static, optimize, run
from .export import ExportResult, export
from .exc import BackendCompilerFailed, Unsupported
from .logs import set_logs
from .warm.load import load
from .warm.save import save


__all__ = ["BackendCompilerFailed", "ExportResult", "GuardFail", "OptimizedModule", "Unsupported", "allow_in_graph",
           "assume_constant_result", "compile", "config", "disable", "disallow_in_graph",
           "exc", "explain", "export", "is_compiling", "load", "save",
           "list_backends", "lookup_backend", "mark_dynamic", "mark_static", "nonstrict_trace", "optimize",
           "register_backend", "reset", "run", "set_logs", "set_stance", "substitute_in_graph", "debug"]

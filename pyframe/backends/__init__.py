"""Backends: the names pyframe accepts, the built-in backends, and the call of a backend.

A backend has torch.compile's contract, `backend(gm, example_inputs) -> callable`, so every backend
written for torch.compile works unchanged. The modules, in the order a graph meets them:

- registry.py: a name -> a backend (pyframe's registry, then installed packages' entry points in the
  group `pyframe_backends`, then torch's registry: "inductor", "aot_eager", ...);
- builtin.py:  "eager" and "print" (the seeds' debugging backend);
- onnxrt.py:   "onnxrt": ONNX export and ONNX Runtime, training through aot_autograd;
- compile.py:  calling the backend with pyframe's error policy (warn and run eagerly, or raise).
"""
from . import builtin, onnxrt  # noqa: F401  (their backends register their names on import)
from .compile import CompiledGraph, compile_with_backend
from .registry import ENTRY_POINT_GROUP, backend_name, list_backends, lookup_backend, register_backend

__all__ = ["ENTRY_POINT_GROUP", "CompiledGraph", "backend_name", "compile_with_backend", "list_backends",
           "lookup_backend", "register_backend"]

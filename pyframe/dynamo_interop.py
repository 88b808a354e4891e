"""Living next to torch._dynamo: each engine leaves the other's machinery alone.

Both engines are PEP 523 hooks with a per-thread callback, chained one on top of the other (see
docs/c_layer.md), so each sees the frames the other runs:

- A function compiled with torch.compile, called inside a pyframe region, runs torch._dynamo's
  compiler (its guards' generated `<string>` lambdas, sympy, FakeTensors...) and then its compiled
  code (`torch_dynamo_resume_in_...` functions, fx-generated `forward`s, its Python guard
  functions) while pyframe's callback
  is on. None of that is user code for pyframe: `dynamo_frame_reason` says so, and the miss path
  runs those frames as Python (a frame met while torch._dynamo compiles is run normally without
  being marked, since the same code may be user code at another time: sympy, say).
- A pyframe region inside a torch.compile'd function runs pyframe's compiler while torch._dynamo's
  callback is on. `hide_from_dynamo` marks the entry points of pyframe's Python machinery with
  torch._dynamo's own per-code strategy "skip this frame and everything it calls", as
  `torch._dynamo.disable(recursive=True)` would, at no cost on pyframe's call path.
"""
from __future__ import annotations

import sys
import types

import torch

_DYNAMO_RESUME_PREFIX = "torch_dynamo_resume_in_"
_FX_GENERATED_PREFIX = "<eval_with_key>"


def dynamo_is_compiling() -> bool:
    """torch._dynamo's callback is running on this thread (deciding on a frame, tracing it,
    building guards, calling its backend): everything it runs meanwhile is its machinery.

    Asked on pyframe's misses only. Its compile proper holds a CompileContext; the checks its
    callback makes before (trace rules, `dis` of the code) are found by their frames on the stack:
    only torch._dynamo's callback calls into convert_frame.py."""
    if getattr(torch._guards._TLS, "compile_context", None) is not None:
        return True
    convert_frame = sys.modules.get("torch._dynamo.convert_frame")
    if convert_frame is None:
        return False
    filename = _module_file(convert_frame)
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename == filename:
            return True
        frame = frame.f_back
    return False


def _module_file(module: types.ModuleType) -> str:
    path = module.__file__ or ""
    return path[:-1] if path.endswith(".pyc") else path


def dynamo_code_reason(code: types.CodeType) -> str | None:
    """Why a code object is torch._dynamo's compiled code rather than user code, or None."""
    if code.co_name.startswith(_DYNAMO_RESUME_PREFIX):
        return "a resume function of torch._dynamo"
    if code.co_filename.startswith(_FX_GENERATED_PREFIX):
        return "fx-generated code (a compiled graph's forward)"
    if code.co_filename == "<string>" and code.co_name == "guard" and code.co_varnames[:1] == ("L",) \
            and code.co_argcount == 1:
        # torch/_dynamo/guards.py build_guard_function: `def guard(L):`, exec'd, called by its C
        # guard tree on every cache lookup (a lambda guard), so also outside its compile.
        return "a guard function of torch._dynamo"
    return None


def hide_from_dynamo(*codes: types.CodeType) -> None:
    """torch._dynamo runs these codes, and whatever they call, as Python (never traced)."""
    eval_frame = torch._C._dynamo.eval_frame
    skip = eval_frame._FrameAction.SKIP
    strategy = eval_frame._FrameExecStrategy(skip, skip)  # this frame, and recursively its callees
    for code in codes:
        eval_frame.set_code_exec_strategy(code, strategy)

"""Settings read by the translator and the miss path (`convert_frame.py`).

Change them as attributes: `pyframe.config.recompile_limit = 4`.
"""
from __future__ import annotations

# Most cache entries one code object may hold for the same objects (torch._dynamo's default is 8):
# entries made for other objects the trace guarded by identity (another instance of a module
# whose forward this is, say) do not count, up to `accumulated_recompile_limit` entries in all
# (torch._dynamo's 256). Past either limit the code runs eagerly (its entries still hit), with
# one warning that names the guard that failed.
recompile_limit: int = 8
accumulated_recompile_limit: int = 256

# When a backend fails: True warns and runs the graph eagerly; False raises BackendCompilerFailed.
suppress_errors: bool = True

# Deepest chain of inlined user calls before the call is left to Python.
inline_depth_limit: int = 32

# Guards under an object pinned by identity (a module, say) are skipped on a cached call while
# nothing they read has changed (the versions of the dicts and types they went through, see
# docs/c_layer.md). Assumes, as torch._dynamo does by default, that a parameter's metadata is not
# changed in place (`p.data = other`, `p.requires_grad_()`); set False to check every guard.
skip_guards_on_unchanged_objects: bool = True

# Skip FakeTensorMode's propagation where its answer is known: the memo of ops already propagated
# on same-shaped inputs (fake_memo.py) and the shape rules of the commonest ops on dense tensors
# (fake_rules.py). An op costs ~10 us instead of 60-900. False propagates every op (to rule them
# out when debugging a trace).
fast_fake_propagation: bool = True

# What is user code (pyframe/trace_rules.py): torch._dynamo's rules, extended by module name. A
# module in `skip_modules` (a package: everything under it) is never traced: the hook runs its
# frames as Python and a call into it from traced code is a graph break. A module in
# `trace_modules` is traced even where a rule would skip it (a part of torch, a library torch._dynamo
# skips). Read when the hook first meets a code object; `pyframe.reset()` forgets earlier decisions.
#     pyframe.config.skip_modules = ["mylib.io"]          # keep a data loader out of the graph
#     pyframe.config.trace_modules = ["torch.optim"]      # trace an optimizer's Python step
skip_modules: list[str] = []
trace_modules: list[str] = []

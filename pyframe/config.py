"""Settings read by the translator and the miss path (`convert_frame.py`).

Change them as attributes: `pyframe.config.recompile_limit = 4`. A value of the wrong kind is
refused when it is set, with a TypeError or ValueError that says what the setting takes.
"""
from __future__ import annotations

import os
import sys
import types

# Most cache entries one code object may hold for the same objects (torch._dynamo's default is 8):
# entries made for other objects the trace guarded by identity (an argument whose id() it read)
# do not count (modules are guarded by type, as torch._dynamo guards them: they count), up to `accumulated_recompile_limit` entries in all
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
# on same-shaped inputs (fake/memo.py) and the shape rules of the commonest ops on dense tensors
# (fake/rules.py). An op costs ~10 us instead of 60-900. False propagates every op (to rule them
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

# A frame compiled while DistributedDataParallel's forward runs: its graphs are split at DDP's
# gradient buckets, each piece compiled on its own, so a bucket's all-reduce overlaps the backward
# of the pieces before it (backends/ddp.py; torch._dynamo.config.optimize_ddp). False: one graph.
optimize_ddp: bool = True

# Data-dependent values in the graph, as torch._dynamo's settings of the same names (both False by
# default, as torch's): `x.item()` (and an integer tensor's `tolist()`) recorded in the graph, its
# value an unbacked symbol (`u0`), with `capture_scalar_outputs`; `nonzero()`, `x[mask]`,
# `torch.unique(x)` recorded, their output sizes unbacked symbols, with
# `capture_dynamic_output_shape_ops` (fake/unbacked.py). Off, each is a graph break. Either of
# pyframe's or torch._dynamo.config's turns the capture on, and fullgraph turns both on; read when a
# frame compiles, never guarded (an entry compiled under one setting serves calls under the other).
capture_scalar_outputs: bool = False
capture_dynamic_output_shape_ops: bool = False

# Warm start by itself (pyframe/warm/cache_dir.py): a directory where pyframe loads the entries an
# earlier process saved, when optimize() or compile() is first called, and saves this process's at
# exit. None (the default): only pyframe.save and pyframe.load do.
warm_cache_dir: str | None = None


def _check_limit(name: str, value: object) -> None:
    if type(value) is not int or value < 0:
        raise TypeError(f"pyframe.config.{name} takes an int >= 0, not {value!r}")


def _check_flag(name: str, value: object) -> None:
    if type(value) is not bool:
        raise TypeError(f"pyframe.config.{name} takes True or False, not {value!r}")


def _check_module_names(name: str, value: object) -> None:
    names = [value] if isinstance(value, str) else value
    try:
        ok = all(isinstance(n, str) and n for n in names)  # type: ignore[union-attr]
    except TypeError:
        ok = False
    if not ok:
        raise TypeError(f"pyframe.config.{name} takes a list of module names (str), not {value!r}")


def _check_directory(name: str, value: object) -> None:
    if value is not None and not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"pyframe.config.{name} takes a directory (str or path) or None, not {value!r}")


_CHECKS = {
    "recompile_limit": _check_limit, "accumulated_recompile_limit": _check_limit,
    "inline_depth_limit": _check_limit, "suppress_errors": _check_flag,
    "skip_guards_on_unchanged_objects": _check_flag, "fast_fake_propagation": _check_flag,
    "skip_modules": _check_module_names, "trace_modules": _check_module_names,
    "optimize_ddp": _check_flag, "capture_scalar_outputs": _check_flag,
    "capture_dynamic_output_shape_ops": _check_flag, "warm_cache_dir": _check_directory,
}


class _CheckedSettings(types.ModuleType):
    """This module, whose settings are checked when they are set (a string where an int is
    expected would otherwise fail much later, inside the miss path)."""

    def __setattr__(self, name: str, value: object) -> None:
        check = _CHECKS.get(name)
        if check is not None:
            check(name, value)
        elif not name.startswith("_") and name not in vars(self):
            raise AttributeError(f"pyframe.config has no setting {name!r}; settings: {', '.join(sorted(_CHECKS))}")
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _CheckedSettings

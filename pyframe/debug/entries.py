"""`cache_entries(fn)`: what the eval-frame hook holds for a function, as readable records.

The C layer keeps, in each code object's extra slot, a list of cache entries (docs/c_layer.md,
section 3): the transformed code, its guard tree, a hit count and the `FrameRecord` the miss path
made (`entry.info`). A function that broke its graph also has resume functions: generated code
objects (pyframe/resume.py) that the transformed code calls, each with cache entries of its own.
This module gathers both into `CacheEntryInfo` dataclasses: a snapshot, read from the C layer
when `cache_entries` is called.

Where it sits: on top of the miss path (it reads `convert_frame.FrameRecord`), below nothing.
"""
from __future__ import annotations

import dis
import os
import types
from dataclasses import dataclass, field
from typing import Any

import torch

from .. import _C, convert_frame, resume
from ..backends import CompiledGraph
from ..convert_frame import FrameRecord

__all__ = ["CacheEntryInfo", "CacheEntries", "cache_entries", "entries_of", "code_of", "resume_codes_of", "describe_code"]


@dataclass(repr=False)
class CacheEntryInfo:
    """One cache entry of a function (or of one of its resume functions); printed (and shown at
    the REPL) as a report."""

    code: types.CodeType                 # the code it belongs to: the function's own, or a resume function's
    transformed: types.CodeType          # what the hook runs in a shadow frame when the guards pass
    guards: list[str]                    # the text of every guard check, in tree order
    graphs: list[torch.fx.GraphModule] = field(repr=False)  # the graphs its transformed code calls
    hits: int                            # cache hits so far (the call that compiled it is not one)
    reason: str                          # why it was made: "first compile" or "guard failed: <check>"
    backend: str | None = None           # the backend of the callback that owns it (None: owner gone)
    break_reason: str | None = None      # the graph break its code stops at, with the user's line
    resume_codes: list[types.CodeType] = field(default_factory=list, repr=False)
    compile_seconds: float = 0.0
    number: int = 0                      # 1 for the first entry compiled for this code, 2 for the next...
    compiled: list[CompiledGraph] = field(default_factory=list, repr=False)  # names, backend results
    record: FrameRecord | None = field(default=None, repr=False)

    @property
    def function(self) -> str:
        return self.code.co_name

    @property
    def graph_names(self) -> list[str]:
        return [g.name for g in self.compiled]

    @property
    def is_recompile(self) -> bool:
        return self.reason.startswith("guard failed")

    def __str__(self) -> str:
        lines = [f"{describe_code(self.code)}: entry #{self.number or '?'}, {self.hits} hit(s)"
                 + (f", backend {self.backend!r}" if self.backend else ""),
                 f"  made by: {self.reason}"]
        lines.append(f"  guards ({len(self.guards)}):")
        lines += [f"    {g}" for g in self.guards]
        if self.compiled:
            lines.append("  graphs: " + ", ".join(
                f"{g.name} ({_op_count(g.gm)} ops)" + (f" [backend failed: {g.error}]" if g.error else "")
                for g in self.compiled))
        else:
            lines.append("  graphs: none")
        if self.break_reason:
            lines.append(f"  graph break: {self.break_reason}")
        if self.resume_codes:
            lines.append("  calls resume functions: " + ", ".join(c.co_name for c in self.resume_codes))
        lines.append(f"  transformed code: {_length(self.transformed)} instructions "
                     f"(original: {_length(self.code)}); see pyframe.debug.show()")
        return "\n".join(lines)

    __repr__ = __str__  # at the REPL, the report


class CacheEntries(list):
    """The list `cache_entries` returns: a plain list of `CacheEntryInfo`, shown at the REPL (and
    printed) as their reports one after the other."""

    def __str__(self) -> str:
        if not self:
            return "no cache entries (not called under pyframe.optimize since the last reset, or skipped)"
        return "\n".join(str(entry) for entry in self)

    __repr__ = __str__


def _op_count(gm: torch.fx.GraphModule) -> int:
    return sum(1 for n in gm.graph.nodes if n.op.startswith("call_"))


def _length(code: types.CodeType) -> int:
    return sum(1 for _ in dis.get_instructions(code))


def describe_code(code: types.CodeType) -> str:
    """`toy_example (model.py:12)`, or for a resume function what it continues."""
    origin = resume.origins.get(code)
    where = f"{os.path.basename(code.co_filename)}:{code.co_firstlineno}"
    if origin is not None:
        return f"{code.co_name} (resumes {origin.original.co_name} at offset {origin.offset}, {where})"
    return f"{code.co_name} ({where})"


def code_of(fn: Any) -> types.CodeType:
    """The code object pyframe compiles for `fn`: a function's `__code__`, a module's `forward`'s,
    what `pyframe.optimize` (or `torch.compile`) wrapped, or a code object as given."""
    seen = 0
    while seen < 16:  # wrappers of wrappers, but never a loop
        seen += 1
        if isinstance(fn, types.CodeType):
            return fn
        if isinstance(fn, torch.nn.Module):
            inner = getattr(fn, "_orig_mod", None)  # pyframe's and torch's OptimizedModule
            if isinstance(inner, torch.nn.Module):
                fn = inner
                continue
            forward = type(fn).forward
            return code_of(forward)
        if isinstance(fn, _C.CallbackScope):
            fn = fn.fn
            continue
        if isinstance(fn, types.MethodType):
            fn = fn.__func__
            continue
        if isinstance(fn, types.FunctionType):
            return fn.__code__
        wrapped = getattr(fn, "__wrapped__", None) or getattr(fn, "_torchdynamo_orig_callable", None)
        if wrapped is not None:
            fn = wrapped
            continue
        break
    raise TypeError(f"pyframe.debug expects a function, a method, an nn.Module (optimized or not) or a "
                    f"code object; got {type(fn).__name__}: {fn!r}")


def resume_codes_of(code: types.CodeType) -> list[types.CodeType]:
    """The resume functions reachable from `code`'s entries (and theirs), in the order first met."""
    found: list[types.CodeType] = []
    queue = [code]
    while queue:
        current = queue.pop(0)
        for entry in _C.get_cache_entries(current):
            info = entry.info
            for rc in getattr(info, "resume_codes", ()):
                if rc is not code and rc not in found:
                    found.append(rc)
                    queue.append(rc)
    return found


def entries_of(code: types.CodeType) -> list[CacheEntryInfo]:
    """The entries of this one code object, in the order the hook tries them."""
    compiled = [r for r in convert_frame.records_for(code) if r.status == "compiled"]
    out = []
    for entry in _C.get_cache_entries(code):
        record = entry.info if isinstance(entry.info, FrameRecord) else None
        owner = entry.owner
        number = next((i for i, r in enumerate(compiled, 1) if r is record), 0)
        error = record.error if record is not None else None
        out.append(CacheEntryInfo(
            code=code,
            transformed=entry.code,
            guards=list(entry.guards.texts()),
            graphs=[g.gm for g in record.graphs] if record else [],
            hits=entry.hits,
            reason=record.reason if record else "unknown (made by a callback other than pyframe's)",
            backend=getattr(owner, "backend_name", None) if owner is not None else None,
            break_reason=str(error) if error is not None else None,
            resume_codes=list(record.resume_codes) if record else [],
            compile_seconds=record.compile_seconds if record else 0.0,
            number=number,
            compiled=list(record.graphs) if record else [],
            record=record,
        ))
    return out


def cache_entries(fn: Any) -> CacheEntries:
    """Every cache entry of `fn`'s code, then those of its resume functions.

    For each code, entries come in the order the hook tries them: most recently hit (or made) first.
    The values are a snapshot: call again to see new hit counts. The list prints as the entries'
    reports.
    """
    code = code_of(fn)
    entries = CacheEntries(entries_of(code))
    for rc in resume_codes_of(code):
        entries += entries_of(rc)
    return entries

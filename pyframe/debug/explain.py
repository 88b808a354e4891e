"""explain(): run a function once under pyframe and report its graphs, breaks, ops and guards.

    out = pyframe.explain(toy_example)(a, b)
    out.graph_count, out.graph_break_count, out.break_reasons, out.ops_per_graph, out.guards

The run uses its own compiler (eager backend unless another is given) and leaves no cache entry
behind: every code object it compiled, resume functions included, is cleared afterwards.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from ..backends import backend_name, lookup_backend
from ..convert_frame import FrameRecord
from ..eval_frame import call_privately


@dataclass
class BreakReason:
    reason: str
    filename: str
    lineno: int
    source_line: str
    function: str

    def __str__(self) -> str:
        return f"{self.reason}\n      {self.filename}:{self.lineno} in {self.function}\n        {self.source_line}"


@dataclass(repr=False)
class ExplainOutput:
    """What `explain(fn)(*args)` found; printed (and shown at the REPL) as the report below."""

    graphs: list[torch.fx.GraphModule] = field(default_factory=list)
    break_reasons: list[BreakReason] = field(default_factory=list)
    ops_per_graph: list[list[str]] = field(default_factory=list)
    guards: list[str] = field(default_factory=list)
    compile_times: list[tuple[str, float]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (frame, why it ran as plain Python)

    @property
    def graph_count(self) -> int:
        return len(self.graphs)

    @property
    def graph_break_count(self) -> int:
        return len(self.break_reasons)

    @property
    def op_count(self) -> int:
        return sum(len(ops) for ops in self.ops_per_graph)

    def __str__(self) -> str:
        lines = [f"Graph Count: {self.graph_count}", f"Graph Break Count: {self.graph_break_count}",
                 f"Op Count: {self.op_count}", "Break Reasons:"]
        for i, reason in enumerate(self.break_reasons, 1):
            lines += [f"  Break Reason {i}:", f"    Reason: {reason}"]
        lines.append("Ops per Graph:")
        for i, ops in enumerate(self.ops_per_graph, 1):
            lines += [f"  Ops {i}:", *(f"    {op}" for op in ops)]
        lines.append("Out Guards:")
        lines += [f"  Guard {i}: {g}" for i, g in enumerate(self.guards, 1)]
        if self.skipped:
            lines.append("Frames run as plain Python:")
            lines += [f"  {name}: {why}" for name, why in self.skipped]
        lines.append("Compile Times: " + ", ".join(f"{name}: {t:.4f} s" for name, t in self.compile_times))
        return "\n".join(lines)

    __repr__ = __str__  # at the REPL, the report


def op_name(node: torch.fx.Node) -> str:
    """`torch.abs`, `operator.add`, `Tensor.sum`: how a call node reads in a report."""
    if node.op == "call_method":
        return f"Tensor.{node.target}"
    target = node.target
    module = getattr(target, "__module__", None) or "torch"
    if module.startswith("torch._C"):
        module = "torch." + module.rsplit("._", 1)[-1] if module != "torch._C._VariableFunctions" else "torch"
    name = getattr(target, "__name__", str(target))
    return f"{'operator' if module == '_operator' else module}.{name}"


def explain(fn: Callable, backend: str | Callable = "eager") -> Callable[..., ExplainOutput]:
    """`explain(fn)(*args, **kwargs)`: run `fn` once under pyframe and describe what happened."""
    def run(*args: Any, **kwargs: Any) -> ExplainOutput:
        _, records = call_privately(fn, args, kwargs, lookup_backend(backend), backend_name(backend))
        return _summarize(records)
    return run


def _summarize(records: list[FrameRecord]) -> ExplainOutput:
    out = ExplainOutput()
    for record in records:
        if record.status != "compiled":
            out.skipped.append((record.name, record.reason))
            continue
        for graph in record.graphs:
            out.graphs.append(graph.gm)
            out.ops_per_graph.append([op_name(n) for n in graph.gm.graph.nodes if n.op.startswith("call_")])
        if record.error is not None:
            loc = record.error.location
            out.break_reasons.append(BreakReason(record.error.reason, loc.filename if loc else "?",
                                                 loc.lineno if loc else 0, loc.source_line if loc else "",
                                                 loc.function if loc else "?"))
        out.guards.extend(record.guards)
        out.compile_times.append((record.name.split(" ")[0], record.compile_seconds))
    return out

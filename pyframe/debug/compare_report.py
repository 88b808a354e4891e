"""What `python -m pyframe compare` prints of the comparisons compare.py makes: the side-by-side
table (one row per case, a totals row, the ratios of the two engines) and the JSON report (`--json`).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Sequence

from .compare import ENGINES, CaseComparison, RunRecord

__all__ = ["TABLE_HEADERS", "Totals", "format_table", "ratios_text", "report_json", "table_rows", "totals", "totals_row"]


def _fmt(value: float | None, scale: float, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value * scale:.{digits}f}"


def _ratio(num: float | None, den: float | None) -> str:
    if num is None or den is None or den <= 0:
        return "n/a"
    return f"{num / den:.2f}"


def _overhead(record: RunRecord | None, eager: RunRecord | None) -> float | None:
    if record is None or eager is None or record.call_s is None or eager.call_s is None:
        return None
    return max(record.call_s - eager.call_s, 0.0)


def _ok_text(cmp: CaseComparison, engine: str) -> str:
    if engine in cmp.errors:
        return "n/a" if cmp.errors[engine].startswith("n/a") else "ERROR"
    return {True: "ok", False: "WRONG", None: "n/a"}[cmp.result_ok(engine)]


def _match_text(cmp: CaseComparison, match: bool | None) -> str:
    pf = cmp.records.get("pyframe")
    if match is False and pf is not None and pf.internal_errors:
        return "INTERNAL ERROR"
    if match is False and pf is not None and pf.fallbacks:
        return "FELL BACK"
    if cmp.case.difference and match is False:
        return "documented"
    return {True: "yes", False: "NO", None: "n/a"}[match]


def _pair(pf: RunRecord | None, dyn: RunRecord | None, attr: str) -> str:
    def one(record: RunRecord | None) -> str:
        return "-" if record is None else str(getattr(record, attr))
    return f"{one(pf)}/{one(dyn)}"


TABLE_HEADERS = [
    "case", "ok pf", "ok dyn", "graphs pf/dyn", "breaks pf/dyn", "ops match", "code match",
    "compile ms pf", "compile ms dyn", "call us eager", "call us pf", "call us dyn",
    "overhead pf/dyn",
]


def table_rows(comparisons: Sequence[CaseComparison]) -> list[list[str]]:
    """One row per case: results ok per engine, graph and break counts, whether the op sequences
    match and whether the graphs' code matches (never, for a pyframe run that fell back to plain
    Python or met an internal error: FELL BACK, INTERNAL ERROR), warm compile times (first call) and cache-hit call times, and pyframe's cache-hit
    overhead over eager as a ratio of torch._dynamo's."""
    rows = []
    for cmp in comparisons:
        rec = cmp.records
        eager, pf, dyn = rec.get("eager"), rec.get("pyframe"), rec.get("dynamo")
        rows.append([
            cmp.case.qualname,
            _ok_text(cmp, "pyframe"),
            _ok_text(cmp, "dynamo"),
            _pair(pf, dyn, "graph_count"),
            _pair(pf, dyn, "breaks"),
            _match_text(cmp, cmp.ops_match()),
            _match_text(cmp, cmp.graphs_match()),
            _fmt(pf and pf.first_call_s, 1e3),
            _fmt(dyn and dyn.first_call_s, 1e3),
            _fmt(eager and eager.call_s, 1e6, 2),
            _fmt(pf and pf.call_s, 1e6, 2),
            _fmt(dyn and dyn.call_s, 1e6, 2),
            _ratio(_overhead(pf, eager), _overhead(dyn, eager)),
        ])
    return rows


@dataclasses.dataclass
class Totals:
    """Sums over the cases every engine ran (times only over cases both JIT engines timed)."""

    cases: int
    ok: dict[str, int]                 # engine -> cases whose results equal eager's
    graphs: dict[str, int]
    breaks: dict[str, int]
    ops_match: int                     # cases where pyframe's op sequences equal torch._dynamo's
    code_match: int                    # cases where pyframe's graphs' code equals torch._dynamo's
    fell_back: int                     # cases where pyframe ran a frame as plain Python
    compared: int                      # cases both JIT engines ran
    compile_s: dict[str, float]        # engine -> total first-call time
    call_s: dict[str, float]           # engine -> total cache-hit call time
    overhead_s: dict[str, float]       # engine -> total cache-hit time over eager's
    timed: int                         # cases with cache-hit times for all three engines

    @property
    def compile_ratio(self) -> float | None:
        """pyframe's total warm compile time over torch._dynamo's."""
        dyn = self.compile_s.get("dynamo", 0.0)
        return self.compile_s.get("pyframe", 0.0) / dyn if dyn > 0 else None

    @property
    def overhead_ratio(self) -> float | None:
        """pyframe's total cache-hit overhead over eager, divided by torch._dynamo's."""
        dyn = self.overhead_s.get("dynamo", 0.0)
        return self.overhead_s.get("pyframe", 0.0) / dyn if dyn > 0 else None


def totals(comparisons: Sequence[CaseComparison]) -> Totals:
    jit = ("pyframe", "dynamo")
    both = [c for c in comparisons if all(e in c.records for e in jit)]
    timed = [c for c in both if all(c.records.get(e) is not None and c.records[e].call_s is not None
                                    for e in ("eager", *jit))]
    return Totals(
        cases=len(comparisons),
        ok={e: sum(bool(c.result_ok(e)) for c in comparisons) for e in jit},
        graphs={e: sum(c.records[e].graph_count for c in comparisons if e in c.records) for e in jit},
        breaks={e: sum(c.records[e].breaks for c in comparisons if e in c.records) for e in jit},
        ops_match=sum(bool(c.ops_match()) for c in both),
        code_match=sum(bool(c.graphs_match()) for c in both),
        fell_back=sum(bool(c.records["pyframe"].fallbacks) for c in comparisons if "pyframe" in c.records),
        compared=len(both),
        compile_s={e: sum(c.records[e].first_call_s for c in both) for e in jit},
        call_s={e: sum(c.records[e].call_s for c in timed) for e in ("eager", *jit)},  # type: ignore[misc]
        overhead_s={e: sum(_overhead(c.records[e], c.records["eager"]) or 0.0 for c in timed) for e in jit},
        timed=len(timed),
    )


def totals_row(t: Totals) -> list[str]:
    """The table's last row: counts and sums over the cases."""
    timed = t.timed > 0
    return [
        f"TOTAL ({t.cases} cases)",
        f"{t.ok['pyframe']}/{t.cases}",
        f"{t.ok['dynamo']}/{t.cases}",
        f"{t.graphs['pyframe']}/{t.graphs['dynamo']}",
        f"{t.breaks['pyframe']}/{t.breaks['dynamo']}",
        f"{t.ops_match}/{t.compared}",
        f"{t.code_match}/{t.compared}",
        _fmt(t.compile_s["pyframe"], 1e3) if t.compared else "n/a",
        _fmt(t.compile_s["dynamo"], 1e3) if t.compared else "n/a",
        _fmt(t.call_s["eager"], 1e6, 2) if timed else "n/a",
        _fmt(t.call_s["pyframe"], 1e6, 2) if timed else "n/a",
        _fmt(t.call_s["dynamo"], 1e6, 2) if timed else "n/a",
        _ratio(t.overhead_s["pyframe"], t.overhead_s["dynamo"]) if timed else "n/a",
    ]


def ratios_text(t: Totals) -> str:
    """One line of ratios under the table."""
    parts = []
    if t.compile_ratio is not None:
        parts.append(f"warm compile time pyframe/dynamo = {t.compile_ratio:.3f}")
    if t.overhead_ratio is not None:
        parts.append(f"cache-hit overhead over eager pyframe/dynamo = {t.overhead_ratio:.3f} "
                     f"(over {t.timed} timed case(s))")
    return "; ".join(parts) if parts else "no ratios: a JIT engine did not run (or --no-timing)"


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain-text table: tabulate's when installed, else a simple aligned one."""
    try:
        from tabulate import tabulate
    except ImportError:
        widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]
        lines = [headers, ["-" * w for w in widths], *rows]
        return "\n".join("  ".join(str(x).ljust(w) for x, w in zip(line, widths)) for line in lines)
    return tabulate(rows, headers=list(headers), disable_numparse=True)


def _run_json(record: RunRecord | None, error: str | None, ok: bool | None) -> dict[str, Any]:
    if record is None:
        return {"error": error, "ok": None}
    return {
        "ok": ok,
        "error": None,
        "graphs": record.graph_count,
        "breaks": record.breaks,
        "ops": [list(ops) for ops in record.op_sequences],
        "code": [g.code for g in record.graphs],
        "fallbacks": list(record.fallbacks),
        "graphs_on_hits": record.graphs_on_hits,
        "compile_ms": record.first_call_s * 1e3,
        "call_us": None if record.call_s is None else record.call_s * 1e6,
    }


def report_json(comparisons: Sequence[CaseComparison], *, backend: str = "eager") -> dict[str, Any]:
    """Everything the table shows, as plain data (``--json OUT``)."""
    t = totals(comparisons)
    cases = []
    for cmp in comparisons:
        engines = {}
        for engine in [e for e in ENGINES if e in cmp.records or e in cmp.errors]:
            ok = True if engine == "eager" else cmp.result_ok(engine)
            engines[engine] = _run_json(cmp.records.get(engine), cmp.errors.get(engine), ok)
        cases.append({
            "case": cmp.case.qualname,
            "tags": sorted(cmp.case.tags),
            "ops_match": cmp.ops_match(),
            "code_match": cmp.graphs_match(),
            "difference": cmp.case.difference,
            "engines": engines,
        })
    return {
        "backend": backend,
        "cases": cases,
        "totals": {
            "cases": t.cases,
            "ok": t.ok,
            "graphs": t.graphs,
            "breaks": t.breaks,
            "ops_match": t.ops_match,
            "code_match": t.code_match,
            "fell_back": t.fell_back,
            "compared": t.compared,
            "compile_ms": {e: v * 1e3 for e, v in t.compile_s.items()},
            "call_us": {e: v * 1e6 for e, v in t.call_s.items()},
            "timed": t.timed,
            "compile_ratio_pyframe_over_dynamo": t.compile_ratio,
            "overhead_ratio_pyframe_over_dynamo": t.overhead_ratio,
        },
    }

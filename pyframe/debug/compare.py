"""The differential harness: run a corpus case eagerly, under pyframe and under torch._dynamo.

Every JIT engine gets the same ``CountingBackend``, which records each graph it is handed (its op
sequence, normalized so the two engines' graphs can be compared) and returns ``gm.forward``.
``run_case`` returns a ``RunRecord`` per (case, engine): the first call's result, a cache-hit call's
result, the graphs, and wall times measured in-process. ``compare_case`` puts the engines side by
side; tests/test_corpus.py asserts on it and ``python -m pyframe compare`` prints it as a table.

Where it sits: beside the translator, on top of the public API. It reaches pyframe only through
``pyframe.optimize`` and ``pyframe.reset``, so it runs (with pyframe reported unavailable) before
those exist, and it never imports the translator.
"""

from __future__ import annotations

import dataclasses
import functools
import time
import timeit
from typing import Any, Callable, Iterable, Mapping, Sequence

import torch
import torch.fx

from pyframe.debug.cases import Case, Inputs

__all__ = [
    "ENGINES",
    "GraphRecord",
    "RunRecord",
    "CaseComparison",
    "CountingBackend",
    "normalize_ops",
    "engine_unavailable_reason",
    "optimize_with",
    "reset_engines",
    "run_case",
    "compare_case",
    "assert_same_result",
    "graphs_mismatch",
    "format_table",
]

#: Engine names. "eager" calls the program directly and makes no graphs.
ENGINES = ("eager", "pyframe", "dynamo")


# --------------------------------------------------------------------------------------------------
# Records


@dataclasses.dataclass(frozen=True)
class GraphRecord:
    """One graph as a backend saw it."""

    ops: tuple[str, ...]  # normalized op sequence, in graph order (see normalize_ops)
    num_inputs: int  # placeholders: tensors the graph reads (parameters too, when they are lifted)


@dataclasses.dataclass
class RunRecord:
    """One case run by one engine."""

    case: str
    engine: str
    result: Any  # what the first call returned
    cached_result: Any  # what a second call, with fresh equal inputs, returned (a cache hit)
    graphs: list[GraphRecord]  # every graph compiled, first call and cache-hit calls together
    first_call_s: float  # wall time of the first call: tracing + backend + run, for a warm engine
    call_s: float | None  # per-call wall time on cache hits (min over rounds); None if not timed
    graphs_on_hits: int  # graphs compiled during the cache-hit calls (a JIT engine should make 0)

    @property
    def graph_count(self) -> int:
        return len(self.graphs)

    @property
    def op_sequences(self) -> list[tuple[str, ...]]:
        return [g.ops for g in self.graphs]


@dataclasses.dataclass
class CaseComparison:
    """All engines on one case; ``errors`` holds the engines that raised (message), ``records`` the rest."""

    case: Case
    records: dict[str, RunRecord]
    errors: dict[str, str]

    def result_ok(self, engine: str) -> bool | None:
        """Whether ``engine`` matched eager on both calls (None if either did not run)."""
        if engine not in self.records or "eager" not in self.records:
            return None
        try:
            eager = self.records["eager"]
            assert_same_result(self.records[engine].result, eager.result)
            assert_same_result(self.records[engine].cached_result, eager.cached_result)
        except AssertionError:
            return False
        return True

    def graphs_match(self, engine: str = "pyframe", reference: str = "dynamo") -> bool | None:
        if engine not in self.records or reference not in self.records:
            return None
        return graphs_mismatch(self.records[engine], self.records[reference]) is None


# --------------------------------------------------------------------------------------------------
# The counting backend


def _op_name(gm: torch.fx.GraphModule, node: torch.fx.Node) -> str | None:
    if node.op == "call_function":
        return getattr(node.target, "__name__", None) or repr(node.target)
    if node.op == "call_method":
        return str(node.target)
    if node.op == "call_module":
        return type(gm.get_submodule(str(node.target))).__name__
    return None  # placeholder, get_attr, output: not ops


def normalize_ops(gm: torch.fx.GraphModule) -> tuple[str, ...]:
    """A graph's ops as names two engines can agree on.

    call_function -> the target's ``__name__`` (``cos``, ``add``, ``relu``, ``linear``, ``getitem``);
    call_method -> the method name (``sum``); call_module -> the module's type name (``ReLU``).
    Placeholders, get_attr and output are not ops. Node names (``abs_1``) are engine-specific and ignored.
    """
    return tuple(name for node in gm.graph.nodes if (name := _op_name(gm, node)) is not None)


class CountingBackend:
    """A backend that records every graph and runs it as it is (``gm.forward``)."""

    def __init__(self) -> None:
        self.graphs: list[GraphRecord] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
        placeholders = sum(1 for node in gm.graph.nodes if node.op == "placeholder")
        self.graphs.append(GraphRecord(normalize_ops(gm), placeholders))
        return gm.forward


# --------------------------------------------------------------------------------------------------
# Engines


def engine_unavailable_reason(engine: str) -> str | None:
    """None if ``engine`` can run here, else why not (pyframe's API may not have landed yet)."""
    if engine not in ENGINES:
        return f"unknown engine {engine!r}; known: {', '.join(ENGINES)}"
    if engine == "pyframe":
        import pyframe  # already imported (we are inside it); looked up late, as the API is growing

        missing = [name for name in ("optimize", "reset") if not hasattr(pyframe, name)]
        if missing:
            return f"pyframe.{'/'.join(missing)} not implemented yet"
    return None


def optimize_with(engine: str, fn: Callable[..., Any], backend: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` (a function or an nn.Module) as ``engine`` runs it, with ``backend`` for its graphs."""
    if engine == "eager":
        return fn
    if engine == "pyframe":
        import pyframe

        return pyframe.optimize(backend)(fn)
    if engine == "dynamo":
        # Static shapes, as pyframe guards them (DESIGN.md section 3): compare like with like.
        return torch.compile(fn, backend=backend, dynamic=False)
    raise ValueError(f"unknown engine {engine!r}; known: {', '.join(ENGINES)}")


def reset_engines() -> None:
    """Drop every cache entry of both JIT engines, so each case starts cold."""
    torch._dynamo.reset()
    if engine_unavailable_reason("pyframe") is None:
        import pyframe

        pyframe.reset()


_WARMED: set[str] = set()


def _warm_up(engine: str) -> None:
    """Compile one throwaway function per engine per process, so imports and one-time setup are not
    counted in the first case's compile time."""
    if engine in _WARMED or engine == "eager":
        return
    # Defined from source under a neutral file name: a JIT skips frames of its own package's files
    # and of generated code (`<...>` names), so neither would warm it up.
    namespace: dict[str, Any] = {}
    exec(compile("def warm(x):\n    return x * 2 + 1\n", "pyframe_warmup.py", "exec"), namespace)
    optimize_with(engine, namespace["warm"], CountingBackend())(torch.ones(2))
    reset_engines()
    _WARMED.add(engine)


# --------------------------------------------------------------------------------------------------
# Running a case


def _call(fn: Callable[..., Any], inputs: Inputs) -> Any:
    return fn(*inputs.args, **inputs.kwargs)


def time_per_call(fn: Callable[[], Any], *, rounds: int = 5, round_s: float = 0.01) -> float:
    """Seconds per call of ``fn``: the minimum over ``rounds`` rounds of about ``round_s`` each
    (the minimum is the run least disturbed by the rest of the machine)."""
    start = time.perf_counter()
    fn()
    one = max(time.perf_counter() - start, 1e-7)
    number = max(1, min(100_000, int(round_s / one)))
    return min(timeit.repeat(fn, repeat=rounds, number=number)) / number


def run_case(case: Case, engine: str, *, timing: bool = True) -> RunRecord:
    """Run ``case`` under ``engine`` from cold caches: a first call, then cache-hit calls.

    Raises whatever the engine raises. With ``timing=False`` only two calls are made (fast: tests).
    """
    reason = engine_unavailable_reason(engine)
    if reason is not None:
        raise RuntimeError(f"engine {engine!r} unavailable: {reason}")
    _warm_up(engine)
    reset_engines()
    backend = CountingBackend()
    compiled = optimize_with(engine, case.make_fn(), backend)
    try:
        first_inputs, hit_inputs = case.make_inputs(), case.make_inputs()
        start = time.perf_counter()
        result = _call(compiled, first_inputs)
        first_call_s = time.perf_counter() - start
        graphs_after_first = len(backend.graphs)
        cached_result = _call(compiled, hit_inputs)
        call_s = time_per_call(functools.partial(_call, compiled, hit_inputs)) if timing else None
        graphs = list(backend.graphs)
    finally:
        reset_engines()
    return RunRecord(
        case=case.qualname,
        engine=engine,
        result=result,
        cached_result=cached_result,
        graphs=graphs,
        first_call_s=first_call_s,
        call_s=call_s,
        graphs_on_hits=len(graphs) - graphs_after_first,
    )


def compare_case(case: Case, engines: Iterable[str] = ENGINES, *, timing: bool = True) -> CaseComparison:
    """Run ``case`` under each engine; an engine that raises or is unavailable is recorded in ``errors``."""
    records: dict[str, RunRecord] = {}
    errors: dict[str, str] = {}
    for engine in engines:
        reason = engine_unavailable_reason(engine)
        if reason is not None:
            errors[engine] = f"n/a: {reason}"
            continue
        try:
            records[engine] = run_case(case, engine, timing=timing)
        except Exception as exc:
            errors[engine] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return CaseComparison(case, records, errors)


# --------------------------------------------------------------------------------------------------
# Checks


def assert_same_result(actual: Any, expected: Any, path: str = "result") -> None:
    """Assert two results are equal: tensors and numbers with ``torch.testing.assert_close``,
    containers (tuple, list, dict, named tuples, torch.Size) item by item with the same type, anything
    else (dtypes, strings, None) with ``==``. ``path`` names the item in the failure message."""
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor):
            raise AssertionError(f"{path}: expected a tensor, got {type(actual).__name__}")
        torch.testing.assert_close(actual, expected, msg=lambda m: f"{path}: {m}")
        return
    if type(actual) is not type(expected):
        raise AssertionError(
            f"{path}: type {type(actual).__name__} != expected {type(expected).__name__}"
        )
    if isinstance(expected, Mapping):
        if list(actual.keys()) != list(expected.keys()):
            raise AssertionError(f"{path}: keys {list(actual)} != expected {list(expected)}")
        for key in expected:
            assert_same_result(actual[key], expected[key], f"{path}[{key!r}]")
    elif isinstance(expected, (tuple, list)):
        if len(actual) != len(expected):
            raise AssertionError(f"{path}: length {len(actual)} != expected {len(expected)}")
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_same_result(a, e, f"{path}[{i}]")
    elif isinstance(expected, (bool, int, float, complex)):
        torch.testing.assert_close(actual, expected, msg=lambda m: f"{path}: {m}")
    elif actual != expected:
        raise AssertionError(f"{path}: {actual!r} != expected {expected!r}")


def graphs_mismatch(subject: RunRecord, reference: RunRecord) -> str | None:
    """None if both runs compiled the same number of graphs with the same op sequences, else how
    they differ (in words, for a test failure or a table)."""
    if subject.graph_count != reference.graph_count:
        return (
            f"{subject.engine} compiled {subject.graph_count} graph(s), "
            f"{reference.engine} {reference.graph_count}: "
            f"{subject.op_sequences} vs {reference.op_sequences}"
        )
    for i, (mine, theirs) in enumerate(zip(subject.op_sequences, reference.op_sequences)):
        if mine != theirs:
            return f"graph {i} ops differ: {subject.engine} {list(mine)} vs {reference.engine} {list(theirs)}"
    return None


# --------------------------------------------------------------------------------------------------
# The table printed by `python -m pyframe compare`


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


def table_rows(comparisons: Sequence[CaseComparison]) -> list[list[str]]:
    """One row per case: results ok per engine, graph counts, ops match, compile and call times."""
    rows = []
    for cmp in comparisons:
        rec = cmp.records
        eager, pf, dyn = rec.get("eager"), rec.get("pyframe"), rec.get("dynamo")

        def ok(engine: str) -> str:
            if engine in cmp.errors:
                return "n/a" if cmp.errors[engine].startswith("n/a") else "ERROR"
            return {True: "ok", False: "WRONG", None: "n/a"}[cmp.result_ok(engine)]

        def graphs(record: RunRecord | None) -> str:
            return "n/a" if record is None else str(record.graph_count)

        match = cmp.graphs_match()
        match_text = {True: "yes", False: "NO", None: "n/a"}[match]
        if cmp.case.difference and match is False:
            match_text = "documented"
        rows.append([
            cmp.case.qualname,
            ok("pyframe"),
            ok("dynamo"),
            graphs(pf),
            graphs(dyn),
            match_text,
            _fmt(pf and pf.first_call_s, 1e3),
            _fmt(dyn and dyn.first_call_s, 1e3),
            _fmt(eager and eager.call_s, 1e6, 2),
            _fmt(pf and pf.call_s, 1e6, 2),
            _fmt(dyn and dyn.call_s, 1e6, 2),
            _ratio(_overhead(pf, eager), _overhead(dyn, eager)),
        ])
    return rows


TABLE_HEADERS = [
    "case", "ok pf", "ok dyn", "graphs pf", "graphs dyn", "ops match",
    "compile ms pf", "compile ms dyn", "call us eager", "call us pf", "call us dyn",
    "overhead pf/dyn",
]


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain-text table: tabulate's when installed, else a simple aligned one."""
    try:
        from tabulate import tabulate
    except ImportError:
        widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]
        lines = [headers, ["-" * w for w in widths], *rows]
        return "\n".join("  ".join(str(x).ljust(w) for x, w in zip(line, widths)) for line in lines)
    return tabulate(rows, headers=list(headers))


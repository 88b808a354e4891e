"""The differential harness: run a corpus case eagerly, under pyframe and under torch._dynamo.

Every JIT engine gets the same ``CountingBackend``, which records each graph it is handed (its op
sequence, normalized so the two engines' graphs can be compared) and returns ``gm.forward`` (or
what another backend, ``--backend``, makes of the graph). ``run_case`` returns a ``RunRecord`` per
(case, engine): the first call's result, a cache-hit call's result, the graphs, the breaks, and
wall times measured in-process. ``compare_case`` puts the engines side by side;
tests/test_corpus.py asserts on it. ``python -m pyframe compare`` runs ``compare_cases`` (with a
``Progress`` bar) and prints what compare_report.py makes of the comparisons: ``table_rows`` plus a
``totals_row`` and ``ratios_text``, and ``report_json`` for ``--json``.

Where it sits: in the debugging layer, on top of the API (docs/architecture.md). It reaches
pyframe through ``eval_frame.optimize``, ``convert_frame.reset`` and ``backends.lookup_backend``,
and reads break counts from ``convert_frame.records``; it never imports the translator.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import io
import sys
import time
from collections.abc import Iterator, MappingView
from typing import Any, Callable, Iterable, Mapping, Sequence

import torch
import torch.fx

from .. import convert_frame
from ..backends import lookup_backend
from ..convert_frame import reset
from ..eval_frame import optimize
from .cases import Case, Inputs

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
    "code_mismatch",
    "fallbacks_of",
    "resolve_backend",
    "count_breaks",
    "Progress",
    "compare_cases",
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
    code: str = ""  # the GraphModule's Python code (`gm.code`): placeholders, names, annotations, ops


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
    breaks: int = 0  # graph breaks the engine reported (see count_breaks)
    # Frames the engine ran as plain Python, wholly (a frame it gave up on) or after a point (the
    # recompile limit), with why; an internal error of the engine is one of them (see fallbacks_of).
    fallbacks: list[str] = dataclasses.field(default_factory=list)

    @property
    def internal_errors(self) -> list[str]:
        return [f for f in self.fallbacks if "internal error" in f]

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
        """Whether ``engine`` made ``reference``'s graphs, code for code (``gm.code``: placeholders
        with their order, names and annotations, then every node), compiling every frame (None if
        either did not run). A run that fell back to plain Python, wholly or in part, or met an
        internal error, never matches (``code_mismatch``)."""
        if engine not in self.records or reference not in self.records:
            return None
        return code_mismatch(self.records[engine], self.records[reference]) is None

    def ops_match(self, engine: str = "pyframe", reference: str = "dynamo") -> bool | None:
        """Whether ``engine`` made as many graphs as ``reference`` with the same op sequences
        (``graphs_mismatch``), compiling every frame: a looser check than ``graphs_match``, blind
        to placeholders and arguments. A run that fell back never matches."""
        if engine not in self.records or reference not in self.records:
            return None
        if self.records[engine].fallbacks:
            return False
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
    """A backend that records every graph, then runs it as it is (``gm.forward``) or hands it to
    ``inner`` (another backend: ``inductor``, ``aot_eager``...)."""

    def __init__(self, inner: Callable[..., Any] | None = None) -> None:
        self.graphs: list[GraphRecord] = []
        self.inner = inner

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
        placeholders = sum(1 for node in gm.graph.nodes if node.op == "placeholder")
        self.graphs.append(GraphRecord(normalize_ops(gm), placeholders, gm.code.strip()))
        if self.inner is not None:
            return self.inner(gm, example_inputs)
        return gm.forward


def resolve_backend(backend: str | Callable[..., Any] | None) -> Callable[..., Any] | None:
    """The backend both engines get behind the counting one: None for ``"eager"`` (``gm.forward``),
    else a callable, or a name looked up in pyframe's registry and then torch's."""
    if backend is None or backend == "eager":
        return None
    if callable(backend):
        return backend
    return lookup_backend(backend)


def count_breaks(engine: str) -> int:
    """Graph breaks ``engine`` reported since its last reset: torch._dynamo's list of break reasons;
    pyframe's frame records that carry an ``Unsupported`` (a break, or a frame run as plain Python),
    but for a frame run as Python by a rule torch._dynamo follows (a break inside a loop), which
    torch._dynamo does not list either (unless it does: ``Unsupported.listed_break``)."""
    if engine == "dynamo":
        from torch._dynamo.utils import graph_break_reasons

        return len(graph_break_reasons)
    if engine == "pyframe":
        return sum(r.error is not None and (r.status != "skipped_by_rule" or r.error.listed_break)
                   for records in convert_frame.records.values() for r in records)
    return 0


def fallbacks_of(engine: str) -> list[str]:
    """Frames ``engine`` ran as plain Python since its last reset, each as `frame: why`: for
    pyframe, the frame records (``convert_frame.records``) whose status is not "compiled" (a frame
    given up on for a reason, an internal error, the recompile limit), except those run as Python
    by a rule torch._dynamo follows too ("skipped_by_rule": a graph break inside a loop). Frames of
    code never traced (the standard library, torch's internals) make no record. torch._dynamo's
    are not counted."""
    if engine != "pyframe":
        return []
    return [f"{r.name}: {r.reason}" for records in list(convert_frame.records.values()) for r in records
            if r.status not in ("compiled", "skipped_by_rule")]


# --------------------------------------------------------------------------------------------------
# Engines


def engine_unavailable_reason(engine: str) -> str | None:
    """None if ``engine`` can run here, else why not."""
    if engine not in ENGINES:
        return f"unknown engine {engine!r}; known: {', '.join(ENGINES)}"
    return None


def optimize_with(engine: str, fn: Callable[..., Any], backend: Callable[..., Any],
                  dynamic: bool | None = False) -> Callable[..., Any]:
    """``fn`` (a function or an nn.Module) as ``engine`` runs it, with ``backend`` for its graphs.
    Both engines get the same ``dynamic`` setting: static shapes by default (the shared corpus
    calls each case with one set of sizes), None for the cases of dynamic shapes."""
    if engine == "eager":
        return fn
    if engine == "pyframe":
        return optimize(backend, dynamic=dynamic)(fn)
    if engine == "dynamo":
        return torch.compile(fn, backend=backend, dynamic=dynamic)
    raise ValueError(f"unknown engine {engine!r}; known: {', '.join(ENGINES)}")


def reset_engines() -> None:
    """Drop every cache entry of both JIT engines, so each case starts cold."""
    torch._dynamo.reset()
    reset()


_WARMED: set[str] = set()


def _warm_up(engine: str) -> None:
    """Compile one throwaway function per engine per process, so imports and one-time setup are not
    counted in the first case's compile time."""
    if engine in _WARMED or engine == "eager":
        return
    # Defined from source under a neutral file name: a JIT skips frames of its own package's files
    # and of generated code (`<...>` names), so neither would warm it up.
    namespace: dict[str, Any] = {}
    # The branch on a tensor warms the graph-break path too (resume functions, their compile).
    source = "def warm(x):\n    y = x * 2 + 1\n    if y.sum() > 0:\n        y = y - 1\n    return y\n"
    exec(compile(source, "pyframe_warmup.py", "exec"), namespace)
    warm = optimize_with(engine, namespace["warm"], CountingBackend())
    warm(torch.ones(2))
    warm(-torch.ones(2))
    optimize_with(engine, torch.nn.Sequential(torch.nn.ReLU()), CountingBackend())(torch.ones(2))  # modules
    reset_engines()
    _WARMED.add(engine)


# --------------------------------------------------------------------------------------------------
# Running a case


def _call(fn: Callable[..., Any], inputs: Inputs, no_grad: bool = False) -> Any:
    if no_grad:  # a case tagged "no_grad" is called as inference code is: inside `with torch.no_grad()`
        with torch.no_grad():
            return fn(*inputs.args, **inputs.kwargs)
    return fn(*inputs.args, **inputs.kwargs)


def time_per_call_fresh(fn: Callable[[Inputs], Any], make_inputs: Callable[[], Inputs], *, rounds: int = 5,
                        round_s: float = 0.01, most: int = 200) -> float:
    """Seconds per call of ``fn(inputs)``, each call on inputs of its own, made before the round
    and not timed: the minimum over ``rounds`` rounds of about ``round_s`` each (at most ``most``
    calls a round, since every call needs its inputs)."""
    inputs = make_inputs()
    start = time.perf_counter()
    fn(inputs)
    one = max(time.perf_counter() - start, 1e-7)
    number = max(1, min(most, int(round_s / one)))
    best = float("inf")
    for _ in range(rounds):
        pool = [make_inputs() for _ in range(number)]
        start = time.perf_counter()
        for inputs in pool:
            fn(inputs)
        best = min(best, time.perf_counter() - start)
    return best / number


def _snapshot(result: Any) -> Any:
    """A copy of a result, so the timed calls that follow (which may mutate a list passed in and
    returned) cannot change what is compared; the result itself if it cannot be copied. An
    iterator it holds (a zip or map handed back) is taken now, once: TakenIterator."""
    result = _take_iterators(result)
    try:
        return copy.deepcopy(result)
    except Exception:
        return result


@dataclasses.dataclass
class TakenIterator:
    """An iterator a call returned, compared as its type and the items it gave when taken."""

    kind: type
    items: list


def _take_iterators(value: Any) -> Any:
    if isinstance(value, Iterator) and not isinstance(value, torch.Tensor):
        return TakenIterator(type(value), [_take_iterators(item) for item in value])
    if type(value) in (tuple, list):
        return type(value)(_take_iterators(item) for item in value)
    if type(value) is dict:
        return {key: _take_iterators(item) for key, item in value.items()}
    return value


def run_case(case: Case, engine: str, *, timing: bool = True,
             backend: str | Callable[..., Any] | None = None) -> RunRecord:
    """Run ``case`` under ``engine`` from cold caches: a first call, then cache-hit calls.

    Raises whatever the engine raises. With ``timing=False`` only two calls are made (fast: tests).
    ``backend`` (default: run graphs as they are) is what compiles the graphs, behind the counting one.
    """
    reason = engine_unavailable_reason(engine)
    if reason is not None:
        raise RuntimeError(f"engine {engine!r} unavailable: {reason}")
    _warm_up(engine)
    reset_engines()
    counting = CountingBackend(resolve_backend(backend))
    compiled = optimize_with(engine, case.make_fn(), counting)
    no_grad, seeded = "no_grad" in case.tags, "rng" in case.tags
    try:
        # A case tagged "rng" draws random numbers (dropout, drop-path in training): each measured
        # call starts from the case's seed, so every engine draws the same ones; the caller's RNG
        # state is left as it was.
        with torch.random.fork_rng(devices=[], enabled=seeded):
            first_inputs, hit_inputs = case.make_inputs(), case.make_inputs()
            if seeded:
                torch.manual_seed(case.seed)
            start = time.perf_counter()
            result = _snapshot(_call(compiled, first_inputs, no_grad))
            first_call_s = time.perf_counter() - start
            graphs_after_first = len(counting.graphs)
            if seeded:
                torch.manual_seed(case.seed)
            cached_result = _snapshot(_call(compiled, hit_inputs, no_grad))
            # Fresh inputs for every timed call: a case may change what it is given (pop from a
            # dict, bump a counter in a closure), and a call on what the last one left would fail,
            # or recompile on every call and time the compiler.
            call_s = time_per_call_fresh(lambda inputs: _call(compiled, inputs, no_grad),
                                         case.make_inputs) if timing else None
        graphs = list(counting.graphs)
        breaks = count_breaks(engine)
        fallbacks = fallbacks_of(engine)
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
        breaks=breaks,
        fallbacks=fallbacks,
    )


def compare_case(case: Case, engines: Iterable[str] = ENGINES, *, timing: bool = True,
                 backend: str | Callable[..., Any] | None = None) -> CaseComparison:
    """Run ``case`` under each engine; an engine that raises or is unavailable is recorded in ``errors``."""
    records: dict[str, RunRecord] = {}
    errors: dict[str, str] = {}
    for engine in engines:
        reason = engine_unavailable_reason(engine)
        if reason is not None:
            errors[engine] = f"n/a: {reason}"
            continue
        try:
            records[engine] = run_case(case, engine, timing=timing, backend=backend)
        except Exception as exc:
            errors[engine] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return CaseComparison(case, records, errors)


# --------------------------------------------------------------------------------------------------
# Checks


def assert_same_result(actual: Any, expected: Any, path: str = "result") -> None:
    """Assert two results are equal: tensors and numbers with ``torch.testing.assert_close``,
    containers (tuple, list, dict and its views, named tuples, torch.Size, dataclasses) and iterators
    (taking them: run_case's results hold TakenIterator records instead) item by item with the same type
    (an instance of a dict subclass: its attributes too), instances of user classes without an
    ``__eq__`` attribute by attribute, anything else (dtypes, strings, None) with ``==``. ``path`` names the item in the failure message."""
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor):
            raise AssertionError(f"{path}: expected a tensor, got {type(actual).__name__}")
        torch.testing.assert_close(actual, expected, msg=lambda m: f"{path}: {m}")
        return
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(expected, (numpy.ndarray, numpy.generic)):
        # a NumPy array or scalar: of the same type (an array is no scalar), dtype and shape, close
        if type(actual) is not type(expected) or actual.dtype != expected.dtype or actual.shape != expected.shape:
            raise AssertionError(f"{path}: {type(actual).__name__} {getattr(actual, 'dtype', '')} "
                                 f"{getattr(actual, 'shape', '')} != expected {type(expected).__name__} "
                                 f"{expected.dtype} {expected.shape}")
        numpy.testing.assert_allclose(actual, expected, rtol=1.3e-6, atol=1e-5, err_msg=path)
        return
    if type(actual) is not type(expected):
        raise AssertionError(
            f"{path}: type {type(actual).__name__} != expected {type(expected).__name__}"
        )
    if isinstance(expected, Mapping):
        actual_keys, expected_keys = list(actual.keys()), list(expected.keys())
        if len(actual_keys) != len(expected_keys) or not all(map(_same_key, actual_keys, expected_keys)):
            raise AssertionError(f"{path}: keys {_keys_text(actual_keys)} != expected {_keys_text(expected_keys)}")
        for i, (a_key, e_key) in enumerate(zip(actual_keys, expected_keys)):
            label = repr(e_key) if not _hashes_by_identity(e_key) else f"<key {i}: {type(e_key).__name__}>"
            assert_same_result(actual[a_key], expected[e_key], f"{path}[{label}]")
        if isinstance(expected, dict) and hasattr(expected, "__dict__"):  # a dict subclass's attributes
            assert_same_result(vars(actual), vars(expected), f"{path}.__dict__")
    elif isinstance(expected, (tuple, list, MappingView)):  # dict views: item by item, in order
        actual, expected = (list(actual), list(expected)) if isinstance(expected, MappingView) else (actual, expected)
        if len(actual) != len(expected):
            raise AssertionError(f"{path}: length {len(actual)} != expected {len(expected)}")
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_same_result(a, e, f"{path}[{i}]")
    elif dataclasses.is_dataclass(expected):  # field by field (their __eq__ would compare tensors)
        for field in dataclasses.fields(expected):
            assert_same_result(getattr(actual, field.name), getattr(expected, field.name), f"{path}.{field.name}")
    elif isinstance(expected, (bool, int, float, complex)):
        torch.testing.assert_close(actual, expected, msg=lambda m: f"{path}: {m}")
    elif isinstance(expected, Iterator):  # (a zip or map handed back: its items, taken here)
        assert_same_result(list(actual), list(expected), f"list({path})")
    elif _is_plain_object(expected):  # (a library's state object: a kv-cache) attribute by attribute
        assert_same_result(vars(actual), vars(expected), f"{path}.__dict__")
    elif actual != expected:
        raise AssertionError(f"{path}: {actual!r} != expected {expected!r}")


def _is_plain_object(value: Any) -> bool:
    """An instance of a user class that keeps object's __eq__ (== would only compare identity),
    with attributes to compare."""
    return type(value).__eq__ is object.__eq__ and type(value).__module__ != "builtins" \
        and isinstance(getattr(value, "__dict__", None), dict) and not isinstance(value, (type, torch.nn.Module))


def _hashes_by_identity(key: Any) -> bool:
    """A key a dict compares by identity: a tensor (its == is elementwise), or an object whose type
    keeps object's __eq__ (a module, a function, a class, a plain instance)."""
    return isinstance(key, torch.Tensor) or type(key).__eq__ is object.__eq__


def _same_key(actual: Any, expected: Any) -> bool:
    """Whether two keys in the same place of two results are the same key: the same object, or,
    for keys compared by identity (the results may be copies, so the objects differ), keys of the
    same type (tensors: with equal values); constants by type and ==, as a dict tells 1 from True
    when it is iterated."""
    if actual is expected:
        return True
    if type(actual) is not type(expected):
        return False
    if isinstance(expected, torch.Tensor):
        try:
            assert_same_result(actual, expected)
        except AssertionError:
            return False
        return True
    if _hashes_by_identity(expected):
        return True
    return bool(actual == expected)


def _keys_text(keys: list[Any]) -> str:
    return "[" + ", ".join(f"{type(k).__name__}(size={list(k.shape)})" if isinstance(k, torch.Tensor) else repr(k)
                           for k in keys) + "]"


def code_mismatch(subject: RunRecord, reference: RunRecord) -> str | None:
    """None if ``subject`` compiled every frame it met (no fallback to plain Python, no internal
    error) and made the same graphs as ``reference``, compared as their code (``gm.code``:
    placeholders with their names, order and annotations, then every node); else how they differ."""
    if subject.fallbacks:
        return f"{subject.engine} ran frames as plain Python: " + "; ".join(subject.fallbacks)
    if subject.graph_count != reference.graph_count:
        return graphs_mismatch(subject, reference)
    for i, (mine, theirs) in enumerate(zip(subject.graphs, reference.graphs)):
        if mine.code != theirs.code:
            return f"graph {i} code differs: {_first_difference(mine.code, theirs.code, subject.engine, reference.engine)}"
    return None


def _first_difference(mine: str, theirs: str, engine: str, reference: str) -> str:
    """The first line where two graphs' code differ, as `engine: ... | reference: ...`."""
    a, b = mine.splitlines(), theirs.splitlines()
    for i in range(max(len(a), len(b))):
        left = a[i].strip() if i < len(a) else "<end>"
        right = b[i].strip() if i < len(b) else "<end>"
        if left != right:
            return f"line {i + 1}: {engine} `{left}` vs {reference} `{right}`"
    return "(whitespace)"


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
# Running many cases, with a progress bar


class Progress:
    """A one-line progress bar on a terminal (``[#####.....] 12/80 topic.name``), redrawn in place;
    nothing when ``stream`` is not a terminal (a log file would fill with redraws)."""

    def __init__(self, total: int, stream: Any = None, width: int = 30) -> None:
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.done = 0
        self.active = bool(getattr(self.stream, "isatty", lambda: False)())
        self._last = 0

    def step(self, label: str) -> None:
        """Called before each case: shows how many are done and which one runs now."""
        if not self.active:
            return
        filled = self.width * self.done // max(self.total, 1)
        line = f"[{'#' * filled}{'.' * (self.width - filled)}] {self.done}/{self.total} {label}"
        self.stream.write("\r" + line.ljust(self._last))
        self.stream.flush()
        self._last = len(line)
        self.done += 1

    def close(self) -> None:
        if self.active:
            self.stream.write("\r" + " " * self._last + "\r")
            self.stream.flush()


def compare_cases(cases: Sequence[Case], engines: Iterable[str] = ENGINES, *, timing: bool = True,
                  backend: str | Callable[..., Any] | None = None,
                  progress: Progress | None = None, quiet: bool = True) -> list[CaseComparison]:
    """``compare_case`` over ``cases``, in order, advancing ``progress``; with ``quiet`` what the
    programs print is dropped."""
    out = []
    engines = list(engines)
    for case in cases:
        if progress is not None:
            progress.step(case.qualname)
        # What the programs print (graph-break cases call print() on every timed call) is not the report.
        with contextlib.redirect_stdout(io.StringIO()) if quiet else contextlib.nullcontext():
            out.append(compare_case(case, engines, timing=timing, backend=backend))
    if progress is not None:
        progress.close()
    return out



"""`python -m pyframe demo`: the seed examples under pyframe, and every way of seeing inside.

1. The custom-backend documentation's programs (``fn`` with cos/sin/add, ``MockModule`` with ReLU of
   cos, ``toy_example`` with its data-dependent branch) and the talk's ``DynamicModule``, through
   ``pyframe.optimize`` with a backend that prints every graph it receives; each result is checked
   against plain eager execution. toy_example on both branches gives its three graphs.
2. ``pyframe.explain(toy_example)``: graphs, the break and its source line, guards.
3. A guard failure: ``fn`` called with a new shape recompiles; ``pyframe.debug.cache_entries`` says
   which guard failed.
4. ``pyframe.debug.show(toy_example)``: original and transformed bytecode side by side, the resume
   functions, the graphs' code (and the transformed code as Python when depyf is installed).
5. The seed programs as cases (pyframe/seeds.py) side by side with torch._dynamo (``python -m pyframe
   compare`` in small): the same table from any directory, the package holds every program it runs.

``--engine dynamo`` runs part 1 under torch._dynamo instead, to see its graphs side by side.

Where it sits: on top of the public API, like a user's script; it never imports the translator.
"""

from __future__ import annotations

import time
import traceback
from typing import Any, Callable, Sequence

import torch

import pyframe
from pyframe.debug.cases import Case, load_cases
from pyframe.debug.compare import (
    assert_same_result,
    code_mismatch,
    compare_cases,
    engine_unavailable_reason,
    optimize_with,
)
from pyframe.debug.compare_report import (
    TABLE_HEADERS,
    format_table,
    ratios_text,
    table_rows,
    totals,
    totals_row,
)
from pyframe.seeds import SEED_CASES, DynamicModule, MockModule, fn, toy_example


def print_graph(gm: torch.fx.GraphModule) -> None:
    """``gm.graph.print_tabular()`` as in the seed docs, or the graph's text if tabulate is missing."""
    try:
        import tabulate  # noqa: F401  (print_tabular needs it)
    except ImportError:
        print(gm.graph)
        return
    gm.graph.print_tabular()


def my_compiler(gm: torch.fx.GraphModule, example_inputs: Sequence[torch.Tensor]) -> Callable[..., Any]:
    """The seed's debugging backend: print the graph, run it as it is."""
    print("my_compiler() called with FX graph:")
    print_graph(gm)
    return gm.forward


# The seed programs (fn, MockModule, toy_example, DynamicModule) live in pyframe/seeds.py, with
# their cases: the package holds everything the demo runs.


def _show(title: str, engine: str, target: Callable[..., Any], calls: list[tuple]) -> int:
    """Run ``target`` under ``engine`` on each call's args; returns how many graphs were compiled."""
    print(f"\n=== {title} ===")
    graphs = []

    def backend(gm: torch.fx.GraphModule, example_inputs: Sequence[torch.Tensor]) -> Callable[..., Any]:
        graphs.append(gm)
        return my_compiler(gm, example_inputs)

    compiled = optimize_with(engine, target, backend)
    for args in calls:
        assert_same_result(compiled(*args), target(*args))
    print(f"{len(graphs)} graph(s); result matches eager on {len(calls)} call(s)")
    return len(graphs)


def _heading(title: str) -> None:
    print(f"\n{'=' * 100}\n{title}\n{'=' * 100}")


def _dynamic_module(engine: str) -> None:
    """The talk's example: the graphs as Python code (`graph.python_code`), as the talk prints them."""
    print("\n=== DynamicModule: branch on `x.sum() > 0`, called with x and -x ===")
    graphs: list[torch.fx.Graph] = []

    def collect_graphs(gm: torch.fx.GraphModule, samples: Sequence[torch.Tensor]) -> Callable[..., Any]:
        graphs.append(gm.graph)
        return gm.forward

    module = DynamicModule()
    model = optimize_with(engine, module, collect_graphs)
    x = torch.randn(10)
    for arg in (x, -x):
        assert_same_result(model(arg), module(arg))
    for graph in graphs:
        print(graph.python_code("self").src.strip())
        print("==" * 10)


def _explain() -> None:
    _heading("pyframe.explain(toy_example)(a, b): what one call compiled, and why it broke")
    print(pyframe.explain(toy_example)(torch.randn(10), torch.randn(10)))


def _recompile() -> None:
    _heading("A guard failure: fn compiled for shape [10], then called with shape [4, 4]")
    compiled = pyframe.optimize("eager")(fn)
    compiled(torch.randn(10), torch.randn(10))
    compiled(torch.randn(10), torch.randn(10))  # a cache hit
    compiled(torch.randn(4, 4), torch.randn(4, 4))  # size guard fails: a recompile
    print("pyframe.debug.cache_entries(fn), most recently used first:\n")
    for entry in pyframe.debug.cache_entries(fn):
        print(entry)
        print()
    newest = pyframe.debug.cache_entries(fn)[0]
    print(f"why the newest entry exists: {newest.reason}")


def _show_code() -> None:
    _heading("pyframe.debug.show(toy_example): the cache entries' code, after both branches ran")
    compiled = pyframe.optimize("eager")(toy_example)
    b = torch.randn(10)
    compiled(torch.randn(10), b.abs())
    compiled(torch.randn(10), -b.abs())
    pyframe.debug.show(toy_example)


def _seed_cases() -> list[Case]:
    """The seed programs as cases (pyframe/seeds.py): built and drawn under each case's seed, so
    every engine gets the same weights and inputs, wherever the demo runs."""
    return load_cases([SEED_CASES])


def _compare() -> None:
    _heading("The same cases under eager, pyframe and torch._dynamo (python -m pyframe compare, in small)")
    comparisons = compare_cases(_seed_cases(), ["eager", "pyframe", "dynamo"])
    t = totals(comparisons)
    print(format_table(TABLE_HEADERS, [*table_rows(comparisons), totals_row(t)]))
    print(ratios_text(t))
    print("(ops match: the graphs' op sequences; code match: their code, gm.code, placeholders included; "
          "compile ms: the first call, traced, compiled and run; call us: a cached call; "
          "overhead: time over eager's, pyframe's as a fraction of torch._dynamo's)")
    for cmp in comparisons:  # where the graphs differ, the first difference
        if cmp.graphs_match() is False:
            print(f"{cmp.case.qualname}: {code_mismatch(cmp.records['pyframe'], cmp.records['dynamo'])}")


def run_demo(engine: str = "pyframe", compare: bool = True) -> int:
    """Print the seed examples' graphs under ``engine`` and, under pyframe, the debug views;
    returns a process exit code."""
    reason = engine_unavailable_reason(engine)
    if reason is not None:
        print(f"{engine} cannot run here yet: {reason}")
        return 1
    start = time.perf_counter()
    optimize = "pyframe.optimize" if engine == "pyframe" else "torch.compile"
    _heading(f"Seed examples under {optimize}(my_compiler): every graph the backend receives is printed")
    torch.manual_seed(0)
    _show("fn(x, y): cos, sin, add", engine, fn, [(torch.randn(10), torch.randn(10))])
    _show("MockModule: relu(cos(x))", engine, MockModule(), [(torch.randn(10),)])
    b = torch.randn(10)
    try:
        # Both branches: the graph before the break, then one resume function per branch taken.
        count = _show("toy_example: graph break on `if b.sum() < 0`, both branches", engine, toy_example,
                      [(torch.randn(10), b.abs()), (torch.randn(10), -b.abs())])
    except Exception:
        print("toy_example needs graph breaks, which this build does not support yet:")
        print(traceback.format_exc(limit=-3).rstrip())
        return 1
    if count != 3:
        print(f"note: torch._dynamo compiles 3 graphs here (the graph before the break and one "
              f"resume per branch); {engine} compiled {count}.")
    _dynamic_module(engine)
    if engine == "pyframe":
        pyframe.reset()
        _explain()
        _recompile()
        _show_code()
    if compare:
        _compare()
    print(f"\ndemo finished in {time.perf_counter() - start:.1f} s")
    return 0

"""`python -m pyframe demo`: the seed examples under a printing backend.

Runs the custom-backend documentation's three programs (``fn`` with cos/sin/add, ``MockModule`` with
ReLU of cos, and ``toy_example`` with its data-dependent branch) through ``pyframe.optimize`` with a
backend that prints every graph it receives, and checks each result against plain eager execution.
``--engine dynamo`` runs the same programs under torch._dynamo, to see its graphs side by side.

Where it sits: on top of the public API, like a user's script; it never imports the translator.
"""

from __future__ import annotations

import traceback
from typing import Any, Callable, Sequence

import torch

from pyframe.debug.compare import assert_same_result, engine_unavailable_reason, optimize_with


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


# The seed programs, verbatim.


def fn(x, y):
    a = torch.cos(x)
    b = torch.sin(y)
    return a + b


class MockModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.relu = torch.nn.ReLU()

    def forward(self, x):
        return self.relu(torch.cos(x))


def toy_example(a, b):
    x = a / (torch.abs(a) + 1)
    if b.sum() < 0:
        b = b * -1
    return x * b


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


def run_demo(engine: str = "pyframe") -> int:
    """Print the seed examples' graphs under ``engine``; returns a process exit code."""
    reason = engine_unavailable_reason(engine)
    if reason is not None:
        print(f"{engine} cannot run here yet: {reason}")
        return 1
    optimize = "pyframe.optimize" if engine == "pyframe" else "torch.compile"
    print(f"Seed examples under {optimize}(my_compiler): every graph the backend receives is printed.")
    torch.manual_seed(0)
    _show("fn(x, y): cos, sin, add", engine, fn, [(torch.randn(10), torch.randn(10))])
    _show("MockModule: relu(cos(x))", engine, MockModule(), [(torch.randn(10),)])
    b = torch.randn(10)
    try:
        # Both branches: the graph before the break, then one resume function per branch taken.
        count = _show("toy_example: graph break on `if b.sum() < 0`", engine, toy_example,
                      [(torch.randn(10), b.abs()), (torch.randn(10), -b.abs())])
    except Exception:
        print("toy_example needs graph breaks, which this build does not support yet:")
        print(traceback.format_exc(limit=-3).rstrip())
    else:
        if count != 3:
            print(f"note: torch._dynamo compiles 3 graphs here (the graph before the break and one "
                  f"resume per branch); {engine} compiled {count}: graph breaks are not complete yet.")
    return 0

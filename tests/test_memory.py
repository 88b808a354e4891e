"""What compiling keeps alive, and what dropping a function and `pyframe.reset()` give back."""
from __future__ import annotations

import gc
import weakref

import torch

import pyframe
from pyframe import resume


def _compile_a_new_function_with_a_break(i: int) -> "weakref.ref":
    namespace = {"torch": torch}
    source = f"def f(x):\n    y = x + {i}\n    torch._dynamo.graph_break()\n    return y * 2\n"
    exec(compile(source, f"dropped_{i}.py", "exec"), namespace)
    f = namespace.pop("f")
    torch.testing.assert_close(pyframe.optimize("eager")(f)(torch.ones(2)), (torch.ones(2) + i) * 2)
    return weakref.ref(f.__code__)


def test_code_with_a_graph_break_dies_with_its_function():
    """resume.py remembered each resume code under its original (weak key) and each original in the
    resume code's info (weak key, strong value): the two kept each other alive for good."""
    pyframe.reset()
    before = len(resume.origins)
    codes = [_compile_a_new_function_with_a_break(i) for i in range(10)]
    pyframe.reset()
    gc.collect()
    assert [c for c in codes if c() is not None] == []
    assert len(resume.origins) == before


def _compile_and_drop(i: int, source: str) -> "weakref.ref":
    namespace = {"torch": torch}
    exec(compile(source, f"dropped_plain_{i}.py", "exec"), namespace)
    f = namespace.pop("f")
    pyframe.optimize("eager")(f)(torch.ones(2))
    pyframe.optimize("eager")(f)(torch.ones(2))  # a cache hit too
    return weakref.ref(f.__code__)


def test_a_dropped_compiled_function_dies_without_reset():
    """Nothing the transformed code holds refers back to the code it was made for: the code's cache
    entry lives in its co_extra slot, which the garbage collector cannot see through, so such a
    reference (the handler that reruns a frame whose graph raised, rerun.Rerun) keeps the function's
    code, its entries and graphs alive for good."""
    sources = ["def f(x):\n    return x.sin() + 1\n",
               "def f(x):\n    return x.cos().index_select(0, torch.tensor([0]))\n",
               "def f(x):\n    x.add_(1)\n    return x * 2\n"]  # (no rerun handler: mutates its input)
    codes = [_compile_and_drop(i, source) for i, source in enumerate(sources)]
    gc.collect()
    gc.collect()
    assert [c for c in codes if c() is not None] == []


def test_graph_modules_of_dropped_functions_go_with_one_gc_after_reset():
    """An Unsupported kept in a record (the graph break's reason, a frame's reason to run as Python)
    held its traceback, whose frames held the trace (OutputGraph, FakeTensors, the graph and its
    GraphModule) in a cycle with the exception: after reset() they took a second gc.collect() to go.
    reset() itself does not collect (0.17 s a call)."""
    graphs: list[weakref.ref] = []

    def backend(gm, example_inputs):
        graphs.append(weakref.ref(gm))
        return gm.forward

    sources = [
        "def f(x):\n    y = x.sin() + 1\n    torch._dynamo.graph_break()\n    return y * 2\n",
        "def f(x):\n    y = x.cos()\n    if y.sum() > 0:\n        return y + 1\n    return y - 1\n",
        "def f(x):\n    return x.tanh() * 3\n",
    ]
    for i, source in enumerate(sources * 2):
        namespace = {"torch": torch}
        exec(compile(source, f"one_gc_{i}.py", "exec"), namespace)
        f = namespace.pop("f")
        pyframe.optimize(backend)(f)(torch.ones(2))
        del f, namespace
    assert len(graphs) >= 8
    pyframe.reset()
    gc.collect()
    assert [g for g in graphs if g() is not None] == []

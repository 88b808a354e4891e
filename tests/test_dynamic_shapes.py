"""Dynamic shapes, side by side with torch._dynamo 2.13 (fake/shapes.py).

Each case is called with several sizes under eager, pyframe and torch._dynamo, both engines with
the same `dynamic` setting and a recording backend: the results equal eager's, and the graphs the
backend is handed are the ones Dynamo hands it, in number (one per compile: the recompiles) and
in code (`gm.code` verbatim, the `s77: torch.SymInt` placeholders included). The guard tests count
cache entries and hits: a size outside what the dynamic entry's guards allow (0, 1, a broken
equality between two inputs) compiles again; a size within them hits.
"""
from __future__ import annotations

from typing import Any, Callable

import pytest
import torch
import torch._dynamo
import torch.nn.functional as F

import pyframe
from pyframe import _C
from pyframe.debug.compare import optimize_with


class Recorder:
    def __init__(self) -> None:
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable:
        self.graphs.append(gm)
        return gm.forward


def run(engine: str, make: Callable[[], Callable], calls: list[tuple], dynamic: bool | None) -> tuple[list, list[str]]:
    pyframe.reset()
    torch._dynamo.reset()
    recorder = Recorder()
    fn = optimize_with(engine, make(), recorder, dynamic)
    with torch.no_grad():
        outputs = [fn(*args) for args in calls]
    return outputs, [gm.code for gm in recorder.graphs]


def check_as_dynamo(make: Callable[[], Callable], calls: list[tuple], dynamic: bool | None = None) -> list[str]:
    eager = make()
    with torch.no_grad():
        expected = [eager(*args) for args in calls]
    ours, our_graphs = run("pyframe", make, calls, dynamic)
    _, their_graphs = run("dynamo", make, calls, dynamic)
    for got, want in zip(ours, expected):
        torch.testing.assert_close(got, want)
    assert len(our_graphs) == len(their_graphs), (our_graphs, their_graphs)
    for mine, theirs in zip(our_graphs, their_graphs):
        assert mine == theirs
    return our_graphs


def sizes(*shapes: tuple[int, ...], count: int = 1, seed: int = 0) -> list[tuple]:
    torch.manual_seed(seed)
    return [tuple(torch.randn(*shape) for _ in range(count)) for shape in shapes]


# -- the cases --------------------------------------------------------------------------------

def elementwise():
    def fn(x, y):
        return torch.sin(x) * 2 + y.cos()
    return fn


def reductions():
    def fn(x):
        return x.sum(0) + x.mean(-1).sum() - x.amax(dim=1, keepdim=True).squeeze(1).sum()
    return fn


def views_and_reshapes():
    def fn(x):
        b, n = x.shape
        y = x.view(b, n // 2, 2).transpose(1, 2).reshape(b * 2, -1)
        return y.flatten() * x.size(0), y.unsqueeze(0).expand(3, -1, -1).sum(0)
    return fn


def matmul():
    def fn(a, b):
        return (a @ b.t()).softmax(-1), torch.mm(a.t(), b)
    return fn


def indexing_with_sizes():
    def fn(x):
        n = x.shape[0]
        half = x[: n // 2]
        return half * n, x[n - 1], torch.arange(n, dtype=x.dtype) + x.new_zeros(n)
    return fn


def branch_on_a_size():
    def fn(x):
        if x.shape[0] > 16:
            return x * 2
        return x - 1
    return fn


def size_arithmetic_returned():
    def fn(x):
        return x.relu(), x.shape[0] * 3 + 1, x.numel()
    return fn


class Stack(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.layers = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 8),
                                          torch.nn.LayerNorm(8))

    def forward(self, x):
        return self.layers(x) + x


def module_stack():
    return Stack().eval()


def toy_example():
    def fn(a, b):
        x = a / (torch.abs(a) + 1)
        if b.sum() < 0:
            b = b * -1
        return x * b
    return fn


def int_argument():
    def fn(x, n):
        return x * n + n, x[:n]
    return fn


def composite_kernels():
    # baddbmm's C++ composite kernel takes concrete sizes only: over SymInts it must be dispatched
    # to its decomposition by the Python dispatcher (BLOOM's attention scores).
    def fn(x):
        bias = x.new_ones(x.shape[0], 1, x.shape[1])  # broadcast over the rows
        scores = bias.baddbmm(x, x.transpose(1, 2), beta=1.0, alpha=0.5)
        return scores.softmax(-1) @ x
    return fn


def _with_ints(*ns: int) -> list[tuple]:
    torch.manual_seed(0)
    return [(torch.randn(8), n) for n in ns]


CASES = {
    "elementwise": (elementwise, sizes((3, 4), (5, 4), (7, 4), (9, 4), count=2)),
    "reductions": (reductions, sizes((3, 4), (6, 4), (8, 5), (11, 7))),
    "views_and_reshapes": (views_and_reshapes, sizes((3, 4), (5, 4), (6, 8), (9, 6))),
    "matmul": (matmul, sizes((4, 8), (6, 8), (10, 8), count=2)),
    "indexing_with_sizes": (indexing_with_sizes, sizes((4,), (6,), (9,), (12,))),
    "branch_on_a_size": (branch_on_a_size, sizes((4,), (6,), (9,), (20,), (30,))),
    "size_arithmetic_returned": (size_arithmetic_returned, sizes((4, 3), (6, 3), (9, 3))),
    "module_stack": (module_stack, sizes((2, 8), (3, 8), (5, 8), (2, 4, 8), (2, 7, 8))),
    "toy_example": (toy_example, sizes((10,), (12,), (14,), (16,), count=2)),
    "int_argument": (int_argument, _with_ints(2, 3, 5, 6)),
    "composite_kernels": (composite_kernels, sizes((2, 4, 8), (2, 6, 8), (2, 9, 8))),
}


@pytest.mark.parametrize("name", list(CASES))
def test_automatic_dynamic_gives_dynamos_graphs(name: str) -> None:
    make, calls = CASES[name]
    graphs = check_as_dynamo(make, calls, dynamic=None)
    assert any("torch.SymInt" in code for code in graphs), "a size that changed became symbolic"


# Not module_stack: with dynamic=True torch._dynamo also makes float attributes of modules graph
# inputs (LayerNorm's eps, read with `.item()`); pyframe keeps floats constant, as with dynamic=None.
# Not matmul: with dynamic=True equal sizes share a symbol (duck shaping), named after the tensor
# read first: Dynamo reads `b` first (`a @ b.t()` realizes b before a), pyframe reads `a` first.
@pytest.mark.parametrize("name", ["elementwise", "views_and_reshapes", "indexing_with_sizes", "toy_example"])
def test_dynamic_true_gives_dynamos_graphs(name: str) -> None:
    make, calls = CASES[name]
    graphs = check_as_dynamo(make, calls, dynamic=True)
    assert "torch.SymInt" in graphs[0]


def test_dynamic_false_compiles_every_size() -> None:
    make, calls = CASES["elementwise"]
    graphs = check_as_dynamo(make, calls, dynamic=False)
    assert len(graphs) == len(calls) and not any("SymInt" in code for code in graphs)


# -- guards -----------------------------------------------------------------------------------

def _entries(fn: Callable) -> list:
    return _C.get_cache_entries(fn.__code__)


def _compiled(fn: Callable) -> tuple[Callable, Recorder]:
    pyframe.reset()
    recorder = Recorder()
    return pyframe.optimize(recorder)(fn), recorder


def add(x, y):
    return x + y


def test_sizes_within_the_guards_hit_the_dynamic_entry() -> None:
    opt, recorder = _compiled(add)
    opt(torch.randn(3, 4), torch.randn(3, 4))
    opt(torch.randn(5, 4), torch.randn(5, 4))  # the recompile: dimension 0 dynamic
    assert len(recorder.graphs) == 2
    for n in (6, 7, 50, 2):
        x, y = torch.randn(n, 4), torch.randn(n, 4)
        torch.testing.assert_close(opt(x, y), x + y)
    assert len(recorder.graphs) == 2
    dynamic_entry = _entries(add)[0]
    assert dynamic_entry.hits == 4


def test_size_zero_or_one_and_a_broken_equality_compile_again() -> None:
    opt, recorder = _compiled(add)
    opt(torch.randn(3, 4), torch.randn(3, 4))
    opt(torch.randn(5, 4), torch.randn(5, 4))
    assert len(recorder.graphs) == 2
    texts = _entries(add)[0].guards.texts()
    assert "2 <= L['x'].size()[0]" in texts and "L['y'].size()[0] == L['x'].size()[0]" in texts
    for x, y in [(torch.randn(1, 4), torch.randn(1, 4)), (torch.randn(0, 4), torch.randn(0, 4))]:
        torch.testing.assert_close(opt(x, y), x + y)
    assert len(recorder.graphs) == 4  # sizes 1 and 0 are specialized, as Dynamo specializes them
    x, y = torch.randn(6, 4), torch.randn(6, 1)  # broadcasting: the equality no longer holds
    torch.testing.assert_close(opt(x, y), x + y)
    assert len(recorder.graphs) == 5


def test_a_branch_on_a_size_is_guarded_not_broken() -> None:
    def fn(x):
        if x.shape[0] > 16:
            return x * 2
        return x - 1

    opt, recorder = _compiled(fn)
    for n in (4, 6, 9):
        x = torch.randn(n)
        torch.testing.assert_close(opt(x), fn(x))
    assert len(recorder.graphs) == 2
    assert any("L['x'].size()[0] <= 16" in t for t in _entries(fn)[0].guards.texts())
    x = torch.randn(20)  # the other branch: the guard fails, a new entry
    torch.testing.assert_close(opt(x), fn(x))
    assert len(recorder.graphs) == 3


def test_mark_dynamic_makes_the_first_compile_symbolic() -> None:
    opt, recorder = _compiled(add)
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    pyframe.mark_dynamic(x, 0)
    torch._dynamo.mark_dynamic(y, 0)
    torch.testing.assert_close(opt(x, y), x + y)
    assert "torch.SymInt" in recorder.graphs[0].code
    opt(torch.randn(8, 4), torch.randn(8, 4))
    assert len(recorder.graphs) == 1


def sums(x, y):
    return x.sum() + y.sum()


def test_mark_static_keeps_a_dimension_static() -> None:
    opt, recorder = _compiled(sums)
    for n in (3, 5):
        x = torch.randn(n, 4)
        pyframe.mark_static(x, 0)
        opt(x, torch.randn(n, 4))
    assert [("SymInt" in gm.code) for gm in recorder.graphs] == [False, True]
    texts = _entries(sums)[0].guards.texts()
    assert any("check_tensor(L['x']" in t and "size=[5, 4]" in t for t in texts)
    assert any("check_tensor(L['y']" in t and "size=[None, 4]" in t for t in texts)


def test_shape_guards_read_as_text_in_cache_entries() -> None:
    def fn(x):
        return x.view(-1, 2) * 2

    opt, _ = _compiled(fn)
    opt(torch.randn(4))
    opt(torch.randn(6))
    texts = _entries(fn)[0].guards.texts()
    assert "(L['x'].size()[0] % 2) == 0" in texts
    assert any("size=[None]" in t for t in texts)
    with pytest.raises(TypeError, match="dynamic"):
        pyframe.optimize("eager", dynamic="yes")


def test_a_recompile_reason_names_the_size_that_changed() -> None:
    opt, _ = _compiled(add)
    opt(torch.randn(10, 4), torch.randn(10, 4))
    opt(torch.randn(6, 4), torch.randn(6, 4))
    newest = pyframe.debug.cache_entries(add)[0]
    assert newest.reason.endswith("(L['x'] size()[0]: 10 -> 6)")
    opt(torch.randn(6, 4, dtype=torch.float64), torch.randn(6, 4))
    assert "dtype: torch.float32 -> torch.float64" in pyframe.debug.cache_entries(add)[0].reason

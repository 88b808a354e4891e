"""Values read from tensors under torch._dynamo.config.capture_scalar_outputs: `Tensor.item()` in the
graph, its value an unbacked symbol of the trace's ShapeEnv (a static trace is traced again over
one), as torch._dynamo records it; a branch on it breaks the graph; off, `.item()` breaks as before."""
from __future__ import annotations

import pytest
import torch
import torch._dynamo

import pyframe
from pyframe.debug.compare import CountingBackend


@pytest.fixture
def capture_scalars():
    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        yield


def scale_by_sum(x):
    return x * x.sum().item()


def shift_by_max(x):
    s = x.max().item()
    return x + s * 2 + 1


def branch_on_sum(x):
    n = x.sum().item()
    if n > 0:
        return x + 1
    return x - 1


def first_element_times_ones(x):
    return torch.ones(3) * x[0].item() + x.shape[0]


def int_and_float_of_items(x):
    return x * int(x.sum().item()) + float(x.max().item())  # (torch.sym_int; float of a float: itself)


def _graphs(engine_compile, fn, inputs):
    backend = CountingBackend()
    compiled = engine_compile(fn, backend)
    outputs = [compiled(x) for x in inputs]
    return backend.graphs, outputs


@pytest.mark.parametrize("fn", [scale_by_sum, shift_by_max, branch_on_sum, first_element_times_ones,
                                int_and_float_of_items])
def test_captured_item_graphs_are_dynamos(capture_scalars, fn):
    inputs = [torch.randn(4), torch.randn(4) * 3 + 2, -torch.rand(4) - 1]  # (both branches taken)
    torch._dynamo.reset()
    theirs, _ = _graphs(lambda f, b: torch.compile(f, backend=b), fn, inputs)
    pyframe.reset()
    ours, outputs = _graphs(lambda f, b: pyframe.optimize(b)(f), fn, inputs)
    for x, out in zip(inputs, outputs):
        torch.testing.assert_close(out, fn(x))
    assert [g.code for g in ours] == [g.code for g in theirs]


def test_an_item_used_as_a_python_constant_breaks_the_graph(capture_scalars, caplog):
    def labelled(x):
        label = str(x.sum().item())
        return x * len(label)

    pyframe.reset()
    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(labelled)
    for x in (torch.ones(3), torch.full((3,), 2.5)):
        torch.testing.assert_close(compiled(x), labelled(x))
    assert backend.graphs[0].ops == ("sum", "item")  # read in the graph, then used by Python
    assert "internal error" not in caplog.text


def test_without_capture_item_breaks_the_graph():
    pyframe.reset()
    backend = CountingBackend()
    x = torch.randn(4)
    torch.testing.assert_close(pyframe.optimize(backend)(scale_by_sum)(x), scale_by_sum(x))
    assert [g.ops for g in backend.graphs] == [("sum",), ("mul",)]

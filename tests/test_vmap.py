"""torch.vmap traced (pyframe/translator/variables/functorch.py): functorch's stack is left as the
trace found it however the trace ends, a compiled graph never runs on a transform's wrapped tensors,
and a frame met inside a vmap run as Python still compiles when called on plain tensors."""
from __future__ import annotations

import torch

import pyframe
from pyframe.debug.compare import CountingBackend


def _transforms_active() -> bool:
    return torch._C._are_functorch_transforms_active()


def test_a_break_inside_the_vmapped_function_leaves_no_level_pushed():
    seen = []

    def row_fn(r):
        seen.append(_transforms_active())  # a Python side effect the trace cannot keep: a break
        print("row", end="")
        return r * 2

    def f(x):
        return torch.vmap(row_fn)(x) + 1

    x = torch.randn(3, 4)
    backend = CountingBackend()
    torch.testing.assert_close(pyframe.optimize(backend)(f)(x), f(x))
    assert not _transforms_active()
    assert seen and all(seen)  # the function ran under the real vmap, as Python


def test_a_failed_trace_inside_vmap_pops_its_levels():
    def bad(r):
        return r.nonexistent_method()

    def f(x):
        return torch.vmap(bad)(x)

    try:
        pyframe.optimize(CountingBackend())(f)(torch.randn(2, 3))
    except AttributeError:
        pass
    assert not _transforms_active()


def test_a_compiled_graph_is_not_run_on_batched_tensors():
    runs = []

    def backend(gm, example_inputs):
        def run(*args):
            runs.append(_transforms_active())
            return gm.forward(*args)
        return run

    @pyframe.optimize(backend)
    def f(x):
        return x * 2 + x.sum()

    f(torch.rand(4))
    batch = torch.rand(3, 4)
    torch.testing.assert_close(torch.vmap(f)(batch), batch * 2 + batch.sum(1, keepdim=True))
    assert runs == [False]  # inside vmap the frame ran as Python, not the graph made for plain tensors
    f(torch.rand(5))  # and the code is not marked: a new shape compiles
    assert runs == [False, False]


def test_vmap_graph_holds_the_levels_and_gives_eager_results():
    def f(x, w):
        return torch.vmap(lambda row, v: (row * v).sum(), in_dims=(0, None))(x, w)

    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(f)
    for _ in range(2):
        x, w = torch.randn(3, 4), torch.randn(4)
        torch.testing.assert_close(compiled(x, w), f(x, w))
    assert len(backend.graphs) == 1
    code = backend.graphs[0].code
    assert code.count("predispatch._vmap_increment_nesting(3, 'error')") == 1
    assert code.count("predispatch._vmap_decrement_nesting()") == 1
    assert code.count("predispatch._add_batch_dim(") == 1  # w is not batched

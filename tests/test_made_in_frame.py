"""Objects of torch made while tracing whose behaviour outlives the graph: a user nn.Module made in
the frame (variables/new_module.py) rebuilt where it escapes, a gradient hook registered by the
register_hook op on a tensor the graph made (variables/tensor_hooks.py) firing in backward as
eager's does, and a torch.Generator made by each call, never shared between calls."""
from __future__ import annotations

import torch

import pyframe
from pyframe.debug.compare import CountingBackend


class Block(torch.nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k = k
        self.register_buffer("offset", torch.ones(3))
        self.act = torch.nn.ReLU()

    def forward(self, t):
        return self.act(t) * self.k + self.offset


def _run(fn, *args):
    backend = CountingBackend()
    return pyframe.optimize(backend)(fn)(*args), backend.graphs


def test_module_made_in_the_frame_is_traced_into_one_graph():
    def fn(x):
        y = x.sin()
        return Block(2.0)(y)

    x = torch.randn(3)
    out, graphs = _run(fn, x)
    torch.testing.assert_close(out, fn(x))
    assert len(graphs) == 1
    assert "relu" in graphs[0].ops


def test_escaping_module_is_rebuilt_as_the_constructor_made_it():
    def fn(x):
        m = Block(3.0)
        m.eval()
        return m(x), m

    x = torch.randn(3)
    (out, m), graphs = _run(fn, x)
    expected, _ = fn(x)
    torch.testing.assert_close(out, expected)
    assert len(graphs) == 1
    assert type(m) is Block and m.k == 3.0 and not m.training and not m.act.training
    assert dict(m.named_buffers()).keys() == {"offset"} and "offset" in m.state_dict()
    assert dict(m.named_children()) == {"act": m.act} and type(m.act) is torch.nn.ReLU
    torch.testing.assert_close(m(x), expected)


def test_module_made_in_the_frame_holding_a_parameter_runs_as_python():
    class WithParam(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(3))

        def forward(self, t):
            return t * self.w

    def fn(x):
        m = WithParam()
        return m(x), len(list(m.parameters()))

    x = torch.randn(3)
    (out, n), _ = _run(fn, x)
    torch.testing.assert_close(out, x)
    assert n == 1


def test_hook_on_a_tensor_the_graph_made_fires_in_backward():
    def fn(x, w):
        y = x * 3
        k = w + 1
        y.register_hook(lambda grad: grad * k)
        return (y * y).sum()

    x, w = torch.randn(3, requires_grad=True), torch.randn(3)
    fn(x, w).backward()
    expected, x.grad = x.grad, None
    out, graphs = _run(fn, x, w)
    out.backward()
    torch.testing.assert_close(x.grad, expected)
    assert len(graphs) == 1 and "register_hook" in graphs[0].ops


def test_generator_made_in_the_frame_is_new_at_each_call():
    def fn(x):
        g = torch.Generator()  # unseeded: each new generator starts from the same default seed
        return x + torch.rand(3, generator=g)

    x = torch.zeros(3)
    opt = pyframe.optimize(CountingBackend())(fn)
    first, second = opt(x), opt(x)
    torch.testing.assert_close(first, fn(x))
    torch.testing.assert_close(second, fn(x))


def test_sequential_of_modules_made_in_the_frame_is_rebuilt_where_it_escapes():
    def fn(x):
        seq = torch.nn.Sequential(Block(2.0), torch.nn.Tanh())
        return seq(x), seq

    x = torch.randn(3)
    (out, seq), graphs = _run(fn, x)
    torch.testing.assert_close(out, fn(x)[0])
    assert len(graphs) == 1
    assert type(seq) is torch.nn.Sequential and [type(m) for m in seq] == [Block, torch.nn.Tanh]
    torch.testing.assert_close(seq(x), out)


def test_tree_of_a_module_made_in_the_frame():
    """children(), parameters() and buffers() (named too) of a module made in the frame, traced
    (torch._dynamo 2.13 breaks the graph there: two graphs where pyframe has one)."""
    def fn(x):
        m = Block(2.0)
        total = sum(b.sum() for b in m.buffers()) + len(list(m.parameters()))
        return (m(x) + total, [n for n, _ in m.named_buffers()], [n for n, _ in m.named_children()],
                [type(c) for c in m.children()])

    x = torch.randn(3)
    (out, buffers, children, kinds), graphs = _run(fn, x)
    expected = fn(x)
    torch.testing.assert_close(out, expected[0])
    assert (buffers, children, kinds) == expected[1:] == (["offset"], ["act"], [torch.nn.ReLU])
    assert len(graphs) == 1

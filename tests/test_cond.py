"""torch.cond as the `cond` higher-order op (pyframe/translator/variables/cond.py): the branch
subgraphs take the same inputs in torch._dynamo's order, gradients flow as in eager through the
backends that train, both branches are right at run time, and what the op cannot express is left to
eager torch.cond."""
from __future__ import annotations

import pytest
import torch
import torch._dynamo
import torch.nn as nn

import pyframe
from pyframe.debug.compare import CountingBackend, count_breaks


def _graphs(fn, *args):
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    pyframe.reset()
    out = pyframe.optimize(backend)(fn)(*args)
    return out, graphs


def _placeholders(gm: torch.fx.GraphModule) -> list[str]:
    return [n.name for n in gm.graph.nodes if n.op == "placeholder"]


def test_branches_take_the_shared_tensors_then_each_branch_own():
    def f(x):
        y, z = x + 1, x * 3
        return torch.cond(x.sum() < 0, lambda a: a * y + x, lambda a: a - z + x, (x,))

    x = torch.randn(4)
    out, (gm,) = _graphs(f, x)
    torch.testing.assert_close(out, f(x))
    (op,) = [n for n in gm.graph.nodes if n.target is torch.ops.higher_order.cond]
    assert [n.name for n in op.args[3]] == ["l_x_", "y", "z"]
    for branch in (gm.cond_true_0, gm.cond_false_0):
        assert _placeholders(branch) == ["l_x_", "y_true_branch", "z_false_branch"]


def test_both_branches_run_right_on_a_cache_hit():
    def f(x):
        return torch.cond(x.sum() > 0, lambda a: a.sin(), lambda a: a.cos(), (x,))

    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(f)
    for x in (torch.ones(3), -torch.ones(3), torch.full((3,), 2.0)):
        torch.testing.assert_close(compiled(x), f(x))
    assert len(backend.graphs) == 1


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_gradients_equal_eager(backend):
    lin = nn.Linear(3, 3)

    def f(x):
        return torch.cond(x.sum() > 0, lambda a: lin(a).tanh(), lambda a: a * 2, (x,)).sum()

    for sign in (1.0, -1.0):
        x = (torch.rand(3) + 0.5) * sign
        grads = []
        for fn in (f, pyframe.optimize(backend)(f)):
            x.grad, lin.weight.grad = None, None
            x.requires_grad_(True)
            fn(x).backward()
            grads.append((x.grad.clone(), None if lin.weight.grad is None else lin.weight.grad.clone()))
            x.requires_grad_(False)
        torch.testing.assert_close(grads[0], grads[1])


def test_a_branch_changing_a_tensor_in_place_is_left_to_eager():
    """pyframe does not tell an input's mutation (which the op cannot express) from a new
    tensor's: any in-place op in a branch breaks the graph, and eager torch.cond runs the call."""
    def f(x):
        def t(a):
            b = a * 1
            return b.add_(1)

        return torch.cond(x.sum() > 0, t, lambda a: a - 1, (x,))

    x = torch.ones(3)
    pyframe.reset()
    torch.testing.assert_close(pyframe.optimize(CountingBackend())(f)(x), f(x))
    assert count_breaks("pyframe") == 1

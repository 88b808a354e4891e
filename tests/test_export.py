"""pyframe.export against torch._dynamo.export (aten_graph=False): the same graph (ops compared by
name), a module callable as the function with its own arguments, the function's results on new
inputs, and the errors on what does not trace in one graph."""
from __future__ import annotations

import pytest
import torch
import torch._dynamo

import pyframe
from pyframe import convert_frame
from pyframe.debug.compare import normalize_ops


def _both(fn, *args, **kwargs):
    ours = pyframe.export(fn)(*args, **kwargs)
    torch._dynamo.reset()
    theirs = torch._dynamo.export(fn)(*args, **kwargs)
    return ours, theirs


def _nested(x, y):
    return {"a": torch.sin(x) + y, "b": [x.cos(), 3, "tag"], "none": None}


def test_a_function_with_nested_outputs_and_constants():
    x, y = torch.randn(3), torch.randn(3)
    ours, theirs = _both(_nested, x, y)
    assert normalize_ops(ours.graph_module) == normalize_ops(theirs.graph_module) == ("sin", "add", "cos")
    x2, y2 = torch.randn(3), torch.randn(3)
    out, expected, dynamo_out = ours.graph_module(x2, y2), _nested(x2, y2), theirs.graph_module(x=x2, y=y2)
    assert out["b"][1:] == expected["b"][1:] == dynamo_out["b"][1:] and out["none"] is None
    torch.testing.assert_close([out["a"], out["b"][0]], [expected["a"], expected["b"][0]])
    torch.testing.assert_close(ours.graph_module(x=x2, y=y2)["a"], dynamo_out["a"])


def test_keyword_arguments_and_nested_inputs():
    def fn(xs, table, *, scale):
        return xs[0] * scale + table["bias"], xs[1].relu()

    args = ([torch.randn(2, 3), torch.randn(2, 3)], {"bias": torch.randn(3)})
    ours, theirs = _both(fn, *args, scale=2.0)
    assert normalize_ops(ours.graph_module) == normalize_ops(theirs.graph_module)
    new = ([torch.randn(2, 3), torch.randn(2, 3)], {"bias": torch.randn(3)})
    torch.testing.assert_close(ours.graph_module(*new, scale=2.0), fn(*new, scale=2.0))


def test_an_argument_returned_as_it_is():
    def fn(x, y):
        return x, y.sin(), x

    x, y = torch.randn(4), torch.randn(4)
    ours, theirs = _both(fn, x, y)
    assert normalize_ops(ours.graph_module) == normalize_ops(theirs.graph_module)
    x2, y2 = torch.randn(4), torch.randn(4)
    out = ours.graph_module(x2, y2)
    assert out[0] is x2 and out[2] is x2
    torch.testing.assert_close(out[1], y2.sin())


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 2)
        self.register_buffer("shift", torch.ones(2))

    def forward(self, x):
        return torch.relu(self.lin(x)) + self.shift


def test_a_module_keeps_its_parameters_and_buffers():
    net = _Net()
    x = torch.randn(4, 3)
    ours, theirs = _both(net, x)
    assert normalize_ops(ours.graph_module) == normalize_ops(theirs.graph_module)
    gm = ours.graph_module
    assert {id(p) for p in gm.parameters()} == {id(net.lin.weight), id(net.lin.bias)}
    assert [b for b in gm.buffers()] == [net.shift]
    x2 = torch.randn(4, 3)
    torch.testing.assert_close(gm(x2), net(x2))
    with torch.no_grad():  # the exported module reads the module's own tensors
        net.lin.weight.add_(1.0)
    torch.testing.assert_close(gm(x2), net(x2))


def test_the_guards_are_the_frames():
    x = torch.randn(2, 5)
    result = pyframe.export(lambda t: t * 2)(x)
    assert all(isinstance(g, str) for g in result.guards)
    assert any("check_tensor(L['t']" in g and "size=[2, 5]" in g for g in result.guards)


def test_a_graph_break_raises_as_in_dynamo():
    def fn(x):
        print("side effect")
        return x + 1

    with pytest.raises(pyframe.Unsupported, match="print"):
        pyframe.export(fn)(torch.randn(2))
    with pytest.raises(torch._dynamo.exc.Unsupported):
        torch._dynamo.export(fn)(torch.randn(2))


def test_an_export_leaves_nothing_behind():
    def fn(x):
        return x.cos() + 1

    pyframe.export(fn)(torch.randn(3))
    assert fn.__code__ not in convert_frame.records
    counting = []
    compiled = pyframe.optimize(lambda gm, ex: counting.append(gm) or gm.forward)(fn)
    compiled(torch.randn(3))
    assert len(counting) == 1  # compiled for this backend: the export's entry is gone


def test_bad_input_gets_a_clear_error():
    with pytest.raises(TypeError, match="function or an nn.Module"):
        pyframe.export(3)
    with pytest.raises(NotImplementedError, match="aten_graph"):
        pyframe.export(lambda x: x, aten_graph=True)

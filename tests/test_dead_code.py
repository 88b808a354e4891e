"""What a graph keeps that nothing reads: every traced call, as torch._dynamo 2.13 keeps them (it
leaves dead code to the backend), but not the `getitem` projections and non-tensor helper calls it
never records. Each function's graphs are compared with torch._dynamo's under the same backend.
"""
from __future__ import annotations

import pytest
import torch
import torch._dynamo

import pyframe
from pyframe.debug.compare import CountingBackend


def unused_unpacked_item(x):
    a, b, c = x.unbind(0)
    return a + c


def unused_second_output(x):
    values, indices = x.max(0)
    return values


def unused_tensor_calls(x):
    zeros = torch.zeros(3)
    s = x.sin()
    return x * 2


def mutation_without_result(x):
    y = x.clone()
    y[0] = 1.0


def unused_split(x):
    parts = x.split(1)
    return x + 1


@pytest.mark.parametrize("fn", [unused_unpacked_item, unused_second_output, unused_tensor_calls,
                                mutation_without_result, unused_split])
def test_graph_keeps_what_torch_dynamo_keeps(fn):
    x = torch.randn(3, 3)
    ours, dynamo = CountingBackend(), CountingBackend()
    result = pyframe.optimize(ours)(fn)(x)
    expected = fn(x)
    if expected is None:
        assert result is None
    else:
        torch.testing.assert_close(result, expected)
    torch._dynamo.reset()
    torch._dynamo.optimize(dynamo)(fn)(x)
    assert [g.ops for g in ours.graphs] == [g.ops for g in dynamo.graphs]

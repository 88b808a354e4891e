"""Calls the translator inlines that are neither plain functions nor modules: bound methods passed
around as values, functions wrapped by torch's context-manager decorators, functools.reduce.

Each is compared with eager (results) and with torch._dynamo (one graph, the same ops).
"""
from __future__ import annotations

import functools
import operator

import pytest
import torch
import torch._dynamo

import pyframe
from pyframe.debug.compare import CountingBackend


@torch.no_grad()
def ema(average, x, decay=0.9):
    return average * decay + x * (1 - decay)


class Scaler:
    def __init__(self, factor):
        self.factor = factor

    def apply(self, x):
        return x * self.factor


SCALE = Scaler(3.0).apply  # a bound method kept as a global


def reduce_sum(x, y):
    return functools.reduce(operator.add, [x, y, x * y], torch.zeros(()))


def decorated_no_grad(x, y):
    return ema(x.relu(), y) + 1


def bound_method_global(x, y):
    return SCALE(x) - y


def bound_method_argument(x, y, fn=Scaler(0.5).apply):
    return fn(x + y)


@pytest.mark.parametrize("fn", [reduce_sum, decorated_no_grad, bound_method_global, bound_method_argument])
def test_inlined_like_torch_dynamo(fn):
    x, y = torch.randn(4, requires_grad=True), torch.randn(4)
    ours, dynamo = CountingBackend(), CountingBackend()
    result = pyframe.optimize(ours)(fn)(x, y)
    expected = fn(x, y)
    torch.testing.assert_close(result, expected)
    assert result.requires_grad == expected.requires_grad
    torch._dynamo.reset()
    torch._dynamo.optimize(dynamo)(fn)(x, y)
    assert len(ours.graphs) == len(dynamo.graphs) == 1
    assert [g.ops for g in ours.graphs] == [g.ops for g in dynamo.graphs]


def test_rebinding_a_bound_method_recompiles():
    global SCALE
    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(bound_method_global)
    x, y = torch.randn(4), torch.randn(4)
    torch.testing.assert_close(compiled(x, y), x * 3.0 - y)
    old = SCALE
    try:
        SCALE = Scaler(5.0).apply  # another object bound: its factor is read again
        torch.testing.assert_close(compiled(x, y), x * 5.0 - y)
    finally:
        SCALE = old
    assert len(backend.graphs) == 2

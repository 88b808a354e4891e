"""Generators the traced code makes and consumes: run lazily, so the graph interleaves producer and
consumer ops in the order Python runs them (and torch._dynamo records them).
"""
from __future__ import annotations

import itertools

import pytest
import torch
import torch._dynamo

import pyframe
from pyframe.debug.compare import CountingBackend


def powers(x, n):
    for i in range(n):
        yield x ** (i + 1)


def delegating(x):
    yield x.sin()
    yield from powers(x, 2)


def sum_of_generator_expression(x):
    return sum(a * b for a, b in itertools.product([x, x + 1], [1, 2]))


def loop_with_early_exit(x):
    total = x
    for p in powers(x, 10):
        total = total + p
        if p is not None and total.dim() == 1:  # known while tracing: leaves after the first item
            break
    return total


def yield_from_and_list(x):
    return torch.stack(list(delegating(x))).sum(0)


@pytest.mark.parametrize("fn", [sum_of_generator_expression, loop_with_early_exit, yield_from_and_list])
def test_generators_run_lazily_like_torch_dynamo(fn):
    x = torch.randn(4)
    ours, dynamo = CountingBackend(), CountingBackend()
    torch.testing.assert_close(pyframe.optimize(ours)(fn)(x), fn(x))
    torch._dynamo.reset()
    torch._dynamo.optimize(dynamo)(fn)(x)
    assert len(ours.graphs) == len(dynamo.graphs) == 1
    assert [g.ops for g in ours.graphs] == [g.ops for g in dynamo.graphs]


def test_generator_alive_at_a_graph_break_continues_after_it():
    def fn(x):
        gen = powers(x, 3)
        first = next(iter([x]))  # (a plain call, traced)
        if x.sum() > 0:  # a graph break with `gen` live
            return sum(gen) + first
        return sum(gen) - first

    compiled = pyframe.optimize(CountingBackend())(fn)
    for sign in (1.0, -1.0):
        x = torch.full((3,), 0.5 * sign)
        torch.testing.assert_close(compiled(x), fn(x))

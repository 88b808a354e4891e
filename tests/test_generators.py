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


# -- `yield from`'s value is the sub-generator's return value (issue 19, item 3) -----------------

def _returns_after_yielding(x, n):
    for i in range(n):
        yield x * i
    return x.sum() + n


def _delegates_and_uses_the_result(x):
    result = yield from _returns_after_yielding(x, 2)
    yield result * 2


def _returns_a_tuple(x):
    yield x
    return x + 1, "done"


def _unpacks_the_result(x):
    value, tag = yield from _returns_a_tuple(x)
    yield value if tag == "done" else -value


def _twice_from_one_generator(x):
    inner = _returns_after_yielding(x, 1)
    first = yield from inner
    second = yield from inner  # exhausted: None
    yield first if second is None else x * 0


def _yield_from_a_list(x):
    result = yield from [x, x + 1]
    yield x if result is None else x * 0


@pytest.mark.parametrize("gen", [_delegates_and_uses_the_result, _unpacks_the_result,
                                 _twice_from_one_generator, _yield_from_a_list])
def test_yield_from_gives_the_sub_generators_return_value(gen):
    def consume(x):
        return [v * 2 for v in gen(x)]

    backend = CountingBackend()
    compiled = pyframe.optimize(backend, fullgraph=True)(consume)
    x = torch.randn(3)
    for actual, expected in zip(compiled(x), consume(x), strict=True):
        torch.testing.assert_close(actual, expected)
    assert len(backend.graphs) == 1

"""Corpus: generators as objects. Values sent into a generator, exceptions thrown into it, closing
it, and a generator handed from one function to another. (`yield from` a generator sent to or
thrown into, PEP 479 and state reads, which torch._dynamo runs as Python, are in
tests/test_generator_objects.py.)"""

import torch

from pyframe.debug.cases import case


def _running_sum():
    total = 0.0
    while True:
        value = yield total
        total = total + value


@case(inputs=lambda: torch.randn(4))
def send_values_into_a_generator(x):
    """A coroutine-style accumulator: primed with next(), then fed with send()."""
    acc = _running_sum()
    next(acc)
    acc.send(x)
    return acc.send(x.cos() * 2)


def _resilient(x):
    scale = 1.0
    while True:
        try:
            yield x * scale
        except ValueError:
            scale = scale * 10


@case(inputs=lambda: torch.randn(4))
def throw_into_a_generator(x):
    """throw() raises at the paused yield; the generator catches it and yields the next value."""
    g = _resilient(x)
    first = next(g)
    second = g.throw(ValueError("louder"))
    return first + second


def _with_cleanup(x, log):
    try:
        yield x + 1
        yield x + 2
    finally:
        log.append("closed")


@case(inputs=lambda: torch.randn(4))
def close_runs_the_finally_block(x):
    """close() raises GeneratorExit at the paused yield: the finally block runs."""
    log = []
    g = _with_cleanup(x, log)
    y = next(g)
    g.close()
    return y * len(log)


def _numbers(x):
    for i in range(4):
        yield x + i


def _take(gen, n):
    return [next(gen) for _ in range(n)]


@case(inputs=lambda: torch.randn(4))
def generator_passed_between_functions(x):
    """One generator consumed by two helpers in turn, then exhausted by sum()."""
    g = _numbers(x)
    head = _take(g, 2)
    tail = sum(g)
    return head[0] + head[1] + tail

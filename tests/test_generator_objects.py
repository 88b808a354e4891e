"""Generators as objects beyond what torch._dynamo 2.13 traces: `yield from` a generator that is
sent to or thrown into, PEP 479 (a StopIteration leaving a generator's body is a RuntimeError), a
generator's return value in StopIteration.value, its state (gi_running, gi_frame once finished,
gi_suspended), and what Python raises for misuse. torch._dynamo runs these frames as Python; pyframe
traces each in one graph, with eager's result (tests/cases/generator_objects.py has the programs
both trace).
"""
from __future__ import annotations

import pytest
import torch

import pyframe
from pyframe.debug.compare import CountingBackend


def _numbers(x):
    for i in range(4):
        yield x + i


def _inner_echo():
    received = yield "ready"
    while received is not None:
        received = yield received * 2
    return "done"


def _outer_echo():
    result = yield from _inner_echo()
    yield result


def send_through_yield_from(x):
    """send() through `yield from` reaches the inner generator; its return value comes back."""
    g = _outer_echo()
    ready = next(g)
    y = g.send(x)
    z = g.send(y + 1)
    done = g.send(None)
    return z if ready == "ready" and done == "done" else y


def _inner_catching(x):
    try:
        yield x
    except KeyError:
        yield x * 100


def _outer_delegating(x):
    yield from _inner_catching(x)


def throw_through_yield_from(x):
    """throw() through `yield from` is raised in the inner generator, which handles it."""
    g = _outer_delegating(x)
    a = next(g)
    b = g.throw(KeyError("k"))
    return a + b


def _stops_early(x):
    yield x
    raise StopIteration


def stop_iteration_in_a_generator_is_runtime_error(x):
    """PEP 479: a StopIteration raised in a generator's body comes out as RuntimeError."""
    g = _stops_early(x)
    y = next(g)
    try:
        next(g)
    except RuntimeError as e:
        y = y * 2 if isinstance(e.__cause__, StopIteration) else y
    return y




def generator_state_reads(x):
    """gi_running, gi_frame and gi_suspended-style facts, read before, during and after."""
    g = _numbers(x)
    y = x
    if g.gi_frame is not None and not g.gi_running:
        y = y + next(g)
    for value in g:
        y = y + value
    if g.gi_frame is None:
        y = y * 2
    return y


def generator_return_value_in_stop_iteration(x):
    """A generator's return value is the StopIteration's value."""

    def gen():
        yield x
        return x * 3

    g = gen()
    y = next(g)
    try:
        next(g)
    except StopIteration as stop:
        y = y + stop.value
    return y


def _reads_its_own_state(x, holder):
    yield x * holder[0].gi_running
    yield x


def generator_state_while_running(x):
    """gi_running is True inside the generator's own body, gi_suspended while it is paused."""
    holder = []
    g = _reads_its_own_state(x, holder)
    holder.append(g)
    before = g.gi_suspended
    first = next(g)
    return first + (int(g.gi_suspended) - int(before))


def misuse_raises_as_in_python(x):
    """send() of a value to a fresh generator, throw() into a fresh one, close() twice."""
    g = _numbers(x)
    try:
        g.send(x)
    except TypeError:
        x = x + 1
    h = _numbers(x)
    try:
        h.throw(KeyError)
    except KeyError:
        x = x * 2
    h.close()
    h.close()
    return x + next(g)


def close_of_a_generator_that_ignores_it(x):
    def stubborn():
        while True:
            try:
                yield x
            except GeneratorExit:
                pass

    g = stubborn()
    next(g)
    try:
        g.close()
    except RuntimeError:
        return x * 3
    return x


def set_tests_take_a_generator_up_to_the_deciding_item(x):
    """`s.issuperset(gen)` stops at the first item not in s, `s.isdisjoint(gen)` at the first in s
    (CPython builds no set of them): the generator keeps the rest, and its side effects stop there
    (torch._dynamo 2.13 takes all of issuperset's items)."""
    seen = []

    def items(values):
        for v in values:
            seen.append(v)
            yield v

    g = items((1, 9, 3, 4))
    superset = {1, 3, 4}.issuperset(g)
    rest = list(g)
    h = items((5, 2, 6))
    disjoint = frozenset({2}).isdisjoint(h)
    return x * len(seen) + superset + disjoint, rest, list(h), seen


PROGRAMS = [send_through_yield_from, throw_through_yield_from, stop_iteration_in_a_generator_is_runtime_error,
            generator_state_reads, generator_return_value_in_stop_iteration, generator_state_while_running,
            misuse_raises_as_in_python, close_of_a_generator_that_ignores_it,
            set_tests_take_a_generator_up_to_the_deciding_item]


@pytest.mark.parametrize("fn", PROGRAMS, ids=lambda fn: fn.__name__)
def test_generator_protocol_in_one_graph(fn):
    x = torch.randn(4)
    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(fn)
    torch.testing.assert_close(compiled(x), fn(x))
    torch.testing.assert_close(compiled(x), fn(x))  # the cache hit
    assert len(backend.graphs) == 1, pyframe.explain(fn)(x).break_reasons


def _counted_with_cleanup(log):
    try:
        for i in range(5):
            yield i
    finally:
        log.append("closed")


def _counted_catching_value_errors():
    for i in range(5):
        try:
            yield i
        except ValueError:
            pass


def test_a_generator_dropped_in_its_try_block_runs_the_frame_as_python():
    """`break` out of `for v in gen()` drops the generator: CPython closes it then, and its finally
    block runs. The trace cannot know when the last reference goes, so the frame runs as Python.
    (torch._dynamo 2.13 compiles it and never runs the finally block.)"""
    def fn(x):
        log = []
        total = 0
        for v in _counted_with_cleanup(log):
            if v == 2:
                break
            total += v
        return x * total, list(log)

    x = torch.randn(4)
    got = pyframe.optimize(CountingBackend())(fn)(x)
    expected = fn(x)
    torch.testing.assert_close(got[0], expected[0])
    assert got[1] == expected[1] == ["closed"]


def test_a_generator_dropped_where_no_handler_sees_generator_exit_stays_compiled():
    """Paused inside `try: ... except ValueError:`, closing the generator runs none of its code
    (GeneratorExit does not match): the frame is still one graph."""
    def fn(x):
        total = 0
        for v in _counted_catching_value_errors():
            if v == 2:
                break
            total += v
        return x * total

    x = torch.randn(4)
    backend = CountingBackend()
    torch.testing.assert_close(pyframe.optimize(backend)(fn)(x), fn(x))
    assert len(backend.graphs) == 1

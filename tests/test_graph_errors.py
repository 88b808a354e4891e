"""A compiled graph that raises at run time (pyframe/rerun.py): the frame runs again as Python, so the
side effects before the failing op in program order, and the exception, are eager's.

Each program raises on its second call, a cache hit (an index out of range that no guard checks):
the log it appended to, the exception's type, message and context, the RNG stream and the inputs
afterwards are compared with an eager run of the same call.
"""
from __future__ import annotations

import pytest
import torch

import pyframe
from pyframe.debug.compare import CountingBackend


def _outcome(fn, args, log):
    torch.manual_seed(0)
    try:
        result, error = fn(*args), None
    except Exception as e:  # noqa: BLE001 - the exception is what is compared
        result, error = None, e
    return result, error, list(log), torch.rand(2)


def _plain(x, i, log):
    log.append(x.sum())
    return x.index_select(0, i) * 2


def _break_then_raise(x, i, log):       # the resume function's graph raises
    y = x + 1
    log.append(1)
    if y.sum() > 0:
        log.append(2)
        return y.index_select(0, i)
    return y


def _raise_then_break(x, i, log):       # the first graph raises, before the break
    log.append(1)
    y = x.index_select(0, i)
    print(end="")
    log.append(2)
    return y


def _star_args(x, *rest, scale=2, **kw):
    kw["log"].append((len(rest), scale))
    return x.index_select(0, rest[0]) * scale


def _via_star_args(x, i, log):
    return _star_args(x, i, scale=3, log=log)


def _random_before_the_error(x, i, log):
    log.append(0)
    y = torch.rand(3) + x               # the rerun must draw the same numbers
    return y.index_select(0, i)


def _cell_argument(x, i, log):
    fs = [lambda: x * k for k in range(2)]  # x is a cell
    log.append(1)
    return x.index_select(0, i) + fs[1]()


def _make_counter():
    count = torch.zeros(3)

    def counter(x, i, log):
        nonlocal count
        count = count + 1               # a store to the closure's cell, replayed after the graph
        log.append(count.clone())
        return (x + count).index_select(0, i)

    return counter


class _Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(3, 3)
        self.calls = 0

    def forward(self, x, i, log):
        self.calls += 1                 # an attribute store, replayed after the graph
        log.append(self.calls)
        return self.linear(x).index_select(0, i)


_GOOD = (torch.ones(3), torch.tensor([1]))
_BAD = (torch.ones(3), torch.tensor([7]))


@pytest.mark.parametrize("make", [
    lambda: _plain, lambda: _break_then_raise, lambda: _raise_then_break, lambda: _via_star_args,
    lambda: _random_before_the_error, lambda: _cell_argument, _make_counter,
    lambda: (torch.manual_seed(1), _Model())[1],  # the same weights for both
], ids=["plain", "break_then_raise", "raise_then_break", "star_args", "random", "cell_argument",
        "closure_store", "module_attribute"])
def test_a_graph_error_on_a_cache_hit_keeps_eagers_side_effects_and_exception(make):
    eager_fn, compiled_fn = make(), make()
    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(compiled_fn)
    for args in (_GOOD, _BAD, _GOOD, _BAD):  # the failing call is a cache hit, each time
        eager_log, compiled_log = [], []
        e_result, e_error, e_log, e_next = _outcome(eager_fn, (*args, eager_log), eager_log)
        c_result, c_error, c_log, c_next = _outcome(compiled, (*args, compiled_log), compiled_log)
        assert type(c_error) is type(e_error) and str(c_error) == str(e_error)
        if e_error is not None:
            assert c_error.__context__ is None and c_error.__cause__ is None  # not chained to the graph's
        else:
            torch.testing.assert_close(c_result, e_result)
        assert len(c_log) == len(e_log)
        for a, e in zip(c_log, e_log):
            torch.testing.assert_close(a, e)
        torch.testing.assert_close(c_next, e_next, msg="the RNG stream moved on differently")
    assert backend.graphs, "nothing was compiled"
    if isinstance(compiled_fn, _Model):
        assert compiled_fn.calls == eager_fn.calls == 4


def test_the_rerun_runs_the_original_code_not_the_compiled_one():
    """The rerun calls the frame's code with the hook off: the graph runs once per call (the failing
    attempt), the functions it calls are not compiled, and the cache gains no entry."""
    graph_calls = []

    def counting(gm, example_inputs):
        def run(*args):
            graph_calls.append(gm.meta.get("pyframe_name"))
            return gm.forward(*args)
        return run

    def helper(y):
        return y * 2

    def fn(x, i, log):
        log.append(1)
        return helper(x.index_select(0, i))

    compiled = pyframe.optimize(counting)(fn)
    compiled(*_GOOD, [])
    before = len(graph_calls)
    log = []
    with pytest.raises(IndexError):
        compiled(*_BAD, log)
    assert log == [1]
    assert len(graph_calls) == before + 1
    assert len(pyframe.debug.cache_entries(fn)) == 1
    assert not pyframe.debug.cache_entries(helper)


def test_a_graph_that_mutates_an_input_is_not_run_again():
    """The documented exception (docs/debugging.md, "When a graph raises"): running it again would
    apply the mutation twice. The graph's own exception reaches the caller, the in-place update the
    graph made before the failing op stays (as eager's does), and the Python side effects the trace
    recorded are not replayed (eager's log has the entry; this one does not)."""
    def fn(x, i, log):
        log.append("before")
        x.add_(1)
        return x.index_select(0, i)

    compiled = pyframe.optimize(CountingBackend())(fn)
    compiled(torch.ones(3), torch.tensor([1]), [])
    x, log = torch.ones(3), []
    with pytest.raises(IndexError, match="index out of range"):
        compiled(x, torch.tensor([7]), log)
    torch.testing.assert_close(x, torch.full((3,), 2.0))  # updated once
    assert log == []


def test_a_graph_mutating_only_its_own_tensors_is_run_again():
    def fn(x, i, log):
        log.append("before")
        y = x * 2
        y.add_(1)                       # a tensor the graph made: the rerun makes a new one
        y[0] = 5.0
        return y.index_select(0, i)

    compiled = pyframe.optimize(CountingBackend())(fn)
    compiled(torch.ones(3), torch.tensor([1]), [])
    x, log = torch.ones(3), []
    with pytest.raises(IndexError):
        compiled(x, torch.tensor([7]), log)
    assert log == ["before"]
    torch.testing.assert_close(x, torch.ones(3))


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
def test_only_a_dropout_that_trains_counts_as_drawing_random_numbers(training):
    """A graph with nn.Dropout in eval mode (F.dropout(..., training=False)), or dropout and
    attention with a probability of 0, draws nothing, so its cached calls skip saving the
    generator's state; in training mode they save it."""
    from pyframe.rerun import draws_random_numbers

    graphs = []
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5)).train(training)
    compiled = pyframe.optimize(lambda gm, ex: graphs.append(gm) or gm.forward)(model)
    x = torch.randn(2, 4)
    torch.manual_seed(0)
    expected = model(x)
    torch.manual_seed(0)
    torch.testing.assert_close(compiled(x), expected)
    assert [draws_random_numbers(gm) for gm in graphs] == [training]
    assert draws_random_numbers(torch.fx.symbolic_trace(lambda x: torch.dropout(x, 0.5, False))) is False
    assert draws_random_numbers(torch.fx.symbolic_trace(lambda x: torch.dropout(x, 0.5, True))) is True
    assert draws_random_numbers(torch.fx.symbolic_trace(lambda x: torch.dropout(x, 0.0, True))) is False
    sdpa = torch.nn.functional.scaled_dot_product_attention
    assert draws_random_numbers(torch.fx.symbolic_trace(lambda q: sdpa(q, q, q, dropout_p=0.0))) is False
    assert draws_random_numbers(torch.fx.symbolic_trace(lambda q: sdpa(q, q, q, dropout_p=0.1))) is True

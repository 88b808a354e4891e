"""Lazy iterators that outlive the frame (translator/variables/iterators.py, Remake): a zip or map over
lists and tuples comes back as itself, a map's calls still to come made when the caller takes the
items; any other lazy iterator handed back runs the frame as Python, keeping its type."""
from __future__ import annotations

import torch

import pyframe
from pyframe.debug.compare import CountingBackend, assert_same_result


def _compile(fn):
    backend = CountingBackend()
    return pyframe.optimize(backend)(fn), backend


def test_a_returned_map_calls_its_function_when_consumed():
    calls = []

    def double(t):
        calls.append(t.shape)
        return t * 2

    def fn(x):
        return map(double, [x + 1, x.exp()])

    compiled, backend = _compile(fn)
    x = torch.randn(3)
    mapped = compiled(x)
    assert type(mapped) is map and calls == [] and len(backend.graphs) == 1
    assert backend.graphs[0].ops == ("add", "exp")  # the calls are not in the graph
    assert_same_result(list(mapped), [(x + 1) * 2, x.exp() * 2])
    assert len(calls) == 2


def test_a_zip_stored_in_an_argument_comes_back_as_a_zip():
    def fn(x, box):
        box.append(zip([x + 1, x - 1], ("plus", "minus")))
        return x * 3

    compiled, backend = _compile(fn)
    x, box = torch.randn(3), []
    assert_same_result(compiled(x, box), x * 3)
    assert len(backend.graphs) == 1 and type(box[0]) is zip
    assert_same_result(list(box[0]), [(x + 1, "plus"), (x - 1, "minus")])


def test_the_items_a_partly_consumed_zip_has_left():
    def fn(x):
        pairs = zip([x, x + 1, x + 2], [1, 2, 3])
        next(pairs)
        return pairs

    compiled, _ = _compile(fn)
    x = torch.randn(2)
    assert_same_result(list(compiled(x)), [(x + 1, 2), (x + 2, 3)])


def test_other_lazy_iterators_handed_back_keep_their_type():
    # torch._dynamo hands these back as tuple iterators; pyframe runs such a frame as Python.
    def over_an_iterator(x):
        return zip(iter([x + 1]), [1])

    def numbered(x):
        return enumerate([x + 1, x])

    for fn, kind in ((over_an_iterator, zip), (numbered, enumerate)):
        compiled, backend = _compile(fn)
        out = compiled(torch.ones(2))
        assert type(out) is kind and len(backend.graphs) == 0

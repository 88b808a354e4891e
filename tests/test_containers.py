"""Containers and iteration helpers built while tracing: sets, itertools, list slice assignment.

Compared with eager (results) and torch._dynamo (one graph, the same ops).
"""
from __future__ import annotations

import collections
import itertools

import pytest
import torch
import torch._dynamo

import pyframe
from pyframe.debug.compare import CountingBackend


def sets_of_constants(x):
    seen = {1, 2, 2}
    seen.add(3)
    evens = {i * 2 for i in range(4)}
    return x * len(seen) + max(evens) if 2 in seen and 5 not in evens else x


def itertools_chain_islice_zip_longest(x):
    chained = list(itertools.chain([x], (x * 2,)))
    tail = list(itertools.islice([x, x + 1, x + 2], 1, None))
    pairs = list(itertools.zip_longest([x, x - 1], [1]))
    return sum(chained) + tail[-1] + pairs[0][0] * (pairs[1][1] is None)


def list_slice_assignment(x):
    parts = [x, x, x]
    parts[1:] = [x * 3, x * 4]
    parts[0] = x - 1
    return torch.stack(parts)


@pytest.mark.parametrize("fn", [sets_of_constants, itertools_chain_islice_zip_longest, list_slice_assignment])
def test_one_graph_like_torch_dynamo(fn):
    x = torch.randn(4)
    ours, dynamo = CountingBackend(), CountingBackend()
    torch.testing.assert_close(pyframe.optimize(ours)(fn)(x), fn(x))
    torch._dynamo.reset()
    torch._dynamo.optimize(dynamo)(fn)(x)
    assert len(ours.graphs) == len(dynamo.graphs) == 1
    assert [g.ops for g in ours.graphs] == [g.ops for g in dynamo.graphs]


def test_a_set_of_tensors_hashes_them_by_identity_and_guards_their_aliasing():
    def fn(x, y):
        s = {x, y, x + 1}
        return len(s), x in s, (y * 2) in s, sum(s)

    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(fn)
    a, b = torch.randn(2), torch.randn(2)
    for args in [(a, b), (torch.randn(2), torch.randn(2))]:  # new tensors, as distinct: a hit
        assert compiled(*args)[:3] == fn(*args)[:3]
    assert len(backend.graphs) == 1
    assert compiled(a, a)[0] == 2  # the same tensor twice is one element: the guard fails, recompiled
    assert len(backend.graphs) == 2
    torch.testing.assert_close(compiled(a, a)[3], fn(a, a)[3])
    assert len(backend.graphs) == 2


def deque_made_in_the_frame(a, b):
    d = collections.deque([a, b])
    d.append(a + 1)
    d.appendleft(b * 2)
    last = d.pop()
    d.extend([last, a])
    d.rotate(1)
    first = d.popleft()
    window = collections.deque(maxlen=2)
    for i in range(4):
        window.append(a * i)
    d.extendleft([b, b + 1])
    return list(d), first, len(window), window[0], window.maxlen, d


def test_a_deque_made_in_the_frame_is_traced_into_one_graph():
    """torch._dynamo 2.13 breaks this one in two; pyframe traces every deque method used here
    (maxlen drops items as Python does) and returns a real deque."""
    counter = CountingBackend()
    a, b = torch.randn(3), torch.randn(3)
    got, expected = pyframe.optimize(counter)(deque_made_in_the_frame)(a, b), deque_made_in_the_frame(a, b)
    assert type(got[-1]) is collections.deque and got[-1].maxlen is None
    for g, e in zip([*got[0], got[1], got[3], *got[-1]], [*expected[0], expected[1], expected[3], *expected[-1]]):
        torch.testing.assert_close(g, e)
    assert got[2] == expected[2] == 2 and got[4] == expected[4] == 2
    assert len(counter.graphs) == 1


# -- slices of the frame's lists and tuples (issue 19, item 5: an internal error) ----------------

def _len_of_a_slice(lst, x):
    return x * len(lst[1:])


def _item_of_a_slice(lst, x):
    return lst[1:][0] * x + lst[::-1][0]


def _slice_of_tensors(lst, x):
    return sum(lst[:2]) + x


def _slice_of_a_namedtuple(pair, x):
    rest = pair[1:]
    return x * rest[0] if type(rest) is tuple else x


_Pair = collections.namedtuple("_Pair", "a b")


@pytest.mark.parametrize("fn, first", [
    (_len_of_a_slice, lambda: [1, 2, 3]),
    (_item_of_a_slice, lambda: [1, 2, 3]),
    (_slice_of_tensors, lambda: [torch.ones(2), torch.full((2,), 3.0), torch.zeros(2)]),
    (_slice_of_a_namedtuple, lambda: _Pair(1.0, 2.0)),
])
def test_a_slice_of_an_argument_is_traced(fn, first):
    backend = CountingBackend()
    compiled = pyframe.optimize(backend, fullgraph=True)(fn)
    x = torch.randn(2)
    torch.testing.assert_close(compiled(first(), x), fn(first(), x))
    assert len(backend.graphs) == 1


def test_a_slice_guards_the_items_it_reads():
    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(_item_of_a_slice)
    x = torch.randn(2)
    for lst in ([1, 2, 3], [1, 5, 3], [1, 5, 7]):
        torch.testing.assert_close(compiled(lst, x), _item_of_a_slice(lst, x))


def test_a_returned_tuple_of_containers_is_new_at_each_call_and_holds_the_frames_own():
    """A tuple of constants' containers is not one constant shared by every call: a list in it is
    a new list at each call (changing the one a call returned leaves the next call's alone), and a
    dict the frame was given is that dict, not a copy."""
    def fn(x, given):
        return x + 1, ([1, 2], {"k": 1}), (given, 3)

    compiled = pyframe.optimize(CountingBackend())(fn)
    given = {"a": 1}
    first = compiled(torch.ones(2), given)
    first[1][0].append(3)
    first[1][1]["k"] = 2
    second = compiled(torch.ones(2), given)
    assert second[1] == ([1, 2], {"k": 1}) and second[1][0] is not first[1][0]
    assert second[2][0] is given

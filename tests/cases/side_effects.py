"""Corpus: mutations of lists, dicts and objects the caller holds, traced and replayed after the
graph; each case returns the mutated object so the harness compares it with eager's."""

import torch

from pyframe.debug.cases import case


class _Holder:
    def __init__(self):
        self.count = 0
        self.last = None

    def __eq__(self, other):  # the harness compares results; compare what the trace changed
        if not isinstance(other, _Holder) or self.count != other.count:
            return False
        if self.last is None or other.last is None:
            return self.last is other.last
        return torch.allclose(self.last, other.last)


@case(inputs=lambda: (torch.randn(4), [torch.ones(4)]))
def append_to_list_argument_traced(x, acc):
    acc.append(x.sin())
    acc.extend([x.cos()])
    return x * len(acc), acc


@case(inputs=lambda: (torch.randn(4), {"scale": 3.0}))
def update_dict_argument(x, d):
    d["y"] = x * d["scale"]
    d.update({"z": x.relu()})
    return d["y"] + d.pop("scale"), d


@case(inputs=lambda: (torch.randn(4), _Holder()))
def set_attributes_on_argument(x, h):
    h.last = x.exp()
    h.count = h.count + 1
    return h.last * h.count, h


@case(inputs=lambda: (torch.randn(4), [torch.zeros(4)]))
def loop_appends_to_list_it_reads(x, items):
    for item in items:
        if len(items) < 3:
            items.append(item + x)
    return torch.stack(items).sum(0), items


# Closure cells that outlive the frame: the frame's own free variables and cells of functions made
# elsewhere. Stores to them are replayed after the graph (`cell.cell_contents = value`).


def _make_last_setter():
    last = None

    def remember(a):
        nonlocal last
        last = a + 1
        return last * 2

    return remember


# The compiled function is itself a closure: `nonlocal last; last = ...` stores into its own cell.
case(inputs=lambda: torch.randn(4), name="nonlocal_store_in_compiled_closure")(_make_last_setter())


def _make_step_counter():
    steps = 0

    def halve_three_times(x):
        nonlocal steps
        steps = 0
        for _ in range(3):
            steps += 1
            x = x * 0.5
        return x + steps

    return halve_three_times


case(inputs=lambda: torch.randn(4), name="counter_in_compiled_closure")(_make_step_counter())


def _make_best_tracker():
    best = None

    def update(v):
        nonlocal best
        best = v if best is None else torch.maximum(best, v)

    def step(x):
        nonlocal best
        best = None
        update(x)
        update(x.flip(0))
        return best * 2

    return step


# `update` (inlined) assigns the compiled closure's own cell: one cell, seen by both.
case(inputs=lambda: torch.randn(4), name="compiled_closure_and_sibling_share_a_cell")(_make_best_tracker())


def _make_slot():
    value = None

    def put(v):
        nonlocal value
        value = v.sin()

    def get():
        return value

    return put, get


_PUT, _GET = _make_slot()


@case(inputs=lambda: torch.randn(4))
def setter_and_getter_share_a_cell(x):
    """Two functions made by one call share a cell: what `put` stores, `get` reads back."""
    _PUT(x + 1)
    first = _GET() * 2
    _PUT(first)
    return first + _GET()


def _make_counter():
    n = 0

    def increment(by=1):
        nonlocal n
        n += by
        return n

    return increment


class _Counters:
    """A fresh counter closure per call (equal to another: the harness compares inputs)."""

    def __init__(self):
        self.increment = _make_counter()

    def __eq__(self, other):
        return isinstance(other, _Counters)


@case(inputs=lambda: (torch.randn(4), _Counters()))
def counter_incremented_in_loop(x, counters):
    for i in range(3):
        x = x + counters.increment(i)
    return x, counters.increment(0)

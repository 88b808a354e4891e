"""Compiling from many threads at once: one entry per distinct guard set, no spurious errors,
results always eager's.

Threads that miss together wait for each other (convert_frame's compile lock); a thread that finds,
once its turn comes, an entry another thread made for the same inputs runs the frame as Python
that once instead of installing a second entry.
"""
from __future__ import annotations

import threading

import pytest
import torch

import pyframe
from pyframe import _C
from pyframe.convert_frame import records_for

THREADS = 8


def body(x, y):
    a = torch.sin(x) * 2 + y
    return (a.relu() - x.mean()).sum(0)


def branching(x, y):
    z = x * y
    if z.sum() > 0:  # a graph break: resume functions compile from the threads too
        return z + 1
    return z - 1


def _inputs(i: int):
    """Shapes and dtypes that change with the call: 2 dtypes x 3 shapes."""
    dtype = (torch.float32, torch.float64)[i % 2]
    n = (3, 5, 7)[(i // 2) % 3]
    g = torch.Generator().manual_seed(i)
    return torch.randn(n, 4, generator=g, dtype=dtype), torch.randn(n, 4, generator=g, dtype=dtype)


def _hammer(fn, rounds: int, fullgraph: bool):
    pyframe.reset()
    # (static shapes: one entry per dtype and shape, whichever thread misses first)
    compiled = pyframe.optimize("eager", fullgraph=fullgraph, dynamic=False)(fn)
    barrier = threading.Barrier(THREADS)
    errors: list[BaseException] = []

    def worker(t: int) -> None:
        try:
            for r in range(rounds):
                barrier.wait()  # every thread misses (or hits) at the same moment
                x, y = _inputs(t + r)
                torch.testing.assert_close(compiled(x, y), fn(x, y))
        except BaseException as e:  # noqa: BLE001 (reported below)
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def _check_entries(fn):
    records = records_for(fn.__code__)
    assert not [r for r in records if r.status != "compiled"], [r.reason for r in records]
    entries = _C.get_cache_entries(fn.__code__)
    # one per distinct guard set: 2 dtypes x 3 shapes, however many threads missed together
    assert len(entries) == len(records) == 6


@pytest.mark.parametrize("fullgraph", [False, True])
def test_threads_missing_together_make_one_entry_per_guard_set(fullgraph):
    _hammer(body, rounds=6, fullgraph=fullgraph)
    _check_entries(body)
    pyframe.reset()


def test_threads_compile_graph_breaks_and_resume_functions():
    _hammer(branching, rounds=6, fullgraph=False)
    _check_entries(branching)
    pyframe.reset()


@pytest.mark.slow
def test_threads_long_run():
    for fn in (body, branching):
        _hammer(fn, rounds=60, fullgraph=False)
        _check_entries(fn)
    pyframe.reset()

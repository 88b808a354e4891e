"""Scopes: locals() and vars() as CPython 3.11 makes them (the frame's one f_locals dict, refreshed
at each call), traced in one graph. The corpus (tests/cases/scopes.py) compares the common uses with
torch._dynamo; these are the finer points of the semantics, compared with eager.
"""
from __future__ import annotations

import torch

import pyframe
from pyframe.debug.compare import CountingBackend


def test_locals_is_one_dict_refreshed_at_each_call() -> None:
    def fn(x):
        a = x + 1
        first = locals()
        first["mine"] = 2          # a key of the program's own stays
        b = a * 2
        seen_before = "b" in first  # not yet: written after the call
        del a
        second = locals()          # the same dict: b added, a removed
        return b * second["mine"], seen_before, first is second, "a" in first, list(first)[:3]

    x = torch.randn(3)
    backend = CountingBackend()
    got = pyframe.optimize(backend)(fn)(x)
    expected = fn(x)
    torch.testing.assert_close(got[0], expected[0])
    assert got[1:] == expected[1:] == (False, True, False, ["x", "mine", "first"])
    assert len(backend.graphs) == 1


def test_locals_lists_cells_and_free_variables_in_slot_order() -> None:
    def fn(x):
        k = 3

        def inner(a):
            return sorted(locals()), a * k

        names, y = inner(x)
        return y, names, list(locals())

    x = torch.randn(3)
    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(fn)
    for _ in range(2):
        got = compiled(x)
        expected = fn(x)
        torch.testing.assert_close(got[0], expected[0])
        assert got[1:] == expected[1:]
    assert len(backend.graphs) == 1  # the second call is a cache hit


def test_locals_of_a_comprehension_is_its_own() -> None:
    def fn(x):
        scopes = [sorted(locals()) for i in range(2)]
        return x + len(scopes[0]), scopes

    x = torch.randn(3)
    got, expected = pyframe.optimize(CountingBackend())(fn)(x), fn(x)
    torch.testing.assert_close(got[0], expected[0])
    assert got[1] == expected[1] == [[".0", "i"], [".0", "i"]]


def test_a_locals_dict_holding_itself_at_a_break_runs_as_python() -> None:
    def fn(x):
        d = locals()
        d = locals()  # now d holds itself: no bytecode rebuilds that at the break below
        print(end="")
        return x + len(d)

    x = torch.randn(3)
    torch.testing.assert_close(pyframe.optimize(CountingBackend())(fn)(x), fn(x))


SCALE = 2.0


def test_a_store_through_globals_is_seen_by_a_later_global_read() -> None:
    """globals() breaks the graph (as in torch._dynamo); the dict then reaches the resume function
    as a value, and a store into it is left to Python, so that the read of the global after it
    sees the new value (a store into the tracker would not reach LOAD_GLOBAL)."""
    global SCALE

    def fn(x):
        globals()["SCALE"] = 3.0
        return x * SCALE

    try:
        torch.testing.assert_close(pyframe.optimize(CountingBackend())(fn)(torch.ones(2)), torch.full((2,), 3.0))
        SCALE = 2.0
        torch.testing.assert_close(pyframe.optimize(CountingBackend())(fn)(torch.ones(2)), torch.full((2,), 3.0))
    finally:
        SCALE = 2.0


def test_a_break_before_vars_runs_the_frame_as_python() -> None:
    """A resume function is a frame of its own (`___stack0`, only the live locals): vars() or
    locals() after a graph break would see its variables, so the whole frame runs as Python.
    (torch._dynamo 2.13 resumes here and returns the resume function's names.)"""
    def fn(x):
        a = x + 1
        print("", end="")  # a graph break
        names = sorted(vars())
        return a * len(names), names, "zz" in globals()

    x = torch.randn(3)
    got = pyframe.optimize(CountingBackend())(fn)(x)
    expected = fn(x)
    torch.testing.assert_close(got[0], expected[0])
    assert got[1:] == expected[1:] == (["a", "x"], False)

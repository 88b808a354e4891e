"""A battery of hostile programs: state that changes between calls of a compiled function, where a
guard that is missing or wrong, or a value cached across calls, would give another result than
eager's (issue 37, "what comes next").

Each probe is a function and a list of calls; before each call a `setup` changes the world (a hook
registered or removed, a parametrization, grad mode, the default dtype, a global, a closure cell, a
function's defaults or code, a class patched, an instance attribute shadowing a method, a dict
reordered, an enum switched), then the compiled function's result must equal eager's on the same
state (the state is set again before each engine runs). Results are compared with
`assert_same_result` (tensors with assert_close, everything else by type and value); an exception
eager raises must be raised alike.
"""
from __future__ import annotations

import enum
import random
import threading
import warnings
from typing import Any, Callable

import pytest
import torch
import torch.nn.utils.parametrize as parametrize
from torch import nn

import pyframe
from pyframe.debug.compare import assert_same_result

_nothing = lambda: None  # noqa: E731


def _outcome(fn: Callable, args: tuple) -> tuple:
    torch.manual_seed(1)
    random.seed(1)
    try:
        return "returned", fn(*args)
    except Exception as e:  # noqa: BLE001 (compared with the other engine's)
        return "raised", type(e), str(e)


def _check(fn: Callable, calls: list[tuple[Callable[[], Any], Callable[[], tuple]]]) -> None:
    compiled = pyframe.optimize("eager")(fn)
    for i, (setup, make_args) in enumerate(calls):
        setup()
        expected = _outcome(fn, make_args())
        setup()
        actual = _outcome(compiled, make_args())
        assert actual[0] == expected[0], f"call {i}: {actual} vs eager's {expected}"
        if expected[0] == "returned":
            assert_same_result(actual[1], expected[1], f"call {i}")
        else:
            assert actual[1:] == expected[1:], f"call {i}"


def _ones():
    return (torch.ones(2, 3),)


# -- hooks and parametrizations added and removed after compiling --------------------------------
def test_forward_hooks_and_pre_hooks_added_and_removed_after_compiling():
    model = nn.Linear(3, 3)
    handles = []

    def clear():
        while handles:
            handles.pop().remove()

    def hook():
        clear()
        handles.append(model.register_forward_hook(lambda m, i, o: o * 10))

    def pre_hook():
        clear()
        handles.append(model.register_forward_pre_hook(lambda m, i: (i[0] * 0,)))

    _check(lambda x: model(x) + 1, [(clear, _ones), (hook, _ones), (pre_hook, _ones), (clear, _ones)])


def test_a_parametrization_registered_and_removed_after_compiling():
    class Symmetric(nn.Module):
        def forward(self, w):
            return w.triu() + w.triu(1).T

    model = nn.Linear(3, 3)

    def add():
        if not parametrize.is_parametrized(model):
            parametrize.register_parametrization(model, "weight", Symmetric())

    def remove():
        if parametrize.is_parametrized(model):
            parametrize.remove_parametrizations(model, "weight")

    _check(lambda x: model(x), [(remove, _ones), (add, _ones), (remove, _ones)])


# -- global state of torch between calls ---------------------------------------------------------
def test_grad_mode_and_default_dtype_changed_between_calls():
    try:
        _check(lambda x: ((x * 2).requires_grad, x.is_leaf),
               [(lambda: torch.set_grad_enabled(g), lambda: (torch.ones(2, requires_grad=True),))
                for g in (True, False, True)])
        _check(lambda x: (torch.ones(2) + x, torch.tensor([1.5]).dtype, torch.zeros(1).dtype),
               [(lambda: torch.set_default_dtype(d), lambda: (1.0,)) for d in (torch.float32, torch.float64, torch.float32)])
    finally:
        torch.set_grad_enabled(True)
        torch.set_default_dtype(torch.float32)


def test_channels_last_and_zero_size_tensors_under_automatic_dynamic_shapes():
    def layout(x):
        return (x * 2).is_contiguous(memory_format=torch.channels_last), x.sum(dim=(2, 3)), x.numel()

    shapes = [(2, 3, 4, 4, False), (2, 3, 5, 5, True), (2, 3, 6, 6, False), (0, 3, 6, 6, False), (2, 3, 7, 7, True)]
    _check(layout, [(_nothing, lambda s=s: (torch.randn(*s[:4]).to(
        memory_format=torch.channels_last if s[4] else torch.contiguous_format),)) for s in shapes])

    def mean_or_sum(x):
        return x.numel(), x.mean(0) if x.shape[0] else x.sum(0)

    _check(mean_or_sum, [(_nothing, lambda n=n: (torch.randn(n, 2),)) for n in (3, 4, 0, 1, 5)])


def test_inputs_that_alias_each_other():
    def fn(a, b):
        a.add_(1)
        return b * 2

    def shared():
        t = torch.zeros(4)
        return t, t

    def overlapping():
        t = torch.zeros(4)
        return t[:2], t[1:3]

    _check(fn, [(_nothing, lambda: (torch.zeros(4), torch.zeros(4))), (_nothing, shared), (_nothing, overlapping),
                (_nothing, lambda: (torch.zeros(4), torch.zeros(4)))])


# -- Python state between calls --------------------------------------------------------------------
SCALE = 2
TABLE = {"scale": 2}


def _scaled(x):
    return x * SCALE + TABLE["scale"]


def test_globals_closure_cells_defaults_and_code_changed_between_calls():
    def set_globals(v):
        def setup():
            global SCALE
            SCALE = v
            TABLE["scale"] = v + 1
        return setup

    _check(_scaled, [(set_globals(v), _ones) for v in (2, 3, 2)])

    def make():
        k = 1

        def f(x):
            return x * k

        def set_k(v):
            nonlocal k
            k = v
        return f, set_k

    f, set_k = make()
    _check(f, [(lambda v=v: set_k(v), _ones) for v in (1, 5, 1)])

    def with_default(x, k=2):
        return x * k

    _check(with_default, [(lambda d=d: setattr(with_default, "__defaults__", (d,)), _ones) for d in (2, 7, 2)])

    def plus(x):
        return x + 1

    def minus(x):
        return x - 1

    original = plus.__code__
    _check(lambda x: plus(x), [(lambda c=c: setattr(plus, "__code__", c), _ones)
                               for c in (original, minus.__code__, original)])


class _Patched:
    factor = 2

    def apply(self, x):
        return x * self.factor


def test_classes_patched_and_methods_shadowed_between_calls():
    obj = _Patched()
    original = _Patched.apply

    def patch(factor, method):
        def setup():
            _Patched.factor = factor
            _Patched.apply = method
            obj.__dict__.pop("apply", None)
        return setup

    def shadow():
        obj.apply = lambda x: x * 100

    try:
        _check(lambda x: obj.apply(x), [(patch(2, original), _ones), (patch(3, original), _ones),
                                        (patch(3, lambda self, x: x - self.factor), _ones), (shadow, _ones),
                                        (patch(2, original), _ones)])
    finally:
        _Patched.factor, _Patched.apply = 2, original
        obj.__dict__.pop("apply", None)


class _Mode(enum.Enum):
    A = 1
    B = 2


def test_dicts_reordered_and_enum_members_switched():
    table = {"a": 1, "b": 2}

    def refill(items):
        def setup():
            table.clear()
            table.update(items)
        return setup

    _check(lambda x: (x * sum(table.values()) + len(table), list(table)),
           [(refill(items), _ones) for items in ({"a": 1, "b": 2}, {"b": 2, "a": 1}, {"a": 5})])
    current = {"mode": _Mode.A}
    _check(lambda x: x * (1 if current["mode"] is _Mode.A else 2),
           [(lambda m=m: current.update(mode=m), _ones) for m in (_Mode.A, _Mode.B, _Mode.A)])


def test_numbers_whose_equality_is_not_identity():
    """NaN (never equal to itself), -0.0 (equal to 0.0, printed apart), True (equal to 1), 2.5
    after ints: each call gives eager's result, whatever the guards compared."""
    def fn(x, v):
        return x * (0.5 if v != v else v), str(v), type(v).__name__, v != v, repr(v * 0.0)

    _check(fn, [(_nothing, lambda v=v: (torch.ones(2), v))
                for v in (2, 3, 2.5, True, 0.0, -0.0, float("nan"), float("nan"))])


# -- exceptions, warnings, random state ------------------------------------------------------------
def test_exception_chaining_warnings_and_random_state():
    def chained(x):
        try:
            try:
                raise ValueError("inner")
            except ValueError as e:
                raise KeyError("outer") from e
        except KeyError as k:
            return x + 1, type(k.__cause__).__name__, type(k.__context__).__name__, k.__suppress_context__

    def implicit(x):
        try:
            try:
                1 / 0
            except ZeroDivisionError:
                raise RuntimeError("during")
        except RuntimeError as r:
            return x * 2, type(r.__context__).__name__, r.__cause__ is None

    def warned(x):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            warnings.warn("careful", UserWarning)
            y = x + 1
        return y, len(caught), str(caught[0].message)

    def randoms(x):
        return x + random.random() + torch.rand(2), random.randint(0, 100), torch.randn(1)

    for fn in (chained, implicit, warned, randoms):
        _check(fn, [(_nothing, lambda: (torch.ones(2),))] * 2)


# -- tensor subclasses and threads -----------------------------------------------------------------
class _Marked(torch.Tensor):
    def twice(self):
        return self * 2


def test_tensor_subclass_results_keep_the_subclass():
    def fn(x):
        y = x * 2
        return y.twice(), type(y).__name__, isinstance(y + 1, _Marked), type(torch.relu(x)).__name__

    _check(fn, [(_nothing, lambda: (torch.ones(2).as_subclass(_Marked),))] * 2)


def test_threads_calling_one_compiled_function_with_their_own_shapes():
    def fn(x):
        return x.sin() * 2 + x.shape[0]

    compiled = pyframe.optimize("eager")(fn)
    errors = []

    def worker(n):
        try:
            for i in range(40):
                t = torch.randn(n + i % 3)
                torch.testing.assert_close(compiled(t), fn(t))
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(n,)) for n in (2, 5, 9)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


@pytest.mark.parametrize("value", [1, 2])
def test_a_call_that_raises_raises_as_in_eager(value):
    def fn(x, d):
        return x * d["missing"] if value == 1 else x / d["k"].nonexistent

    _check(fn, [(_nothing, lambda: (torch.ones(2), {"k": 1}))] * 2)

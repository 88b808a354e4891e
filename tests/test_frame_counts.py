"""Frame and graph counts against torch._dynamo: how many graphs (CompileCounter's `frame_count`)
and ops (`op_count`) one program compiles into, over calls that may recompile, as PyTorch's own
test/dynamo tests count them. Each program runs eagerly, under pyframe and under torch._dynamo with
the same counting backend on the same inputs; results must be eager's, counts torch._dynamo's.

The classes of programs:

- a method bound to an object the frame made (`K().m(x)` breaking inside `m`, `f = K().m` live
  across a break, returned): torch._dynamo cannot rebuild it, so it runs that frame as Python and
  compiles the method's own frame when Python calls it (a tensor's Python methods, `y.backward`,
  it rebuilds).
"""
from __future__ import annotations

import types
from typing import Any, Callable

import pytest
import torch
import torch._dynamo

import pyframe
from pyframe.debug.compare import CountingBackend, assert_same_result, reset_engines

gb = torch._dynamo.graph_break


def run(engine: str, fn: Callable, calls: list[Callable[[], tuple]]) -> tuple[list[Any], CountingBackend]:
    reset_engines()
    backend = CountingBackend()
    compiled = {"eager": lambda f: f, "pyframe": pyframe.optimize(backend),
                "dynamo": torch._dynamo.optimize(backend)}[engine](fn)
    torch.manual_seed(0)
    return [compiled(*make()) for make in calls], backend


def assert_counts_as_dynamo(fn: Callable, *calls: Callable[[], tuple]) -> None:
    """fn over `calls` (each makes one call's arguments): eager's results, torch._dynamo's graphs."""
    expected, _ = run("eager", fn, list(calls))
    ours, mine = run("pyframe", fn, list(calls))
    theirs, dynamo = run("dynamo", fn, list(calls))
    for got in (ours, theirs):
        for actual, wanted in zip(got, expected):
            assert_same_result(_methods_called(actual), _methods_called(wanted))
    assert [g.ops for g in mine.graphs] == [g.ops for g in dynamo.graphs]
    reset_engines()


def _methods_called(value: Any) -> Any:
    """A result with each bound method in it replaced by what it returns (two runs hand back
    methods of two objects, equal in what they do)."""
    if isinstance(value, types.MethodType):
        return value()
    if isinstance(value, tuple):
        return tuple(_methods_called(v) for v in value)
    return value


def t(*sizes: int) -> torch.Tensor:
    return torch.randn(*sizes)


# -- methods of objects made in the frame --------------------------------------------------------

class Stepper:
    def step(self, x):
        x = x + 1
        gb()
        return x * 2


class Counted:
    def __init__(self):
        self.n = 0

    def bump(self, x):
        self.n += 1
        gb()
        return x + self.n


class BreakingModule(torch.nn.Module):
    def forward(self, x):
        x = x + 1
        gb()
        return x * 2


class Plain:
    def __init__(self, v):
        self.v = v

    def get(self):
        return self.v


STEPPER = Stepper()


def method_of_new_object_breaks(x):
    return Stepper().step(x).sin()


def method_of_global_object_breaks(x):
    return STEPPER.step(x).sin()


def method_read_with_getattr_breaks(x):
    method = getattr(Stepper(), "step")
    return method(x).cos()


def mutating_method_of_new_object_breaks(x):
    return Counted().bump(x) * 2


def forward_of_new_module_breaks(x):
    return BreakingModule().forward(x).sin()


def new_module_called_breaks(x):
    return BreakingModule()(x).sin()


def method_live_across_break(x):
    method = Plain(x).get
    x = x + 1
    gb()
    return method() * x


def method_in_list_live_across_break(x):
    methods = [Stepper().step]
    x = x + 1
    gb()
    return x * 2, len(methods)


def method_returned(x):
    return x + 1, Plain(3).get


def class_made_in_frame_method_breaks(x):
    class Local:
        def f(self, y):
            y = y + 1
            gb()
            return y * 2
    return Local().f(x).sin()


def helper_calling_new_method(x):
    return Stepper().step(x) + 1


def new_method_breaks_one_call_deeper(x):
    return helper_calling_new_method(x * 2).cos()


def new_object_itself_live_across_break(x):
    obj = Plain(x + 1)
    x = x * 2
    gb()
    return obj.v + x


@pytest.mark.parametrize("fn", [
    method_of_new_object_breaks, method_of_global_object_breaks, method_read_with_getattr_breaks,
    mutating_method_of_new_object_breaks, forward_of_new_module_breaks, new_module_called_breaks,
    method_live_across_break, method_in_list_live_across_break, method_returned,
    class_made_in_frame_method_breaks, new_method_breaks_one_call_deeper, new_object_itself_live_across_break,
], ids=lambda fn: fn.__name__)
def test_methods_of_objects_made_in_the_frame_count_as_dynamo(fn):
    assert_counts_as_dynamo(fn, lambda: (t(4),))


def test_a_frame_handing_back_a_method_of_its_own_object_runs_as_python_by_rule():
    backend = CountingBackend()
    opt = pyframe.optimize(backend)(method_live_across_break)
    x = t(4)
    torch.testing.assert_close(opt(x), method_live_across_break(x))
    records = pyframe.convert_frame.records_for(method_live_across_break.__code__)
    assert [r.status for r in records] == ["skipped_by_rule"]
    assert "made in the frame" in records[0].reason
    assert backend.graphs == []
    pyframe.reset()


def python_method_of_a_tensor_the_graph_made_breaks(x, w):
    (x * w).sum().backward()
    return w.grad * 2


def test_a_python_method_of_a_tensor_the_graph_made_is_rebuilt_as_in_dynamo():
    assert_counts_as_dynamo(python_method_of_a_tensor_the_graph_made_breaks,
                            lambda: (t(5), torch.ones(5, requires_grad=True)))

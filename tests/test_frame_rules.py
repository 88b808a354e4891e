"""Frames run as Python, or broken, by the rules torch._dynamo follows, so that the graphs and
breaks are its own: a graph break inside a loop skips the frame (translate.py, analysis.may_loop_back),
a frame with no tensor-related object is never compiled (convert_frame.has_tensor_in_frame), a class
statement is one break (LOAD_BUILD_CLASS), `assert <tensor>` is checked in the graph."""
from __future__ import annotations

import pytest
import torch

import pyframe
from pyframe.debug.compare import CountingBackend, count_breaks, fallbacks_of


def _loop_with_a_break(x):
    for i in range(3):
        x = _scaled(x) + i
        if x.sum() > 0:
            x = x * 0.5
    return x


def _scaled(x):
    return x * 2 - 1


def test_a_break_inside_a_loop_runs_the_frame_as_python_and_compiles_its_callees():
    """As torch._dynamo ('graph break in loop'): no graph for the frame of the loop, which is not
    a fallback (a rule, not a gap); the function it calls is compiled once, as a frame of its own."""
    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(_loop_with_a_break)
    for _ in range(2):
        x = torch.randn(4)
        torch.testing.assert_close(compiled(x), _loop_with_a_break(x))
    assert [g.ops for g in backend.graphs] == [("mul", "sub")]
    [record] = pyframe.convert_frame.records_for(_loop_with_a_break.__code__)
    assert record.status == "skipped_by_rule" and "graph break in a loop" in record.reason
    assert fallbacks_of("pyframe") == [] and count_breaks("pyframe") == 0


def test_assert_on_a_tensor_is_checked_in_the_graph_and_fails_as_eager_does():
    """`assert <tensor>` becomes torch._assert_async in the graph (torch._dynamo's rewrite); when
    it fails the frame runs again as Python, which raises eager's AssertionError. (The function
    sits in the corpus: pytest rewrites the asserts of test modules.)"""
    from tests.cases.graph_breaks import asserts_with_and_without_message as _positive_or_fail
    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(_positive_or_fail)
    torch.testing.assert_close(compiled(torch.ones(3), 2.0), torch.full((3,), 2.0))
    assert [g.ops for g in backend.graphs] == [("gt", "all", "_assert_async", "lt", "all", "_assert_async", "mul")]
    with pytest.raises(AssertionError, match="below 100"):
        compiled(torch.full((3,), 200.0), 2.0)
    assert len(backend.graphs) == 1


def _class_statement_in_the_frame(x):
    y = x * 2

    class Pair(tuple):
        def total(self):
            return self[0] + self[1]

    return Pair((y, x + 1)).total()


def test_a_class_statement_in_the_frame_is_one_graph_break():
    """LOAD_BUILD_CLASS is read as torch._dynamo reads it (the builtin __build_class__); the call
    to it is the statement's one break: the graph before it, and the resume function's after."""
    backend = CountingBackend()
    x = torch.randn(4)
    torch.testing.assert_close(pyframe.optimize(backend)(_class_statement_in_the_frame)(x),
                               _class_statement_in_the_frame(x))
    assert [g.ops for g in backend.graphs] == [("mul",), ("add", "add")]
    assert count_breaks("pyframe") == 1
    [record] = pyframe.convert_frame.records_for(_class_statement_in_the_frame.__code__)
    assert "__build_class__" in record.error.reason


def _plain_numbers(a, b):
    return a * b + 1


def _loop_then_helpers(x):
    for _ in range(2):
        print("pyframe test: a break in a loop")
    n = _plain_numbers(2, 3)
    return _plain_numbers(x, n)


def test_a_frame_without_tensors_runs_as_python_from_then_on():
    """torch._dynamo's rule: a frame with no tensor, module or torch global in sight is not compiled,
    and its code is not compiled later either, though it then gets a tensor (here the helper, called
    from a frame run as Python: first with ints, then with a tensor)."""
    backend = CountingBackend()
    x = torch.randn(3)
    torch.testing.assert_close(pyframe.optimize(backend)(_loop_then_helpers)(x), _loop_then_helpers(x))
    assert backend.graphs == []
    [record] = pyframe.convert_frame.records_for(_plain_numbers.__code__)
    assert record.status == "skipped_by_rule" and "no tensor" in record.reason
    assert fallbacks_of("pyframe") == [] and count_breaks("pyframe") == 0


def test_the_function_given_to_optimize_compiles_without_tensors():
    """As torch._dynamo's always_optimize_code_objects: the frame of the function optimized is
    translated whatever its arguments (here it makes a tensor of a number)."""
    def make(n):
        return torch.ones(n) * 2

    def numbers(n):
        return n + 1

    backend = CountingBackend()
    torch.testing.assert_close(pyframe.optimize(backend)(make)(3), torch.full((3,), 2.0))
    assert [g.ops for g in backend.graphs] == [("ones", "mul")]
    assert pyframe.optimize(backend)(numbers)(3) == 4
    assert [r.status for r in pyframe.convert_frame.records_for(numbers.__code__)] == ["compiled"]


def test_tensors_inside_containers_and_named_tuples_count_but_not_inside_other_objects():
    from pyframe.convert_frame import has_tensor_in_frame
    import collections
    t = torch.ones(1)
    Point = collections.namedtuple("Point", "a b")
    code = _plain_numbers.__code__
    for value in ([1, (2, {"k": t})], Point(1, t), torch.nn.ReLU(), torch.nn.Linear):
        assert has_tensor_in_frame(code, {"a": value}, {}, None)
    for value in (t.max(0), {t: 1}, type("Box", (), {"t": t})(), "text", 3.0):
        assert not has_tensor_in_frame(code, {"a": value}, {}, None)
    assert has_tensor_in_frame(code, {}, {}, (_cell(t),))
    assert has_tensor_in_frame(compile("torch.ones(1)", "<probe>", "eval"), {}, {"torch": torch}, None)


def _cell(value):
    return (lambda: value).__closure__[0]

"""Exceptions raised and caught inside the traced code: one graph, as torch._dynamo 2.13 captures
them; an exception that leaves the frame reaches the caller exactly as it does eagerly."""
from __future__ import annotations

import sys

import pytest
import torch
import torch._dynamo

import pyframe
from pyframe.debug.compare import CountingBackend


class ShapeError(ValueError):
    pass


def check_positive(n):
    if n <= 0:
        raise ShapeError("need a positive size", n)
    return n


def caught_in_the_frame(x):
    try:
        raise ValueError("bad value")
    except ValueError as e:
        y = x * len(str(e))
    return y


def raised_in_a_callee(x):
    try:
        check_positive(-1)
    except ShapeError as e:
        return x - e.args[1]
    return x


def missing_key_and_exhausted_iterator(x):
    table = {"a": x + 1}
    try:
        y = table["b"]
    except KeyError:
        y = table["a"] * 2
    it = iter([y])
    next(it)
    try:
        next(it)
    except StopIteration:
        y = y + 1
    return y


def tuple_of_kinds_and_finally(x):
    log = []
    try:
        try:
            raise KeyError("k")
        finally:
            log.append(1)
    except (IndexError, KeyError):
        log.append(2)
    return x * len(log)


def reraised_then_caught(x):
    def inner(t):
        try:
            raise ShapeError("inner")
        except ShapeError:
            t = t + 1
            raise
    try:
        inner(x)
    except ValueError:
        return x * 3
    return x


CAUGHT = [caught_in_the_frame, raised_in_a_callee, missing_key_and_exhausted_iterator,
          tuple_of_kinds_and_finally, reraised_then_caught]


@pytest.mark.parametrize("fn", CAUGHT, ids=lambda f: f.__name__)
def test_caught_exception_stays_in_one_graph(fn):
    x = torch.randn(4)
    backend = CountingBackend()
    torch.testing.assert_close(pyframe.optimize(backend)(fn)(x), fn(x))
    reference = CountingBackend()
    torch._dynamo.reset()
    torch._dynamo.optimize(reference)(fn)(x)
    assert [g.ops for g in backend.graphs] == [g.ops for g in reference.graphs]
    assert len(backend.graphs) == 1


def leaves_the_frame(x):
    y = x * 2
    check_positive(x.dim() - 1)  # raises ShapeError for a 1-d x
    return y


def test_exception_leaving_the_frame_is_raised_for_real():
    """The frame breaks at the call that raises: the graph before it runs, then the call runs for
    real and its exception reaches the caller; a later call with other inputs traces on."""
    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(leaves_the_frame)
    with pytest.raises(ShapeError, match="need a positive size"):
        compiled(torch.randn(4))
    assert [g.ops for g in backend.graphs] == [("mul",)]
    entry = pyframe.debug.cache_entries(compiled)[0]
    assert "ShapeError raised while tracing and not caught" in entry.break_reason
    x = torch.randn(2, 3)
    torch.testing.assert_close(compiled(x), leaves_the_frame(x))


def _reads_exc_info(x):
    handled = sys.exc_info()[1]
    return x * 2 if handled is None else x * 3


def test_sys_exc_info_is_traced_and_guarded_on_the_exception_being_handled():
    """sys.exc_info() with no exception handled is (None, None, None) in the trace; called from
    inside an except block of the caller, the guard fails and the frame compiles again (a graph
    break there): both results are eager's."""
    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(_reads_exc_info)
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), x * 2)
    assert [g.ops for g in backend.graphs] == [("mul",)]
    try:
        raise ValueError("being handled")
    except ValueError:
        torch.testing.assert_close(compiled(x), x * 3)
    torch.testing.assert_close(compiled(x), x * 2)
    texts = pyframe.convert_frame.records_for(_reads_exc_info.__code__)[0].guards
    assert "(sys.exc_info()[1] is not None) == False" in texts


def _blocks(mask):
    return mask.reshape(mask.shape[0], -1, 2).sum(-1)


def _mask_only_when_not_compiling(x, mask=None):
    if mask is None and not torch.compiler.is_compiling():
        mask = torch.ones_like(x)
    return x * 2 + _blocks(mask).sum()  # None on the compiled path: `None.shape` raises there


def test_exception_on_the_compiled_path_runs_the_frame_as_python():
    """The trace answered is_compiling() True and took a path eager does not take (the mask left
    None), then raised: the frame runs as Python, as torch._dynamo runs it (eager's mask), by rule
    for good; the helper's frame it calls compiles alone, as under torch._dynamo."""
    x = torch.randn(2, 4)
    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(_mask_only_when_not_compiling)
    torch.testing.assert_close(compiled(x), _mask_only_when_not_compiling(x))
    reference = CountingBackend()
    torch._dynamo.reset()
    torch._dynamo.optimize(reference)(_mask_only_when_not_compiling)(x)
    assert [g.ops for g in backend.graphs] == [g.ops for g in reference.graphs] == [("reshape", "sum")]
    record = pyframe.convert_frame.records_for(_mask_only_when_not_compiling.__code__)[0]
    assert record.status == "skipped_by_rule", record
    assert "AttributeError raised while tracing on the path is_compiling() chose" in record.reason
    torch.testing.assert_close(compiled(x), _mask_only_when_not_compiling(x))
    assert len(backend.graphs) == 1


def _none_attribute_caught(x, config=None):
    try:
        scale = config.scale
    except AttributeError as e:
        scale = len(str(e))
    return x * scale


def test_attribute_of_none_raises_attribute_error_in_the_trace():
    """`None.scale` raises AttributeError as in Python, with Python's message: an except clause
    in the frame catches it (one graph, torch._dynamo's), no graph break."""
    x = torch.randn(3)
    backend = CountingBackend()
    torch.testing.assert_close(pyframe.optimize(backend)(_none_attribute_caught)(x), _none_attribute_caught(x))
    assert [g.ops for g in backend.graphs] == [("mul",)]
    record = pyframe.convert_frame.records_for(_none_attribute_caught.__code__)[0]
    assert record.status == "compiled" and record.error is None

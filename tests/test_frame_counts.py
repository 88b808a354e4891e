"""Frame and graph counts against torch._dynamo: how many graphs (CompileCounter's `frame_count`)
and ops (`op_count`) one program compiles into, over calls that may recompile, as PyTorch's own
test/dynamo tests count them. Each program runs eagerly, under pyframe and under torch._dynamo with
the same counting backend on the same inputs; results must be eager's, counts torch._dynamo's.

The classes of programs:

- a method bound to an object the frame made (`K().m(x)` breaking inside `m`, `f = K().m` live
  across a break, returned): torch._dynamo cannot rebuild it, so it runs that frame as Python and
  compiles the method's own frame when Python calls it (a tensor's Python methods, `y.backward`,
  it rebuilds);
- an int read from the frame's arguments other than as an argument itself (`obj.n`, `sizes[0]`,
  `d["n"]`, a closure's cell) that changes between calls: a SymInt input from the second compile
  on (automatic dynamic), so a third value compiles nothing; an nn.Module's ints, globals and
  defaults stay static;
- an int, float, bool or string read from the frame and only passed through (returned as it is,
  handed on across a break, to an inlined call): never guarded (torch._dynamo's lazy constants), so
  another value compiles nothing; one used (in arithmetic, a branch, isinstance, stored as an
  attribute, or in a container that is rebuilt whole as a constant) is guarded by its value;
- a graph whose only calls are size arithmetic nothing uses: compiled empty, as torch._dynamo
  counts calls before its dead-code pass;
- a frame traced to its return without a single call: run as Python from then on (but the
  function given to optimize(), which pyframe compiles whatever it traces);
- a break inside a `contextlib.nullcontext()` block: resumed inside a new one; inside a with
  block that a try statement encloses: the frame runs as Python.
"""
from __future__ import annotations

import contextlib
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


def t(*sizes: int, **kwargs: Any) -> torch.Tensor:
    return torch.randn(*sizes, **kwargs)


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


# -- automatic dynamic ints read through the frame's arguments -----------------------------------

class Holder:
    def __init__(self, n):
        self.n = n


class Scaled(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.n = n

    def forward(self, x):
        return x * self.n


def make_scale(k):
    def scale(x):
        return x * k
    return scale


SCALES = [make_scale(1), make_scale(2), make_scale(3)]
MODULES = [Scaled(1), Scaled(2), Scaled(3)]
GLOBAL_N = [1]


def attribute_int(x, h):
    return x + h.n


def list_ints(x, sizes):
    return x + sizes[0] + sizes[1]


def tuple_int(x, pair):
    return x * pair[0]


def dict_int(x, d):
    return x * d["n"]


def closure_int(x, fn):
    return fn(x) + 1


def module_int(x, m):
    return m(x)


def attribute_int_mutated(x, h):
    h.n += 1
    return x * h.n


def attribute_int_across_break(x, h):
    y = x * h.n
    gb()
    return y + h.n


def list_ints_as_shape(x, shape):
    return x.view(shape[0], shape[1]) + 1


def dict_int_as_range(x, d):
    for _ in range(d["n"]):
        x = x + 1
    return x


def attribute_int_compared(x, h):
    if h.n > 2:
        return x + 1
    return x - 1


def global_int(x):
    return x * GLOBAL_N[0]


def set_global(n):
    GLOBAL_N[0] = n
    return (t(4),)


@pytest.mark.parametrize("fn, calls", [
    (attribute_int, [lambda n=n: (t(4), Holder(n)) for n in (1, 2, 3)]),
    (list_ints, [lambda n=n: (t(4), [n, n + 1]) for n in (1, 3, 5)]),
    (tuple_int, [lambda n=n: (t(4), (n, n + 1)) for n in (1, 3, 5)]),
    (dict_int, [lambda n=n: (t(4), {"n": n}) for n in (1, 2, 3)]),
    (closure_int, [lambda f=f: (t(4), f) for f in SCALES]),
    (module_int, [lambda m=m: (t(4), m) for m in MODULES]),
    (attribute_int_mutated, [lambda n=n: (t(4), Holder(n)) for n in (2, 3, 4)]),
    (attribute_int_across_break, [lambda n=n: (t(4), Holder(n)) for n in (2, 3, 4)]),
    (list_ints_as_shape, [lambda a=a, b=b: (t(a * b), [a, b]) for a, b in ((2, 3), (3, 4), (4, 5))]),
    (dict_int_as_range, [lambda n=n: (t(4), {"n": n}) for n in (2, 3, 4)]),
    (attribute_int_compared, [lambda n=n: (t(4), Holder(n)) for n in (2, 3, 4)]),
    (global_int, [lambda n=n: set_global(n) for n in (1, 2, 3)]),
], ids=lambda v: v.__name__ if callable(v) else "")
def test_ints_read_through_arguments_become_dynamic_as_in_dynamo(fn, calls):
    assert_counts_as_dynamo(fn, *calls)


def python_method_of_a_tensor_the_graph_made_breaks(x, w):
    (x * w).sum().backward()
    return w.grad * 2


def test_a_python_method_of_a_tensor_the_graph_made_is_rebuilt_as_in_dynamo():
    assert_counts_as_dynamo(python_method_of_a_tensor_the_graph_made_breaks,
                            lambda: (t(5), torch.ones(5, requires_grad=True)))


# -- constants passed through unused ----------------------------------------------------------

def int_passed_through(x, n):
    return x + 1, n


def string_passed_through(x, s):
    return x + 1, s


def bool_and_float_passed_through(x, b, f):
    return x + 1, b, f


def int_in_a_tuple_argument_passed_through(x, pair):
    return x + 1, pair[0]


def int_handed_to_an_inlined_call(x, n):
    def g(a, b):
        return a + 1, b
    return g(x, n)


def int_passed_across_a_break(x, n):
    x = x + 1
    gb()
    return x * 2, n


def int_first_in_the_returned_tuple(x, n):
    return n, x + 1  # (the tuple asked whether it is a constant uses n, as in torch._dynamo)


def int_alone_in_a_list(x, n):
    return x + 1, [n]


def int_in_a_dict(x, n):
    return x + 1, {"n": n}


def int_stored_as_an_attribute(x, n):
    x.foo = n
    return x + 1


def int_in_isinstance(x, n):
    if isinstance(n, int):
        return x + 1, n
    return x


def int_used(x, n):
    return x * n, n


def string_used(x, s):
    return x + len(s)


def bytes_value_read_from_a_dict(x, table):
    return x + 1 if table.get(b"MODE", b"0") == b"1" else x - 1


def _bytes_tables(*modes):  # (os.environ's own table: bytes to bytes)
    return [lambda m=m, p=p: (t(4), {b"MODE": m, b"PATH": p}) for m, p in modes]


@pytest.mark.parametrize("fn, calls", [
    (int_passed_through, [lambda n=n: (t(4), n) for n in (2, 3, 4)]),
    (string_passed_through, [lambda s=s: (t(4), s) for s in "abc"]),
    (bool_and_float_passed_through, [lambda b=b, f=f: (t(4), b, f) for b, f in ((True, 1.5), (False, 2.5))]),
    (int_in_a_tuple_argument_passed_through, [lambda n=n: (t(4), (n, 1.0)) for n in (2, 3, 4)]),
    (int_handed_to_an_inlined_call, [lambda n=n: (t(4), n) for n in (2, 3, 4)]),
    (int_passed_across_a_break, [lambda n=n: (t(4), n) for n in (2, 3, 4)]),
    (int_first_in_the_returned_tuple, [lambda n=n: (t(4), n) for n in (2, 3, 4)]),
    (int_alone_in_a_list, [lambda n=n: (t(4), n) for n in (2, 3, 4)]),
    (int_in_a_dict, [lambda n=n: (t(4), n) for n in (2, 3, 4)]),
    (int_stored_as_an_attribute, [lambda n=n: (t(4), n) for n in (2, 3, 4)]),
    (int_in_isinstance, [lambda n=n: (t(4), n) for n in (2, 3, 4)]),
    (int_used, [lambda n=n: (t(4), n) for n in (2, 3, 4)]),
    (string_used, [lambda s=s: (t(4), s) for s in ("a", "bb", "ccc")]),
    # a dict's values other than the one read are not guarded: another PATH compiles nothing
    (bytes_value_read_from_a_dict, _bytes_tables((b"1", b"/a"), (b"1", b"/b"), (b"0", b"/c"), (b"0", b"/d"))),
], ids=lambda v: v.__name__ if callable(v) else "")
def test_constants_only_passed_through_are_not_guarded_as_in_dynamo(fn, calls):
    assert_counts_as_dynamo(fn, *calls)


def test_a_constant_passed_through_is_read_again_from_the_frame():
    backend = CountingBackend()
    opt = pyframe.optimize(backend)(int_passed_through)
    for n in (2, 3, "s", None):
        result = opt(torch.ones(2), n)
        assert result[1] is n
    assert len(backend.graphs) == 1  # a str and None after ints: the type is not guarded either
    pyframe.reset()


# -- graphs whose only calls are size arithmetic -------------------------------------------------

def branch_on_a_dynamic_int_then_break(x, n):
    if n == 0:
        gb()
        return x
    return x + n


def recursion_down_to_zero_with_a_break(x, n):
    if n == 0:
        gb()
        return x
    return recursion_down_to_zero_with_a_break(x + 1, n - 1) * 2


def test_a_graph_of_size_arithmetic_only_is_compiled_empty_as_in_dynamo():
    # n seen as 2 then 1 is a SymInt input; at n == 0 the comparison is the graph's one call,
    # which torch._dynamo counts before its dead-code pass: it compiles an empty graph
    assert_counts_as_dynamo(branch_on_a_dynamic_int_then_break, *[lambda n=n: (t(4), n) for n in (2, 1, 0)])
    assert_counts_as_dynamo(recursion_down_to_zero_with_a_break, lambda: (t(4), 2))


# -- frames that trace no op -----------------------------------------------------------------------

def ops_after_the_break_on_one_branch(x, flag):
    y = x + 1
    gb()
    if flag:  # (the resume function: no op when flag is False)
        return y * 2
    return y


def int_arithmetic_only_after_the_break(x, n):
    y = x + 1
    gb()
    m = n + 1
    return y


def helper_without_ops(x, flag):
    if flag:
        return x + 1
    return x


def calls_a_helper_left_to_python(x, flag):
    y = x * 2
    print("", end="")  # (a break before the call: the helper's frame is compiled on its own)
    return helper_without_ops(y, flag)


def ops_on_one_branch(x, flag):
    if flag:
        return x + 1
    return x


@pytest.mark.parametrize("fn, calls", [
    (ops_after_the_break_on_one_branch, [lambda f=f: (t(4), f) for f in (False, True, True)]),
    (ops_after_the_break_on_one_branch, [lambda f=f: (t(4), f) for f in (True, False, True)]),
    (int_arithmetic_only_after_the_break, [lambda n=n: (t(4), n) for n in (3, 4, 5)]),
    (ops_on_one_branch, [lambda f=f: (t(4), f) for f in (True, False, True)]),
], ids=lambda v: v.__name__ if callable(v) else "")
def test_a_frame_that_traces_no_op_runs_as_python_from_then_on_as_in_dynamo(fn, calls):
    assert_counts_as_dynamo(fn, *calls)


def test_a_frame_without_ops_is_skipped_by_rule_and_not_traced_again():
    backend = CountingBackend()
    opt = pyframe.optimize(backend)(calls_a_helper_left_to_python)
    x = t(4)
    torch.testing.assert_close(opt(x, False), x * 2)
    torch.testing.assert_close(opt(x, True), x * 2 + 1)  # the helper runs as Python: the code is skipped
    records = pyframe.convert_frame.records_for(helper_without_ops.__code__)
    assert [r.status for r in records] == ["skipped_by_rule"] and "no ops" in records[0].reason
    assert [g.ops for g in backend.graphs] == [("mul",)]
    pyframe.reset()


def test_the_function_given_to_optimize_keeps_its_entry_without_ops():
    # (unlike torch._dynamo, which skips it too: pyframe compiles the function it is given whatever
    # it traces, tests/test_frame_rules.py)
    opt = pyframe.optimize(CountingBackend())(ops_on_one_branch)
    x = t(4)
    assert opt(x, False) is x
    assert [r.status for r in pyframe.convert_frame.records_for(ops_on_one_branch.__code__)] == ["compiled"]
    pyframe.reset()


def test_fullgraph_still_compiles_a_frame_without_ops():
    opt = pyframe.optimize(CountingBackend(), fullgraph=True)(calls_a_helper_left_to_python)
    x = t(4)
    with pytest.raises(pyframe.exc.Unsupported):
        opt(x, False)
    opt = pyframe.optimize(CountingBackend(), fullgraph=True)(helper_without_ops)
    assert opt(x, False) is x
    assert [r.status for r in pyframe.convert_frame.records_for(helper_without_ops.__code__)] == ["compiled"]
    pyframe.reset()

# -- blocks a break may lie in --------------------------------------------------------------------

NULL_CONTEXT = contextlib.nullcontext()


def break_inside_a_nullcontext(x):
    with contextlib.nullcontext():
        x = x + 1
        gb()
        x = x * 2
    return x


def break_inside_a_nullcontext_from_the_frame(x):
    with NULL_CONTEXT:
        x = x + 1
        gb()
        x = x * 2
    return x.sin()


def break_inside_a_nullcontext_inside_no_grad(x):
    with torch.no_grad():
        with contextlib.nullcontext():
            y = x + 1
            gb()
            y = y * 2
    return y


def exception_after_a_break_inside_a_nullcontext(x):
    with contextlib.nullcontext():
        x = x + 1
        gb()
        if x.shape[0] == 4:
            raise ValueError("out of the block")
    return x


@pytest.mark.parametrize("fn", [
    break_inside_a_nullcontext, break_inside_a_nullcontext_from_the_frame, break_inside_a_nullcontext_inside_no_grad,
], ids=lambda fn: fn.__name__)
def test_a_break_inside_a_nullcontext_resumes_inside_a_new_one_as_in_dynamo(fn):
    assert_counts_as_dynamo(fn, lambda: (t(4, requires_grad=True),))


def test_an_exception_after_a_break_inside_a_nullcontext_leaves_it_as_python_does():
    opt = pyframe.optimize(CountingBackend())(exception_after_a_break_inside_a_nullcontext)
    with pytest.raises(ValueError, match="out of the block"):
        opt(t(4))
    pyframe.reset()


def break_in_no_grad_inside_try(x):
    try:
        with torch.no_grad():
            x = x + 1
            gb()
            x = x * 2
    except ValueError:
        pass
    return x


def raise_after_break_in_no_grad_inside_try(x):
    try:
        with torch.no_grad():
            x = x + 1
            gb()
            raise ValueError
    except ValueError:
        pass
    return x


def break_in_nullcontext_inside_try_finally(x):
    try:
        with contextlib.nullcontext():
            x = x + 1
            gb()
    finally:
        x = x * 2
    return x


def break_in_nested_no_grad_blocks(x):
    with torch.no_grad():
        with torch.enable_grad():
            y = x * 2
            gb()
            y = y + 1
    return y


@pytest.mark.parametrize("fn", [
    break_in_no_grad_inside_try, raise_after_break_in_no_grad_inside_try, break_in_nullcontext_inside_try_finally,
    break_in_nested_no_grad_blocks,
], ids=lambda fn: fn.__name__)
def test_a_break_in_a_with_block_inside_a_try_runs_the_frame_as_python_as_in_dynamo(fn):
    assert_counts_as_dynamo(fn, lambda: (t(4, requires_grad=True),))


def break_inside_an_except_block(x):
    try:
        raise ValueError
    except ValueError:
        x = x + 1
        gb()
    return x * 2


def break_inside_an_except_block_inside_no_grad(x):
    with torch.no_grad():
        try:
            raise ValueError
        except ValueError:
            x = x + 1
            gb()
    return x * 2


@pytest.mark.parametrize("fn", [break_inside_an_except_block, break_inside_an_except_block_inside_no_grad],
                         ids=lambda fn: fn.__name__)
def test_a_break_inside_an_except_block_runs_the_frame_as_python_as_in_dynamo(fn):
    assert_counts_as_dynamo(fn, lambda: (t(4),))

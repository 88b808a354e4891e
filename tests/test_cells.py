"""Closure cells: stores into cells the traced frame did not create, closures over an inlined call's
variables that escape the frame, and super().__init__() reaching object.

Each program is traced as torch._dynamo 2.13 traces it: one graph, no break (`fullgraph=True`
fails the test on any break); results and the cells' contents afterwards equal eager's.
"""
from __future__ import annotations

import pytest
import torch
import torch._dynamo

import pyframe
from pyframe.debug.compare import CountingBackend
from tests.cases.inlining import _Base, _Derived, _Explicit


def compile_full(fn):
    backend = CountingBackend()
    return pyframe.optimize(backend, fullgraph=True)(fn), backend


def cell_values(fn) -> list:
    return [cell.cell_contents for cell in fn.__closure__]


def assert_same(actual, expected) -> None:
    if isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_same(a, e)
    elif isinstance(expected, torch.Tensor):
        torch.testing.assert_close(actual, expected)
    else:
        assert actual == expected


# -- stores into cells the frame did not create ----------------------------------------------------

def make_remember():
    last = torch.zeros(3)

    def remember(a):
        nonlocal last
        old = last        # read before the store: the value the cell held on entry
        last = a + 1
        return last * 2, old

    return remember


def test_compiled_closure_assigns_its_own_cell():
    eager, traced = make_remember(), make_remember()
    compiled, backend = compile_full(traced)
    for i in range(3):
        x = torch.full((3,), float(i))
        assert_same(compiled(x), eager(x))
        assert_same(cell_values(traced), cell_values(eager))
    assert len(backend.graphs) == 1  # the cell's contents are a tensor of the same metadata


def test_a_value_read_from_the_cell_before_the_store_is_kept():
    def make():
        kept = torch.ones(2)

        def swap(x):
            nonlocal kept
            previous = kept   # not used by the graph: loaded by the transformed code
            kept = x
            return previous

        return swap

    eager, traced = make(), make()
    compiled, _ = compile_full(traced)
    x = torch.randn(2)
    assert_same(compiled(x), eager(x))
    assert traced.__closure__[0].cell_contents is x


def make_counter():
    count = 0

    def step(x):
        nonlocal count
        for _ in range(2):
            count += 1
        return x * count

    return step


def test_counter_closure_keeps_counting_over_calls():
    eager, traced = make_counter(), make_counter()
    compiled = pyframe.optimize(CountingBackend())(traced)
    x = torch.randn(3)
    for _ in range(3):  # the count read on entry is guarded: each call sees the previous one's
        assert_same(compiled(x), eager(x))
        assert cell_values(traced) == cell_values(eager)


def make_slot():
    value = None

    def put(v):
        nonlocal value
        value = v.sin()

    def get():
        return value

    return put, get


def test_functions_sharing_a_cell_see_each_others_stores():
    put, get = make_slot()

    def fn(x):
        put(x + 1)
        first = get() * 2
        put(first)
        return first + get()

    compiled, backend = compile_full(fn)
    x = torch.randn(4)
    out = compiled(x)
    expected_first = (x + 1).sin() * 2
    torch.testing.assert_close(out, expected_first + expected_first.sin())
    torch.testing.assert_close(get(), expected_first.sin())
    assert len(backend.graphs) == 1


PUT, GET = make_slot()


def put_then_get(x):
    PUT(x + 1)
    return GET() * 2


def test_a_cell_shared_by_two_functions_is_guarded_by_identity(monkeypatch):
    compiled = pyframe.optimize(CountingBackend())(put_then_get)
    x = torch.randn(4)
    torch.testing.assert_close(compiled(x), (x + 1).sin() * 2)
    other_put, other_get = make_slot()  # a getter of another cell: GET() no longer sees PUT's store
    other_put(torch.zeros(4))
    monkeypatch.setattr(__import__(__name__), "GET", other_get)
    torch.testing.assert_close(compiled(x), put_then_get(x))
    torch.testing.assert_close(compiled(x), torch.zeros(4))


def test_an_inlined_sibling_assigns_the_compiled_closures_cell():
    def make():
        best = None

        def update(v):
            nonlocal best
            best = v if best is None else torch.maximum(best, v)

        def step(x):
            nonlocal best
            best = None
            update(x)
            update(-x)
            return best * 2

        return step

    eager, traced = make(), make()
    compiled, _ = compile_full(traced)
    x = torch.randn(4)
    assert_same(compiled(x), eager(x))
    best_of = {fn: fn.__closure__[0].cell_contents for fn in (traced, eager)}
    torch.testing.assert_close(best_of[traced], best_of[eager])


def test_nested_inlined_functions_assign_each_others_cells():
    def make():
        total = None

        def outer(x):
            scale = 1.0

            def add(v):
                nonlocal total
                total = v * scale if total is None else total + v * scale

            def rescale(k):
                nonlocal scale
                scale = k
                add(x)

            add(x.sin())
            rescale(3.0)
            return total

        def run(x):
            nonlocal total
            total = None
            return outer(x) + total

        return run

    eager, traced = make(), make()
    compiled, _ = compile_full(traced)
    x = torch.randn(4)
    assert_same(compiled(x), eager(x))
    torch.testing.assert_close(traced.__closure__[1].cell_contents, eager.__closure__[1].cell_contents)


def test_cell_contents_read_and_written_through_closure():
    bump, peek = make_bumper(torch.zeros(4))

    def fn(x):
        cell = peek.__closure__[0]
        before = cell.cell_contents
        cell.cell_contents = before + x
        return before, peek() * 2, bump.__closure__[0].cell_contents

    compiled, backend = compile_full(fn)
    x = torch.randn(4)
    before, doubled, seen = compiled(x)
    torch.testing.assert_close(before, torch.zeros(4))
    torch.testing.assert_close(doubled, x * 2)
    torch.testing.assert_close(seen, x)
    torch.testing.assert_close(peek(), x)
    assert len(backend.graphs) == 1


def test_store_then_graph_break_the_resume_function_reads_the_new_value():
    def make():
        kept = None

        def fn(x):
            nonlocal kept
            kept = x.cos()
            if kept.sum() > 0:   # a break after the store
                kept = kept + 1
            return kept * 2

        return fn

    for sign in (1.0, -1.0):
        eager, traced = make(), make()
        x = torch.full((3,), sign * 0.1).acos()  # cos(x) = sign * 0.1
        compiled = pyframe.optimize(CountingBackend())(traced)
        assert_same(compiled(x), eager(x))
        torch.testing.assert_close(traced.__closure__[0].cell_contents, eager.__closure__[0].cell_contents)


def test_del_of_a_free_variable_breaks_cleanly():
    def make():
        gone = torch.ones(2)

        def fn(x):
            nonlocal gone
            y = x + gone
            del gone
            return y

        return fn

    eager, traced = make(), make()
    x = torch.randn(2)
    assert_same(pyframe.optimize(CountingBackend())(traced)(x), eager(x))
    with pytest.raises(ValueError):
        traced.__closure__[0].cell_contents


# -- closures over an inlined call's variables, escaping the frame ------------------------------------

def make_scaler(x):
    y = x + 1

    def scaled():
        return y * 2

    return scaled


def make_bumper(start):
    count = start

    def bump():
        nonlocal count
        count = count + 1
        return count

    def peek():
        return count

    return bump, peek


def test_a_returned_closure_gets_a_real_cell_with_the_traced_value():
    def fn(x):
        scaled = make_scaler(x)
        return scaled() + 1, scaled

    compiled, backend = compile_full(fn)
    x = torch.randn(4)
    out, scaled = compiled(x)
    torch.testing.assert_close(out, (x + 1) * 2 + 1)
    torch.testing.assert_close(scaled(), (x + 1) * 2)
    torch.testing.assert_close(scaled.__closure__[0].cell_contents, x + 1)
    assert len(backend.graphs) == 1


def test_closures_made_by_one_call_share_the_cell_made_for_them():
    def fn(x):
        bump, peek = make_bumper(x)
        bump()
        return bump, peek

    compiled, _ = compile_full(fn)
    x = torch.randn(4)
    bump, peek = compiled(x)
    assert bump.__closure__[0] is peek.__closure__[0]
    torch.testing.assert_close(peek(), x + 1)  # what the traced bump() stored
    bump()
    torch.testing.assert_close(peek(), x + 2)


def test_closures_stored_in_a_list_a_dict_and_an_attribute_are_one_function():
    class Box:
        pass

    def fn(x, fns, table, box):
        first = make_scaler(x)
        fns.append(first)
        table["first"] = first
        box.fn = first
        table["second"] = make_scaler(x * 2)
        return x.cos()

    fns, table, box = [], {}, Box()
    compiled, _ = compile_full(fn)
    x = torch.randn(4)
    torch.testing.assert_close(compiled(x, fns, table, box), x.cos())
    assert fns[0] is table["first"] is box.fn
    torch.testing.assert_close(box.fn(), (x + 1) * 2)
    torch.testing.assert_close(table["second"](), (x * 2 + 1) * 2)


def test_a_recursive_closure_refers_to_itself_through_its_cell():
    def make_power():
        def power(t, n):
            return t if n <= 1 else t * power(t, n - 1)
        return power

    def fn(x):
        power = make_power()
        return power(x, 3), power

    compiled, _ = compile_full(fn)
    x = torch.randn(4)
    out, power = compiled(x)
    torch.testing.assert_close(out, x * x * x)
    assert power.__closure__[0].cell_contents is power
    torch.testing.assert_close(power(x, 2), x * x)


def test_a_variable_never_bound_leaves_the_cell_empty():
    def make_reader():
        def read():
            return missing  # noqa: F821  (bound by nobody: NameError when called)
        if False:
            missing = 1  # noqa: F841
        return read

    def fn(x):
        return x + 1, make_reader()

    compiled, _ = compile_full(fn)
    out, read = compiled(torch.zeros(2))
    with pytest.raises(NameError):
        read()


def test_a_closure_two_levels_down_shares_the_outer_calls_cell():
    def make(x):
        a = x + 1

        def mid():
            def leaf():
                return a * 3
            return leaf

        return mid

    def fn(x):
        mid = make(x)
        return mid(), mid

    compiled, _ = compile_full(fn)
    x = torch.randn(4)
    leaf, mid = compiled(x)
    assert leaf.__closure__[0] is mid.__closure__[0]
    torch.testing.assert_close(leaf(), (x + 1) * 3)


def make_outer():
    shared = torch.ones(2)

    def outer():
        def inner():
            return shared * 2
        return inner

    return outer


OUTER = make_outer()


def test_a_closure_over_a_real_cell_of_an_inlined_function_keeps_that_cell():
    def fn(x):
        return x * 2, OUTER()  # `inner` closes over OUTER's own cell, made outside the trace

    compiled, _ = compile_full(fn)
    out, inner = compiled(torch.ones(2))
    assert inner.__closure__[0] is OUTER.__closure__[0]
    torch.testing.assert_close(inner(), torch.full((2,), 2.0))


def test_a_closure_over_an_inlined_calls_variable_is_live_across_a_break():
    def fn(x):
        scaled = make_scaler(x)
        torch._dynamo.graph_break()
        return scaled() + 1, scaled

    backend = CountingBackend()
    x = torch.randn(4)
    out, scaled = pyframe.optimize(backend)(fn)(x)
    torch.testing.assert_close(out, (x + 1) * 2 + 1)
    torch.testing.assert_close(scaled(), (x + 1) * 2)
    assert len(backend.graphs) == 2


# -- super().__init__() --------------------------------------------------------------------------

# (the corpus's classes: super().__init__() to object, through *args/**kwargs, and super(C, self))
Base, Derived, Explicit = _Base, _Derived, _Explicit


class Sized(Base):
    def __len__(self):
        return self.t.shape[0]


def test_super_init_reaching_object_is_a_no_op():
    def fn(x):
        a, b, c = Base(x), Derived(x * 2), Explicit(3.0)
        return a.t + b.t * b.k + c.v + len(Sized(x))

    compiled, backend = compile_full(fn)
    x = torch.randn(4)
    torch.testing.assert_close(compiled(x), fn(x))
    assert backend.graphs[0].ops == ("mul", "mul", "add", "add", "add")


def test_super_init_with_arguments_raises_as_python_does():
    class Strict:
        def __init__(self, v):
            super().__init__(v)

    def fn(x):
        return Strict(x)

    with pytest.raises(TypeError, match="object.__init__"):
        pyframe.optimize(CountingBackend())(fn)(torch.ones(1))


class Greeter:
    def scale(self, x):
        return x * 2


class LoudGreeter(Greeter):
    def scale(self, x):
        parent = super()
        print("greeting")  # a break: `parent` is rebuilt for the resume function, read back there
        return parent.scale(x) + 1


def test_a_super_object_live_across_a_break_is_rebuilt(capsys):
    obj = LoudGreeter()
    backend = CountingBackend()
    x = torch.randn(3)
    out = pyframe.optimize(backend)(obj.scale)(x)
    torch.testing.assert_close(out, x * 2 + 1)
    assert capsys.readouterr().out == "greeting\n"
    assert [g.ops for g in backend.graphs] == [("mul", "add")]


# -- a local copied from a cell of the frame keeps the value it had, across a graph break ---------
# (issue 19, item 1: the copy was rebuilt from the cell after the cell was given its new value)

def copy_then_rebind_after_break(a):
    t = a + 1
    s = [t * i for i in range(2)]  # the comprehension makes t a cell
    print("break")
    old = t
    t = t * 0
    return old, t, s


def copy_before_break_rebind_after(a):
    t = a.sin()
    get = lambda: t  # noqa: E731
    old = t
    torch._dynamo.graph_break()
    t = t + 10
    return old, t, get()


def cell_holding_a_list_replaced(a):
    items = [a, a + 1]
    total = lambda: sum(items)  # noqa: E731
    torch._dynamo.graph_break()
    first = items
    items = [a * 3]
    return first[1], items[0], total()


def nested_read_after_two_breaks(a):
    t = a * 2
    def inner():
        return t + 1
    torch._dynamo.graph_break()
    old = t
    t = inner()
    torch._dynamo.graph_break()
    return old, t, inner()


def argument_cell_rebound(a, b):
    f = lambda: a + b  # noqa: E731  (a and b are cells from the frame's first instruction)
    torch._dynamo.graph_break()
    a_before, b_before = a, b
    a, b = b, a * 0
    return a_before, b_before, a, b, f()


def argument_cell_copied_then_rebound_without_a_break(t0):
    res = t0  # t0 is a cell (the comprehension reads it): read through its slot at entry
    t0 = t0 @ torch.ones(3, 3)
    for _ in range(2):
        seq = [t0 for _ in range(2)]
    return res, t0, seq


@pytest.mark.parametrize("fn", [copy_then_rebind_after_break, copy_before_break_rebind_after,
                                cell_holding_a_list_replaced, nested_read_after_two_breaks,
                                argument_cell_rebound, argument_cell_copied_then_rebound_without_a_break])
def test_a_copy_of_a_cell_keeps_its_value_when_the_cell_is_rebound_after_a_break(fn, capsys):
    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(fn)
    args = [torch.randn(3) for _ in range(fn.__code__.co_argcount)]
    for _ in range(2):  # the compile, then the cache hit
        assert_same(compiled(*args), fn(*args))
    assert backend.graphs  # compiled (around the break)


# -- a closure made before a break, its cell rebound in the resume function before it is called ------

def _closure_then_rebind_at_the_break(t0, t2):
    def get():
        return t2
    t2 = t2 if t0.mean() < 0 else t0 * 5   # the break is the branch; the resume function stores t2
    t2 = get()                              # the closure reads the cell the resume just stored
    return t2


def _closure_then_rebind_after_the_break(x, y):
    def scaled(a):
        return a * y + 1
    torch._dynamo.graph_break()
    y = x * 3                               # stored into the cell the resume function received
    return scaled(x), y


def _nonlocal_counter_across_the_break(x, n):
    def bump(k):
        nonlocal n
        n += k
        return n
    print(end="")
    n = len(x) + 10                         # rebound, then read and rebound by the closure
    return x * bump(2), n


@pytest.mark.parametrize("fn, args", [
    (_closure_then_rebind_at_the_break, (torch.ones(3), torch.zeros(3))),
    (_closure_then_rebind_at_the_break, (-torch.ones(3), torch.zeros(3))),
    (_closure_then_rebind_after_the_break, (torch.ones(3), torch.full((3,), 2.0))),
    (_nonlocal_counter_across_the_break, (torch.ones(3), 1)),
])
def test_a_closure_made_before_a_break_reads_the_cell_the_resume_function_stored(fn, args):
    """The resume function receives the frame's cells: a store to one (STORE_DEREF) before any read
    made before any read of it made the translator forget it was the cell the closure holds, and
    the closure's read was traced as the cell's entry value (the fuzzer's seed 173)."""
    eager = fn(*args)
    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(fn)
    assert_same(compiled(*args), eager)
    assert_same(compiled(*args), eager)  # the cache hit as well
    assert len(backend.graphs) >= 1

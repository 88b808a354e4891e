"""Graph breaks: results, graph counts and op sequences against eager and torch._dynamo."""
from __future__ import annotations

import traceback

import pytest
import torch
import torch._dynamo

import pyframe
from pyframe import _C
from pyframe.debug.compare import CountingBackend


class Recorder:
    def __init__(self):
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm.forward

    def op_sequences(self) -> list[tuple[str, ...]]:
        return [tuple(n.target if isinstance(n.target, str) else n.target.__name__
                      for n in gm.graph.nodes if n.op.startswith("call")) for gm in self.graphs]


def toy_example(a, b):
    x = a / (torch.abs(a) + 1)
    if b.sum() < 0:
        b = b * -1
    return x * b


class DynamicModule(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x * x
        return 3 * x


def test_toy_example_captures_dynamos_three_graphs_over_100_runs():
    ours, theirs = Recorder(), Recorder()
    opt = pyframe.optimize(ours)(toy_example)
    torch._dynamo.reset()
    dyn = torch._dynamo.optimize(theirs)(toy_example)
    torch.manual_seed(0)
    signs = set()
    for _ in range(100):
        a, b = torch.randn(10), torch.randn(10)
        signs.add(bool(b.sum() < 0))
        expected = toy_example(a, b)
        torch.testing.assert_close(opt(a, b), expected)
        torch.testing.assert_close(dyn(a, b), expected)
    assert signs == {True, False}  # both branches ran
    assert len(ours.graphs) == 3
    assert sorted(ours.op_sequences()) == sorted(theirs.op_sequences())
    assert ("abs", "add", "truediv", "sum", "lt") in ours.op_sequences()


def test_dynamic_module_matches_dynamo():
    ours, theirs = Recorder(), Recorder()
    x = torch.randn(10)
    mod = DynamicModule()
    opt = pyframe.optimize(ours)(mod)
    torch._dynamo.reset()
    dyn = torch._dynamo.optimize(theirs)(mod)
    for inp in (x, -x, x, -x):
        torch.testing.assert_close(opt(inp), mod(inp))
        dyn(inp)
    assert sorted(ours.op_sequences()) == sorted(theirs.op_sequences())


LOG: list = []
COUNTER = 0


class Box:
    value = 0


def side_effects(x, box):
    LOG.append("before")
    y = x + 1
    box.value = 7
    global COUNTER
    COUNTER += 1
    LOG.append("after")
    return y * 2


def test_side_effects_before_and_after_breaks_happen_once_in_order():
    global COUNTER
    LOG.clear()
    COUNTER = 0
    box = Box()
    opt = pyframe.optimize("eager")(side_effects)
    for i in range(3):
        torch.testing.assert_close(opt(torch.ones(2), box), torch.full((2,), 4.0))
        assert LOG == ["before", "after"] * (i + 1)
        assert COUNTER == i + 1 and box.value == 7


def with_locals(x, *args, scale=2, **kwargs):
    offset = kwargs.get("offset", 0)
    total = x * scale + offset
    for a in args:
        print("arg", a)  # a break inside a loop, with the iterator on the stack
        total = total + a
    return total


def test_breaks_with_varargs_kwonly_defaults_and_loops(capsys):
    opt = pyframe.optimize("eager")(with_locals)
    x = torch.randn(3)
    for kwargs in ({}, {"offset": 1.0}, {"scale": 3, "offset": -1.0}):
        expected = with_locals(x, 1.0, 2.0, **kwargs)
        capsys.readouterr()
        torch.testing.assert_close(opt(x, 1.0, 2.0, **kwargs), expected)
        assert capsys.readouterr().out == "arg 1.0\narg 2.0\n"


def closure_across_break(x):
    k = torch.ones_like(x)

    def bump():
        return x + k

    print("break")
    k = k * 3
    return bump()


def test_cells_shared_with_closures_survive_a_break(capsys):
    x = torch.randn(4)
    torch.testing.assert_close(pyframe.optimize("eager")(closure_across_break)(x), x + 3)


def try_block(x):
    try:
        print("inside try")
        y = x + 1
    except RuntimeError:
        y = x
    return y * 2


def test_break_inside_try_runs_the_frame_normally_with_a_reason(capsys):
    x = torch.randn(3)
    torch.testing.assert_close(pyframe.optimize("eager")(try_block)(x), (x + 1) * 2)
    assert capsys.readouterr().out == "inside try\n"
    record = pyframe.convert_frame.records_for(try_block.__code__)[-1]
    assert record.status == "skipped" and "try or with block" in record.reason


def test_fullgraph_raises_at_the_first_break_with_the_users_line():
    opt = pyframe.optimize("eager", fullgraph=True)(toy_example)
    with pytest.raises(pyframe.Unsupported) as info:
        opt(torch.randn(3), torch.randn(3))
    message = str(info.value)
    assert "data-dependent branch on a tensor" in message
    assert "test_graph_breaks.py" in message and "if b.sum() < 0:" in message
    assert info.value.location.lineno == toy_example.__code__.co_firstlineno + 2
    assert _C.get_cache_entries(toy_example.__code__) == []


def test_nopython_is_an_alias_of_fullgraph():
    with pytest.raises(pyframe.Unsupported):
        pyframe.optimize("eager", nopython=True)(toy_example)(torch.randn(3), torch.randn(3))


def test_explain_toy_example():
    out = pyframe.explain(toy_example)(torch.randn(10), torch.ones(10))
    assert out.graph_count == 2 and out.graph_break_count == 1
    reason = out.break_reasons[0]
    assert "data-dependent branch" in reason.reason and reason.source_line == "if b.sum() < 0:"
    assert out.ops_per_graph[0] == ["torch.abs", "operator.add", "operator.truediv", "Tensor.sum", "operator.lt"]
    assert out.op_count == 6
    assert any("check_tensor(L['a']" in g for g in out.guards)
    text = str(out)
    assert text.startswith("Graph Count: 2\nGraph Break Count: 1\nOp Count: 6")
    assert _C.get_cache_entries(toy_example.__code__) == []  # nothing left behind


def numpy_in_locals(x, arr):
    return torch.from_numpy(arr * 2) + x


def test_a_numpy_array_in_the_frame_is_a_graph_input_not_an_internal_error(caplog):
    """(as torch._dynamo takes it: the tensor over its memory; tests/test_numpy_graphs.py)"""
    np = pytest.importorskip("numpy")
    x, arr = torch.ones(3), np.ones(3, dtype=np.float32)
    backend = CountingBackend()
    with caplog.at_level("WARNING", logger="pyframe"):
        torch.testing.assert_close(pyframe.optimize(backend)(numpy_in_locals)(x, arr), numpy_in_locals(x, arr))
    assert not [r for r in caplog.records if "internal error" in r.getMessage()]
    record = pyframe.convert_frame.records_for(numpy_in_locals.__code__)[-1]
    assert record.status == "compiled" and record.error is None  # one graph, no break
    assert backend.graphs[0].ops == ("wrapped_mul", "as_tensor", "add")


class _DoublingFallback:
    """Python calls a class's `__getattr__` that is not a function (no __get__) with the name alone."""

    def __call__(self, name):
        if name == "doubled":
            return lambda t: t * 2
        raise AttributeError(name)


class _GetattrModule(torch.nn.Module):
    """A module whose __getattr__ is a callable object, not a Python function: pyframe does not
    trace the lookup. (A function __getattr__ is traced: see the corpus's WrapperForwardingGetattr.)"""

    def __init__(self):
        super().__init__()
        self.inner = torch.nn.Linear(4, 4)

    __getattr__ = _DoublingFallback()


def call_through_getattr(m, x):
    y = x.sin()
    z = m.doubled(y)  # LOAD_METHOD pyframe cannot look up: the CALL that follows is the break
    return z.cos() + 1


def test_a_method_lookup_that_cannot_be_traced_breaks_at_its_call():
    rec = Recorder()
    m, x = _GetattrModule(), torch.randn(2, 4)
    torch.testing.assert_close(pyframe.optimize(rec)(call_through_getattr)(m, x), call_through_getattr(m, x))
    assert rec.op_sequences() == [("sin",), ("mul",), ("cos", "add")]
    record = pyframe.convert_frame.records_for(call_through_getattr.__code__)[0]
    assert record.status == "compiled"
    assert "defines its own __getattr__" in str(record.error)


@torch._dynamo.disable
def _dynamo_disabled(x):
    return x * 10


@torch.compiler.disable
def _compiler_disabled(x):
    return x * 20


def asks_for_a_break(x):
    y = x.sin()
    torch._dynamo.graph_break()
    return y.cos()


def calls_disabled_functions(x):
    return _compiler_disabled(_dynamo_disabled(x.sin())).cos()


@pytest.mark.parametrize("fn", [asks_for_a_break, calls_disabled_functions])
def test_dynamo_hints_break_the_graph_as_in_dynamo(fn):
    """torch._dynamo.graph_break() breaks; functions under torch._dynamo.disable or
    torch.compiler.disable run uncompiled (nothing inside them is compiled), as torch._dynamo does."""
    ours, theirs = Recorder(), Recorder()
    x = torch.randn(3)
    torch.testing.assert_close(pyframe.optimize(ours)(fn)(x), fn(x))
    torch._dynamo.reset()
    torch.compile(fn, backend=theirs)(x)
    assert ours.op_sequences() == theirs.op_sequences() == [("sin",), ("cos",)]
    assert not pyframe.convert_frame.records_for(_dynamo_disabled.__wrapped__.__code__)


def _scaled_cos(x):
    return x.cos() * 2


torch.compiler.allow_in_graph(_scaled_cos)


def calls_a_function_allowed_in_graph(x):
    return _scaled_cos(x.sin()) + 1


def test_a_function_allowed_in_graph_is_one_node_as_in_dynamo():
    ours, theirs = Recorder(), Recorder()
    x = torch.randn(3)
    torch.testing.assert_close(pyframe.optimize(ours)(calls_a_function_allowed_in_graph)(x),
                               calls_a_function_allowed_in_graph(x))
    torch._dynamo.reset()
    torch.compile(calls_a_function_allowed_in_graph, backend=theirs)(x)
    assert ours.op_sequences() == theirs.op_sequences() == [("sin", "_scaled_cos", "add")]


def branch_inside_no_grad(x):
    with torch.no_grad():
        z = x.sin()
        if z.sum() > 0:  # a graph break inside the block
            z = z * 2
        w = z.cos()
    return w + x, torch.is_grad_enabled(), w.requires_grad


def raise_inside_no_grad(x):
    with torch.no_grad():
        z = x.sin()
        if z.sum() > 0:
            raise ValueError("positive")
    return z


def dynamo_op_sequences(fn, *inputs) -> list[tuple[str, ...]]:
    theirs = Recorder()
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend=theirs, dynamic=False)
    for args in inputs:
        compiled(*args)
    torch._dynamo.reset()
    return theirs.op_sequences()


def all_compiled(fn) -> bool:
    """Every frame pyframe met for `fn`, resume functions included, was compiled."""
    records = pyframe.convert_frame.records_for(fn.__code__)
    codes = [code for r in records for code in r.resume_codes]
    while codes:
        code = codes.pop()
        more = pyframe.convert_frame.records.get(code, [])
        records += more
        codes += [c for r in more for c in r.resume_codes]
    return bool(records) and all(r.status == "compiled" for r in records)


def test_a_break_inside_a_no_grad_block_compiles_the_rest_of_the_block():
    """The graph so far leaves the block; the breaking instruction runs in the block entered again
    by the transformed code; the resume functions enter it once more and are compiled, each graph
    as torch._dynamo records it."""
    rec = Recorder()
    opt = pyframe.optimize(rec)(branch_inside_no_grad)
    inputs = []
    for sign in (1, -1):
        x = (torch.rand(4) + 0.5) * sign
        x.requires_grad_()
        got, expected = opt(x), branch_inside_no_grad(x)
        torch.testing.assert_close(got[0], expected[0])
        assert got[1:] == expected[1:] and torch.is_grad_enabled()
        inputs.append((x,))
    assert rec.op_sequences() == dynamo_op_sequences(branch_inside_no_grad, *inputs)
    assert rec.op_sequences()[0] == ("_set_grad_enabled", "sin", "sum", "gt", "_set_grad_enabled")
    assert all_compiled(branch_inside_no_grad)


def test_an_exception_after_a_break_inside_a_no_grad_block_restores_grad_mode():
    opt = pyframe.optimize(Recorder())(raise_inside_no_grad)
    with pytest.raises(ValueError, match="positive"):
        opt(torch.rand(4) + 0.5)
    assert torch.is_grad_enabled()
    negative = -torch.rand(4) - 0.5
    torch.testing.assert_close(opt(negative), raise_inside_no_grad(negative))
    assert torch.is_grad_enabled()
    # (the resume function that raises runs as Python: an exception leaving the frame stops a
    # trace, in torch._dynamo as here)
    assert [r.status for r in pyframe.convert_frame.records_for(raise_inside_no_grad.__code__)] == ["compiled"]


def _fails(v):
    print(end="")  # not traced: the call breaks the graph
    raise KeyError("from the breaking call")


def breaking_call_raises_inside_nested_blocks(x):
    with torch.no_grad():
        y = x * 2
        with torch.enable_grad():
            z = y + 1
            _fails(z)
    return z


def test_an_exception_from_the_breaking_call_leaves_every_block():
    """The breaking call runs in the blocks entered again: when it raises, each block's exit runs
    (innermost first) and the exception reaches the caller with its traceback at the call."""
    x = torch.randn(3, requires_grad=True)
    with pytest.raises(KeyError, match="from the breaking call") as info:
        pyframe.optimize(Recorder())(breaking_call_raises_inside_nested_blocks)(x)
    assert torch.is_grad_enabled()
    lines = [frame.lineno for frame in traceback.extract_tb(info.tb)]
    assert breaking_call_raises_inside_nested_blocks.__code__.co_firstlineno + 5 in lines
    with torch.no_grad():  # the blocks put back the mode they found, whatever it was
        with pytest.raises(KeyError):
            pyframe.optimize(Recorder())(breaking_call_raises_inside_nested_blocks)(x)
        assert not torch.is_grad_enabled()


def nested_blocks_break(x):
    with torch.no_grad():
        y = x * 2
        with torch.enable_grad():
            z = y.sin()
            print(end="")
            z = z + y
        w = z.cos()
    return w, z.requires_grad, w.requires_grad, torch.is_grad_enabled()


def test_a_break_inside_nested_blocks_matches_dynamo():
    x = torch.randn(3, requires_grad=True)
    rec = Recorder()
    got, expected = pyframe.optimize(rec)(nested_blocks_break)(x), nested_blocks_break(x)
    torch.testing.assert_close(got[0], expected[0])
    assert got[1:] == expected[1:]
    assert rec.op_sequences() == dynamo_op_sequences(nested_blocks_break, (x,))
    assert all_compiled(nested_blocks_break)


def branch_inside_autocast(x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ x
        if y.sum() > 0:  # a graph break inside the region
            y = y * 2
        z = y @ x
    return z, torch.is_autocast_enabled("cpu")


def raise_inside_autocast(x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ x
        if y.sum() > 0:
            raise ValueError("positive")
    return y


def test_a_break_inside_an_autocast_region_leaves_the_region_as_autocast_does():
    rec = Recorder()
    for sign in (1, -1):
        x = torch.rand(4, 4) * sign
        got, expected = pyframe.optimize(rec)(branch_inside_autocast)(x), branch_inside_autocast(x)
        torch.testing.assert_close(got[0], expected[0])
        assert got[0].dtype == torch.bfloat16 and got[1] is expected[1] is False
        assert not torch.is_autocast_enabled("cpu")
    with torch.autocast("cpu", dtype=torch.float16):  # inside an outer region: back to it after
        x = torch.rand(4, 4)
        torch.testing.assert_close(pyframe.optimize(rec)(branch_inside_autocast)(x)[0], branch_inside_autocast(x)[0])
        assert torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.float16
    assert rec.op_sequences()[:2] == dynamo_op_sequences(branch_inside_autocast, (x,))
    assert all_compiled(branch_inside_autocast)
    with pytest.raises(ValueError, match="positive"):
        pyframe.optimize(rec)(raise_inside_autocast)(torch.rand(4, 4))
    assert not torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16
    assert [r.status for r in pyframe.convert_frame.records_for(raise_inside_autocast.__code__)] == ["compiled"]


def _untraceable_with_keywords(v, scale=1, *, shift=0):
    print(end="")  # pyframe does not trace print: the call breaks the graph
    return v * scale + shift


def keyword_call_breaks_inside_no_grad(x):
    with torch.no_grad():
        y = x.sin()
        z = _untraceable_with_keywords(y, scale=3, shift=1)
    return z


def test_a_keyword_call_that_breaks_inside_a_block_keeps_its_keywords():
    """The resume function starts at the call's KW_NAMES (CALL alone would read no keyword
    names and pass them as positional arguments: a TypeError eager does not raise)."""
    x = torch.randn(3)
    torch.testing.assert_close(pyframe.optimize(Recorder())(keyword_call_breaks_inside_no_grad)(x),
                               keyword_call_breaks_inside_no_grad(x))
    assert [r.status for r in pyframe.convert_frame.records_for(keyword_call_breaks_inside_no_grad.__code__)] \
        == ["compiled"]


def _breaks_then(value):
    print(end="")  # not traced: a graph break
    return value


def calls_a_function_of_a_module_imported_in_the_frame(x):
    import os.path
    y = x * 2
    name = os.path.join("a", _breaks_then("b"))  # os.path.join is on the stack at the break
    return y + len(name)


class _Scaler:
    def scale(self, x, n):
        return x * n


class _ShiftThenScale(_Scaler):
    def scale(self, x, n):
        y = x + 1
        return super().scale(y, _breaks_then(n))  # super().scale is on the stack at the break


class _HoldsSuper(_Scaler):
    def scale(self, x, n):
        y = x + 1
        parent = super()
        _breaks_then(None)  # a super object is live across the break
        return parent.scale(y, n)


def test_functions_methods_and_super_objects_live_across_a_break_are_rebuilt():
    """A function reached through a module imported in the frame, a method found by super() and a
    super object itself were "cannot rebuild" at a break: the whole frame ran as plain Python."""
    x = torch.randn(3)
    for fn, args in ((calls_a_function_of_a_module_imported_in_the_frame, (x,)),
                     (_ShiftThenScale().scale, (x, 3)), (_HoldsSuper().scale, (x, 3))):
        rec = Recorder()
        torch.testing.assert_close(pyframe.optimize(rec)(fn)(*args), fn(*args))
        code = getattr(fn, "__func__", fn)
        assert [r.status for r in pyframe.convert_frame.records_for(code.__code__)] == ["compiled"]
        assert rec.op_sequences() == dynamo_op_sequences(fn, args)


def test_code_made_by_eval_is_traced_as_dynamo_traces_it():
    """A lambda made by eval(), and a dataclass-like __init__ made by exec(), have the file name
    `<string>`: user code all the same, compiled into the graphs torch._dynamo makes."""
    adds = "+".join(["a", "b"] * 8)
    fn = eval(f"lambda a, b: ({adds} + a if a.sum() > 0 else {adds} - b)")
    a, b = torch.ones(4), -2 * torch.ones(4)
    graphs = {}
    for engine in ("pyframe", "dynamo"):
        backend = CountingBackend()
        torch._dynamo.reset()
        pyframe.reset()
        compiled = pyframe.optimize(backend)(fn) if engine == "pyframe" else \
            torch.compile(fn, backend=backend, dynamic=False)
        torch.testing.assert_close(compiled(a, b), fn(a, b))
        torch.testing.assert_close(compiled(b, a), fn(b, a))
        graphs[engine] = [g.ops for g in backend.graphs]
    assert len(graphs["pyframe"]) == 3
    assert graphs["pyframe"] == graphs["dynamo"]


def _graphs_of(fn, make_args, engines=("pyframe", "dynamo")):
    """{engine: (results of two calls, op sequences)}; make_args() gives fresh arguments."""
    out = {}
    for engine in engines:
        backend = CountingBackend()
        torch._dynamo.reset()
        pyframe.reset()
        compiled = pyframe.optimize(backend)(fn) if engine == "pyframe" else \
            torch.compile(fn, backend=backend, dynamic=False)
        results = [compiled(*make_args()) for _ in range(2)]
        out[engine] = results, [g.ops for g in backend.graphs]
    return out


def iterator_across_a_break(x):
    it = iter((1, 2, 3, 4, 5))
    x = x + next(it)
    torch._dynamo.graph_break()
    x = x * next(it)
    x = x - next(it)
    return x, it


def test_an_iterator_live_across_a_break_is_traced_on_in_the_resume_function():
    """The resume function is handed a tuple iterator: its items still to come are guarded as a
    tuple's and traced, not a break at each next(); the real iterator is moved on after the graph."""
    def fn(x):
        out, it = iterator_across_a_break(x)
        return out, list(it)

    expected = fn(torch.ones(3))
    runs = _graphs_of(iterator_across_a_break, lambda: (torch.ones(3),))
    for engine, (results, _) in runs.items():
        for out, it in results:
            assert type(it) is type(iter(()))
            torch.testing.assert_close((out, list(it)), expected)
    assert runs["pyframe"][1] == runs["dynamo"][1] == [("add",), ("mul", "sub")]


def test_a_tuple_iterator_argument_is_moved_on_by_what_the_trace_took():
    def fn(x, it):
        x = x + next(it)
        for _ in range(2):
            x = x * next(it)
        return x

    iterators = [iter((1.0, 2.0, 3.0, 4.0)), iter((5.0, 6.0, 7.0, 8.0)), iter((1.0, 2.0))]
    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(fn)
    for it in iterators[:2]:
        eager_it = iter(tuple(it.__reduce__()[1][0]))
        torch.testing.assert_close(compiled(torch.ones(2), it), fn(torch.ones(2), eager_it))
        assert list(it) == list(eager_it) == [(4.0, 8.0)[iterators.index(it)]]
    assert [g.ops for g in backend.graphs] == [("add", "mul", "mul")] * 2  # the items are guarded
    it = iterators[2]
    next(it)  # one item left: the trace raises StopIteration as eager does
    with pytest.raises((StopIteration, RuntimeError)):
        compiled(torch.ones(2), it)


def test_a_for_loop_broken_inside_keeps_its_iterator_opaque():
    """A for loop's own iterator, on the stack at the break, is not unrolled by the resume
    function: one cache entry per number of items left would hit the recompile limit. (A frame
    resumes inside a loop only where torch._dynamo's test for a loop misses it: a `return` after
    the break, inside the loop; torch._dynamo then compiles a graph per turn.)"""
    def fn(x):
        for i in range(20):
            x = x + i
            torch._dynamo.graph_break()
            if i == 100:
                return x
        return x

    backend = CountingBackend()
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.testing.assert_close(pyframe.optimize(backend)(fn)(torch.ones(2)), fn(torch.ones(2)))
    assert len(backend.graphs) == 1


def _same_object(a, b):
    return a * 2, a is b, a is not b


class _MaybeTied(torch.nn.Module):
    def __init__(self, tied: bool):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(3))
        self.v = self.w if tied else torch.nn.Parameter(torch.randn(3))

    def forward(self, x):
        return x * self.w, self.w is self.v


def _aliases_across_a_break(x):
    y = x * 2
    z = y
    torch._dynamo.graph_break()
    z.add_(1)
    return y, y is z


def test_identity_of_two_tensor_inputs_is_decided_and_guarded_by_their_aliasing():
    """`a is b` on two tensors read from the frame: answered from the real tensors (one tensor
    under two sources is one FakeTensor), kept true by the aliasing guard: passing two different
    tensors where one was passed twice compiles again, never a graph break."""
    from pyframe.debug.compare import count_breaks
    x, y = torch.randn(3), torch.randn(3)
    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(_same_object)
    for args in ((x, x), (x, y), (y, y), (y, x)):
        torch.testing.assert_close(compiled(*args), _same_object(*args))
    assert len(backend.graphs) == 2 and count_breaks("pyframe") == 0
    pyframe.reset()
    for tied in (True, False):
        model = _MaybeTied(tied)
        torch.testing.assert_close(pyframe.optimize(backend)(model)(x), model(x))
    assert count_breaks("pyframe") == 0
    pyframe.reset()


def test_two_locals_naming_one_tensor_stay_one_in_the_resume_function_as_in_dynamo():
    """The resume function gets `y` and `z` as two arguments holding one tensor: `y is z` and the
    in-place add through `z` see one object, in one graph after the break, as in torch._dynamo."""
    from pyframe.debug.compare import count_breaks
    expected = _aliases_across_a_break(torch.ones(3))
    breaks, ops = {}, {}
    for engine in ("pyframe", "dynamo"):
        torch._dynamo.reset()
        pyframe.reset()
        backend = CountingBackend()
        compiled = pyframe.optimize(backend)(_aliases_across_a_break) if engine == "pyframe" else \
            torch.compile(_aliases_across_a_break, backend=backend, dynamic=False)
        for _ in range(2):
            torch.testing.assert_close(compiled(torch.ones(3)), expected)
        breaks[engine], ops[engine] = count_breaks(engine), [g.ops for g in backend.graphs]
    assert breaks["pyframe"] == breaks["dynamo"] == 1
    assert ops["pyframe"] == ops["dynamo"] == [("mul",), ("add_",)]

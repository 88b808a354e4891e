"""Data-dependent values, as torch._dynamo captures them (fake/unbacked.py).

Under torch._dynamo.config.capture_scalar_outputs: `Tensor.item()` and an integer tensor's
`tolist()` in the graph, each value an unbacked symbol of the trace's ShapeEnv (a static trace is
traced again over one); a branch on it breaks the graph; off, both break as before. Under
capture_dynamic_output_shape_ops: `nonzero()`, `x[mask]`, `torch.unique`, `masked_select`... in the
graph, their output sizes unbacked symbols; off, a graph break. `torch._check`/`_check_is_size` and
what the ShapeEnv learns become the runtime asserts torch._dynamo's graphs have. Each program is
compared with eager (results) and with torch._dynamo on the same backend (every graph's code).
"""
from __future__ import annotations

import math

import pytest
import torch
import torch._dynamo

import pyframe
from pyframe import convert_frame
from pyframe.debug.compare import CountingBackend
from pyframe.fake import unbacked

pytestmark = pytest.mark.filterwarnings("ignore:_check_is_size will be removed")


@pytest.fixture
def capture_scalars():
    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        yield


def scale_by_sum(x):
    return x * x.sum().item()


def shift_by_max(x):
    s = x.max().item()
    return x + s * 2 + 1


def branch_on_sum(x):
    n = x.sum().item()
    if n > 0:
        return x + 1
    return x - 1


def first_element_times_ones(x):
    return torch.ones(3) * x[0].item() + x.shape[0]


def int_and_float_of_items(x):
    return x * int(x.sum().item()) + float(x.max().item())  # (torch.sym_int; float of a float: itself)


def _graphs(engine_compile, fn, inputs):
    backend = CountingBackend()
    compiled = engine_compile(fn, backend)
    outputs = [compiled(x) for x in inputs]
    return backend.graphs, outputs


@pytest.mark.parametrize("fn", [scale_by_sum, shift_by_max, branch_on_sum, first_element_times_ones,
                                int_and_float_of_items])
def test_captured_item_graphs_are_dynamos(capture_scalars, fn):
    inputs = [torch.randn(4), torch.randn(4) * 3 + 2, -torch.rand(4) - 1]  # (both branches taken)
    torch._dynamo.reset()
    theirs, _ = _graphs(lambda f, b: torch.compile(f, backend=b), fn, inputs)
    pyframe.reset()
    ours, outputs = _graphs(lambda f, b: pyframe.optimize(b)(f), fn, inputs)
    for x, out in zip(inputs, outputs):
        torch.testing.assert_close(out, fn(x))
    assert [g.code for g in ours] == [g.code for g in theirs]


def test_an_item_used_as_a_python_constant_breaks_the_graph(capture_scalars, caplog):
    def labelled(x):
        label = str(x.sum().item())
        return x * len(label)

    graphs = _same_graphs_as_dynamo(labelled, [torch.ones(3), torch.full((3,), 2.5)])
    # read in the graph, then used by Python: handed back as a 0-d tensor whose item() Python reads,
    # as torch._dynamo hands back a float read from a tensor
    assert graphs[0].ops == ("sum", "item", "scalar_tensor")
    assert "internal error" not in caplog.text


def test_without_capture_item_breaks_the_graph():
    pyframe.reset()
    backend = CountingBackend()
    x = torch.randn(4)
    torch.testing.assert_close(pyframe.optimize(backend)(scale_by_sum)(x), scale_by_sum(x))
    assert [g.ops for g in backend.graphs] == [("sum",), ("mul",)]


# -- tolist, dynamic output shapes, checks, cond ------------------------------------------------------


def tolist_of_ints(x):
    vals = x.to(torch.int64).tolist()
    return torch.ones(3) * vals[0]


def tolist_of_a_matrix(x):
    v = x.to(torch.int64).tolist()
    return x * v[1][0] + v[0][1]


def tolist_of_a_scalar(x):
    return x + x.sum().to(torch.int64).tolist()


def tolist_of_floats(x):  # (torch._dynamo traces tolist() of integer tensors only: a break)
    vals = x.tolist()
    return x * vals[0]


def nonzero_method(x):
    return x.nonzero() + 1


def nonzero_function(x):
    return torch.nonzero(x) * 2


def nonzero_as_tuple(x):
    return torch.nonzero(x, as_tuple=True)[0] * 2


def mask_index(x):
    return x[x > 0] * 2


def mask_sum(x):
    return x[x > 0].sum() + x


def mask_mean_and_size(x):
    selected = x[x > 0]
    return selected.mean() + selected.size(0)


def unique(x):
    return torch.unique(x) + 1


def unique_with_counts(x):
    values, counts = torch.unique(x, return_counts=True)
    return values * counts


def masked_select(x):
    return torch.masked_select(x, x > 0) * 3


def nonzero_size_in_arithmetic(x):
    n = x.nonzero()
    return x * (n.size(0) + 1)


def nonzero_reshaped(x):
    return torch.nonzero(x).reshape(-1) + 1


def nonzero_squeezed_and_concatenated(x):
    n = torch.nonzero(x).squeeze(1)
    return torch.cat([n, n]) * 2


def nonzero_twice(x):
    return x.nonzero().sum() + (x - 1).nonzero().sum()


def branch_on_nonzero_size(x):  # (a branch on a size read from the data: a break)
    if x.nonzero().size(0) > 1:
        return x + 1
    return x - 1


def loop_over_nonzero(x):  # (iterating over rows of unknown number: a break)
    n = x.nonzero()
    out = x.clone()
    for row in n:
        out = out + row.sum()
    return out


def check_non_negative(x):
    u = x.sum().to(torch.int64).item()
    torch._check(u >= 0)
    return x * u


def check_is_size(x):
    u = x.max().to(torch.int64).item()
    torch._check_is_size(u)  # (deprecated: its FutureWarning filtered below)
    return torch.zeros(u) + 1


def item_as_a_size(x):
    return torch.zeros(x.max().to(torch.int64).item())


def slice_by_an_item(x):
    u = x[0].to(torch.int64).item()
    torch._check(u >= 0)
    torch._check(u <= x.size(0))
    return x[:u] * 2


def view_by_an_item(x):
    u = x[0].to(torch.int64).item()
    torch._check(u > 0)
    torch._check(x.numel() % u == 0)
    return x.view(u, -1)


def cond_on_an_item(x):
    u = x.sum().item()
    return torch.cond(u > 0, lambda a: a + 1, lambda a: a - 1, (x,))


def float_item_returned(x):  # (handed back as a 0-d float64 tensor, its item() read after the graph)
    return x.sum().item(), x * 2


def float_item_across_a_break(x):
    u = x.sum().item()
    torch._dynamo.graph_break()
    return x * u


def mask_shape_returned(x):
    return x[x > 0].shape


def builtins_of_an_item(x):
    u = x.max().to(torch.int64).item()
    return x * max(u, 1) + min(u, 2) + abs(u) + bool(u) + round(u / 2) + math.sqrt(u)


_VECTORS = [torch.tensor([-1., 1., 2., 0.]), torch.tensor([1., 3., -3., 2.])]
_POSITIVE = [torch.tensor([2., 2., 3., 4.]), torch.tensor([4., 1., 2., 1.])]
_PROGRAMS = {
    tolist_of_ints: _POSITIVE, tolist_of_a_matrix: [torch.tensor([[1., 2.], [3., 4.]])] * 2,
    tolist_of_a_scalar: _POSITIVE,
    nonzero_method: _VECTORS, nonzero_function: [torch.tensor([[0., 1.], [2., 0.]])] * 2,
    nonzero_as_tuple: _VECTORS, mask_index: _VECTORS, mask_sum: _VECTORS, mask_mean_and_size: _VECTORS,
    unique: _VECTORS, unique_with_counts: [torch.tensor([1., 1., 2., 0.]), torch.tensor([3., 1., 3., 3.])],
    masked_select: _VECTORS, nonzero_size_in_arithmetic: _VECTORS, nonzero_reshaped: _VECTORS,
    nonzero_squeezed_and_concatenated: _VECTORS, nonzero_twice: _VECTORS,
    branch_on_nonzero_size: [torch.tensor([0., 1., 2., 0.]), torch.tensor([0., 0., 0., 3.])],
    loop_over_nonzero: [torch.tensor([0., 1., 2., 0.])] * 2,
    check_non_negative: _POSITIVE, check_is_size: _POSITIVE, item_as_a_size: _POSITIVE,
    slice_by_an_item: _POSITIVE, view_by_an_item: _POSITIVE,
    cond_on_an_item: [torch.tensor([1., 2., 3.]), torch.tensor([-4., 1., 2.])],
    builtins_of_an_item: _POSITIVE, float_item_returned: _POSITIVE, float_item_across_a_break: _POSITIVE[:1] * 2, mask_shape_returned: _VECTORS,
}
_CAPTURE_ALL = {"capture_scalar_outputs": True, "capture_dynamic_output_shape_ops": True}
_CAPTURE_NONE = {"capture_scalar_outputs": False, "capture_dynamic_output_shape_ops": False}


def _same_graphs_as_dynamo(fn, inputs, *, fullgraph=False):
    """Each engine from cold caches on the same inputs: pyframe's results are eager's, its graphs'
    code torch._dynamo's, and no frame of it gave up with an internal error."""
    backend = CountingBackend()
    torch._dynamo.reset()
    for x in inputs:
        torch.compile(fn, backend=backend, fullgraph=fullgraph)(x)
    theirs = [g.code for g in backend.graphs]
    pyframe.reset()
    backend = CountingBackend()
    compiled = pyframe.optimize(backend, fullgraph=fullgraph)(fn)
    for x in inputs:
        torch.testing.assert_close(compiled(x), fn(x))
    assert [g.code for g in backend.graphs] == theirs
    assert not [r for records in convert_frame.records.values() for r in records
                if r.error is not None and "internal error" in str(r.error)]
    return backend.graphs


def _ops(graphs):
    return [op for g in graphs for op in g.ops]


@pytest.mark.parametrize("fn", list(_PROGRAMS), ids=lambda fn: fn.__name__)
def test_captured_data_dependent_graphs_are_dynamos(fn):
    with torch._dynamo.config.patch(**_CAPTURE_ALL):
        _same_graphs_as_dynamo(fn, _PROGRAMS[fn])


def test_tolist_of_integer_tensors_only():
    """tolist() of a float tensor breaks the graph even with scalar outputs captured, as under
    torch._dynamo (the floats then passed to the resume function: the same input twice here)."""
    with torch._dynamo.config.patch(**_CAPTURE_ALL):
        assert "item" in _ops(_same_graphs_as_dynamo(tolist_of_ints, _POSITIVE[:1]))
        assert "item" not in _ops(_same_graphs_as_dynamo(tolist_of_floats, _POSITIVE[:1] * 2))


def test_without_capture_data_dependent_ops_break_as_dynamos():
    with torch._dynamo.config.patch(**_CAPTURE_NONE):
        for fn in (tolist_of_ints, nonzero_method, mask_sum, unique, masked_select, check_is_size, slice_by_an_item):
            graphs = _same_graphs_as_dynamo(fn, _PROGRAMS[fn][:1])
            assert not {"nonzero", "item", "unique", "masked_select"} & set(_ops(graphs)), fn.__name__


def test_captured_ops_are_in_the_graph():
    with torch._dynamo.config.patch(**_CAPTURE_ALL):
        graphs = _same_graphs_as_dynamo(mask_sum, _VECTORS)
    assert [g.ops for g in graphs] == [("gt", "getitem", "sym_size.int", "ge", "_assert_scalar.default", "le",
                                        "_assert_scalar.default", "sum", "add")]


@pytest.mark.parametrize("fn", [tolist_of_ints, nonzero_method, check_is_size, cond_on_an_item],
                         ids=lambda fn: fn.__name__)
def test_fullgraph_captures_without_the_flags(fn):
    """torch._dynamo allows scalar outputs and dynamic output shapes under fullgraph, whatever the flags."""
    with torch._dynamo.config.patch(**_CAPTURE_NONE):
        assert len(_same_graphs_as_dynamo(fn, _PROGRAMS[fn][:1], fullgraph=True)) == 1


def test_each_flag_captures_its_own_kind():
    with torch._dynamo.config.patch(capture_scalar_outputs=True, capture_dynamic_output_shape_ops=False):
        assert "nonzero" not in _ops(_same_graphs_as_dynamo(nonzero_method, _VECTORS[:1]))  # (a break)
        assert "item" in _ops(_same_graphs_as_dynamo(check_non_negative, _POSITIVE[:1]))
    with torch._dynamo.config.patch(capture_scalar_outputs=False, capture_dynamic_output_shape_ops=True):
        assert "nonzero" in _ops(_same_graphs_as_dynamo(nonzero_method, _VECTORS[:1]))
        assert "item" not in _ops(_same_graphs_as_dynamo(check_non_negative, _POSITIVE[:1]))  # (a break)


def test_a_flag_flipped_between_calls_is_not_guarded():
    """The flags are read when a frame compiles: an entry compiled under one setting serves calls
    under the other, as torch._dynamo's (which guards neither)."""
    for first in (True, False):
        counts = {}
        for engine in ("dynamo", "pyframe"):
            torch._dynamo.reset()
            pyframe.reset()
            backend = CountingBackend()
            compiled = torch.compile(mask_sum, backend=backend) if engine == "dynamo" else pyframe.optimize(backend)(mask_sum)
            counts[engine] = []
            for flag in (first, not first, first):
                with torch._dynamo.config.patch(capture_scalar_outputs=flag, capture_dynamic_output_shape_ops=flag):
                    x = _VECTORS[0]
                    torch.testing.assert_close(compiled(x), mask_sum(x))
                counts[engine].append([g.ops for g in backend.graphs])
        assert counts["pyframe"] == counts["dynamo"], first


def test_graphs_without_unbacked_values_skip_the_runtime_assert_pass(monkeypatch):
    """The pass runs only on graphs that made unbacked symbols or state checks: ordinary graphs,
    static or dynamic, pay nothing for it."""
    calls = []
    monkeypatch.setattr(unbacked, "insert_deferred_runtime_asserts", lambda *a, **k: calls.append(a))

    def ordinary(x):
        return (x * 2).sum(0) + x.shape[0]

    pyframe.reset()
    with torch._dynamo.config.patch(**_CAPTURE_ALL):
        compiled = pyframe.optimize(CountingBackend())(ordinary)
        for n in (3, 4, 5):  # (static, then dynamic)
            compiled(torch.ones(n, 2))
        assert calls == []
        pyframe.optimize(CountingBackend())(check_non_negative)(_POSITIVE[0])
    assert calls


def test_a_symbolic_check_is_recorded_with_dynamic_shapes():
    """torch._check of a dynamic size (a backed symbol) is kept, as the assert torch._dynamo's pass
    makes of it; a known condition records nothing."""
    def checked(x, n):
        torch._check(n >= 0)
        torch._check(True)
        return x * n

    backend = CountingBackend()
    torch._dynamo.reset()
    theirs = torch.compile(checked, backend=backend)
    for n in (3, 5):
        theirs(torch.ones(2), n)
    expected = [g.code for g in backend.graphs]
    pyframe.reset()
    backend = CountingBackend()
    ours = pyframe.optimize(backend)(checked)
    for n in (3, 5):
        torch.testing.assert_close(ours(torch.ones(2), n), checked(torch.ones(2), n))
    assert [g.code for g in backend.graphs] == expected
    assert "_assert_scalar" in expected[-1]


def int_of_a_tensor(x):
    return x * int(x.sum().to(torch.int64))


def float_of_a_tensor(x):
    return x * float(x.sum())


def int_of_a_float_tensor(x):
    return x * int(x.sum())


def test_int_and_float_of_tensors_read_their_item():
    """`int(t)` / `float(t)` under capture_scalar_outputs: the item, then sym_int / sym_float
    (folded by the runtime-assert pass where the kind is the item's), as torch._dynamo records them."""
    inputs = [torch.tensor([1., 2., 3.5])] * 2
    with torch._dynamo.config.patch(**_CAPTURE_ALL):
        for fn in (int_of_a_tensor, float_of_a_tensor, int_of_a_float_tensor):
            assert "item" in _ops(_same_graphs_as_dynamo(fn, inputs)), fn.__name__
    with torch._dynamo.config.patch(**_CAPTURE_NONE):
        assert "item" not in _ops(_same_graphs_as_dynamo(int_of_a_tensor, inputs))


def test_a_branch_of_cond_gets_its_own_runtime_asserts():
    """A nonzero inside a branch of torch.cond: the branch's graph gets the asserts of its unbacked
    size, as torch._dynamo runs its pass on each graph the frame's holds."""
    def branchy(x):
        return torch.cond(x.sum() > 0, lambda a: a.nonzero().sum().reshape(1).float(),
                          lambda a: a.sum().reshape(1), (x,))

    def subgraph_codes(engine_compile):
        codes = []

        def backend(gm, example_inputs):
            codes.extend(m.code for m in gm.children() if isinstance(m, torch.fx.GraphModule))
            return gm.forward

        compiled = engine_compile(branchy, backend)
        for x in _VECTORS:
            torch.testing.assert_close(compiled(x), branchy(x))
        return codes

    with torch._dynamo.config.patch(**_CAPTURE_ALL):
        torch._dynamo.reset()
        theirs = subgraph_codes(lambda f, b: torch.compile(f, backend=b))
        pyframe.reset()
        ours = subgraph_codes(lambda f, b: pyframe.optimize(b)(f))
    def asserts(code):  # (the branches' placeholders are printed otherwise: `l_x__1 = l_x_` in Dynamo's)
        return [line.strip() for line in code.splitlines() if "sym_size" in line or "_assert_scalar" in line
                or line.strip().startswith(("ge =", "le ="))]

    assert [asserts(code) for code in ours] == [asserts(code) for code in theirs]
    assert "_assert_scalar" in ours[0]


def test_a_failing_runtime_assert_raises_eagers_error():
    """A value read from a tensor breaking what the trace assumed of it (`u >= 0` for torch.zeros(u),
    a torch._check): the graph's assert fails and the frame runs again as Python, which raises
    eager's own error (torch._dynamo raises its assert's message instead)."""
    with torch._dynamo.config.patch(**_CAPTURE_ALL):
        for fn in (check_non_negative, item_as_a_size):
            pyframe.reset()
            compiled = pyframe.optimize(CountingBackend())(fn)
            compiled(_POSITIVE[0])
            negative = -_POSITIVE[0]
            with pytest.raises(RuntimeError) as expected:
                fn(negative)
            with pytest.raises(RuntimeError) as raised:
                compiled(negative)
            assert str(raised.value) == str(expected.value)


@torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True)
def nonzero_under_a_patching_decorator(x):
    return x.nonzero() + 1


def test_a_flag_patched_by_a_decorator_applies_to_the_frame_it_wraps():
    graphs = _same_graphs_as_dynamo(nonzero_under_a_patching_decorator, _VECTORS[:1])
    assert "nonzero" in _ops(graphs)


def test_a_break_at_a_data_dependent_op_names_the_flag_that_captures_it():
    with torch._dynamo.config.patch(**_CAPTURE_NONE):
        reasons = pyframe.explain(nonzero_method)(_VECTORS[0]).break_reasons
    assert "capture_dynamic_output_shape_ops" in str(reasons[0])


_CAPTURED_BY = {"capture_scalar_outputs": (check_non_negative, _POSITIVE, "item"),
                "capture_dynamic_output_shape_ops": (unique, _VECTORS, "unique")}


@pytest.mark.parametrize("setting", list(_CAPTURED_BY))
def test_pyframe_config_captures_as_dynamos_setting_of_that_name(monkeypatch, setting):
    """pyframe.config.capture_scalar_outputs / capture_dynamic_output_shape_ops (False by default,
    as torch's): pyframe's graphs with pyframe's setting on and torch._dynamo.config's off are
    torch._dynamo's with its setting on; off, the op breaks the graph as under torch._dynamo."""
    fn, inputs, op = _CAPTURED_BY[setting]
    assert getattr(pyframe.config, setting) is False
    backend = CountingBackend()
    torch._dynamo.reset()
    with torch._dynamo.config.patch(**{**_CAPTURE_NONE, setting: True}):
        for x in inputs:
            torch.compile(fn, backend=backend)(x)
    theirs = [g.code for g in backend.graphs]
    with torch._dynamo.config.patch(**_CAPTURE_NONE):
        monkeypatch.setattr(pyframe.config, setting, True)
        pyframe.reset()
        backend = CountingBackend()
        compiled = pyframe.optimize(backend)(fn)
        for x in inputs:
            torch.testing.assert_close(compiled(x), fn(x))
        assert [g.code for g in backend.graphs] == theirs and op in _ops(backend.graphs)
        monkeypatch.setattr(pyframe.config, setting, False)
        assert op not in _ops(_same_graphs_as_dynamo(fn, inputs[:1]))


def test_pyframe_config_capture_settings_take_a_bool():
    with pytest.raises(TypeError, match="capture_scalar_outputs takes True or False"):
        pyframe.config.capture_scalar_outputs = 1

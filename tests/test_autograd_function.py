"""torch.autograd.Function.apply under pyframe (pyframe/translator/variables/autograd_function.py).

The corpus (tests/cases/autograd_functions.py, autograd_function_breaks.py) compares forward
results and graphs with torch._dynamo; here the gradients are checked too: after `.backward()`,
every input's and parameter's `.grad` must equal eager's, on the first call and on a cache hit, so
the custom backward (not the derivative of forward's ops) is the one autograd ran.
"""
from __future__ import annotations

import contextlib
import io

import pytest
import torch

import pyframe
from pyframe import convert_frame
from pyframe.debug.cases import Case, load_cases
from pyframe.debug.compare import CountingBackend, optimize_with, reset_engines, run_case
from tests.cases.autograd_functions import TripleGrad

CASES = load_cases(["tests.cases.autograd_functions", "tests.cases.autograd_function_breaks"])


def _tensors(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in _tensors(item)]
    return []


def _result_and_grads(fn, args: tuple, engine: str = "eager", backend=None):
    """Call fn (as `engine` runs it) and backpropagate the sum of its differentiable outputs:
    the result and the gradients of the tensor arguments and of fn's parameters."""
    compiled = optimize_with(engine, fn, backend or CountingBackend())
    with contextlib.redirect_stdout(io.StringIO()):  # the break cases print
        result = compiled(*args)
        outputs = [t for t in _tensors(result) if t.requires_grad]
        if outputs:
            sum(t.sum() for t in outputs).backward()
    params = list(fn.parameters()) if isinstance(fn, torch.nn.Module) else []
    grads = [a.grad for a in args if isinstance(a, torch.Tensor)] + [p.grad for p in params]
    return result, grads


def _assert_same(actual, expected) -> None:
    for a, e in zip(_tensors(actual), _tensors(expected), strict=True):
        torch.testing.assert_close(a, e)


@pytest.mark.parametrize("case", [pytest.param(c, id=c.qualname) for c in CASES])
def test_gradients_equal_eager_on_first_call_and_cache_hit(case: Case) -> None:
    eager_result, eager_grads = _result_and_grads(case.make_fn(), case.make_inputs().args)
    backend = CountingBackend()
    fn = case.make_fn()
    for call in ("first call", "cache hit"):
        for param in (fn.parameters() if isinstance(fn, torch.nn.Module) else ()):
            param.grad = None
        result, grads = _result_and_grads(fn, case.make_inputs().args, "pyframe", backend)
        _assert_same(result, eager_result)
        assert len(grads) == len(eager_grads)
        for got, want in zip(grads, eager_grads):
            assert (got is None) == (want is None), call
            if want is not None:
                torch.testing.assert_close(got, want, msg=lambda m: f"{call}: {m}")
        if call == "first call":
            graphs = len(backend.graphs)
    assert len(backend.graphs) == graphs, "a cache hit compiled again"


@pytest.mark.parametrize("case", [pytest.param(c, id=c.qualname) for c in CASES])
def test_graph_count_equals_dynamo(case: Case) -> None:
    mine, dynamo = run_case(case, "pyframe", timing=False), run_case(case, "dynamo", timing=False)
    if case.difference is None:
        assert mine.graph_count == dynamo.graph_count, (mine.op_sequences, dynamo.op_sequences)


# -- the custom backward is the one autograd runs --------------------------------------------------

Clone3 = TripleGrad  # forward is a clone; backward deliberately triples the gradient


def _clone3_twice(x):
    return (Clone3.apply(x) * 2).sum()


def test_custom_backward_gives_the_gradient_not_the_forward_ops() -> None:
    backend = CountingBackend()
    x = torch.randn(5, requires_grad=True)
    pyframe.optimize(backend)(_clone3_twice)(x).backward()
    torch.testing.assert_close(x.grad, torch.full((5,), 6.0))  # d(clone)/dx would give 2
    assert backend.graphs[0].ops == ("autograd_function_apply", "getitem", "mul", "sum")


def test_graph_holds_forward_and_backward_subgraphs_like_dynamo() -> None:
    """fwd_body/bwd_body are attributes of the compiled module, with the op's keyword arguments
    torch._dynamo gives it (which outputs are non-differentiable, which saved tensors came from
    ctx.save_for_backward)."""
    from tests.cases.autograd_functions import mark_non_differentiable

    def hop_calls(engine):
        modules = []

        def backend(gm, example_inputs):
            modules.append(gm)
            return gm.forward

        reset_engines()
        optimize_with(engine, mark_non_differentiable, backend)(torch.randn(7, requires_grad=True))
        (gm,) = modules
        (node,) = [n for n in gm.graph.nodes if n.op == "call_function" and "autograd_function_apply" in str(n.target)]
        fwd, bwd = (getattr(gm, a.target) for a in node.args[:2])
        return node, fwd, bwd

    mine, fwd, bwd = hop_calls("pyframe")
    theirs, dyn_fwd, dyn_bwd = hop_calls("dynamo")
    assert [a.target for a in mine.args[:2]] == ["fwd_body_0", "bwd_body_0"]
    assert dict(mine.kwargs) == dict(theirs.kwargs) == {"non_differentiable_idx": [1],
                                                        "saved_for_backward_idx": [0, 1]}
    assert len(mine.args) == len(theirs.args)

    def ops(gm):
        return [str(n.target) for n in gm.graph.nodes if n.op in ("call_function", "call_method")]

    assert ops(fwd) == ops(dyn_fwd)
    # torch._dynamo's bwd_body switches grad mode off; pyframe's runs in the mode autograd gives it
    # (see test_double_backward_differentiates_the_custom_backward)
    grad_mode = str(torch._C._set_grad_enabled)
    assert ops(bwd) == [op for op in ops(dyn_bwd) if op != grad_mode]
    reset_engines()


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2 * x * grad


class ExpSavingOutput(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * y


@pytest.mark.parametrize("function", [Square, ExpSavingOutput])
def test_double_backward_differentiates_the_custom_backward(function) -> None:
    """`create_graph=True` (a gradient penalty): autograd runs backward with grad mode on and
    records it, so the gradient can itself be differentiated (through a saved input, or a saved
    output, whose history is the apply's). bwd_body must not switch grad mode off, or the
    penalty's gradient would be silently missing."""
    def penalized(fn, x):
        y = fn(x)
        (gx,) = torch.autograd.grad(y.sum(), x, create_graph=True)
        (gx.pow(2).sum() + y.sum()).backward()
        return gx

    def apply(x):
        return function.apply(x)

    expected = torch.tensor([0.5, 1.0, 2.0], requires_grad=True)
    penalized(apply, expected)
    backend = CountingBackend()
    x = expected.detach().clone().requires_grad_()
    gx = penalized(pyframe.optimize(backend)(apply), x)
    assert backend.graphs[0].ops == ("autograd_function_apply", "getitem")
    assert gx.requires_grad
    torch.testing.assert_close(x.grad, expected.grad)


def test_a_module_parameter_gets_the_custom_gradient() -> None:
    torch.manual_seed(0)
    linear = torch.nn.Linear(3, 2)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = linear

        def forward(self, x):
            return Clone3.apply(self.linear(x)).sum()

    net = Net()
    pyframe.optimize("eager")(net)(torch.ones(4, 3)).backward()
    torch.testing.assert_close(linear.bias.grad, torch.full((2,), 12.0))  # 3 * 4 rows


class FromAList(torch.autograd.Function):
    """Saves and returns tensors passed inside a list (not inputs autograd sees), and returns one
    more gradient than inputs (a trailing None, which autograd ignores)."""

    @staticmethod
    def forward(ctx, x, tensors):
        ctx.save_for_backward(tensors[0])
        return x * 2, tensors[1]

    @staticmethod
    def backward(ctx, grad, grad_passed):
        (w,) = ctx.saved_tensors
        return grad * w, None, None


def _from_a_list(x):
    doubled, passed = FromAList.apply(x, [x.cos(), x.sin()])
    return doubled + passed


def test_tensors_in_a_list_argument_are_extra_inputs_without_gradient() -> None:
    x = torch.randn(4, requires_grad=True)
    expected, (expected_grad,) = _result_and_grads(_from_a_list, (x,))
    backend = CountingBackend()
    result, (grad,) = _result_and_grads(_from_a_list, (x.detach().clone().requires_grad_(),), "pyframe", backend)
    torch.testing.assert_close(result, expected)
    torch.testing.assert_close(grad, expected_grad)
    assert backend.graphs[0].ops == ("cos", "sin", "autograd_function_apply", "getitem", "getitem", "add")


# -- guards and recompiles ---------------------------------------------------------------------------

def test_requires_grad_decides_between_the_op_and_the_inlined_forward() -> None:
    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(_clone3_twice)
    x = torch.randn(4)
    torch.testing.assert_close(compiled(x), _clone3_twice(x))
    y = torch.randn(4, requires_grad=True)
    compiled(y).backward()
    torch.testing.assert_close(y.grad, torch.full((4,), 6.0))
    assert [g.ops for g in backend.graphs] == [("clone", "mul", "sum"),
                                                ("autograd_function_apply", "getitem", "mul", "sum")]
    with torch.no_grad():
        compiled(y)
    assert len(backend.graphs) == 3  # grad mode is guarded too
    assert backend.graphs[2].ops == ("clone", "mul", "sum")


# -- what forward does beyond its result -------------------------------------------------------------

LOG: list = []
PARAM = torch.nn.Parameter(torch.ones(3))


class Logs(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        LOG.append("forward")
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 5


def test_keyword_only_parameter_left_to_its_default_is_traced() -> None:
    backend = CountingBackend()
    x = torch.randn(3, requires_grad=True)
    pyframe.optimize(backend)(lambda t: KeywordOnly.apply(t))(x).sum().backward()
    assert backend.graphs[0].ops == ("autograd_function_apply", "getitem")
    torch.testing.assert_close(x.grad, torch.full((3,), 4.0))


def test_a_mutation_in_forward_happens_once_per_call() -> None:
    LOG.clear()
    compiled = pyframe.optimize("eager")(lambda x: Logs.apply(x))
    x = torch.randn(3, requires_grad=True)
    compiled(x).sum().backward()
    compiled(x)
    assert LOG == ["forward", "forward"]
    torch.testing.assert_close(x.grad, torch.full((3,), 5.0))


class TimesParameter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * PARAM

    @staticmethod
    def backward(ctx, grad):
        return grad


def test_forward_inlined_with_a_parameter_keeps_eager_requires_grad() -> None:
    """No input requires grad, but forward multiplies by a parameter: eager's forward runs under
    no_grad, so the output does not require grad. Inlining forward with grad on would make it
    require grad: pyframe breaks at the apply instead."""
    x = torch.randn(3)
    out = pyframe.optimize("eager")(lambda t: TimesParameter.apply(t) + 1)(x)
    assert not out.requires_grad
    torch.testing.assert_close(out, x + 1)


class AsksGradMode(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * (100 if torch.is_grad_enabled() else 2)

    @staticmethod
    def backward(ctx, grad):
        return grad * 4


class EnablesGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        with torch.enable_grad():
            y = x * 2
        return y + 1

    @staticmethod
    def backward(ctx, grad):
        return grad * 4


@pytest.mark.parametrize("requires_grad", [False, True])
@pytest.mark.parametrize("function", [AsksGradMode, EnablesGrad])
def test_forward_sees_grad_mode_off_as_in_eager(function, requires_grad: bool) -> None:
    """Eager runs forward under no_grad, whether it is inlined (no input requires grad) or traced
    into fwd_body; grad mode after the apply is the caller's again."""
    def fn(x):
        return function.apply(x), torch.is_grad_enabled()

    x = torch.randn(3, requires_grad=requires_grad)
    expected = fn(x)
    result = pyframe.optimize("eager")(fn)(x)
    torch.testing.assert_close(result[0], expected[0])
    assert result[1] is True and torch.is_grad_enabled()
    assert result[0].requires_grad == expected[0].requires_grad


# -- what is not traced breaks cleanly ---------------------------------------------------------------

SAVED: list = []


class Holder:
    pass


class SavesForForward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_forward(x)
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 4


class StoresIntermediate(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x * 2
        SAVED.append(y)
        return y + 1

    @staticmethod
    def backward(ctx, grad):
        return grad * 4


class StoresOnArgument(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, holder):
        holder.t = x * 2
        return x + 1

    @staticmethod
    def backward(ctx, grad):
        return grad * 4, None


class BackwardMutates(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        SAVED.append("backward")
        return grad * 4


class BackwardRaises(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        raise ValueError("no backward")


class KeywordOnly(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, *, k=2.0):
        return x * k

    @staticmethod
    def backward(ctx, grad):
        return grad * 4


class ReturnsList(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return [x * 2]

    @staticmethod
    def backward(ctx, grad):
        return grad * 4


def _stores_on_argument(x):
    holder = Holder()
    y = StoresOnArgument.apply(x, holder)
    return y + holder.t


def _backward_raises_caught(x):
    try:
        return BackwardRaises.apply(x) + 1
    except ValueError:
        return x * 100


UNTRACED = {
    "save_for_forward": lambda x: SavesForForward.apply(x.sin()),
    "forward_tensor_stored_in_a_global_list": lambda x: StoresIntermediate.apply(x.sin()),
    "forward_tensor_stored_on_an_argument": _stores_on_argument,
    "backward_mutates_a_global": lambda x: BackwardMutates.apply(x.sin()),
    "backward_raises": _backward_raises_caught,
    "keyword_only_argument": lambda x: KeywordOnly.apply(x.sin(), k=3.0),
    "forward_returns_a_list": lambda x: ReturnsList.apply(x.sin())[0],
}


@pytest.mark.parametrize("name", list(UNTRACED))
def test_untraced_features_break_with_eager_results_and_gradients(name: str) -> None:
    fn = UNTRACED[name]
    x = torch.randn(4, requires_grad=True)
    SAVED.clear()
    try:
        expected, expected_grads = _result_and_grads(fn, (x,))
    except Exception as e:  # eager raises (in apply or in backward): pyframe raises the same
        with pytest.raises(type(e)):
            _result_and_grads(fn, (x.detach().clone().requires_grad_(),), "pyframe")
        return
    eager_saved = len(SAVED)
    SAVED.clear()
    result, grads = _result_and_grads(fn, (x.detach().clone().requires_grad_(),), "pyframe")
    _assert_same(result, expected)
    torch.testing.assert_close(grads[0], expected_grads[0])
    assert len(SAVED) == eager_saved
    records = [r for rs in convert_frame.records.values() for r in rs]
    assert not [r.reason for r in records if r.reason.startswith("internal error")]
    assert any(r.error is not None for r in records), "expected a graph break"


# -- forward run for real (apply not traced), its frame compiled ----------------------------------

class SavesAndMarks(torch.autograd.Function):
    """A forward that uses the context as eager code does: saves an input and an intermediate,
    marks an output non-differentiable, keeps a number on ctx."""

    @staticmethod
    def forward(ctx, x, y):
        h = x.sin()
        ctx.save_for_backward(x, h)
        ctx.scale = 3.0
        flag = (y > 0).float()
        ctx.mark_non_differentiable(flag)
        return h * y, flag

    @staticmethod
    def backward(ctx, grad, grad_flag):
        x, h = ctx.saved_tensors
        return grad * x.cos() * ctx.scale, grad * h


def _apply_same_tensor_twice(x):
    y = x.exp()
    out, flag = SavesAndMarks.apply(y, y)  # (the same tensor twice: apply runs for real)
    return out + flag


def _breaks(engine: str) -> int:
    from pyframe.debug.compare import count_breaks
    return count_breaks(engine)


def test_forward_run_for_real_saves_for_backward_in_its_graph_as_dynamo() -> None:
    """The context of an apply run for real is a C object: ctx.save_for_backward(...) (a store
    into its `to_save` getset) is replayed after forward's graph, not a graph break."""
    x = torch.randn(4, requires_grad=True)
    expected, expected_grads = _result_and_grads(_apply_same_tensor_twice, (x,))
    counts = {}
    for engine in ("dynamo", "pyframe"):
        reset_engines()
        backend = CountingBackend()
        for _ in range(2):  # first call, cache hit
            result, grads = _result_and_grads(_apply_same_tensor_twice, (x.detach().clone().requires_grad_(),),
                                              engine, backend)
            _assert_same(result, expected)
            torch.testing.assert_close(grads[0], expected_grads[0])
        counts[engine] = (len(backend.graphs), _breaks(engine))
        if engine == "pyframe":
            records = [r for rs in convert_frame.records.values() for r in rs]
            assert [r.status for r in records if r.name.startswith("forward")] == ["compiled"]
            assert all(r.error is None for r in records if r.name.startswith("forward"))
    reset_engines()
    assert counts["pyframe"] == counts["dynamo"] == (3, 1)

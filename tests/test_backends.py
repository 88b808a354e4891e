"""Backends: names and their lookup order, the seeds' backends, failure handling, "onnxrt", training.

The seeds' backends are imported from examples/ (the scripts a reader runs), so the test and the
script cannot drift apart. Every result is compared with eager; graphs and warnings are counted.
The onnxrt tests need the onnx extra and are skipped without it, except the one about its absence.
"""
from __future__ import annotations

import importlib.util
import itertools
import sys
import textwrap
import warnings

import pytest
import torch

import pyframe
from examples import (composable_backends, debug_backend, densenet_debug, dropout_rewrite, onnxrt_training,
                      speedy_backend)
from pyframe.backends import decompositions, onnxrt, registry
from pyframe.debug.cases import load_cases

CASES = {c.name: c for c in load_cases(["tests.cases.models", "tests.cases.modules", "tests.cases.graph_breaks"])}
HAVE_ONNX = all(importlib.util.find_spec(name) for name in onnxrt.ONNX_PACKAGES)
needs_onnx = pytest.mark.skipif(not HAVE_ONNX, reason='needs the onnx extra: pip install -e ".[onnx]"')


class Recorder:
    """A backend that keeps each graph and runs it as it is."""

    def __init__(self):
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm.forward


def targets(gm: torch.fx.GraphModule) -> list[str]:
    return [n.target if isinstance(n.target, str) else n.target.__name__
            for n in gm.graph.nodes if n.op.startswith("call")]


def pyframe_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if str(w.message).startswith("pyframe:")]


# --------------------------------------------------------------------------------------------------
# Names


def test_builtin_names_are_listed():
    names = pyframe.list_backends()
    for name in ("eager", "print", "aot_eager", "inductor", "onnxrt"):
        assert name in names


def test_unknown_name_is_a_value_error_listing_known_names():
    with pytest.raises(ValueError, match="unknown backend 'no_such_backend'; known backends: .*eager.*onnxrt"):
        pyframe.optimize("no_such_backend")
    assert issubclass(pyframe.exc.InvalidBackend, ValueError)


def test_registered_name_compiles(monkeypatch):
    monkeypatch.setattr(registry, "_BACKENDS", dict(registry._BACKENDS))  # the registration is undone
    recorder = Recorder()
    pyframe.register_backend(recorder, name="recorded_for_test")
    assert "recorded_for_test" in pyframe.list_backends()
    x, y = torch.randn(10), torch.randn(10)
    torch.testing.assert_close(pyframe.optimize("recorded_for_test")(debug_backend.fn.__wrapped__)(x, y),
                               torch.cos(x) + torch.sin(y))
    assert [targets(gm) for gm in recorder.graphs] == [["cos", "sin", "add"]]


def test_names_resolve_in_order_pyframe_then_entry_points_then_torch(tmp_path, monkeypatch):
    """A throwaway distribution (a dist-info directory on sys.path) declares three entry points."""
    (tmp_path / "throwaway_backends.py").write_text(textwrap.dedent("""
        graphs = []

        def counting(gm, example_inputs):
            graphs.append(gm)
            return gm.forward

        def shadows_torch(gm, example_inputs):
            return gm.forward

        def shadowed_by_pyframe(gm, example_inputs):
            return gm.forward
    """))
    dist_info = tmp_path / "throwaway_backends-0.1.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: throwaway-backends\nVersion: 0.1\n")
    (dist_info / "entry_points.txt").write_text(
        "[pyframe_backends]\n"
        "throwaway_counting = throwaway_backends:counting\n"
        "aot_eager = throwaway_backends:shadows_torch\n"
        "eager = throwaway_backends:shadowed_by_pyframe\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "throwaway_backends", raising=False)

    assert "throwaway_counting" in pyframe.list_backends()
    x, y = torch.randn(10), torch.randn(10)
    result = pyframe.optimize("throwaway_counting")(debug_backend.fn.__wrapped__)(x, y)
    torch.testing.assert_close(result, torch.cos(x) + torch.sin(y))
    assert len(sys.modules["throwaway_backends"].graphs) == 1
    assert pyframe.lookup_backend("aot_eager") is sys.modules["throwaway_backends"].shadows_torch
    assert pyframe.lookup_backend("eager") is registry._BACKENDS["eager"]


def test_print_backend_prints_each_graph_as_a_table(capsys):
    x, y = torch.randn(10), torch.randn(10)
    result = pyframe.optimize("print")(debug_backend.fn.__wrapped__)(x, y)
    torch.testing.assert_close(result, torch.cos(x) + torch.sin(y))
    out = capsys.readouterr().out
    assert out.count("opcode") == 1
    for column in ("placeholder", "call_function", "<built-in method cos", "<built-in method sin", "output"):
        assert column in out


def test_aot_eager_by_name_trains():
    model, reference = CASES["MLPTrain"].make_fn(), CASES["MLPTrain"].make_fn()
    x = CASES["MLPTrain"].make_inputs().args[0]
    out = pyframe.optimize("aot_eager")(model)(x)
    expected = reference(x)
    torch.testing.assert_close(out, expected)
    out.sum().backward()
    expected.sum().backward()
    for p, q in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad)


@pytest.mark.slow
def test_inductor_by_name():
    case = CASES["MLPEval"]
    model, x = case.make_fn(), case.make_inputs().args[0]
    with torch.no_grad():
        torch.testing.assert_close(pyframe.optimize("inductor")(model)(x), model(x), rtol=1e-4, atol=1e-4)


# --------------------------------------------------------------------------------------------------
# The seeds' backends (examples/)


def test_debugging_backend_prints_function_module_and_toy_example_graphs(capsys):
    x, y = torch.randn(10), torch.randn(10)
    torch.testing.assert_close(debug_backend.fn(x, y), torch.cos(x) + torch.sin(y))
    assert capsys.readouterr().out.count("my_compiler() called with FX graph:") == 1

    mod = debug_backend.MockModule()
    torch.testing.assert_close(pyframe.optimize(debug_backend.my_compiler)(mod)(x), torch.relu(torch.cos(x)))
    out = capsys.readouterr().out
    assert out.count("my_compiler() called with FX graph:") == 1
    assert "cos" in out and "relu" in out

    eager_toy = debug_backend.toy_example.__wrapped__
    torch.manual_seed(0)
    for _ in range(100):
        a, b = torch.randn(10), torch.randn(10)
        torch.testing.assert_close(debug_backend.toy_example(a, b), eager_toy(a, b))
    tables = capsys.readouterr().out.split("my_compiler() called with FX graph:")[1:]
    assert len(tables) == 3  # up to the branch, then one resume graph per branch taken
    assert all(op in tables[0] for op in ("abs", "add", "truediv", "sum", "lt"))
    assert all("mul" in table and "abs" not in table for table in tables[1:])


def test_densenet_under_the_debugging_backend(capsys):
    case = CASES["TinyDenseNetTrain"]
    model, reference = case.make_fn(), case.make_fn()
    x = case.make_inputs().args[0]
    out = pyframe.optimize(densenet_debug.custom_backend)(model)(x)
    torch.testing.assert_close(out, reference(x))
    torch.testing.assert_close(model.state_dict(), reference.state_dict())  # BatchNorm's running stats
    printed = capsys.readouterr().out
    assert printed.count("custom backend called with FX graph:") == 1  # the whole forward, one graph
    assert "cat" in printed and "batch_norm" in printed and "conv2d" in printed


@pytest.mark.parametrize("compiler", [speedy_backend.optimize_for_inference_compiler,
                                      speedy_backend.optimize_for_inference_script_compiler])
def test_speedy_backend(compiler):
    made = []

    def spy(gm, example_inputs):
        made.append(compiler(gm, example_inputs))
        return made[-1]

    torch.manual_seed(0)
    model = speedy_backend.SmallConvNet().eval()
    x = torch.randn(4, 3, 32, 32)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # TorchScript's remarks on GraphModule attributes
        optimized = pyframe.optimize(spy)(model)
        torch.testing.assert_close(optimized(x), model(x), rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(optimized(x), model(x), rtol=1e-4, atol=1e-4)
    assert len(made) == 1 and isinstance(made[0], torch.jit.ScriptModule)


@pytest.mark.parametrize("rewrite", [dropout_rewrite.my_backend_in_place, dropout_rewrite.my_backend_on_copy])
def test_dropout_rewriting_backend(rewrite):
    seen = []

    def spy(gm, example_inputs):
        before = targets(gm)
        fn = rewrite(gm, example_inputs)
        seen.append((before, targets(gm)))
        return fn

    torch.manual_seed(0)
    model = dropout_rewrite.MyModule()  # training mode: dropout would be random
    x = torch.randn(10, 100)
    optimized = pyframe.optimize(spy)(model)
    torch.testing.assert_close(optimized(x), model._linear(x))
    torch.testing.assert_close(optimized(x), model._linear(x))
    assert len(seen) == 1
    before, after = seen[0]
    assert before == ["linear", "dropout"]
    if rewrite is dropout_rewrite.my_backend_in_place:
        assert after == ["linear"]
    else:
        assert after == before  # the copy was edited, not the graph handed to the backend
        assert [n.target.__name__ for n in dropout_rewrite.new_graph.nodes if n.op == "call_function"] == ["linear"]


def test_composable_backends_fall_through_to_the_first_that_works(capsys):
    def raises(gm, example_inputs):
        raise RuntimeError("no kernels for this graph")

    def declines(gm, example_inputs):
        return None

    works = Recorder()
    log = []
    x, w = torch.randn(4, 8), torch.randn(8, 8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = pyframe.optimize(composable_backends.composed(raises, declines, works, log=log))(
            composable_backends.mlp_step)(x, w)
    torch.testing.assert_close(result, composable_backends.mlp_step(x, w))
    assert log == ["Recorder"] and len(works.graphs) == 1
    assert pyframe_warnings(caught) == []  # the composed backend succeeded: nothing for pyframe to report
    out = capsys.readouterr().out
    assert "raises failed: RuntimeError: no kernels" in out and "declines returned None" in out

    pyframe.reset()
    log.clear()
    result = pyframe.optimize(composable_backends.composed(raises, declines, log=log))(
        composable_backends.mlp_step)(x, w)
    torch.testing.assert_close(result, composable_backends.mlp_step(x, w))
    assert log == ["gm.forward"]


# --------------------------------------------------------------------------------------------------
# Failure handling


def _raises(gm, example_inputs):
    raise RuntimeError("no kernels today")


def _returns_none(gm, example_inputs):
    return None


def _returns_int(gm, example_inputs):
    return 42


FAILING = [(_raises, "RuntimeError: no kernels today"), (_returns_none, "returned None"),
           (_returns_int, "returned a non-callable int")]


@pytest.mark.parametrize("backend, reason", FAILING, ids=["raises", "none", "non_callable"])
def test_failing_backend_warns_once_and_runs_eagerly(backend, reason):
    fn = debug_backend.toy_example.__wrapped__
    a, b = torch.randn(10), torch.randn(10).abs()
    optimized = pyframe.optimize(backend)(fn)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.testing.assert_close(optimized(a, b), fn(a, b))
        torch.testing.assert_close(optimized(a, b), fn(a, b))  # a cache hit: no second warning
    messages = pyframe_warnings(caught)
    # toy_example makes two graphs on this path (before the branch, and its resume): one warning each
    assert len(messages) == 2
    assert all(backend.__name__ in m and reason in m and "running the graph eagerly" in m for m in messages)


@pytest.mark.parametrize("backend, reason", FAILING, ids=["raises", "none", "non_callable"])
def test_failing_backend_raises_when_errors_are_not_suppressed(backend, reason, monkeypatch):
    monkeypatch.setattr(pyframe.config, "suppress_errors", False)
    with pytest.raises(pyframe.BackendCompilerFailed, match=backend.__name__) as info:
        pyframe.optimize(backend)(debug_backend.fn.__wrapped__)(torch.randn(3), torch.randn(3))
    assert info.value.__cause__ is not None and reason.split(": ")[-1] in str(info.value.__cause__)


def test_error_at_run_time_of_a_backend_warns_and_gives_eagers_result(monkeypatch):
    """A compiled graph that raises where the frame run as Python does not (the backend's kernel is
    at fault) does not change the user's result: the frame runs again as Python (pyframe/rerun.py),
    whose side effects are eager's, and pyframe warns naming the backend (suppress_errors=False:
    BackendCompilerFailed, the kernel's error chained)."""
    calls, side_effects = [], []

    def fails_when_run(gm, example_inputs):
        def run(*args):
            calls.append(args)
            raise ValueError("bad kernel")
        return run

    def fn(x):
        side_effects.append(x)
        return x.sin() + 1

    optimized = pyframe.optimize(fails_when_run)(fn)
    for n in (1, 2):
        x = torch.randn(3)
        with pytest.warns(UserWarning, match="fails_when_run.*bad kernel"):
            result = optimized(x)
        torch.testing.assert_close(result, x.sin() + 1)
        assert len(calls) == n and len(side_effects) == n and side_effects[-1] is x  # once, as eager

    monkeypatch.setattr(pyframe.config, "suppress_errors", False)
    with pytest.raises(pyframe.BackendCompilerFailed, match="fails_when_run") as info:
        optimized(torch.randn(3))
    assert isinstance(info.value.__cause__, ValueError) and len(side_effects) == 3


# --------------------------------------------------------------------------------------------------
# Training through aot_autograd (no ONNX needed)


def _boxed_forward_compiler(gm, example_inputs):
    from functorch.compile import make_boxed_func
    return make_boxed_func(gm.forward)


def _train_losses(engine: str, backend) -> list[float]:
    model = onnxrt_training.fresh_mlp()
    if engine == "pyframe":
        step = pyframe.optimize(backend)(model)
    else:
        step = torch.compile(model, backend=backend, dynamic=False)
    return onnxrt_training.train(model, step)


@pytest.fixture(scope="module")
def eager_losses() -> list[float]:
    model = onnxrt_training.fresh_mlp()
    return onnxrt_training.train(model, model)


@pytest.mark.parametrize("engine", ["pyframe", "torch.compile"])
@pytest.mark.parametrize("which", ["aot_autograd_boxed_forward", "aot_eager"])
def test_seed_training_loop_through_aot_autograd(engine, which, eager_losses):
    from torch._dynamo.backends.common import aot_autograd

    graphs = []

    def counting(gm, example_inputs):
        graphs.append(gm)
        return _boxed_forward_compiler(gm, example_inputs)

    backend = aot_autograd(fw_compiler=counting) if which == "aot_autograd_boxed_forward" else "aot_eager"
    losses = _train_losses(engine, backend)
    torch.testing.assert_close(losses, eager_losses, rtol=1e-5, atol=0.0)
    if which == "aot_autograd_boxed_forward" and engine == "pyframe":
        assert len(graphs) == 4  # forward and backward, for batches of 5 and for the last one of 2


# --------------------------------------------------------------------------------------------------
# "onnxrt"


def test_missing_onnx_packages_name_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # `import onnxruntime` now raises ImportError
    with pytest.raises(ImportError, match=r'onnxruntime.*pip install -e "\.\[onnx\]"') as info:
        pyframe.optimize("onnxrt")
    assert isinstance(info.value, pyframe.exc.PyframeError)

    # Called by another backend (past optimize's check), it is one failing graph like any other.
    def via_onnxrt(gm, example_inputs):
        return onnxrt.onnxrt(gm, example_inputs)

    x, y = torch.randn(10), torch.randn(10)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.testing.assert_close(pyframe.optimize(via_onnxrt)(debug_backend.fn.__wrapped__)(x, y),
                                   torch.cos(x) + torch.sin(y))
    messages = pyframe_warnings(caught)
    assert len(messages) == 1 and "via_onnxrt" in messages[0] and 'pip install -e ".[onnx]"' in messages[0]


@pytest.fixture
def onnx_graphs(monkeypatch) -> list:
    """Every OnnxGraph the "onnxrt" backend makes, to check that ONNX Runtime ran them."""
    made = []
    compile_graph = onnxrt.onnx_graph_compiler

    def recording(gm, example_inputs):
        compiled = compile_graph(gm, example_inputs)
        made.append(compiled.onnx_graph)
        return compiled

    monkeypatch.setattr(onnxrt, "onnx_graph_compiler", recording)
    return made


@needs_onnx
def test_onnxrt_inference(onnx_graphs):
    case = CASES["SequentialMLP"]
    model, x = case.make_fn(), case.make_inputs().args[0]
    optimized = pyframe.optimize("onnxrt")(model)
    with torch.no_grad():
        torch.testing.assert_close(optimized(x), model(x), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(optimized(x), model(x), rtol=1e-5, atol=1e-5)
    assert len(onnx_graphs) == 1 and onnx_graphs[0].calls == 2


@needs_onnx
def test_compile_onnx_is_a_backend_by_itself():
    case = CASES["SequentialMLP"]
    model, x = case.make_fn(), case.make_inputs().args[0]
    made = []

    def spy(gm, example_inputs):
        made.append(onnxrt.compile_onnx(gm, example_inputs))
        return made[-1]

    with torch.no_grad():
        torch.testing.assert_close(pyframe.optimize(spy)(model)(x), model(x), rtol=1e-5, atol=1e-5)
    assert len(made) == 1 and made[0].calls == 1


@needs_onnx
def test_onnxrt_trains_the_seed_mlp_like_eager(onnx_graphs, eager_losses):
    """Forward and backward in ONNX Runtime. dynamic=True is accepted; the last batch (2 rows, not 5)
    compiles a second entry, so there are two forward and two backward models."""
    model = onnxrt_training.fresh_mlp()
    losses = onnxrt_training.train(model, pyframe.optimize("onnxrt", dynamic=True)(model))
    torch.testing.assert_close(losses, eager_losses, rtol=1e-4, atol=0.0)
    assert len(onnx_graphs) == 4
    steps_of_5, steps_of_2 = 3 * (442 // 5), 3
    assert sorted(g.calls for g in onnx_graphs) == [steps_of_2, steps_of_2, steps_of_5, steps_of_5]


@needs_onnx
def test_onnxrt_trains_batchnorm_and_convolutions(onnx_graphs):
    """Training-mode BatchNorm updates its running statistics (aot_autograd turns the update into an
    output); the convolutions' backward is decomposed (decompositions.py)."""
    case = CASES["SmallConvNetTrain"]
    model, reference = case.make_fn(), case.make_fn()
    x = case.make_inputs().args[0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = pyframe.optimize("onnxrt")(model)(x)
        expected = reference(x)
        torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)
        out.square().sum().backward()
        expected.square().sum().backward()
    assert pyframe_warnings(caught) == []
    for (name, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-3, atol=1e-4, msg=name)
    torch.testing.assert_close(dict(model.named_buffers()), dict(reference.named_buffers()), rtol=1e-4, atol=1e-5)
    assert [g.calls for g in onnx_graphs] == [1, 1]  # the forward model and the backward model


@needs_onnx
def test_onnxrt_backward_that_cannot_be_exported_runs_eagerly_with_one_warning(monkeypatch):
    # avg_pool2d's backward with uncounted padding has no decomposition here and no ONNX translation.
    pool = torch.nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False)
    x = torch.randn(1, 2, 8, 8, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pyframe.optimize("onnxrt")(pool)(x).sum().backward()
    messages = pyframe_warnings(caught)
    assert len(messages) == 1 and "the backward graph of" in messages[0] and "avg_pool2d_backward" in messages[0]
    grad = x.grad
    x.grad = None
    pool(x).sum().backward()
    torch.testing.assert_close(grad, x.grad)

    pyframe.reset()
    monkeypatch.setattr(pyframe.config, "suppress_errors", False)
    with pytest.raises(pyframe.BackendCompilerFailed) as info:
        pyframe.optimize("onnxrt")(pool)(x).sum().backward()
    assert "avg_pool2d_backward" in str(info.value.__cause__)


@needs_onnx
def test_onnx_graph_compiler_is_boxed_and_keeps_none_outputs():
    def grads(x, w):
        return None, torch.relu(x @ w), None

    gm = torch.fx.symbolic_trace(grads)
    x, w = torch.randn(3, 4), torch.randn(4, 5)
    compiled = onnxrt.onnx_graph_compiler(gm, [x, w])
    assert compiled._boxed_call
    args = [x, w]
    first, middle, last = compiled(args)
    assert args == []  # boxed: the callee empties the argument list
    assert first is None and last is None
    torch.testing.assert_close(middle, torch.relu(x @ w))


@needs_onnx
def test_compile_onnx_refuses_a_graph_that_updates_its_input():
    def bump(counter, x):
        counter.add_(1)
        return x * 2

    with pytest.raises(NotImplementedError, match="updates its input"):
        onnxrt.compile_onnx(torch.fx.symbolic_trace(bump), [torch.zeros(()), torch.randn(3)])


# --------------------------------------------------------------------------------------------------
# The decompositions onnxrt adds


@pytest.mark.parametrize("dims, groups, stride, padding, dilation",
                         [(2, 1, 1, 1, 1), (2, 2, 2, 0, 1), (1, 1, 3, 1, 2), (3, 2, 2, 1, 1), (2, 4, 1, 2, 2)])
def test_convolution_backward_decomposition_matches_autograd(dims, groups, stride, padding, dilation):
    torch.manual_seed(0)
    x = torch.randn(2, 4, *[9] * dims, dtype=torch.float64, requires_grad=True)
    w = torch.randn(8, 4 // groups, *[3] * dims, dtype=torch.float64, requires_grad=True)
    b = torch.randn(8, dtype=torch.float64, requires_grad=True)
    st, pad, dil = [stride] * dims, [padding] * dims, [dilation] * dims
    y = torch.ops.aten.convolution(x, w, b, st, pad, dil, False, [0] * dims, groups)
    grad = torch.randn_like(y)
    expected = torch.autograd.grad(y, (x, w, b), grad)
    got = decompositions.convolution_backward(grad, x.detach(), w.detach(), [8], st, pad, dil, False,
                                              [0] * dims, groups, [True, True, True])
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e)


@pytest.mark.parametrize("kernel, stride, padding, count_pad", list(itertools.product((2, 3), ([], [2, 2]), (0, 1), (True,))))
def test_avg_pool2d_backward_decomposition_matches_autograd(kernel, stride, padding, count_pad):
    x = torch.randn(2, 3, 9, 8, dtype=torch.float64, requires_grad=True)
    args = ([kernel, kernel], stride, [padding, padding], False, count_pad, None)
    y = torch.ops.aten.avg_pool2d(x, *args)
    grad = torch.randn_like(y)
    (expected,) = torch.autograd.grad(y, x, grad)
    torch.testing.assert_close(decompositions.avg_pool2d_backward(grad, x.detach(), *args), expected)


def test_a_backend_returning_the_wrong_number_of_outputs_warns_once_and_runs_the_graph():
    pyframe.reset()

    def one_output_too_few(gm, example_inputs):
        return lambda *args: gm(*args)[:1]

    def f(x):
        return x + 1, x * 2

    opt = pyframe.optimize(one_output_too_few)(f)
    x = torch.ones(2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            torch.testing.assert_close(opt(x), f(x))
    messages = [str(w.message) for w in caught if "pyframe" in str(w.message)]
    assert len(messages) == 1 and "'one_output_too_few'" in messages[0] and "gave 1 outputs where the graph has 2" in messages[0]
    pyframe.reset()


def test_a_backend_returning_the_wrong_number_of_outputs_raises_when_errors_are_not_suppressed(monkeypatch):
    pyframe.reset()
    monkeypatch.setattr(pyframe.config, "suppress_errors", False)

    def f(x):
        return x + 1, x * 2

    opt = pyframe.optimize(lambda gm, ex: (lambda *args: gm(*args)[0]))(f)
    with pytest.raises(pyframe.BackendCompilerFailed, match="gave a Tensor where the graph has 2"):
        opt(torch.ones(2))
    pyframe.reset()

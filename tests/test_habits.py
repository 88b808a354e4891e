"""torch.compile's habits: what a torch.compile user writes does what torch.compile does, or fails at
once with a message that names the fix.

- `pyframe.compile` with torch.compile's signature; `pyframe.optimize` refusing what is not a backend;
- the optimized module side by side with torch.compile's OptimizedModule (backend "eager");
- a torch.compile'd function inside a pyframe region and the reverse: right results, and not one
  warning, log record or line on stderr from either engine.
"""
from __future__ import annotations

import contextlib
import copy
import io
import logging
import pickle
import warnings

import pytest
import torch
import torch._dynamo

import pyframe
from pyframe.exc import InvalidBackend, InvalidCompileOption


class Counting:
    """A backend that counts the graphs it is given (a plain function: deepcopy keeps it)."""

    def __init__(self):
        self.graphs = 0

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        return gm.forward


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x):
        return torch.relu(self.drop(self.lin(x)))


@pytest.fixture(autouse=True)
def _fresh():
    pyframe.reset()
    torch._dynamo.reset()
    yield
    pyframe.reset()
    torch._dynamo.reset()


# -- pyframe.compile ------------------------------------------------------------------------------

def test_compile_as_bare_decorator_uses_inductor_by_default():
    @pyframe.compile
    def fn(x):
        return torch.sin(x) + 1

    x = torch.randn(8)
    assert isinstance(fn, pyframe._C.CallbackScope)
    torch.testing.assert_close(fn(x), torch.sin(x) + 1)
    (record,) = pyframe.convert_frame.records_for(fn.__wrapped__.__code__)
    assert record.graphs[0].backend_name == "inductor" and record.graphs[0].error is None


def test_compile_with_arguments_as_decorator_and_call():
    counting = Counting()

    @pyframe.compile(backend=counting, fullgraph=True)
    def fn(x):
        return x.cos() * 2

    x = torch.randn(3)
    torch.testing.assert_close(fn(x), x.cos() * 2)
    assert counting.graphs == 1
    module = pyframe.compile(Net().eval(), backend=counting, dynamic=False)
    assert isinstance(module, pyframe.OptimizedModule)
    torch.testing.assert_close(module(torch.ones(2, 4)), module._orig_mod(torch.ones(2, 4)))
    assert counting.graphs == 2


def test_compile_fullgraph_raises_on_a_break():
    @pyframe.compile(backend="eager", fullgraph=True)
    def fn(x):
        print("break")
        return x + 1

    with pytest.raises(pyframe.Unsupported):
        fn(torch.ones(2))


def test_compile_disable_returns_the_model_untouched():
    def fn(x):
        return x + 1

    net = Net()
    assert pyframe.compile(fn, disable=True) is fn
    assert pyframe.compile(net, backend="eager", disable=True) is net
    assert pyframe.compile(disable=True)(fn) is fn


def test_compile_hands_mode_and_options_to_inductor_as_config_patches():
    from pyframe.backends.settings import BackendWithSettings

    seen = []
    settings = BackendWithSettings("inductor", "max-autotune-no-cudagraphs", None, None)
    assert settings.config_patches == torch._inductor.list_mode_options("max-autotune-no-cudagraphs")
    settings.fn = lambda gm, inputs, **kwargs: seen.append(kwargs) or gm.forward  # what reaches compile_fx
    fn = pyframe.optimize(settings)(lambda x: x * 3)
    torch.testing.assert_close(fn(torch.ones(2)), torch.full((2,), 3.0))
    assert seen == [{"config_patches": {"max_autotune": True, "coordinate_descent_tuning": True}}]
    options = BackendWithSettings("inductor", None, {"trace.enabled": False, "epilogue-fusion": True}, None)
    assert options.config_patches == {"trace.enabled": False, "epilogue_fusion": True}


def test_compile_with_options_runs_under_inductor():
    fn = pyframe.compile(lambda x: torch.relu(x) * 2, options={"max_autotune": False})
    x = torch.randn(6)
    torch.testing.assert_close(fn(x), torch.relu(x) * 2)


def test_compile_hands_mode_and_options_as_keywords_to_backends_that_take_them():
    calls = []

    def tunable(gm, example_inputs, mode=None, options=None):
        calls.append((mode, options))
        return gm.forward

    pyframe.compile(lambda x: x + 1, backend=tunable, mode="fast")(torch.ones(1))
    pyframe.compile(lambda x: x + 2, backend=tunable, options={"k": 1})(torch.ones(1))
    pyframe.compile(lambda x: x + 3, backend=tunable, mode="default")(torch.ones(1))
    assert calls == [("fast", None), (None, {"k": 1}), (None, None)]


@pytest.mark.parametrize("kwargs, message", [
    ({"mode": "fastest"}, "unknown mode 'fastest' for backend 'inductor'; the modes are: default"),
    ({"options": {"no_such_option": True}}, "unknown option 'no_such_option' for backend 'inductor'"),
    ({"options": {"max_autotune": "yes"}}, "option 'max_autotune' of backend 'inductor' takes a bool, not str"),
    ({"mode": "max-autotune", "options": {"max_autotune": True}}, "a mode or options, not both"),
    ({"backend": "eager", "mode": "max-autotune"}, "backend 'eager' takes no mode"),
    ({"backend": "eager", "options": {"x": 1}}, "backend 'eager' takes no options"),
])
def test_compile_refuses_an_unknown_mode_or_option_at_once(kwargs, message):
    with pytest.raises(InvalidCompileOption, match=message):
        pyframe.compile(lambda x: x, **kwargs)
    with pytest.raises(InvalidCompileOption, match=message):
        pyframe.compile(**kwargs)(lambda x: x)


# -- optimize() given what is not a backend -------------------------------------------------------

def test_optimize_without_parentheses_on_a_one_argument_function_fails_at_once():
    with pytest.raises(InvalidBackend, match=r"'fn', which cannot take \(gm, example_inputs\).*pyframe.compile"):
        @pyframe.optimize
        def fn(x):
            return x + 1


def test_optimize_given_a_module_fails_at_once():
    with pytest.raises(InvalidBackend, match="the module Net, not a backend.*pyframe.compile"):
        pyframe.optimize(Net())


def test_optimize_without_parentheses_on_a_two_argument_function_fails_at_its_first_call():
    # `def fn(a, b)` could be a backend (gm, example_inputs): only the call shows it was not.
    @pyframe.optimize
    def fn(a, b):
        return a + b

    with pytest.raises(TypeError, match=r"pyframe.optimize\(fn\), called with \(Tensor, Tensor\).*@pyframe.compile"):
        fn(torch.ones(2), torch.ones(2))


def test_optimize_still_takes_real_backend_callables():
    counting = Counting()

    def my_compiler(gm, example_inputs):
        return counting(gm, example_inputs)

    for backend in (my_compiler, counting, lambda gm, example_inputs: gm.forward):
        fn = pyframe.optimize(backend)(lambda x: x.exp())
        torch.testing.assert_close(fn(torch.ones(2)), torch.ones(2).exp())
    assert counting.graphs == 2


# -- OptimizedModule, side by side with torch.compile's --------------------------------------------

def _both(module_factory=Net):
    torch.manual_seed(0)
    ours = pyframe.compile(module_factory(), backend="eager")
    torch.manual_seed(0)
    theirs = torch.compile(module_factory(), backend="eager")
    return ours, theirs


def test_orig_mod_as_torch_compile_has_it():
    for opt in _both():
        assert type(opt._orig_mod) is Net
        assert list(opt._modules) == ["_orig_mod"] and "_orig_mod" not in opt.__dict__
        assert list(opt.children()) == [opt._orig_mod]


def test_attribute_writes_are_forwarded_to_the_original():
    for opt in _both():
        opt.scale = 3.0
        assert opt._orig_mod.scale == 3.0 and "scale" not in opt.__dict__
        opt.lin = torch.nn.Linear(4, 2)
        assert opt._orig_mod.lin.out_features == 2
        del opt.scale
        assert not hasattr(opt._orig_mod, "scale")


def test_training_always_agrees_with_the_original():
    for opt in _both():
        assert opt.training and opt._orig_mod.training
        opt.eval()
        assert not opt.training and not opt._orig_mod.training and not opt._orig_mod.drop.training
        opt._orig_mod.train()
        assert opt.training
        opt._orig_mod.training = False
        assert not opt.training


def test_bool_and_len_as_torch():
    for opt in _both():
        with pytest.raises(TypeError, match="Net does not support len()"):
            bool(opt)
    seq = lambda: torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())  # noqa: E731
    for opt in _both(seq):
        assert bool(opt) and len(opt) == 2
    for opt in _both(torch.nn.Sequential):
        assert not bool(opt)


def test_dir_as_torch():
    ours, theirs = _both()
    assert set(dir(ours._orig_mod)) <= set(dir(ours))
    engine_own = {"_call", "_context"}  # pyframe's wrapper: its compiled call and its optimize() context
    dynamo_own = {"dynamo_ctx", "get_compiler_config", "_torchdynamo_orig_callable", "_torchdynamo_wrapper_id",
                  "_is_torch_compile", "_aot_compile", "_save_aot_compiled_module", "_load_aot_compiled_module",
                  "_call_lazy_check"}
    assert set(dir(ours)) - set(dir(theirs)) == engine_own
    assert set(dir(theirs)) - set(dir(ours)) == dynamo_own


def test_deepcopy_is_optimized_with_the_same_backend():
    counting = Counting()
    net = Net().eval()
    opt = pyframe.compile(net, backend=counting)
    x = torch.randn(2, 4)
    opt(x)
    twin = copy.deepcopy(opt)
    assert type(twin) is pyframe.OptimizedModule
    assert twin._orig_mod is not net and twin._orig_mod.lin.weight is not net.lin.weight
    torch.testing.assert_close(twin(x), net(x))
    # the copy runs the original's entry, as under torch._dynamo: its modules are guarded by type,
    # and its parameters, of the same metadata, are the graph's inputs
    assert counting.graphs == 1
    twin.lin.weight.data.zero_()
    torch.testing.assert_close(twin(x), torch.relu(twin._orig_mod.lin.bias).expand(2, 3))
    assert not torch.equal(opt(x), twin(x))


@pytest.mark.parametrize("save", ["pickle", "torch.save"])
def test_pickle_and_torch_save_round_trip(save):
    ours, theirs = _both()
    x = torch.randn(2, 4)
    ours.eval(), theirs.eval()
    for opt in (ours, theirs):
        if save == "pickle":
            loaded = pickle.loads(pickle.dumps(opt))
        else:
            buffer = io.BytesIO()
            torch.save(opt, buffer)
            buffer.seek(0)
            loaded = torch.load(buffer, weights_only=False)
        assert type(loaded) is type(opt) and not loaded.training
        torch.testing.assert_close(loaded(x), opt(x))
    loaded = pickle.loads(pickle.dumps(ours))
    loaded(x)
    assert loaded._context.recipe == ("eager", False, None)  # (backend, fullgraph, dynamic)
    code = Net.forward.__code__
    assert any(r.status == "compiled" for r in pyframe.convert_frame.records_for(code))


def test_symbolic_trace_of_a_model_holding_one_records_the_original():
    class Outer(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            return self.inner(x) + 1

    ours, theirs = _both()
    traced = torch.fx.symbolic_trace(Outer(ours))
    with torch._dynamo.config.patch(error_on_nested_fx_trace=False):  # torch's default refuses
        expected = torch.fx.symbolic_trace(Outer(theirs))
    assert traced.code == expected.code
    x = torch.randn(2, 4)
    ours.eval()
    traced.eval()
    torch.testing.assert_close(traced(x), ours(x) + 1)
    assert not pyframe.convert_frame.records_for(Net.forward.__code__)[1:]  # compiled by the call only


# -- torch.compile and pyframe, one inside the other ----------------------------------------------

@contextlib.contextmanager
def _silent():
    """Fails if anything is warned, logged (warning or above) or written to stderr inside."""
    stderr = io.StringIO()
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stderr(stderr):
            warnings.simplefilter("always")
            yield
    finally:
        root.removeHandler(handler)
    assert not [str(w.message) for w in caught]
    assert not [r.getMessage() for r in records]
    assert stderr.getvalue() == ""


def test_torch_compiled_function_inside_a_pyframe_region():
    @torch.compile(backend="eager")
    def inner(x):
        return torch.sin(x) + 1

    def outer(x):
        return inner(x * 2) - 1

    fn = pyframe.optimize("eager")(outer)
    x = torch.randn(5)
    with _silent():
        for _ in range(3):
            torch.testing.assert_close(fn(x), torch.sin(x * 2))
        torch.testing.assert_close(fn(x + 1), torch.sin((x + 1) * 2))


def test_pyframe_function_inside_a_torch_compiled_function():
    inner = pyframe.optimize("eager")(lambda x: torch.cos(x) + 1)

    @torch.compile(backend="aot_eager")
    def outer(x):
        return inner(x * 2) - 1

    x = torch.randn(5)
    with _silent():
        for _ in range(3):
            torch.testing.assert_close(outer(x), torch.cos(x * 2))


def test_modules_of_each_engine_inside_the_other():
    torch.manual_seed(0)
    theirs = torch.compile(Net().eval(), backend="eager")
    ours = pyframe.compile(Net().eval(), backend="eager")
    x = torch.randn(3, 4)
    ours_outer = pyframe.optimize("eager")(lambda x: theirs(x) * 2)
    theirs_outer = torch.compile(lambda x: ours(x).sum(0), backend="eager")
    with _silent():
        for _ in range(2):
            torch.testing.assert_close(ours_outer(x), theirs._orig_mod(x) * 2)
            torch.testing.assert_close(theirs_outer(x), ours._orig_mod(x).sum(0))

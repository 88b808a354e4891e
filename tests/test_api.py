"""The public API: optimize as decorator and context manager, modules, disable, reset, errors."""
from __future__ import annotations

import threading

import pytest
import torch

import pyframe
from pyframe.debug.compare import CountingBackend
from pyframe.seeds import MockModule  # the seed notebook's module
from pyframe import _C


class Recorder:
    """A backend that records each graph's call targets and runs it as it is."""

    def __init__(self):
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm.forward

    def ops(self, i: int = 0) -> list[str]:
        return [n.target if isinstance(n.target, str) else n.target.__name__
                for n in self.graphs[i].graph.nodes if n.op.startswith("call")]


@pytest.fixture(autouse=True)
def _fresh():
    pyframe.reset()
    yield
    pyframe.reset()


def fn(x, y):
    a = torch.cos(x)
    b = torch.sin(y)
    return a + b


def test_seed_debug_backend_prints_one_graph(capsys):
    def my_compiler(gm, example_inputs):
        gm.graph.print_tabular()
        return gm.forward

    x, y = torch.randn(10), torch.randn(10)
    out = pyframe.optimize(my_compiler)(fn)(x, y)
    torch.testing.assert_close(out, fn(x, y))
    table = capsys.readouterr().out
    assert [line.split()[0] for line in table.splitlines()[2:]] == \
        ["placeholder", "placeholder", "call_function", "call_function", "call_function", "output"]
    assert "L_x_" in table and "L_y_" in table


def test_graph_nodes_carry_fake_example_values_and_real_inputs():
    seen = {}

    def backend(gm, example_inputs):
        seen["inputs"] = example_inputs
        seen["meta"] = [n.meta.get("example_value") for n in gm.graph.nodes if n.op != "output"]
        seen["code"] = gm.code
        return gm.forward

    x, y = torch.randn(3), torch.randn(3)
    pyframe.optimize(backend)(fn)(x, y)
    assert seen["inputs"][0] is x and seen["inputs"][1] is y
    assert all(type(v).__name__ == "FakeTensor" and v.shape == (3,) for v in seen["meta"])
    assert "return (add,)" in seen["code"]


def test_context_manager_compiles_calls_inside_it():
    rec = Recorder()
    x, y = torch.randn(4), torch.randn(4)
    with pyframe.optimize(rec):
        out = fn(x, y)
    torch.testing.assert_close(out, fn(x, y))
    assert rec.ops() == ["cos", "sin", "add"]
    fn(x, y)  # outside the region: nothing new is compiled
    assert len(rec.graphs) == 1


def test_disable_runs_a_function_untouched_inside_a_region():
    rec = Recorder()

    @pyframe.disable
    def helper(x):
        return x * 2

    def outer(x):
        return helper(x) + 1

    with pyframe.optimize(rec):
        torch.testing.assert_close(helper(torch.ones(2)), torch.full((2,), 2.0))
    assert rec.graphs == []
    assert pyframe.optimize(rec)(outer)(torch.ones(2)).tolist() == [3.0, 3.0]


def test_reset_drops_every_cache_entry():
    opt = pyframe.optimize("eager")(fn)
    opt(torch.randn(2), torch.randn(2))
    assert len(_C.get_cache_entries(fn.__code__)) == 1
    pyframe.reset()
    assert _C.get_cache_entries(fn.__code__) == []


def test_mock_module_records_the_ops_dynamo_records():
    import torch._dynamo
    ours, theirs = Recorder(), Recorder()
    x = torch.randn(10)
    out = pyframe.optimize(ours)(MockModule())(x)
    torch._dynamo.reset()
    torch._dynamo.optimize(theirs)(MockModule())(x)
    torch.testing.assert_close(out, torch.relu(torch.cos(x)))
    assert ours.ops() == theirs.ops() == ["cos", "relu"]


def test_optimized_module_shares_parameters_and_state():
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 3)
            self.scale = 0.5

        def forward(self, x):
            return torch.relu(self.fc(x)) * self.scale

    model = Net()
    opt = pyframe.optimize("eager")(model)
    assert isinstance(opt, pyframe.OptimizedModule) and isinstance(opt, torch.nn.Module)
    assert [p is q for p, q in zip(opt.parameters(), model.parameters())] == [True, True]
    assert opt.state_dict().keys() == model.state_dict().keys()
    assert opt.fc is model.fc and opt.scale == 0.5  # attribute access reaches the original
    with torch.no_grad():
        model.fc.bias.fill_(1.0)
    x = torch.randn(2, 4)
    torch.testing.assert_close(opt(x), model(x))
    opt.eval()
    assert model.training is False


def test_unknown_backend_name_lists_the_known_ones():
    with pytest.raises(ValueError, match="unknown backend 'nope'.*eager"):
        pyframe.optimize("nope")


def test_non_callable_backend_is_a_type_error():
    with pytest.raises(TypeError, match="backend must be a callable"):
        pyframe.optimize(42)


def test_non_callable_target_is_a_type_error():
    with pytest.raises(TypeError, match="expects a function or an nn.Module"):
        pyframe.optimize("eager")(3)


def test_failing_backend_warns_once_and_runs_the_graph_eagerly():
    def broken(gm, example_inputs):
        raise RuntimeError("no kernels today")

    x, y = torch.randn(5), torch.randn(5)
    with pytest.warns(UserWarning, match="backend 'broken' failed.*no kernels today") as caught:
        out = pyframe.optimize(broken)(fn)(x, y)
    assert len([w for w in caught if "pyframe" in str(w.message)]) == 1
    torch.testing.assert_close(out, fn(x, y))


def test_failing_backend_raises_when_errors_are_not_suppressed(monkeypatch):
    def broken(gm, example_inputs):
        raise RuntimeError("no kernels today")

    monkeypatch.setattr(pyframe.config, "suppress_errors", False)
    with pytest.raises(pyframe.BackendCompilerFailed) as info:
        pyframe.optimize(broken)(fn)(torch.randn(2), torch.randn(2))
    assert isinstance(info.value.__cause__, RuntimeError)
    assert _C.get_cache_entries(fn.__code__) == []


def test_user_exception_propagates_with_its_traceback():
    def mismatched(x, y):
        return x + y

    with pytest.raises(RuntimeError, match="size of tensor a") as info:
        pyframe.optimize("eager")(mismatched)(torch.randn(2), torch.randn(3))
    frames = [tb.tb_frame.f_code.co_name for tb in _walk(info.value.__traceback__)]
    assert "mismatched" in frames


def _walk(tb):
    while tb is not None:
        yield tb
        tb = tb.tb_next


def test_unsupported_call_breaks_the_graph_and_runs_once(capsys):
    def chatty(x):
        print("side effect")
        return x + 1

    rec = Recorder()
    out = pyframe.optimize(rec)(chatty)(torch.zeros(2))
    assert out.tolist() == [1.0, 1.0]
    assert capsys.readouterr().out == "side effect\n"  # exactly once
    record = pyframe.convert_frame.records_for(chatty.__code__)[-1]
    assert record.status == "compiled" and "call to builtin print" in str(record.error)
    assert record.error.location.source_line == 'print("side effect")'
    assert rec.ops() == ["add"]  # the resume function's graph


def test_recursion_inside_a_region_gives_the_eager_result():
    def fact(n, x):
        if n == 0:
            return x
        return fact(n - 1, x * n)

    x = torch.ones(3)
    torch.testing.assert_close(pyframe.optimize("eager")(fact)(5, x), fact(5, x))


def test_a_thread_outside_the_region_is_not_compiled():
    rec = Recorder()
    results = {}
    started, release = threading.Event(), threading.Event()

    def plain():
        started.wait()
        results["plain"] = fn(torch.ones(2), torch.ones(2))
        release.set()

    def optimized():
        with pyframe.optimize(rec):
            started.set()
            release.wait()
            results["opt"] = fn(torch.ones(2), torch.ones(2))

    threads = [threading.Thread(target=plain), threading.Thread(target=optimized)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    torch.testing.assert_close(results["plain"], results["opt"])
    assert len(rec.graphs) == 1  # only the optimized thread's call compiled
    assert _C.set_eval_frame(None) is None  # and this thread was never touched


def test_entries_belong_to_their_backend():
    first, second = Recorder(), Recorder()
    x, y = torch.randn(3), torch.randn(3)
    pyframe.optimize(first)(fn)(x, y)
    pyframe.optimize(second)(fn)(x, y)  # a different backend compiles for itself
    pyframe.optimize(first)(fn)(x, y)   # and the first one's entry still serves it
    assert len(first.graphs) == 1 and len(second.graphs) == 1
    entries = _C.get_cache_entries(fn.__code__)
    assert sorted(e.hits for e in entries) == [0, 1]
    out = pyframe.explain(fn)(x, y)     # explain compiles its own, and removes only those
    assert out.graph_count == 1
    assert len(_C.get_cache_entries(fn.__code__)) == 2
    assert pyframe.run(fn)(x, y).shape == (3,)  # run-only mode uses any backend's entry
    assert sum(e.hits for e in _C.get_cache_entries(fn.__code__)) == 2


# --------------------------------------------------------------------------------------------------
# OptimizedModule calls: nn.Module.__call__'s work (hooks) is kept; skipped only when it is a no-op


class _Scale(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.full((3,), 2.0))

    def forward(self, x, *rest, shift=0.0):
        return x * self.weight + sum(rest) + shift


def test_optimized_module_passes_every_argument_to_forward():
    model = _Scale()
    compiled = pyframe.optimize("eager")(model)
    args = [torch.randn(3) for _ in range(10)]  # more than the small argument buffer holds
    torch.testing.assert_close(compiled(*args, shift=1.5), model(*args, shift=1.5))
    torch.testing.assert_close(compiled(args[0]), model(args[0]))


def test_optimized_module_runs_the_modules_hooks():
    model = _Scale()
    compiled = pyframe.optimize("eager")(model)
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), x * 2)
    pre = model.register_forward_pre_hook(lambda mod, args: (args[0] + 1,))
    post = model.register_forward_hook(lambda mod, args, out: out * 10)
    torch.testing.assert_close(compiled(x), ((x + 1) * 2) * 10)
    pre.remove()
    post.remove()
    torch.testing.assert_close(compiled(x), x * 2)


def test_optimized_module_runs_global_module_hooks_and_an_instance_forward():
    model = _Scale()
    compiled = pyframe.optimize("eager")(model)
    x = torch.randn(3)
    seen = []
    handle = torch.nn.modules.module.register_module_forward_hook(lambda mod, args, out: seen.append(mod))
    try:
        compiled(x)
    finally:
        handle.remove()
    assert seen == [model]
    model.forward = lambda x: x - 1  # an instance attribute wins over the class's forward
    torch.testing.assert_close(compiled(x), x - 1)


@pytest.mark.parametrize("setting, value, message", [
    ("recompile_limit", "3", "takes an int >= 0"),
    ("recompile_limit", None, "takes an int >= 0"),
    ("accumulated_recompile_limit", -1, "takes an int >= 0"),
    ("suppress_errors", "no", "takes True or False"),
    ("skip_modules", [1], "takes a list of module names"),
])
def test_a_setting_of_the_wrong_kind_is_refused_when_set(setting, value, message):
    before = getattr(pyframe.config, setting)
    with pytest.raises(TypeError, match=message):
        setattr(pyframe.config, setting, value)
    assert getattr(pyframe.config, setting) == before


def test_a_misspelt_setting_is_an_error_that_lists_the_settings():
    with pytest.raises(AttributeError, match="no setting 'recompile_limt'.*recompile_limit"):
        pyframe.config.recompile_limt = 3


def test_set_logs_and_register_backend_say_what_they_take():
    with pytest.raises(TypeError, match="log channels are names"):
        pyframe.set_logs(123)
    with pytest.raises(TypeError, match="register_backend takes a callable"):
        pyframe.register_backend(123)
    with pytest.raises(TypeError, match=r"register_backend\(name=\.\.\.\) takes a str"):
        pyframe.register_backend(lambda gm, ex: gm.forward, name=5)


def test_guard_fail_fn_is_told_each_failed_guard_before_a_recompile():
    """optimize(guard_fail_fn=...) as torch._dynamo.optimize's: a GuardFail(reason, orig_code) for
    each entry a call's guards failed, before the recompile; never on a hit; what it raises is
    logged, not raised into the call."""
    failures = []

    def fn(x, n):
        return x * n

    compiled = pyframe.optimize("eager", guard_fail_fn=failures.append, dynamic=False)(fn)
    compiled(torch.ones(2), 2)
    compiled(torch.ones(2), 2)
    assert failures == []
    compiled(torch.ones(3), 2)
    assert len(failures) == 1 and isinstance(failures[0], pyframe.GuardFail)
    assert failures[0].orig_code is fn.__code__ and "L['x']" in failures[0].reason
    compiled(torch.ones(2), 5)  # both entries fail
    assert len(failures) == 3 and all("L['n']" in f.reason or "L['x']" in f.reason for f in failures[1:])

    def raising(failure):
        raise RuntimeError("a callback's own error")

    torch.testing.assert_close(pyframe.optimize("eager", guard_fail_fn=raising)(fn)(torch.ones(4), 3),
                               torch.full((4,), 3.0))
    torch.testing.assert_close(pyframe.optimize("eager", guard_fail_fn=raising)(fn)(torch.ones(4), 4),
                               torch.full((4,), 4.0))
    with pytest.raises(TypeError, match="guard_fail_fn"):
        pyframe.optimize("eager", guard_fail_fn=3)


SCALE = 2.0


class _TwoLayers(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.gain = 2.0

    def forward(self, x):
        return self.lin(x) * self.gain * SCALE


def test_guard_filter_fn_keeps_the_guards_it_answers_true_for():
    """compile(options={"guard_filter_fn": fn}) as torch.compile's: fn sees one entry per guard
    (torch.compiler's helpers read them as torch._dynamo's), and the entry keeps only the guards it
    keeps: without the guard on a global, a changed global no longer recompiles (the user's bet),
    with every guard kept it does."""
    global SCALE
    model, x = _TwoLayers(), torch.randn(2, 3)
    seen = []

    def keep_all(entries):
        seen.extend(entries)
        return [True] * len(entries)

    kept = pyframe.compile(model, backend="eager", options={"guard_filter_fn": keep_all})
    torch.testing.assert_close(kept(x), model(x))
    kinds = {e.guard_type for e in seen}
    assert "TENSOR_MATCH" in kinds and any(e.is_global for e in seen) and any(not e.is_global for e in seen)
    tensor_entry = next(e for e in seen if e.guard_type == "TENSOR_MATCH" and e.name == "L['x']")
    assert tensor_entry.has_value and tensor_entry.value is x
    assert any(e.orig_guard.source.is_unspecialized_builtin_nn_module() for e in seen)  # self.lin's weight
    skipped = pyframe.compile(model, backend="eager",
                              options={"guard_filter_fn": torch.compiler.skip_guard_on_globals_unsafe})
    torch.testing.assert_close(skipped(x), model(x))
    try:
        SCALE = 3.0
        torch.testing.assert_close(kept(x), model(x))  # recompiled: the global is guarded
        torch.testing.assert_close(skipped(x), model(x) * 2.0 / 3.0)  # the entry of SCALE = 2.0 ran
    finally:
        SCALE = 2.0
    with pytest.raises(pyframe.exc.InvalidCompileOption, match="one bool per entry"):
        pyframe.compile(lambda t: t + 1, backend="eager", options={"guard_filter_fn": lambda entries: []})(x)


def test_guard_filter_fn_with_torch_compilers_module_helpers():
    """skip_guard_on_all_nn_modules_unsafe drops the guards on what was read through the module
    (its attribute `gain`): changing it does not recompile; the tensor input is still guarded."""
    model, x = _TwoLayers(), torch.randn(2, 3)
    backend = CountingBackend()
    compiled = pyframe.compile(model, backend=backend,
                               options={"guard_filter_fn": torch.compiler.skip_guard_on_all_nn_modules_unsafe})
    torch.testing.assert_close(compiled(x), model(x))
    model.gain = 5.0
    compiled(x)
    assert len(backend.graphs) == 1
    compiled(torch.randn(4, 3, 3))  # another input rank: its guard is kept
    assert len(backend.graphs) == 2

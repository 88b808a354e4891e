"""torch.compiler's markers and stances, as pyframe offers them and as it honours torch's own.

Each marker: the same program under pyframe (marked with pyframe's marker, and with torch's) and
under torch._dynamo (marked with torch's), on the same counting backend: results equal to eager's,
graph counts and graph code equal to torch._dynamo's (but nonstrict_trace, whose node torch._dynamo
records through its flat_apply op). Each stance: which calls compile, run eagerly or raise, under
pyframe.set_stance and under torch.compiler.set_stance, against torch.compile under the latter.
"""
from __future__ import annotations

import operator
import types

import pytest
import torch
import torch._dynamo
from torch._dynamo import trace_rules

import pyframe
from pyframe import _C, markers
from pyframe.debug.compare import CountingBackend
from pyframe.exc import RecompileError

# (torch._dynamo warns when it meets torch.sub disallowed: it then treats it as an unknown builtin)
pytestmark = pytest.mark.filterwarnings("ignore:Dynamo does not know how to trace the builtin")


@pytest.fixture(autouse=True)
def _fresh():
    torch._dynamo.reset()
    pyframe.reset()
    yield
    assert pyframe.decorators.current_stance() == "default"  # (every test leaves the default)


def _twin(fn: types.FunctionType) -> types.FunctionType:
    """Another function object of the same code and names: one marked by each engine's marker."""
    twin = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    twin.__qualname__ = fn.__qualname__
    return twin


def _compile(engine: str, fn, backend, **options):
    return torch.compile(fn, backend=backend, **options) if engine == "dynamo" else pyframe.optimize(backend, **options)(fn)


def _graphs(engine: str, fn, calls, **options):
    """`fn` compiled by `engine` and called on each argument tuple of `calls`: its graphs' code and results."""
    backend = CountingBackend()
    compiled = _compile(engine, fn, backend, **options)
    results = [compiled(*args) for args in calls]
    return [g.code for g in backend.graphs], results


def _same_as_dynamo(ours, theirs, calls, **options) -> list[str]:
    """`ours` under pyframe, `theirs` under torch._dynamo: equal results (and eager's, from
    `theirs` run as Python), equal graph code."""
    dynamo_code, dynamo_results = _graphs("dynamo", theirs, calls, **options)
    code, results = _graphs("pyframe", ours, calls, **options)
    for args, result, expected in zip(calls, results, dynamo_results):
        torch.testing.assert_close(result, expected)
        torch.testing.assert_close(result, theirs(*args))
    assert code == dynamo_code
    return code


X = torch.linspace(-1, 1, 6)


# ---- allow_in_graph -------------------------------------------------------------------------

def scaled_sin(x):
    return torch.sin(x) * 2


scaled_sin_for_torch = torch._dynamo.allow_in_graph(_twin(scaled_sin))
scaled_sin_for_pyframe = pyframe.allow_in_graph(_twin(scaled_sin))


def calls_scaled_sin_for_torch(x):
    return scaled_sin_for_torch(x + 1) - 1


def calls_scaled_sin_for_pyframe(x):
    return scaled_sin_for_pyframe(x + 1) - 1


def test_allow_in_graph_records_one_node_as_dynamo():
    code = _same_as_dynamo(_twin(calls_scaled_sin_for_pyframe), calls_scaled_sin_for_torch, [(X,)])
    assert len(code) == 1 and "scaled_sin(add)" in code[0] and "torch.sin" not in code[0]


def test_torch_allow_in_graph_is_honoured():
    _same_as_dynamo(calls_scaled_sin_for_torch, calls_scaled_sin_for_torch, [(X,)])


# ---- disallow_in_graph ----------------------------------------------------------------------

def add_sub_add(x):
    x = torch.add(x, 1)
    x = torch.sub(x, 1)
    return torch.add(x, 1)


@pytest.fixture
def sub_disallowed():
    """torch.sub disallowed in both engines for one test (their registries are the process's)."""
    torch._dynamo.disallow_in_graph(torch.sub)
    pyframe.disallow_in_graph(torch.sub)
    yield
    trace_rules._disallowed_callable_ids.remove(id(torch.sub))
    markers.disallowed.discard(torch.sub)


def test_disallow_in_graph_breaks_the_graph_at_the_op_as_dynamo(sub_disallowed):
    code = _same_as_dynamo(add_sub_add, add_sub_add, [(X,)])
    assert len(code) == 2 and all("torch.sub" not in c for c in code)


def test_torch_disallow_in_graph_alone_is_honoured():
    torch._dynamo.disallow_in_graph(torch.sub)
    try:
        code = _same_as_dynamo(add_sub_add, add_sub_add, [(X,)])
    finally:
        trace_rules._disallowed_callable_ids.remove(id(torch.sub))
    assert len(code) == 2
    assert len(_graphs("pyframe", _twin(add_sub_add), [(X,)])[0]) == 1  # (and undone with it)


# ---- nonstrict_trace ------------------------------------------------------------------------

def _breaks_inside(x, y):
    torch._dynamo.graph_break()  # allowed: the body runs as Python
    return x.sin() + y


sin_plus_for_torch = torch._dynamo.nonstrict_trace(_twin(_breaks_inside))
sin_plus_for_pyframe = pyframe.nonstrict_trace(_twin(_breaks_inside))


def calls_nonstrict_for_torch(x):
    return sin_plus_for_torch(x, x * 2) * 3


def calls_nonstrict_for_pyframe(x):
    return sin_plus_for_pyframe(x, x * 2) * 3


@pytest.mark.parametrize("ours", [calls_nonstrict_for_pyframe, calls_nonstrict_for_torch], ids=["pyframe", "torch"])
def test_nonstrict_trace_is_one_node_of_one_graph(ours):
    """One graph, as torch._dynamo's, the function one node of it (torch._dynamo's node is its
    flat_apply op around the function: the graphs' code differs there)."""
    dynamo_code, _ = _graphs("dynamo", calls_nonstrict_for_torch, [(X,)])
    code, results = _graphs("pyframe", ours, [(X,)])
    torch.testing.assert_close(results[0], calls_nonstrict_for_torch(X))
    assert len(code) == len(dynamo_code) == 1
    assert "test_markers__breaks_inside(l_x_, mul)" in code[0] and ".sin()" not in code[0]


# ---- substitute_in_graph --------------------------------------------------------------------

def double_by_adding(x):
    return x + x


def double_by_adding_too(x):
    return x + x


@torch.compiler.substitute_in_graph(double_by_adding)
def double(x):
    return x * 2


@pyframe.substitute_in_graph(double_by_adding_too)
def double_too(x):
    return x * 2


def calls_double(x):
    return double_by_adding(x) + 1


def calls_double_too(x):
    return double_by_adding_too(x) + 1


def test_substitute_in_graph_inlines_the_polyfill_as_dynamo():
    code = _same_as_dynamo(calls_double_too, calls_double, [(X,)])
    assert "l_x_ * 2" in code[0] and "l_x_ + l_x_" not in code[0]
    assert double_too(X).equal(X + X) and double_too.__name__ == "double_too"  # eagerly: the original


def test_torch_substitute_in_graph_is_honoured():
    _same_as_dynamo(calls_double, calls_double, [(X,)])


def count_of_twos(values):
    return operator.countOf(values, 2)


@pyframe.substitute_in_graph(count_of_twos, can_constant_fold_through=True)
def _count_of_twos_traced(values):
    raise AssertionError("never traced: folded on constants")


def scaled_by_count(x):
    return x * count_of_twos((1, 2, 2))


def test_substitute_can_constant_fold_through_calls_the_original():
    code, results = _graphs("pyframe", scaled_by_count, [(X,)])
    torch.testing.assert_close(results[0], X * 2)
    assert len(code) == 1 and "l_x_ * 2" in code[0]


# ---- assume_constant_result -----------------------------------------------------------------

_SCALE = {"value": 3}


def _scale():
    return _SCALE["value"]


scale_for_torch = torch.compiler.assume_constant_result(_twin(_scale))
scale_for_pyframe = pyframe.assume_constant_result(_twin(_scale))


def scaled_for_torch(x):
    return x * scale_for_torch()


def scaled_for_pyframe(x):
    return x * scale_for_pyframe()


def test_assume_constant_result_is_a_constant_never_guarded_as_dynamo():
    """The result is the graph's constant, and a later change is not seen: no guard, as in torch._dynamo."""
    _same_as_dynamo(scaled_for_pyframe, scaled_for_torch, [(X,)])
    for engine, fn in (("dynamo", scaled_for_torch), ("pyframe", scaled_for_pyframe)):
        backend = CountingBackend()
        compiled = _compile(engine, fn, backend)
        compiled(X)
        _SCALE["value"] = 5
        try:
            torch.testing.assert_close(compiled(X), X * 3)  # (eager gives X * 5)
        finally:
            _SCALE["value"] = 3
        assert len(backend.graphs) == 1, engine
        torch._dynamo.reset()
        pyframe.reset()


def test_torch_assume_constant_result_is_honoured():
    _same_as_dynamo(scaled_for_torch, scaled_for_torch, [(X,)])


# ---- is_compiling ---------------------------------------------------------------------------

def branch_on_pyframe_is_compiling(x):
    return x + 1 if pyframe.is_compiling() else x - 1


def branch_on_torch_is_compiling(x):
    return x + 1 if torch.compiler.is_compiling() else x - 1


def test_is_compiling_is_true_while_tracing_false_when_run():
    assert pyframe.is_compiling() is False
    _same_compiled = _graphs("pyframe", branch_on_pyframe_is_compiling, [(X,)])
    dynamo_code, dynamo_results = _graphs("dynamo", branch_on_torch_is_compiling, [(X,)])
    assert _same_compiled[0] == dynamo_code
    torch.testing.assert_close(_same_compiled[1][0], X + 1)
    torch.testing.assert_close(branch_on_pyframe_is_compiling(X), X - 1)  # eagerly
    # torch._dynamo tracing pyframe.is_compiling sees torch's answer: True
    assert _graphs("dynamo", branch_on_pyframe_is_compiling, [(X,)])[0] == dynamo_code


# ---- disable(fn, recursive=False) -----------------------------------------------------------

def _inner(x):
    return x.cos() * 2


def _outer(x):
    y = x.sin()
    return _inner(y) + 1


outer_skipped_by_torch = torch._dynamo.disable(_twin(_outer), recursive=False)
outer_skipped_by_pyframe = pyframe.disable(_twin(_outer), recursive=False)


def calls_skipped_by_torch(x):
    return outer_skipped_by_torch(x * 3) - 1


def calls_skipped_by_pyframe(x):
    return outer_skipped_by_pyframe(x * 3) - 1


@pytest.mark.parametrize("ours", [calls_skipped_by_pyframe, calls_skipped_by_torch], ids=["pyframe", "torch"])
def test_nonrecursive_disable_runs_the_frame_as_python_and_compiles_its_callees(ours):
    code = _same_as_dynamo(ours, calls_skipped_by_torch, [(X,), (X,)])
    assert len(code) == 3 and "cos" in code[1] and not any("sin" in c for c in code)


def test_recursive_disable_compiles_no_callee():
    outer = pyframe.disable(_twin(_outer))
    code, results = _graphs("pyframe", lambda x: outer(x * 3) - 1, [(X,)])
    torch.testing.assert_close(results[0], _outer(X * 3) - 1)
    assert len(code) == 2 and not any("cos" in c for c in code)


def test_nonrecursive_disable_as_a_decorator():
    @pyframe.disable(recursive=False)
    def outer(x):
        return _inner(x.sin()) + 1

    code, results = _graphs("pyframe", outer, [(X,)])
    torch.testing.assert_close(results[0], _outer(X))
    assert len(code) == 1 and "cos" in code[0] and "sin" not in code[0]


# ---- stances --------------------------------------------------------------------------------

def sin_plus_one(x):
    return x.sin() + 1


_STANCE_CALLS = [torch.ones(3), torch.ones(3), torch.ones(4)]


def _stance_run(engine: str, set_stance, stance: str, **kwargs):
    """Compile once under the default stance, then call under `stance`: per call, 'graph' (it
    compiled), 'cached' or 'eager' (no new graph) or the error's type."""
    backend = CountingBackend()
    compiled = _compile(engine, _twin(sin_plus_one), backend)
    compiled(_STANCE_CALLS[0])
    outcomes = []
    with set_stance(stance, **kwargs):
        for x in _STANCE_CALLS:
            before = len(backend.graphs)
            try:
                torch.testing.assert_close(compiled(x), sin_plus_one(x))
            except RuntimeError as e:
                outcomes.append(RuntimeError if isinstance(e, RuntimeError) else type(e))
                continue
            outcomes.append("graph" if len(backend.graphs) > before else "no graph")
    return outcomes


@pytest.mark.parametrize("stance", ["default", "force_eager", "eager_on_recompile", "fail_on_recompile"])
@pytest.mark.parametrize("setter", ["pyframe", "torch"])
def test_stances_compile_run_eagerly_or_raise_as_dynamo(stance, setter):
    theirs = _stance_run("dynamo", torch.compiler.set_stance, stance)
    ours = _stance_run("pyframe", pyframe.set_stance if setter == "pyframe" else torch.compiler.set_stance, stance)
    assert ours == theirs
    assert theirs == {"default": ["no graph", "no graph", "graph"], "force_eager": ["no graph"] * 3,
                      "eager_on_recompile": ["no graph"] * 3,
                      "fail_on_recompile": ["no graph", "no graph", RuntimeError]}[stance]


def test_force_eager_uses_no_cached_entry():
    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(_twin(sin_plus_one))
    compiled(X)
    hits = [e.hits for e in _C.get_cache_entries(compiled.fn.__code__)]
    with pyframe.set_stance("force_eager"):
        compiled(X)
    assert [e.hits for e in _C.get_cache_entries(compiled.fn.__code__)] == hits
    compiled(X)
    assert [e.hits for e in _C.get_cache_entries(compiled.fn.__code__)] == [h + 1 for h in hits]


def test_fail_on_recompile_names_the_frame_and_the_failed_guard():
    compiled = pyframe.optimize(CountingBackend())(_twin(sin_plus_one))
    compiled(torch.ones(3))
    with pyframe.set_stance("fail_on_recompile"), pytest.raises(RecompileError) as error:
        compiled(torch.ones(5))
    assert "sin_plus_one" in str(error.value) and "size()[0]: 3 -> 5" in str(error.value)


def test_set_stance_as_a_function_and_a_decorator():
    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(_twin(sin_plus_one))

    @pyframe.set_stance("force_eager")
    def serve(x):
        return compiled(x)

    assert pyframe.decorators.current_stance() == "default"  # (as a decorator: only while it runs)
    serve(X)
    assert backend.graphs == []
    pyframe.set_stance("force_eager")
    try:
        compiled(X)
        assert backend.graphs == []
    finally:
        pyframe.set_stance("default")
    compiled(X)
    assert len(backend.graphs) == 1


def test_pyframe_stance_wins_over_torchs():
    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(_twin(sin_plus_one))
    with torch.compiler.set_stance("force_eager"), pyframe.set_stance("fail_on_recompile"):
        with pytest.raises(RecompileError):
            compiled(X)
    with torch.compiler.set_stance("force_eager"):
        compiled(X)
    assert backend.graphs == []


def test_skip_guard_eval_unsafe_still_checks_every_guard():
    """Accepted (torch's flag), but pyframe checks every guard anyway: a call on a new size misses
    and runs as Python, where torch._dynamo, skipping the guards of its one entry, runs that entry
    on the new size (which raises here)."""
    theirs = _stance_run("dynamo", torch.compiler.set_stance, "eager_on_recompile", skip_guard_eval_unsafe=True)
    ours = _stance_run("pyframe", pyframe.set_stance, "eager_on_recompile", skip_guard_eval_unsafe=True)
    assert ours == ["no graph"] * 3 and theirs[:2] == ours[:2]


def test_a_stance_set_inside_a_compiled_region_is_refused():
    def sets_a_stance(x):
        pyframe.set_stance("force_eager")
        return x + 1

    with pytest.raises(RuntimeError, match="inside a compiled region"):
        pyframe.optimize(CountingBackend())(sets_a_stance)(X)
    pyframe.set_stance("default")


def test_optimize_as_a_context_manager_follows_force_eager():
    backend = CountingBackend()
    with pyframe.set_stance("force_eager"), pyframe.optimize(backend):
        sin_plus_one(X)
    assert backend.graphs == []


# ---- bad input ------------------------------------------------------------------------------

def test_markers_given_bad_input_say_what_they_take():
    with pytest.raises(TypeError, match="allow_in_graph expects a callable"):
        pyframe.allow_in_graph(3)
    with pytest.raises(TypeError, match="records as a node"):
        pyframe.disallow_in_graph(_twin(_outer))
    with pytest.raises(TypeError, match="nonstrict_trace expects a callable"):
        pyframe.nonstrict_trace("f")
    with pytest.raises(TypeError, match="assume_constant_result expects a Python function"):
        pyframe.assume_constant_result(len)
    with pytest.raises(TypeError, match="substitute_in_graph expects a function"):
        pyframe.substitute_in_graph(int)
    with pytest.raises(TypeError, match="does not take what"):
        pyframe.substitute_in_graph(_twin(_outer))(lambda a, b: a)
    with pytest.raises(ValueError, match="already has a substitute"):
        pyframe.substitute_in_graph(double_by_adding_too)(lambda x: x)
    with pytest.raises(ValueError, match="unknown stance 'eager'; stances: default, force_eager"):
        pyframe.set_stance("eager")
    with pytest.raises(ValueError, match="force_backend"):
        pyframe.set_stance(force_backend="eager")
    with pytest.raises(TypeError, match="recursive"):
        pyframe.disable(_outer, recursive="no")

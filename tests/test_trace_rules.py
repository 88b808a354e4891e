"""What is user code (pyframe/trace_rules.py): traced when the hook meets its frames, inlined when called.

Checked with packages really installed in this environment's site-packages (transformers and tabulate,
from the test extras), not only with files of the repository.
"""
from __future__ import annotations

import importlib
import os
import sys
import sysconfig
import textwrap

import pytest
import torch

import pyframe
from pyframe import trace_rules
from pyframe.convert_frame import records_for, skip_reason

transformers = pytest.importorskip("transformers")
tabulate = pytest.importorskip("tabulate")


class Recorder:
    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm.forward


@pytest.fixture(autouse=True)
def _clean():
    pyframe.reset()
    yield
    pyframe.reset()


def test_installed_packages_are_user_code_though_site_packages_is_inside_the_stdlib_directory():
    from transformers import activations

    assert trace_rules.file_skip_reason(activations.__file__) is None
    assert skip_reason(activations.NewGELUActivation.forward.__code__) is None
    # On a normal install (not a virtual environment) site-packages lies in the stdlib directory:
    # a file there is an installed package's, not the standard library's.
    stdlib = os.path.realpath(sysconfig.get_paths()["stdlib"])
    for folder in ("site-packages", "dist-packages"):
        installed = os.path.join(stdlib, folder, "somepkg", "mod.py")
        assert trace_rules.file_skip_reason(installed) is None
    assert "standard library" in trace_rules.file_skip_reason(os.path.join(stdlib, "somemod.py"))


def test_a_frame_of_an_installed_package_met_by_the_hook_is_compiled():
    """nn.Module.__call__ (torch's machinery, skipped) calls transformers' forward: the hook meets
    that frame and compiles it."""
    act = transformers.activations.NewGELUActivation()
    x = torch.randn(8)
    rec = Recorder()
    with pyframe.optimize(rec):
        out = act(x)
    torch.testing.assert_close(out, act(x))
    assert len(rec.graphs) == 1
    assert [r.status for r in records_for(type(act).forward.__code__)] == ["compiled"]


def test_standard_library_torch_internals_and_pyframe_are_skipped():
    import json
    import torch._tensor_str

    assert "standard library" in trace_rules.file_skip_reason(json.__file__)
    assert "torch's internals" in trace_rules.file_skip_reason(torch._tensor_str.__file__)
    assert "pyframe's own code" in trace_rules.file_skip_reason(pyframe.trace_rules.__file__)
    # nn.Module's calling machinery: the hook meets the forward it calls instead
    assert "torch's internals" in trace_rules.file_skip_reason(torch.nn.modules.module.__file__)


def test_torch_nn_model_code_is_traced_where_the_hook_meets_it():
    assert trace_rules.file_skip_reason(torch.nn.modules.linear.__file__) is None
    assert trace_rules.file_skip_reason(torch.nn.functional.__file__) is None
    assert trace_rules.file_skip_reason(torch.nn.parallel.distributed.__file__) is None
    linear = torch.nn.Linear(3, 2)
    x = torch.randn(4, 3)
    rec = Recorder()
    with pyframe.optimize(rec):  # Linear.forward's frame, under nn.Module.__call__'s (skipped)
        out = linear(x)
    torch.testing.assert_close(out, linear(x))
    assert len(rec.graphs) == 1
    assert [str(n.target) for n in rec.graphs[0].graph.nodes if n.op == "call_function"] == \
        ["<built-in function linear>"]


def test_a_wrapper_module_of_torch_compiles_the_module_inside_it():
    """A torch.nn container (DataParallel without devices is a plain wrapper on CPU) given to
    optimize: its forward and the user module's it calls are compiled."""
    inner = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    wrapper = torch.nn.DataParallel(inner)
    x = torch.randn(2, 4)
    rec = Recorder()
    out = pyframe.optimize(rec)(wrapper)(x)
    torch.testing.assert_close(out, inner(x))
    ops = [str(n.target) for g in rec.graphs for n in g.graph.nodes if n.op == "call_function"]
    assert "<built-in function linear>" in ops and any("relu" in op for op in ops)


def test_third_party_libraries_dynamo_skips_are_skipped_and_calls_into_them_break_the_graph():
    assert "third-party library" in trace_rules.file_skip_reason(tabulate.__file__)

    def fn(x):
        y = x + 1
        text = tabulate.tabulate([[1, 2]])
        return y * len(text)

    rec = Recorder()
    x = torch.randn(3)
    out = pyframe.optimize(rec)(fn)(x)
    torch.testing.assert_close(out, fn(x))
    assert len(rec.graphs) == 2
    error = str(records_for(fn.__code__)[0].error)
    assert "third-party library torch._dynamo skips" in error and "tabulate" in error


@pytest.fixture
def user_package(tmp_path, monkeypatch):
    """A package of the user's own, importable by name."""
    pkg = tmp_path / "mylib_pf"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "ops.py").write_text(textwrap.dedent("""
        import torch

        def double(x):
            return x * 2
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield importlib.import_module("mylib_pf.ops")
    for name in ("mylib_pf.ops", "mylib_pf"):
        sys.modules.pop(name, None)


def test_config_skip_modules_keeps_a_package_out_of_the_trace(user_package, monkeypatch):
    def fn(x):
        return user_package.double(x + 1) - 1

    x = torch.randn(3)
    rec = Recorder()
    torch.testing.assert_close(pyframe.optimize(rec)(fn)(x), fn(x))
    assert len(rec.graphs) == 1  # inlined: user code

    pyframe.reset()
    monkeypatch.setattr(pyframe.config, "skip_modules", ["mylib_pf"])
    assert "config.skip_modules" in trace_rules.file_skip_reason(user_package.__file__)
    rec = Recorder()
    torch.testing.assert_close(pyframe.optimize(rec)(fn)(x), fn(x))
    assert len(rec.graphs) == 2  # the call is a graph break; double's own frame is not compiled
    assert "config.skip_modules" in str(records_for(fn.__code__)[0].error)
    assert pyframe._C.get_code_state(user_package.double.__code__) == "skip"


def test_config_trace_modules_wins_over_the_skip_rules(monkeypatch):
    assert trace_rules.file_skip_reason(tabulate.__file__) is not None
    monkeypatch.setattr(pyframe.config, "trace_modules", ["tabulate"])
    assert trace_rules.file_skip_reason(tabulate.__file__) is None
    monkeypatch.setattr(pyframe.config, "trace_modules", "torch.optim")  # one name alone is a list of one
    assert trace_rules.file_skip_reason(importlib.import_module("torch.optim.sgd").__file__) is None


def test_config_lists_take_module_names():
    with pytest.raises(TypeError, match="config.skip_modules takes a list of module names"):
        pyframe.config.skip_modules = [123]
    with pytest.raises(TypeError, match="config.trace_modules takes a list of module names"):
        pyframe.config.trace_modules = None
    assert pyframe.config.skip_modules == [] and pyframe.config.trace_modules == []


def test_torch_nn_code_outside_a_forward_is_not_compiled_as_a_frame():
    """A module constructor, its reset_parameters, a functional helper met by the hook are left to
    Python (torch._dynamo skips torch.nn's frames); a module's forward still compiles."""
    assert "outside a forward" in trace_rules.frame_skip_reason(torch.nn.Linear.__init__.__code__)
    assert "outside a forward" in trace_rules.frame_skip_reason(torch.nn.functional.relu.__code__)
    assert trace_rules.frame_skip_reason(torch.nn.Linear.forward.__code__) is None
    assert trace_rules.frame_skip_reason(test_torch_nn_code_outside_a_forward_is_not_compiled_as_a_frame.__code__) is None

    def fn(x):
        layer = torch.nn.Linear(3, 3)  # a break: a module made in the frame owning parameters
        return layer(x)

    rec = Recorder()
    torch.manual_seed(0)
    out = pyframe.optimize(rec)(fn)(torch.ones(2, 3))
    assert out.shape == (2, 3)
    # only the resumed call's graph: Linear.__init__ (torch.empty, init.kaiming_uniform_) runs as Python
    assert [[str(n.target) for n in g.graph.nodes if n.op == "call_function"] for g in rec.graphs] == \
        [["<built-in function linear>"]]

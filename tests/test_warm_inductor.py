"""Warm start with inductor: a loaded graph finds torch's caches (the FX graph cache, AOTAutograd's).

`pyframe.load` compiles each saved graph again with its backend, after loading the cache artifacts
the file holds (`torch.compiler.load_cache_artifacts`); inductor answers from them only if the graph
and its calling context are those torch.compile gives it:

- a TracingContext whose FakeTensorMode has a ShapeEnv (else: "No shape env", the FX graph cache
  bypassed), the graph's inputs in it with static sizes (else aot_autograd gives each size a symbol);
- every node's `meta["example_value"]`, which a loaded graph gets back from the file (else
  AOTAutograd's cache refuses a method call: "Unsupported call_method target").

The fast tests check each piece in this process; the slow one runs a cold and a warm process with
inductor and counts torch's cache hits in the warm one.
"""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensor

import pyframe
from pyframe.backends import compile_with_backend, lookup_backend
from pyframe.backends.compile import static_mode, written_for_dynamo
from pyframe.warm.graphs import graph_from_data, graph_to_data

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_torch_backends_are_told_apart_from_others():
    assert written_for_dynamo(lookup_backend("inductor"))
    assert written_for_dynamo(lookup_backend("aot_eager"))
    assert not written_for_dynamo(lookup_backend("eager"))  # pyframe's own
    assert not written_for_dynamo(lambda gm, inputs: gm.forward)


def _graph() -> torch.fx.GraphModule:
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    graph.output((graph.call_function(torch.sin, (x,)),))
    return torch.fx.GraphModule(torch.nn.Module(), graph)


def test_a_torch_backend_gets_a_tracing_context_with_a_shape_env_and_static_inputs():
    seen = {}

    def backend(gm, inputs):
        context = torch._guards.TracingContext.try_get()
        seen["context"] = context
        mode = context.fake_mode
        seen["fake"] = mode.from_tensor(inputs[0])  # as aot_autograd makes its inputs' FakeTensors
        seen["symbols"] = dict(mode.shape_env.backed_var_to_val)
        return gm.forward

    backend.__module__ = "torch._stand_in"  # a backend of torch's, as far as pyframe can tell
    x = torch.randn(3, 4)
    compile_with_backend(backend, "stand-in", _graph(), [x], "g")
    assert seen["context"] is not None and seen["context"].fake_mode.shape_env is not None
    assert seen["fake"].shape == (3, 4) and seen["symbols"] == {}  # static sizes, no symbol made

    def other(gm, inputs):
        seen["other"] = torch._guards.TracingContext.try_get()
        return gm.forward

    compile_with_backend(other, "other", _graph(), [x], "g")
    assert seen["other"] is None  # (any other backend is called as it is: no FakeTensorMode made)


def test_static_mode_holds_the_inputs_fakes_with_their_layout():
    x = torch.randn(4, 6)[:, 1:]
    mode, fakes = static_mode([x, 3])
    assert len(fakes) == 1 and mode.from_tensor(x) is fakes[0]
    assert (fakes[0].shape, fakes[0].stride(), fakes[0].storage_offset()) == ((4, 5), (6, 1), 1)


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 6)

    def forward(self, x):
        y = self.fc(x).view(2, 3, 6)                 # a method call on a node (AOTAutograd's check)
        return y.transpose(1, 2).sum(-1), y.shape[0]


def test_a_loaded_graph_has_the_example_values_the_trace_left():
    graphs = []

    def keep(gm, inputs):
        graphs.append(gm)
        return gm.forward

    pyframe.optimize(keep)(_Net())(torch.randn(6, 4))
    (gm,) = graphs
    loaded = graph_from_data(graph_to_data(gm))
    for node, twin in zip(gm.graph.nodes, loaded.graph.nodes):
        if node.op == "output":
            continue
        want, got = node.meta["example_value"], twin.meta.get("example_value")
        if isinstance(want, torch.Tensor):
            assert type(got) is FakeTensor, node.name
            assert (got.shape, got.stride(), got.storage_offset(), got.dtype, got.device, got.requires_grad) == \
                (want.shape, want.stride(), want.storage_offset(), want.dtype, want.device, want.requires_grad)
        else:
            assert got == want, node.name


def test_a_graph_with_dynamic_shapes_keeps_no_example_values():
    graphs = []

    def keep(gm, inputs):
        graphs.append(gm)
        return gm.forward

    pyframe.optimize(keep, dynamic=True)(lambda x: (x * 2).sum(0))(torch.randn(5, 3))
    (gm,) = graphs
    assert any(isinstance(n.meta.get("example_value"), torch.SymInt) for n in gm.graph.nodes)
    loaded = graph_from_data(graph_to_data(gm))
    assert not any("example_value" in n.meta for n in loaded.graph.nodes)  # (its ShapeEnv's, not made again)


# `python prog.py save|load <file>`: a model compiled with inductor; prints one JSON line.
PROGRAM = '''
import json, sys, torch, pyframe
from torch._dynamo.utils import counters
from torch._inductor.cpp_builder import CppBuilder

builds = []  # each binary inductor compiles (its kernels, its probes of the CPU's ISAs)
_build = CppBuilder.build
CppBuilder.build = lambda self: (builds.append(self.get_target_file_path()), _build(self))[1]

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(8, 16), torch.nn.Linear(16, 8)

    def forward(self, x):
        y = torch.relu(self.fc1(x)).view(2, 2, 16)  # a method call on a node
        return self.fc2(y.transpose(0, 1)).sum(0)

mode, path = sys.argv[1:3]
torch.manual_seed(0)
net, x = Net().eval(), torch.randn(4, 8)
if mode == "load":
    pyframe.load(path)
with torch.no_grad():  # an inference graph: AOTAutograd saves its entry at once
    torch.testing.assert_close(pyframe.compile(net, backend="inductor")(x), net(x))
if mode == "save":
    pyframe.save(path)
print(json.dumps({"inductor": dict(counters["inductor"]), "aot_autograd": dict(counters["aot_autograd"]),
                  "cpp_builds": sum(1 for target in builds if target.endswith(".so")),
                  "translations": pyframe.convert_frame.counters["translations"]}))
'''


def _run(tmp_path: pathlib.Path, mode: str) -> dict:
    program = tmp_path / "prog.py"
    program.write_text(PROGRAM)
    # Each process an empty inductor cache of its own: the warm one finds only what the file holds.
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / f"inductor-{mode}")}
    done = subprocess.run([sys.executable, str(program), mode, str(tmp_path / "warm.pfw")], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_warm_process_with_inductor_hits_torchs_caches(tmp_path):
    cold = _run(tmp_path, "save")
    assert cold["inductor"].get("fxgraph_cache_miss") == 1 and "fxgraph_cache_bypass" not in cold["inductor"]
    assert cold["aot_autograd"].get("autograd_cache_saved") == 1
    warm = _run(tmp_path, "load")
    assert warm["translations"] == 0
    assert warm["inductor"].get("fxgraph_cache_hit") == 1
    assert "fxgraph_cache_miss" not in warm["inductor"] and "fxgraph_cache_bypass" not in warm["inductor"]
    assert warm["aot_autograd"].get("autograd_cache_hit") == 1
    assert "autograd_cache_bypass" not in warm["aot_autograd"]
    # the kernels came in the file (warm/kernels.py): the warm process built none (it still
    # preprocesses inductor's header, to key its caches)
    assert cold["cpp_builds"] > 0 and warm["cpp_builds"] == 0

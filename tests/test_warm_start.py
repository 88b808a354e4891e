"""Warm start (pyframe.save / pyframe.load): entries saved by one process run in another.

The subprocess tests run one program twice: `save` compiles and writes the file, `load` reads it
and calls the same functions, checking every result against eager and counting the translator's
runs (`convert_frame.counters`): none on the warm first calls; a call whose inputs the loaded
guards reject (another dtype, an int of another value, another size) compiles as usual. The
invalidation cases (another version's file, changed bytecode, a truncated or corrupted file) and
what a save leaves out run in this process, after `pyframe.reset()`.
"""
from __future__ import annotations

import dataclasses
import json
import os
import pickle
import pathlib
import subprocess
import sys
import tomllib
import warnings

import pytest
import torch

import pyframe
from pyframe import convert_frame
from pyframe.warm import format as warm_format
from pyframe.warm.format import WarmStartError

ROOT = pathlib.Path(__file__).resolve().parents[1]

# The program both processes run: `python prog.py save|load <file> <backend>`; it prints one JSON line.
PROGRAM = '''
import json, sys, torch, pyframe
from pyframe import convert_frame, resume

def toy_example(a, b):                      # a graph break: three graphs, two resume functions
    x = a / (torch.abs(a) + 1)
    if b.sum() < 0:
        b = b * -1
    return x * b

def scaled(x, n):                           # automatic dynamic sizes after the second size
    return torch.sin(x) * n + x.sum(0)

class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):                   # a module method, its parameters graph inputs
        return torch.relu(self.fc(x)) + x

mode, path, backend = sys.argv[1:4]
torch.manual_seed(0)
block = Block()
a, b = torch.randn(4), torch.randn(4).abs()
if mode == "load":
    pyframe.load(path)
toy, scaled_c, block_c = (pyframe.optimize(backend)(f) for f in (toy_example, scaled, block))

def check(compiled, eager, *args):
    torch.testing.assert_close(compiled(*args), eager(*args))

check(toy, toy_example, a, b)
check(toy, toy_example, a, -b)
check(block_c, block, torch.ones(2, 4))
check(scaled_c, scaled, torch.ones(3, 2), 2)
check(scaled_c, scaled, torch.ones(5, 2), 2)
check(scaled_c, scaled, torch.ones(6, 2), 2)  # the dynamic entry
out = {"first_calls": dict(convert_frame.counters)}
toy_codes = [code for code in convert_frame.records if code is toy_example.__code__ or (
    code in resume.origins and resume.origins[code].original_ref() is toy_example.__code__)]
out["toy"] = {"resume_functions": len(toy_codes) - 1,
              "graphs": sum(len(r.graphs) for code in toy_codes for r in convert_frame.records[code])}
out["graphs"] = sorted(g.gm.code for records in convert_frame.records.values() for r in records for g in r.graphs)
if mode == "save":
    report = pyframe.save(path)
    out["left_out"] = report.left_out
else:
    check(toy, toy_example, a.double(), b.double())      # another dtype: TENSOR_MATCH fails
    out["after_dtype"] = convert_frame.counters["translations"]
    check(scaled_c, scaled, torch.ones(7, 2), 3)        # another int: its EQUALS_MATCH fails
    out["after_int"] = convert_frame.counters["translations"]
    check(block_c, block, torch.ones(5, 4))             # another size
    out["after_size"] = convert_frame.counters["translations"]
print(json.dumps(out))
'''


def _run(tmp_path: pathlib.Path, mode: str, backend: str) -> dict:
    program = tmp_path / "prog.py"
    program.write_text(PROGRAM)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(program), mode, str(tmp_path / "warm.pfw"), backend],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _save_then_load(tmp_path: pathlib.Path, backend: str) -> None:
    saved = _run(tmp_path, "save", backend)
    assert saved["left_out"] == []
    assert saved["first_calls"]["translations"] == 7  # toy, its two resume functions, block, scaled x3
    loaded = _run(tmp_path, "load", backend)
    # The warm first calls: no translator at all; seven misses answered by loaded entries (the
    # dynamic entry of `scaled` answers both 5 and 6 rows), and the same graphs.
    assert loaded["first_calls"] == {"translations": 0, "loaded": 6}
    assert loaded["graphs"] == saved["graphs"]
    assert saved["toy"] == loaded["toy"] == {"resume_functions": 2, "graphs": 3}  # toy_example's three graphs
    # Inputs the loaded guards reject compile as they would cold (results checked in the program).
    assert loaded["after_dtype"] >= 1
    assert loaded["after_int"] > loaded["after_dtype"]
    assert loaded["after_size"] > loaded["after_int"]


def test_eager_entries_run_in_another_process_without_translating(tmp_path):
    _save_then_load(tmp_path, "eager")


@pytest.mark.slow
def test_inductor_entries_run_in_another_process_without_translating(tmp_path):
    _save_then_load(tmp_path, "inductor")


CACHE_DIR_PROGRAM = '''
import json, sys, torch, pyframe
from pyframe import convert_frame

def sin_twice(x):
    return torch.sin(x) * 2

pyframe.config.warm_cache_dir = sys.argv[1]
x = torch.randn(3)
torch.testing.assert_close(pyframe.compile(sin_twice, backend="eager")(x), sin_twice(x))
print(json.dumps(convert_frame.counters))
'''


def test_the_cache_directory_saves_at_exit_and_loads_by_itself(tmp_path):
    program = tmp_path / "cached.py"
    program.write_text(CACHE_DIR_PROGRAM)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    runs = []
    for _ in range(2):
        done = subprocess.run([sys.executable, str(program), str(tmp_path / "cache")], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    assert runs == [{"translations": 1, "loaded": 0}, {"translations": 0, "loaded": 1}]
    assert len(list((tmp_path / "cache").iterdir())) == 1


# -- in this process: invalidation and what a save leaves out --------------------------------------

def _sin_twice(x):
    return torch.sin(x) * 2


def _cos_twice(x):
    return torch.cos(x) * 2


def _compile_and_save(path: pathlib.Path) -> None:
    pyframe.reset()
    compiled = pyframe.optimize("eager")(_sin_twice)
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), _sin_twice(x))
    report = pyframe.save(path)
    assert report.entries == 1 and report.left_out == []
    pyframe.reset()


def _warm_call() -> tuple[int, list[str]]:
    """Call `_sin_twice` compiled; the translator's runs for it and the warnings it gave."""
    before = convert_frame.counters["translations"]
    x = torch.randn(3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.testing.assert_close(pyframe.optimize("eager")(_sin_twice)(x), _sin_twice(x))
    return convert_frame.counters["translations"] - before, [str(w.message) for w in caught]


def test_load_in_the_same_process_after_reset_translates_nothing(tmp_path):
    _compile_and_save(tmp_path / "w.pfw")
    pyframe.load(tmp_path / "w.pfw")
    assert _warm_call() == (0, [])
    pyframe.reset()


@dataclasses.dataclass
class _Scaled:
    x: torch.Tensor
    scale: float


def _make_scaled(x):  # inlines the __init__ @dataclass wrote: a code object no name finds
    s = _Scaled(x, 2.0)
    return torch.sin(s.x) * s.scale


def _translations_of_warm_call(fn, x) -> int:
    before = convert_frame.counters["translations"]
    torch.testing.assert_close(pyframe.optimize("eager")(fn)(x), fn(x))
    return convert_frame.counters["translations"] - before


def test_loaded_entries_are_saved_again_and_load_from_the_new_file(tmp_path):
    # The entry's guard tree pins the dataclass's generated __init__ code, found on load through
    # the frame (`G['_Scaled'].__init__.__code__`, checked against its hash); a process that loaded
    # it writes it again (a restart of a restart), and that file loads too.
    pyframe.reset()
    x = torch.randn(3)
    assert _translations_of_warm_call(_make_scaled, x) == 1
    assert pyframe.save(tmp_path / "first.pfw").left_out == []
    _, units, _ = warm_format.read(tmp_path / "first.pfw")
    assert b"CodeAtSource" in pickle.loads(units[0].entries[0].data)["guards"]["tree"]
    for name in ("first.pfw", "second.pfw"):
        pyframe.reset()
        pyframe.load(tmp_path / name)
        assert _translations_of_warm_call(_make_scaled, x) == 0
        if name == "first.pfw":
            report = pyframe.save(tmp_path / "second.pfw")
            assert (report.entries, report.left_out) == (1, [])
    assert _translations_of_warm_call(_make_scaled, x.double()) == 1  # the loaded guards reject a double
    pyframe.reset()


def test_a_file_of_another_torch_version_loads_nothing_and_names_the_function(tmp_path):
    path = tmp_path / "w.pfw"
    _compile_and_save(path)
    header, units, artifacts = warm_format.read(path)
    warm_format.write(path, units, artifacts, {**header, "torch": "2.0.0"})
    report = pyframe.load(path)
    assert "torch '2.0.0'" in report.unusable
    translated, warned = _warm_call()
    assert translated == 1
    assert any("_sin_twice" in w and "torch '2.0.0'" in w for w in warned), warned
    pyframe.reset()


def test_changed_bytecode_loads_nothing_for_that_function(tmp_path):
    _compile_and_save(tmp_path / "w.pfw")
    original = _sin_twice.__code__
    _sin_twice.__code__ = _cos_twice.__code__.replace(co_name="_sin_twice", co_qualname="_sin_twice")
    try:
        pyframe.load(tmp_path / "w.pfw")
        translated, warned = _warm_call()
    finally:
        _sin_twice.__code__ = original
        pyframe.reset()
    assert translated == 1
    assert any("_sin_twice" in w and "code changed" in w for w in warned), warned


def test_truncated_and_corrupted_files_raise_a_clear_error(tmp_path):
    path = tmp_path / "w.pfw"
    _compile_and_save(path)
    data = path.read_bytes()
    (tmp_path / "short.pfw").write_bytes(data[: len(data) // 2])
    with pytest.raises(WarmStartError, match="truncated"):
        pyframe.load(tmp_path / "short.pfw")
    flipped = bytearray(data)
    flipped[-10] ^= 0xFF
    (tmp_path / "bad.pfw").write_bytes(bytes(flipped))
    with pytest.raises(WarmStartError, match="corrupted"):
        pyframe.load(tmp_path / "bad.pfw")
    (tmp_path / "other.pfw").write_bytes(b"not a warm-start file")
    with pytest.raises(WarmStartError, match="not a pyframe warm-start file"):
        pyframe.load(tmp_path / "other.pfw")


_SCALES = {torch.nn.Linear(2, 2): 2.0}  # keyed by a module: only its identity says which key it is


def _uses_scales(x):
    for _, scale in _SCALES.items():
        x = x * scale
    return torch.sin(x)


def test_an_entry_pinning_an_unnamed_object_is_left_out_and_named(tmp_path):
    pyframe.reset()
    x = torch.randn(3)
    torch.testing.assert_close(pyframe.optimize("eager")(_uses_scales)(x), _uses_scales(x))
    report = pyframe.save(tmp_path / "w.pfw")
    pyframe.reset()
    assert report.entries == 0
    assert [name.split(" ")[0] for name, _ in report.left_out] == ["_uses_scales"]
    assert "Linear module, compared by identity" in report.left_out[0][1]


def test_the_stamped_version_is_pyprojects():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert warm_format.PYFRAME_VERSION == project["project"]["version"]


def test_code_hashes_tell_apart_codes_equal_but_for_their_qualified_names():
    # (code objects compare equal by value without their qualified names: `A.tell` and `B.tell`)
    from pyframe.warm.codes import code_hash
    first = _sin_twice.__code__
    renamed = first.replace(co_qualname="Other._sin_twice")
    assert first == renamed
    assert code_hash(first) != code_hash(renamed)
    assert code_hash(first) == code_hash(first.replace(co_firstlineno=first.co_firstlineno + 3))  # lines left out



def test_an_object_pinned_by_many_guards_is_looked_up_once_on_load(monkeypatch):
    from pyframe.source import LocalSource
    from pyframe.warm import refs
    code = torch.nn.Linear.forward.__code__
    pinned = [refs.ById(torch.nn.functional.relu), refs.ById(code), refs.ById(code, LocalSource("c")),
              refs.ById(torch.nn.functional.relu), refs.held(code)]
    data = refs.dumps(pinned)
    looked_up = []
    for name in ("find_code", "find_function"):
        monkeypatch.setattr(refs, name, lambda *args, _f=getattr(refs, name): looked_up.append(args[1]) or _f(*args))
    assert refs.loads(data) == [torch.nn.functional.relu, code, code, torch.nn.functional.relu, code]
    assert sorted(looked_up) == ["Linear.forward", "relu"]
    # a code no name finds is found at each guard's own source
    unnamed = compile("x = 1", "<nowhere>", "exec")
    loaded = refs.loads(refs.dumps([refs.ById(unnamed, LocalSource("a")), refs.ById(unnamed, LocalSource("b"))]))
    assert [type(c) for c in loaded] == [refs.CodeAtSource] * 2
    assert [c.source.local_name for c in loaded] == ["a", "b"]

def _graphs_of(fn, *args):
    graphs = []

    def keep(gm, inputs):
        graphs.append(gm)
        return gm.forward

    pyframe.optimize(keep)(fn)(*args)
    return graphs


def _branchy(x):  # a graph with subgraphs: cond's branches are GraphModules of their own
    return torch.cond(x.sum() > 0, lambda t: t.sin() * 2, lambda t: t.cos() - 1, (x,)) + x


def test_a_loaded_graph_runs_its_saved_code_without_compiling_its_source(monkeypatch):
    import builtins
    import linecache
    from pyframe.warm.graphs import graph_from_data, graph_to_data
    x = torch.randn(5)
    (gm,) = _graphs_of(_branchy, x)
    data = graph_to_data(gm)
    compiled_sources = []
    real_compile = builtins.compile
    monkeypatch.setattr(builtins, "compile", lambda src, *a, **k: (compiled_sources.append(src), real_compile(src, *a, **k))[1])
    loaded = graph_from_data(data)
    monkeypatch.undo()
    sources = [loaded.code, *(m.code for m in loaded.children())]
    assert len(sources) == 3 and not any(s in compiled_sources for s in sources)
    assert sources == [gm.code, *(m.code for m in gm.children())]
    torch.testing.assert_close(loaded(x), gm(x))
    torch.testing.assert_close(loaded(-x.abs()), (_branchy(-x.abs()),))
    # fx's file name and lines, as fx's own compile gives them (tracebacks, inspect)
    filename = type(loaded).forward.__code__.co_filename
    assert filename != type(gm).forward.__code__.co_filename
    assert "".join(linecache.getlines(filename)).rstrip() == loaded.code.rstrip()


def test_a_graph_whose_code_comes_out_otherwise_is_compiled_from_its_source():
    # The saved code runs only for the very source it was compiled from: a torch whose code
    # generation writes the graph another way (here: the saved source and code replaced) compiles.
    from pyframe.warm import graphs
    x = torch.randn(3)
    (gm,) = _graphs_of(lambda t: t * 3 + 1, x)
    described = graphs.loads(graphs.graph_to_data(gm), graphs._node_refs)
    source, optimize, _ = described["compiled"]
    other = source.replace("def forward", "def unused", 1) + "\ndef forward(self, *args):\n    return (0,)\n"
    described["compiled"] = (other, optimize, graphs._compiled(other)[2])
    loaded = graphs._build(described, examples=False)
    torch.testing.assert_close(loaded(x), gm(x))


def test_a_recorded_guard_tree_replayed_in_cpp_checks_as_the_tree_built_directly():
    from pyframe import _C, config, guard_tree
    from pyframe.warm.tree import TreeRecorder, replay
    captured = []
    real_build = convert_frame.build_tree

    def build(guards, code, exports=(), grouped_inputs=0):
        captured.append((guards, code, list(exports), grouped_inputs))
        return real_build(guards, code, exports, grouped_inputs)

    def fn(x, n, d):
        return torch.relu(x) * n + d["w"]

    args = (torch.randn(3), 2, {"w": torch.ones(3)})
    convert_frame.build_tree = build
    try:
        pyframe.optimize("eager")(fn)(*args)
    finally:
        convert_frame.build_tree = real_build
    guards, code, exports, grouped = captured[-1]
    direct = guard_tree.build_tree(guards, code, exports, grouped)
    recorder = TreeRecorder()
    guard_tree.build_tree(guards, code, exports, grouped, root=recorder.root)
    replayed = replay(recorder.calls, _C.RootGuardManager(config.skip_guards_on_unchanged_objects))
    assert replayed.texts() == direct.texts() and replayed.export_count == direct.export_count
    passes = []
    for call_args in (args, (torch.randn(3), 3, args[2]), (torch.randn(4), 2, args[2]), (args[0], 2, {"v": 1})):
        f_locals = dict(zip(("x", "n", "d"), call_args))
        passes.append(replayed.check(f_locals, globals(), __builtins__))
        assert passes[-1] == direct.check(f_locals, globals(), __builtins__)
        assert replayed.first_failure(f_locals, globals(), __builtins__) == \
            direct.first_failure(f_locals, globals(), __builtins__)
    assert passes[0] and not all(passes)
    with pytest.raises(ValueError, match="no guard tree method frobnicate"):
        _C.replay_tree(_C.RootGuardManager(), [(0, "frobnicate", ())])
    with pytest.raises(ValueError, match="node 3 is not made yet"):
        _C.replay_tree(_C.RootGuardManager(), [(3, "attr", ("x",))])
    with pytest.raises(ValueError, match="attr is not a method of the root"):
        _C.replay_tree(_C.RootGuardManager(), [(0, "attr", ("x",))])

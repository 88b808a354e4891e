"""The structured trace tlparse reads (pyframe/structured_trace.py), read back by tlparse itself.

One program (the seed's `toy_example`: a graph break, both resume functions, a recompile on new
sizes; a frame whose loop breaks, run as Python; a tiny GPT-2 from transformers called on two
lengths: a recompile) runs in a subprocess under pyframe with PYFRAME_TRACE, and under
torch.compile with TORCH_TRACE, each with the "eager" backend. tlparse turns each trace into its
report; the tests read pyframe's report (the index, each graph's file, the breaks, the guards, the
recompile reasons, the failures page) and compare it with torch._dynamo's, compile id by compile id.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import pyframe
from pyframe import structured_trace

ROOT = Path(__file__).resolve().parent.parent
TLPARSE = shutil.which("tlparse")
needs_tlparse = pytest.mark.skipif(TLPARSE is None, reason="tlparse is not installed (pip install -e '.[test]')")

PROGRAM = '''
import sys
import torch
import pyframe
from pyframe.seeds import toy_example

engine = sys.argv[1]


def compiled(fn, **options):
    if engine == "pyframe":
        return pyframe.compile(fn, backend="eager", **options)
    return torch.compile(fn, backend="eager", **options)


def count_up(x):
    for i in range(2):
        x = x + 1
        print("step", i)      # a break inside a loop: the frame runs as Python
    return x


toy = compiled(toy_example, dynamic=False)
toy(torch.randn(10), torch.randn(10).abs())     # a graph, the break, resume at `return x * b`
toy(torch.randn(10), -torch.randn(10).abs())    # the other resume function: `b = b * -1`
toy(torch.randn(3), -torch.randn(3).abs())      # new sizes: toy_example and that resume recompile
compiled(count_up)(torch.randn(3))

if len(sys.argv) > 2:
    import transformers as T
    torch.manual_seed(0)
    model = T.GPT2LMHeadModel(T.GPT2Config(n_embd=32, n_layer=2, n_head=4, vocab_size=256, n_positions=64,
                                           bos_token_id=0, eos_token_id=0)).eval()
    opt = compiled(model)
    with torch.no_grad():
        for seq in (12, 7):                     # the second length recompiles (automatic dynamic)
            opt(input_ids=torch.randint(0, 256, (2, seq)))
'''

# The records both engines write; torch._dynamo writes more (dynamo_side_effects, dynamo_error...).
SHARED_KINDS = {"dynamo_output_graph", "dynamo_graph_break_reason", "dynamo_cpp_guards_str", "recompile_reasons",
                "compilation_metrics", "ORIGINAL_BYTECODE", "MODIFIED_BYTECODE"}


def _has_transformers() -> bool:
    try:
        import transformers  # noqa: F401
    except ImportError:
        return False
    return True


def _start(engine: str, directory: Path) -> subprocess.Popen:
    """The program under `engine`, its trace written to `directory/trace`."""
    directory.mkdir()
    (directory / "program.py").write_text(PROGRAM)
    env = {k: v for k, v in os.environ.items() if k not in ("PYFRAME_TRACE", "TORCH_TRACE", "PYFRAME_LOGS")}
    env["PYTHONPATH"] = str(ROOT)
    env["PYFRAME_TRACE" if engine == "pyframe" else "TORCH_TRACE"] = str(directory / "trace")
    if engine == "pyframe":  # torch's own switch, read when torch is imported: pyframe writes there too
        env["TORCH_TRACE"] = str(directory / "torch_trace")
    args = [sys.executable, "program.py", engine] + (["transformers"] if _has_transformers() else [])
    return subprocess.Popen(args, cwd=directory, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


class Report:
    """What tlparse made of one trace: its output directory, and the records of each compile id."""

    def __init__(self, out: Path):
        self.out = out
        self.index = (out / "index.html").read_text()
        directory = json.loads((out / "compile_directory.json").read_text())
        # "[0/1]" -> {"dynamo_output_graph": [path, ...], "compilation_metrics": [...], ...}
        self.artifacts: dict[str, dict[str, list[Path]]] = {}
        for compile_id, entry in directory.items():
            kinds: dict[str, list[Path]] = {}
            for artifact in entry["artifacts"]:
                kinds.setdefault(_kind(artifact["name"]), []).append(out / artifact["url"])
            self.artifacts[compile_id] = kinds
        # compile id -> its compilation_metrics record, as tlparse kept it
        self.metrics: dict[str, dict] = {}
        for line in (out / "raw.jsonl").read_text().splitlines():
            record = json.loads(line)
            if "compilation_metrics" in record:
                metrics = record["compilation_metrics"]
                self.metrics[f"[{metrics['compile_id']}]"] = metrics

    def ids_with(self, kind: str) -> list[str]:
        return sorted(cid for cid, kinds in self.artifacts.items() if kind in kinds)

    def text(self, compile_id: str, kind: str) -> str:
        (path,) = self.artifacts[compile_id][kind]
        return path.read_text()

    def frame_of(self, name: str) -> str:
        """The frame id ("0" of "[0/1]") of the compiles of the code named `name`."""
        frames = {cid.strip("[]").split("/")[0] for cid, m in self.metrics.items() if m["co_name"] == name}
        assert len(frames) == 1, (name, frames)
        return frames.pop()


def _kind(artifact: str) -> str:
    """An artifact's record kind: `dynamo_output_graph_6.txt` -> dynamo_output_graph; a resume
    function's `<name>_ORIGINAL_BYTECODE_5.txt` -> ORIGINAL_BYTECODE (torch's and pyframe's
    resume functions are named differently)."""
    stem = re.sub(r"_\d+\.\w+$", "", artifact)
    for suffix in ("ORIGINAL_BYTECODE", "MODIFIED_BYTECODE"):
        if stem.endswith(suffix):
            return suffix
    return stem


def _tlparse(trace: Path, out: Path) -> subprocess.CompletedProcess:
    (log,) = trace.glob("*.log")
    return subprocess.run([TLPARSE, str(log), "-o", str(out), "--overwrite", "--no-browser"],
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """The program run under each engine (the two at once): the directory of each run."""
    base = tmp_path_factory.mktemp("structured_trace")
    running = {engine: _start(engine, base / engine) for engine in ("pyframe", "torch")}
    for engine, process in running.items():
        stdout, stderr = process.communicate(timeout=600)
        assert process.returncode == 0, f"{engine}:\n{stderr[-3000:]}"
        assert stdout.count("step") == 2, stdout  # count_up's prints ran once each
    return {engine: base / engine for engine in running}


@pytest.fixture(scope="module")
def reports(runs) -> dict[str, Report]:
    """Each run's trace turned into tlparse's report."""
    if TLPARSE is None:
        pytest.skip("tlparse is not installed (pip install -e '.[test]')")
    result = {}
    for engine, run in runs.items():
        done = _tlparse(run / "trace", run / "out")
        assert done.returncode == 0, done.stderr
        result[engine] = Report(run / "out")
    return result


def test_pyframe_writes_where_torch_trace_and_pyframe_trace_say(runs):
    """The pyframe run had both PYFRAME_TRACE and TORCH_TRACE (another directory): the same records
    went to each, one file each."""
    run = runs["pyframe"]

    def kinds(records: list[dict]) -> list[tuple]:
        # (each of torch's handlers writes torch's version once it opens its file: to every file)
        return [(next(iter(r)), r.get("frame_id"), r.get("frame_compile_id")) for r in records
                if r.get("artifact", {}).get("name") != "torch_version"]

    mine, torchs = _records(run / "trace"), _records(run / "torch_trace")
    assert kinds(mine) == kinds(torchs) and ("dynamo_start", 0, 0) in kinds(mine)


@needs_tlparse
def test_tlparse_lists_every_compile_of_the_toy_example(reports):
    report = reports["pyframe"]
    toy, resume = report.frame_of("toy_example"), report.frame_of("__resume_at_102_0")
    other = report.frame_of("__resume_at_112_1")
    # the first call: toy_example and the resume function of its `return x * b` path; the second:
    # the other resume function; the third (new sizes): toy_example and that one again
    for compile_id in (f"[{toy}/0]", f"[{other}/0]", f"[{resume}/0]", f"[{toy}/1]", f"[{resume}/1]"):
        assert compile_id in report.index
        assert "dynamo_output_graph" in report.artifacts[compile_id]
        assert report.metrics[compile_id]["fail_type"] is None
    assert "toy_example" in report.index and "seeds.py" in report.index  # the stack trie


@needs_tlparse
def test_tlparse_shows_each_graph_with_its_ops(reports):
    report = reports["pyframe"]
    toy = report.frame_of("toy_example")
    graph = report.text(f"[{toy}/0]", "dynamo_output_graph")
    assert "class GraphModule(torch.nn.Module)" in graph
    for op in ("torch.abs(l_a_)", "abs_1 + 1", "l_b_.sum()", "sum_1 < 0"):
        assert op in graph
    assert report.metrics[f"[{toy}/0]"]["graph_op_count"] == 5
    assert 'f32[3][1]cpu' in report.text(f"[{toy}/1]", "dynamo_output_graph")  # the recompile's sizes
    resume = report.frame_of("__resume_at_102_0")
    assert '= l_b_ * -1' in report.text(f"[{resume}/0]", "dynamo_output_graph")
    assert "RESUME" in report.text(f"[{resume}/0]", "ORIGINAL_BYTECODE")
    assert "__compiled_fn" in report.text(f"[{resume}/0]", "MODIFIED_BYTECODE")


@needs_tlparse
def test_tlparse_shows_breaks_guards_and_recompile_reasons(reports):
    report = reports["pyframe"]
    toy = report.frame_of("toy_example")
    reason = report.text(f"[{toy}/0]", "dynamo_graph_break_reason")
    assert "data-dependent branch on a tensor" in reason and "if b.sum() < 0:" in reason
    assert report.ids_with("dynamo_graph_break_reason").count(f"[{toy}/1]") == 1
    guards = report.text(f"[{toy}/0]", "dynamo_cpp_guards_str")
    assert "check_tensor(L['a'], torch.Tensor, torch.float32, device='cpu', size=[10], stride=[1]" in guards
    assert report.metrics[f"[{toy}/0]"]["guard_count"] == guards.count("\n  ")
    assert "(L['a'] size()[0]: 10 -> 3)" in report.text(f"[{toy}/1]", "recompile_reasons")
    assert report.metrics[f"[{toy}/1]"]["cache_size"] == 1


@needs_tlparse
def test_tlparse_puts_each_compile_on_the_chromium_timeline(reports):
    report = reports["pyframe"]
    events = json.loads((report.out / "chromium_events.json").read_text())
    spans: dict[str, list[tuple[str, float]]] = {}
    for event in events:
        spans.setdefault(f"[{event['args']['compile_id']}]", []).append((event["ph"], event["ts"]))
    assert spans.keys() == report.metrics.keys()  # every compile, the frame run as Python's too
    for (begin, start), (end, stop) in spans.values():
        assert (begin, end) == ("B", "E") and start <= stop


@needs_tlparse
def test_tlparse_lists_a_frame_run_as_python_among_failures(reports):
    report = reports["pyframe"]
    count_up = report.frame_of("count_up")
    metrics = report.metrics[f"[{count_up}/0]"]
    assert metrics["fail_type"] == "Unsupported" and "print" in metrics["fail_reason"]
    assert "dynamo_output_graph" not in report.artifacts[f"[{count_up}/0]"]
    failures = (report.out / "failures_and_restarts.html").read_text()
    assert f"[{count_up}/0]" in failures and "Unsupported" in failures


@needs_tlparse
@pytest.mark.skipif(not _has_transformers(), reason="transformers is not installed")
def test_tlparse_shows_a_transformers_model_and_its_recompile(reports):
    report = reports["pyframe"]
    forward = report.frame_of("wrapper")  # GPT2LMHeadModel.forward, under transformers' decorator
    assert "transformers/utils/generic.py" in report.index and "in wrapper" in report.index
    graph = report.text(f"[{forward}/0]", "dynamo_output_graph")
    assert "torch.nn.functional.embedding(" in graph and "scaled_dot_product_attention(" in graph
    assert report.metrics[f"[{forward}/0]"]["graph_op_count"] > 50
    assert "(L['kwargs']['input_ids'] size()[1]: 12 -> 7" in report.text(f"[{forward}/1]", "recompile_reasons")


@needs_tlparse
def test_tlparse_report_matches_torch_dynamos_compile_by_compile(reports):
    """The same program under torch.compile: the same compile ids, each with the same kinds of
    records (graphs, breaks, recompile reasons...), the same op and input counts, the same failures."""
    mine, theirs = reports["pyframe"], reports["torch"]

    def shared(report: Report) -> dict[str, set[str]]:
        return {cid: set(kinds) & SHARED_KINDS for cid, kinds in report.artifacts.items() if cid != "[-/-]"}

    assert shared(mine) == shared(theirs)
    assert mine.metrics.keys() == theirs.metrics.keys()
    for compile_id, metrics in mine.metrics.items():
        other = theirs.metrics[compile_id]
        assert metrics["co_name"].startswith("__resume_at_") == other["co_name"].startswith("torch_dynamo_resume_in_")
        for field in ("graph_input_count", "cache_size"):
            assert metrics.get(field) == other.get(field), (compile_id, field)
        # torch._dynamo's graphs with symbolic sizes build torch.Size objects of them, as ops of the
        # graph (GPT-2's recompile, under automatic dynamic); pyframe's graphs do not
        sizes_built = sum(path.read_text().count("torch.Size(")
                          for path in theirs.artifacts[compile_id].get("dynamo_output_graph", []))
        if metrics.get("graph_op_count") is None:
            assert other.get("graph_op_count") is None, compile_id
        else:
            assert metrics["graph_op_count"] == other["graph_op_count"] - sizes_built, compile_id
        assert (metrics["fail_type"] is None) == (other["fail_type"] is None), compile_id


def _records(trace_dir: Path) -> list[dict]:
    (log,) = trace_dir.glob("*.log")
    lines = [line for line in log.read_text().splitlines() if not line.startswith("\t")]
    return [json.loads(line[line.index("{"):]) for line in lines]


def test_set_logs_trace_dir_writes_the_records_in_process(tmp_path):
    """`pyframe.set_logs(trace_dir=...)` turns the trace on in a running process, and off again."""
    if structured_trace.is_on():
        pytest.skip("TORCH_TRACE or PYFRAME_TRACE is set for this run")

    def double(x):
        return x * 2

    pyframe.set_logs(trace_dir=tmp_path / "trace")
    try:
        assert structured_trace.is_on() and structured_trace.trace_dir() == str(tmp_path / "trace")
        opt = pyframe.optimize("eager")(double)
        torch.testing.assert_close(opt(torch.ones(3)), torch.ones(3) * 2)
    finally:
        pyframe.set_logs(trace_dir=None)
    assert not structured_trace.is_on() and structured_trace.trace_dir() is None
    records = _records(tmp_path / "trace")
    starts = [r for r in records if "dynamo_start" in r]
    assert len(starts) == 1 and starts[0]["dynamo_start"]["stack"][-1]["name"] == "double"
    graph = next(r for r in records if "dynamo_output_graph" in r)
    assert (graph["frame_id"], graph["frame_compile_id"]) == (starts[0]["frame_id"], starts[0]["frame_compile_id"])
    metrics = next(r["compilation_metrics"] for r in records if "compilation_metrics" in r)
    assert metrics["co_name"] == "double" and metrics["graph_op_count"] == 1
    # off again: another compile writes nothing
    size = next((tmp_path / "trace").glob("*.log")).stat().st_size
    torch.testing.assert_close(pyframe.optimize("eager")(lambda x: x + 1)(torch.ones(2)), torch.ones(2) + 1)
    assert next((tmp_path / "trace").glob("*.log")).stat().st_size == size


@pytest.fixture
def trace_dir(tmp_path):
    """The trace on, in this process, into tmp_path/trace; off again after the test."""
    if structured_trace.is_on():
        pytest.skip("TORCH_TRACE or PYFRAME_TRACE is set for this run")
    pyframe.set_logs(trace_dir=tmp_path / "trace")
    yield tmp_path / "trace"
    pyframe.set_logs(trace_dir=None)


def test_a_frame_past_the_recompile_limit_is_a_failure_in_the_trace(trace_dir, monkeypatch):
    monkeypatch.setattr(pyframe.config, "recompile_limit", 1)

    def halve(x):
        return x / 2

    opt = pyframe.optimize("eager", dynamic=False)(halve)
    torch.testing.assert_close(opt(torch.ones(2)), torch.ones(2) / 2)
    with pytest.warns(UserWarning, match="hit config.recompile_limit"):
        torch.testing.assert_close(opt(torch.ones(3)), torch.ones(3) / 2)
    metrics = [r["compilation_metrics"] for r in _records(trace_dir) if "compilation_metrics" in r]
    assert [m["fail_type"] for m in metrics] == [None, "RecompileLimitExceeded"]
    assert "L['x'] size()[0]: 2 -> 3" in metrics[1]["fail_reason"]
    assert metrics[0]["compile_id"].split("/")[0] == metrics[1]["compile_id"].split("/")[0]


def test_a_failure_writing_the_trace_never_changes_the_result(trace_dir, monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(torch._logging, "trace_structured", broken)

    def shift(x):
        return x - 1

    opt = pyframe.optimize("eager")(shift)
    torch.testing.assert_close(opt(torch.ones(3)), torch.zeros(3))
    torch.testing.assert_close(opt(torch.ones(3)), torch.zeros(3))  # a cache hit: it compiled
    assert [e.hits for e in pyframe.debug.cache_entries(shift)] == [1]
    assert "writing the structured trace failed" in caplog.text and "disk full" in caplog.text


def test_trace_dir_of_torch_trace_is_not_written_twice(tmp_path):
    """PYFRAME_TRACE naming TORCH_TRACE's directory adds no handler: one file, not two alike."""
    if structured_trace.is_on():
        pytest.skip("TORCH_TRACE or PYFRAME_TRACE is set for this run")
    trace_log = torch._logging._internal.trace_log
    torchs = torch._logging._internal.LazyTraceHandler(str(tmp_path))  # what TORCH_TRACE=tmp_path installs
    trace_log.addHandler(torchs)
    try:
        pyframe.set_logs(trace_dir=tmp_path)
        assert structured_trace.trace_dir() is None and trace_log.handlers.count(torchs) == 1
        assert structured_trace.is_on()
    finally:
        trace_log.removeHandler(torchs)
        pyframe.set_logs(trace_dir=None)
    assert not structured_trace.is_on()


def test_set_logs_trace_dir_refuses_what_is_not_a_directory_name():
    with pytest.raises(TypeError, match="trace_dir takes a directory"):
        pyframe.set_logs(trace_dir=3)
    assert structured_trace.trace_dir() is None

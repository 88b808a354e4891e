"""The debugging views: cache_entries, show, the logs, and the compare / explain / demo commands."""
from __future__ import annotations

import io
import json
import logging
import runpy
import sys
from pathlib import Path

import pytest
import torch

import pyframe
from pyframe import _C, logs
from pyframe.__main__ import main
from pyframe.debug import CacheEntryInfo, cache_entries, show
from pyframe.debug.compare import Progress

ROOT = Path(__file__).resolve().parent.parent


def toy_example(a, b):
    x = a / (torch.abs(a) + 1)
    if b.sum() < 0:
        b = b * -1
    return x * b


def add_one(x):
    return x + 1


class TwoLayers(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x).relu()


def both_branches():
    """toy_example compiled and run on both branches: 3 graphs, one entry each for 3 codes."""
    opt = pyframe.optimize("eager")(toy_example)
    b = torch.randn(10)
    opt(torch.randn(10), b.abs())
    opt(torch.randn(10), -b.abs())
    return opt


@pytest.fixture(autouse=True)
def _logs_off():
    logs.set_logs()
    yield
    logs.set_logs()


# -- cache_entries --------------------------------------------------------------------------------


def test_a_new_shape_adds_an_entry_whose_reason_names_the_failed_guard():
    opt = pyframe.optimize("eager", dynamic=False)(add_one)  # (static: the new entry is for size 4)
    opt(torch.randn(10))
    opt(torch.randn(4))
    entries = cache_entries(add_one)
    assert len(entries) == 2
    newest, first = entries
    assert first.reason == "first compile" and first.number == 1
    assert newest.number == 2 and newest.is_recompile
    # The failed check is the first entry's size guard on x, quoted as it reads.
    assert newest.reason.startswith("guard failed: check_tensor(L['x']")
    assert "size=[10]" in newest.reason
    assert any("check_tensor(L['x']" in g and "size=[4]" in g for g in newest.guards)
    assert any("size=[10]" in g for g in first.guards)
    assert all(isinstance(e, CacheEntryInfo) and e.backend == "eager" for e in entries)


def test_hit_counts_increase_with_cached_calls():
    opt = pyframe.optimize("eager", dynamic=False)(add_one)  # (static: one entry per size)
    x = torch.randn(3)
    opt(x)
    assert cache_entries(add_one)[0].hits == 0  # the compiling call is not a hit
    opt(x)
    opt(x)
    assert cache_entries(add_one)[0].hits == 2
    opt(torch.randn(5))  # a miss on the first entry, a new entry in front
    entries = cache_entries(add_one)
    assert [e.hits for e in entries] == [0, 2]
    opt(torch.randn(5))
    opt(x)  # a hit on the older entry moves it to the front again
    assert [(e.number, e.hits) for e in cache_entries(add_one)] == [(1, 3), (2, 1)]


def test_entries_include_the_resume_functions_with_their_graphs():
    both_branches()
    entries = cache_entries(toy_example)
    assert len(entries) == 3
    main_entry, *resumes = entries
    assert main_entry.code is toy_example.__code__
    assert "if b.sum() < 0:" in main_entry.break_reason
    assert [c.co_name for c in main_entry.resume_codes] == [r.function for r in sorted(
        resumes, key=lambda r: main_entry.resume_codes.index(r.code))]
    assert all(r.function.startswith("__resume_at_") for r in resumes)
    graphs = [gm for e in entries for gm in e.graphs]
    assert len(graphs) == 3 and all(isinstance(gm, torch.fx.GraphModule) for gm in graphs)
    assert main_entry.transformed is _C.get_cache_entries(toy_example.__code__)[0].code
    assert main_entry.graph_names[0].startswith("__compiled_fn_")


def test_entry_str_reads_as_a_report():
    opt = pyframe.optimize("eager")(add_one)
    opt(torch.randn(2))
    opt(torch.randn(2))
    text = str(cache_entries(add_one)[0])
    assert text.startswith("add_one (test_debug.py:")
    assert "entry #1, 1 hit(s), backend 'eager'" in text
    assert "made by: first compile" in text
    assert "check_tensor(L['x']" in text
    assert "graphs: __compiled_fn_" in text


def test_cache_entries_accepts_modules_wrappers_and_code_objects():
    module = TwoLayers()
    opt = pyframe.optimize("eager")(module)
    opt(torch.randn(3, 4))
    forward_code = TwoLayers.forward.__code__
    for target in (opt, module, forward_code, TwoLayers.forward, module.forward):
        entries = cache_entries(target)
        assert len(entries) == 1 and entries[0].code is forward_code
    wrapper = pyframe.optimize("eager")(add_one)
    wrapper(torch.ones(1))
    assert cache_entries(wrapper)[0].code is add_one.__code__


def test_cache_entries_of_something_else_says_what_is_accepted():
    with pytest.raises(TypeError, match="expects a function, a method, an nn.Module"):
        cache_entries(42)


def test_no_entries_before_the_first_call():
    assert cache_entries(add_one) == []


# -- show ------------------------------------------------------------------------------------------


def test_show_sets_original_and_transformed_bytecode_side_by_side_with_graph_code(capsys):
    both_branches()
    text = show(toy_example, quiet=True, depyf=False)
    assert capsys.readouterr().out == ""  # quiet: returned only
    assert "original bytecode" in text and "transformed bytecode" in text
    header = next(line for line in text.splitlines() if line.startswith("original bytecode"))
    assert "| transformed bytecode" in header
    # Original instructions on the left, transformed (which call the graph by name) on the right.
    assert any("LOAD_METHOD sum" in line.split("|")[0] for line in text.splitlines() if "|" in line)
    assert any("LOAD_CONST __compiled_fn_" in line.split("|")[1] for line in text.splitlines() if "|" in line)
    # The resume functions and the code of all three graphs.
    assert text.count("=== resume function __resume_at_") == 2
    gm_codes = [gm.code.strip() for e in cache_entries(toy_example) for gm in e.graphs]
    assert len(gm_codes) == 3 and all(code in text for code in gm_codes)
    assert "def forward(self" in text


def test_show_prints_the_text_quiet_returns_and_the_repl_echoes_nothing(capsys):
    opt = pyframe.optimize("eager")(add_one)
    opt(torch.ones(2))
    assert show(add_one, depyf=False) is None  # printed once; the REPL has nothing to echo
    printed = capsys.readouterr().out
    assert printed == show(add_one, quiet=True, depyf=False)
    assert "=== add_one (test_debug.py:" in printed


def test_explain_and_cache_entries_show_their_reports_at_the_repl():
    opt = pyframe.optimize("eager")(add_one)
    opt(torch.ones(2))
    entries = cache_entries(add_one)
    assert repr(entries) == str(entries) == str(entries[0]) and repr(entries[0]).startswith("add_one (")
    assert entries == [entries[0]] and isinstance(entries, list)
    pyframe.reset()
    assert repr(cache_entries(add_one)).startswith("no cache entries")
    out = pyframe.explain(toy_example)(torch.randn(4), torch.randn(4))
    assert repr(out) == str(out) and repr(out).startswith("Graph Count: 2\nGraph Break Count: 1\n")


def test_show_without_depyf_says_how_to_get_decompiled_code(monkeypatch):
    monkeypatch.setitem(sys.modules, "depyf", None)  # `import depyf` raises ImportError
    opt = pyframe.optimize("eager")(add_one)
    opt(torch.ones(2))
    text = show(add_one, quiet=True)
    assert "decompiled by depyf" not in text
    assert 'pip install -e ".[debug]"' in text  # as the README and docs/debugging.md say


def test_show_with_depyf_decompiles_the_transformed_code():
    pytest.importorskip("depyf")
    both_branches()
    text = show(toy_example, quiet=True)
    assert "transformed code, decompiled by depyf:" in text
    decompiled = text.split("transformed code, decompiled by depyf:")[1]
    assert "def toy_example(a, b):" in decompiled
    assert "= __compiled_fn_" in decompiled  # the graph by name, not '__co_consts[0]'
    assert "return __resume_at_" in decompiled


def test_show_of_a_function_never_compiled_shows_its_bytecode():
    text = show(add_one, quiet=True)
    assert "no cache entries" in text
    assert "BINARY_OP +" in text


# -- logs ------------------------------------------------------------------------------------------


def _channel_records(caplog, channel: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == f"pyframe.{channel}"]


def test_graph_channel_logs_each_compiled_graph(caplog):
    pyframe.set_logs("graph")
    both_branches()
    messages = _channel_records(caplog, "graph")
    assert len(messages) == 3
    assert all("def forward(self" in m and "__compiled_fn_" in m for m in messages)
    assert "torch.abs(l_a_)" in messages[0]


def test_guards_channel_logs_the_guards_of_each_new_entry(caplog):
    pyframe.set_logs("guards")
    pyframe.optimize("eager")(add_one)(torch.randn(7))
    (message,) = _channel_records(caplog, "guards")
    assert "add_one" in message
    assert "check_tensor(L['x'], torch.Tensor, torch.float32, device='cpu', size=[7]" in message


def test_bytecode_channel_logs_original_and_transformed_code(caplog):
    pyframe.set_logs("bytecode")
    pyframe.optimize("eager")(add_one)(torch.randn(7))
    (message,) = _channel_records(caplog, "bytecode")
    original, transformed = message.split("transformed bytecode:")
    assert "original bytecode of add_one" in original and "BINARY_OP" in original
    assert "CALL" in transformed and "RETURN_VALUE" in transformed


def test_breaks_channel_logs_reason_and_user_source_line(caplog):
    pyframe.set_logs("breaks")
    both_branches()
    (message,) = _channel_records(caplog, "breaks")
    assert "graph break in toy_example" in message
    assert "data-dependent branch on a tensor" in message
    assert "test_debug.py:" in message and "`if b.sum() < 0:`" in message
    assert "continues in __resume_at_" in message


def test_recompiles_channel_logs_the_failed_guard(caplog):
    pyframe.set_logs("recompiles")
    opt = pyframe.optimize("eager")(add_one)
    opt(torch.randn(10))
    opt(torch.randn(10))
    assert _channel_records(caplog, "recompiles") == []  # a first compile and a hit are not recompiles
    opt(torch.randn(3))
    (message,) = _channel_records(caplog, "recompiles")
    assert message.startswith("recompiling add_one")
    assert "guard failed: check_tensor(L['x']" in message and "size=[10]" in message


def test_all_turns_on_every_channel_and_nothing_is_logged_when_off(caplog):
    caplog.set_level(logging.DEBUG)
    both_branches()
    assert not [r for r in caplog.records if r.name.startswith("pyframe.")]
    pyframe.reset()
    pyframe.set_logs("all")
    both_branches()
    assert {r.name for r in caplog.records} >= {f"pyframe.{c}" for c in logs.CHANNELS} - {"pyframe.recompiles"}


def test_set_logs_accepts_comma_lists_and_rejects_unknown_channels():
    pyframe.set_logs("graph, breaks")
    assert logs.enabled == {"graph", "breaks"}
    pyframe.set_logs("all")
    assert logs.enabled == set(logs.CHANNELS)
    pyframe.set_logs()
    assert logs.enabled == frozenset()
    with pytest.raises(ValueError, match="unknown log channel.*'graphs'.*known: graph, guards"):
        pyframe.set_logs("graphs")


def test_environment_variable_is_read_and_a_typo_only_warns(monkeypatch):
    monkeypatch.setenv("PYFRAME_LOGS", "guards,recompiles")
    logs._from_environment()
    assert logs.enabled == {"guards", "recompiles"}
    monkeypatch.setenv("PYFRAME_LOGS", "graph,bogus")
    with pytest.warns(UserWarning, match="ignoring PYFRAME_LOGS"):
        logs._from_environment()


def test_logs_print_to_stderr_when_logging_is_not_configured(monkeypatch, capsys):
    monkeypatch.setattr(logging.getLogger(), "handlers", [])
    pyframe.set_logs("guards")
    pyframe.optimize("eager")(add_one)(torch.randn(2))
    err = capsys.readouterr().err
    assert err.startswith("[pyframe.guards] ") and "size=[2]" in err


# -- python -m pyframe compare ---------------------------------------------------------------------


def test_compare_prints_a_table_with_totals_and_writes_json(tmp_path, capsys):
    out = tmp_path / "report.json"
    code = main(["compare", "-k", "elementwise.cos_plus_sin", "-k", "graph_breaks.toy_example_negative",
                 "--no-timing", "--json", str(out)])
    assert code == 0
    text = capsys.readouterr().out
    header = text.splitlines()[0]
    for column in ("ok pf", "ok dyn", "graphs pf/dyn", "breaks pf/dyn", "ops match", "compile ms pf",
                   "compile ms dyn", "call us pf", "call us dyn"):
        assert column in header
    row = next(line for line in text.splitlines() if line.startswith("graph_breaks.toy_example_negative"))
    assert row.split()[1:6] == ["ok", "ok", "2/2", "1/1", "yes"]
    assert next(line for line in text.splitlines() if line.startswith("TOTAL (2 cases)")).split()[3:8] == \
        ["2/2", "2/2", "3/3", "1/1", "2/2"]
    assert "warm compile time pyframe/dynamo = " in text
    report = json.loads(out.read_text())
    assert [c["case"] for c in report["cases"]] == ["elementwise.cos_plus_sin",
                                                     "graph_breaks.toy_example_negative"]
    toy = report["cases"][1]
    assert toy["ops_match"] is True
    assert toy["engines"]["pyframe"]["ok"] is True
    assert toy["engines"]["pyframe"]["graphs"] == 2 and toy["engines"]["pyframe"]["breaks"] == 1
    assert toy["engines"]["dynamo"]["breaks"] == 1
    assert toy["engines"]["pyframe"]["ops"] == toy["engines"]["dynamo"]["ops"]
    assert report["totals"]["ok"] == {"pyframe": 2, "dynamo": 2}


USER_CASES = '''
import torch
import pyframe


@pyframe.debug.case(inputs=lambda: (torch.randn(6), torch.randn(6)))
def half_diff(x, y):
    return (x - y) * 0.5


@pyframe.debug.case(inputs=lambda: torch.randn(6))
def noisy(x):
    return x + torch.rand(6)  # a fresh draw on every call: no engine can equal eager here
'''


def test_compare_runs_user_cases_and_fails_when_a_result_differs(tmp_path, capsys, monkeypatch):
    (tmp_path / "pf_user_cases_a.py").write_text(USER_CASES)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["compare", "--cases", "pf_user_cases_a", "-k", "half_diff", "--no-timing"]) == 0
    text = capsys.readouterr().out
    assert "pf_user_cases_a.half_diff" in text and "TOTAL (1 cases)" in text
    assert "0 pyframe failure(s)" in text
    # The same module given as a file path; the noisy case makes pyframe's result differ from eager's.
    assert main(["compare", "--cases", str(tmp_path / "pf_user_cases_a.py"), "--no-timing"]) == 1
    text = capsys.readouterr().out
    assert "pf_user_cases_a.noisy: pyframe result differs from eager" in text
    assert "1 pyframe failure(s)" in text


def test_compare_of_a_module_without_cases_says_how_to_add_them(tmp_path):
    (tmp_path / "pf_no_cases.py").write_text("x = 1\n")
    with pytest.raises(SystemExit, match=r"@pyframe.debug.case\(inputs=...\)"):
        main(["compare", "--cases", str(tmp_path / "pf_no_cases.py")])


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_redraws_on_a_terminal_and_is_silent_otherwise():
    stream = _Terminal()
    bar = Progress(2, stream, width=10)
    bar.step("first.case")
    bar.step("second.case")
    bar.close()
    text = stream.getvalue()
    assert "\r[..........] 0/2 first.case" in text and "\r[#####.....] 1/2 second.case" in text
    assert text.endswith("\r")
    quiet = io.StringIO()
    Progress(2, quiet).step("a")
    assert quiet.getvalue() == ""


# -- python -m pyframe explain ---------------------------------------------------------------------


EXPLAIN_MODULE = '''
import torch
import pyframe


def norm(x):
    return x / x.norm()


def norm_inputs():
    return torch.randn(5)


def branchy(x):
    if x.max() > 1:
        x = x.clamp(max=1)
    return x.exp()


def example_inputs():
    return (torch.randn(8) * 3,)


def big_inputs():
    return pyframe.debug.Inputs((torch.randn(2, 3),))


@pyframe.debug.case(inputs=lambda: torch.randn(3, 4))
class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)
'''


def test_explain_command_takes_inputs_from_the_modules_factories(tmp_path, capsys):
    path = tmp_path / "pf_explain_target.py"
    path.write_text(EXPLAIN_MODULE)
    assert main(["explain", f"{path}:norm"]) == 0  # norm_inputs()
    text = capsys.readouterr().out
    assert "Graph Count: 1" in text and "Graph Break Count: 0" in text
    assert "size=[5]" in text
    assert main(["explain", f"{path}:branchy"]) == 0  # example_inputs()
    text = capsys.readouterr().out
    assert "Graph Break Count: 1" in text and "if x.max() > 1:" in text
    assert main(["explain", f"{path}:norm", "--inputs", "big_inputs"]) == 0
    assert "size=[2, 3]" in capsys.readouterr().out
    assert main(["explain", f"{path}:Tiny"]) == 0  # an nn.Module class with its @case inputs
    text = capsys.readouterr().out
    assert "Graph Count: 1" in text and "linear" in text and "size=[3, 4]" in text
    # explain() leaves no cache entries behind.
    assert _C.get_cache_entries(sys.modules["pf_explain_target"].norm.__code__) == []


def test_explain_command_with_show_prints_the_bytecode(tmp_path, capsys):
    path = tmp_path / "pf_explain_show.py"
    path.write_text(EXPLAIN_MODULE)
    assert main(["explain", f"{path}:norm", "--show"]) == 0
    text = capsys.readouterr().out
    assert "Graph Count: 1" in text and "transformed bytecode" in text and "def forward(self" in text


def test_explain_command_without_inputs_says_where_they_come_from(tmp_path):
    path = tmp_path / "pf_explain_none.py"
    path.write_text("def f(x):\n    return x\n")
    with pytest.raises(SystemExit, match=r"give --inputs FACTORY.*f_inputs\(\) or example_inputs\(\)"):
        main(["explain", f"{path}:f"])
    with pytest.raises(SystemExit, match="expected module:function"):
        main(["explain", "no_colon_here"])


# -- the demo and the eval-frame example -------------------------------------------------------------


def test_demo_shows_graphs_explain_recompile_code_and_comparison(capsys):
    assert main(["demo"]) == 0
    text = capsys.readouterr().out
    assert text.count("my_compiler() called with FX graph:") == 5  # fn, MockModule, toy_example x3
    assert "3 graph(s); result matches eager on 2 call(s)" in text
    assert "Graph Break Count: 1" in text
    assert "why the newest entry exists: guard failed: check_tensor(L['x']" in text
    assert "transformed bytecode" in text and "=== resume function __resume_at_" in text
    table = text[text.index("python -m pyframe compare, in small"):]
    assert "seeds.toy_example" in table and "TOTAL (5 cases)" in table
    assert "WRONG" not in table and "ERROR" not in table


def test_eval_frame_callback_example_logs_frames_and_restores_the_callback(capsys):
    example = runpy.run_path(str(ROOT / "examples" / "eval_frame_callback.py"), run_name="example")
    before = _C.set_eval_frame(None)
    _C.set_eval_frame(before)
    example["main"]()
    assert _C.set_eval_frame(before) is before  # the callback in force afterwards is the one before
    out = capsys.readouterr().out
    assert "calling bar(3)\ncalling foo(3, 1)\ncalling helper([3, 3])\n" in out
    assert "the callback was asked 2 times for 6 calls" in out
    assert "hits=3" in out and "after clear_code: 0 entries" in out
    assert _C.get_cache_entries(example["foo"].__code__) == []

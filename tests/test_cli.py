"""`python -m pyframe` as a newcomer meets it: run in a subprocess from a directory that is not the
checkout, with only the package importable (a copy of it, as an install would put it), and without
numpy; its errors are one line saying what to do; compare's bookkeeping of fallbacks."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import pyframe
from pyframe.__main__ import main

PACKAGE = Path(pyframe.__file__).resolve().parent

# Runs `python -m pyframe ARGS` with numpy hidden (as on a machine without it), then says whether
# the repository's `tests` package was imported.
RUNNER = """
import runpy, sys
sys.modules["numpy"] = None
sys.argv = ["python -m pyframe", *sys.argv[1:]]
try:
    runpy.run_module("pyframe", run_name="__main__", alter_sys=True)
finally:
    print("imported tests:", any(m == "tests" or m.startswith("tests.") for m in sys.modules), file=sys.stderr)
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """(a working directory outside the checkout, an environment whose PYTHONPATH finds a copy of
    the package and nothing of the repository)."""
    site = tmp_path_factory.mktemp("site")
    shutil.copytree(PACKAGE, site / "pyframe", ignore=shutil.ignore_patterns("__pycache__"))
    cwd = tmp_path_factory.mktemp("elsewhere")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYFRAME_LOGS")}
    env["PYTHONPATH"] = str(site)
    return cwd, env


def _run(installed, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    cwd, env = installed
    return subprocess.run([sys.executable, "-c", RUNNER, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_demo_from_elsewhere_without_numpy_gives_a_right_table(installed):
    done = _run(installed, "demo")
    assert done.returncode == 0, done.stderr
    assert "imported tests: False" in done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    site = installed[1]["PYTHONPATH"]
    assert f"{site}/pyframe/seeds.py" in done.stdout and str(PACKAGE) not in done.stdout  # the copy ran
    table = done.stdout[done.stdout.index("python -m pyframe compare, in small"):]
    lines = table.splitlines()
    header = next(line for line in lines if line.startswith("case "))
    assert "ops match" in header and "code match" in header
    rows = [line.split() for line in lines if line.startswith("seeds.") and not line.split()[0].endswith(":")]
    assert [r[0] for r in rows] == ["seeds.fn", "seeds.MockModule", "seeds.toy_example",
                                    "seeds.toy_example_negative", "seeds.DynamicModule"]
    for row in rows:
        ok_pf, ok_dyn, graphs, breaks, ops, code = row[1:7]
        assert (ok_pf, ok_dyn, ops, code) == ("ok", "ok", "yes", "yes"), row  # the seeds' graphs are Dynamo's
        pf_graphs, dyn_graphs = graphs.split("/")
        assert pf_graphs == dyn_graphs and breaks.split("/")[0] == breaks.split("/")[1], row
    total = next(line for line in lines if line.startswith("TOTAL")).split()
    assert total[:9] == ["TOTAL", "(5", "cases)", "5/5", "5/5", "8/8", "3/3", "5/5", "5/5"], total


def test_help_lists_every_subcommand(installed):
    done = _run(installed, "--help", timeout=120)
    assert done.returncode == 0
    for command in ("demo", "compare", "parity", "explain"):
        assert f"\n    {command} " in done.stdout  # argparse's list of subcommands
        assert f"\n  {command} " in done.stdout  # the description of each below it


def _one_line_error(done: subprocess.CompletedProcess, command: str, *words: str) -> str:
    lines = [line for line in done.stderr.splitlines() if not line.startswith("imported tests:")
             and "Failed to initialize NumPy" not in line and "_conversion_method_template" not in line]
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and lines[0].startswith(f"python -m pyframe {command}: error: "), done.stderr
    for word in words:
        assert word in lines[0]
    return lines[0]


def test_parity_outside_a_checkout_fails_at_once_saying_what_to_do(installed):
    start = time.perf_counter()
    done = _run(installed, "parity", timeout=120)
    _one_line_error(done, "parity", "checkout", "--out")
    done = _run(installed, "parity", "--out", "parity.md", timeout=120)
    _one_line_error(done, "parity", "tests/cases", "--cases")
    assert time.perf_counter() - start < 60  # no case ran


@pytest.mark.parametrize("args, words", [
    (("explain", "no_such_module_here:fn"), ("no module named 'no_such_module_here'", ".py")),
    (("explain", "missing/file.py:fn"), ("no such file",)),
    (("explain", "mod:fn", "--backend", "no_such_backend"), ("unknown backend 'no_such_backend'", "eager")),
    (("compare", "--backend", "no_such_backend"), ("unknown backend",)),
    (("compare",), ("checkout", "--cases")),
    (("parity", "--out", "no/such/dir/parity.md"), ("no directory no/such/dir",)),
], ids=["missing-module", "missing-file", "explain-backend", "compare-backend", "compare-no-corpus", "parity-out"])
def test_command_line_mistakes_are_one_line_errors(installed, args, words):
    _one_line_error(_run(installed, *args, timeout=120), args[0], *words)


# -- compare's bookkeeping: fallbacks and internal errors never match ------------------------------

FALLING_BACK = '''
import threading
import torch
import pyframe

LOCK = threading.Lock()


@pyframe.debug.case(inputs=lambda: torch.randn(6))
def under_a_lock(x):
    y = x * 2
    with LOCK:              # a lock's __enter__ is C code the trace cannot model: plain Python
        y = y + 1
    return y


@pyframe.debug.case(inputs=lambda: (torch.randn(4), {"scale": 3.0}))
def pops_its_input(x, d):  # a second call on the same dict would fail: timed on fresh inputs
    return x * d.pop("scale"), d
'''


def test_compare_never_counts_a_fallback_as_matching(tmp_path, capsys):
    path = tmp_path / "pf_falling_back.py"
    path.write_text(FALLING_BACK)
    assert main(["compare", "--cases", str(path), "--json", str(tmp_path / "out.json")]) == 0
    text = capsys.readouterr().out
    row = next(line for line in text.splitlines() if line.startswith("pf_falling_back.under_a_lock")).split()
    assert row[1:3] == ["ok", "ok"] and row[5:9] == ["FELL", "BACK", "FELL", "BACK"], row
    popped = next(line for line in text.splitlines() if line.startswith("pf_falling_back.pops_its_input")).split()
    assert popped[1:3] == ["ok", "ok"] and "n/a" not in popped, popped  # timed, every engine
    assert "pf_falling_back.under_a_lock: pyframe ran frames as plain Python: under_a_lock" in text
    assert "compiled every frame of 1," in text
    import json
    report = json.loads((tmp_path / "out.json").read_text())
    lock = report["cases"][0]
    assert lock["ops_match"] is False and lock["code_match"] is False
    assert lock["engines"]["pyframe"]["fallbacks"] and report["totals"]["fell_back"] == 1


def test_compare_reports_an_internal_error_and_fails(tmp_path, capsys, monkeypatch):
    from pyframe import convert_frame

    def broken(*args, **kwargs):
        raise RuntimeError("a bug in the translator")

    monkeypatch.setattr(convert_frame, "translate_frame", broken)
    path = tmp_path / "pf_internal.py"
    path.write_text("import torch, pyframe\n\n@pyframe.debug.case(inputs=lambda: torch.randn(3))\n"
                    "def double(x):\n    return x * 2\n")
    assert main(["compare", "--cases", str(path), "--no-timing"]) == 1
    text = capsys.readouterr().out
    row = next(line for line in text.splitlines() if line.startswith("pf_internal.double")).split()
    assert row[1] == "ok" and row[5:9] == ["INTERNAL", "ERROR", "INTERNAL", "ERROR"], row
    assert "internal error: RuntimeError: a bug in the translator" in text
    assert "1 pyframe failure(s)" in text

"""The parity report (pyframe/debug/parity.py): its rows agree with running the cases directly, and
documented differences appear with their reasons."""
from __future__ import annotations

import subprocess
import sys

from pyframe.debug.cases import load_cases
from pyframe.debug.compare import run_case
from pyframe.debug.parity import parity_report
from tests.cases import ALL

SELECTED = ("elementwise.add", "graph_breaks.toy_example", "class_protocols.class_getitem_picks_a_dtype")


def _cases():
    return [c for c in load_cases(ALL) if c.qualname in SELECTED]


def test_rows_agree_with_running_the_cases():
    cases = _cases()
    assert len(cases) == len(SELECTED)
    report = parity_report(cases)
    assert "- cases: 3" in report
    for case in cases:
        pf, dyn = run_case(case, "pyframe", timing=False), run_case(case, "dynamo", timing=False)
        topic, name = case.qualname.split(".", 1)
        row = [line for line in report.splitlines() if line.startswith(f"| {topic} | {name} |")]
        assert len(row) == 1, row
        cells = [c.strip() for c in row[0].strip("|").split("|")]
        assert cells[2] == f"{pf.graph_count} / {pf.breaks}"
        assert cells[3] == f"{dyn.graph_count} / {dyn.breaks}"
        assert cells[5] == "yes"


def test_documented_difference_is_listed_with_its_reason():
    report = parity_report(_cases())
    differences = report.split("## Differences", 1)[1]
    documented = next(c for c in _cases() if c.name == "class_getitem_picks_a_dtype")
    assert f"**{documented.qualname}** (documented): {documented.difference}" in differences
    assert "toy_example" not in differences
    assert "- op sequences equal to torch._dynamo's: 2/3" in report


def test_command_writes_the_page(tmp_path):
    out = tmp_path / "parity.md"
    done = subprocess.run([sys.executable, "-m", "pyframe", "parity", "-k", "elementwise.add", "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "| elementwise | add | 1 / 0 | 1 / 0 | yes | yes |" in out.read_text()

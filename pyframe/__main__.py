"""The `python -m pyframe` command line.

Subcommands:
  demo      the seed examples' graphs under a printing backend (pyframe/demo.py)
  compare   the shared corpus (tests/cases/) under eager, pyframe and torch._dynamo, side by side
            (pyframe/debug/compare.py); exits 1 if any pyframe result differs from eager

Each subcommand is a ``_cmd_<name>(args) -> int`` function registered in ``_parser``; add new ones
(``explain`` ...) the same way.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from typing import Sequence


def _cmd_demo(args: argparse.Namespace) -> int:
    from pyframe.demo import run_demo

    return run_demo(args.engine)


def _import_corpus() -> tuple[list[str], list[str]]:
    """The corpus module lists (straight-line, graph-break) from tests/cases/ in the source tree."""
    try:
        corpus = importlib.import_module("tests.cases")
    except ImportError:
        # Run from elsewhere than the repo root: the corpus sits beside the package in the checkout.
        root = Path(__file__).resolve().parent.parent
        if not (root / "tests" / "cases" / "__init__.py").is_file():
            raise SystemExit("the corpus (tests/cases/) is not found: run from a source checkout")
        sys.path.insert(0, str(root))
        corpus = importlib.import_module("tests.cases")
    return list(corpus.STRAIGHT_LINE), list(corpus.GRAPH_BREAKS)


def _cmd_compare(args: argparse.Namespace) -> int:
    from pyframe.debug.cases import load_cases
    from pyframe.debug.compare import (
        TABLE_HEADERS,
        compare_case,
        engine_unavailable_reason,
        format_table,
        graphs_mismatch,
        table_rows,
    )

    straight, breaks = _import_corpus()
    cases = load_cases(straight + (breaks if args.breaks else []))
    if args.filter:
        cases = [c for c in cases if any(f in c.qualname for f in args.filter)]
    engines = ["eager", "pyframe", "dynamo"]
    unavailable = engine_unavailable_reason("pyframe")
    if unavailable:
        print(f"note: pyframe is n/a: {unavailable}")

    comparisons = []
    for case in cases:
        comparisons.append(compare_case(case, engines, timing=not args.no_timing))
        if args.verbose:
            print(f"ran {case.qualname}", file=sys.stderr)
    print(format_table(TABLE_HEADERS, table_rows(comparisons)))

    # Details below the table: errors, wrong results, op mismatches.
    failed = 0
    for cmp in comparisons:
        for engine, message in cmp.errors.items():
            if not message.startswith("n/a"):
                print(f"{cmp.case.qualname}: {engine} raised {message}")
                failed += engine == "pyframe"
        if cmp.result_ok("pyframe") is False:
            print(f"{cmp.case.qualname}: pyframe result differs from eager")
            failed += 1
        if cmp.graphs_match() is False:
            note = f" (documented: {cmp.case.difference})" if cmp.case.difference else ""
            mismatch = graphs_mismatch(cmp.records["pyframe"], cmp.records["dynamo"])
            print(f"{cmp.case.qualname}: {mismatch}{note}")
    ran = sum("pyframe" in cmp.records for cmp in comparisons)
    same = sum(bool(cmp.graphs_match()) for cmp in comparisons)
    print(f"\n{len(comparisons)} cases; pyframe ran {ran}, matched torch._dynamo's graphs on {same}; "
          f"{failed} pyframe failure(s)")
    return 1 if failed else 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m pyframe", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = sub.add_parser("demo", help="print the seed examples' graphs under a printing backend")
    demo.add_argument("--engine", choices=["pyframe", "dynamo"], default="pyframe",
                      help="run under pyframe (default) or torch._dynamo, to compare")
    demo.set_defaults(run=_cmd_demo)

    compare = sub.add_parser("compare", help="run the shared corpus under eager, pyframe and torch._dynamo")
    compare.add_argument("-k", dest="filter", action="append", default=[],
                         help="only cases whose topic.name contains this text (repeatable)")
    compare.add_argument("--breaks", action="store_true", help="include the graph-break cases")
    compare.add_argument("--no-timing", action="store_true", help="skip the cache-hit timings (faster)")
    compare.add_argument("-v", "--verbose", action="store_true", help="report progress on stderr")
    compare.set_defaults(run=_cmd_compare)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())

"""The `python -m pyframe` command line.

Subcommands:
  demo      the seed examples: their graphs, explain, a recompile, a cache entry's code, and a short
            comparison with torch._dynamo (pyframe/demo.py)
  compare   the shared corpus (tests/cases/), or your own cases (--cases), under eager, pyframe and
            torch._dynamo, side by side (pyframe/debug/compare.py); exits 1 if a pyframe result
            differs from eager's
  explain   one function of yours, `module:function`, run once under pyframe: its graphs, breaks and
            guards (pyframe/debug/explain.py); `--show` adds its bytecode and graph code
  parity    the corpus under pyframe and torch._dynamo as a Markdown page, docs/parity.md: graph and
            break counts of both, and every difference with its reason (pyframe/debug/parity.py)

Each subcommand is a ``_cmd_<name>(args) -> int`` function registered in ``_parser``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from typing import Any, Callable, Sequence


def _cmd_demo(args: argparse.Namespace) -> int:
    from pyframe.demo import run_demo

    return run_demo(args.engine, compare=not args.no_compare)


class CommandError(Exception):
    """A mistake in how a command was called (a module not found, an unknown backend): printed as
    one line, `python -m pyframe <command>: error: <what to do>`, with exit status 2."""


def _checkout_root() -> Path | None:
    """The source checkout whose corpus `compare` and `parity` run: the current directory, or the
    directory above the package (an editable install), if it is pyframe's checkout (its
    pyproject.toml names pyframe, and tests/cases/ is there). The installed package holds no corpus."""
    for root in (Path.cwd(), Path(__file__).resolve().parent.parent):
        project = root / "pyproject.toml"
        if (root / "tests" / "cases" / "__init__.py").is_file() and project.is_file() \
                and 'name = "pyframe"' in project.read_text():
            return root
    return None


def _import_corpus() -> tuple[list[str], list[str]]:
    """The corpus module lists (straight-line and library, graph-break) from the checkout's
    tests/cases/, imported from that checkout only (never a `tests` package found elsewhere)."""
    root = _checkout_root()
    if root is None:
        raise CommandError("the corpus (tests/cases/) comes with a source checkout of pyframe and none was "
                           "found: run it from the checkout's root, or give your own cases with --cases MODULE")
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    corpus = importlib.import_module("tests.cases")
    if Path(corpus.__file__).resolve().parent != (root / "tests" / "cases").resolve():
        raise CommandError(f"`tests.cases` is imported from {Path(corpus.__file__).parent}, not from the "
                           f"checkout at {root}: run from the checkout's root")
    return list(corpus.STRAIGHT_LINE) + list(getattr(corpus, "LIBRARIES", [])), list(corpus.GRAPH_BREAKS)


def _import_user_module(spec: str) -> Any:
    """`import_user_module`, with a module or file that is not there as a CommandError (an
    ImportError raised inside the user's module, by a module it imports, stays a traceback)."""
    from pyframe.debug.cases import import_user_module

    try:
        return import_user_module(spec)
    except FileNotFoundError as e:
        raise CommandError(f"{e}: give a module name importable from here or the path of a .py file") from None
    except ModuleNotFoundError as e:
        if e.name is None or not (spec == e.name or spec.startswith(e.name + ".")):
            raise
        raise CommandError(f"no module named {spec!r} here ({Path.cwd()}): run from the directory that holds it, "
                           f"or give the path of its .py file") from None


def _check_backend(name: str) -> None:
    """An unknown backend name is a CommandError before anything runs."""
    import pyframe
    from pyframe.exc import InvalidBackend

    try:
        pyframe.lookup_backend(name)
    except InvalidBackend as e:
        raise CommandError(f"{e}; register your own with @pyframe.register_backend") from None


def _load_compare_cases(args: argparse.Namespace) -> list:
    from pyframe.debug.cases import load_cases, registered_cases

    if args.cases:
        cases = []
        for spec in args.cases:
            module = _import_user_module(spec)
            found = registered_cases(module.__name__)
            if not found:
                raise SystemExit(f"{spec} registers no case: decorate functions or nn.Module classes "
                                 f"with @pyframe.debug.case(inputs=...)")
            cases += found
    else:
        straight, breaks = _import_corpus()
        cases = load_cases(straight + ([] if args.no_breaks else breaks))
    if args.filter:
        cases = [c for c in cases if any(f in c.qualname for f in args.filter)]
    return cases


def _parity_out(out: str | None) -> Path | None:
    """Where `parity` writes (None: stdout), checked before minutes of running the corpus: by
    default the checkout's docs/parity.md."""
    if out == "-":
        return None
    if out is None:
        root = _checkout_root()
        if root is None or not (root / "docs").is_dir():
            raise CommandError("docs/parity.md belongs to a source checkout of pyframe and none was found: run "
                               "it from the checkout's root, or give --out PATH (- for stdout)")
        return root / "docs" / "parity.md"
    path = Path(out)
    if not path.parent.is_dir():
        raise CommandError(f"cannot write {out}: no directory {path.parent}; give --out PATH in an existing "
                           f"directory (- for stdout)")
    return path


def _cmd_parity(args: argparse.Namespace) -> int:
    from pyframe.debug.parity import parity_report

    out = _parity_out(args.out)
    _check_backend(args.backend)
    cases = _load_compare_cases(args)
    if not cases:
        print("no case matches", file=sys.stderr)
        return 2
    report = parity_report(cases, backend=args.backend)
    if out is None:
        print(report, end="")
    else:
        out.write_text(report)
        print(f"wrote {out} ({len(cases)} cases)")
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    from pyframe.debug.compare import (
        Progress,
        code_mismatch,
        compare_cases,
        engine_unavailable_reason,
        graphs_mismatch,
    )
    from pyframe.debug.compare_report import (
        TABLE_HEADERS,
        format_table,
        ratios_text,
        report_json,
        table_rows,
        totals,
        totals_row,
    )

    _check_backend(args.backend)
    cases = _load_compare_cases(args)
    if not cases:
        print("no case matches", file=sys.stderr)
        return 2
    unavailable = engine_unavailable_reason("pyframe")
    if unavailable:
        print(f"note: pyframe is n/a: {unavailable}")

    comparisons = compare_cases(cases, ["eager", "pyframe", "dynamo"], timing=not args.no_timing,
                                backend=args.backend, progress=Progress(len(cases)))
    t = totals(comparisons)
    print(format_table(TABLE_HEADERS, [*table_rows(comparisons), totals_row(t)]))
    print(ratios_text(t))

    # Details below the table: errors, wrong results, fallbacks, graph differences.
    failed = 0
    for cmp in comparisons:
        for engine, message in cmp.errors.items():
            if not message.startswith("n/a"):
                print(f"{cmp.case.qualname}: {engine} raised {message}")
                failed += engine == "pyframe"
        if cmp.result_ok("pyframe") is False:
            print(f"{cmp.case.qualname}: pyframe result differs from eager")
            failed += 1
        pf = cmp.records.get("pyframe")
        if pf is not None and pf.internal_errors:  # a bug of pyframe's, whatever the result
            failed += 1
        note = f" (documented: {cmp.case.difference})" if cmp.case.difference else ""
        if pf is not None and pf.fallbacks:
            print(f"{cmp.case.qualname}: pyframe ran frames as plain Python: {'; '.join(pf.fallbacks)}{note}")
        elif cmp.ops_match() is False:
            print(f"{cmp.case.qualname}: {graphs_mismatch(pf, cmp.records['dynamo'])}{note}")
        elif cmp.graphs_match() is False:
            print(f"{cmp.case.qualname}: {code_mismatch(pf, cmp.records['dynamo'])}{note}")
    ran = sum("pyframe" in c.records for c in comparisons)
    print(f"\n{t.cases} cases; pyframe ran {ran}, compiled every frame of {ran - t.fell_back}, matched "
          f"torch._dynamo's op sequences on {t.ops_match} and its graphs' code on {t.code_match}; "
          f"{failed} pyframe failure(s)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report_json(comparisons, backend=args.backend), f, indent=2)
        print(f"wrote {args.json}")
    return 1 if failed else 0


def _resolve_target(spec: str) -> tuple[Any, Any]:
    """`module:function` (or `path/to/file.py:Class`) -> (the module, the object)."""
    module_name, sep, attr = spec.rpartition(":")
    if not sep or not module_name or not attr:
        raise SystemExit(f"expected module:function, got {spec!r}")
    module = _import_user_module(module_name)
    target: Any = module
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise SystemExit(f"{module_name} has no {attr!r}") from None
    return module, target


def _explain_call(module: Any, target: Any, attr: str, factory: str | None) -> tuple[Callable, Any]:
    """What to run and with which inputs, by the convention of docs/debugging.md: `--inputs NAME`,
    else the target's `@case(inputs=...)`, else `<name>_inputs()`, else `example_inputs()`."""
    import torch

    from pyframe.debug.cases import Inputs, registered_cases

    name = attr.rsplit(".", 1)[-1]
    registered = next((c for c in registered_cases(module.__name__) if c.target is target), None)
    if factory is None and registered is not None:
        return registered.make_fn(), registered.make_inputs()
    for candidate in ([factory] if factory else [f"{name}_inputs", "example_inputs"]):
        make = getattr(module, candidate, None)
        if callable(make):
            break
    else:
        if factory:
            raise SystemExit(f"{module.__name__} has no function {factory!r} to make the inputs")
        raise SystemExit(f"no inputs for {module.__name__}:{attr}: give --inputs FACTORY, decorate it with "
                         f"@pyframe.debug.case(inputs=...), or define {name}_inputs() or example_inputs() "
                         f"in {module.__name__}")
    if isinstance(target, type) and issubclass(target, torch.nn.Module):
        torch.manual_seed(0)
        target = target()
    return target, Inputs.coerce(make())


def _cmd_explain(args: argparse.Namespace) -> int:
    import pyframe

    _check_backend(args.backend)
    module, target = _resolve_target(args.target)
    fn, inputs = _explain_call(module, target, args.target.rpartition(":")[2], args.inputs)
    print(pyframe.explain(fn, backend=args.backend)(*inputs.args, **inputs.kwargs))
    if args.show:
        # explain() leaves no cache entries behind: compile once more to have some to show.
        compiled = pyframe.optimize(args.backend)(fn)
        compiled(*inputs.args, **inputs.kwargs)
        print()
        pyframe.debug.show(fn)
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m pyframe", description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__[__doc__.index("Subcommands:"):__doc__.index("Each subcommand")].rstrip())
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = sub.add_parser("demo", help="the seed examples, their graphs, and what pyframe made of them")
    demo.add_argument("--engine", choices=["pyframe", "dynamo"], default="pyframe",
                      help="run under pyframe (default) or torch._dynamo, to compare")
    demo.add_argument("--no-compare", action="store_true", help="leave out the comparison table")
    demo.set_defaults(run=_cmd_demo)

    compare = sub.add_parser("compare", help="the corpus under eager, pyframe and torch._dynamo, side by side")
    compare.add_argument("-k", dest="filter", action="append", default=[], metavar="PATTERN",
                         help="only cases whose topic.name contains PATTERN (repeatable)")
    compare.add_argument("--backend", default="eager",
                         help="backend compiling the graphs, the same for both engines (default: eager, "
                              "the graphs run as they are)")
    compare.add_argument("--cases", action="append", default=[], metavar="MODULE",
                         help="run the @pyframe.debug.case programs of MODULE (a module name or a .py "
                              "path) instead of the corpus (repeatable)")
    compare.add_argument("--json", metavar="OUT", help="also write the results to OUT as JSON")
    compare.add_argument("--no-breaks", action="store_true", help="leave out the graph-break cases")
    compare.add_argument("--no-timing", action="store_true", help="skip the cache-hit timings (faster)")
    compare.set_defaults(run=_cmd_compare)

    parity = sub.add_parser("parity", help="write the corpus' parity report with torch._dynamo (Markdown)")
    parity.add_argument("--out", default=None,
                        help="where to write it (default: the checkout's docs/parity.md; - for stdout)")
    parity.add_argument("-k", dest="filter", action="append", default=[], metavar="PATTERN",
                        help="only cases whose topic.name contains PATTERN (repeatable)")
    parity.add_argument("--backend", default="eager", help="backend compiling the graphs (default: eager)")
    parity.set_defaults(run=_cmd_parity, cases=[], no_breaks=False)

    explain = sub.add_parser("explain", help="run module:function once under pyframe and explain it")
    explain.add_argument("target", metavar="MODULE:FUNCTION",
                         help="a function or nn.Module class of a module (name or .py path)")
    explain.add_argument("--inputs", metavar="FACTORY",
                         help="the module's zero-argument function returning the arguments "
                              "(default: the @case's inputs, then <function>_inputs, then example_inputs)")
    explain.add_argument("--backend", default="eager", help="backend for the graphs (default: eager)")
    explain.add_argument("--show", action="store_true",
                         help="also print the bytecode, graphs and decompiled code (pyframe.debug.show)")
    explain.set_defaults(run=_cmd_explain)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return args.run(args)
    except CommandError as e:
        print(f"python -m pyframe {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

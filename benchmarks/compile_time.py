"""Warm compile time of pyframe and torch._dynamo, measured side by side in one process.

Each row is a program compiled from cold caches by both engines with the same trivial backend
(``CountingBackend``: records the graph, returns ``gm.forward``), so the time is the engine's own
work: bytecode analysis, symbolic execution, FakeTensor propagation, guards and code generation.

- ``chain n=...``: a generated function of ``n`` elementwise ops on one tensor, cycling through
  ``torch.sin``, ``* 1.5``, ``torch.cos``, ``+ 0.5``, ``torch.tanh``, ``- 0.25``, ``torch.relu``,
  ``/ 1.1``. Its source is compiled into a fresh function per engine and run, under a real-looking
  filename (pyframe skips code whose filename starts with ``<``); this measures how compile time
  grows with graph size, which should be linear: pyframe n=1000 / n=100 is printed (about 10).
- ``models.*``: the eval-mode model cases of tests/cases/models.py, a fresh module per engine.
- ``transformers_models.*``: Hugging Face's BERT, GPT-2, LLaMA and T5 as pip installs them
  (tests/cases/transformers_models.py: tiny random configs), eval mode under ``torch.no_grad()``.

Compile time = wall time of the first call (trace + backend + run) minus a plain eager call, the
minimum over ``--repeat`` fresh programs. Both engines first compile an unrelated function (and
module), so one-time setup (imports, FakeTensorMode, dispatcher caches) is not counted. Both
engines are reset between rows. Target: pyframe <= 0.1x torch._dynamo on every row.

Each engine also keeps a process-wide cache keyed by tensor shapes, which a reset leaves: Dynamo's
FakeTensorMode dispatch cache and pyframe's propagation memo and memo of views (pyframe/fake/memo.py,
views.py). In the main column the repeats after the first find them warm, as a recompile or a
second model of the same shapes does. The "cold shapes" column clears both before every run: the first compile of shapes the
process has never seen, the stricter figure.

Run from the repo root:  python benchmarks/compile_time.py [--quick] [--rows PATTERN] [--repeat N]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gc
import linecache
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # the corpus is tests/cases/

import torch  # noqa: E402
from tabulate import tabulate  # noqa: E402

from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

from pyframe.debug.cases import Inputs, load_cases  # noqa: E402
from pyframe.debug.compare import (  # noqa: E402
    CountingBackend,
    engine_unavailable_reason,
    optimize_with,
    reset_engines,
)
from pyframe.graph import fake_mode, propagation_memo  # noqa: E402

JIT_ENGINES = ("pyframe", "dynamo")
TARGET_RATIO = 0.1
CHAIN_SIZES = (10, 100, 1000)
QUICK_CHAIN_SIZES = (10, 100)
MODEL_CASES = (
    "MLPEval", "SmallConvNetEval", "TinyDenseNetEval", "TransformerBlockEval",
    "TorchEncoderLayerEval", "TinyViTEval",
)
QUICK_MODEL_CASES = ("MLPEval", "TransformerBlockEval")
LIBRARY_CASES = ("BertModelEval", "GPT2LMHeadModelEval", "LlamaForCausalLMEval", "T5ModelEval")  # (when transformers is installed)
QUICK_LIBRARY_CASES = ("BertModelEval",)

# The chain's ops, cycled: torch functions and Python operators with constants, as user code mixes them.
CHAIN_OPS = (
    "torch.sin(x)", "x * 1.5", "torch.cos(x)", "x + 0.5", "torch.tanh(x)", "x - 0.25", "torch.relu(x)",
    "x / 1.1",
)


@dataclasses.dataclass
class Program:
    """One row: how to build a fresh callable (a new code object or module) and its arguments."""

    name: str
    make_fn: Callable[[], Callable[..., Any]]
    make_inputs: Callable[[], Inputs]
    no_grad: bool = False

    def call(self, fn: Callable[..., Any], inputs: Inputs) -> Any:
        with torch.no_grad() if self.no_grad else contextlib.nullcontext():
            return fn(*inputs.args, **inputs.kwargs)


# --------------------------------------------------------------------------------------------------
# Programs


def chain_source(n: int) -> str:
    """``def chain(x):`` followed by ``n`` lines ``x = <op>``, then ``return x``."""
    body = [f"    x = {CHAIN_OPS[i % len(CHAIN_OPS)]}\n" for i in range(n)]
    return "import torch\n\n\ndef chain(x):\n" + "".join(body) + "    return x\n"


def make_chain(n: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """A new ``chain`` function (a new code object, so no engine has a cache entry for it)."""
    source = chain_source(n)
    # A real-looking path (not "<string>"): pyframe skips generated code, and dynamo would trace it
    # anyway, so the two would not compare. Registered in linecache so messages can quote lines.
    filename = str(REPO / "benchmarks" / "generated" / f"chain_{n}.py")
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace: dict[str, Any] = {}
    exec(compile(source, filename, "exec"), namespace)
    return namespace["chain"]


def chain_program(n: int) -> Program:
    return Program(f"chain n={n}", lambda: make_chain(n), lambda: Inputs((torch.randn(64),)))


def model_programs(names: tuple[str, ...], module: str = "tests.cases.models") -> list[Program]:
    cases = {c.name: c for c in load_cases([module])}
    return [Program(cases[name].qualname, cases[name].make_fn, cases[name].make_inputs, "no_grad" in cases[name].tags)
            for name in names if name in cases]


# --------------------------------------------------------------------------------------------------
# Measuring


def warm_up(engine: str) -> None:
    """Compile an unrelated function and a small module, so one-time setup is paid before timing."""
    source = "import torch\n\n\ndef warm(x, lin):\n    return torch.relu(lin(x * 2 + 1)).sum()\n"
    filename = str(REPO / "benchmarks" / "generated" / "warm_up.py")
    namespace: dict[str, Any] = {}
    exec(compile(source, filename, "exec"), namespace)
    optimize_with(engine, namespace["warm"], CountingBackend())(torch.randn(2, 4), torch.nn.Linear(4, 3))
    reset_engines()


def eager_call_s(program: Program) -> float:
    """Median wall time of a plain call (after one warm call), to subtract from the first call."""
    fn, inputs = program.make_fn(), program.make_inputs()
    program.call(fn, inputs)
    times = []
    for _ in range(5):
        start = time.perf_counter()
        program.call(fn, inputs)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def clear_shape_caches() -> None:
    """Empty both engines' caches keyed by tensor shapes (see the module docstring)."""
    FakeTensorMode.cache_clear()
    propagation_memo().clear()
    fake_mode().views.clear()


def first_call_s(program: Program, engine: str, cold_shapes: bool = False) -> tuple[float, int]:
    """Wall time of the first call of a fresh ``program`` under ``engine``, and graphs compiled."""
    reset_engines()
    if cold_shapes:
        clear_shape_caches()
    backend = CountingBackend()
    compiled = optimize_with(engine, program.make_fn(), backend)
    inputs = program.make_inputs()
    gc.collect()
    try:
        start = time.perf_counter()
        program.call(compiled, inputs)
        elapsed = time.perf_counter() - start
    finally:
        reset_engines()
    return elapsed, len(backend.graphs)


@dataclasses.dataclass
class RowResult:
    name: str
    eager_s: float
    compile_s: dict[str, float | None]  # engine -> first call minus eager call; None if n/a
    graphs: dict[str, int | None]
    cold_s: dict[str, float | None]  # the same with the shape caches cleared before each run


def measure(program: Program, repeat: int) -> RowResult:
    """The engines' runs interleaved (pyframe, dynamo, pyframe, ...), so a noisy stretch of the
    machine falls on both rather than on one engine's repeats."""
    eager = eager_call_s(program)
    engines = [e for e in JIT_ENGINES if engine_unavailable_reason(e) is None]
    warm: dict[str, list[tuple[float, int]]] = {e: [] for e in engines}
    cold: dict[str, list[float]] = {e: [] for e in engines}
    for _ in range(repeat):
        for engine in engines:
            warm[engine].append(first_call_s(program, engine))
    for _ in range(repeat):
        for engine in engines:
            cold[engine].append(first_call_s(program, engine, cold_shapes=True)[0])
    compile_s: dict[str, float | None] = {e: None for e in JIT_ENGINES}
    cold_s: dict[str, float | None] = {e: None for e in JIT_ENGINES}
    graphs: dict[str, int | None] = {e: None for e in JIT_ENGINES}
    for engine in engines:
        compile_s[engine] = max(min(t for t, _ in warm[engine]) - eager, 0.0)
        cold_s[engine] = max(min(cold[engine]) - eager, 0.0)
        graphs[engine] = warm[engine][0][1]
    return RowResult(program.name, eager, compile_s, graphs, cold_s)


# --------------------------------------------------------------------------------------------------
# Report


def _s(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds:.4f}"


def _ratio(result: RowResult, cold: bool = False) -> str:
    times = result.cold_s if cold else result.compile_s
    pf, dyn = times["pyframe"], times["dynamo"]
    if pf is None or not dyn:
        return "n/a"
    ratio = pf / dyn
    return f"{ratio:.3f} " + ("ok" if ratio <= TARGET_RATIO else "HIGH")


def _graphs(result: RowResult) -> str:
    return "/".join("n/a" if result.graphs[e] is None else str(result.graphs[e]) for e in JIT_ENGINES)


def linearity_lines(results: dict[str, RowResult]) -> list[str]:
    """Compile time of the 1000-op chain over the 100-op chain, per engine (linear growth: about 10,
    less when a fixed per-compile cost dominates), and the cost of one more op between the two."""
    small, large = results.get("chain n=100"), results.get("chain n=1000")
    if small is None or large is None:
        return []
    lines = []
    for engine in JIT_ENGINES:
        a, b = small.compile_s[engine], large.compile_s[engine]
        if a and b is not None:
            verdict = "ok" if b / a <= 12 else "SUPERLINEAR"
            per_op_us = (b - a) / 900 * 1e6
            lines.append(f"  {engine}: n=1000 / n=100 = {b / a:.1f} ({verdict}); {per_op_us:.0f} us per added op")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="chains up to n=100, two models, one repeat")
    parser.add_argument("--rows", metavar="PATTERN", help="only rows whose name matches this regex")
    parser.add_argument("--repeat", type=int, help="fresh programs per engine and row (min taken); default 3")
    args = parser.parse_args(argv)
    repeat = args.repeat or (1 if args.quick else 3)

    programs = [chain_program(n) for n in (QUICK_CHAIN_SIZES if args.quick else CHAIN_SIZES)]
    programs += model_programs(QUICK_MODEL_CASES if args.quick else MODEL_CASES)
    programs += model_programs(QUICK_LIBRARY_CASES if args.quick else LIBRARY_CASES, "tests.cases.transformers_models")
    if args.rows:
        programs = [p for p in programs if re.search(args.rows, p.name)]
        if not programs:
            print(f"no row matches {args.rows!r}")
            return 1

    for engine in JIT_ENGINES:
        reason = engine_unavailable_reason(engine)
        if reason:
            print(f"note: {engine} is n/a: {reason}")
        else:
            warm_up(engine)

    results: dict[str, RowResult] = {}
    rows = []
    for program in programs:
        result = results[program.name] = measure(program, repeat)
        rows.append([
            program.name, _graphs(result), f"{result.eager_s * 1e3:.3f}",
            _s(result.compile_s["pyframe"]), _s(result.compile_s["dynamo"]), _ratio(result),
            _s(result.cold_s["pyframe"]), _s(result.cold_s["dynamo"]), _ratio(result, cold=True),
        ])
        print(f"  measured {program.name}", file=sys.stderr, flush=True)

    print(f"\nWarm compile time (s): first call minus an eager call, min of {repeat}; "
          f"target pyframe/dynamo <= {TARGET_RATIO}")
    print(tabulate(rows, headers=["row", "graphs pf/dyn", "eager ms", "pyframe s", "dynamo s",
                                  "pf/dyn", "cold shapes: pf s", "dyn s", "pf/dyn"]))
    lines = linearity_lines(results)
    if lines:
        print("\nLinearity of compile time in graph size (chain):")
        print("\n".join(lines))
    return 0


if __name__ == "__main__":
    torch.set_num_threads(1)  # timing noise from intra-op threads helps nobody on a 2-core machine
    sys.exit(main())

"""End to end with inductor: eager vs ``torch.compile(model)`` vs ``pyframe.optimize("inductor")(model)``,
and ``pyframe.optimize("onnxrt")(model)`` (ONNX Runtime on the CPU) beside them.

For four model cases of tests/cases/models.py in eval mode under ``torch.no_grad()`` (the MLP, the
small convnet, the transformer block and the ViT-style encoder), in one process:

- time to first result: wall time of the first call, which traces, compiles the graph with inductor
  (C++ through gcc on a CPU) and runs it. Each engine compiles inside a fresh inductor cache (an empty
  cache directory, in-memory caches cleared), so neither profits from the other having compiled the
  same graph a moment before; before any timing, both engines compile an unrelated function with
  inductor, so one-time process setup (imports, worker pools) is not counted for either;
- steady state: per-call time on cache hits, the median over rounds; within a round each engine runs a
  batch of calls, so eager, torch.compile and pyframe are interleaved and drift hits all three alike.

The onnxrt columns have no target: they show what exporting each graph to ONNX costs on the first
call, and how ONNX Runtime's CPU kernels compare with eager and inductor (without the onnx extra they
read "n/a"). Targets: pyframe steady state within 2% of torch.compile's (ratio <= 1.02) and time to first result no
worse (ratio <= 1.0). An engine that fails shows the error in its cells instead of a time (pyframe runs
with ``config.suppress_errors = False``, so an inductor failure raises instead of silently running
the graph eagerly). Results are checked against eager. This is a benchmark, not a test.

Run from the repo root:  python benchmarks/e2e.py [--quick] [--rows PATTERN]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import re
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # the corpus is tests/cases/

import torch  # noqa: E402
import torch._inductor.utils  # noqa: E402
from tabulate import tabulate  # noqa: E402

import pyframe  # noqa: E402
from pyframe.debug.cases import Case, load_cases  # noqa: E402

MODEL_CASES = ("MLPEval", "SmallConvNetEval", "TransformerBlockEval", "TinyViTEval")
ENGINES = ("eager", "torch.compile", "pyframe", "pyframe onnxrt")
STEADY_TARGET = 1.02
FIRST_TARGET = 1.0


@dataclasses.dataclass
class Timing:
    rounds: int = 31
    round_s: float = 0.03  # each engine's batch in a round runs about this long


@dataclasses.dataclass
class EngineRun:
    """One engine on one model: the compiled callable, or the error that stopped it."""

    fn: Callable[..., Any] | None = None
    first_s: float | None = None
    steady_s: float | None = None
    error: str | None = None
    result_ok: bool | None = None


# --------------------------------------------------------------------------------------------------
# Engines


def fresh_inductor_cache() -> contextlib.AbstractContextManager:
    """An empty inductor cache directory and cleared in-memory caches, for this block only."""
    utils = torch._inductor.utils
    fresh = getattr(utils, "fresh_cache", None) or utils.fresh_inductor_cache  # renamed in torch 2.8
    return fresh()


def optimize(engine: str, model: torch.nn.Module) -> Callable[..., Any]:
    if engine == "eager":
        return model
    if engine == "torch.compile":
        return torch.compile(model, backend="inductor")
    if engine == "pyframe":
        return pyframe.optimize("inductor")(model)
    if engine == "pyframe onnxrt":
        return pyframe.optimize("onnxrt")(model)
    raise ValueError(f"unknown engine {engine!r}")


def reset_engines() -> None:
    torch._dynamo.reset()
    pyframe.reset()


def warm_up() -> None:
    """Compile an unrelated function through each engine (process-level setup: imports, worker pools,
    the ONNX exporter's tables)."""
    source = "import torch\n\n\ndef warm(x, w):\n    return torch.relu(x @ w + 1).sum(dim=-1)\n"
    namespace: dict[str, Any] = {}
    # A real-looking filename: pyframe skips code whose filename starts with "<".
    exec(compile(source, str(REPO / "benchmarks" / "generated" / "e2e_warm_up.py"), "exec"), namespace)
    engines = [torch.compile(namespace["warm"], backend="inductor"), pyframe.optimize("inductor")(namespace["warm"])]
    with contextlib.suppress(ImportError):  # without the onnx extra, its column says so
        engines.append(pyframe.optimize("onnxrt")(namespace["warm"]))
    for compiled in engines:
        with fresh_inductor_cache():
            compiled(torch.randn(4, 8), torch.randn(8, 8))
    reset_engines()


def _error_text(exc: BaseException) -> str:
    root = exc
    while root.__cause__ is not None:  # BackendCompilerFailed chains the backend's own exception
        root = root.__cause__
    first = str(root).strip().splitlines()[0] if str(root).strip() else ""
    return f"{type(root).__name__}: {first}"[:160]


# --------------------------------------------------------------------------------------------------
# Measuring


def first_result(engine: str, case: Case, args: tuple, expected: torch.Tensor) -> EngineRun:
    """Build a fresh model, optimize it, and time its first call (compile + run)."""
    run = EngineRun()
    try:
        with fresh_inductor_cache():
            fn = optimize(engine, case.make_fn())
            start = time.perf_counter()
            out = fn(*args)
            run.first_s = time.perf_counter() - start
        run.fn = fn
        run.result_ok = bool(torch.allclose(out, expected, rtol=1e-4, atol=1e-4))
    except Exception as exc:  # a failing engine is a row in the table, not a crash
        run.error = _error_text(exc)
        print(f"[{engine} on {case.name}] " + "".join(traceback.format_exception_only(exc)).strip(),
              file=sys.stderr)
    return run


def calls_per_round(fn: Callable[[], Any], round_s: float) -> int:
    start = time.perf_counter()
    for _ in range(3):
        fn()
    one = max((time.perf_counter() - start) / 3, 1e-7)
    return max(1, int(round_s / one))


def steady_state(runs: dict[str, EngineRun], args: tuple, timing: Timing) -> None:
    """Median per-call time of every engine that compiled, engines interleaved round by round."""
    live = {engine: run for engine, run in runs.items() if run.fn is not None}
    calls = {engine: (lambda fn=run.fn: fn(*args)) for engine, run in live.items()}
    number = {engine: calls_per_round(call, timing.round_s) for engine, call in calls.items()}
    samples: dict[str, list[float]] = {engine: [] for engine in live}
    for _ in range(timing.rounds):
        for engine, call in calls.items():
            n = number[engine]
            start = time.perf_counter()
            for _ in range(n):
                call()
            samples[engine].append((time.perf_counter() - start) / n)
    for engine, run in live.items():
        run.steady_s = statistics.median(samples[engine])


def measure(case: Case, timing: Timing) -> dict[str, EngineRun]:
    reset_engines()
    args = case.make_inputs().args
    expected = case.make_fn()(*args)
    runs = {engine: first_result(engine, case, args, expected) for engine in ENGINES}
    steady_state(runs, args, timing)
    reset_engines()
    return runs


# --------------------------------------------------------------------------------------------------
# Report


def _cell(run: EngineRun, value: float | None, scale: float, digits: int) -> str:
    if run.error is not None:
        return f"error: {run.error}"
    text = "n/a" if value is None else f"{value * scale:.{digits}f}"
    return text if run.result_ok in (None, True) else text + " WRONG"


def _ratio(num: float | None, den: float | None, target: float) -> str:
    if num is None or not den:
        return "n/a"
    ratio = num / den
    return f"{ratio:.3f} " + ("ok" if ratio <= target else "HIGH")


def table_row(name: str, runs: dict[str, EngineRun]) -> list[str]:
    eager, tc, pf, ort = runs["eager"], runs["torch.compile"], runs["pyframe"], runs["pyframe onnxrt"]
    return [
        name,
        _cell(eager, eager.steady_s, 1e6, 1),
        _cell(tc, tc.steady_s, 1e6, 1),
        _cell(pf, pf.steady_s, 1e6, 1),
        _ratio(pf.steady_s, tc.steady_s, STEADY_TARGET),
        _cell(tc, tc.first_s, 1, 2),
        _cell(pf, pf.first_s, 1, 2),
        _ratio(pf.first_s, tc.first_s, FIRST_TARGET),
        _cell(ort, ort.steady_s, 1e6, 1),
        _cell(ort, ort.first_s, 1, 2),
    ]


HEADERS = [
    "model", "eager us", "torch.compile us", "pyframe us", "pf/tc steady",
    "torch.compile first s", "pyframe first s", "pf/tc first", "pf onnxrt us", "pf onnxrt first s",
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="two models, fewer and shorter rounds")
    parser.add_argument("--rows", metavar="PATTERN", help="only models whose name matches this regex")
    args = parser.parse_args(argv)
    timing = Timing(rounds=11, round_s=0.01) if args.quick else Timing()

    names = MODEL_CASES[:2] if args.quick else MODEL_CASES
    by_name = {c.name: c for c in load_cases(["tests.cases.models"])}
    cases = [by_name[name] for name in names]
    if args.rows:
        cases = [c for c in cases if re.search(args.rows, c.qualname)]
        if not cases:
            print(f"no model matches {args.rows!r}")
            return 1

    pyframe.config.suppress_errors = False  # an inductor failure is reported, not hidden
    rows = []
    with torch.no_grad():
        try:
            warm_up()
        except Exception as exc:
            print(f"warning: inductor warm-up failed: {_error_text(exc)}", file=sys.stderr)
        for case in cases:
            rows.append(table_row(case.qualname, measure(case, timing)))
            print(f"  measured {case.qualname}", file=sys.stderr, flush=True)

    print(f"\nInductor end to end (eval, no_grad): steady state = median per-call us over {timing.rounds} "
          f"interleaved rounds; first = first call s (trace + inductor compile + run), fresh inductor cache")
    print(f"targets: pf/tc steady <= {STEADY_TARGET}, pf/tc first <= {FIRST_TARGET}")
    print(tabulate(rows, headers=HEADERS))
    return 0


if __name__ == "__main__":
    torch.set_num_threads(1)  # timing noise from intra-op threads helps nobody on a 2-core machine
    sys.exit(main())

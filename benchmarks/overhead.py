"""Per-call overhead of pyframe and torch._dynamo on cache hits, measured side by side in one process.

Two tables:

1. Cache hits: per-call time of eager, pyframe and torch._dynamo (same trivial backend returning
   ``gm.forward``) on four corpus programs: ``add(a, b)`` with 10-element tensors, the seeds'
   ``toy_example`` on each branch (two graphs and a resume function per branch), and ``MockModule``.
   Overhead = engine time - eager time; the ratio pyframe overhead / dynamo overhead targets <= 0.05.
2. Deep module trees: the cached-call overhead of a ViT-style encoder (tests/cases/models.py) with
   2 and 12 blocks, in eval mode under no_grad. Inlining modules lifts every parameter as a graph
   input and guards every module on the way. The graph's own run time (hundreds of µs of small
   ops) would bury a few µs of overhead in noise, so both engines get a backend that runs the
   graph once and then returns those outputs: what a cached call costs beyond calling that
   function is the guards, loading the inputs from the frame, and the frames. Target: pyframe's
   overhead at most 0.05 of Dynamo's, and nearly flat in depth. Hugging Face's BERT, GPT-2, LLaMA
   and T5 (tests/cases/transformers_models.py, when transformers is installed) are measured the
   same way; where an engine breaks the graph, the Python run between its graphs counts as overhead.
3. Skipped frames: a Python-heavy standard-library call (copy.deepcopy: many small Python frames, no tensors) run inside an
   optimized region vs plainly. Both engines skip these frames; what remains is the hook's cost on
   every frame (and CPython not inlining Python-to-Python calls while a PEP 523 hook is installed).

Times are the minimum over rounds of ``timeit.repeat`` (the least disturbed run). An engine that is
not available prints "n/a". Run from the repo root:  python benchmarks/overhead.py [--quick]
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import sys
import timeit
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the corpus is tests/cases/

import torch  # noqa: E402
from tabulate import tabulate  # noqa: E402

from pyframe.debug.cases import Case, Inputs, load_cases  # noqa: E402
from pyframe.debug.compare import (  # noqa: E402
    CountingBackend,
    assert_same_result,
    engine_unavailable_reason,
    optimize_with,
    reset_engines,
)

ENGINES = ("eager", "pyframe", "dynamo")
PROGRAMS = ("elementwise.add", "graph_breaks.toy_example", "graph_breaks.toy_example_negative",
            "modules.MockModule")
TARGET_RATIO = 0.05


@dataclasses.dataclass
class Timing:
    rounds: int = 7
    round_s: float = 0.2  # each round runs about this long


def per_call_s(fn: Callable[[], Any], timing: Timing) -> float:
    """Seconds per call: calibrate the number of calls per round, then min over rounds."""
    number, _ = timeit.Timer(fn).autorange()
    number = max(1, int(number * timing.round_s / 0.2))
    return min(timeit.repeat(fn, number=number, repeat=timing.rounds)) / number


def _program_cases() -> dict[str, Case]:
    cases = load_cases(["tests.cases.elementwise", "tests.cases.graph_breaks", "tests.cases.modules"])
    return {c.qualname: c for c in cases if c.qualname in PROGRAMS}


def time_cache_hits(case: Case, timing: Timing) -> dict[str, float | None]:
    """Per-call seconds of ``case`` under each engine after its first (compiling) call (None: n/a).

    The engines' rounds are interleaved (eager, pyframe, dynamo, eager, ...) and each engine's
    minimum is taken, so a slow stretch of the machine does not land on one engine only: the
    overhead is a difference of two timings, and on toy_example it is a tenth of either."""
    reset_engines()
    inputs = case.make_inputs()
    args, kwargs = inputs.args, inputs.kwargs
    calls = {}
    for engine in ENGINES:
        if engine_unavailable_reason(engine) is not None:
            continue
        compiled = optimize_with(engine, case.make_fn(), CountingBackend())
        compiled(*args, **kwargs)  # compile (and, for toy_example, compile the resume function too)
        compiled(*args, **kwargs)
        calls[engine] = lambda compiled=compiled: compiled(*args, **kwargs)
    try:
        numbers = {e: max(1, int(timeit.Timer(fn).autorange()[0] * timing.round_s / 0.2)) for e, fn in calls.items()}
        best = {e: float("inf") for e in calls}
        for _ in range(timing.rounds):
            for engine, fn in calls.items():
                best[engine] = min(best[engine], timeit.timeit(fn, number=numbers[engine]) / numbers[engine])
        return {e: best.get(e) for e in ENGINES}
    finally:
        reset_engines()


# The skipped-frames workload: a pure-Python standard-library function making hundreds of small
# calls, no tensors. Both engines leave standard-library code alone, so every frame is a skipped one
# and the difference to the plain run is the cost of the hook itself.

SKIPPED_DATA = [[i, (i, str(i))] for i in range(100)]


def python_heavy(data: list = SKIPPED_DATA) -> list:
    return copy.deepcopy(data)


def _count_frames() -> int:
    calls = 0

    def profile(frame, event, arg):
        nonlocal calls
        calls += event == "call"

    sys.setprofile(profile)
    try:
        copy.deepcopy(SKIPPED_DATA)
    finally:
        sys.setprofile(None)
    return calls


FRAMES_PER_CALL = _count_frames()


def time_skipped_frames(engine: str, timing: Timing) -> tuple[float, float] | None:
    """(plain, inside the engine's region) seconds per call of ``python_heavy``; None if n/a."""
    if engine_unavailable_reason(engine) is not None:
        return None
    reset_engines()
    region = optimize_with(engine, copy.deepcopy, CountingBackend())
    assert region(SKIPPED_DATA) == python_heavy()  # first call: each code object is seen and skipped
    try:
        return per_call_s(python_heavy, timing), per_call_s(lambda: region(SKIPPED_DATA), timing)
    finally:
        reset_engines()


MODULE_TREE_DEPTHS = (2, 12)


def time_module_tree(depth: int, engine: str, timing: Timing) -> tuple[float, float, int] | None:
    """(compiled call, calls of the compiled graph functions) seconds and the graphs' input count
    of a TinyViT of `depth` blocks; None if n/a."""
    from tests.cases.models import TinyViT

    torch.manual_seed(0)
    model = TinyViT(image_size=16, patch=4, dim=16, depth=depth, heads=2).eval()
    return time_outputs_once(model, Inputs((torch.randn(1, 3, 16, 16),)), engine, timing)


def time_outputs_once(model: torch.nn.Module, inputs: Inputs, engine: str,
                      timing: Timing) -> tuple[float, float, int] | None:
    """(compiled call, calls of the compiled graph functions alone) seconds per call, under
    no_grad, with a backend whose graph functions return the outputs of their first run, and the
    graphs' input count; None if n/a. The difference is what a cached call costs beyond the graphs:
    guards, loading inputs, frames, and any Python run between graphs."""
    if engine_unavailable_reason(engine) is not None:
        return None
    graphs: list[tuple[Callable[..., Any], list]] = []

    def outputs_once(gm, example_inputs):
        outputs = gm(*example_inputs)

        def graph_fn(*args):
            return outputs

        graphs.append((graph_fn, list(example_inputs)))
        return graph_fn

    def call(fn: Callable[..., Any]) -> Any:
        return fn(*inputs.args, **inputs.kwargs)

    def graphs_alone() -> None:
        for graph_fn, graph_inputs in graphs:
            graph_fn(*graph_inputs)

    reset_engines()
    compiled = optimize_with(engine, model, outputs_once)
    try:
        with torch.no_grad():
            expected = call(model)
            assert_same_result(call(compiled), expected)
            assert_same_result(call(compiled), expected)
            return (per_call_s(lambda: call(compiled), timing), per_call_s(graphs_alone, timing),
                    sum(len(i) for _, i in graphs))
    finally:
        reset_engines()


LIBRARY_MODELS = ("BertModelEval", "GPT2LMHeadModelEval", "LlamaForCausalLMEval", "T5ModelEval")


def library_models() -> list[Case]:
    """Hugging Face's BERT, GPT-2, LLaMA and T5 (tests/cases/transformers_models.py), if installed."""
    cases = {c.name: c for c in load_cases(["tests.cases.transformers_models"])}
    return [cases[name] for name in LIBRARY_MODELS if name in cases]


def _us(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds * 1e6:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 short rounds instead of 7 long ones")
    args = parser.parse_args(argv)
    timing = Timing(rounds=3, round_s=0.05) if args.quick else Timing()

    for engine in ENGINES:
        reason = engine_unavailable_reason(engine)
        if reason:
            print(f"note: {engine} is n/a: {reason}")

    rows = []
    cases = _program_cases()
    for name in PROGRAMS:
        t = time_cache_hits(cases[name], timing)
        over = {e: None if t[e] is None or t["eager"] is None else t[e] - t["eager"] for e in ENGINES}
        ratio = None
        if over["pyframe"] is not None and over["dynamo"]:
            ratio = over["pyframe"] / over["dynamo"]
        rows.append([
            name, _us(t["eager"]), _us(t["pyframe"]), _us(t["dynamo"]),
            _us(over["pyframe"]), _us(over["dynamo"]),
            "n/a" if ratio is None else f"{ratio:.3f}" + (" ok" if ratio <= TARGET_RATIO else " HIGH"),
        ])
    print(f"\nCache hits: per-call time (us), min of {timing.rounds} interleaved rounds; "
          f"target pf/dyn overhead <= {TARGET_RATIO}")
    print(tabulate(rows, headers=["program", "eager", "pyframe", "dynamo",
                                  "pf overhead", "dyn overhead", "pf/dyn overhead"]))

    rows = []
    for depth in MODULE_TREE_DEPTHS:
        t = {engine: time_module_tree(depth, engine, timing) for engine in ("pyframe", "dynamo")}
        over = {e: None if t[e] is None else t[e][0] - t[e][1] for e in t}
        ratio = None if over["pyframe"] is None or not over["dynamo"] else over["pyframe"] / over["dynamo"]
        rows.append([
            f"TinyViT, {depth} blocks", "/".join("n/a" if v is None else str(v[2]) for v in t.values()), _us(t["pyframe"] and t["pyframe"][0]),
            _us(t["dynamo"] and t["dynamo"][0]), _us(over["pyframe"]), _us(over["dynamo"]),
            "n/a" if ratio is None else f"{ratio:.3f}" + (" ok" if ratio <= TARGET_RATIO else " HIGH"),
        ])
    for case in library_models():
        t = {}
        for engine in ("pyframe", "dynamo"):
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(case.seed)
                model, inputs = case.make_fn(), case.make_inputs()
            t[engine] = time_outputs_once(model, inputs, engine, timing)
        over = {e: None if t[e] is None else t[e][0] - t[e][1] for e in t}
        ratio = None if over["pyframe"] is None or not over["dynamo"] else over["pyframe"] / over["dynamo"]
        rows.append([
            case.qualname, "/".join("n/a" if v is None else str(v[2]) for v in t.values()),
            _us(t["pyframe"] and t["pyframe"][0]), _us(t["dynamo"] and t["dynamo"][0]),
            _us(over["pyframe"]), _us(over["dynamo"]),
            "n/a" if ratio is None else f"{ratio:.3f}" + (" ok" if ratio <= TARGET_RATIO else " HIGH"),
        ])
    print("\nDeep module trees and library models: per-call time (us) with a backend that returns the "
          "graphs' outputs (graph inputs: pyframe/dynamo)")
    print(tabulate(rows, headers=["program", "graph inputs", "pyframe", "dynamo", "pf overhead",
                                  "dyn overhead", "pf/dyn overhead"]))

    rows = []
    for engine in ("pyframe", "dynamo"):
        times = time_skipped_frames(engine, timing)
        if times is None:
            rows.append([engine, "n/a", "n/a", "n/a", "n/a"])
            continue
        plain, region = times
        per_frame_ns = (region - plain) / FRAMES_PER_CALL * 1e9
        rows.append([engine, _us(plain), _us(region), f"{region / plain:.2f}", f"{per_frame_ns:.1f}"])
    print(f"\nSkipped frames: python_heavy ({FRAMES_PER_CALL} small Python frames, no tensors) per call")
    print(tabulate(rows, headers=["engine", "plain us", "in region us", "ratio", "hook ns/frame"]))
    return 0


if __name__ == "__main__":
    torch.set_num_threads(1)  # timing noise from intra-op threads helps nobody on a 2-core machine
    sys.exit(main())

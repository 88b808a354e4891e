"""Dynamic shapes: pyframe and torch._dynamo side by side in one process, both with their default
automatic dynamic shapes (the first compile static, the recompile on a new size symbolic).

Three tables:

1. Cache hits on a dynamic entry: the per-call overhead over eager of a call whose sizes the
   symbolic entry covers (a size neither compile saw). ``add`` is ``elementwise.add`` at a third
   length; ``TinyViT-12`` is tests/cases/models.py's encoder with 12 blocks at a third batch size, its
   graphs replaced by functions returning their first outputs (as in overhead.py) so that what is
   timed is the guards (the shape checks included), loading the inputs and the frames. Target:
   pyframe's overhead at most 0.05 of Dynamo's.
2. Warm compile time of the dynamic recompile of Hugging Face's BERT, GPT-2, LLaMA and T5
   (tests/cases/transformers_models.py): the wall time of the call at a second sequence length
   (trace with symbolic sizes, guards, backend) minus an eager call, the minimum over ``--repeat``
   fresh models, after both engines warmed up on an unrelated model. Target: at most 0.1 of Dynamo's.
3. Greedy decoding of 64 tokens with a ``DynamicCache`` (tiny GPT-2) under inductor, end to end:
   compiles included, each engine from empty inductor caches (in memory and on disk). Target:
   pyframe's total no more than torch.compile's.

Run from the repo root:  python benchmarks/dynamic.py [--quick] [--repeat N] [--skip-decode]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
import torch._dynamo  # noqa: E402
from tabulate import tabulate  # noqa: E402

import pyframe  # noqa: E402
from benchmarks.overhead import Timing, per_call_s  # noqa: E402
from pyframe.debug.compare import CountingBackend, assert_same_result, optimize_with, reset_engines  # noqa: E402

ENGINES = ("eager", "pyframe", "dynamo")


def _optimize(engine: str, fn: Any, backend: Any) -> Any:
    return optimize_with(engine, fn, backend, dynamic=None)


def _ratio(ours: float, theirs: float) -> str:
    return f"{ours / theirs:.3f}" if theirs > 0 else "n/a"


# -- 1. cache hits ----------------------------------------------------------------------------

def add(a, b):
    return a + b


def time_add(timing: Timing) -> dict[str, float]:
    """Per-call seconds of `add` at a size the dynamic entry covers."""
    reset_engines()
    x, y = torch.randn(14), torch.randn(14)
    calls = {}
    for engine in ENGINES:
        fn = add if engine == "eager" else _optimize(engine, add, CountingBackend())
        for n in (10, 12):  # static, then the dynamic recompile
            fn(torch.randn(n), torch.randn(n))
        fn(x, y)
        calls[engine] = lambda fn=fn: fn(x, y)
    best = {e: float("inf") for e in calls}
    for _ in range(timing.rounds):  # interleaved rounds, each engine's minimum
        for engine, call in calls.items():
            best[engine] = min(best[engine], per_call_s(call, Timing(rounds=1, round_s=timing.round_s)))
    reset_engines()
    return best


def time_vit(engine: str, timing: Timing) -> tuple[float, float]:
    """(compiled call, its graph functions alone) seconds per call of TinyViT-12 at batch 4, a hit
    on the dynamic entry the compiles at batch 2 and 3 made."""
    from tests.cases.models import TinyViT

    torch.manual_seed(0)
    model = TinyViT(image_size=16, patch=4, dim=16, depth=12, heads=2).eval()
    graphs: list[tuple[Callable[..., Any], list]] = []

    def outputs_once(gm, example_inputs):
        concrete = [int(e.node.hint) if isinstance(e, torch.SymInt) else e for e in example_inputs]
        outputs = gm(*concrete)
        graphs.append((lambda *args: outputs, concrete))
        return graphs[-1][0]

    reset_engines()
    compiled = _optimize(engine, model, outputs_once)
    x = torch.randn(4, 3, 16, 16)
    with torch.no_grad():
        compiled(torch.randn(2, 3, 16, 16))  # static
        del graphs[:]
        compiled(torch.randn(3, 3, 16, 16))  # the dynamic recompile: its graphs serve batch 4
        compiled(x)
        result = per_call_s(lambda: compiled(x), timing), per_call_s(lambda: [g(*i) for g, i in graphs], timing)
    reset_engines()
    return result


def cache_hit_table(timing: Timing) -> list[list]:
    rows = []
    t = time_add(timing)
    ours, theirs = t["pyframe"] - t["eager"], t["dynamo"] - t["eager"]
    rows.append(["add (dynamic size)", f"{t['eager'] * 1e6:.2f}", f"{t['pyframe'] * 1e6:.2f}",
                 f"{t['dynamo'] * 1e6:.2f}", f"{ours * 1e6:.2f}", f"{theirs * 1e6:.2f}", _ratio(ours, theirs)])
    (pf_call, pf_graphs), (dy_call, dy_graphs) = time_vit("pyframe", timing), time_vit("dynamo", timing)
    ours, theirs = pf_call - pf_graphs, dy_call - dy_graphs
    rows.append(["TinyViT-12 (dynamic batch)", "-", f"{pf_call * 1e6:.2f}", f"{dy_call * 1e6:.2f}",
                 f"{ours * 1e6:.2f}", f"{theirs * 1e6:.2f}", _ratio(ours, theirs)])
    return rows


# -- 2. compile time of the dynamic recompile ----------------------------------------------------

LIBRARY = ("BertModel", "GPT2LMHeadModel", "LlamaForCausalLM", "T5Model")


def _recompile_seconds(engine: str, make: Callable[[], torch.nn.Module], inputs: Callable[[int], dict]) -> float:
    reset_engines()
    torch.manual_seed(0)
    model = make().eval()
    compiled = model if engine == "eager" else _optimize(engine, model, CountingBackend())
    with torch.no_grad():
        compiled(**inputs(12))  # the static compile
        kwargs = inputs(16)
        start = time.perf_counter()
        out = compiled(**kwargs)  # the recompile with symbolic sizes (eager: a plain call)
        seconds = time.perf_counter() - start
        assert_same_result(out, model(**kwargs))
    reset_engines()
    return seconds


def compile_table(repeat: int) -> list[list]:
    try:
        from tests.cases.transformers_models import ARCHITECTURES
    except ImportError:
        return []
    if not ARCHITECTURES:
        return []
    rows = []

    def inputs_for(name: str) -> Callable[[int], dict]:
        def inputs(n: int) -> dict:
            kwargs = dict(ARCHITECTURES[name][1]().kwargs)
            kwargs["input_ids"] = torch.randint(0, 256, (2, n))
            return kwargs
        return inputs

    warm = "DistilBertModel"  # both engines' one-time setup, on a model not measured
    for engine in ENGINES:
        _recompile_seconds(engine, ARCHITECTURES[warm][0], inputs_for(warm))
    for name in LIBRARY:
        best = {e: min(_recompile_seconds(e, ARCHITECTURES[name][0], inputs_for(name)) for _ in range(repeat))
                for e in ENGINES}
        ours, theirs = best["pyframe"] - best["eager"], best["dynamo"] - best["eager"]
        rows.append([name, f"{best['eager']:.4f}", f"{ours:.4f}", f"{theirs:.4f}", _ratio(ours, theirs)])
    return rows


# -- 3. decoding under inductor -------------------------------------------------------------------

def decode_seconds(engine: str, steps: int) -> tuple[float, torch.Tensor]:
    import transformers

    from tests.cases.transformers_models import greedy_decode

    reset_engines()
    torch.manual_seed(0)  # (the corpus's tiny GPT-2, with room for the prompt and 64 new tokens)
    config = transformers.GPT2Config(n_embd=32, n_layer=2, n_head=4, vocab_size=256, n_positions=steps + 16,
                                     bos_token_id=0, eos_token_id=0)
    model = transformers.GPT2LMHeadModel(config).eval()
    step = {"eager": model, "pyframe": pyframe.compile(model, backend="inductor"),
            "dynamo": torch.compile(model, backend="inductor")}[engine]
    # Each engine compiles from empty caches: inductor's in-memory code caches and a new on-disk
    # directory (its C++ kernels, compiled by gcc, are cached there by their source): otherwise
    # the engine measured second loads the kernels the first one compiled.
    from torch._inductor.utils import fresh_cache

    with fresh_cache():
        start = time.perf_counter()
        ids = greedy_decode(step, model, steps)
        seconds = time.perf_counter() - start
    reset_engines()
    return seconds, ids


def _warm_inductor() -> None:
    """Inductor's one-time setup (imports, its worker pool) done before either engine is timed, and
    its on-disk graph cache off, so that neither engine compiles from the other's cache."""
    import torch._inductor.config as inductor_config

    inductor_config.fx_graph_cache = False
    for engine in ("pyframe", "dynamo"):
        fn = pyframe.compile(add, backend="inductor") if engine == "pyframe" else torch.compile(add, backend="inductor")
        fn(torch.randn(8), torch.randn(8))
        reset_engines()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--repeat", type=int, default=3, help="fresh models per compile-time row")
    parser.add_argument("--skip-decode", action="store_true", help="leave out the inductor decoding loop")
    parser.add_argument("--steps", type=int, default=64, help="tokens decoded")
    args = parser.parse_args(argv)
    timing = Timing(rounds=3, round_s=0.1) if args.quick else Timing()

    print("Cache hits on a dynamic entry (us per call; overhead = engine - eager, or - the graphs alone)")
    print(tabulate(cache_hit_table(timing), headers=["program", "eager", "pyframe", "dynamo", "pf overhead",
                                                     "dyn overhead", "pf/dyn"]))
    rows = compile_table(1 if args.quick else args.repeat)
    if rows:
        print("\nWarm compile time of the dynamic recompile (s; engine's call minus eager's)")
        print(tabulate(rows, headers=["model", "eager call", "pyframe", "dynamo", "pf/dyn"]))
    if not args.skip_decode:
        _warm_inductor()
        results = {e: decode_seconds(e, args.steps) for e in ENGINES}
        same = all(torch.equal(results[e][1], results["eager"][1]) for e in ENGINES)
        print(f"\nGreedy decoding of {args.steps} tokens (GPT-2, DynamicCache), end to end under inductor "
              f"(compiles included): eager {results['eager'][0]:.2f} s, pyframe {results['pyframe'][0]:.2f} s, "
              f"torch.compile {results['dynamo'][0]:.2f} s; pyframe/torch.compile "
              f"{results['pyframe'][0] / results['dynamo'][0]:.3f}; tokens equal eager's: {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

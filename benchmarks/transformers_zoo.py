"""Whole-library check: every architecture of the installed Hugging Face transformers, eager vs
pyframe vs torch._dynamo.

For each model type of ``MODEL_MAPPING_NAMES`` (its base model class: ``bert`` -> ``BertModel``),
the model is built from its config class's defaults shrunk generically (benchmarks/tiny_configs.py:
every size found by its attribute's name, in nested sub-configs too: hidden 64, 4 heads, head dim
16, 2 layers, vocabulary 512, 64x64 images...; random weights, no download) and called the way a user
calls it, ``model(**inputs)`` in eval mode under ``torch.no_grad()``, with inputs made from its
``main_input_name`` and config (``candidate_inputs``: the first set eager accepts). A model that
does not build, or whose eager forward raises, is counted as "does not build" and not compared.
Then pyframe (``pyframe.optimize``) and torch._dynamo (``torch.compile``) run it twice with the same
``CountingBackend`` (graphs run as they are); each result is compared with eager
(``assert_same_result``), and each engine's graphs, breaks and errors are recorded, with pyframe's
break reasons (its frame records, as ``pyframe.explain`` reads them).

Each model runs in a process of its own (forkserver: torch, transformers and pyframe are imported
once) with a time limit. Printed: the transformers version, a table of the models where the
engines differ (graph counts, results, errors), with pyframe's first break reason, and a summary.

Run from the repo root:
    python benchmarks/transformers_zoo.py [--models bert,gpt2] [--limit N] [--timeout S] [--jobs N] [--json PATH]
    PYTHONPATH=/tmp/tf524 python benchmarks/transformers_zoo.py ...   (another transformers release)
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import sys
import time
import warnings
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # no network, ever: models are built from configs
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's pyframe
sys.path.insert(0, str(Path(__file__).resolve().parent))  # tiny_configs

import torch  # noqa: E402
from tabulate import tabulate  # noqa: E402

from pyframe import convert_frame  # noqa: E402
from pyframe.debug.compare import (  # noqa: E402
    CountingBackend, assert_same_result, count_breaks, fallbacks_of, optimize_with, reset_engines,
)
from tiny_configs import candidate_inputs, tiny_config  # noqa: E402

JIT_ENGINES = ("pyframe", "dynamo")


# --------------------------------------------------------------------------------------------------
# One model


def _message(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"


def _where(filename: str, lineno: int) -> str:
    return f"{re.sub(r'.*/(site-packages|tf524|wt-zoo|main)/', '', filename)}:{lineno}"


def break_reasons(engine: str) -> list[str]:
    """What ``engine`` broke on since its last reset, each as `reason [file:line]`: pyframe's frame
    records (a break, or a frame it ran as Python), torch._dynamo's list of break reasons."""
    if engine == "dynamo":
        from torch._dynamo.utils import graph_break_reasons

        return [f"{g.reason} [{_where(g.user_stack[-1].filename, g.user_stack[-1].lineno)}]" if g.user_stack
                else g.reason for g in graph_break_reasons]
    out = []
    for records in list(convert_frame.records.values()):
        for r in records:
            if r.error is not None and r.status != "skipped_by_rule":
                loc = r.error.location
                out.append(f"{r.error.reason} [{_where(loc.filename, loc.lineno) if loc else r.name}]")
            elif r.status not in ("compiled", "skipped_by_rule"):
                out.append(f"{r.status}: {r.reason} [{r.name}]")
    return out


def _call(fn: Any, inputs: dict[str, Any]) -> Any:
    with torch.no_grad():
        torch.manual_seed(0)  # a model drawing random numbers in eval (random masking) draws the same
        return fn(**inputs)


def _same(actual: Any, expected: Any) -> str | None:
    try:
        assert_same_result(actual, expected)
    except AssertionError as exc:
        return str(exc).splitlines()[0][:300]
    return None


def run_engine(engine: str, model: torch.nn.Module, inputs: dict[str, Any], expected: Any,
               compare: bool = True) -> dict[str, Any]:
    """Two calls of ``model`` under ``engine`` from cold caches: graphs, breaks, results vs eager
    (``expected``; not compared when eager itself gives different results on two calls)."""
    reset_engines()
    counting = CountingBackend()
    rec: dict[str, Any] = {"error": None, "wrong": None}
    start = time.perf_counter()
    try:
        compiled = optimize_with(engine, model, counting)
        first = _call(compiled, inputs)
        rec["graphs_first_call"] = len(counting.graphs)
        second = _call(compiled, inputs)
        rec["wrong"] = (_same(first, expected) or _same(second, expected)) if compare else None
    except Exception as exc:  # an error eager does not raise (eager ran these inputs)
        rec["error"] = _message(exc)
    rec.update(seconds=round(time.perf_counter() - start, 2), graphs=len(counting.graphs), breaks=count_breaks(engine),
               reasons=break_reasons(engine)[:20], fallbacks=fallbacks_of(engine)[:20])
    reset_engines()
    return rec


def check_model(model_type: str, report: Any = None) -> dict[str, Any]:
    """Build ``model_type`` tiny, run it eagerly, then under each engine. ``report(record)`` is
    called with the record so far at each step (the parent keeps it if the process times out)."""
    import transformers
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    transformers.logging.set_verbosity_error()
    warnings.filterwarnings("ignore")
    class_name = MODEL_MAPPING_NAMES[model_type]
    class_name = class_name[0] if isinstance(class_name, (list, tuple)) else class_name
    rec: dict[str, Any] = {"model_type": model_type, "model_class": class_name, "status": "does not build",
                           "stage": "build"}
    report = report or (lambda r: None)
    report(rec)
    try:
        config = tiny_config(model_type)
        torch.manual_seed(0)
        model = getattr(transformers, class_name)(config).eval()
        rec["parameters"] = sum(p.numel() for p in model.parameters())
        rec["stage"] = "eager"
        report(rec)
        candidates, errors = candidate_inputs(model, config), []
        for inputs in candidates:
            try:
                expected = _call(model, inputs)
                break
            except Exception as exc:
                errors.append(_message(exc))
        else:
            rec["build_error"] = " | ".join(dict.fromkeys(errors)) or f"no inputs for {model.main_input_name!r}"
            return rec
    except Exception as exc:
        rec["build_error"] = _message(exc)
        return rec
    rec.update(status="built", inputs={k: list(v.shape) for k, v in inputs.items()},
               eager_nondeterministic=_same(_call(model, inputs), expected) is not None)
    for engine in JIT_ENGINES:
        rec["stage"] = engine
        report(rec)
        rec[engine] = run_engine(engine, model, inputs, expected, compare=not rec["eager_nondeterministic"])
    rec["stage"] = "done"
    return rec


# --------------------------------------------------------------------------------------------------
# Many models, one process each


def _child(model_type: str, conn: Any, quiet: bool) -> None:
    if quiet:  # the models' warnings and prints are not the report
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
    conn.send(check_model(model_type, report=lambda r: conn.send(dict(r))))
    conn.close()


def run_all(model_types: list[str], timeout: float, jobs: int, quiet: bool, json_path: str | None) -> list[dict]:
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", "transformers", "pyframe"])
    pending, running, done = list(model_types), {}, []
    while pending or running:
        while pending and len(running) < jobs:
            model_type = pending.pop(0)
            recv, send = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_child, args=(model_type, send, quiet), daemon=True)
            proc.start()
            send.close()
            running[model_type] = (proc, recv, time.monotonic(), {"model_type": model_type, "stage": "start"})
        time.sleep(0.05)
        for model_type, (proc, recv, start, rec) in list(running.items()):
            try:
                while recv.poll():
                    rec = recv.recv()
            except (EOFError, OSError):
                pass
            running[model_type] = (proc, recv, start, rec)
            elapsed = time.monotonic() - start
            if proc.is_alive() and elapsed < timeout:
                continue
            if proc.is_alive():
                proc.kill()
                rec["status"] = "timeout"
            elif rec.get("stage") != "done" and "build_error" not in rec:
                rec["status"] = f"crashed (exit code {proc.exitcode})"
            proc.join()
            rec["seconds"] = round(elapsed, 1)
            del running[model_type]
            done.append(rec)
            print(f"[{len(done)}/{len(model_types)}] {model_type}: {_line(rec)}", flush=True)
            if json_path:
                Path(json_path).write_text(json.dumps(done, indent=1))
    return done


def _line(rec: dict) -> str:
    if "pyframe" not in rec or "dynamo" not in rec:
        return f"{rec.get('status')} at {rec.get('stage')} ({rec.get('seconds')} s) {rec.get('build_error', '')[:120]}"
    pf, dyn = rec["pyframe"], rec["dynamo"]
    return (f"{rec['status']} pyframe {pf['graphs']} graph(s) dynamo {dyn['graphs']} ({rec['seconds']} s)"
            + ("  DIFFERS" if differs(rec) else ""))


# --------------------------------------------------------------------------------------------------
# Report


def eager_ran(rec: dict) -> bool:
    return rec.get("stage") in (*JIT_ENGINES, "done")


def differs(rec: dict) -> bool:
    pf, dyn = rec.get("pyframe", {}), rec.get("dynamo", {})
    return (rec["status"] != "built" or pf.get("graphs") != dyn.get("graphs") or pf.get("breaks") != dyn.get("breaks")
            or any(e.get(k) for e in (pf, dyn) for k in ("error", "wrong")) or bool(pf.get("fallbacks")))


def _recompiled(e: dict) -> bool:
    return not e["error"] and e["graphs"] != e["graphs_first_call"]


def _cell(e: dict | None) -> str:
    if not e:
        return "-"
    return f"{e['graphs']}/{e['breaks']}" + (" ERR" if e["error"] else "") + (" WRONG" if e["wrong"] else "")


def report(records: list[dict], transformers_version: str) -> str:
    built = [r for r in records if eager_ran(r)]
    rows, by_reason = [], {}
    for r in sorted((r for r in built if differs(r)), key=lambda r: r["model_type"]):
        pf = r.get("pyframe")
        first = (pf["error"] or pf["wrong"] or (pf["reasons"] or pf["fallbacks"] or [""])[0]) if pf \
            else f"{r['status']} in {r['stage']}"
        if r.get("dynamo") and r["dynamo"]["error"]:
            first = f"(dynamo: {r['dynamo']['error'][:60]}) " + first
        rows.append((r["model_type"], _cell(pf), _cell(r.get("dynamo")), first[:110]))
        by_reason.setdefault(re.sub(r" \[[^\]]*\]$", "", first)[:80], []).append(r["model_type"])
    table = tabulate(rows, headers=("model", "pyframe graphs/breaks", "dynamo graphs/breaks", "pyframe's first break"))
    table += "\n\nBy pyframe's first break (location dropped):\n" + "\n".join(
        f"  {len(models):3} {reason or '(no break: graphs or breaks differ)'}: {', '.join(models)}"
        for reason, models in sorted(by_reason.items(), key=lambda kv: -len(kv[1])))
    done = [r for r in built if r["status"] == "built"]
    count = lambda pred: sum(1 for r in done if pred(r))  # noqa: E731
    lines = [
        f"transformers {transformers_version}, torch {torch.__version__}: {len(records)} model types",
        f"  built (eager forward ran): {len(built)}; does not build: "
        f"{sum(r.get('status') == 'does not build' for r in records)}; timed out or crashed before the engines: "
        f"{sum(not eager_ran(r) and r.get('status') != 'does not build' for r in records)}",
        f"  timed out or crashed in an engine: {len(built) - len(done)} "
        f"({', '.join(r['model_type'] + ' (' + r['stage'] + ')' for r in built if r['status'] != 'built')})",
        f"  one graph: pyframe {count(lambda r: r['pyframe']['graphs'] == 1 and not r['pyframe']['error'])}, "
        f"dynamo {count(lambda r: r['dynamo']['graphs'] == 1 and not r['dynamo']['error'])} (of {len(done)})",
        f"  dynamo one graph, pyframe more: {count(lambda r: r['dynamo']['graphs'] == 1 and r['pyframe']['graphs'] > 1)}",
        f"  graph counts differ: {count(lambda r: r['pyframe']['graphs'] != r['dynamo']['graphs'])} (pyframe more: "
        f"{count(lambda r: r['pyframe']['graphs'] > r['dynamo']['graphs'])}, fewer: "
        f"{count(lambda r: r['pyframe']['graphs'] < r['dynamo']['graphs'])})",
        f"  results differ from eager: pyframe {count(lambda r: bool(r['pyframe']['wrong']))}, "
        f"dynamo {count(lambda r: bool(r['dynamo']['wrong']))}",
        f"  errors eager does not raise: pyframe {count(lambda r: bool(r['pyframe']['error']))}, "
        f"dynamo {count(lambda r: bool(r['dynamo']['error']))}",
        f"  pyframe ran frames as plain Python: {count(lambda r: bool(r['pyframe']['fallbacks']))}; recompiled on the"
        f" second call: pyframe {count(lambda r: _recompiled(r['pyframe']))}, dynamo {count(lambda r: _recompiled(r['dynamo']))}",
        f"  eager differs from itself on a second call (results not compared): "
        f"{count(lambda r: r['eager_nondeterministic'])}",
    ]
    return table + "\n\n" + "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", help="comma-separated model types (default: all of MODEL_MAPPING_NAMES)")
    parser.add_argument("--limit", type=int, help="only the first N model types")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per model (default 120)")
    parser.add_argument("--jobs", type=int, default=1, help="models run at once (default 1)")
    parser.add_argument("--json", metavar="PATH", help="write the per-model records here (rewritten after each model)")
    parser.add_argument("--verbose", action="store_true", help="let the models' processes print")
    args = parser.parse_args(argv)

    import transformers
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    print(f"transformers {transformers.__version__} ({Path(transformers.__file__).parent})", flush=True)
    model_types = args.models.split(",") if args.models else list(MODEL_MAPPING_NAMES)
    unknown = [m for m in model_types if m not in MODEL_MAPPING_NAMES]
    if unknown:
        parser.error(f"unknown model types: {', '.join(unknown)}")
    records = run_all(model_types[: args.limit], args.timeout, args.jobs, not args.verbose, args.json)
    print()
    print(report(records, transformers.__version__))
    return 0


if __name__ == "__main__":
    sys.exit(main())

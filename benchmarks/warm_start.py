"""Warm start: time from `import` to the first result in a fresh process, pyframe and torch.compile.

Each row is one model, each column one fresh process (`--worker`), run in this order:

- ``eager``: the model called as it is; its first call is the base every compile share is taken from.
- ``pyframe cold``: ``pyframe.compile(model, backend=...)`` called once, then ``pyframe.save(file)``
  (after the clock stops).
- ``pyframe warm``: ``pyframe.load(file)``, then the same; the translator's runs are counted (0 when
  every entry loaded).
- ``dynamo cold``: ``torch.compile(model, backend=...)`` called once, then
  ``torch.compiler.save_cache_artifacts()`` written to a file.
- ``dynamo warm``: ``torch.compiler.load_cache_artifacts`` of that file, then the same.
- ``aot warm`` (inductor only, models without a graph break): ``torch.compile(model.forward,
  fullgraph=True).aot_compile(...)`` saved by a cold process with ``save_compiled_function``, and
  ``torch.compiler.load_compiled_function`` then the call in the timed one.

Every process of a row gets an empty inductor cache directory of its own (``TORCHINDUCTOR_CACHE_DIR``),
so a warm process finds only what its file holds (a new worker); with ``--machine-caches`` an engine's
cold and warm processes share one (a restart on the same machine, inductor's on-disk caches warm). Times are seconds from the first line of the
process to the first result ("total": imports, the model built, the load, the call) and the compile
share: the first call's time (load included) minus eager's first call. The two figures of record:
``warm/cold`` (pyframe warm's compile share over pyframe cold's; goal <= 0.1 with the eager
backend) and ``pf/dyn warm`` (pyframe warm's total over torch.compile warm's; goal < 1 with inductor).

Run from the repo root:  python benchmarks/warm_start.py [--rows PATTERN] [--backends eager,inductor]
"""
from __future__ import annotations

import time

START = time.perf_counter()  # (first: a process's time counts from here)

import argparse  # noqa: E402
import contextlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # the corpus is tests/cases/

import torch  # noqa: E402
from tabulate import tabulate  # noqa: E402

import pyframe  # noqa: E402
from pyframe import convert_frame  # noqa: E402
from pyframe.debug.cases import load_cases  # noqa: E402

ROWS = ["tests.cases.models:MLPEval", "tests.cases.models:SmallConvNetEval", "tests.cases.models:TransformerBlockEval",
        "tests.cases.transformers_models:BertModelEval", "tests.cases.transformers_models:GPT2LMHeadModelEval",
        "tests.cases.transformers_models:LlamaForCausalLMEval", "tests.cases.transformers_models:T5ModelEval"]
MODES = ["eager", "pyframe_cold", "pyframe_warm", "dynamo_cold", "dynamo_warm", "aot_cold", "aot_warm"]


def worker(mode: str, row: str, backend: str, directory: str) -> dict:
    """One process's measure (see the module's docstring); what it saves goes to `directory`."""
    module, name = row.split(":")
    case = next(c for c in load_cases([module]) if c.name == name)
    model = case.make_fn()
    inputs = case.make_inputs()
    grad = torch.no_grad() if "no_grad" in case.tags else contextlib.nullcontext()
    files = {kind: os.path.join(directory, f"{kind}.bin") for kind in ("pyframe", "dynamo", "aot")}
    out: dict = {}
    with grad:
        begin = time.perf_counter()
        if mode == "eager":
            fn = model
        elif mode in ("pyframe_cold", "pyframe_warm"):
            if mode == "pyframe_warm":
                pyframe.load(files["pyframe"])
            fn = pyframe.compile(model, backend=backend)
        elif mode in ("dynamo_cold", "dynamo_warm"):
            if mode == "dynamo_warm":
                with open(files["dynamo"], "rb") as f:
                    torch.compiler.load_cache_artifacts(f.read())
            fn = torch.compile(model, backend=backend)
        elif mode == "aot_cold":
            # (traced on forward's own arguments; called, it takes the module first: forward unbound)
            compiled = torch.compile(model.forward, fullgraph=True, backend=backend).aot_compile(
                (tuple(inputs.args), dict(inputs.kwargs)))
            fn = compiled
        else:  # aot_warm
            with open(files["aot"], "rb") as f:
                fn = torch.compiler.load_compiled_function(f)
        result = fn(model, *inputs.args, **inputs.kwargs) if mode.startswith("aot") else fn(*inputs.args, **inputs.kwargs)
        end = time.perf_counter()
    del result
    out["first_call"] = end - begin
    out["total"] = end - START
    if mode.startswith("pyframe"):
        out["translations"] = convert_frame.counters["translations"]
    if mode == "pyframe_cold":
        pyframe.save(files["pyframe"])
    elif mode == "dynamo_cold":
        saved = torch.compiler.save_cache_artifacts()
        with open(files["dynamo"], "wb") as f:
            f.write(saved[0] if saved is not None else b"")
    elif mode == "aot_cold":
        compiled.save_compiled_function(files["aot"])
    return out


def _run(mode: str, row: str, backend: str, directory: str, machine_caches: bool = False) -> dict:
    # An empty inductor cache per process (a new worker: only what the file holds), or with
    # `machine_caches` one per engine that its cold and warm processes share (a restart on the same
    # machine: inductor's own on-disk caches warm too).
    # (Not set for other backends: a library that reads the environment gets guards on it, and a
    # directory of its own per process would fail them.)
    engine = mode.split("_")[0]
    caches = os.path.join(directory, f"inductor-{engine}") if machine_caches else \
        tempfile.mkdtemp(prefix="inductor-", dir=directory)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if backend == "inductor":
        env["TORCHINDUCTOR_CACHE_DIR"] = caches
    done = subprocess.run([sys.executable, __file__, "--worker", mode, row, backend, directory], env=env,
                          capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        return {"error": last[:120]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(row: str, backend: str, modes: list[str], repeat: int, machine_caches: bool = False) -> dict:
    """Each mode's process, `repeat` times (the fastest kept: the machine's noise only adds)."""
    results: dict = {}
    with tempfile.TemporaryDirectory(prefix="warm-start-") as directory:
        for mode in modes:
            if mode.startswith("aot") and backend != "inductor":
                continue
            if mode == "aot_warm" and "error" in results.get("aot_cold", {}):
                results[mode] = {"error": "no aot_compile artifact (graph break?)"}
                continue
            runs = [_run(mode, row, backend, directory, machine_caches) for _ in range(repeat)]
            good = [r for r in runs if "error" not in r]
            results[mode] = min(good, key=lambda r: r["first_call"]) if good else runs[0]
    return results


def _cell(result: dict | None, key: str = "total") -> str:
    if result is None:
        return "-"
    if "error" in result:
        return "n/a"
    return f"{result[key]:.2f}"


def table(rows: list[tuple[str, str, dict]]) -> str:
    lines = []
    for row, backend, r in rows:
        eager = r["eager"].get("first_call", 0.0)
        share = {m: r[m]["first_call"] - eager for m in r if "first_call" in r[m]}
        ratio = share["pyframe_warm"] / share["pyframe_cold"] if "pyframe_warm" in share and share.get(
            "pyframe_cold", 0) > 0 else None
        vs_dynamo = r["pyframe_warm"]["total"] / r["dynamo_warm"]["total"] if "total" in r.get(
            "pyframe_warm", {}) and "total" in r.get("dynamo_warm", {}) else None
        lines.append([row.split(":")[1], backend, _cell(r["eager"]), _cell(r.get("pyframe_cold")),
                      _cell(r.get("pyframe_warm")), r.get("pyframe_warm", {}).get("translations", "-"),
                      f"{share.get('pyframe_cold', float('nan')):.3f}", f"{share.get('pyframe_warm', float('nan')):.3f}",
                      "-" if ratio is None else f"{ratio:.3f}", _cell(r.get("dynamo_cold")), _cell(r.get("dynamo_warm")),
                      _cell(r.get("aot_warm")), "-" if vs_dynamo is None else f"{vs_dynamo:.2f}"])
    return tabulate(lines, headers=["model", "backend", "eager", "pf cold", "pf warm", "warm transl.",
                                    "cold share", "warm share", "warm/cold", "dyn cold", "dyn warm", "aot warm",
                                    "pf/dyn warm"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", default="", help="regex over the row names")
    parser.add_argument("--backends", default="eager,inductor")
    parser.add_argument("--modes", default=",".join(MODES), help="which processes to run (eager is needed)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each process (the fastest kept; a cold "
                                                              "one saves its file each time)")
    parser.add_argument("--machine-caches", action="store_true",
                        help="an engine's cold and warm processes share inductor's on-disk caches (a restart "
                             "on the same machine) instead of each starting empty (a new worker)")
    parser.add_argument("--worker", nargs=4, metavar=("MODE", "ROW", "BACKEND", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(*args.worker)))
        return
    done = []
    for backend in args.backends.split(","):
        for row in ROWS:
            if re.search(args.rows, row):
                done.append((row, backend, measure(row, backend, args.modes.split(","), args.repeat,
                                                    args.machine_caches)))
                print(f"{row} {backend}: {json.dumps(done[-1][2])}", file=sys.stderr, flush=True)
    print("seconds from the process's first line to the first result (total), and first call minus "
          "eager's first call (share)")
    print(table(done))


if __name__ == "__main__":
    main()

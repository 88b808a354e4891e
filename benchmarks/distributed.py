"""DistributedDataParallel training on gloo ranks: eager, pyframe and torch.compile, each in its own run.

The model is the issue's: four residual MLP blocks (width 256) and a linear head, wrapped in
`DistributedDataParallel(bucket_cap_mb=1)`, trained by SGD on each rank's own batches. pyframe and
torch._dynamo get the same backend (`--backend`, aot_eager by default: the backward runs through
aot_autograd, so the split at DDP's buckets decides when gradients are ready). Each engine runs in
fresh processes of its own (`--ranks` of them, spawned), so neither warms the other's caches.

A fourth run, "pyframe, one graph" (`pyframe.config.optimize_ddp = False`), is the control.
Per engine, on rank 0 (the backward's compute and the all-reduce time per step are shown too):
- steps per second, after `--warmup` steps (which include the compile);
- the share of all-reduce time overlapped with the backward's compute: a comm hook times every
  bucket's all-reduce (launch to completion), hooks on the backward graph's nodes time their runs
  (all but AccumulateGrad, which stores a gradient and marks it ready for DDP), and the share is
  the time both ran at once over the time some all-reduce ran. One unsplit graph computes every
  gradient in one node that ends before any bucket is ready: nothing overlaps.

Run from the repo root:  python benchmarks/distributed.py [--ranks 2] [--steps 300] [--backend aot_eager]
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
from tabulate import tabulate  # noqa: E402
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

import pyframe  # noqa: E402
from pyframe.debug.compare import CountingBackend, optimize_with, resolve_backend  # noqa: E402
from tests.cases.models import ResidualNet  # noqa: E402

# "pyframe, one graph": pyframe with config.optimize_ddp = False, the control: nothing should overlap.
ENGINES = ("eager", "pyframe", "dynamo", "pyframe, one graph")
WIDTH, BLOCKS, BATCH = 256, 4, 64


def timed_allreduce_hook(spans: list[tuple[float, float]]):
    """A DDP comm hook: the default all-reduce, appending each bucket's (launch, completion) times."""
    def timed_allreduce(state, bucket):  # (unannotated: DDP checks annotations, which are strings here)
        start = time.perf_counter()

        def done(fut: torch.futures.Future) -> torch.Tensor:
            spans.append((start, time.perf_counter()))
            return fut.value()

        return default_hooks.allreduce_hook(state, bucket).then(done)

    return timed_allreduce


def time_backward_nodes(loss: torch.Tensor, spans: list[tuple[float, float]]) -> None:
    """Hooks on every node of loss's backward graph that computes (all but AccumulateGrad, which
    only stores a gradient and tells DDP it is ready): each run appends its (start, end) times."""
    seen, todo = set(), [loss.grad_fn]
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        todo.extend(next_node for next_node, _ in node.next_functions)
        if type(node).__name__ == "AccumulateGrad":
            continue
        started: list[float] = []
        node.register_prehook(lambda grad_outputs, started=started: started.append(time.perf_counter()))
        node.register_hook(lambda grad_inputs, grad_outputs, started=started:
                           spans.append((started.pop(), time.perf_counter())))


def _union(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[list[float]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(a, b) for a, b in merged]


def overlap_share(allreduces: list[tuple[float, float]], compute: list[tuple[float, float]]) -> float:
    """Of the time some all-reduce of the step was running, the share during which the backward
    was also computing."""
    comm, work = _union(allreduces), _union(compute)
    total = sum(b - a for a, b in comm)
    both = sum(max(0.0, min(b, d) - max(a, c)) for a, b in comm for c, d in work)
    return both / total if total > 0 else 0.0


def _rank(rank: int, world: int, port: int, engine: str, backend_name: str, warmup: int, steps: int, out) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        torch.set_num_threads(1)
        torch.manual_seed(0)
        ddp = DDP(ResidualNet(WIDTH, BLOCKS), bucket_cap_mb=1)
        spans: list[tuple[float, float]] = []
        ddp.register_comm_hook(None, timed_allreduce_hook(spans))
        backend = CountingBackend(resolve_backend(backend_name))
        pyframe.config.optimize_ddp = engine != "pyframe, one graph"
        jit = engine.split(",")[0]
        model = ddp if jit == "eager" else optimize_with(jit, ddp, backend)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        shares, compute_ms, allreduce_ms = [], [], []

        def step(i: int) -> None:
            torch.manual_seed(1000 * rank + i)
            x, y = torch.randn(BATCH, WIDTH), torch.randn(BATCH, 10)
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            spans.clear()
            compute: list[tuple[float, float]] = []
            time_backward_nodes(loss, compute)
            loss.backward()
            shares.append(overlap_share(spans, compute))
            compute_ms.append(1e3 * sum(b - a for a, b in _union(compute)))
            allreduce_ms.append(1e3 * sum(b - a for a, b in _union(spans)))
            opt.step()

        for i in range(warmup):
            step(i)
        shares.clear(), compute_ms.clear(), allreduce_ms.clear()
        dist.barrier()
        start = time.perf_counter()
        for i in range(steps):
            step(warmup + i)
        elapsed = time.perf_counter() - start
        if rank == 0:
            mean = lambda values: sum(values) / len(values)  # noqa: E731
            out["result"] = (steps / elapsed, mean(shares), len(backend.graphs), mean(compute_ms), mean(allreduce_ms))
    finally:
        dist.destroy_process_group()


def run_engine(engine: str, args: argparse.Namespace) -> tuple[float, float, int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager:
        out = manager.dict()
        mp.start_processes(_rank, args=(args.ranks, port, engine, args.backend, args.warmup, args.steps, out),
                           nprocs=args.ranks, start_method="spawn")
        return out["result"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--steps", type=int, default=300)  # (fewer: the overlap varies by +-0.03 run to run)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--backend", default="aot_eager")
    args = parser.parse_args()
    rows = []
    for engine in ENGINES:
        steps_per_s, share, graphs, compute, allreduce = run_engine(engine, args)
        rows.append([engine, "-" if engine == "eager" else graphs, f"{steps_per_s:.1f}", f"{compute:.2f}",
                     f"{allreduce:.2f}", f"{share:.2f}"])
        print(f"  measured {engine}", flush=True)
    print(f"\nDDP(bucket_cap_mb=1), {BLOCKS} residual blocks of width {WIDTH}, batch {BATCH}, "
          f"{args.ranks} gloo ranks, backend {args.backend}, torch {torch.__version__}")
    print(tabulate(rows, headers=["engine", "graphs", "steps/s", "backward ms", "all-reduce ms", "all-reduce overlapped"]))
    pf, dyn = float(rows[1][5]), float(rows[2][5])
    print(f"\noverlap: pyframe {pf:.2f}, torch._dynamo {dyn:.2f} -> {'ok' if pf >= dyn else 'LOW'} "
          f"(target: pyframe at least Dynamo's)")


if __name__ == "__main__":
    main()

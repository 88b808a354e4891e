"""Memory on the cache-hit path: 1,000,000 cached calls of ``add`` must not grow RSS by 1 MB.

A leak of one reference per call on the hit path (a shadow frame's locals, the guard's fetched
values, the compiled function's result tuple) shows here as megabytes. RSS is read from
/proc/self/statm before and after the calls, once the cache entry exists and the allocator has warmed.

Run from the repo root:  python benchmarks/memory.py [--engine dynamo] [--calls N]
Exit status: 0 within budget, 1 over budget, 2 engine not available.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from pyframe.debug.compare import (  # noqa: E402
    CountingBackend,
    engine_unavailable_reason,
    optimize_with,
    reset_engines,
)

BUDGET_BYTES = 1 << 20
WARMUP_CALLS = 20_000


def add(a, b):
    return a + b


def rss_bytes() -> int:
    """Resident set size of this process (second field of /proc/self/statm, in pages)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@dataclasses.dataclass
class MemoryResult:
    engine: str
    calls: int
    rss_before: int
    rss_after: int
    seconds: float
    graphs: int

    @property
    def growth(self) -> int:
        return self.rss_after - self.rss_before


def measure(engine: str = "pyframe", calls: int = 1_000_000) -> MemoryResult:
    """RSS growth over ``calls`` cache-hit calls of ``add`` under ``engine``."""
    reset_engines()
    backend = CountingBackend()
    compiled = optimize_with(engine, add, backend)
    a, b = torch.randn(10), torch.randn(10)
    for _ in range(WARMUP_CALLS):
        compiled(a, b)
    before = rss_bytes()
    start = time.perf_counter()
    for _ in range(calls):
        compiled(a, b)
    seconds = time.perf_counter() - start
    after = rss_bytes()
    reset_engines()
    return MemoryResult(engine, calls, before, after, seconds, len(backend.graphs))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--engine", choices=["pyframe", "dynamo"], default="pyframe")
    parser.add_argument("--calls", type=int, default=1_000_000)
    args = parser.parse_args(argv)

    reason = engine_unavailable_reason(args.engine)
    if reason is not None:
        print(f"{args.engine}: n/a ({reason})")
        return 2
    result = measure(args.engine, args.calls)
    ok = result.growth < BUDGET_BYTES
    print(
        f"{result.engine}: {result.calls:,} cached calls of add in {result.seconds:.1f} s "
        f"({result.seconds / result.calls * 1e6:.2f} us/call, {result.graphs} graph compiled); "
        f"RSS {result.rss_before / 2**20:.1f} MB -> {result.rss_after / 2**20:.1f} MB, "
        f"growth {result.growth / 1024:.0f} KB (budget {BUDGET_BYTES // 1024} KB): "
        f"{'ok' if ok else 'OVER BUDGET'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

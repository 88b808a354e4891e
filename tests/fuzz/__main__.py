"""Command line: ``python -m tests.fuzz`` (run from the repository root).

    python -m tests.fuzz --seeds 0:300              run seeds 0..299, print a summary and the failures
    python -m tests.fuzz --seed 43 --show           one seed: its program, inputs and outcome
    python -m tests.fuzz --seed 43 --minimize       shrink a failing seed's program and print it
"""
from __future__ import annotations

import argparse
import collections
import sys
import time
import warnings

from .minimize import minimize
from .runner import check_seed, make_inputs


def _seed_range(text: str) -> range:
    start, _, stop = text.partition(":")
    return range(int(start), int(stop)) if stop else range(int(start), int(start) + 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=_seed_range, help="a range START:STOP of seeds")
    parser.add_argument("--seed", type=int, help="a single seed")
    parser.add_argument("--show", action="store_true", help="print the program and its inputs")
    parser.add_argument("--minimize", action="store_true", help="shrink the failing program")
    args = parser.parse_args(argv)
    seeds = args.seeds or (range(args.seed, args.seed + 1) if args.seed is not None else range(0, 300))
    warnings.simplefilter("ignore")  # recompile-limit and torch warnings: not what is looked for

    start = time.perf_counter()
    counts: collections.Counter[str] = collections.Counter()
    failures = []
    for seed in seeds:
        outcome = check_seed(seed)
        counts[outcome.status] += 1
        if args.show and outcome.program is not None:
            program = outcome.program
            print(f"--- fuzz_{seed}.py (attempt {outcome.attempt}) ---\n{program.source}")
            print(f"features: {', '.join(sorted(program.features))}")
            print(f"inputs of trial 0: {make_inputs(program, 0)[:-1]}")
            print(f"outcome: {outcome.status}, {outcome.graphs} graph(s)\n{outcome.detail}")
        if outcome.failed:
            failures.append(outcome)
            if not args.show:
                print(outcome.report(), end="\n\n")
    elapsed = time.perf_counter() - start
    print(f"{len(seeds)} seed(s) in {elapsed:.1f}s: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    if failures:
        print("failing seeds: " + " ".join(str(o.seed) for o in failures))

    if args.minimize:
        for outcome in failures:
            print(f"\nminimizing seed {outcome.seed} ({outcome.signature()})", flush=True)
            small, small_outcome = minimize(outcome.program, progress=lambda m: print("  " + m, flush=True))
            print(small_outcome.report())
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

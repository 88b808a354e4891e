"""Decoding a code object: the `bytecode` library vs pyframe's fast decoder.

The code is a generated function of ``--lines`` lines ``x = torch.sin(x)`` (6 instructions and 20
CACHE units a line), the kind whose compile time benchmarks/compile_time.py measures. Rows:

- ``Bytecode.from_code``: ``list(Bytecode.from_code(code, conserve_exception_block_stackdepth=True))``,
  what pyframe's decode() used before (ConcreteBytecode.from_code, then to_bytecode);
- ``  ConcreteBytecode.from_code``: its first half, for reference;
- ``dis.get_instructions``: the standard library's reader, for reference;
- ``fast_decode``: pyframe/translator/decode.py, whose output equals the first row's (checked here).

Times are the minimum over ``--repeat`` runs. Run from the repo root:  python benchmarks/decode.py
"""

from __future__ import annotations

import argparse
import dis
import sys
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
from bytecode import Bytecode, ConcreteBytecode, Instr, Label  # noqa: E402

from pyframe.translator.decode import fast_decode  # noqa: E402


def generated_code(lines: int):
    source = "def chain(x):\n" + "".join("    x = torch.sin(x)\n" for _ in range(lines)) + "    return x\n"
    namespace: dict[str, Any] = {"torch": torch}
    exec(compile(source, "/generated/chain.py", "exec"), namespace)
    return namespace["chain"].__code__


def best_ms(fn: Callable[[], Any], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def same(expected: list, got: list) -> bool:
    if len(expected) != len(got):
        return False
    where_e = {id(x): i for i, x in enumerate(expected) if isinstance(x, Label)}
    where_g = {id(x): i for i, x in enumerate(got) if isinstance(x, Label)}
    for e, g in zip(expected, got):
        if type(e) is not type(g):
            return False
        if isinstance(e, Instr):
            if isinstance(e.arg, Label):
                if (e.name, e.location, where_e[id(e.arg)]) != (g.name, g.location, where_g[id(g.arg)]):
                    return False
            elif e != g:
                return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lines", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=20)
    options = parser.parse_args()

    code = generated_code(options.lines)
    expected = list(Bytecode.from_code(code, conserve_exception_block_stackdepth=True))
    got = fast_decode(code)
    assert same(expected, got), "fast_decode differs from Bytecode.from_code"
    print(f"{options.lines}-line function: {len(code.co_code) // 2} code units, {len(expected)} instructions")

    rows = [
        ("Bytecode.from_code", lambda: list(Bytecode.from_code(code, conserve_exception_block_stackdepth=True))),
        ("  ConcreteBytecode.from_code", lambda: ConcreteBytecode.from_code(code)),
        ("dis.get_instructions", lambda: list(dis.get_instructions(code))),
        ("fast_decode", lambda: fast_decode(code)),
    ]
    times = {name: best_ms(fn, options.repeat) for name, fn in rows}
    for name, ms in times.items():
        print(f"{name:30} {ms:8.2f} ms")
    print(f"fast_decode / Bytecode.from_code = {times['fast_decode'] / times['Bytecode.from_code']:.3f}")


if __name__ == "__main__":
    main()

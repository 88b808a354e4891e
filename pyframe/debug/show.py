"""`show(fn)`: a function's bytecode before and after pyframe, its resume functions and its graphs.

For the function's code and each of its resume functions, and each of their cache entries:

    the entry's summary (hits, why it was made, guards)
    original bytecode | transformed bytecode       side by side, one instruction a line
    the FX code (`gm.code`) of every graph the transformed code calls
    the transformed code decompiled to Python      when `depyf` is installed (`pip install -e ".[debug]"` in the checkout)

In the transformed code, a constant that is a compiled graph or a resume function is shown by its
name (`__compiled_fn_3`, `__resume_at_102_0`) instead of its repr.
"""
from __future__ import annotations

import dis
import re
import types
from typing import Any

from .. import _C
from ..logs import graph_code
from ..rerun import run_as_python
from .entries import CacheEntryInfo, code_of, describe_code, entries_of, resume_codes_of

__all__ = ["show", "format_show", "bytecode_lines", "side_by_side", "decompile"]

COLUMN = 58  # width of the left (original) column


def _const_names(entry: CacheEntryInfo | None) -> dict[int, str]:
    """id(constant) -> readable name, for the constants codegen puts in a transformed code."""
    if entry is None:
        return {}
    names: dict[int, str] = {}
    for const in entry.transformed.co_consts:
        if isinstance(const, _C.CallbackScope):
            fn = getattr(const.fn, "fn", None) if type(const.fn).__name__ == "FirstCallCheck" else const.fn
            name = next((g.name for g in entry.compiled if g.fn is fn), None)
            names[id(const)] = name or f"compiled graph {const.fn!r}"
        elif isinstance(const, types.FunctionType):
            names[id(const)] = const.__name__
    return names


def bytecode_lines(code: types.CodeType, names: dict[int, str] | None = None) -> list[str]:
    """One line per instruction: source line (where it starts), `>>` for jump targets, offset,
    opname and argument, like `dis` but narrow enough to set two codes side by side."""
    names = names or {}
    lines = []
    for inst in dis.get_instructions(code):
        if inst.opname == "LOAD_CONST" and id(inst.argval) in names:
            arg = names[id(inst.argval)]
        else:
            arg = inst.argrepr if inst.argrepr else ("" if inst.arg is None else str(inst.arg))
        lineno = str(inst.starts_line) if inst.starts_line is not None else ""
        target = ">>" if inst.is_jump_target else ""
        lines.append(f"{lineno:>4} {target:>2} {inst.offset:>4} {inst.opname} {arg}".rstrip())
    return lines


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def side_by_side(left: list[str], right: list[str], titles: tuple[str, str], width: int = COLUMN) -> str:
    """Two listings in two columns; the left one clipped to `width` characters."""
    rows = [f"{_clip(titles[0], width):<{width}} | {titles[1]}", f"{'-' * width}-+-{'-' * width}"]
    for i in range(max(len(left), len(right))):
        a = left[i] if i < len(left) else ""
        b = right[i] if i < len(right) else ""
        rows.append(f"{_clip(a, width):<{width}} | {b}".rstrip())
    return "\n".join(rows)


def decompile(code: types.CodeType, names: dict[int, str] | None = None) -> str | None:
    """The code as Python source via depyf, or None when depyf is not installed."""
    try:
        import depyf
    except ImportError:
        return None
    code, rerun_note = _without_rerun_handler(code)
    try:
        text = depyf.decompile(code) + rerun_note
    except Exception as e:  # depyf does not know every bytecode pattern codegen emits
        return f"# depyf could not decompile {code.co_name}: {type(e).__name__}: {e}"
    if names:
        # depyf writes a constant it cannot spell as the string '__co_consts[i]'.
        by_index = {i: names[id(c)] for i, c in enumerate(code.co_consts) if id(c) in names}
        text = re.sub(r"'__co_consts\[(\d+)\]'",
                      lambda m: by_index.get(int(m.group(1)), m.group(0)), text)
    return text.rstrip()


def _without_rerun_handler(code: types.CodeType) -> tuple[types.CodeType, str]:
    """The transformed code without the handler that reruns the frame when its graph raises (the
    code's last instructions, pyframe/rerun.py), which depyf cannot decompile (it reads no
    exception table), and a comment saying it was there."""
    instructions = [i for i in dis.get_instructions(code)]
    call = next((i for i in instructions if i.opname == "LOAD_CONST" and i.argval is run_as_python), None)
    if call is None:
        return code, ""
    start = call.offset - 4  # its PUSH_NULL and SWAP 2
    if any(entry.target != start for entry in dis._parse_exception_table(code)):
        return code, ""  # other handlers (a with block): leave it whole
    note = "\n# (if the graph call raises: return run_as_python(error, <this code>, globals(), <closure>, <arguments>))"
    return code.replace(co_code=code.co_code[:start], co_exceptiontable=b""), note


def _section(title: str) -> str:
    return f"\n=== {title} ==="


def _show_code(code: types.CodeType, entries: list[CacheEntryInfo], out: list[str], *, depyf: bool) -> None:
    original = bytecode_lines(code)
    if not entries:
        out.append("no cache entries (not called under pyframe.optimize since the last reset, or skipped)")
        out.append(side_by_side(original, [], ("original bytecode", "")))
        return
    for entry in entries:
        out.append(f"\n--- entry #{entry.number or '?'}: {entry.hits} hit(s), made by: {entry.reason}"
                   + (f", backend {entry.backend!r}" if entry.backend else ""))
        out.append("guards:")
        out += [f"  {g}" for g in entry.guards]
        if entry.break_reason:
            out.append(f"graph break: {entry.break_reason}")
        names = _const_names(entry)
        out.append(side_by_side(original, bytecode_lines(entry.transformed, names),
                                ("original bytecode", "transformed bytecode")))
        for graph in entry.compiled:
            out.append(f"\n{graph.name} (gm.code):")
            out.append(graph_code(graph.gm))
        if depyf:
            text = decompile(entry.transformed, names)
            if text is not None:
                out.append("\ntransformed code, decompiled by depyf:")
                out.append(text)


def format_show(fn: Any, *, depyf: bool = True) -> str:
    """The text `show(fn)` prints."""
    code = code_of(fn)
    out: list[str] = []
    entries = entries_of(code)
    out.append(_section(f"{describe_code(code)}: {len(entries)} cache entr{'y' if len(entries) == 1 else 'ies'}"))
    _show_code(code, entries, out, depyf=depyf)
    for rc in resume_codes_of(code):
        rc_entries = entries_of(rc)
        out.append(_section(f"resume function {describe_code(rc)}: {len(rc_entries)} cache entr"
                            f"{'y' if len(rc_entries) == 1 else 'ies'}"))
        _show_code(rc, rc_entries, out, depyf=depyf)
    if depyf and decompile_available() is False:
        out.append("\n(install depyf to see the transformed code as Python: `pip install -e \".[debug]\"` in the "
                   "checkout, or `pip install depyf`)")
    return "\n".join(out).lstrip("\n") + "\n"


def decompile_available() -> bool:
    try:
        import depyf  # noqa: F401
    except ImportError:
        return False
    return True


def show(fn: Any, *, quiet: bool = False, depyf: bool = True) -> str | None:
    """Print the bytecode, graphs and decompiled code of `fn`'s entries (and return None, as
    `dis.dis` does, so the REPL does not echo it again); with `quiet=True` print nothing and return
    the text (`format_show`).

    `fn`: a function, method, nn.Module / OptimizedModule, what `pyframe.optimize` returned, or a
    code object. `depyf=False` leaves out the decompiled Python (depyf is slow on large codes).
    """
    text = format_show(fn, depyf=depyf)
    if quiet:
        return text
    print(text, end="")
    return None

"""Dataflow over a code's instruction list, apart from the interpreter.

`live_locals(instructions, index)`: the locals that may be read, before being written, on some
path starting at `instructions[index]`. A graph break passes exactly these to the resume function.
`enclosing_handlers(instructions)`: for each position, the exception handlers covering it (3.11
has no SETUP_* opcodes; the `bytecode` library marks try ranges with TryBegin/TryEnd).
`may_loop_back(instructions, index)`: whether a break at `index` may sit inside a loop, decided
as torch._dynamo decides it.
`may_read_own_scope(instructions, index)`: whether code run after a break at `index` may call
locals(), vars(), dir(), eval(), exec() or breakpoint() by their builtin names.
"""
from __future__ import annotations

from typing import Any

from bytecode import CellVar, Instr, Label, TryBegin, TryEnd

_READS = {"LOAD_FAST", "LOAD_FAST_CHECK", "DELETE_FAST", "LOAD_DEREF", "LOAD_CLOSURE", "LOAD_CLASSDEREF"}
_WRITES = {"STORE_FAST", "STORE_DEREF"}
_NO_FALLTHROUGH = {"RETURN_VALUE", "RAISE_VARARGS", "RERAISE", "JUMP_FORWARD", "JUMP_BACKWARD",
                   "JUMP_BACKWARD_NO_INTERRUPT"}


def _local_name(inst: Instr) -> str | None:
    arg = inst.arg
    if isinstance(arg, str):
        return arg
    if isinstance(arg, CellVar):  # free variables live in the closure, not in a passed local
        return arg.name
    return None


def enclosing_entries(instructions: list[Any]) -> list[tuple[TryBegin, ...]]:
    """For each position, the try ranges (TryBegin entries) that cover it, innermost last."""
    active: list[TryBegin] = []
    result = []
    for inst in instructions:
        if isinstance(inst, TryBegin):
            active.append(inst)
        elif isinstance(inst, TryEnd) and inst.entry in active:
            active.remove(inst.entry)
        result.append(tuple(active))
    return result


def enclosing_handlers(instructions: list[Any]) -> list[tuple[Label, ...]]:
    """For each position, the handler labels of the try ranges that cover it (innermost last)."""
    return [tuple(entry.target for entry in entries) for entries in enclosing_entries(instructions)]


def innermost_handlers(instructions: list[Any]) -> list[TryBegin | None]:
    """For each position, the try range whose handler catches an exception raised there."""
    return [entries[-1] if entries else None for entries in enclosing_entries(instructions)]


def live_locals(instructions: list[Any], index: int) -> set[str]:
    """Locals possibly read before written from `index` on (backward liveness to a fixpoint)."""
    label_index = {inst: i for i, inst in enumerate(instructions) if isinstance(inst, Label)}
    handlers = enclosing_handlers(instructions)
    n = len(instructions)
    successors: list[list[int]] = []
    for i, inst in enumerate(instructions):
        succ = [label_index[h] for h in handlers[i]]
        if isinstance(inst, Instr):
            if isinstance(inst.arg, Label):
                succ.append(label_index[inst.arg])
            if inst.name not in _NO_FALLTHROUGH and i + 1 < n:
                succ.append(i + 1)
        elif i + 1 < n:
            succ.append(i + 1)
        successors.append(succ)
    live_in: list[set[str]] = [set() for _ in range(n)]
    changed = True
    while changed:
        changed = False
        for i in range(n - 1, -1, -1):
            inst = instructions[i]
            out: set[str] = set()
            for s in successors[i]:
                out |= live_in[s]
            if isinstance(inst, Instr) and (name := _local_name(inst)) is not None:
                if inst.name in _WRITES:
                    out = out - {name}
                elif inst.name in _READS:
                    out = out | {name}
            if out != live_in[i]:
                live_in[i] = out
                changed = True
    return live_in[index]


def may_loop_back(instructions: list[Any], index: int) -> bool:
    """Whether a graph break at `instructions[index]` may lie inside a loop: some jump after it, before
    the first RETURN_VALUE, goes back to an instruction before it. This is torch._dynamo's heuristic
    (InstructionTranslator.maybe_has_backedge), kept exactly, since it decides when a frame is
    skipped rather than broken: a `return` inside the loop, after the break, hides the loop from it.
    """
    label_index = {inst: i for i, inst in enumerate(instructions) if isinstance(inst, Label)}
    for inst in instructions[index + 1:]:
        if not isinstance(inst, Instr):
            continue
        if inst.name == "RETURN_VALUE":
            return False
        if isinstance(inst.arg, Label):
            target = label_index[inst.arg]
            while not isinstance(instructions[target], Instr):  # the instruction the label marks
                target += 1
            if target < index:
                return True
    return False


# Builtins that, called without namespaces, read the variables of the frame that calls them.
_SCOPE_READERS = frozenset({"locals", "vars", "dir", "eval", "exec", "breakpoint"})


def may_read_own_scope(instructions: list[Any], index: int) -> bool:
    """Whether code that may run after a graph break at `instructions[index]` loads one of the
    builtins that read the calling frame's variables (`locals()`, `vars()`...). A resume function
    is a frame of its own, with other locals (`___stack0`, only the live ones): such a call there
    would see them, not the original frame's, so the break must not resume. Conservative: any load
    of the name from `index` on counts (`vars` and `dir` only when called at once without an
    argument), and the whole code when a jump after `index` goes back before it (a loop)."""
    label_index = {inst: i for i, inst in enumerate(instructions) if isinstance(inst, Label)}
    start = index
    for inst in instructions[index:]:
        if isinstance(inst, Instr) and isinstance(inst.arg, Label) and label_index[inst.arg] < index:
            start = 0
            break
    code = [inst for inst in instructions[start:] if isinstance(inst, Instr)]
    for i, inst in enumerate(code):
        if inst.name in ("LOAD_GLOBAL", "LOAD_NAME"):
            name = inst.arg[1] if isinstance(inst.arg, tuple) else inst.arg  # 3.11: (push_null, name)
            if name not in _SCOPE_READERS:
                continue
            if name in ("vars", "dir"):  # only without an argument: `vars(obj)` reads obj
                following = code[i + 1] if i + 1 < len(code) else None
                if following is None or following.name != "PRECALL" or following.arg != 0:
                    continue
            return True
    return False

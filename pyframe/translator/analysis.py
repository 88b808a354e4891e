"""Dataflow over a code's instruction list, apart from the interpreter.

`live_locals(instructions, index)`: the locals that may be read, before being written, on some
path starting at `instructions[index]`. A graph break passes exactly these to the resume function.
`enclosing_handlers(instructions)`: for each position, the exception handlers covering it (3.11
has no SETUP_* opcodes; the `bytecode` library marks try ranges with TryBegin/TryEnd).
`may_loop_back(instructions, index)`: whether a break at `index` may sit inside a loop, decided
as torch._dynamo decides it.
`reaches_a_handler(instructions, index, exc_type, resolve)`: whether an exception raised at
`index` would run code of the frame (a matching except, a finally, a with's exit).
`may_read_own_scope(instructions, index)`: whether code run after a break at `index` may call
locals(), vars(), dir(), eval(), exec() or breakpoint() by their builtin names.
"""
from __future__ import annotations

from typing import Any, Callable

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


def _first_instr(instructions: list[Any], index: int) -> int:
    while index < len(instructions) and not isinstance(instructions[index], Instr):
        index += 1
    return index


def reaches_a_handler(instructions: list[Any], index: int, exc_type: type,
                      resolve: Callable[[str], Any]) -> bool:
    """Whether `exc_type` raised at `instructions[index]` would run code of the frame: an `except`
    clause that matches it, a `finally` block or a `with` statement's exit. 3.11's handlers are
    followed: an `except A:` whose A (`resolve(name)`: the global or builtin) does not match passes
    the exception on (RERAISE), as does the cleanup block after it. A handler that catches it but
    only moves between the frame's own locals, jumps and yields again (`except GeneratorExit: pass`
    in a loop) runs no code another frame could see. Anything not recognized counts as running code
    (the answer is conservative)."""
    label_index = {inst: i for i, inst in enumerate(instructions) if isinstance(inst, Label)}
    innermost = innermost_handlers(instructions)
    position = index
    for _ in range(100):
        entry = innermost[position]
        if entry is None:
            return False  # it leaves the frame
        at = _first_instr(instructions, label_index[entry.target])
        second = _first_instr(instructions, at + 1)
        third = _first_instr(instructions, second + 1)
        if third < len(instructions) and [instructions[i].name for i in (at, second, third)] == \
                ["COPY", "POP_EXCEPT", "RERAISE"]:  # the cleanup after an except body
            position = third
            continue
        if instructions[at].name != "PUSH_EXC_INFO":
            return True
        handler = at
        at = _first_instr(instructions, at + 1)
        while True:  # the `except A:` clauses, one after the other
            classes, cursor = [], at
            while isinstance(instructions[cursor], Instr) and instructions[cursor].name in ("LOAD_GLOBAL", "LOAD_NAME"):
                arg = instructions[cursor].arg
                classes.append(resolve(arg[1] if isinstance(arg, tuple) else arg))
                cursor = _first_instr(instructions, cursor + 1)
            if len(classes) > 1:
                if instructions[cursor].name != "BUILD_TUPLE":
                    return True
                cursor = _first_instr(instructions, cursor + 1)
            check = instructions[cursor]
            jump = instructions[_first_instr(instructions, cursor + 1)]
            if not classes or check.name != "CHECK_EXC_MATCH" or not jump.name.startswith("POP_JUMP") \
                    or not isinstance(jump.arg, Label):
                # a finally, a with, a bare except, or not recognized
                return _runs_visible_code(instructions, handler, label_index, innermost)
            if not all(isinstance(c, type) for c in classes) or issubclass(exc_type, tuple(classes)):
                return _runs_visible_code(instructions, handler, label_index, innermost)
            at = _first_instr(instructions, label_index[jump.arg])  # the next clause, or RERAISE
            if instructions[at].name == "RERAISE":
                position = at
                break
    return True


# What a handler may do and still run nothing another frame could see: the frame's own locals and
# stack, exception bookkeeping, jumps. YIELD_VALUE and RETURN_VALUE end a path.
_INVISIBLE = {"NOP", "POP_TOP", "PUSH_EXC_INFO", "POP_EXCEPT", "LOAD_FAST", "LOAD_CONST", "LOAD_GLOBAL", "LOAD_DEREF",
              "CHECK_EXC_MATCH", "COPY", "SWAP", "STORE_FAST", "DELETE_FAST", "RESUME", "JUMP_FORWARD",
              "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "POP_JUMP_FORWARD_IF_FALSE",
              "POP_JUMP_FORWARD_IF_TRUE", "POP_JUMP_BACKWARD_IF_FALSE", "POP_JUMP_BACKWARD_IF_TRUE"}


def _runs_visible_code(instructions: list[Any], start: int, label_index: dict, innermost: list) -> bool:
    """Whether some path from the handler at `start` runs an instruction outside _INVISIBLE before
    it yields, returns or lets the exception leave the frame (a RERAISE with no handler, or only the
    cleanup block after an except body, around it)."""
    seen, todo = set(), [start]
    while todo:
        i = _first_instr(instructions, todo.pop())
        if i in seen or i >= len(instructions):
            continue
        seen.add(i)
        inst = instructions[i]
        if inst.name in ("YIELD_VALUE", "RETURN_VALUE"):
            continue
        if inst.name == "RERAISE":
            entry = innermost[i]
            if entry is not None:
                todo.append(label_index[entry.target])  # (the cleanup block: COPY, POP_EXCEPT, RERAISE)
            continue
        if inst.name not in _INVISIBLE:
            return True
        if isinstance(inst.arg, Label):
            todo.append(label_index[inst.arg])
        if inst.name not in _NO_FALLTHROUGH:
            todo.append(i + 1)
    return False

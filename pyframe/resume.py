"""Resume functions: the rest of a frame's code after a graph break, as a function of its own.

`resume_code(code, target, stack, live)` makes a code object from the original that takes the
values below the break point's stack and the live locals as positional arguments:

    <prologue>                     COPY_FREE_VARS / MAKE_CELL (not for cells passed in) / RESUME
    PUSH_NULL | LOAD_FAST ___stack_0 ...   rebuild the value stack (NULL slots re-created)
    JUMP_FORWARD <target>          into the original instructions, kept whole so every jump works
    <the original instructions>

It is named `__resume_at_<offset>_<n>` after the original offset it continues at, made once per
(code, target, stack shape, live locals), and compiled by the eval-frame hook on its first call
like any other function. This module builds bytecode only; it knows nothing of the translator.
"""
from __future__ import annotations

import dis
import inspect
import itertools
import types
import weakref
from dataclasses import dataclass

from bytecode import Bytecode, Instr, Label

from .exc import Unsupported

_counter = itertools.count()
_cache: "weakref.WeakKeyDictionary[types.CodeType, dict[tuple, types.CodeType]]" = weakref.WeakKeyDictionary()
# Every resume code made, and what it resumes (for pyframe.debug).
origins: "weakref.WeakKeyDictionary[types.CodeType, ResumeInfo]" = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class ResumeInfo:
    original: types.CodeType
    offset: int                  # bytecode offset in the original where it continues
    stack: tuple[bool, ...]      # for each stack slot it rebuilds: True for a NULL
    args: tuple[str, ...]        # its positional parameters, in order
    added: int                   # real instructions its prologue has beyond the original's
    traced: bool = True          # False: it continues inside a with block and runs as plain Python


def instruction_offsets(code: types.CodeType) -> list[int]:
    """The offset of each real instruction, in the order Bytecode.from_code lists them."""
    return [i.offset for i in dis.get_instructions(code) if i.opname != "EXTENDED_ARG"]


def offset_of(code: types.CodeType, instructions: list, index: int) -> int:
    """Original bytecode offset of the first real instruction at or after `instructions[index]`."""
    count = sum(1 for inst in instructions[:index] if isinstance(inst, Instr))
    offsets = instruction_offsets(code)
    return offsets[count] if count < len(offsets) else offsets[-1] + 2


def stack_arg_names(stack: tuple[bool, ...]) -> list[str]:
    return [f"___stack_{i}" for i, is_null in enumerate(stack) if not is_null]


def resume_code(code: types.CodeType, target: int, stack: tuple[bool, ...], live: tuple[str, ...],
                traced: bool = True) -> types.CodeType:
    """The resume function's code: continue `code` at `Bytecode.from_code(code)[target]`.

    `traced=False` makes one the hook never compiles: it starts at the very instruction a graph
    broke on inside a with block, so that this instruction, the rest of the block and the block's
    exit (normal or by an exception) run as the original code runs them."""
    key = (target, stack, live, traced)
    per_code = _cache.setdefault(code, {})
    if key in per_code:
        return per_code[key]
    original = Bytecode.from_code(code, conserve_exception_block_stackdepth=True)
    instructions = list(original)
    offset = offset_of(code, instructions, target)
    entry = instructions[target]
    if isinstance(entry, Label):
        label = entry
    else:
        label = Label()
        instructions.insert(target, label)

    passed_cells = {name for name in live if name in code.co_cellvars}
    body: list = []
    in_prologue = True
    for inst in instructions:
        if in_prologue and isinstance(inst, Instr):
            if inst.name == "MAKE_CELL" and inst.arg.name in passed_cells:
                continue  # the slot already holds the caller's cell
            body.append(inst)
            if inst.name == "RESUME":
                in_prologue = False
                for i, is_null in enumerate(stack):
                    body.append(Instr("PUSH_NULL") if is_null else Instr("LOAD_FAST", f"___stack_{i}"))
                body.append(Instr("JUMP_FORWARD", label))
            continue
        body.append(inst)

    args = [*stack_arg_names(stack), *live]
    bc = Bytecode(body)
    name = f"__resume_at_{offset}_{next(_counter)}"
    bc.name = bc.qualname = name
    bc.filename = code.co_filename
    bc.first_lineno = code.co_firstlineno
    bc.flags = code.co_flags & ~(inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)
    bc.argcount = len(args)
    bc.posonlyargcount = 0
    bc.kwonlyargcount = 0
    bc.argnames = args
    bc.cellvars = list(code.co_cellvars)
    bc.freevars = list(code.co_freevars)
    if traced:
        new_code = bc.to_code()
    else:
        # It enters a try range past its TryBegin, which the `bytecode` library's stack analysis
        # cannot follow. Every path from the target is a path of the original with the same stack
        # below it, so the original's depths (kept in each TryBegin) and stack size hold.
        new_code = bc.to_code(stacksize=code.co_stacksize + len(stack), compute_exception_stack_depths=False)
    per_code[key] = new_code
    added = len(stack) + 1 - len(passed_cells & _made_cells(code))
    origins[new_code] = ResumeInfo(code, offset, stack, tuple(args), added, traced)
    return new_code


def _made_cells(code: types.CodeType) -> set[str]:
    return {i.arg.name for i in Bytecode.from_code(code) if isinstance(i, Instr) and i.name == "MAKE_CELL"}


def first_real(instructions: list, index: int) -> int:
    """The first real instruction at or after `index`: a label and the instruction after it are
    the same place, and exception ranges go by offset, so a place has one resume function."""
    while index < len(instructions) and not isinstance(instructions[index], Instr):
        index += 1
    return index


def original_position(code: types.CodeType, instructions: list, index: int) -> tuple[types.CodeType, list, int]:
    """Where `instructions[index]` of `code` stands in the code a resume function was made from.

    A resume function's body is its original's instructions after a longer prologue, so a break in
    it (the next turn of a loop, say) resumes the *original* at the same place: one resume function
    serves every turn instead of a new one per turn. For other code: itself, unchanged.
    """
    info = origins.get(code)
    if info is None:
        return code, instructions, index
    real = sum(1 for inst in instructions[:index] if isinstance(inst, Instr)) - info.added
    original = list(Bytecode.from_code(info.original))
    resume_index = next(i for i, inst in enumerate(original) if isinstance(inst, Instr) and inst.name == "RESUME")
    if real <= sum(1 for inst in original[:resume_index] if isinstance(inst, Instr)):
        # in the resume function's own prologue (reading a stack value it cannot trace): there is
        # no place of the original to resume at
        raise Unsupported("graph break while a resume function restores its stack")
    seen = 0
    for j, inst in enumerate(original):
        if isinstance(inst, Instr):
            if seen == real:
                return info.original, original, j
            seen += 1
    return info.original, original, len(original)


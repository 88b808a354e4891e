"""Resume functions: the rest of a frame's code after a graph break, as a function of its own.

`resume_code(code, target, stack, live)` makes a code object from the original that takes the
live locals and the values below the break point's stack as positional arguments:

    <prologue>                     COPY_FREE_VARS / MAKE_CELL (not for cells passed in) / RESUME
    PUSH_NULL | LOAD_FAST ___stack0 ...   rebuild the value stack (NULL slots re-created, with
                                   blocks entered again: see Reentry)
    JUMP_FORWARD <target>          into the original instructions, kept whole so every jump works
    <the original instructions>

It is named `__resume_at_<offset>_<n>` after the original offset it continues at, made once per
(code, target, stack shape, live locals), and compiled by the eval-frame hook on its first call
like any other function. This module builds bytecode only; it knows nothing of the translator.
"""
from __future__ import annotations

import dis
import itertools
import types
import weakref
from dataclasses import dataclass
from typing import Any, Union

from bytecode import Bytecode, Instr, Label

from .codegen.pycodegen import code_header
from .exc import Unsupported

_counter = itertools.count()
_cache: "weakref.WeakKeyDictionary[types.CodeType, dict[tuple, types.CodeType]]" = weakref.WeakKeyDictionary()
# Every resume code made, and what it resumes (for pyframe.debug).
origins: "weakref.WeakKeyDictionary[types.CodeType, ResumeInfo]" = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class Reentry:
    """A stack slot holding the __exit__ of a with block the break point lies in. The resume
    function's prologue enters the block again, `with factory(*args):` as BEFORE_WITH does it, so
    the rest of the block runs inside the context and leaves it (normally, or through the block's
    exception handler) as the original code does."""

    factory: Any
    args: tuple

    def instructions(self) -> list[Instr]:
        return [Instr("PUSH_NULL"), Instr("LOAD_CONST", self.factory),
                *(Instr("LOAD_CONST", a) for a in self.args),
                Instr("PRECALL", len(self.args)), Instr("CALL", len(self.args)),
                Instr("BEFORE_WITH"), Instr("POP_TOP")]


# What a resume function puts in one slot of the value stack: True a NULL, False the value passed
# in its argument `___stack<i>`, a Reentry the __exit__ of a block it enters again.
Slot = Union[bool, Reentry]


@dataclass(frozen=True)
class ResumeInfo:
    """What a resume code continues. The original is held weakly: `_cache` keeps each resume code
    alive as long as its original lives, so a strong reference back would keep both forever."""

    original_ref: "weakref.ref[types.CodeType]"
    offset: int                  # bytecode offset in the original where it continues
    stack: tuple[Slot, ...]      # each stack slot it rebuilds
    args: tuple[str, ...]        # its positional parameters, in order
    added: int                   # real instructions its prologue has beyond the original's
    break_line: int | None = None  # the line of the graph break it continues after

    @property
    def original(self) -> types.CodeType:
        code = self.original_ref()
        if code is None:  # (a resume code outliving its original: run by a frame still going)
            raise Unsupported("the code this resume function continues is gone")
        return code


def instruction_offsets(code: types.CodeType) -> list[int]:
    """The offset of each real instruction, in the order Bytecode.from_code lists them."""
    return [i.offset for i in dis.get_instructions(code) if i.opname != "EXTENDED_ARG"]


def offset_of(code: types.CodeType, instructions: list, index: int) -> int:
    """Original bytecode offset of the first real instruction at or after `instructions[index]`."""
    count = sum(1 for inst in instructions[:index] if isinstance(inst, Instr))
    offsets = instruction_offsets(code)
    return offsets[count] if count < len(offsets) else offsets[-1] + 2


STACK_ARG_PREFIX = "___stack"  # torch._dynamo's names: ___stack0, ___stack1 (placeholders L_stack0_, ...)


def _slot_numbers(stack: tuple[Slot, ...]) -> list[int]:
    """Each slot's number in the names of the stack arguments: torch._dynamo numbers the slots that
    are not NULL, in order (its resume functions take a with block's context in its slot too, so
    a Reentry slot has a number, though pyframe passes nothing there)."""
    numbers, n = [], 0
    for slot in stack:
        numbers.append(n)
        n += slot is not True
    return numbers


def stack_arg_names(stack: tuple[Slot, ...]) -> list[str]:
    return [f"{STACK_ARG_PREFIX}{n}" for n, slot in zip(_slot_numbers(stack), stack) if slot is False]


def _slot_instructions(n: int, slot: Slot) -> list[Instr]:
    if slot is True:
        return [Instr("PUSH_NULL")]
    if slot is False:
        return [Instr("LOAD_FAST", f"{STACK_ARG_PREFIX}{n}")]
    return slot.instructions()


def resume_code(code: types.CodeType, target: int, stack: tuple[Slot, ...], live: tuple[str, ...],
                break_line: int | None = None) -> types.CodeType:
    """The resume function's code: continue `code` at `Bytecode.from_code(code)[target]`, after a
    graph break on line `break_line`."""
    key = (target, stack, live)
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
    added = 1 - len(passed_cells & _made_cells(code))  # its JUMP_FORWARD, less the MAKE_CELLs left out
    for inst in instructions:
        if in_prologue and isinstance(inst, Instr):
            if inst.name == "MAKE_CELL" and inst.arg.name in passed_cells:
                continue  # the slot already holds the caller's cell
            body.append(inst)
            if inst.name == "RESUME":
                in_prologue = False
                for n, slot in zip(_slot_numbers(stack), stack):
                    rebuild = _slot_instructions(n, slot)
                    body.extend(rebuild)
                    added += len(rebuild)
                body.append(Instr("JUMP_FORWARD", label))
            continue
        body.append(inst)

    args = [*live, *stack_arg_names(stack)]  # the first live local first: zero-argument super() reads it
    bc = code_header(Bytecode(body), code, name=f"__resume_at_{offset}_{next(_counter)}", argnames=args)
    reentries = [slot for slot in stack if isinstance(slot, Reentry)]
    if not reentries:
        new_code = bc.to_code()
    else:
        # It enters a try range past its TryBegin, which the `bytecode` library's stack analysis
        # cannot follow. Every path from the target is a path of the original with the same stack
        # below it, so the original's depths (kept in each TryBegin) and stack size hold; the
        # prologue needs at most a context's factory, its arguments and a NULL on top of its slots.
        prologue_depth = len(stack) + 2 + max(len(r.args) for r in reentries)
        new_code = bc.to_code(stacksize=max(code.co_stacksize, prologue_depth) + len(stack),
                              compute_exception_stack_depths=False)
    per_code[key] = new_code
    origins[new_code] = ResumeInfo(weakref.ref(code), offset, stack, tuple(args), added, break_line)
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


"""What a translator needs of its code object that depends on the code alone, made once per code
object and shared by every translator of it: the decoded instructions (decode.py), the index of
each label, the handler of each instruction by translator class, and a few facts of the code."""
from __future__ import annotations

import functools
import os
import types
from dataclasses import dataclass, field
from typing import Any

import torch
from bytecode import Bytecode, Instr, Label

from .analysis import innermost_handlers
from .decode import _NotModelled, fast_decode
from .variables.base import IdentityCache

_TORCH_DIR = os.path.dirname(torch.__file__)


@functools.cache
def _handler(cls: type, opname: str) -> Any:
    """The handler of an opcode (a method named like it), looked up once per translator class."""
    return getattr(cls, opname, None)


_NOT_AN_INSTRUCTION = object()  # a Label, TryBegin or TryEnd in the instruction list


def handler_table(cls: type, instructions: list[Any], tables: dict[type, list[Any]]) -> list[Any]:
    """The handler of each entry of a code object's decoded instructions (None: an opcode without
    one), made once per code object and translator class and kept in `tables` (decode's): the
    interpreter loop then indexes it instead of reading each instruction's name and looking its
    handler up at every step."""
    table = tables[cls] = [_handler(cls, inst.name) if isinstance(inst, Instr) else _NOT_AN_INSTRUCTION
                           for inst in instructions]
    return table


@dataclass(frozen=True)
class DecodedCode:
    """What a translator needs of its code object that depends on the code alone: made once per
    code object (decoded()), shared by every translator of it. Translators only read it."""

    instructions: list[Any]            # the `bytecode` library's instructions, labels and try markers
    label_index: dict[Label, int]      # the index of each label in `instructions`
    handler_tables: dict[type, list[Any]]  # by translator class: the handler of each entry (handler_table)
    trusted: bool                      # code of torch's own modules (globals read without guards)
    # Cell variables whose MAKE_CELL the prologue skips (a resume function receives those cells)
    passed_cells: frozenset[str]
    # The try range whose handler catches an exception raised at each position: made when a
    # translator of the code first catches one (library code raises and catches as control flow,
    # `getattr(obj, name, default)`, in functions inlined many times), then shared.
    innermost: list[Any] = field(default_factory=list, compare=False)

    def innermost_handlers(self) -> list[Any]:
        if not self.innermost:
            self.innermost.extend(innermost_handlers(self.instructions))
        return self.innermost


_decoded = IdentityCache()  # code object -> DecodedCode


def decode(code: types.CodeType) -> tuple[list[Any], dict[Label, int]]:
    """`code`'s instructions as the `bytecode` library reads them, and the index of each label.

    Decoded once per code object: a module's forward is inlined at every call site, and decoding
    costs more than tracing a short function. Translators only read the shared list. The list is
    built by `fast_decode` (a few times faster than the library); code it does not model is read
    by the library itself."""
    found = decoded(code)
    return found.instructions, found.label_index


def decoded(code: types.CodeType) -> DecodedCode:
    """What decode() gives, with the handler tables made of the instructions (handler_table), by
    translator class, and the other facts of the code alone: one cache entry per code object."""
    found = _decoded.get(code)
    if found is None:
        # (the try ranges keep their stack depths: an exception raised while tracing cuts the stack to them)
        try:
            instructions = fast_decode(code)  # the same list, built without the library's checks
        except _NotModelled:
            instructions = list(Bytecode.from_code(code, conserve_exception_block_stackdepth=True))
        labels = {inst: i for i, inst in enumerate(instructions) if isinstance(inst, Label)}
        made_cells = {i.arg.name for i in instructions[:first_body_index(instructions)]
                      if getattr(i, "name", "") == "MAKE_CELL"}
        found = _decoded[code] = DecodedCode(instructions, labels, {}, code.co_filename.startswith(_TORCH_DIR),
                                             frozenset(code.co_cellvars) - made_cells)
    return found


def first_body_index(instructions: list[Any]) -> int:
    """Index just past the prologue's RESUME (0 without one)."""
    for i, inst in enumerate(instructions):
        if getattr(inst, "name", None) == "RESUME":
            return i + 1
    return 0

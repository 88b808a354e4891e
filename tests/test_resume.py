"""The resume-function builder: code objects that continue the original at an offset."""
from __future__ import annotations

import dis

from bytecode import Bytecode, Instr

from pyframe.resume import offset_of, origins, resume_code


def original(a, b):
    x = a + 1
    y = x * b
    return y - a


def index_of(code, opname, nth=0):
    found = [i for i, inst in enumerate(Bytecode.from_code(code)) if isinstance(inst, Instr) and inst.name == opname]
    return found[nth]


def test_resume_code_takes_live_locals_and_stack_and_continues_there():
    code = original.__code__
    target = index_of(code, "STORE_FAST", 1)  # `y = ...` with x * b on the stack
    new = resume_code(code, target, (False,), ("a",))
    # live locals first (zero-argument super() reads the first one), then the stack
    assert new.co_argcount == 2 and new.co_varnames[:2] == ("a", "___stack0")
    offset = offset_of(code, list(Bytecode.from_code(code)), target)
    assert new.co_name == f"__resume_at_{offset}_{new.co_name.rsplit('_', 1)[1]}"
    assert list(dis.get_instructions(new))  # well-formed for dis
    fn = type(original)(new, globals())
    assert fn(5, 12) == (12 - 5)  # a = 5, y = 12, then y - a


def test_resume_code_recreates_null_slots():
    code = original.__code__
    target = index_of(code, "STORE_FAST", 1)
    new = resume_code(code, target, (True, False), ("a",))
    ops = [i.opname for i in dis.get_instructions(new)]
    assert ops[:3] == ["RESUME", "PUSH_NULL", "LOAD_FAST"]
    assert new.co_argcount == 2  # the NULL is not an argument


def test_resume_codes_are_cached_and_remember_their_origin():
    code = original.__code__
    target = index_of(code, "STORE_FAST", 1)
    first = resume_code(code, target, (False,), ("a",))
    assert resume_code(code, target, (False,), ("a",)) is first
    info = origins[first]
    assert info.original is code and info.args == ("a", "___stack0")

"""The stack size of transformed code: pycodegen.stack_size against the `bytecode` library's.

make_code gives the code object the stack size stack_size measures in one pass, instead of the
library's control-flow analysis; a size too small would let the interpreter write past the frame.
So every code the corpora's graph breaks, try ranges and rebuilt objects make is measured both
ways here, and stack_size must give the library's number (or None, leaving it to the library).
"""
from __future__ import annotations

import pytest
from bytecode import Bytecode, Instr, Label, TryBegin, TryEnd

from pyframe.codegen import pycodegen
from pyframe.codegen.pycodegen import stack_size
from pyframe.debug.cases import load_cases
from pyframe.debug.compare import CountingBackend, optimize_with, reset_engines

# Corpora rich in graph breaks (exits, resumed blocks), exceptions and rebuilt objects.
MODULES = ["tests.cases.graph_breaks", "tests.cases.autograd_function_breaks", "tests.cases.side_effects",
           "tests.cases.control_flow", "tests.cases.generator_objects", "tests.cases.scopes",
           "tests.cases.python_objects"]


def test_stack_size_is_the_librarys_on_every_code_the_corpus_makes(monkeypatch):
    measured = []

    def checked(bc):
        ours = stack_size(bc)
        measured.append((bc.name, ours, bc.compute_stacksize() if ours is not None else None))
        return ours

    monkeypatch.setattr(pycodegen, "stack_size", checked)
    for case in load_cases(MODULES):
        reset_engines()
        inputs = case.make_inputs()
        optimize_with("pyframe", case.make_fn(), CountingBackend())(*inputs.args, **inputs.kwargs)
    assert len(measured) > 100
    assert [m for m in measured if m[1] != m[2]] == []


def _code(*items):
    return Bytecode(list(items))


def test_straight_code_and_forward_jumps():
    done = Label()
    code = _code(Instr("LOAD_CONST", 1), Instr("LOAD_CONST", 2), Instr("POP_JUMP_FORWARD_IF_TRUE", done),
                 Instr("LOAD_CONST", 3), Instr("POP_TOP"), done, Instr("RETURN_VALUE"))
    assert stack_size(code) == 2 == code.compute_stacksize()


def test_a_handler_starts_at_its_try_ranges_depth():
    handler, end = Label(), Label()
    start = TryBegin(handler, push_lasti=True, stack_depth=1)
    code = _code(Instr("LOAD_CONST", 0), start, Instr("LOAD_CONST", 1), Instr("POP_TOP"), TryEnd(start),
                 Instr("JUMP_FORWARD", end), handler, Instr("POP_TOP"), Instr("POP_TOP"), end, Instr("RETURN_VALUE"))
    assert stack_size(code) == 3  # the depth, lasti, the exception


@pytest.mark.parametrize("case", ["backward jump", "range without a depth", "label at two depths"])
def test_what_it_does_not_measure_is_left_to_the_library(case):
    top = Label()
    if case == "backward jump":
        code = _code(top, Instr("LOAD_CONST", 1), Instr("POP_TOP"), Instr("JUMP_BACKWARD", top))
    elif case == "range without a depth":
        start = TryBegin(top, push_lasti=False)
        code = _code(start, Instr("LOAD_CONST", 1), TryEnd(start), Instr("RETURN_VALUE"), top, Instr("RETURN_VALUE"))
    else:
        code = _code(Instr("LOAD_CONST", 1), Instr("POP_JUMP_FORWARD_IF_TRUE", top), Instr("LOAD_CONST", 2), top,
                     Instr("RETURN_VALUE"))
    assert stack_size(code) is None

"""The instructions around a graph break that do not depend on the trace.

At a break inside `with torch.no_grad():` (or another grad-mode or autocast block) the graph runs
outside the block, so the transformed code enters the blocks again around the breaking instruction
(`enter_blocks`), leaves them after it on each way out (`leave_blocks`), and runs every block's
`__exit__` on the way out of an exception (`emit_block_handler`), as CPython's own `with` does.
Then each exit returns the result of a resume function (`emit_resume_call`). The translator
(translator/finish.py) decides what goes in: which blocks, which values, which resume function.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from bytecode import BinaryOp, Label, TryBegin, TryEnd

from ..resume import Reentry
from .pycodegen import PyCodegen


def enter_blocks(cg: PyCodegen, reentries: Sequence[Reentry]) -> TryBegin:
    """`with <block 1>: with <block 2>: ...` around the breaking instruction, as resume functions
    enter them (their __exit__ methods stay on the stack, outermost lowest). Returns the protected
    range's start: an exception in it runs every exit on its way out (emit_block_handler)."""
    for reentry in reentries:
        cg.instructions.extend(reentry.instructions())
    start = TryBegin(Label(), push_lasti=True, stack_depth=len(reentries))
    cg.instructions.append(start)
    return start


def leave_blocks(cg: PyCodegen, n: int, results: int) -> None:
    """The blocks' normal exit after the instruction: the `results` it left on top are packed into
    one tuple, which each `__exit__(None, None, None)` call (innermost first) is swapped under."""
    cg.emit("BUILD_TUPLE", results)
    for _ in range(n):
        cg.emit("SWAP", 2)
        for _ in range(3):
            cg.load_const(None)
        cg.call(2)  # [__exit__, None, None, None]: CALL takes __exit__ as a method bound to None
        cg.emit("POP_TOP")


def emit_block_handler(cg: PyCodegen, start: TryBegin, n: int) -> None:
    """An exception in the protected range leaves the blocks, innermost first, and propagates:
    the exceptional path of a `with` whose __exit__ never suppresses (grad mode and autocast)."""
    cleanup = Label()
    cg.instructions.append(start.target)                     # [exits..., lasti, exc]
    cleanup_range = TryBegin(cleanup, push_lasti=True, stack_depth=n + 2)
    cg.instructions.append(cleanup_range)
    cg.emit("PUSH_EXC_INFO")                                 # [exits..., lasti, previous exc, exc]
    for depth in range(4, 4 + n):                            # the innermost __exit__ is 4th from the top
        cg.emit("COPY", depth)
        for _ in range(3):
            cg.load_const(None)
        cg.call(2)
        cg.emit("POP_TOP")
    cg.emit("RERAISE", 2)                                    # at the instruction that raised (lasti)
    cg.instructions.append(TryEnd(cleanup_range))
    cg.instructions.append(cleanup)                          # [..., previous exc, lasti, exc]
    cg.emit("COPY", 3)
    cg.emit("POP_EXCEPT")
    cg.emit("RERAISE", 1)


def emit_resume_call(cg: PyCodegen, load_function: Callable[[], None], load_live: Callable[[str], None],
                     live: Sequence[str], lower: Sequence[Any], results: int, packed: bool = False) -> None:
    """`return resume(*live, *lower, *results)` with the `results` already on the stack (`packed`:
    as one tuple). `load_function` pushes the resume function, `load_live(name)` a live local;
    `lower` are the values below the instruction's operands, each rebuilt by its `reconstruct`."""
    if packed and not results:
        cg.emit("POP_TOP")
    if results:
        if not packed:
            cg.emit("BUILD_TUPLE", results)
        cg.push_null()
        cg.emit("SWAP", 2)
        load_function()
        cg.emit("SWAP", 2)                 # NULL, resume, results
        for name in live:
            load_live(name)
        cg.emit("BUILD_TUPLE", len(live))
        cg.emit("SWAP", 2)                 # NULL, resume, live, results
        for value in lower:
            value.reconstruct(cg)
        cg.emit("BUILD_TUPLE", len(lower))
        cg.emit("SWAP", 2)                 # NULL, resume, live, lower, results
        cg.emit("BINARY_OP", BinaryOp.ADD)
        cg.emit("BINARY_OP", BinaryOp.ADD)
        cg.emit("CALL_FUNCTION_EX", 0)
    else:
        cg.push_null()
        load_function()
        for name in live:
            load_live(name)
        for value in lower:
            value.reconstruct(cg)
        cg.call(len(lower) + len(live))
    cg.emit("RETURN_VALUE")

"""The translator's entry point: `translate_frame`, what convert_frame.py calls on a cache miss.

It traces the frame (instructions.py); on the first graph break it traces it again, stopping
before the instruction that broke, and hands the trace to finish.py, which compiles the graph and
emits the transformed code. What it needs from the layers above comes in `TranslatorHooks`.
"""
from __future__ import annotations

import types
from typing import Any

from ..exc import Unsupported
from .analysis import may_loop_back, may_read_own_scope
from .finish import TranslationResult, finish_break, finish_return
from .hooks import TranslatorHooks
from .instructions import InstructionTranslator
from .variables.base import remembering_class_reads


def translate_frame(code: types.CodeType, f_locals: dict[str, Any], f_globals: dict, f_builtins: dict,
                    closure: tuple | None, hooks: TranslatorHooks, fullgraph: bool = False,
                    skip_without_ops: bool = True) -> TranslationResult:
    """Trace a frame; on the first Unsupported, trace it again up to that instruction and break there.
    A frame traced to its return without a single call runs as Python (`skip_without_ops`, not
    with `fullgraph`).

    Tracing again (rather than cutting the first attempt short) leaves no half-traced call in the
    graph and no half-mutated symbolic container: the second trace stops cleanly before the step.
    """
    with remembering_class_reads(hooks.class_version):
        return _translate(code, f_locals, f_globals, f_builtins, closure, hooks, fullgraph,
                          skip_without_ops and not fullgraph)


def _translate(code: types.CodeType, f_locals: dict[str, Any], f_globals: dict, f_builtins: dict,
               closure: tuple | None, hooks: TranslatorHooks, fullgraph: bool,
               skip_without_ops: bool) -> TranslationResult:
    break_at: int | None = None
    reason: Unsupported | None = None
    deferred_methods: dict[int, str] = {}  # LOAD_METHODs whose lookup failed: left to their call
    pure_calls: set[int] = set()  # functions allowed in the graph, checked free of side effects
    while True:
        tx = InstructionTranslator(code, f_globals, f_builtins, closure, hooks.make_output(),
                                   frame_values=dict(f_locals), break_at=break_at,
                                   deferred_methods=deferred_methods, pure_calls=pure_calls, hooks=hooks)
        try:
            value = tx.run()
            if value is None:
                if tx.output.vmap_levels or tx.output.torch_function_modes:
                    raise _inside_break(reason)
                return finish_break(tx, break_at, reason, hooks.wrap_compiled)
            if tx.output.op_count == 0 and skip_without_ops:
                raise _no_ops()
            return finish_return(tx, value, hooks.wrap_compiled)
        except Unsupported as e:
            if e.proven_pure is not None and e.proven_pure not in pure_calls:
                pure_calls.add(e.proven_pure)  # the probe's inlined ops are dropped with this trace
                continue
            earlier = e.moves_break_earlier and break_at is not None and e.break_index is not None \
                and e.break_index < break_at
            if fullgraph or (break_at is not None and not earlier) or e.break_index is None:
                raise
            if e.deferred_method_at is not None and e.deferred_method_at not in deferred_methods:
                deferred_methods[e.deferred_method_at] = e.reason  # the call will break instead
                continue
            # Kept for the record (explain, the logs): without its traceback, whose frames hold
            # this trace (its OutputGraph, FakeTensors, the graph) in a cycle with the exception.
            if may_loop_back(tx.instructions, e.break_index):
                raise _loop_break(e) from None
            if may_read_own_scope(tx.instructions, e.break_index):
                raise _scope_break(e) from None
            break_at, reason = e.break_index, e.without_tracebacks()
        finally:
            tx.output.pop_vmap_levels()
            tx.release()


def _loop_break(e: Unsupported) -> Unsupported:
    """A break inside a loop runs the whole frame as Python, as torch._dynamo does ('graph break in
    loop'): resuming there would make one resume function per turn, each with its own graph. The
    frames the loop calls are still compiled."""
    loop = Unsupported(f"graph break in a loop, so the frame runs as Python ({e.reason})", e.location)
    loop.whole_frame = loop.by_rule = True
    return loop


def _no_ops() -> Unsupported:
    """A frame traced to its return without recording a single call runs as Python, from now on,
    as torch._dynamo skips it ("No ops traced for the FX graph", SkipFrame): there is nothing to
    compile, and a later call that would record ops (another branch taken) is not compiled either.
    (convert_frame.py leaves out the functions given to optimize(), which pyframe compiles anyway:
    tests/test_frame_rules.py.)"""
    skip = Unsupported("no ops traced for the graph, so the frame runs as Python")
    skip.whole_frame = skip.by_rule = True
    return skip


def _inside_break(e: Unsupported | None) -> Unsupported:
    """A break between a frame's own vmap level push and pop (`_vmap_increment_nesting` called by
    the frame itself, not by a function it calls), or inside a torch function mode the frame
    entered, runs the frame as Python: the graph before the break would leave the level pushed, and
    the code after it would run without the mode. (A break in a function the frame calls is taken
    at that call, before any level or mode.)"""
    whole = Unsupported(f"graph break inside a vmap level or a torch function mode, so the frame runs as Python"
                        f"{f' ({e.reason})' if e is not None else ''}", e.location if e is not None else None)
    whole.whole_frame = True
    return whole


def _scope_break(e: Unsupported) -> Unsupported:
    """A break before a call of locals(), vars(), dir() or eval() runs the whole frame as Python: in a
    resume function that call would read the resume function's variables, not the frame's."""
    whole = Unsupported(f"graph break before a call that reads the frame's variables, so the frame "
                        f"runs as Python ({e.reason})", e.location)
    whole.whole_frame = True
    return whole

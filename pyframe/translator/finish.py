"""Finishing a trace: compile the graph and emit the transformed code that runs it.

A frame traced to its RETURN_VALUE becomes

    <prologue>                                  MAKE_CELL / COPY_FREE_VARS / RESUME
    ___out_0, ... = __compiled_fn_N(*___guard_exports)  the inputs, as the guards fetched them
    <side effects replayed>                     lists, dicts, attributes of objects the frame read
    return <the return value rebuilt>           from graph outputs, constants and sources

A frame that breaks at instruction i becomes

    <prologue>
    ___out_0, ... = __compiled_fn_N(inputs...)  the graph of everything before i
    <side effects replayed>
    <live locals stored back>                   so the real instruction sees the frame's state
    <operands of i rebuilt>; <i itself>         the unsupported step, run by Python
    return __resume_at_<offset>(<live locals>, <rest of the stack>, <results of i>)
                                                (one such call per way out of i)

The values rebuilt are found by live_values.py; the instructions that do not depend on the trace
(re-entering `with` blocks, resume calls) are codegen/graph_break.py's; translate.py calls these.
"""
from __future__ import annotations

import inspect
import types
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.fx
from bytecode import CellVar, FreeVar, Instr, Label, TryEnd

from ..backends import CompiledGraph
from ..codegen.graph_break import emit_block_handler, emit_resume_call, enter_blocks, leave_blocks
from ..codegen.pycodegen import PyCodegen, make_code
from ..exc import Unsupported
from ..guard_tree import fetched_sources
from ..guards import GuardKind
from ..rerun import RestoresRngOnError, Rerun, can_run_again, draws_random_numbers
from ..resume import Slot, first_real, original_position, resume_code
from ..source import GlobalsDictSource, Source
from .analysis import enclosing_entries, enclosing_handlers, live_locals
from .instructions import InstructionTranslator
from .live_values import (
    changed_cells, check_escaping_iterators, check_rebuildable_methods, drop_stores_to_dead_tensors, escaping_cells,
    graph_outputs, use_constants_as_dynamo,
    pin_before_instruction, pin_changed_sources, realize_lazy_iterators,
)
from .variables import NullVariable, VariableTracker
from .variables.iterators import ListIteratorVariable
from .variables.contexts import AutocastExitVariable, GradModeExitVariable, NullContextExitVariable


@dataclass
class TranslationResult:
    code: types.CodeType
    graphs: list[CompiledGraph] = field(default_factory=list)
    break_reason: Unsupported | None = None
    resume_codes: list[types.CodeType] = field(default_factory=list)
    exports: list[Source] = field(default_factory=list)  # what the guards hand to `code`, in order (PyCodegen.exports)
    grouped_inputs: int = 0  # how many exports the graph takes, in a tuple of their own (PyCodegen.grouped_inputs)


def emit_graph_call(tx: InstructionTranslator, cg: PyCodegen, live: list[VariableTracker],
                    wrap_compiled: Callable[[Any], Any],
                    cells: dict[str, VariableTracker], handed_on: list[VariableTracker] | None = None,
                    ) -> list[CompiledGraph]:
    """Compile the graph (if it does anything) and emit its call; `live` are the values needed after
    it, of which `handed_on` are those the frame returns or passes to its resume functions, and
    `cells` the values its cells are given back."""
    output = tx.output
    outputs = graph_outputs(tx, live, cells, handed_on)
    if output.requires_grad_taints:
        check_requires_grad_leaks(output, outputs)
    compiled = output.compile(outputs)
    if compiled is None:
        return []
    sources = [inp.source for inp in output.inputs.values()]
    fn = wrap_compiled(compiled.checked_fn())
    # A graph that raises runs its frame again as Python (rerun.py), when that repeats nothing.
    rerun = None
    if can_run_again(compiled.gm):
        rerun = Rerun(weakref.ref(tx.code), compiled.name, compiled.backend_name)
        if draws_random_numbers(compiled.gm):
            fn = RestoresRngOnError(fn)
    cg.call_graph(fn, sources, outputs, rerun=rerun)
    return [compiled]


def check_requires_grad_leaks(output: Any, outputs: list[torch.fx.Node]) -> None:
    """Unsupported, with the break at the first `requires_grad_()` the graph recorded on a tensor
    it made, if that tensor or one made from it that requires grad is an output: compiling the
    graph (functionalization) drops the flag from outputs, as torch._dynamo 2.13 finds
    (OutputGraph._check_requires_grad_intermediate_outputs), so it breaks there too."""
    tainted = {node for node, _ in output.requires_grad_taints}
    for node in output.graph.nodes:
        if node not in tainted and any(arg in tainted for arg in node.all_input_nodes):
            tainted.add(node)
    for node in outputs:
        example = node.meta.get("example_value") if isinstance(node, torch.fx.Node) else None
        if node in tainted and isinstance(example, torch.Tensor) and example.requires_grad:
            e = Unsupported("a tensor the graph made that requires_grad_() made require grad (or one made "
                            "from it) is an output of the graph")
            e.break_index = output.requires_grad_taints[0][1]
            e.moves_break_earlier = True  # (a trace that breaks later already: it breaks here instead)
            raise e


def check_paused_generators(tx: InstructionTranslator) -> None:
    """Unsupported (the whole frame runs as Python) if a generator the trace made is left paused
    inside a try block: CPython closes a generator when the last reference to it goes (a `break`
    out of `for v in gen()`), which runs its `finally` / `except GeneratorExit` / `__exit__` then,
    at a moment the trace cannot know; the compiled code would never run it."""
    for generator in tx.generators:
        if not generator.finished and generator.translator.paused_in_a_try():
            e = Unsupported(f"{generator.describe()} is left paused inside a try block (closing it "
                            f"would run its handler when it is dropped)")
            e.whole_frame = True
            raise e


def finish_return(tx: InstructionTranslator, value: VariableTracker,
                  wrap_compiled: Callable[[Any], Any]) -> TranslationResult:
    """The transformed code of a frame traced all the way to its return."""
    check_paused_generators(tx)
    cg = PyCodegen(tx.code)
    cg.exportable = fetched_sources(tx.output.guards)
    cells = escaping_cells(tx, [value, *tx.side_effects.live_values()])
    drop_stores_to_dead_tensors(tx, [value, *cells.values()])
    live = [value, *cells.values(), *tx.side_effects.live_values()]
    check_escaping_iterators(live)
    check_rebuildable_methods(live)
    use_constants_as_dynamo(tx, [value, *cells.values()], [])
    realize_lazy_iterators(tx, live)
    graphs = emit_graph_call(tx, cg, live, wrap_compiled, cells, handed_on=[value])
    pin_changed_sources(tx, cg, [value, *cells.values()])
    tx.side_effects.codegen(cg)
    store_locals(cg, cells)  # closures made here may outlive the frame
    value.reconstruct(cg)
    cg.emit("RETURN_VALUE")
    cg.emit_rerun_handler(tx.passed_cells)
    return TranslationResult(make_code(tx.code, tx.prologue(), cg.body()), graphs, exports=cg.exports(),
                             grouped_inputs=cg.grouped_inputs())


def store_locals(cg: PyCodegen, values: dict[str, VariableTracker]) -> None:
    """Store traced values into their slots: all are rebuilt first, since one may be read from a
    slot another overwrites (`y, m = x, n; x, n = x + 1, n + 1`: y is still the frame's old x)."""
    for value in values.values():
        value.reconstruct(cg)
    for name in reversed(values):
        cg.store_local(name)


# -- graph breaks --------------------------------------------------------------------------------

_CONDITIONAL = {"POP_JUMP_FORWARD_IF_TRUE", "POP_JUMP_FORWARD_IF_FALSE", "POP_JUMP_FORWARD_IF_NONE",
                "POP_JUMP_FORWARD_IF_NOT_NONE", "POP_JUMP_BACKWARD_IF_TRUE", "POP_JUMP_BACKWARD_IF_FALSE",
                "POP_JUMP_BACKWARD_IF_NONE", "POP_JUMP_BACKWARD_IF_NOT_NONE"}


_OR_POP = {"JUMP_IF_TRUE_OR_POP", "JUMP_IF_FALSE_OR_POP"}


# Opcodes that add to a container `arg` items below what they pop (a mapping pattern's `**rest`
# is DICT_UPDATE 2), by how many they pop. The `bytecode` library reports a fixed depth for some
# of them: the break takes the container and everything above it as operands.
_ADD_TO_CONTAINER = {"LIST_APPEND": 1, "SET_ADD": 1, "LIST_EXTEND": 1, "SET_UPDATE": 1, "DICT_UPDATE": 1,
                     "DICT_MERGE": 1, "MAP_ADD": 2}


# Opcodes a break cannot be placed at: their results may be NULL, or they transfer control.
_UNBREAKABLE = {"LOAD_METHOD", "FOR_ITER", "SEND", "YIELD_VALUE", "RETURN_VALUE", "RERAISE", "RAISE_VARARGS",
                "PUSH_EXC_INFO", "POP_EXCEPT", "CHECK_EXC_MATCH", "JUMP_FORWARD", "JUMP_BACKWARD",
                "JUMP_BACKWARD_NO_INTERRUPT", "RETURN_GENERATOR", "PRECALL", "KW_NAMES", "PUSH_NULL",
                # entering a with block: what follows is inside the block (and `bytecode` reports
                # BEFORE_WITH as a pure push, while it replaces the manager by __exit__ and a value)
                "BEFORE_WITH", "BEFORE_ASYNC_WITH", "WITH_EXCEPT_START"}


def break_shape(tx: InstructionTranslator, index: int) -> tuple[int, list[tuple[int, int]]]:
    """(stack items instruction `index` consumes, [(resume target index, items it leaves), ...])."""
    inst = tx.instructions[index]
    name = inst.name
    if name == "CALL":
        return inst.arg + 2, [(index + 1, 1)]
    if name == "CALL_FUNCTION_EX":
        return 3 + (inst.arg & 1), [(index + 1, 1)]
    if name in _CONDITIONAL:
        return 1, [(index + 1, 0), (tx.label_index[inst.arg], 0)]
    if name in _OR_POP:
        return 1, [(index + 1, 0), (tx.label_index[inst.arg], 1)]
    if name in _UNBREAKABLE or isinstance(inst.arg, Label):
        raise Unsupported(f"cannot resume after a graph break at {name}")
    if name in _ADD_TO_CONTAINER:
        return inst.arg + _ADD_TO_CONTAINER[name], [(index + 1, inst.arg)]
    pre, post = inst.pre_and_post_stack_effect()  # `bytecode` reports a pure push as (+1, 0)
    if pre + post != inst.stack_effect(jump=False):
        raise Unsupported(f"cannot resume after a graph break at {name} (its stack effect is not known)")
    consumed = max(0, -pre)
    return consumed, [(index + 1, pre + post + consumed)]


@dataclass
class BreakPlan:
    """What a graph break at one instruction must do, decided before any code is emitted."""

    inst: Instr
    lower: list[VariableTracker]                   # the stack below the instruction's operands
    operands: list[VariableTracker]                # what the instruction consumes
    blocks: list[VariableTracker]                  # grad-mode / autocast exits in `lower`, outermost first
    exits: list[tuple[int, int]]                   # (resume target index, items the instruction leaves)
    targets: list[tuple[types.CodeType, list, int]]  # each exit as a place in the original code
    lives: list[tuple[str, ...]]                   # the live locals at each exit, in frame order
    live_values: list[VariableTracker]             # the traced values of those locals


def finish_break(tx: InstructionTranslator, index: int, reason: Unsupported,
                 wrap_compiled: Callable[[Any], Any]) -> TranslationResult:
    """The transformed code of a frame that breaks at `tx.instructions[index]`: the state before the
    instruction, the instruction itself (inside the `with` blocks it sat in), and one resume call
    per way out of it."""
    check_paused_generators(tx)
    plan = plan_break(tx, index, reason)
    for block in reversed(plan.blocks):  # the graph leaves them, as the blocks' exits would
        block.call(tx, [], {})
    cg = PyCodegen(tx.code)
    cg.exportable = fetched_sources(tx.output.guards)
    cg.lineno = plan.inst.lineno or tx.code.co_firstlineno
    graphs = _emit_state_before(tx, cg, plan, wrap_compiled)
    # Inside a with block on grad mode, autocast or a nullcontext, the instruction runs in the blocks entered
    # again, and the resume functions enter them once more (resume.Reentry).
    handler = enter_blocks(cg, [block.reentry() for block in plan.blocks]) if plan.blocks else None
    exit_labels = _emit_instruction(tx, cg, plan)
    if handler is not None:
        cg.instructions.append(TryEnd(handler))
    resumes = _emit_exits(tx, cg, plan, exit_labels)
    if handler is not None:
        emit_block_handler(cg, handler, len(plan.blocks))
    cg.emit_rerun_handler(tx.passed_cells)
    return TranslationResult(make_code(tx.code, tx.prologue(), cg.body()), graphs, reason, resumes, cg.exports(),
                             cg.grouped_inputs())


def plan_break(tx: InstructionTranslator, index: int, reason: Unsupported) -> BreakPlan:
    """Where the break's values go, or Unsupported where the frame cannot resume after it."""
    inst: Instr = tx.instructions[index]
    consumed, exits = break_shape(tx, index)
    _check_resumable(tx, index, exits, reason)
    if consumed > len(tx.stack):
        raise Unsupported(f"graph break at {inst.name} with a stack the translator does not model")
    split = len(tx.stack) - consumed
    lower, operands = tx.stack[:split], tx.stack[split:]
    blocks = [v for v in lower if isinstance(v, _BLOCK_EXITS)]  # outermost first
    # Resume the original code (not a resume function of it): each place gets one resume function.
    targets = [original_position(tx.code, tx.instructions, first_real(tx.instructions, target))
               for target, _ in exits]
    lives = [_live_at(tx, original, instrs, target) for original, instrs, target in targets]
    # Plain locals are passed to the resume function rebuilt from their traced values (their slots
    # keep the entry values every Source reads). Cells are synced first: closures see them.
    live_values = [tx.locals[n] for n in _symbolic_locals_order(tx, set().union(*lives))]
    check_rebuildable_methods([*lower, *operands, *live_values, *tx.side_effects.live_values()], at_break=True)
    return BreakPlan(inst, lower, operands, blocks, exits, targets, lives, live_values)


def _check_resumable(tx: InstructionTranslator, index: int, exits: list[tuple[int, int]], reason: Unsupported) -> None:
    """Inside a with block on grad mode, autocast or a nullcontext the graph leaves the block and the code after
    the break enters it again; other blocks (try, a user's context manager) send the frame to Python."""
    handlers = enclosing_handlers(tx.instructions)
    in_block = bool(handlers[index] or any(handlers[first_real(tx.instructions, target)] for target, _ in exits))
    if in_block and not _inside_traced_blocks_only(tx, index):
        raise Unsupported(f"graph break inside a try or with block ({reason.reason})")


def _live_at(tx: InstructionTranslator, original: types.CodeType, instrs: list, target: int) -> tuple[str, ...]:
    """The locals the code after the break reads, in frame order."""
    bound = {n for n in tx.code.co_varnames + tx.code.co_cellvars if n in tx.locals or n in tx.frame_values}
    # Closures read cells without a LOAD_DEREF in this code: every cell counts as live, an empty
    # one too (a closure made before the break sees what the code after it assigns).
    cells = set(tx.code.co_cellvars)
    # A zero-argument super() reads the frame's first local: `self` goes first, used or not.
    return _in_frame_order(original, (live_locals(instrs, target) & bound) | cells | _implicit(original, bound))


def _emit_state_before(tx: InstructionTranslator, cg: PyCodegen, plan: BreakPlan,
                       wrap_compiled: Callable[[Any], Any]) -> list[CompiledGraph]:
    """The graph of everything before the break, the side effects replayed, the changed cells
    stored back, and the sources the instruction could change read first."""
    drop_stores_to_dead_tensors(tx, [*plan.lower, *plan.operands, *plan.live_values, *changed_cells(tx).values()])
    effects = tx.side_effects.live_values()
    live = [*plan.lower, *plan.operands, *plan.live_values, *effects]
    # (a local is seen by the code after the break, and so is what the instruction is given: a
    # generator's `send` it calls, a map it is passed; an iterator alone in the stack below is a
    # loop's own hidden one, which only FOR_ITER sees, but one held by a value there is not)
    held_below = [child for vt in plan.lower for child in
                  (vt.rebuilt_from() if isinstance(vt, ListIteratorVariable) else [vt])]
    check_escaping_iterators([*plan.live_values, *effects, *plan.operands, *held_below])
    realize_lazy_iterators(tx, live)
    # (a local still holding what the frame's slot holds is read from the slot, never handed on)
    changed = [v for n, v in zip(_symbolic_locals_order(tx, set().union(*plan.lives)), plan.live_values)
               if n not in tx.code.co_cellvars and n not in tx.unchanged_locals]
    use_constants_as_dynamo(tx, plan.operands, [*plan.lower, *changed])
    graphs = emit_graph_call(tx, cg, live, wrap_compiled, changed_cells(tx),
                             handed_on=[*plan.lower, *plan.operands, *changed])
    pin_changed_sources(tx, cg, [*plan.lower, *plan.operands, *plan.live_values, *changed_cells(tx).values()])
    tx.side_effects.codegen(cg)  # before the unsupported step: it may read what the trace mutated
    store_locals(cg, changed_cells(tx))
    pin_before_instruction(tx, cg, [*plan.lower, *plan.live_values])
    return graphs


def _emit_instruction(tx: InstructionTranslator, cg: PyCodegen, plan: BreakPlan) -> list[Label]:
    """The breaking instruction, run by Python on its operands rebuilt; one label per way out."""
    inst = plan.inst
    for value in plan.operands:
        value.reconstruct(cg)
    exit_labels = [Label() for _ in plan.exits]
    if inst.name == "CALL":
        if tx.kw_names:
            cg.emit("KW_NAMES", tx.kw_names)
        cg.call(inst.arg)
    elif isinstance(inst.arg, Label):  # a conditional jump: its target becomes our second exit,
        # which lies ahead of it here whatever its direction in the original code.
        name = inst.name.replace("_BACKWARD_", "_FORWARD_")
        cg.instructions.append(Instr(name, exit_labels[1], lineno=cg.lineno))
    else:
        cg.instructions.append(Instr(inst.name, inst.arg, lineno=cg.lineno))
    return exit_labels


def _emit_exits(tx: InstructionTranslator, cg: PyCodegen, plan: BreakPlan,
                exit_labels: list[Label]) -> list[types.CodeType]:
    """At each way out: leave the blocks, then return the result of the resume function there."""
    resumes = []
    built_before_branch = dict(cg.rebuilt)
    for (_, results), (original, _, target), live, label in zip(plan.exits, plan.targets, plan.lives, exit_labels):
        cg.instructions.append(label)
        cg.rebuilt = dict(built_before_branch)  # each exit is its own path at run time
        if plan.blocks:
            leave_blocks(cg, len(plan.blocks), results)
        stack_shape = tuple(_slot(v) for v in plan.lower) + (False,) * results
        code = resume_code(original, target, stack_shape, live, cg.lineno)
        resumes.append(code)
        passed = [v for v in plan.lower if _slot(v) is False]
        emit_resume_call(cg, lambda code=code: _load_function(tx, cg, code), lambda name: _load_live(tx, cg, name),
                         live, passed, results, packed=bool(plan.blocks))
    return resumes


_BLOCK_EXITS = (GradModeExitVariable, AutocastExitVariable, NullContextExitVariable)


def _slot(value: VariableTracker) -> Slot:
    """What a resume function puts in the stack slot of `value` (resume.Slot)."""
    if isinstance(value, _BLOCK_EXITS):
        return value.reentry()
    return isinstance(value, NullVariable)


def _symbolic_locals_order(tx: InstructionTranslator, names: set[str]) -> list[str]:
    """The traced locals among `names` in the order torch._dynamo keeps its symbolic locals (the
    order the graph's outputs follow): the arguments first, as the frame lists them, then the
    other locals in the order they were first assigned."""
    code = tx.code
    nargs = code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & inspect.CO_VARARGS) \
        + bool(code.co_flags & inspect.CO_VARKEYWORDS)
    args = code.co_varnames[:nargs]
    return [n for n in (*args, *(n for n in tx.locals if n not in args)) if n in names and n in tx.locals]


def _implicit(code: types.CodeType, bound: set[str]) -> set[str]:
    """Locals the code reads without naming them: zero-argument super() reads the first argument."""
    if "__class__" in code.co_freevars and code.co_argcount > 0:
        return {code.co_varnames[0]} & bound
    return set()


def _in_frame_order(code: types.CodeType, names: set[str]) -> tuple[str, ...]:
    """Locals in the order of the frame's slots (its first argument first, as super() needs)."""
    slots = {name: i for i, name in enumerate(code.co_varnames + code.co_cellvars)}
    return tuple(sorted(names, key=lambda n: (slots.get(n, len(slots)), n)))


def _inside_traced_blocks_only(tx: InstructionTranslator, index: int) -> bool:
    """Every try range an exception raised at instruction `index` would go through is the body of
    a `with` on a grad-mode, nullcontext or autocast context (its handler keeps the stack up to
    the block's __exit__, which the trace knows and the transformed code can rebuild), or the
    cleanup of one. 3.11's exception table gives each instruction only its innermost range: a
    `try` around the block is found through the with block's handler, which its range covers
    (torch._dynamo's block stack sees it, and runs such a frame as Python)."""
    entries = enclosing_entries(tx.instructions)
    reached, seen = [(entry, True) for entry in entries[index]], set()
    while reached:
        entry, direct = reached.pop()
        if id(entry) in seen:
            continue
        seen.add(id(entry))
        handler = first_real(tx.instructions, tx.label_index[entry.target])
        kind = _handler_kind(tx.instructions, handler)
        if kind == "with":
            if not (0 < entry.stack_depth <= len(tx.stack) and isinstance(tx.stack[entry.stack_depth - 1], _BLOCK_EXITS)):
                return False
        elif kind != "cleanup" or direct:  # (a cleanup range covering the break: inside an except block)
            return False
        reached.extend((e, False) for e in entries[handler])
    return bool(seen)


def _handler_kind(instructions: list, index: int) -> str:
    """"with" for a with block's handler (PUSH_EXC_INFO; WITH_EXCEPT_START), "cleanup" for the
    handler that only re-raises out of another (COPY 3; POP_EXCEPT; RERAISE 1), "try" for a
    try statement's except or finally."""
    names = [inst.name for inst in instructions[index:index + 6] if isinstance(inst, Instr)][:3]
    if names[:2] == ["PUSH_EXC_INFO", "WITH_EXCEPT_START"]:
        return "with"
    if names == ["COPY", "POP_EXCEPT", "RERAISE"]:
        return "cleanup"
    return "try"


def _load_live(tx: InstructionTranslator, cg: PyCodegen, name: str) -> None:
    if name in tx.code.co_cellvars:  # pass the cell itself: closures made before the break share it
        cg.emit("LOAD_CLOSURE", CellVar(name))
    elif name in tx.locals:
        tx.locals[name].reconstruct(cg)
    else:  # an argument the trace never read: still in its slot
        cg.emit("LOAD_FAST", name)


def _load_function(tx: InstructionTranslator, cg: PyCodegen, code: types.CodeType) -> None:
    if code.co_freevars:  # the frame's own closure cells, as COPY_FREE_VARS left them
        for name in code.co_freevars:
            cg.emit("LOAD_CLOSURE", FreeVar(name))
        cg.emit("BUILD_TUPLE", len(code.co_freevars))
        cg.load_const(code)
        cg.emit("MAKE_FUNCTION", 8)
    else:
        # The function is made now, with this frame's globals: the entry holds only for them (one
        # code object may run under other globals: types.FunctionType(f.__code__, other_globals))
        tx.output.guards.add(GlobalsDictSource(), GuardKind.ID_MATCH, tx.f_globals)
        cg.load_const(types.FunctionType(code, tx.f_globals, code.co_name))

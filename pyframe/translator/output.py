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
"""
from __future__ import annotations

import types
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable

import torch.fx
from bytecode import BinaryOp, CellVar, FreeVar, Instr, Label, TryBegin, TryEnd

from ..backends import CompiledGraph
from ..codegen.pycodegen import PyCodegen, make_code
from ..exc import Unsupported
from ..guards import GuardKind
from ..rerun import RestoresRngOnError, Rerun, can_run_again, draws_random_numbers
from ..resume import Slot, first_real, original_position, resume_code
from ..source import CellContentsSource, GlobalsDictSource, LocalSource, Source
from .analysis import enclosing_entries, enclosing_handlers, live_locals
from .hooks import TranslatorHooks
from .instructions import InstructionTranslator
from .variables.iterators import ListIteratorVariable
from .variables import BoundMethodVariable, NullVariable, VariableTracker
from .variables.dicts import DictVariable, ObjectKey, made_keys
from .variables.lists import BaseListVariable
from .variables.dict_subclass import DictSubclassMixin
from .variables.exceptions import ExceptionVariable
from .variables.functions import NestedFunctionVariable, PartialVariable
from .variables.contexts import AutocastExitVariable, GradModeExitVariable
from .variables.objects import NewObjectVariable
from .variables.builtins import INPLACE_OPERATORS
from .variables.tensor import TensorVariable, is_inplace_method


@dataclass
class TranslationResult:
    code: types.CodeType
    graphs: list[CompiledGraph] = field(default_factory=list)
    break_reason: Unsupported | None = None
    resume_codes: list[types.CodeType] = field(default_factory=list)
    exports: list[Source] = field(default_factory=list)  # what the guards hand to `code`, in order


def _children(vt: VariableTracker) -> list[VariableTracker]:
    """The values a value holds, that rebuilding it rebuilds too: a container's items, and the
    trackers a wrapper is rebuilt from (`vt.rebuilt_from()`: a dict view's dict, a method's object)."""
    return [*_held(vt), *vt.rebuilt_from()]


def _held(vt: VariableTracker) -> list[VariableTracker]:
    if isinstance(vt, BaseListVariable):
        return list(vt.items)
    if isinstance(vt, DictVariable):  # its values, and the keys that are values of the trace
        return [*made_keys(vt.items), *vt.items.values()]
    if isinstance(vt, BoundMethodVariable):
        return [vt.obj]
    if isinstance(vt, DictSubclassMixin):  # its items, and (made here) its attributes
        return [*vt.dict_var.items.values(), *getattr(vt, "attrs", {}).values()]
    if isinstance(vt, NewObjectVariable):
        return list(vt.attrs.values())
    if isinstance(vt, ListIteratorVariable):
        return vt.remaining()
    if isinstance(vt, NestedFunctionVariable):  # a function made here keeps its defaults and cells
        return [*(vt.defaults or ()), *(vt.kwdefaults or {}).values(), *vt.escaping_values()]
    if isinstance(vt, PartialVariable):
        return [vt.func, *vt.args, *vt.keywords.values()]
    if isinstance(vt, ExceptionVariable):
        return list(vt.args)
    return []


def walk(values: list[VariableTracker],
         on_visit: Callable[[VariableTracker], None] | None = None) -> list[VariableTracker]:
    """Every value in `values` and inside them, each once, in order (`on_visit` sees each before
    its contents are looked at)."""
    seen: dict[int, VariableTracker] = {}
    stack = list(reversed(values))
    while stack:
        vt = stack.pop()
        if id(vt) in seen:
            continue
        seen[id(vt)] = vt
        if on_visit is not None:
            on_visit(vt)
        stack.extend(reversed(_children(vt)))
    return list(seen.values())


def realize_lazy_iterators(tx: InstructionTranslator, values: list[VariableTracker]) -> None:
    """A lazy iterator (a generator, map, filter...) live after the trace is rebuilt from the items
    still to come, made now: allowed only if making them changes nothing else (a generator that
    appends to a list as it yields would append early), else Unsupported."""
    def make_rest(vt: VariableTracker) -> None:
        if isinstance(vt, ListIteratorVariable) and vt.pending is not None:
            effects, known = tx.side_effects.effects, len(tx.output.graph.nodes)
            vt.remaining()
            made = list(tx.output.graph.nodes)[known:]
            if tx.side_effects.effects != effects or any(_mutates(node) for node in made):
                raise Unsupported(f"a partly consumed {vt.python_type().__name__} whose next items "
                                  f"have side effects is live across a graph break")

    walk(values, make_rest)


def check_escaping_iterators(values: list[VariableTracker]) -> None:
    """Values the frame hands back to Python (its return value, what its mutations store) must come
    back as the types eager gives: a map, zip, filter or generator rebuilt as a tuple iterator
    would not (`type(f())`, `.send()`, `gi_frame`), so such a frame runs as Python instead."""
    def check(vt: VariableTracker) -> None:
        if isinstance(vt, ListIteratorVariable) and not vt.rebuilt_as_itself():
            raise Unsupported(f"a {vt.python_type().__name__} object outlives the frame (it would "
                              f"come back as a tuple_iterator)")

    walk(values, check)


def _mutates(node: torch.fx.Node) -> bool:
    """An in-place tensor op (x.add_(1), x += 1, x[i] = v)."""
    if node.op == "call_method":
        return is_inplace_method(node.target)
    return node.target in INPLACE_OPERATORS


def tensors_in(values: list[VariableTracker]) -> list[TensorVariable]:
    """Every tensor the transformed code must hand back to Python, in order, once each."""
    found: dict[torch.fx.Node, TensorVariable] = {}
    for vt in walk(values):
        if isinstance(vt, TensorVariable):
            found.setdefault(vt.node, vt)
    return list(found.values())


def pin_changed_sources(tx: InstructionTranslator, cg: PyCodegen, values: list[VariableTracker]) -> None:
    """Values read through an object the side-effect replay is about to change (`x = lst.pop()`
    makes x the frame's `lst[1]`; `t = obj.t; obj.t = None`) are loaded before the replay, into
    temporaries that every later load of them uses."""
    changed = tx.side_effects.changed_sources()
    # `old = out` before `nonlocal out; out = y`; and `old = t` before `t = t * 0` where t is a
    # cell of this frame (a comprehension or closure reads it): store_locals writes the cell
    # (an argument that is a cell is read through its slot, LocalSource, until MAKE_CELL has run)
    replaced = tx.side_effects.replaced_sources() | {
        source for n in _changed_cells(tx) for source in (CellContentsSource(n), LocalSource(n))}
    if not changed and not replaced:
        return

    def is_changed(source: Source) -> bool:
        base = getattr(source, "base", None)
        while base is not None and base not in changed and base not in replaced:
            base = getattr(base, "base", None)
        return base is not None or source in replaced

    _pin_sources(cg, values, is_changed)


def _pin_sources(cg: PyCodegen, values: list[VariableTracker], pin: Callable[[Source], bool]) -> None:
    """Load each source of `values` (and inside them) that `pin` selects into a temporary, which every
    later load of that source in `cg` uses."""
    found = walk(values)
    # (a key of a frame dict the trace never used as a value is loaded from its source too)
    sources = [vt.source for vt in found] + [k.source for vt in found if isinstance(vt, DictVariable)
                                             for k in vt.items if isinstance(k, ObjectKey) and k.made_var is None]
    for source in sources:
        if source is None or source in cg.source_slots or not pin(source):
            continue
        cg.load_source(source)
        slot = cg.source_slots[source] = cg.new_temp("___pinned")
        cg.store_local(slot)


def pin_before_instruction(tx: InstructionTranslator, cg: PyCodegen, values: list[VariableTracker]) -> None:
    """Values the code after a break receives, rebuilt from where the trace read them (`r = cfg.w`,
    a global, an item of an argument, a cell), are loaded before the unsupported instruction runs:
    it runs user code, which may rebind what the source reads (`cfg.w = ...` in a called function).
    A plain local's slot keeps its entry value whatever the instruction does."""
    cells = set(tx.code.co_cellvars) | set(tx.code.co_freevars)
    _pin_sources(cg, values, lambda source: not (isinstance(source, LocalSource) and source.local_name not in cells))


def emit_graph_call(tx: InstructionTranslator, cg: PyCodegen, live: list[VariableTracker],
                    wrap_compiled: Callable[[Any], Any]) -> list[CompiledGraph]:
    """Compile the graph (if it does anything) and emit its call; `live` are the values needed after it."""
    output = tx.output
    outputs = [t.node for t in tensors_in(live) if t.node.op != "placeholder"]
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


def finish_return(tx: InstructionTranslator, value: VariableTracker,
                  wrap_compiled: Callable[[Any], Any]) -> TranslationResult:
    """The transformed code of a frame traced all the way to its return."""
    cg = PyCodegen(tx.code)
    cells = _changed_cells(tx)
    live = [value, *cells.values(), *tx.side_effects.live_values()]
    check_escaping_iterators(live)
    realize_lazy_iterators(tx, live)
    graphs = emit_graph_call(tx, cg, live, wrap_compiled)
    pin_changed_sources(tx, cg, [value, *cells.values()])
    tx.side_effects.codegen(cg)
    store_locals(cg, cells)  # closures made here may outlive the frame
    value.reconstruct(cg)
    cg.emit("RETURN_VALUE")
    cg.emit_rerun_handler(tx.passed_cells)
    return TranslationResult(make_code(tx.code, tx.prologue(), cg.instructions), graphs,
                             exports=cg.exported_inputs)


def store_locals(cg: PyCodegen, values: dict[str, VariableTracker]) -> None:
    """Store traced values into their slots: all are rebuilt first, since one may be read from a
    slot another overwrites (`y, m = x, n; x, n = x + 1, n + 1`: y is still the frame's old x)."""
    for value in values.values():
        value.reconstruct(cg)
    for name in reversed(values):
        cg.store_local(name)


def _changed_cells(tx: InstructionTranslator) -> dict[str, VariableTracker]:
    """Cell variables whose traced value is not what their cell holds (assigned while tracing)."""
    return {n: v for n, v in tx.locals.items()
            if n in tx.code.co_cellvars and v.source not in (LocalSource(n), CellContentsSource(n))}


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


def finish_break(tx: InstructionTranslator, index: int, reason: Unsupported,
                 wrap_compiled: Callable[[Any], Any]) -> TranslationResult:
    """The transformed code of a frame that breaks at `tx.instructions[index]`."""
    handlers = enclosing_handlers(tx.instructions)
    inst: Instr = tx.instructions[index]
    consumed, exits = break_shape(tx, index)
    # Inside a with block on grad mode or autocast the graph leaves the block, the instruction runs
    # in the block entered again (see _emit_in_blocks) and the resume functions enter it once more
    # (resume.Reentry). Other blocks (try, a user's context manager) send the frame to Python.
    in_block = bool(handlers[index] or any(handlers[first_real(tx.instructions, target)] for target, _ in exits))
    if in_block and not _inside_traced_blocks_only(tx, index):
        raise Unsupported(f"graph break inside a try or with block ({reason.reason})")
    if consumed > len(tx.stack):
        raise Unsupported(f"graph break at {inst.name} with a stack the translator does not model")
    split = len(tx.stack) - consumed
    lower, operands = tx.stack[:split], tx.stack[split:]
    blocks = [v for v in lower if isinstance(v, _BLOCK_EXITS)]  # outermost first
    for block in reversed(blocks):  # the graph leaves them, as the blocks' exits would
        block.call(tx, [], {})
    bound = {n for n in tx.code.co_varnames + tx.code.co_cellvars if n in tx.locals or n in tx.frame_values}
    # Closures read cells without a LOAD_DEREF in this code: every cell counts as live, an empty
    # one too (a closure made before the break sees what the code after it assigns).
    cells = set(tx.code.co_cellvars)
    # Resume the original code (not a resume function of it): each place gets one resume function.
    targets = [original_position(tx.code, tx.instructions, first_real(tx.instructions, target))
               for target, _ in exits]
    # A zero-argument super() reads the frame's first local: `self` goes first, used or not.
    lives = [_in_frame_order(original, (live_locals(instrs, target) & bound) | cells | _implicit(original, bound))
             for original, instrs, target in targets]
    # Plain locals are passed to the resume function rebuilt from their traced values (their slots
    # keep the entry values every Source reads). Cells are synced first: closures see them.
    live_values = [tx.locals[n] for n in sorted(set().union(*lives)) if n in tx.locals]

    cg = PyCodegen(tx.code)
    cg.lineno = inst.lineno or tx.code.co_firstlineno
    live = [*lower, *operands, *live_values, *tx.side_effects.live_values()]
    # (a local is seen by the code after the break; the stack's is a loop's own hidden iterator)
    check_escaping_iterators([*live_values, *tx.side_effects.live_values()])
    realize_lazy_iterators(tx, live)
    graphs = emit_graph_call(tx, cg, live, wrap_compiled)
    pin_changed_sources(tx, cg, [*lower, *operands, *live_values, *_changed_cells(tx).values()])
    tx.side_effects.codegen(cg)  # before the unsupported step: it may read what the trace mutated
    store_locals(cg, _changed_cells(tx))
    pin_before_instruction(tx, cg, [*lower, *live_values])
    handler = _enter_blocks(cg, blocks) if blocks else None
    for value in operands:
        value.reconstruct(cg)

    exit_labels = [Label() for _ in exits]
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

    if handler is not None:
        cg.instructions.append(TryEnd(handler))

    resumes = []
    built_before_branch = dict(cg.rebuilt)
    for (_, results), (original, _, target), live, label in zip(exits, targets, lives, exit_labels):
        cg.instructions.append(label)
        cg.rebuilt = dict(built_before_branch)  # each exit is its own path at run time
        if blocks:
            _leave_blocks(cg, len(blocks), results)
        stack_shape = tuple(_slot(v) for v in lower) + (False,) * results
        code = resume_code(original, target, stack_shape, live)
        resumes.append(code)
        passed = [v for v in lower if _slot(v) is False]
        _emit_resume_call(tx, cg, code, passed, results, live, packed=bool(blocks))
    if handler is not None:
        _emit_block_handler(cg, handler, len(blocks))
    cg.emit_rerun_handler(tx.passed_cells)
    return TranslationResult(make_code(tx.code, tx.prologue(), cg.instructions), graphs, reason, resumes,
                             cg.exported_inputs)


_BLOCK_EXITS = (GradModeExitVariable, AutocastExitVariable)


def _slot(value: VariableTracker) -> Slot:
    """What a resume function puts in the stack slot of `value` (resume.Slot)."""
    if isinstance(value, _BLOCK_EXITS):
        return value.reentry()
    return isinstance(value, NullVariable)


def _enter_blocks(cg: PyCodegen, blocks: list[VariableTracker]) -> TryBegin:
    """`with <block 1>: with <block 2>: ...` around the breaking instruction, as resume functions
    enter them (their __exit__ methods stay on the stack, outermost lowest). Returns the protected
    range's start: an exception in it runs every exit on its way out (_emit_block_handler)."""
    for block in blocks:
        cg.instructions.extend(block.reentry().instructions())
    start = TryBegin(Label(), push_lasti=True, stack_depth=len(blocks))
    cg.instructions.append(start)
    return start


def _leave_blocks(cg: PyCodegen, n: int, results: int) -> None:
    """The blocks' normal exit after the instruction: the `results` it left on top are packed into
    one tuple, which each `__exit__(None, None, None)` call (innermost first) is swapped under."""
    cg.emit("BUILD_TUPLE", results)
    for _ in range(n):
        cg.emit("SWAP", 2)
        for _ in range(3):
            cg.load_const(None)
        cg.call(2)  # [__exit__, None, None, None]: CALL takes __exit__ as a method bound to None
        cg.emit("POP_TOP")


def _emit_block_handler(cg: PyCodegen, start: TryBegin, n: int) -> None:
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
    """Every try range covering instruction `index` is the body of a `with` on a grad-mode or
    autocast context (its handler keeps the stack up to the block's __exit__, which the trace
    knows and the transformed code can rebuild)."""
    entries = enclosing_entries(tx.instructions)[index]
    return bool(entries) and all(
        0 < entry.stack_depth <= len(tx.stack)
        and isinstance(tx.stack[entry.stack_depth - 1], (GradModeExitVariable, AutocastExitVariable))
        for entry in entries)


def _emit_resume_call(tx: InstructionTranslator, cg: PyCodegen, code: types.CodeType,
                      lower: list[VariableTracker], results: int, live: tuple[str, ...],
                      packed: bool = False) -> None:
    """`return resume(*live, *lower, *results)` with the `results` already on the stack (`packed`:
    as one tuple)."""
    if packed and not results:
        cg.emit("POP_TOP")
    if results:
        if not packed:
            cg.emit("BUILD_TUPLE", results)
        cg.push_null()
        cg.emit("SWAP", 2)
        _load_function(tx, cg, code)
        cg.emit("SWAP", 2)                 # NULL, resume, results
        for name in live:
            _load_live(tx, cg, name)
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
        _load_function(tx, cg, code)
        for name in live:
            _load_live(tx, cg, name)
        for value in lower:
            value.reconstruct(cg)
        cg.call(len(lower) + len(live))
    cg.emit("RETURN_VALUE")


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



def translate_frame(code: types.CodeType, f_locals: dict[str, Any], f_globals: dict, f_builtins: dict,
                    closure: tuple | None, hooks: TranslatorHooks, fullgraph: bool = False) -> TranslationResult:
    """Trace a frame; on the first Unsupported, trace it again up to that instruction and break there.

    Tracing again (rather than cutting the first attempt short) leaves no half-traced call in the
    graph and no half-mutated symbolic container: the second trace stops cleanly before the step.
    """
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
                return finish_break(tx, break_at, reason, hooks.wrap_compiled)
            return finish_return(tx, value, hooks.wrap_compiled)
        except Unsupported as e:
            if e.proven_pure is not None and e.proven_pure not in pure_calls:
                pure_calls.add(e.proven_pure)  # the probe's inlined ops are dropped with this trace
                continue
            if fullgraph or break_at is not None or e.break_index is None:
                raise
            if e.deferred_method_at is not None and e.deferred_method_at not in deferred_methods:
                deferred_methods[e.deferred_method_at] = e.reason  # the call will break instead
                continue
            # Kept for the record (explain, the logs): without its traceback, whose frames hold
            # this trace (its OutputGraph, FakeTensors, the graph) in a cycle with the exception.
            break_at, reason = e.break_index, e.without_tracebacks()

"""The values a finished trace hands back to Python, and what must be true of them first.

Finishing a trace (finish.py) walks every value the transformed code rebuilds: the return value,
or the stack and live locals at a graph break, with the objects the side-effect replay stores.
Here: the walk itself (`walk`: a container's items, a method's object...), the tensors among them
(the graph's outputs, in the order torch._dynamo's codegen gives them), lazy iterators made concrete or refused, and the sources that must be read
before the replay or the breaking instruction can change what they read.
"""
from __future__ import annotations

import types
from typing import Callable

import torch.fx

from ..codegen.pycodegen import PyCodegen
from ..exc import Unsupported
from ..source import CellContentsSource, LocalSource, Source
from .instructions import InstructionTranslator
from .variables import BoundMethodVariable, VariableTracker
from .variables.builtins import INPLACE_OPERATORS
from .variables.constant import ConstantVariable
from .variables.container_subclass import ContainerSubclassMixin
from .variables.dict_subclass import DictSubclassMixin
from .variables.dicts import DictVariable
from .variables.dict_keys import ObjectKey, made_keys
from .variables.exceptions import ExceptionVariable
from .variables.functions import NestedFunctionVariable
from .variables.partials import PartialVariable
from .variables.iterators import ListIteratorVariable
from .variables.lists import BaseListVariable
from .variables.methods import InlinedMethodVariable
from .variables.objects import NewObjectVariable
from .variables.sets import SetVariable
from .variables.read_values import float_outputs_as_tensors
from .variables.tensor import SymNodeVariable, TensorVariable, is_inplace_method


def _children(vt: VariableTracker) -> list[VariableTracker]:
    """The values a value holds, that rebuilding it rebuilds too: a container's items, and the
    trackers a wrapper is rebuilt from (`vt.rebuilt_from()`: a dict view's dict, a method's object)."""
    return [*_held(vt), *vt.rebuilt_from()]


def _held(vt: VariableTracker) -> list[VariableTracker]:
    if isinstance(vt, BaseListVariable):
        return list(vt.items)
    if isinstance(vt, DictVariable):  # its values, and the keys that are values of the trace
        return [*made_keys(vt.items), *vt.items.values()]
    if isinstance(vt, SetVariable):
        return vt.held()
    if isinstance(vt, ContainerSubclassMixin):  # its items, and (made here) its attributes
        return [*vt.held(), *getattr(vt, "attrs", {}).values()]
    if isinstance(vt, BoundMethodVariable):
        return [vt.obj]
    if isinstance(vt, DictSubclassMixin):  # its items, and (made here) its attributes
        return [*vt.dict_var.items.values(), *getattr(vt, "attrs", {}).values()]
    if isinstance(vt, NewObjectVariable):
        return list(vt.attrs.values())
    if isinstance(vt, ListIteratorVariable):
        return vt.held()
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
        if isinstance(vt, ListIteratorVariable) and vt.pending is not None and not vt.remade():
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


def use_constants_as_dynamo(tx: InstructionTranslator, rebuilt: list[VariableTracker],
                            used: list[VariableTracker]) -> None:
    """Use the lazy constants (ConstantVariable.lazy) that torch._dynamo uses while finishing a
    graph (OutputGraph.compile_subgraph), so they are guarded as there:

    - `used`: every one inside them (realize_all: the stack below a break's operands, and the live
      locals handed on that do not hold the frame's own argument of that name);
    - `rebuilt`: those its codegen uses (the return value, a break's operands): a value with a
      source is read from it (a lazy constant stays unused); one without is first asked whether it
      is a constant as a whole (`is_python_constant()`), which uses the lazy constants among its
      items up to the first item that is not one (`return x + 1, n` leaves n unused; `return n,
      x + 1` and `return [n]` use it); its items are then rebuilt alike;
    - the side effects' values, rebuilt alike, a container whose items changed (`l.append(5)`)
      as a whole, its own source notwithstanding."""
    for vt in walk(used):
        if type(vt) is ConstantVariable:
            vt.value  # noqa: B018 (its use)
    seen: set[int] = set()

    def rebuild(vt: VariableTracker) -> None:
        if vt.source is not None or id(vt) in seen:
            return
        seen.add(id(vt))
        if not _constant_as_a_whole(vt):
            for child in _children(vt):
                rebuild(child)

    for container in tx.side_effects.mutated.values():
        if not _constant_as_a_whole(container):
            for child in _children(container):
                rebuild(child)
    for value in [*rebuilt, *tx.side_effects.live_values()]:
        rebuild(value)


def _constant_as_a_whole(vt: VariableTracker) -> bool:
    if type(vt) is ConstantVariable:
        vt.value  # noqa: B018 (its use)
        return True
    if isinstance(vt, BaseListVariable):
        return all(_constant_as_a_whole(item) for item in vt.items)
    if type(vt) is DictVariable:
        return all(not isinstance(key, ObjectKey) and _constant_as_a_whole(value) for key, value in vt.items.items())
    return False


def check_rebuildable_methods(values: list[VariableTracker], at_break: bool = False) -> None:
    """A Python method bound to an object the frame made (`K().m`, `Mod().forward`, `f = obj.m`
    with `obj = K()`) among the values handed back to Python (the stack and live locals at a
    break, the return value, what mutations store) runs the whole frame as Python: torch._dynamo
    has no way to rebuild such a method (UserMethodVariable without a source: "Reconstruction
    failure"), so it runs the frame as Python ("Failed to handle graph break gracefully") and
    compiles the method's own frame when Python calls it. pyframe could rebuild it, but doing so
    gives other frames and graphs than torch._dynamo's. At a break (`at_break`), torch._dynamo
    still lists that break among its graph breaks."""
    def check(vt: VariableTracker) -> None:
        if _unrebuildable_method(vt):
            e = Unsupported(f"{vt.describe()}, a method of an object made in the frame, is handed back "
                            f"to Python (torch._dynamo cannot rebuild it), so the frame runs as Python")
            e.whole_frame = e.by_rule = True
            e.listed_break = at_break
            raise e

    walk(values, check)


def _unrebuildable_method(vt: VariableTracker) -> bool:
    if vt.source is not None or not isinstance(vt, (BoundMethodVariable, InlinedMethodVariable)) \
            or vt.obj.source is not None or isinstance(vt.obj, (TensorVariable, SymNodeVariable)):
        return False  # (a tensor's method, `y.backward`, torch._dynamo rebuilds as the attribute of y)
    if isinstance(vt, InlinedMethodVariable):
        return True
    return isinstance(vt._class_attribute(), types.FunctionType)


def _mutates(node: torch.fx.Node) -> bool:
    """An in-place tensor op (x.add_(1), x += 1, x[i] = v)."""
    if node.op == "call_method":
        return is_inplace_method(node.target)
    return node.target in INPLACE_OPERATORS


def drop_stores_to_dead_tensors(tx: InstructionTranslator, roots: list[VariableTracker]) -> None:
    """Forget attributes the trace set on tensors the graph made (`y.tag = "a"`) that nothing the
    transformed code hands back reaches (y rebound since): no Python code can see them, and
    replaying them would keep the tensor alive as a graph output (torch._dynamo prunes them too).
    A tensor is reached from `roots`, from the other replayed stores, or from the attributes of
    a tensor reached."""
    stores = tx.side_effects.stores
    pending = {key for key, (obj, _) in stores.items() if obj.source is None and isinstance(obj, TensorVariable)}
    if not pending:
        return
    reached_from = [*roots, *tx.side_effects.mutated.values(),
                    *(value for _, names in tx.side_effects.global_stores.values() for value in names.values()),
                    *(value for key, (_, attrs) in stores.items() if key not in pending for value in attrs.values())]
    while pending:
        reached = {id(vt.example) for vt in walk(reached_from) if isinstance(vt, TensorVariable)}
        alive = pending & reached
        if not alive:
            break
        pending -= alive
        reached_from.extend(value for key in alive for value in stores[key][1].values())
    for key in pending:
        del stores[key]


def tensors_in(values: list[VariableTracker]) -> list[TensorVariable | SymNodeVariable]:
    """Every tensor (and symbolic size) the transformed code must hand back to Python, in order,
    once each."""
    found: dict[torch.fx.Node, TensorVariable | SymNodeVariable] = {}
    for vt in walk(values):
        if isinstance(vt, (TensorVariable, SymNodeVariable)):
            found.setdefault(vt.node, vt)
    return list(found.values())


def graph_outputs(tx: InstructionTranslator, live: list[VariableTracker], cells: dict[str, VariableTracker],
                  handed_on: list[VariableTracker] | None = None) -> list[torch.fx.Node]:
    """The nodes the graph returns: the tensors among `live` (the values needed after it) that are
    not its inputs; of them, `handed_on` are those the frame returns or passes to its resume
    functions, and `cells` the cells stored back, which order them as torch._dynamo does."""
    outputs = _tensors_handed_on(tx, handed_on, cells)
    if outputs is None:
        # (a tensor with a source, a graph input or a view read of one, is loaded from there)
        outputs = [t.node for t in tensors_in(live) if t.node.op != "placeholder" and t.source is None]
        if handed_on is not None:
            outputs = _in_dynamo_order(tx, handed_on, live, cells, outputs)
        if tx.output.symbolic:
            outputs = float_outputs_as_tensors(tx, outputs)
    return outputs


def _tensors_handed_on(tx: InstructionTranslator, values: list[VariableTracker] | None,
                       cells: dict[str, VariableTracker]) -> list[torch.fx.Node] | None:
    """torch._dynamo's short way out of a graph (OutputGraph.compile_subgraph): when everything the
    frame hands on is a tensor, each its own tracker, and nothing is to be replayed, the graph
    returns exactly those, in order. Dynamo counts every tensor the graph makes that is still live
    as something to replay (it tracks new tensors for attribute stores), so this applies when they
    are all graph inputs: `x.sub_(1); return x` returns `l_x_` from the graph. None otherwise: the
    graph returns the tensors the rebuild of the values needs that are not its inputs."""
    if not values or not tx.side_effects.is_empty() or cells \
            or not all(isinstance(v, TensorVariable) and v.node.op == "placeholder" for v in values) \
            or len({id(v) for v in values}) < len(values):
        return None
    return [v.node for v in values]


def _in_dynamo_order(tx: InstructionTranslator, handed_on: list[VariableTracker], live: list[VariableTracker],
                     cells: dict[str, VariableTracker], outputs: list[torch.fx.Node]) -> list[torch.fx.Node]:
    """The graph's outputs in the order torch._dynamo's codegen first loads them (codegen.py,
    side_effects.py): the arguments objects made in the frame were made with (`P(a, b)` is rebuilt
    as `P.__new__(P, a, b)`, in the order they were made); the values handed on, a value with a
    source or made here not looked into (it is loaded, or rebuilt below); then the replay: the
    changes to the frame's objects, and each made object's items and attributes, its attributes
    last set first. (The set of outputs is `outputs`; this only orders them.)"""
    made = sorted((vt for vt in walk(live) if isinstance(vt, NewObjectVariable)), key=lambda vt: vt.made)
    first_seen: dict[torch.fx.Node, None] = {}
    cell_contents: list[VariableTracker] = []  # of cells made for closures: filled in the replay
    seen: set[int] = set()

    def visit(values: list[VariableTracker]) -> None:
        for vt in values:
            if isinstance(vt, (TensorVariable, SymNodeVariable)):
                first_seen.setdefault(vt.node, None)
            elif id(vt) in seen:  # (a list holding itself, a recursive closure)
                continue
            elif isinstance(vt, NestedFunctionVariable):
                seen.add(id(vt))
                visit([*(vt.defaults or ()), *(vt.kwdefaults or {}).values()])
                cell_contents.extend(vt.escaping_values())
            elif not isinstance(vt, NewObjectVariable) and vt.source is None:
                seen.add(id(vt))
                visit(_in_codegen_order(vt))

    for obj in made:
        visit(obj.init_args)
    visit(handed_on)
    visit([*tx.side_effects.live_values(), *cells.values()])
    while cell_contents:
        pending, cell_contents[:] = list(cell_contents), []
        visit(pending)
    for obj in made:
        if isinstance(obj, DictSubclassMixin):
            visit([v for k, value in obj.dict_var.items.items() for v in (*made_keys({k: None}), value)])
        visit(list(reversed(obj.attrs.values())))
    wanted = set(outputs)
    return [n for n in first_seen if n in wanted] + [n for n in outputs if n not in first_seen]


def _in_codegen_order(vt: VariableTracker) -> list[VariableTracker]:
    """What rebuilding `vt` loads, in order: a dict's items key then value."""
    if isinstance(vt, DictVariable):
        return [v for k, value in vt.items.items() for v in (*made_keys({k: None}), value)]
    return _children(vt)


def pin_changed_sources(tx: InstructionTranslator, cg: PyCodegen, values: list[VariableTracker]) -> None:
    """Values read through an object the side-effect replay is about to change (`x = lst.pop()`
    makes x the frame's `lst[1]`; `t = obj.t; obj.t = None`) are loaded before the replay, into
    temporaries that every later load of them uses."""
    changed = tx.side_effects.changed_sources()
    # `old = out` before `nonlocal out; out = y`; and `old = t` before `t = t * 0` where t is a
    # cell of this frame (a comprehension or closure reads it): store_locals writes the cell
    # (an argument that is a cell is read through its slot, LocalSource, until MAKE_CELL has run)
    replaced = tx.side_effects.replaced_sources() | {
        source for n in changed_cells(tx) for source in (CellContentsSource(n), LocalSource(n))}
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


def changed_cells(tx: InstructionTranslator) -> dict[str, VariableTracker]:
    """Cell variables whose traced value is not what their cell holds (assigned while tracing)."""
    return {n: v for n, v in tx.locals.items()
            if n in tx.code.co_cellvars and v.source not in (LocalSource(n), CellContentsSource(n))}


def escaping_cells(tx: InstructionTranslator, values: list[VariableTracker]) -> dict[str, VariableTracker]:
    """The changed cells (changed_cells) someone may still read once the frame has returned
    `values`: those a function among them (or inside them, or in a cell so found) closes over, and
    those the frame received from the code before a graph break (a closure made there holds them).
    Like torch._dynamo, which drops a cell made in the frame that nothing live reaches, the others
    are not stored back (`[cols[i] for i in order]` makes `cols` a cell only its listcomp reads)."""
    cells = changed_cells(tx)
    escaping = {n for n in cells if n in tx.passed_cells}
    pending = list(values) + [cells[n] for n in escaping]
    while pending:
        found = set()
        for vt in walk(pending):
            if isinstance(vt, NestedFunctionVariable):
                for ref in vt.closure:
                    target = ref.target()
                    if target.owner is tx and not target.free and target.name in cells:
                        found.add(target.name)
        found -= escaping
        escaping |= found
        pending = [cells[n] for n in found]
    return {n: v for n, v in cells.items() if n in escaping}

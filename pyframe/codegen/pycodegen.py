"""Codegen: emitting the transformed bytecode with the `bytecode` library.

`PyCodegen` collects instructions: loads of Sources (how the transformed code reads a graph input
again), constants, container builds, calls. Symbolic values rebuild themselves through it
(`vt.reconstruct(cg)`), so this module needs no knowledge of their classes. `make_code` wraps a body
into a code object that keeps the original's signature, cells, free variables and every local slot
(the eval-frame hook copies the original frame's slots into it by name).
"""
from __future__ import annotations

import builtins
import inspect
import types
from typing import Any, Callable

import torch.fx
from bytecode import Bytecode, CellVar, FreeVar, Instr, Label, TryBegin, TryEnd
from bytecode.instr import UNSET

from .. import _C
from ..exc import Unsupported
from ..rerun import Rerun, run_as_python
from ..source import (
    AttrSource, BaseItemSource, BuiltinSource, CellContentsSource, ChildSource, ClosureSource, DictItemSource, DictKeySource,
    DictValueSource, FreeCellSource, GenericAttrSource, GlobalSource, ItemSource, LocalSource, NumpyTensorSource,
    Source, TensorPropertySource, TupleIteratorRestSource, WeakRefCallSource,
)

_BUILD = {tuple: "BUILD_TUPLE", list: "BUILD_LIST"}


class PyCodegen:
    def __init__(self, code: types.CodeType):
        self.code = code
        self.instructions: list[Instr | Label] = []
        self.node_slots: dict[torch.fx.Node, str] = {}  # graph outputs, stored in temporaries
        self.rebuilt: dict[int, str] = {}  # mutable containers already built once, by tracker id
        self.rebuilding: set[int] = set()  # containers being built now (one that holds itself)
        self.lineno = code.co_firstlineno
        # Sources loaded more than once by one call_graph (the modules on the path to each
        # parameter), and the temporaries they were kept in.
        self.shared_sources: set[Source] = set()
        self.source_slots: dict[Source, str] = {}
        # What the guards hand the code (docs/c_layer.md, "Exports"): the first graph's inputs,
        # when the graph call is the code's first step, then the values read through paths the
        # guards fetch anyway (`exportable`, set by the caller).
        self.exported_inputs: list[Source] = []
        self.exported_values: list[Source] = []
        self.exportable: frozenset[Source] = frozenset()
        self._graph_call_args: Instr | None = None  # the graph call's LOAD_FAST of the exports
        self._export_indexes: list[tuple[Instr, Source]] = []  # each `___guard_exports[i]`'s i
        self.temps = 0
        self.rerun_handler: Label | None = None  # where a graph call that raised goes (rerun.py)
        self.rerun: Rerun | None = None

    def new_temp(self, prefix: str) -> str:
        """A fresh local slot for the transformed code's own use."""
        self.temps += 1
        return f"{prefix}_{self.temps}"

    def emit(self, name: str, arg: Any = None) -> None:
        if arg is None and name not in ("LOAD_CONST",):
            self.instructions.append(Instr(name, lineno=self.lineno))
        else:
            self.instructions.append(Instr(name, arg, lineno=self.lineno))

    # -- loads ---------------------------------------------------------------------------------
    def load_const(self, value: Any) -> None:
        self.emit("LOAD_CONST", value)

    def push_null(self) -> None:
        self.emit("PUSH_NULL")

    def load_local(self, name: str) -> None:
        if name in self.code.co_cellvars:  # after MAKE_CELL the slot holds the cell
            self.emit("LOAD_DEREF", CellVar(name))
        else:
            self.emit("LOAD_FAST", name)

    def store_local(self, name: str) -> None:
        if name in self.code.co_cellvars:
            self.emit("STORE_DEREF", CellVar(name))
        else:
            self.emit("STORE_FAST", name)

    def load_closure(self, name: str, free: bool) -> None:
        """The cell object itself (for MAKE_FUNCTION), not its contents."""
        self.emit("LOAD_CLOSURE", FreeVar(name) if free else CellVar(name))

    def load_source(self, source: Source) -> None:
        """Bytecode that evaluates `source` in the frame (the transformed code's own frame)."""
        slot = self.source_slots.get(source)
        if slot is not None:
            self.emit("LOAD_FAST", slot)
            return
        self._evaluate(source)
        if source in self.shared_sources:  # evaluated once, kept in a temporary for the next uses
            slot = self.source_slots[source] = f"___source_{len(self.source_slots)}"
            self.emit("COPY", 1)
            self.emit("STORE_FAST", slot)

    def _lookup_by(self, method: Any, base: Source, key: Any) -> None:
        """`method(<base>, key)`: a lookup by a builtin type's own method (object's attribute
        lookup, dict's item), which the object's class's overrides do not change."""
        self.push_null()
        self.load_const(method)
        self.load_source(base)
        self.load_const(key)
        self.call(2)

    def exports(self) -> list[Source]:
        """The sources whose values the guards export to this code, in order."""
        return self.exported_inputs + self.exported_values

    def grouped_inputs(self) -> int:
        """How many of the exports are the graph's inputs, grouped in a tuple of their own ahead
        of the other values (`___guard_exports = ((inputs...), value, ...)`), so that the graph
        call takes that tuple as it is rather than a slice of a flat one; 0 for a flat tuple (no
        values after the inputs, or no graph call to give them to)."""
        if self._graph_call_args is None or not self.exported_values:
            return 0
        return len(self.exported_inputs)

    def body(self) -> list[Instr | Label]:
        """The instructions emitted, each export's index set for the exports' layout: with the
        inputs grouped, the graph call takes `___guard_exports[0]`, an input read later
        `___guard_exports[0][i]`, and the value after them `___guard_exports[1 + j]`."""
        grouped = self.grouped_inputs()
        n_inputs = len(self.exported_inputs)
        indexes = {}
        for load, source in self._export_indexes:
            if source in self.exported_inputs:
                group = [Instr("LOAD_CONST", 0, lineno=load.lineno), Instr("BINARY_SUBSCR", lineno=load.lineno)]
                indexes[id(load)] = [*(group if grouped else ()),
                                     Instr("LOAD_CONST", self.exported_inputs.index(source), lineno=load.lineno)]
            else:
                j = self.exported_values.index(source)
                indexes[id(load)] = [Instr("LOAD_CONST", 1 + j if grouped else n_inputs + j, lineno=load.lineno)]
        body: list[Instr | Label] = []
        for inst in self.instructions:
            if id(inst) in indexes:
                body.extend(indexes[id(inst)])
                continue
            body.append(inst)
            if grouped and inst is self._graph_call_args:
                body += [Instr("LOAD_CONST", 0, lineno=self.lineno), Instr("BINARY_SUBSCR", lineno=self.lineno)]
        return body

    def _load_export(self, source: Source) -> None:
        """`___guard_exports[i]`: the value the guards fetched at `source` on this call, one
        subscript where evaluating the path again costs a load per step (a library's globals sit
        behind `self._modules['model'].__class__.forward.__globals__`). The index depends on the
        exports' layout, known once the code is done: body() sets it."""
        if source not in self.exported_inputs and source not in self.exported_values:
            self.exported_values.append(source)
        self.emit("LOAD_FAST", _C.EXPORTS_LOCAL)
        self.load_const(None)  # (the index: body())
        self._export_indexes.append((self.instructions[-1], source))
        self.emit("BINARY_SUBSCR")

    def _evaluate(self, source: Source) -> None:
        if isinstance(source, ChildSource) and source in self.exportable:
            self._load_export(source)
        elif isinstance(source, (LocalSource, CellContentsSource)):
            self.load_local(source.local_name)
        elif isinstance(source, (GlobalSource, BuiltinSource)):
            name = source.global_name if isinstance(source, GlobalSource) else source.builtin_name
            self.emit("LOAD_GLOBAL", (False, name))
        elif isinstance(source, ClosureSource):
            self.emit("LOAD_DEREF", FreeVar(source.var_name))
        elif isinstance(source, FreeCellSource):
            self.emit("LOAD_CLOSURE", FreeVar(source.var_name))
        elif isinstance(source, GenericAttrSource):
            self._lookup_by(object.__getattribute__, source.base, source.attr)
        elif isinstance(source, AttrSource):
            self.load_source(source.base)
            self.emit("LOAD_ATTR", source.attr)
        elif isinstance(source, DictItemSource):
            self._lookup_by(dict.__getitem__, source.base, source.key)
        elif isinstance(source, BaseItemSource):
            self._lookup_by(source.owner.__getitem__, source.base, source.key)
        elif isinstance(source, ItemSource):
            self.load_source(source.base)
            self.load_const(source.key)
            self.emit("BINARY_SUBSCR")
        elif isinstance(source, DictKeySource):  # list(d)[i]: the dict's own iteration order
            self.push_null()
            self.load_const(list)
            self.load_source(source.base)
            self.call(1)
            self.load_const(source.index)
            self.emit("BINARY_SUBSCR")
        elif isinstance(source, DictValueSource):  # d[list(d)[i]]
            self.load_source(source.base)
            self.load_source(DictKeySource(source.base, source.index))
            self.emit("BINARY_SUBSCR")
        elif isinstance(source, TupleIteratorRestSource):  # what its guard reads
            self.push_null()
            self.load_const(_C.tuple_iterator_rest)
            self.load_source(source.base)
            self.call(1)
        elif isinstance(source, WeakRefCallSource):  # `ref()`, read as its guard reads it
            self.push_null()
            self.load_const(_C.weakref_referent)
            self.load_source(source.base)
            self.call(1)
        elif isinstance(source, NumpyTensorSource):  # the tensor over a NumPy array's memory
            self.push_null()
            self.load_const(torch.as_tensor)
            self.load_source(source.base)
            self.call(1)
        elif isinstance(source, TensorPropertySource):  # `x.size(0)`, `x.stride(1)`, `x.storage_offset()`
            self.push_null()
            self.load_const(getattr(torch.Tensor, source.prop))
            self.load_source(source.base)
            if source.prop != "storage_offset":
                self.load_const(source.dim)
            self.call(1 if source.prop == "storage_offset" else 2)
        else:
            raise TypeError(f"cannot load source {source!r}")

    def load_tensor(self, tensor: Any) -> None:
        """A TensorVariable: a graph output kept in a temporary, or a graph input's source."""
        slot = self.node_slots.get(tensor.node)
        if slot is not None:
            self.load_local(slot)
        elif tensor.source is not None:
            self.load_source(tensor.source)
        else:
            raise RuntimeError(f"tensor {tensor.node.name} is neither a graph output nor an input")

    def rebuild_once(self, tracker: Any, emit: Callable[[], None]) -> None:
        """Build a mutable value once; later uses load the same object (aliasing is preserved)."""
        slot = self.rebuilt.get(id(tracker))
        if slot is not None:
            self.load_local(slot)
            return
        if id(tracker) in self.rebuilding:  # (`d = locals()` later held in d): built item by item
            raise Unsupported("a container that holds itself (`d = locals()` kept in a local) cannot be rebuilt")
        self.rebuilding.add(id(tracker))
        emit()
        self.rebuilding.discard(id(tracker))
        slot = self.rebuilt[id(tracker)] = f"___rebuilt_{len(self.rebuilt)}"
        self.emit("COPY", 1)
        self.emit("STORE_FAST", slot)

    # -- building and calling --------------------------------------------------------------------
    def build(self, container_type: type, n: int) -> None:
        if container_type is dict:
            self.emit("BUILD_MAP", n)
        elif container_type in _BUILD:
            self.emit(_BUILD[container_type], n)
        else:  # torch.Size and other tuple subclasses: build a tuple, then call the type on it
            self.emit("BUILD_TUPLE", n)
            self.push_null()
            self.emit("SWAP", 2)
            self.load_const(container_type)
            self.emit("SWAP", 2)
            self.call(1)

    def call(self, nargs: int) -> None:
        # 3.11: PRECALL must immediately precede CALL (specialized PRECALLs skip over the CALL).
        self.emit("PRECALL", nargs)
        self.emit("CALL", nargs)

    def call_graph(self, compiled_fn: Any, input_sources: list[Source], outputs: list[torch.fx.Node],
                   rerun: Rerun | None = None) -> None:
        """`__out_0, __out_1, ... = compiled_fn(*inputs)`: the graph outputs land in temporaries.

        The inputs of a module's graph are its parameters, `self._modules['blocks']._modules['0']
        ._parameters['weight']` and so on: each attribute or item on the way that more than one
        input goes through is evaluated once (the frame runs no user code between these loads).

        `rerun`: the call is in a try range whose handler (`emit_rerun_handler`, at the end
        of the code) runs the frame again as Python (rerun.py). Only for the code's first
        instructions, while the arguments hold their entry values."""
        first = not self.instructions
        if rerun is not None:
            self.rerun = rerun
            if not first:
                raise RuntimeError("a graph call that may run its frame again must come first")
            self.rerun_handler = Label()
            protected = TryBegin(self.rerun_handler, push_lasti=False, stack_depth=0)
            self.instructions.append(protected)
        self._call_graph(compiled_fn, input_sources, first)
        if rerun is not None:
            self.instructions.append(TryEnd(protected))
        self._unpack_outputs(outputs)

    def _call_graph(self, compiled_fn: Any, input_sources: list[Source], first: bool) -> None:
        self.push_null()
        self.load_const(compiled_fn)
        if input_sources and first and not any(isinstance(s, NumpyTensorSource) for s in input_sources):
            # The first thing the code does, so the inputs are the values the guards just
            # fetched: the hook hands them over in one tuple (docs/c_layer.md, "Exports"). (The
            # tensor over a NumPy array is made by the code, from the array the guards checked.)
            self.exported_inputs = list(input_sources)
            self.emit("LOAD_FAST", _C.EXPORTS_LOCAL)
            self._graph_call_args = self.instructions[-1]
            self.emit("CALL_FUNCTION_EX", 0)
            return
        self.shared_sources = _shared_prefixes(input_sources)
        for source in input_sources:
            self.load_source(source)
        self.shared_sources, self.source_slots = set(), {}
        self.call(len(input_sources))

    def emit_rerun_handler(self, received_cells: set[str]) -> None:
        """The handler of the graph call's try range: `return run_as_python(exc, Rerun(<this code>,
        ...), globals(), <closure>, (<arguments>))`. The arguments are read from their slots, which the
        code has not written yet: a cell argument's contents once MAKE_CELL ran, the cell itself for
        `received_cells` (a resume function's, which its prologue does not make)."""
        if self.rerun_handler is None:
            return
        code = self.code
        self.instructions.append(self.rerun_handler)      # [exc]
        self.push_null()
        self.emit("SWAP", 2)
        self.load_const(run_as_python)
        self.emit("SWAP", 2)                               # [NULL, run_as_python, exc]
        self.load_const(self.rerun)
        self.push_null()
        self.load_const(builtins.globals)                  # the running frame's globals
        self.call(0)
        if code.co_freevars:
            for name in code.co_freevars:
                self.emit("LOAD_CLOSURE", FreeVar(name))
            self.emit("BUILD_TUPLE", len(code.co_freevars))
        else:
            self.load_const(None)
        nargs = code.co_argcount + code.co_kwonlyargcount
        nargs += bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)  # *args, **kwargs
        for name in code.co_varnames[:nargs]:
            if name in received_cells:
                self.emit("LOAD_CLOSURE", CellVar(name))
            else:
                self.load_local(name)
        self.emit("BUILD_TUPLE", nargs)
        self.call(5)
        self.emit("RETURN_VALUE")

    def _unpack_outputs(self, outputs: list[torch.fx.Node]) -> None:
        if not outputs:
            self.emit("POP_TOP")
            return
        self.emit("UNPACK_SEQUENCE", len(outputs))
        for i, node in enumerate(outputs):
            name = f"___out_{i}"
            self.emit("STORE_FAST", name)
            self.node_slots[node] = name


def _shared_prefixes(sources: list[Source]) -> set[Source]:
    """The attribute and item sources that are the base of more than one use in `sources`."""
    seen: set[Source] = set()
    shared: set[Source] = set()
    for source in sources:
        while isinstance(source, ChildSource):
            if source in seen:
                shared.add(source)
                break  # its own bases were counted when it was first seen
            seen.add(source)
            source = source.base
    return shared


def make_code(original: types.CodeType, prologue: list[Instr], body: list[Instr | Label]) -> types.CodeType:
    """A code object with the original's signature and local slots, running `body` after the
    original's prologue (MAKE_CELL / COPY_FREE_VARS / RESUME 0, as the translator parsed it)."""
    bc = code_header(Bytecode(), original)
    bc.extend(prologue)
    bc.extend(body)
    size = stack_size(bc)
    if size is None:
        return bc.to_code()
    # (the library's own analysis builds a control-flow graph of the code and back: half of the
    # assembly's time, for code that is straight but for a few forward jumps and try ranges)
    return bc.to_code(stacksize=size, compute_exception_stack_depths=False)


def stack_size(instructions: list[Any]) -> int | None:
    """The deepest the value stack gets in `instructions`, code that jumps only forward (a graph
    break's exits, the rerun handler) and gives every try range its stack depth, as codegen writes
    it: one pass, each label's depth taken from the first jump to it (or the fall into it) and a
    handler's from its TryBegin. None for anything else (a backward jump, a range without a depth,
    a label reached at two depths), which `bytecode`'s own analysis then measures."""
    depth = deepest = 0
    at_label: dict[Label, int] = {}
    passed: set[Label] = set()
    live = True  # (false after a return, raise or jump: until a label, the code is unreachable)
    for item in instructions:
        if isinstance(item, Label):
            passed.add(item)
            if live:
                if at_label.setdefault(item, depth) != depth:
                    return None
            elif item in at_label:
                depth, live = at_label[item], True
            continue
        if isinstance(item, TryBegin):
            if item.stack_depth is UNSET:
                return None
            handler = item.stack_depth + item.push_lasti + 1  # (lasti, then the exception)
            if item.target in passed or at_label.setdefault(item.target, handler) != handler:
                return None
            deepest = max(deepest, handler)
            continue
        if not isinstance(item, Instr) or not live:
            continue
        if item.has_jump():
            if item.arg in passed:
                return None
            taken = depth + item.stack_effect(jump=True)
            if at_label.setdefault(item.arg, taken) != taken:
                return None
            deepest = max(deepest, taken)
            depth += item.stack_effect(jump=False)
        else:
            depth += item.stack_effect()
        if depth < 0:
            return None
        deepest = max(deepest, depth)
        live = not item.is_final()
    return deepest


def code_header(bc: Bytecode, original: types.CodeType, name: str | None = None,
                argnames: list[str] | None = None) -> Bytecode:
    """Fill `bc`'s header from `original`: its file, first line, flags, cells and free variables.
    Without `name`, the original's name and signature, and every original local in its own slot
    (the transformed code); with `name` and `argnames`, positional arguments only, no `*args` or
    `**kwargs` (a resume function, resume.py)."""
    bc.filename = original.co_filename
    bc.first_lineno = original.co_firstlineno
    bc.cellvars = list(original.co_cellvars)
    bc.freevars = list(original.co_freevars)
    if name is None:
        bc.name, bc.qualname = original.co_name, original.co_qualname
        bc.flags = original.co_flags
        bc.argcount = original.co_argcount
        bc.posonlyargcount = original.co_posonlyargcount
        bc.kwonlyargcount = original.co_kwonlyargcount
        # Every original local keeps its slot index; temporaries of the body come after them.
        bc.argnames = list(original.co_varnames)
    else:
        bc.name = bc.qualname = name
        bc.flags = original.co_flags & ~(inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)
        bc.argcount = len(argnames or [])
        bc.posonlyargcount = 0
        bc.kwonlyargcount = 0
        bc.argnames = list(argnames or [])
    return bc

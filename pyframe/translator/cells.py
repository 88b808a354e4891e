"""Closure cells and free variables of the traced frame and of every function it inlines.

A cell is shared: the root frame's own (which a resume function may receive as an argument), one
an inlined function reaches through `fn.__closure__[i]`, one a function made in the trace holds
(`closure_refs`). Reads give what the trace stored or the contents, guarded on where the cell was
found; stores to a cell that outlives the frame are replayed after the graph (side_effects.py).
The methods are a mixin of InstructionTranslator; LOAD_DEREF and friends (ops_load_store.py) call them.
"""
from __future__ import annotations

from typing import Any

from ..exc import Unsupported
from ..guards import GuardKind
from ..source import AttrSource, ClosureSource, FreeCellSource, ItemSource, Source
from .variables import VariableTracker
from .variables.functions import CellReference, CellVariable


class CellOps:
    def read_free_var(self, name: str) -> VariableTracker:
        if name in self.closure_refs:
            return self.closure_refs[name].load()
        index = self.code.co_freevars.index(name)
        cell = self.closure[index]
        if self.parent is not None:
            shared = self.root.passed_cell_name(cell)
            if shared is not None:  # the root frame's own cell: its traced value, not the entry one
                return self.root.read_local(shared)
        tracker = self.side_effects.known_cell(cell)
        stored = self.side_effects.load_attr(tracker, "cell_contents") if tracker is not None else None
        if stored is not None:  # assigned earlier in this trace (`nonlocal x; x = ...`), by any function
            self._same_cell(tracker, self._cell_source(index), cell)
            return stored
        try:
            value = cell.cell_contents
        except ValueError as e:
            raise Unsupported(f"free variable {name!r} read before assignment") from e
        if self.parent is None:
            return self.wrap(value, ClosureSource(name, index))
        if name == "__class__" and isinstance(value, type):
            # (`__class__` is the cell super() reads: set when the class is made, never rebound)
            return self.wrap(value, None, guard=False)
        # Torch's own code too: its closures hold the user's functions (the function a
        # `@torch.no_grad()` decorator wraps), which the guards must pin.
        source = self._cell_source(index)
        if source is None:
            raise Unsupported(f"free variable {name!r} of an inlined function reached without a source")
        return self.wrap(value, AttrSource(source, "cell_contents"))

    def super_class(self) -> Any:
        """The class in the `__class__` cell, for a zero-argument `super()`: what
        `read_free_var("__class__").as_python_constant()` gives. In an inlined method the cell holds
        the class the class statement made (no code can rebind it), which read_free_var wraps
        unguarded; once the trace has seen that tracker give the class back, a later read of a
        cell holding that class takes it from the cell without wrapping it again (a class with its
        own `__getattribute__` calls super() at every attribute read)."""
        cell = self._own_class_cell()
        if cell is not None:
            try:
                value = cell.cell_contents
            except ValueError:
                value = None
            if value is not None and self.root.super_classes.get(id(value)) is value:
                return value
        cls = self.read_free_var("__class__").as_python_constant()
        if cell is not None and isinstance(cls, type) and cls is getattr(cell, "cell_contents", None):
            self.root.super_classes[id(cls)] = cls
        return cls

    def _own_class_cell(self) -> Any:
        """The real `__class__` cell of an inlined function, when read_free_var reads it from the
        cell itself (not a function made in the trace, nor a cell the root frame or an earlier
        store of the trace gives the value of); else None."""
        if self.parent is None or "__class__" in self.closure_refs:
            return None
        cell = self.closure[self.code.co_freevars.index("__class__")]
        if self.root.passed_cell_name(cell) is not None or self.side_effects.known_cell(cell) is not None:
            return None
        return cell

    def _cell_source(self, index: int) -> Source | None:
        """Where the transformed code finds this function's closure cell `index` (the cell object):
        the root frame's own (LOAD_CLOSURE), or an inlined function's `fn.__closure__[i]`."""
        if self.parent is None:
            return FreeCellSource(self.code.co_freevars[index], index)
        fn_source = self.function_source()
        if fn_source is not None:
            return ItemSource(AttrSource(fn_source, "__closure__"), index)
        return None

    def _same_cell(self, tracker: VariableTracker, source: Source | None, cell: Any) -> None:
        """The trace relies on the cell found at `source` being the cell `tracker` stands for,
        reached before another way (a setter and a getter made by one call share it): both ways
        are guarded by the cell's identity. (The root frame's own cells cannot be read by a guard;
        the other functions' are.)"""
        if source == tracker.source:
            return
        if source is None:
            raise Unsupported(f"closure cell of {self.code.co_name}, shared with another function, reached "
                              f"without a source")
        for way in (tracker.source, source):
            if not isinstance(way, FreeCellSource):
                self.output.guards.add(way, GuardKind.ID_MATCH, cell)

    def cell_tracker(self, cell: Any, source: Source | None) -> CellVariable:
        """The one tracker of the real closure cell `cell`, reached now at `source` (the cell
        object: `fn.__closure__[i]`), whichever function reached it first."""
        known = self.side_effects.known_cell(cell)
        if known is not None:
            self._same_cell(known, source, cell)
            return known
        if source is None:
            raise Unsupported("a closure cell reached without a source")
        return self.side_effects.track_cell(cell, CellVariable(cell, source))

    def closure_cell(self, name: str) -> CellVariable:
        """The tracker of this function's real closure cell for free variable `name`, through which
        stores to it are replayed after the graph."""
        index = self.code.co_freevars.index(name)
        return self.cell_tracker(self.closure[index], self._cell_source(index))

    def read_cell(self, tracker: CellVariable) -> VariableTracker:
        """`cell.cell_contents` (a cell read as `fn.__closure__[i]`): what the trace stored, or
        the contents, guarded."""
        shared = self.root.passed_cell_name(tracker.cell)
        if shared is not None:
            return self.root.read_local(shared)
        stored = self.side_effects.load_attr(tracker, "cell_contents")
        if stored is not None:
            return stored
        try:
            value = tracker.cell.cell_contents
        except ValueError as e:
            raise Unsupported("cell_contents of an empty cell") from e
        source = tracker.source
        return self.wrap(value, source.contents() if isinstance(source, FreeCellSource)
                         else AttrSource(source, "cell_contents"))

    def store_cell(self, tracker: CellVariable, value: VariableTracker) -> None:
        """`cell.cell_contents = value` for a cell that outlives the frame: replayed after the graph
        (a cell the root frame received as a resume function's argument is one of its locals)."""
        shared = self.root.passed_cell_name(tracker.cell)
        if shared is not None:
            self.root.locals[shared] = value
            return
        self.side_effects.store_attr(tracker, "cell_contents", value)

    def cell_reference(self, name: str, free: bool) -> CellReference:
        """The reference to this frame's cell (or free) variable `name` that closures hold."""
        key = (name, free)
        if key not in self.cell_references:
            self.cell_references[key] = CellReference(self, name, free)
        return self.cell_references[key]

    def passed_cell_name(self, cell: Any) -> str | None:
        """The local name under which this frame received `cell` itself (resume functions)."""
        for name in self.passed_cells:
            if self.cell_objects.get(name, self.frame_values.get(name)) is cell:
                return name
        return None

    def store_free_var(self, name: str, value: VariableTracker) -> None:
        if name in self.closure_refs:
            self.closure_refs[name].store(value)
            return
        cell = self.closure[self.code.co_freevars.index(name)]
        if self.parent is not None:
            shared = self.root.passed_cell_name(cell)
            if shared is not None:
                self.root.locals[shared] = value
                return
        # A cell that outlives the frame (the compiled closure's own, a counter made elsewhere): the
        # store is replayed after the graph, as `<cell>.cell_contents = value`.
        self.store_cell(self.closure_cell(name), value)

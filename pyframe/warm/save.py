"""`pyframe.save(path)`: write every cache entry of this process that another process can use.

For each compiled code object that can be found again by name (codes.py: module, qualified name,
hash), each of its entries is written: its guards as the calls that build their C++ tree (lowered
from what capture.py kept, recorded by tree.py) and their texts, with every object they compare by
identity written as a name (refs.py); its transformed code, whose constants are
named too, but for the entry's own objects: its compiled graphs (`("graph", i)`), its resume
functions and their codes (`("resume_fn", id)`, saved with their own entries), the record of a
graph call that may run its frame again (`("rerun", ...)`); and each graph, as torch.fx pickles a
GraphModule (its code), with its inputs' metadata to compile it again. With inductor (or any
backend whose caches torch keeps), torch's own cache artifacts are written too
(`torch.compiler.save_cache_artifacts`), so the recompile on load finds them.

An entry that cannot be written (a guard pinning an object no name finds, such as an
`nn.Module` instance compared by identity) is left out, and the report names it and why.
"""
from __future__ import annotations

import os
import pickle
import sys
import types
from dataclasses import dataclass, field
from typing import Any

import torch

from .. import _C, convert_frame, resume
from ..backends import CompiledGraph
from ..backends.compile import FirstCallCheck
from ..guard_tree import build_tree
from ..guards import Guard, GuardKind, KeysById
from ..rerun import Rerun
from ..source import ChildSource, GlobalSource
from .capture import CapturedGuards, LoadedGuardPart, RebuiltGuards
from .codes import code_hash
from .graphs import graph_to_data
from .format import SavedEntry, SavedResume, SavedUnit, write
from . import kernels
from .refs import ById, Unsaveable, dumps, unheld
from .tree import TreeRecorder
from .store import carried_units, recorded_artifacts, settings_of


@dataclass
class SaveReport:
    """What `pyframe.save` wrote, and what it left out (each entry by its code's name, and why)."""

    path: str
    size: int = 0
    units: int = 0
    entries: int = 0
    saved: list[str] = field(default_factory=list)     # the functions written, by qualified name
    left_out: list[tuple[str, str]] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"pyframe.save: {self.entries} entries of {self.units} functions written to {self.path} "
                 f"({self.size} bytes)"]
        lines += [f"  left out: {name}: {reason}" for name, reason in self.left_out]
        return "\n".join(lines)


def save(path: str | os.PathLike) -> SaveReport:
    """Write this process's cache entries to `path` (replacing it); see the module's docstring."""
    report = SaveReport(os.fspath(path))
    units = []
    for code in list(convert_frame.records.keys()):
        if code in resume.origins:
            continue  # written with the entries that call them
        unit = _unit(code, report)
        if unit is not None:
            units.append(unit)
    report.units, report.entries = len(units), sum(len(u.entries) for u in units)
    report.saved = [u.qualname for u in units]
    saved_keys = {u.key for u in units}
    units += [u for u in carried_units() if u.key not in saved_keys]  # loaded, not met here: kept
    report.size = write(path, units, _artifacts(units))
    return report


def _artifacts(units: list[SavedUnit]) -> dict | None:
    """The backends' own artifacts, when a backend other than eager made any entry: torch's cache
    artifacts (inductor's FX graph cache, aot_autograd's) and inductor's compiled kernels (kernels.py);
    for each, what a load read when this process made none."""
    if all(e.backend == "eager" for u in units for e in u.entries):
        return None
    loaded = recorded_artifacts() or {}
    saved = torch.compiler.save_cache_artifacts()
    archive = kernels.collect()
    return {"torch": saved[0] if saved is not None else loaded.get("torch"),
            "kernels": (kernels.machine_fingerprint(), archive) if archive is not None else loaded.get("kernels")}


def _unit(code: types.CodeType, report: SaveReport) -> SavedUnit | None:
    entries = [e for e in _C.get_cache_entries(code) if getattr(e.info, "saved", None) is not None]
    if not entries:
        return None
    module = entries[0].info.saved.module
    if module is None:
        report.left_out.append((convert_frame.describe(code), "its globals are no module's"))
        return None
    unit = SavedUnit(module, code.co_qualname, code_hash(code), [], {})
    writer = _UnitWriter(unit, report)
    for entry in reversed(entries):  # oldest first: the order they were made in
        saved = writer.entry(code, entry)
        if saved is not None:
            unit.entries.append(saved)
    return unit if unit.entries else None


class _UnitWriter:
    """Writes the entries of one code object, and of the resume functions they call."""

    def __init__(self, unit: SavedUnit, report: SaveReport) -> None:
        self.unit, self.report = unit, report
        self.resume_ids: dict[types.CodeType, int] = {}

    def entry(self, code: types.CodeType, entry: Any) -> SavedEntry | None:
        record = entry.info
        owner = entry.owner
        try:
            if owner is None:
                raise Unsaveable("the optimize() region that compiled it is gone")
            graphs = [_graph(g) for g in record.graphs]
            fns = _graph_callables(record.graphs)
            guards = _guard_part(code, entry.code, record.saved)
            persistent = _Persistent(self, code, fns)
            body = dumps(persistent.wrap(entry.code), persistent)
            resumes = list(persistent.resumes)
        except Unsaveable as e:
            self.report.left_out.append((record.name, str(e)))
            return None
        except Exception as e:  # noqa: BLE001 (a save never fails on one entry)
            self.report.left_out.append((record.name, f"{type(e).__name__}: {e}"))
            return None
        for rcode in resumes:
            self._resume(rcode)
        return SavedEntry(owner.backend_name, record.name,
                          pickle.dumps({"guards": guards, "graphs": graphs, "code": body, "settings": settings_of(owner),
                                        "reason": record.reason},
                                       protocol=pickle.HIGHEST_PROTOCOL))

    def resume_id(self, rcode: types.CodeType) -> int:
        return self.resume_ids.setdefault(rcode, len(self.resume_ids))

    def _resume(self, rcode: types.CodeType) -> None:
        rid = self.resume_id(rcode)
        if rid in self.unit.resumes:
            return
        info = resume.origins[rcode]
        persistent = _Persistent(self, rcode, {})
        saved = self.unit.resumes[rid] = SavedResume(
            dumps(persistent.wrap(rcode, as_value=True), persistent),
            dumps((info.offset, info.stack, info.args, info.added, info.break_line)))
        for r in persistent.resumes:
            self._resume(r)
        for entry in reversed([e for e in _C.get_cache_entries(rcode) if getattr(e.info, "saved", None) is not None]):
            written = self.entry(rcode, entry)
            if written is not None:
                saved.entries.append(written)


class _Persistent:
    """The entry's own objects in its transformed code: named by what they are to the entry."""

    def __init__(self, writer: _UnitWriter, code: types.CodeType, graph_fns: dict[int, int]) -> None:
        self.writer, self.code, self.graph_fns = writer, code, graph_fns
        self.resumes: list[types.CodeType] = []
        self.top: Any = None

    def wrap(self, obj: Any, as_value: bool = False) -> Any:
        self.top = obj if as_value else None
        return obj

    def __call__(self, obj: Any) -> Any:
        kind = type(obj)
        if kind is _C.CallbackScope:
            fn = obj.fn.fn if isinstance(obj.fn, FirstCallCheck) else obj.fn  # (before its first call)
            index = self.graph_fns.get(id(fn))
            if index is not None:
                return ("graph", index)
            if obj.callback is None:
                return ("disabled", obj.fn)
            raise Unsaveable("a function called with another compiler's callback")
        if kind is types.CodeType and obj is not self.top and _is_resume(obj):
            return ("resume_code", self._resume(obj))
        if kind is types.FunctionType and _is_resume(obj.__code__):
            return ("resume_fn", self._resume(obj.__code__), obj.__globals__)
        if kind is Rerun:
            target = obj.code_ref()
            which = "self" if target is self.code else self._resume(target) if _is_resume(target) else None
            if which is None:
                raise Unsaveable("a graph call's rerun record names code of another function")
            return ("rerun", which, obj.graph_name, obj.backend_name)
        return None

    def _resume(self, rcode: types.CodeType) -> int:
        if rcode not in self.resumes:
            self.resumes.append(rcode)
        return self.writer.resume_id(rcode)


def _is_resume(code: types.CodeType) -> bool:
    try:
        return code in resume.origins
    except TypeError:  # a code object holding an unhashable constant (a slice the codegen loads)
        return False


def _graph_callables(graphs: list[CompiledGraph]) -> dict[int, int]:
    """id() of each callable the transformed code may hold for a graph -> the graph's index."""
    fns: dict[int, int] = {}
    for i, g in enumerate(graphs):
        fns[id(g.fn)] = i
        fns[id(g.gm.forward)] = i
    return fns


def _graph(g: CompiledGraph) -> dict[str, Any]:
    """A graph as torch.fx pickles its module (the code), with its inputs' metadata."""
    inputs = [_input_meta(node) for node in g.gm.graph.nodes if node.op == "placeholder"]
    try:
        gm = graph_to_data(g.gm)
    except Unsaveable as e:
        raise Unsaveable(f"graph {g.name}: {e}") from e
    return {"name": g.name, "gm": gm, "inputs": inputs, "error": g.error}


def _input_meta(node: torch.fx.Node) -> tuple:
    """A placeholder's example, as store.py makes it again: ("tensor", dtype, device, sizes, strides,
    requires_grad), its sizes and strides ints or, with dynamic shapes, (expression, hint) pairs;
    ("symint", (expression, hint)); ("int", value)."""
    value = node.meta.get("example_value", node.meta.get("val"))
    if isinstance(value, torch.Tensor):
        return ("tensor", value.dtype, str(value.device), tuple(map(_size, value.shape)),
                tuple(map(_size, value.stride())), bool(value.requires_grad))
    if isinstance(value, torch.SymInt):
        return ("symint", _size(value))
    if isinstance(value, (int, float, bool)):
        return ("int", value)
    raise Unsaveable(f"graph input {node.name} has no example value")


def _size(n: Any) -> Any:
    """An int, or a symbolic size as (its expression's text, its value in the saving process)."""
    return n if type(n) is int else (str(n.node.expr), int(n.node.hint))


INSTALLED_PREFIX = "___pyframe_"  # (translator/instructions.py, install_global)


def _installed_globals(code: types.CodeType, saved: CapturedGuards) -> dict[str, ById]:
    """The globals the translator installed in the frame's module for this entry (a module another
    function reads its globals from, a function reached without a source), which its guards and
    code read: each by name, as the loading process installs them again."""
    names = {n for n in _names_of(code) if n.startswith(INSTALLED_PREFIX)}
    for g in saved.guards:
        root = g.source
        while isinstance(root, ChildSource):
            root = root.base
        if isinstance(root, GlobalSource) and root.global_name.startswith(INSTALLED_PREFIX):
            names.add(root.global_name)
    module_globals = sys.modules[saved.module].__dict__
    missing = [n for n in names if n not in module_globals]
    if missing:
        raise Unsaveable(f"the globals {missing} the entry reads are gone")
    return {name: ById(module_globals[name]) for name in sorted(names)}


def _names_of(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names_of(const)
    return names


def _guard_part(code: types.CodeType, transformed: types.CodeType, saved: CapturedGuards | LoadedGuardPart) -> dict:
    """What a load needs of an entry's guards: the calls that build its C++ tree (tree.py), with
    every object compared by identity written as a name; the guards' texts; the arguments they
    pin by identity; and the globals the translator installed for the entry."""
    if type(saved) is LoadedGuardPart:  # (an entry this process loaded: written again as it was read)
        return saved.part
    guards = RebuiltGuards([_by_id(g) for g in saved.guards], saved.global_state, saved.aliasing, saved.shape_guards)
    recorder = TreeRecorder()
    build_tree(guards, code, saved.exports, saved.grouped_inputs, root=recorder.root)
    return {"tree": dumps(recorder.calls), "texts": guards.texts(), "pinned": list(guards.pinned_locals()),
            "installed": dumps(_installed_globals(transformed, saved))}


def _by_id(g: Guard) -> Guard:
    """A guard whose value is compared by identity, marked so it is written as a name only (a code
    object no name finds: as the source its guard reads it at)."""
    if g.kind == GuardKind.ID_MATCH:
        return g.with_value(ById(unheld(g.value), g.source))
    if g.kind == GuardKind.DICT_KEYS_ID_MATCH:
        keys = tuple(ById(unheld(k)) if by_id else k for k, by_id in zip(g.value.keys, g.value.by_id))
        return g.with_value(KeysById(keys, g.value.by_id))
    return g

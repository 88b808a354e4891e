"""The entries `pyframe.load` read, waiting for their code to be met: the miss path asks here first.

`install(path)` reads a file (format.py) and keeps its units by (module, qualified name). When the
eval-frame hook misses on a code object for the first time, `lookup` finds its unit: a unit saved
for other bytecode (codes.py's hash), or by another pyframe, torch or Python, is not used, and a
warning names the function and why. The unit's entries (for the same backend) become candidates of
that code object; the first whose guards pass on the frame is built (its graphs compiled again by
the backend, with torch's cache artifacts loaded first, its transformed code's constants found
again: refs.py) and handed back to the hook, which installs and runs it: no translator runs. When
none passes, the miss compiles as it always does. A candidate whose guards cannot be rebuilt here
(a function they name has changed) is dropped, with a warning naming it.

The resume functions of a loaded entry are made here, once per unit, and their own saved entries
become the candidates of their codes, met when the resume function first runs.
"""
from __future__ import annotations

import logging
import os
import pickle
import types
import warnings
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable

import sympy
import torch

from .. import _C, config, gc_pause, resume
from ..backends import CompiledGraph, compile_with_backend
from ..backends.compile import written_for_dynamo
from ..fake.shapes import new_symbol, new_symbolic_mode
from ..guards import PinnedObject
from ..rerun import Rerun
from ..source import AttrSource, BuiltinSource, ClosureSource, DictItemSource, GenericAttrSource, GlobalSource, \
    ItemSource, LocalSource, Source
from .capture import LoadedGuardPart
from .codes import code_hash
from .graphs import graph_from_data
from .format import SavedEntry, SavedUnit, mismatch, read
from . import kernels
from .refs import CodeAtSource, Stale, Unsaveable, loads
from .tree import replay

log = logging.getLogger("pyframe")


@dataclass
class Loaded:
    """A saved entry made again in this process: what the miss path hands the hook."""

    code: types.CodeType
    root: Any                      # _C.RootGuardManager
    texts: list[str]               # the guards' texts, as the saving process wrote them
    pinned_locals: dict[str, PinnedObject]
    saved: LoadedGuardPart         # (so this process writes the entry again when it saves)
    graphs: list[CompiledGraph]
    resume_codes: list[types.CodeType]
    reason: str


@dataclass
class LoadReport:
    path: str
    units: int
    entries: int
    unusable: str | None = None    # why none of the file's entries is used (another version)

    def __str__(self) -> str:
        text = f"pyframe.load: {self.entries} entries of {self.units} functions read from {self.path}"
        return text + (f"; none used: {self.unusable}" if self.unusable else "")


@dataclass
class _Candidate:
    entry: SavedEntry
    unit: "_UnitContext"
    root: Any = None
    data: dict | None = None


@dataclass
class _UnitContext:
    """One unit met in this process: its code object, and the resume functions its entries call."""

    unit: SavedUnit
    path: str
    original: types.CodeType
    resume_codes: dict[int, types.CodeType] = field(default_factory=dict)


class _Store:
    def __init__(self) -> None:
        self.units: dict[tuple[str, str], tuple[SavedUnit, str]] = {}
        self.unusable: dict[tuple[str, str], str] = {}
        self.candidates: "weakref.WeakKeyDictionary[types.CodeType, list[_Candidate]]" = weakref.WeakKeyDictionary()
        self.met: "weakref.WeakSet[types.CodeType]" = weakref.WeakSet()
        self.used: set[tuple[str, str]] = set()
        self.artifacts: dict | None = None
        self.warned: set[tuple[str, str]] = set()


_store = _Store()


def clear() -> None:
    """Forget every loaded unit (pyframe.reset)."""
    global _store
    _store = _Store()


def install(path: str | os.PathLike) -> LoadReport:
    with gc_pause.paused():
        header, units, artifacts = read(path)
    path = os.fspath(path)
    why = mismatch(header)
    for unit in units:
        if why is not None:
            _store.unusable[unit.key] = why
        else:
            _store.units[unit.key] = (unit, path)
            _store.unusable.pop(unit.key, None)
    if artifacts is not None and why is None:
        if artifacts.get("kernels") is not None:  # (before torch's: its FX graph cache entries name them)
            kernels.restore(artifacts["kernels"][1], artifacts["kernels"][0])
        if artifacts.get("torch") is not None:
            torch.compiler.load_cache_artifacts(artifacts["torch"])
        _store.artifacts = artifacts
    return LoadReport(path, len(units), sum(len(u.entries) for u in units), why)


def carried_units() -> list[SavedUnit]:
    """The loaded units this process never met: a save keeps them."""
    return [unit for key, (unit, _) in _store.units.items() if key not in _store.used]


def recorded_artifacts() -> dict | None:
    return _store.artifacts


def has_units() -> bool:
    return bool(_store.units or _store.unusable or len(_store.candidates))


def settings_of(compiler: Any) -> tuple:
    """The settings of a compiler (convert_frame.Compiler) an entry is used under only if they are
    those it was made under: fullgraph, dynamic, whether a guard_filter_fn chose its guards."""
    return (compiler.fullgraph, compiler.dynamic, compiler.guard_filter_fn is not None)


def lookup(frame: Any, code: types.CodeType, compiler: Any, wrap_compiled: Callable[[Any], Any]) -> Loaded | None:
    """A loaded entry of `code` whose guards pass on `frame`, made ready to run for `compiler` (a
    convert_frame.Compiler: its backend compiles the graphs); None when none does."""
    backend, backend_name = compiler.backend, compiler.backend_name
    if code not in _store.met:
        _store.met.add(code)
        _meet(frame, code)
    candidates = _store.candidates.get(code)
    if not candidates:
        return None
    for candidate in list(candidates):
        if candidate.entry.backend != backend_name:
            continue
        try:
            if candidate.root is None:
                _build_guards(candidate, frame)
            if candidate.data["settings"] != settings_of(compiler):
                continue
            if not candidate.root.check(frame.f_locals, frame.f_globals, frame.f_builtins, frame.closure):
                if log.isEnabledFor(logging.DEBUG):  # (the failing guard found by a slower walk of the tree)
                    failure = candidate.root.first_failure(frame.f_locals, frame.f_globals, frame.f_builtins,
                                                           frame.closure)
                    log.debug("pyframe.load: an entry of %s.%s does not hold for this call: %s",
                              *candidate.unit.unit.key, failure)
                continue
            loaded = _make(candidate, code, frame, backend, backend_name, wrap_compiled)
        except Exception as e:  # noqa: BLE001 (Stale, Unsaveable, anything: a saved entry never breaks a call)
            candidates.remove(candidate)
            _warn(candidate.unit.unit, f"an entry cannot be used ({type(e).__name__}: {e})")
            continue
        candidates.remove(candidate)
        return loaded
    return None


def _meet(frame: Any, code: types.CodeType) -> None:
    """The first miss of `code`: its unit (by the frame's module and the code's qualified name), if
    it was saved for this code, makes the code's candidates; else a warning says why not."""
    module = frame.f_globals.get("__name__")
    key = (module, code.co_qualname)
    why = _store.unusable.get(key)
    if why is not None:
        _warn_key(key, why)
        return
    found = _store.units.get(key)
    if found is None:
        return
    unit, path = found
    _store.used.add(key)
    if unit.digest != code_hash(code):
        _warn(unit, "its code changed since it was saved")
        return
    context = _UnitContext(unit, path, code)
    _store.candidates[code] = [_Candidate(entry, context) for entry in unit.entries]


def _warn(unit: SavedUnit, why: str) -> None:
    _warn_key(unit.key, why)


def _warn_key(key: tuple[str, str], why: str) -> None:
    if (key, why) in _store.warned:
        return
    _store.warned.add((key, why))
    warnings.warn(f"pyframe.load: the saved entries of {key[0]}.{key[1]} are not used: {why}", stacklevel=3)


def _build_guards(candidate: _Candidate, frame: Any) -> None:
    """The candidate's C++ guard tree, made by the calls the saving process recorded (tree.py),
    their names resolved in this process (refs.py) and their code objects found through the frame
    (CodeAtSource)."""
    candidate.data = data = pickle.loads(candidate.entry.data)
    _install_globals(loads(data["guards"]["installed"]), frame.f_globals)
    calls = [_code_found(call, frame) if call[1] == "add_id_match" and type(call[2][0]) is CodeAtSource else call
             for call in loads(data["guards"]["tree"])]
    candidate.root = replay(calls, _C.RootGuardManager(config.skip_guards_on_unchanged_objects))


def _install_globals(installed: dict[str, Any], f_globals: dict) -> None:
    """The globals the saving translator installed in the frame's module (a module reached
    through them, a function without a source), installed again; one there already must be the same."""
    for name, value in installed.items():
        there = f_globals.setdefault(name, value)
        if there is not value:
            raise Stale(f"the global {name} holds another object")


def _code_found(call: tuple, frame: Any) -> tuple:
    """An ID_MATCH on a code object no name finds: the object its source reaches in this frame,
    if its bytecode is the saved one's (refs.CodeAtSource)."""
    node, method, (saved, *rest), makes, names_nodes = call
    found = _evaluate(saved.source, frame)
    if type(found) is not types.CodeType or code_hash(found) != saved.digest:
        raise Stale(f"{saved.source.name()} is not the code it was when saved")
    return (node, method, (found, *rest), makes, names_nodes)


def _evaluate(source: Source, frame: Any) -> Any:
    """The value at `source` in the frame at its entry (the sources a code object is found by)."""
    kind = type(source)
    if kind is LocalSource:
        return frame.f_locals[source.local_name]
    if kind is GlobalSource:
        return frame.f_globals[source.global_name]
    if kind is BuiltinSource:
        return frame.f_builtins[source.builtin_name]
    if kind is ClosureSource:
        return frame.closure[source.index].cell_contents
    if kind in (AttrSource, GenericAttrSource):
        return getattr(_evaluate(source.base, frame), source.attr)
    if kind in (ItemSource, DictItemSource):
        return _evaluate(source.base, frame)[source.key]
    raise Stale(f"no value at {source.name()} before the frame runs")


def _make(candidate: _Candidate, code: types.CodeType, frame: Any, backend: Callable, backend_name: str,
          wrap_compiled: Callable[[Any], Any]) -> Loaded:
    data, context = candidate.data, candidate.unit
    graphs = [_compile(g, backend, backend_name) for g in data["graphs"]]
    resumes: list[types.CodeType] = []

    def persistent_load(pid: tuple) -> Any:
        kind = pid[0]
        if kind == "graph":
            return wrap_compiled(graphs[pid[1]].checked_fn())
        if kind == "disabled":
            return _C.CallbackScope(pid[1], None)
        if kind == "resume_code":
            return _resume_code(context, pid[1], resumes)
        if kind == "resume_fn":
            rcode = _resume_code(context, pid[1], resumes)
            return types.FunctionType(rcode, pid[2], rcode.co_name)
        if kind == "rerun":
            target = code if pid[1] == "self" else _resume_code(context, pid[1], resumes)
            return Rerun(weakref.ref(target), pid[2], pid[3])
        raise Unsaveable(f"unknown persistent id {pid!r}")

    transformed = loads(data["code"], persistent_load)
    part = data["guards"]  # (save.py's _guard_part)
    pinned = {name: PinnedObject.of(frame.f_locals[name]) for name in part["pinned"]}
    return Loaded(transformed, candidate.root, part["texts"], pinned, LoadedGuardPart(context.unit.module, part), graphs,
                  resumes, f"loaded from {context.path}")


def _resume_code(context: _UnitContext, rid: int, made: list[types.CodeType]) -> types.CodeType:
    rcode = context.resume_codes.get(rid)
    if rcode is None:
        saved = context.unit.resumes[rid]

        def persistent_load(pid: tuple) -> Any:
            if pid[0] == "resume_code":
                return _resume_code(context, pid[1], made)
            raise Unsaveable(f"unexpected persistent id {pid!r} in a resume function")

        rcode = context.resume_codes[rid] = loads(saved.code, persistent_load)
        offset, stack, args, added, break_line = loads(saved.info)
        resume.origins[rcode] = resume.ResumeInfo(weakref.ref(context.original), offset, stack, args, added,
                                                  break_line)
        _store.candidates[rcode] = [_Candidate(entry, context) for entry in saved.entries]
        _store.met.add(rcode)
    if rcode not in made:
        made.append(rcode)
    return rcode


def _compile(saved: dict, backend: Callable, backend_name: str) -> CompiledGraph:
    """A saved graph compiled again by the backend (from torch's caches, when it keeps them)."""
    gm = graph_from_data(saved["gm"], examples=written_for_dynamo(backend))
    gm.meta["pyframe_name"] = saved["name"]
    symbolic = any(type(n) is tuple for meta in saved["inputs"] for n in _sizes_of(meta))
    mode = new_symbolic_mode() if symbolic else None
    symbols: dict[str, Any] = {}
    examples = [_example(meta, mode, symbols) for meta in saved["inputs"]]
    placeholders = [node for node in gm.graph.nodes if node.op == "placeholder"]
    for node, example in zip(placeholders, examples):  # (as a trace leaves them: a later save reads them)
        node.meta.setdefault("example_value", example)
    if saved["error"] is not None:  # its backend failed when it was made: it ran eagerly then too
        return CompiledGraph(saved["name"], gm, gm.forward, backend_name, error=saved["error"])
    return compile_with_backend(backend, backend_name, gm, examples, saved["name"], mode)


def _sizes_of(meta: tuple) -> tuple:
    if meta[0] == "tensor":
        return (*meta[3], *meta[4])
    return (meta[1],) if meta[0] == "symint" else ()


def _example(meta: tuple, mode: Any, symbols: dict[str, Any]) -> Any:
    """A graph input's example: a real tensor of the saved metadata, or with dynamic shapes a
    FakeTensor (a SymInt) over symbols of a fresh ShapeEnv, hinted with the saving process's values."""
    if meta[0] == "int":
        return meta[1]
    if meta[0] == "symint":
        return _symint(meta[1], mode, symbols)
    _, dtype, device, sizes, strides, requires_grad = meta
    if mode is None:
        return torch.empty_strided(sizes, strides, dtype=dtype, device=device, requires_grad=requires_grad)
    sizes = [_symint(n, mode, symbols) for n in sizes]
    strides = [_symint(n, mode, symbols) for n in strides]
    with mode:
        fake = torch.empty_strided(sizes, strides, dtype=dtype, device=device)
    return fake.requires_grad_(requires_grad)


def _symint(size: Any, mode: Any, symbols: dict[str, Any]) -> Any:
    if type(size) is int:
        return size
    text, hint = size
    shape_env = mode.shape_env
    expr = sympy.sympify(text, locals=symbols)
    for free in sorted(expr.free_symbols, key=str):
        if free.name not in symbols:  # a size of its own (the first size naming it gives its hint)
            if expr != free:
                raise Unsaveable(f"size {text} names a symbol no input size is")
            symbols[free.name] = new_symbol(mode, hint, LocalSource(f"warm_{free.name}"))
    expr = sympy.sympify(text, locals=symbols)
    return shape_env.create_symintnode(expr, hint=hint)

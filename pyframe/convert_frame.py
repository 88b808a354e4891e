"""The miss path: what the eval-frame hook calls when no cache entry of a code object matches.

`Compiler(backend)` is the callback installed by `optimize()`. For each frame it decides: skip the
code for good (generators, module bodies, and what trace_rules.py says is not user code),
stop compiling it (past `config.recompile_limit`), or translate it into a new cache entry
(transformed code, guard tree, and a FrameRecord kept for explain() and pyframe.debug).

Error policy: Unsupported (or any failure inside pyframe) makes the frame run as plain Python,
with the reason recorded; with fullgraph=True Unsupported reaches the user instead.
BackendCompilerFailed reaches the user only when config.suppress_errors is False.
"""
from __future__ import annotations

import functools
import inspect
import logging
import re
import sys
import threading
import time
import types
import warnings
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

import torch

from . import _C, config, gc_pause, logs, markers, resume, structured_trace, trace_rules
from .dynamo_interop import dynamo_code_reason, dynamo_is_compiling, hide_from_dynamo
from .backends import CompiledGraph
from .backends.compile import FirstCallCheck
from .backends.ddp import DDPSplitBackend, active_ddp_module, bucket_caps
from .exc import BackendCompilerFailed, InvalidCompileOption, RecompileError, Unsupported
from .fake.shapes import STATIC_ONLY, FrameSizes, NeedsSymbolicTrace, ShapePolicy, capturing, lower_guards
from .graph import OutputGraph
from .guard_filter import apply_guard_filter
from .guard_tree import build_tree
from .guards import PinnedObject
from .translator.hooks import TranslatorHooks
from .translator.translate import translate_frame
from .warm import store as warm_store
from .warm.capture import CapturedGuards, LoadedGuardPart, capture

log = logging.getLogger("pyframe")

_NOT_FUNCTION_FLAGS = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ITERABLE_COROUTINE | \
    inspect.CO_ASYNC_GENERATOR
_compile_lock = threading.RLock()
# Codes traced even though their file is skipped: forward() of modules given to optimize().
force_trace: "weakref.WeakSet[types.CodeType]" = weakref.WeakSet()
# Codes of the functions given to optimize(): compiled even when their frame holds no tensor.
always_compile: "weakref.WeakSet[types.CodeType]" = weakref.WeakSet()


@dataclass
class FrameRecord:
    """What happened to one frame on a cache miss (kept with its cache entry, and in `records`)."""

    name: str                                     # the code's name, file and line, for messages
    # "compiled"; "skipped" (pyframe could not compile it); "skipped_by_rule" (run as Python by a
    # rule torch._dynamo follows too: a graph break inside a loop); "run_only" (recompile limit)
    status: str
    reason: str                                   # why: "first compile", the failing guard, the skip cause
    graphs: list[CompiledGraph] = field(default_factory=list)
    guards: list[str] = field(default_factory=list)
    transformed: types.CodeType | None = None
    compile_seconds: float = 0.0
    error: Unsupported | None = None              # the graph break (compiled) or the cause (skipped)
    resume_codes: list[types.CodeType] = field(default_factory=list)
    # The frame's arguments its guards pin by identity (`self` of a module's forward): the
    # recompile limit counts the entries made for the objects a call brings.
    pinned_locals: dict[str, PinnedObject] = field(default_factory=dict)
    # What pyframe.save writes of the entry's guards (warm/capture.py): those it compiled, or
    # those it loaded as their file held them; None: not saveable
    saved: CapturedGuards | LoadedGuardPart | None = None


# The records of each code object, dropped with the code object (a record holds its graphs).
records: "weakref.WeakKeyDictionary[types.CodeType, list[FrameRecord]]" = weakref.WeakKeyDictionary()


# How many frames the translator ran on, and how many misses a loaded entry answered (pyframe.load):
# the tests count a warm first call's translations with these.
counters: dict[str, int] = {"translations": 0, "loaded": 0}


# Automatic dynamic shapes: the sizes each code's frames have seen (fake/shapes.py, FrameSizes), by
# (file, first line, name) as torch._dynamo keys them: the resume functions of one break share them.
frame_sizes: dict[tuple[str, int, str], FrameSizes] = {}


def records_for(code: types.CodeType) -> list[FrameRecord]:
    """What happened on each cache miss of `code`, oldest first."""
    return records.get(code, [])


def reset() -> None:
    """Drop every cache entry of every code object, and what pyframe recorded about them."""
    _C.reset()
    records.clear()
    frame_sizes.clear()
    warm_store.clear()


def describe(code: types.CodeType) -> str:
    return f"{code.co_name} ({code.co_filename}:{code.co_firstlineno})"


def skip_reason(code: types.CodeType) -> str | None:
    """Why this code is never traced, or None."""
    if code.co_flags & _NOT_FUNCTION_FLAGS:
        return "generator or coroutine"
    if not code.co_flags & inspect.CO_OPTIMIZED:
        return "module or class body"
    if code in force_trace:
        return None
    dynamo_reason = dynamo_code_reason(code)
    if dynamo_reason is not None:
        return dynamo_reason
    if code is markers.torch_nonrecursive_wrapper_code():  # (its file is one pyframe traces)
        return "the wrapper of torch.compiler.disable(fn, recursive=False)"
    # A named tuple's generated __new__ (made by exec) only builds the tuple.
    if code.co_filename == "<string>" and code.co_name == "__new__":
        return "generated code <string>"
    # A class's own __getattribute__ runs for every attribute read of its instances, the reads
    # its own guards would make of `self` included: compiled on its own, it would re-enter itself.
    # (Inside a traced frame it is inlined.)
    if code.co_name == "__getattribute__":
        return "an attribute lookup hook (__getattribute__)"
    return trace_rules.frame_skip_reason(code)


_NO_TENSOR = "no tensor-related objects found in frame"
_NUMPY_MODULES = ("numpy", "numpy.fft", "numpy.linalg", "numpy.random", "numpy.random.mtrand")


def has_tensor_in_frame(code: types.CodeType, f_locals: dict[str, Any], f_globals: dict[str, Any],
                        closure: tuple | None) -> bool:
    """torch._dynamo's test of whether a frame is worth compiling (convert_frame.has_tensor_in_frame),
    kept exactly, since it decides which frames make graphs: the code names a global that is torch,
    a module of torch, numpy or a numpy function or array; or an argument or a closure variable is a
    tensor, a module or a module class, or holds one in a list, tuple, dict or named tuple (not in
    a torch.return_types structseq, which has no `_fields`, nor in any other object)."""
    for name in code.co_names:
        if name in f_globals and _is_torch_or_numpy(f_globals[name]):
            return True
    seen: dict[int, bool] = {}
    # (a resume function gets the original frame's cell variables as cells: their contents count,
    # as they would in the original frame, where 3.11 holds a cell variable's raw value at entry)
    values = [*(_cell_contents(v) if type(v) is types.CellType else v for v in f_locals.values()),
              *(_cell_contents(cell) for cell in closure or ())]
    return any(_has_tensor(value, seen) for value in values)


def _is_torch_or_numpy(obj: Any) -> bool:
    if isinstance(obj, types.ModuleType) and (obj is torch or obj.__name__.startswith("torch.")):
        return True
    np = sys.modules.get("numpy")
    if np is None:
        return False
    return obj is np or isinstance(obj, (np.ndarray, np.generic)) or (
        callable(obj) and getattr(obj, "__module__", None) in _NUMPY_MODULES)


def _cell_contents(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # empty
        return None


def _has_tensor(obj: Any, seen: dict[int, bool]) -> bool:
    if id(obj) in seen:
        return seen[id(obj)]
    seen[id(obj)] = False
    kind = type(obj)
    if isinstance(obj, (torch.Tensor, torch.nn.Module)) or (kind is type and issubclass(obj, torch.nn.Module)):
        found = True
    elif "numpy" in sys.modules and isinstance(obj, (sys.modules["numpy"].ndarray, sys.modules["numpy"].generic)):
        found = True
    elif kind in (list, tuple):
        found = any(_has_tensor(v, seen) for v in obj)
    elif kind is dict:
        found = any(_has_tensor(v, seen) for v in list(obj.values()))
    elif isinstance(obj, tuple) and isinstance(getattr(kind, "_fields", None), tuple) and callable(getattr(kind, "_make", None)):
        found = any(_has_tensor(getattr(obj, f), seen) for f in obj._fields)  # a named tuple
    else:
        found = False
    seen[id(obj)] = found
    return found


# The stances (torch.compiler.set_stance's), by the code `_C.stance()` gives: force_eager is acted on
# in C (a region entered under it runs with the callback off); the other two on a miss, here.
STANCES = ("default", "force_eager", "eager_on_recompile", "fail_on_recompile")
DEFAULT, FORCE_EAGER, EAGER_ON_RECOMPILE, FAIL_ON_RECOMPILE = range(len(STANCES))
_unfollowed_stances: set[str] = set()


def torch_stance_code(stance: Any) -> int:
    """The code of torch.compiler's stance (a torch._dynamo DynamoStance), for `_C.stance()`. Its
    `skip_guard_eval_unsafe` is honoured by checking every guard, which is always safe; a stance
    pyframe does not offer ("eager_then_compile", a `force_backend`) leaves pyframe's regions
    compiling as by default, with one warning."""
    name = getattr(stance, "stance", "default")
    unfollowed = name if name not in STANCES else ("force_backend" if getattr(stance, "backend", None) is not None
                                                  else None)
    if unfollowed is not None and unfollowed not in _unfollowed_stances:
        _unfollowed_stances.add(unfollowed)
        warnings.warn(f"pyframe does not follow torch.compiler.set_stance's {unfollowed!r}: pyframe's regions "
                      f"compile as under the default stance", stacklevel=2)
    return STANCES.index(name) if name in STANCES else DEFAULT


_C.watch_torch_stance(torch_stance_code)


class GuardFail(NamedTuple):
    """What `guard_fail_fn` is given (torch._dynamo.types.GuardFail's fields): the first guard of
    a cache entry that a call failed, and the code object whose entry it is."""

    reason: str
    orig_code: types.CodeType


class Compiler:
    """The per-thread eval-frame callback installed by pyframe.optimize(backend)."""

    def __init__(self, backend: Callable, backend_name: str, fullgraph: bool = False,
                 observer: Callable[[types.CodeType, FrameRecord], None] | None = None,
                 dynamic: bool | None = None, sizes: dict | None = None, guard_fail_fn: Callable | None = None,
                 guard_filter_fn: Callable | None = None):
        self.backend = backend
        self.guard_filter_fn = guard_filter_fn  # the user's say over each entry's guards (guard_filter.py)
        self.guard_fail_fn = guard_fail_fn  # told of each entry's failed guard before a recompile
        self.backend_name = backend_name
        self.fullgraph = fullgraph
        self.dynamic = dynamic  # torch.compile's `dynamic` (fake/shapes.py, ShapePolicy)
        # the sizes seen, for automatic dynamic: the process's (`frame_sizes`), or a store of its own
        self.sizes = frame_sizes if sizes is None else sizes
        self.observer = observer  # told of every record (explain() collects a run's records)
        self._limit_warned: "weakref.WeakSet[types.CodeType]" = weakref.WeakSet()

    def __call__(self, frame: Any) -> Any:
        code = frame.f_code
        reason = skip_reason(code)
        if reason is not None:
            return _C.SKIP
        if markers.called_from_nonrecursive_wrapper(sys._getframe(1)):
            # disable(fn, recursive=False): fn's frame (its caller is the wrapper: the hook calls
            # this before the frame runs) is run as Python, this once; what it calls is compiled.
            return None
        if dynamo_is_compiling():
            # torch._dynamo's compiler at work under our region: what it runs is its machinery, run
            # as Python this time (not marked: the same code may be user code another time).
            return None
        if torch._C._are_functorch_transforms_active():
            # Called inside torch.func's vmap or grad run as Python (its inputs are the transform's
            # wrappers, which the trace does not take and TENSOR_MATCH rejects): run as Python this
            # once, not marked, so the code still compiles when called on plain tensors.
            return None
        # One miss at a time, process-wide: the translator's FakeTensorMode, memos and the records
        # are shared, and two threads missing on the same inputs must make one entry, not two.
        with _compile_lock, gc_pause.paused():  # (the collector off while compiling: gc_pause.py)
            return self._miss(frame, code)

    def _miss(self, frame: Any, code: types.CodeType) -> Any:
        entries = [e for e in _live_entries(code) if e.owner is self]
        failures = [e.guards.first_failure(frame.f_locals, frame.f_globals, frame.f_builtins, frame.closure)
                    for e in entries]
        if any(f is None for f in failures):
            # Another thread installed an entry for these inputs while this one waited: run the
            # frame as Python this once (eager's result); the next call hits that entry.
            return None
        if code not in always_compile and not has_tensor_in_frame(code, frame.f_locals, frame.f_globals, frame.closure):
            # torch._dynamo's rule: such a frame runs as Python, now and on every later call
            self._record(code, FrameRecord(describe(code), "skipped_by_rule", _NO_TENSOR))
            return _C.RUN_ONLY if entries else _C.SKIP
        changes = [_what_changed(str(f), frame) for f in failures]
        why = "first compile" if not entries else "guard failed: " + "; ".join(changes)
        stance = _C.stance()
        if stance == EAGER_ON_RECOMPILE:
            return None  # run as Python this once; its entries still serve the calls they pass
        if stance == FAIL_ON_RECOMPILE:
            raise RecompileError(f"{describe(code)} would compile while the stance is 'fail_on_recompile' "
                                 f"(pyframe.set_stance or torch.compiler.set_stance): {why}")
        if self.guard_fail_fn is not None:
            for change in changes:
                self._tell_guard_failed(change, code)
        if structured_trace.is_on():
            # TORCH_TRACE or PYFRAME_TRACE: this compile's records (and torch's, made inside it)
            # carry its compile id, for tlparse
            with structured_trace.compiling(code, len(entries), changes) as trace:
                return self._compile(frame, code, entries, why, trace)
        return self._compile(frame, code, entries, why, None)

    def _compile(self, frame: Any, code: types.CodeType, entries: list, why: str,
                 trace: structured_trace.CompileTrace | None) -> Any:
        """The recompile limits, then a translation of the frame into a new cache entry."""
        same_objects = sum(1 for e in entries if _pins_match(e.info, frame.f_locals))
        if same_objects >= config.recompile_limit:
            return self._over_limit(code, why, "recompile_limit", config.recompile_limit, trace)
        if len(entries) >= config.accumulated_recompile_limit:
            return self._over_limit(code, why, "accumulated_recompile_limit", config.accumulated_recompile_limit,
                                    trace)
        loaded = self._warm_lookup(frame, code, entries)
        if loaded is not None:
            return loaded
        start = time.perf_counter()
        try:
            sizes = self.sizes.setdefault(_sizes_key(code), FrameSizes())
            policy = ShapePolicy(self.dynamic, sizes, **capturing(self.fullgraph))
            try:
                result, guards, root = self._translate(frame, code, policy, symbolic=False)
            except NeedsSymbolicTrace:
                try:
                    result, guards, root = self._translate(frame, code, policy, symbolic=True)
                except (Unsupported, BackendCompilerFailed):
                    raise
                except Exception as e:  # (ShapeGuardError, or a gap in symbolic tracing): static shapes
                    log.debug("pyframe: %s with dynamic shapes failed (%s: %s); compiling it with static shapes",
                              code.co_name, type(e).__name__, e)
                    result, guards, root = self._translate(frame, code, STATIC_ONLY, symbolic=False)
        except Unsupported as e:
            if self.fullgraph:
                raise
            return self._give_up(code, entries, e.without_tracebacks(), str(e),
                                 "skipped_by_rule" if e.by_rule else "skipped", trace)
        except (BackendCompilerFailed, InvalidCompileOption):  # (the user's guard_filter_fn answered wrong)
            raise
        except Exception as e:  # a bug in pyframe must never change the user's result
            log.warning("pyframe: internal error compiling %s, running it normally", code.co_name, exc_info=True)
            return self._give_up(code, entries, None, f"internal error: {type(e).__name__}: {e}", trace=trace)
        record = FrameRecord(describe(code), "compiled", why, result.graphs, guards.texts(), result.code,
                             time.perf_counter() - start, result.break_reason, result.resume_codes,
                             guards.pinned_locals())
        record.saved = _capture(guards, result, frame)
        self._record(code, record)
        if entries:
            log.debug("recompiling %s: %s", code.co_name, why)
        if logs.enabled or trace is not None:
            logs.frame_compiled(code, record, recompile=bool(entries), trace=trace)
        return (result.code, root, record)

    def _warm_lookup(self, frame: Any, code: types.CodeType, entries: list) -> Any:
        """An entry pyframe.load read for this code whose guards pass on the frame (warm/store.py),
        as the hook installs it; None when there is none (the miss compiles)."""
        if not warm_store.has_units():
            return None
        loaded = warm_store.lookup(frame, code, self, disable_wrap)
        if loaded is None:
            return None
        counters["loaded"] += 1
        record = FrameRecord(describe(code), "compiled", loaded.reason, loaded.graphs, loaded.texts, loaded.code, 0.0,
                             None, loaded.resume_codes, loaded.pinned_locals)
        record.saved = loaded.saved  # (so this process saves it again)
        self._record(code, record)
        return (loaded.code, loaded.root, record)

    def _tell_guard_failed(self, reason: str, code: types.CodeType) -> None:
        """guard_fail_fn(GuardFail(reason, code)), as torch._dynamo calls it: what it raises is
        logged, and the call goes on."""
        try:
            self.guard_fail_fn(GuardFail(reason, code))
        except Exception:  # noqa: BLE001 (a user's callback must not change the call)
            log.exception("pyframe: guard_fail_fn raised; the call goes on")

    def _translate(self, frame: Any, code: types.CodeType, shapes: ShapePolicy, symbolic: bool) -> tuple:
        """One translation of the frame: (its TranslateResult, its GuardSet, the lowered guard tree)."""
        counters["translations"] += 1
        outputs: list[OutputGraph] = []
        backend = self.backend
        ddp = active_ddp_module() if config.optimize_ddp else None
        if ddp is not None:  # its graphs are split at DDP's gradient buckets (backends/ddp.py)
            backend = DDPSplitBackend(backend, *bucket_caps(ddp))

        def make_output() -> OutputGraph:
            outputs.append(OutputGraph(backend, self.backend_name, symbolic, shapes))
            return outputs[-1]

        hooks = TranslatorHooks(make_output, disable_wrap, wrap_with_callback, _is_pyframe_wrapper,
                                _C.tuple_iterator_rest, _C.class_version)
        # (a function given to optimize() is compiled even when it traces no op: its entry stays)
        result = translate_frame(code, frame.f_locals, frame.f_globals, frame.f_builtins, frame.closure,
                                 hooks, self.fullgraph, skip_without_ops=code not in always_compile)
        output = outputs[-1]
        if output.symbolic:
            output.guards.shape_guards = lower_guards(output.shape_env, output.symbolic_tensors, output.symbolic_ints)
        if self.guard_filter_fn is not None:
            apply_guard_filter(output.guards, self.guard_filter_fn, frame.f_locals, frame.f_globals)
        return result, output.guards, build_tree(output.guards, code, result.exports, result.grouped_inputs)

    def _record(self, code: types.CodeType, record: FrameRecord) -> None:
        records.setdefault(code, []).append(record)
        if self.observer is not None:
            self.observer(code, record)

    def _give_up(self, code: types.CodeType, entries: list, error: Unsupported | None, reason: str,
                 status: str = "skipped", trace: structured_trace.CompileTrace | None = None) -> Any:
        record = FrameRecord(describe(code), status, reason, error=error)
        self._record(code, record)
        log.debug("running %s normally: %s", code.co_name, reason)
        if logs.enabled or trace is not None:
            logs.frame_run_normally(record, trace)
        # Keep entries made for other inputs; a code that never compiled is not tried again.
        return _C.RUN_ONLY if entries else _C.SKIP

    def _over_limit(self, code: types.CodeType, why: str, setting: str, limit: int,
                    trace: structured_trace.CompileTrace | None) -> Any:
        if code not in self._limit_warned:
            self._limit_warned.add(code)
            warnings.warn(f"pyframe: {describe(code)} hit config.{setting} ({limit}); running it eagerly "
                          f"from now on. Last recompile reason: {why}", stacklevel=2)
            if logs.enabled:
                logs.recompile_limit(describe(code), limit, why)
        record = FrameRecord(describe(code), "run_only", f"recompile limit: {why}")
        self._record(code, record)
        if trace is not None:
            trace.frame_run_normally(record, "RecompileLimitExceeded")
        return _C.RUN_ONLY


# torch._dynamo never traces pyframe's compiler, nor the first call of a compiled graph (the two
# ways into pyframe's Python machinery from a frame), when a pyframe region runs inside its own.
hide_from_dynamo(Compiler.__call__.__code__, FirstCallCheck.__call__.__code__)


_TENSOR_CHECK = re.compile(r"check_tensor\((?P<source>.*?), (?P<type>[\w.]+), (?P<dtype>torch\.\w+), device=.*?, "
                           r"size=\[(?P<size>[^\]]*)\], stride=\[(?P<stride>[^\]]*)\]")


def _what_changed(failure: str, frame: Any) -> str:
    """A failed TENSOR_MATCH's text, followed by what differs in the frame's tensor now (`L['x']
    size()[0]: 10 -> 4`), as torch._dynamo's recompile reasons name the size that changed."""
    match = _TENSOR_CHECK.match(failure)
    if match is None:
        return failure
    try:  # (a source's name is Python over the frame's locals `L` and globals `G`)
        value = eval(match["source"], {"L": frame.f_locals, "G": frame.f_globals, "__builtins__": {}})  # noqa: S307
    except Exception:  # noqa: BLE001 (the text alone then)
        return failure
    if not isinstance(value, torch.Tensor):
        return f"{failure} ({match['source']} is now a {type(value).__name__})"
    changes = [f"dtype: {match['dtype']} -> {value.dtype}"] if str(value.dtype) != match["dtype"] else []
    for what, expected, actual in (("size", match["size"], value.shape), ("stride", match["stride"], value.stride())):
        wanted = [None if n.strip() == "None" else int(n) for n in expected.split(",") if n.strip()]
        if len(wanted) != len(actual):
            changes.append(f"{what}(): {len(wanted)} dimensions -> {len(actual)}")
            continue
        changes += [f"{what}()[{i}]: {w} -> {a}" for i, (w, a) in enumerate(zip(wanted, actual)) if w is not None and w != a]
    return f"{failure} ({match['source']} {'; '.join(changes)})" if changes else failure


def _capture(guards: Any, result: Any, frame: Any) -> CapturedGuards | None:
    """What pyframe.save will write of the entry's guards; a failure here only makes it unsaveable."""
    try:
        return capture(guards, result.exports, result.grouped_inputs, frame.f_globals)
    except Exception:  # noqa: BLE001 (never a reason to change the call)
        log.debug("pyframe: the guards of %s are not kept for pyframe.save", frame.f_code.co_name, exc_info=True)
        return None


def _sizes_key(code: types.CodeType) -> tuple[str, int, str]:
    """Whose sizes a code's frames share for automatic dynamic shapes: torch._dynamo's (file, first
    line, name), where a resume function is named after its original and the line of the break
    (`torch_dynamo_resume_in_fn_at_12`), so those of one break (both ways of an `if`) share them."""
    info = resume.origins.get(code)
    if info is not None and info.break_line is not None:
        original = info.original_ref()
        if original is not None:
            return (original.co_filename, info.break_line, f"resume_in_{original.co_name}")
    return (code.co_filename, code.co_firstlineno, code.co_name)


def _live_entries(code: types.CodeType) -> list:
    """The entries of `code`, after dropping those made for an object that has died since (an
    argument its guards pinned by identity: the trace read its id() or compared it by identity):
    they can never hit again, and would count toward the recompile limit of the objects after."""
    entries = []
    for entry in _C.get_cache_entries(code):
        pinned = getattr(entry.info, "pinned_locals", None) or {}
        if any(p.is_dead() for p in pinned.values()):
            _C.remove_cache_entry(code, entry.guards)
        else:
            entries.append(entry)
    return entries


def _pins_match(record: Any, f_locals: dict[str, Any]) -> bool:
    """The entry counts against the recompile limit of this call's objects: it was made for the
    objects the frame's arguments hold now, or pins none."""
    pinned = getattr(record, "pinned_locals", None) or {}
    return all(p.is_(f_locals.get(name)) for name, p in pinned.items())


def wrap_with_callback(fn: Callable, callback: Any = None) -> Any:
    """`fn` called with this thread's eval-frame callback set to `callback` (None: pyframe off),
    looking like `fn` (name, docstring, `__wrapped__`): what optimize(), disable() and run() return,
    and what the transformed code calls for a function pyframe.disable'd or torch._dynamo.disable'd."""
    wrapper = _C.CallbackScope(fn, callback)
    functools.update_wrapper(wrapper, fn)
    return wrapper


def _is_pyframe_wrapper(value: Any) -> bool:
    return isinstance(value, _C.CallbackScope)


def disable_wrap(fn: Callable) -> Callable:
    """Run `fn` (a compiled graph) with the hook off for this thread: its frames are not user code."""
    scope = _C.CallbackScope(fn, None)
    if isinstance(fn, FirstCallCheck):
        fn.scope = scope  # it takes itself out of the call once its check passes
    return scope

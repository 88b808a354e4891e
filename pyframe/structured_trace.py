"""The structured trace `tlparse` reads: torch._dynamo's records, written for pyframe's compiles.

    PYFRAME_TRACE=/tmp/trace python train.py     # read once, when pyframe is imported
    TORCH_TRACE=/tmp/trace python train.py       # torch's own switch: pyframe writes there too
    pyframe.set_logs(trace_dir="/tmp/trace")     # or from Python; set_logs() turns it off again
    tlparse /tmp/trace/dedicated_log_torch_trace_*.log -o tl_out --no-browser

The file is torch's: pyframe does not write one of its own. `torch._logging.trace_structured`
already formats a record (a glog-style line with a JSON header naming the record and its compile
id, then the payload, tab-indented) and sends it to the logger `torch.__trace`, whose handler
(`LazyTraceHandler`) opens one file per process in the trace directory on the first record.
TORCH_TRACE installs that handler when torch is imported; PYFRAME_TRACE installs one more, for
its own directory. The trace is on while that logger has a handler that writes (the one torch
installs by default, with no directory, removes itself on the first record).

A record's compile id comes from the CompileContext around it, which pyframe enters for each
compile (`compiling`, around everything the miss path does for the frame): so the records the
compile makes itself and those torch makes inside it (FakeTensors described as they are made,
AOTAutograd's and inductor's graphs when the backend is "inductor") share the id, as under
torch.compile. Ids are numbered as torch._dynamo numbers them, `frame_id/frame_compile_id`: a
number per code object in the order they are first compiled, then its compiles in order.
pyframe's numbers are its own: `pyframe.reset()` does not start them again (so an id is never
written twice to one file), and a process compiling with both engines writes both engines' ids,
which may coincide.

Per compile, the records torch._dynamo 2.13 writes (convert_frame.py, output_graph.py, guards.py,
symbolic_convert.py, utils.py): `artifact recompile_reasons` (a recompile: the guard that failed),
`dynamo_start` (the stack that called the frame), `artifact <name>_ORIGINAL_BYTECODE` and
`_MODIFIED_BYTECODE` (a resume function's code, before and after), `dynamo_output_graph` (each
graph's code with sizes), `artifact dynamo_graph_break_reason` (the break, or why the frame runs
as Python), `dynamo_cpp_guards_str` (the entry's guards), `compilation_metrics` (compile times,
counts of guards, ops, nodes and inputs; a failure's type and reason), and a `chromium_event` at
the compile's start and end (the timeline tlparse writes to chromium_events.json).

Where it sits: a leaf beside logs.py, importing nothing of pyframe; the records it is handed (a
convert_frame.FrameRecord, its graphs) are read by their fields. Nothing here runs unless the
trace is on: a miss asks `is_on()` once (a look at one list), and a cache hit never enters Python.
"""
from __future__ import annotations

import contextlib
import dis
import functools
import logging
import os
import time
import traceback
import types
import weakref
from typing import Any, Callable, Iterator

import torch
import torch._guards
import torch._logging._internal as torch_logging
import torch._logging.structured as structured

ENV_VAR = "PYFRAME_TRACE"
_log = logging.getLogger("pyframe")
RESUME_PREFIX = "__resume_at_"  # resume.py's names: their code is written before and after, as torch's are

# Frames left out of the stack that called a compiled frame: pyframe's, and `with compiling(...)`'s.
_NOT_USER_FILES = (os.path.dirname(os.path.abspath(__file__)) + os.sep, contextlib.__file__)

# The handler PYFRAME_TRACE / set_logs(trace_dir=...) installed on torch's trace logger, if any.
_handler: torch_logging.LazyTraceHandler | None = None

# Compile ids: a frame id per code object (kept as long as the code lives), compiles counted per frame id.
_frame_ids: "weakref.WeakKeyDictionary[types.CodeType, int]" = weakref.WeakKeyDictionary()
_compile_counts: dict[int, int] = {}


def is_on() -> bool:
    """torch's trace logger has a handler that writes (TORCH_TRACE, PYFRAME_TRACE or set_logs)."""
    for handler in torch_logging.trace_log.handlers:
        # the handler torch installs without TORCH_TRACE has no directory: it drops itself unused
        if not (isinstance(handler, torch_logging.LazyTraceHandler) and handler.root_dir is None):
            return True
    return False


def trace_dir() -> str | None:
    """The directory set by PYFRAME_TRACE or `set_logs(trace_dir=...)`, or None."""
    return None if _handler is None else _handler.root_dir


def set_trace_dir(directory: str | os.PathLike | None) -> None:
    """Write the trace to a new file in `directory` (made if missing, on the first record); None
    stops pyframe's handler (TORCH_TRACE's, which torch owns, is left as it is)."""
    global _handler
    if directory is not None and not isinstance(directory, (str, os.PathLike)):
        raise TypeError(f"trace_dir takes a directory (str or os.PathLike) or None, not {directory!r}")
    new = None if directory is None else os.path.abspath(os.fspath(directory))
    if new is not None and _handler is not None and _handler.root_dir == new:
        return
    if _handler is not None:
        torch_logging.trace_log.removeHandler(_handler)
        _handler.close()
        _handler = None
    if new is None:
        return
    trace_log = torch_logging.trace_log
    if any(isinstance(h, torch_logging.LazyTraceHandler) and h.root_dir is not None
           and os.path.abspath(h.root_dir) == new for h in trace_log.handlers):
        return  # TORCH_TRACE names the same directory: one file, not two with the same records
    _handler = torch_logging.LazyTraceHandler(new)
    _handler.setFormatter(torch_logging.TorchLogsFormatter(trace=True))
    # The handler torch installs without TORCH_TRACE removes itself from the logger on the first
    # record, while the logger goes through its handlers: the one after it would miss that record.
    for handler in list(trace_log.handlers):
        if isinstance(handler, torch_logging.LazyTraceHandler) and handler.root_dir is None:
            trace_log.removeHandler(handler)
    # as torch's _init_logs sets up its own: always DEBUG, never propagated to the root logger
    trace_log.setLevel(logging.DEBUG)
    trace_log.propagate = False
    trace_log.addHandler(_handler)


def _next_compile_id(code: types.CodeType) -> torch._guards.CompileId:
    frame_id = _frame_ids.get(code)
    if frame_id is None:
        frame_id = _frame_ids[code] = len(_compile_counts)
    count = _compile_counts.get(frame_id, 0)
    _compile_counts[frame_id] = count + 1
    return torch._guards.CompileId(frame_id=frame_id, frame_compile_id=count)


def _emit(name: str, metadata: Any, payload: Any = None) -> None:
    torch._logging.trace_structured(name, lambda: metadata, payload_fn=lambda: payload)


def _artifact(name: str, encoding: str, payload: Any) -> None:
    _emit("artifact", {"name": name, "encoding": encoding}, payload)


def _never_raises(method: Callable[..., None]) -> Callable[..., None]:
    """Writing the trace must not change the user's result: a failure here is logged, and the
    compile goes on."""

    @functools.wraps(method)
    def write(*args: Any) -> None:
        try:
            method(*args)
        except Exception:  # noqa: BLE001
            _log.warning("pyframe: writing the structured trace failed (%s); the compile goes on",
                         method.__name__, exc_info=True)

    return write


class CompileTrace:
    """One compile of a frame, while its CompileContext is entered: what the records need."""

    def __init__(self, code: types.CodeType, compile_id: torch._guards.CompileId, cache_size: int,
                 recompile_reasons: list[str]):
        self.code = code
        self.compile_id = compile_id
        self.cache_size = cache_size
        self.recompile_reasons = recompile_reasons
        self.start = time.time()
        self.stack: list[str] = []

    @_never_raises
    def timed(self, phase: str) -> None:
        """The compile's begin ("B") or end ("E") as a Chrome trace event: tlparse gathers them
        into chromium_events.json, a timeline for Perfetto, as it does torch._dynamo's."""
        _emit("chromium_event", {}, {"name": "entire_frame_compile", "ts": time.time_ns() / 1000, "ph": phase,
                                     "args": {"compile_id": str(self.compile_id), "fn_name": "pyframe"},
                                     "cat": "pyframe", "tid": 0, "pid": 0})

    @_never_raises
    def started(self) -> None:
        if self.recompile_reasons:
            reasons = self.recompile_reasons
            _artifact("recompile_reasons", "json", reasons[0] if len(reasons) == 1 else reasons)
        stack = _user_stack()
        frames = structured.from_traceback(stack) + [
            {"line": self.code.co_firstlineno, "name": self.code.co_name,
             "filename": structured.intern_string(self.code.co_filename)}]
        _emit("dynamo_start", {"stack": frames})
        self.stack = [f"Line: {f.lineno}, Name: {f.name}, Filename: {f.filename}" for f in stack] + [
            f"Line: {self.code.co_firstlineno}, Name: {self.code.co_name}, Filename: {self.code.co_filename}"]
        if self.code.co_name.startswith(RESUME_PREFIX):
            _artifact(f"{self.code.co_name}_ORIGINAL_BYTECODE", "string", dis.Bytecode(self.code).dis())

    @_never_raises
    def frame_compiled(self, record: Any) -> None:
        """A new cache entry: its graphs, its break, its bytecode, its guards, then the metrics."""
        graphs = list(record.graphs)
        for graph in graphs:
            _emit("dynamo_output_graph", {"sizes": _graph_sizes(graph.gm)},
                  graph.gm.print_readable(print_output=False, include_stride=True, include_device=True))
        if record.error is not None:
            _artifact("dynamo_graph_break_reason", "string", _break_text(record.error))
        if self.code.co_name.startswith(RESUME_PREFIX) and record.transformed is not None:
            _artifact(f"{self.code.co_name}_MODIFIED_BYTECODE", "string", dis.Bytecode(record.transformed).dis())
        guards = list(record.guards)
        _emit("dynamo_cpp_guards_str", {},
              f"pyframe guards of {record.name} ({len(guards)}):\n" + "\n".join(f"  {g}" for g in guards))
        nodes = [n for g in graphs for n in g.gm.graph.nodes]
        self._metrics(record, {
            "guard_count": len(guards),
            "shape_env_guard_count": sum(1 for g in guards if _is_shape_guard(g)),
            "graph_op_count": sum(1 for n in nodes if n.op in ("call_function", "call_method", "call_module")),
            "graph_node_count": len(nodes),
            "graph_input_count": sum(1 for n in nodes if n.op == "placeholder"),
            "backend_compile_time_s": round(sum(getattr(g, "seconds", 0.0) for g in graphs), 6),
            "has_guarded_code": True,
            "fail_type": None, "fail_reason": None,
        })

    @_never_raises
    def frame_run_normally(self, record: Any, fail_type: str) -> None:
        """pyframe gave up on the frame (or is past the recompile limit): it runs as plain Python."""
        error = record.error
        if error is not None:
            _artifact("dynamo_graph_break_reason", "string",
                      f"Graph break: the frame {record.name} runs as plain Python\n{_break_text(error)}")
        location = getattr(error, "location", None)
        self._metrics(record, {
            "has_guarded_code": False, "fail_type": fail_type, "fail_reason": record.reason,
            "fail_user_frame_filename": getattr(location, "filename", None),
            "fail_user_frame_lineno": getattr(location, "lineno", None),
        })

    def _metrics(self, record: Any, fields: dict[str, Any]) -> None:
        seconds = getattr(record, "compile_seconds", 0.0) or time.time() - self.start
        _emit("compilation_metrics", {
            "compile_id": str(self.compile_id),
            "frame_key": str(_frame_ids.get(self.code, -1) + 1),
            "co_name": self.code.co_name, "co_filename": self.code.co_filename,
            "co_firstlineno": self.code.co_firstlineno,
            "cache_size": self.cache_size, "accumulated_cache_size": self.cache_size,
            "start_time": self.start, "entire_frame_compile_time_s": round(seconds, 6),
            "restart_reasons": [], "dynamo_time_before_restart_s": 0.0,
            "non_compliant_ops": [], "compliant_custom_ops": [],
            "stack_trace": self.stack,
            "recompile_reason": "\n".join(self.recompile_reasons) or None,
            "num_graph_breaks": 1 if record.error is not None and record.status == "compiled" else 0,
            "pytorch_version": torch.__version__,
            "compiler": "pyframe",
            **fields,
        })


@contextlib.contextmanager
def compiling(code: types.CodeType, cache_size: int, recompile_reasons: list[str]) -> Iterator[CompileTrace]:
    """Everything inside is one compile of `code`: its records (and torch's) carry its compile id.
    `recompile_reasons`: for each older entry, the guard this call failed (none on a first compile)."""
    compile_id = _next_compile_id(code)
    with torch._guards.compile_context(torch._guards.CompileContext(compile_id)):
        trace = CompileTrace(code, compile_id, cache_size, recompile_reasons)
        trace.timed("B")
        trace.started()
        try:
            yield trace
        finally:
            trace.timed("E")


def _user_stack() -> list[traceback.FrameSummary]:
    """The Python stack that called the frame being compiled, without pyframe's own frames."""
    stack = traceback.extract_stack()
    return [f for f in stack if not f.filename.startswith(_NOT_USER_FILES)]


def _graph_sizes(gm: torch.fx.GraphModule) -> dict[str, list[int | str]]:
    """Each tensor node's size, as dynamo_output_graph's metadata gives it (a symbol as its text)."""
    sizes = {}
    for node in gm.graph.nodes:
        value = node.meta.get("example_value")
        if isinstance(value, torch.Tensor):
            sizes[node.name] = [d if isinstance(d, int) else str(d) for d in value.shape]
    return sizes


def _break_text(error: Any) -> str:
    """A graph break as torch's dynamo_graph_break_reason artifact words it: where, why, the line."""
    location = getattr(error, "location", None)
    reason = getattr(error, "reason", str(error))
    if location is None:
        return f"Graph break in user code\nGraph Break Reason: {reason}\n"
    lines = [f"Graph break in user code at {location.filename}:{location.lineno}",
             f"Graph Break Reason: {reason}",
             "User code traceback:",
             f'  File "{location.filename}", line {location.lineno}, in {location.function}']
    source = location.source_line
    if source:
        lines.append(f"    {source}")
    return "\n".join(lines) + "\n"


def _is_shape_guard(text: str) -> bool:
    """A guard on symbolic sizes (fake/shapes.py's texts: `2 <= L['a'].size()[0]`...)."""
    return ".size()[" in text and not text.startswith("check_tensor(")


def _from_environment() -> None:
    directory = os.environ.get(ENV_VAR, "")
    if directory.strip():
        set_trace_dir(directory)


_from_environment()

"""Opt-in logs of the miss path, through the standard `logging` module.

    PYFRAME_LOGS=graph,breaks python train.py        # read once, when pyframe is imported
    pyframe.set_logs("guards", "recompiles")          # or from Python; set_logs() turns them off

Channels (each a child of the `pyframe` logger, records at INFO level):

| channel      | logger               | one record per                                             |
|--------------|----------------------|------------------------------------------------------------|
| `graph`      | `pyframe.graph`      | graph compiled: its name, backend and FX code (`gm.code`)  |
| `guards`     | `pyframe.guards`     | new cache entry: the text of every guard check             |
| `bytecode`   | `pyframe.bytecode`   | new cache entry: the original and the transformed bytecode |
| `breaks`     | `pyframe.breaks`     | graph break (reason and user source line), or a frame run as plain Python |
| `recompiles` | `pyframe.recompiles` | recompile: the guard that failed; the recompile limit      |

`all` turns on every channel. Records are emitted only from `convert_frame.Compiler`, which runs on
a cache miss; a cache hit never enters Python, so logs cost nothing there. With no handler
configured anywhere (no `logging.basicConfig`), records go to stderr through a fallback handler on
the `pyframe` logger; once the application configures logging, they reach its handlers instead.

The same points write the structured trace `tlparse` reads (`PYFRAME_TRACE=/dir`, TORCH_TRACE,
`set_logs(trace_dir=...)`), when a compile has one: `structured_trace.py`.

This module is a leaf: it imports nothing of pyframe but its sibling leaf structured_trace.py, so
any layer may log through it.
"""
from __future__ import annotations

import dis
import logging
import os
import sys
import types
import warnings
from typing import Iterable

from . import structured_trace
from .structured_trace import CompileTrace

CHANNELS = ("graph", "guards", "bytecode", "breaks", "recompiles")
ENV_VAR = "PYFRAME_LOGS"

#: The channels switched on. Call sites test `"graph" in logs.enabled` (a frozenset lookup).
enabled: frozenset[str] = frozenset()

_root = logging.getLogger("pyframe")
_loggers = {name: logging.getLogger(f"pyframe.{name}") for name in CHANNELS}


class _FallbackHandler(logging.StreamHandler):
    """Prints to the current sys.stderr, but only while the root logger has no handler of its own
    (otherwise the record propagates there, and printing it here too would show it twice)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)
        self.setFormatter(logging.Formatter("[%(name)s] %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        if logging.getLogger().handlers:
            return
        self.stream = sys.stderr  # looked up now: pytest and notebooks swap it
        super().emit(record)


_fallback = _FallbackHandler()


def parse(spec: str | Iterable[str]) -> frozenset[str]:
    """`"graph,guards"`, `["graph", "guards"]` or `"all"` as a set of channel names."""
    given = [spec] if isinstance(spec, str) else list(spec)
    bad = [s for s in given if not isinstance(s, str)]
    if bad:
        raise TypeError(f"log channels are names (str) such as 'graph' or 'all', not {bad[0]!r}; "
                        f"known: {', '.join(CHANNELS)}, all")
    items = [part for s in given for part in s.split(",")]
    names = {item.strip().lower() for item in items if item.strip()}
    if "all" in names:
        return frozenset(CHANNELS)
    unknown = sorted(names - set(CHANNELS))
    if unknown:
        raise ValueError(f"unknown log channel(s) {', '.join(map(repr, unknown))}; "
                         f"known: {', '.join(CHANNELS)}, all")
    return frozenset(names)


class _Unchanged:
    """set_logs() without trace_dir: the trace stays as it is."""

    def __repr__(self) -> str:
        return "<unchanged>"


_KEEP = _Unchanged()


def set_logs(*channels: str, trace_dir: str | os.PathLike | None | _Unchanged = _KEEP) -> None:
    """Turn on exactly these channels (`set_logs("graph", "breaks")`, `set_logs("all")`,
    `set_logs("graph,guards")`); `set_logs()` turns every channel off.

    `trace_dir="/dir"` writes the structured trace tlparse reads to a new file in `/dir`, as
    `PYFRAME_TRACE=/dir` does; `trace_dir=None` stops it; left out, the trace is left as it is.
    `set_logs(trace_dir=...)` alone leaves the channels as they are."""
    global enabled
    wanted = parse(channels)  # (checked before anything changes)
    if trace_dir is not _KEEP:
        structured_trace.set_trace_dir(trace_dir)
        if not channels:
            return
    enabled = wanted
    for name, logger in _loggers.items():
        # INFO on the channel's logger lets its records through whatever the root level is;
        # a channel turned off goes back to inheriting.
        logger.setLevel(logging.INFO if name in enabled else logging.NOTSET)
    if enabled and _fallback not in _root.handlers:
        _root.addHandler(_fallback)
    elif not enabled and _fallback in _root.handlers:
        _root.removeHandler(_fallback)


def log(channel: str, message: str, *args: object) -> None:
    """Emit one record on `channel` (call sites check `channel in enabled` first)."""
    _loggers[channel].info(message, *args)


def bytecode_text(code: types.CodeType) -> str:
    """`dis` of one code object (without CACHE entries), as the `bytecode` channel prints it."""
    return dis.Bytecode(code).dis().rstrip()


# -- what convert_frame.Compiler reports (records are duck-typed: this module imports no pyframe code)


def graph_code(gm: object) -> str:
    """A GraphModule's FX code, then that of the graphs it calls (the `fwd_body_0`, `bwd_body_0`
    of an autograd.Function), each under its attribute name."""
    parts = [gm.code.strip()]  # type: ignore[attr-defined]
    for name, child in gm.named_children():  # type: ignore[attr-defined]
        code = getattr(child, "code", None)
        if isinstance(code, str):
            parts.append(f"# self.{name}:\n{code.strip()}")
    return "\n".join(parts)


def frame_compiled(code: types.CodeType, record: object, recompile: bool, trace: CompileTrace | None = None) -> None:
    """A new cache entry for `code`; `record` is its convert_frame.FrameRecord; `trace`: the
    compile's structured trace, when on."""
    if trace is not None:
        trace.frame_compiled(record)
    where = record.name  # type: ignore[attr-defined]
    if recompile and "recompiles" in enabled:
        log("recompiles", "recompiling %s: %s", where, record.reason)  # type: ignore[attr-defined]
    if "graph" in enabled:
        for graph in record.graphs:  # type: ignore[attr-defined]
            log("graph", "%s of %s (backend %r):\n%s", graph.name, where, graph.backend_name,
                graph_code(graph.gm))
    if "guards" in enabled:
        guards = record.guards  # type: ignore[attr-defined]
        log("guards", "%d guard(s) of the new entry of %s:\n%s", len(guards), where,
            "\n".join(f"  {g}" for g in guards))
    if "bytecode" in enabled:
        log("bytecode", "original bytecode of %s:\n%s\ntransformed bytecode:\n%s", where,
            bytecode_text(code), bytecode_text(record.transformed))  # type: ignore[attr-defined]
    error = record.error  # type: ignore[attr-defined]
    if error is not None and "breaks" in enabled:
        resumes = ", ".join(c.co_name for c in record.resume_codes)  # type: ignore[attr-defined]
        log("breaks", "graph break in %s: %s%s", where, error, f" (continues in {resumes})" if resumes else "")


def frame_run_normally(record: object, trace: CompileTrace | None = None) -> None:
    """The translator gave up on a frame: it runs as plain Python (a break with nothing to resume,
    or an internal error of pyframe's)."""
    if trace is not None:
        trace.frame_run_normally(record, "Unsupported" if record.error is not None else "InternalError")  # type: ignore[attr-defined]
    if "breaks" in enabled:
        log("breaks", "running %s as plain Python: %s", record.name, record.reason)  # type: ignore[attr-defined]


def recompile_limit(where: str, limit: int, why: str) -> None:
    """A code reached the recompile limit (told once per code)."""
    if "recompiles" in enabled:
        log("recompiles", "%s hit the recompile limit (%d): no more compiles, cached entries only; last: %s",
            where, limit, why)


def _from_environment() -> None:
    spec = os.environ.get(ENV_VAR, "")
    if not spec.strip():
        return
    try:
        set_logs(spec)
    except ValueError as e:  # a typo in an environment variable must not make `import pyframe` fail
        warnings.warn(f"pyframe: ignoring {ENV_VAR}={spec!r}: {e}", stacklevel=2)


_from_environment()

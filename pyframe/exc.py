"""pyframe's exceptions: one family, with messages in the user's terms.

`Unsupported` is a graph-break reason; it carries the user's file, line and source text so that
`fullgraph=True` and `explain()` can point at the line that stopped tracing.
"""
from __future__ import annotations

import linecache
from dataclasses import dataclass


class PyframeError(Exception):
    """Base class of every error pyframe raises on purpose."""


@dataclass(frozen=True)
class UserLocation:
    """Where in the user's code something happened."""

    filename: str
    lineno: int
    function: str

    @property
    def source_line(self) -> str:
        return linecache.getline(self.filename, self.lineno).strip()

    def __str__(self) -> str:
        text = f"{self.filename}:{self.lineno} in {self.function}"
        line = self.source_line
        return f"{text} `{line}`" if line else text


class Unsupported(PyframeError):
    """Tracing cannot go on here: a graph break (or, with fullgraph=True, an error)."""

    def without_tracebacks(self) -> "Unsupported":
        """Itself, its tracebacks (and those of the exceptions it was raised from) dropped: kept in
        a record after the trace, a traceback's frames would hold the whole trace (its graph,
        FakeTensors, trackers) in a reference cycle with the exception, which outlived one
        `gc.collect()` after `pyframe.reset()`."""
        seen: set[int] = set()
        pending: list[BaseException | None] = [self]
        while pending:
            error = pending.pop()
            if error is None or id(error) in seen:
                continue
            seen.add(id(error))
            error.__traceback__ = None
            pending += [error.__cause__, error.__context__]
        return self

    def __init__(self, reason: str, location: UserLocation | None = None):
        self.reason = reason
        self.location = location
        self.break_index: int | None = None  # set by the root translator: where a break can go
        self.deferred_method_at: int | None = None  # a root LOAD_METHOD whose lookup the call should do
        # No graph break can help: the step reads the frame itself (`locals()` in the compiled
        # frame, whose slots a break leaves holding their entry values), so it runs as Python.
        self.whole_frame = False
        # The frame runs as Python by the rule torch._dynamo follows too (a graph break inside a
        # loop): a decision, not a gap of pyframe's, so it is no fallback (convert_frame.py).
        self.by_rule = False
        # A frame run as Python by rule whose break torch._dynamo still lists among its graph
        # breaks (the break a method of an object made in the frame cannot be rebuilt for).
        self.listed_break = False
        # Not a break: the id of a function allowed in the graph that was found free of Python side
        # effects; the frame is traced again with it called as one node (translate_frame).
        self.proven_pure: int | None = None
        # The break belongs before the one this trace stops at (a tensor that `requires_grad_()`
        # changed would be an output of the graph): the frame is traced again breaking there.
        self.moves_break_earlier = False
        super().__init__(self._message())

    def _message(self) -> str:
        if self.location is None:
            return self.reason
        return f"{self.reason} at {self.location}"

    def with_location(self, location: UserLocation) -> "Unsupported":
        """Attach the innermost user location once; outer frames keep the first one."""
        if self.location is None:
            self.location = location
            self.args = (self._message(),)
        return self


class BackendCompilerFailed(PyframeError):
    """The backend raised (or returned something unusable) and config.suppress_errors is False."""

    def __init__(self, backend_name: str, cause: BaseException | str):
        self.backend_name = backend_name
        super().__init__(f"backend {backend_name!r} failed: {cause}")


class InvalidBackend(PyframeError, ValueError):
    """An unknown backend name, or what is certainly not a backend given as one (a module, a function
    that cannot take `(gm, example_inputs)`: `@pyframe.optimize` without its parentheses)."""


class InvalidCompileOption(PyframeError, ValueError):
    """A mode or option of `pyframe.compile` the backend does not have (or cannot take), or a
    `guard_filter_fn` whose answer is not one bool per guard (raised at the compile that asked it)."""


class RecompileError(PyframeError, RuntimeError):
    """A frame would compile while the stance is "fail_on_recompile" (`pyframe.set_stance`, or
    torch.compiler.set_stance): a RuntimeError, as torch._dynamo's, naming the frame and the guards
    its cached entries failed."""

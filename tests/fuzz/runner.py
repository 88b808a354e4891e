"""Run a generated program eagerly and under pyframe on the same inputs, and compare everything.

``check_seed(seed)`` is the whole pipeline for one seed: generate the program (regenerating, with the
next attempt number, while its eager run raises or produces nan/inf), load it into a fresh module
named ``fuzz_<seed>`` from the file name ``fuzz_<seed>.py`` (its lines put in ``linecache`` so
pyframe's messages quote them), and call it on ``TRIALS`` seeded input sets: eagerly, then through
one ``pyframe.optimize(backend)`` wrapper, so later trials hit (or miss) the cache entries earlier
ones made. Per trial it compares

- the return value (tensors with ``torch.testing.assert_close``, containers item by item, numbers
  and their types) with ``pyframe.debug.compare.assert_same_result``;
- the ``log`` list the program appended to, and the input tensors after the call (in-place updates);
- which of all those tensors are the same Python object (aliasing: a returned input, a logged tensor
  updated in place later);
- the attributes of the program's module-level ``cfg`` object (``Program.state``), which are set
  anew before each call (``make_state``): the same object, other values from one trial to the next.

The outcome is ``ok``, ``wrong`` (a difference), ``exception`` (pyframe raised where eager did not),
or ``internal_error`` (pyframe hit a bug of its own and ran the frame normally: the result is right,
but the engine failed; detected from the warning ``convert_frame`` logs on the ``pyframe`` logger).
"""
from __future__ import annotations

import dataclasses
import linecache
import logging
import math
import random
import re
import traceback
import types
from typing import Any, Callable, Iterator

import torch

import pyframe
from pyframe.debug.compare import CountingBackend, assert_same_result

from .generator import INT, FLOAT, DictT, Program, SeqT, TensorT, VType, generate_program

#: Input sets per program; the last repeats the first, so a cache hit is checked as well.
TRIALS = 3
#: Programs tried per seed before giving up on finding one whose eager run is clean.
MAX_ATTEMPTS = 25

Engine = Callable[[Callable[..., Any]], Callable[..., Any]]


@dataclasses.dataclass
class Outcome:
    """What happened to one program."""

    seed: int
    status: str  # "ok", "wrong", "exception", "internal_error", "invalid" (no clean program found)
    detail: str = ""
    program: Program | None = None
    graphs: int = 0  # graphs pyframe compiled over all trials
    attempt: int = 0

    @property
    def failed(self) -> bool:
        """A finding about pyframe ("invalid" is the generator's problem, counted apart)."""
        return self.status in ("wrong", "exception", "internal_error")

    def signature(self) -> str:
        """What kind of failure this is, to keep a minimized program failing the same way: the
        status, and for an exception or an internal error its last line (type and message)."""
        if self.status in ("exception", "internal_error"):
            lines = [line for line in self.detail.strip().splitlines() if line.strip()]
            last = lines[-1] if lines else ""
            if self.status == "internal_error":  # "...: RuntimeError: tensor sum_1 is ... (raised at f:12)"
                last = last.split(", running it normally: ", 1)[-1].split(" (raised at")[0]
            return f"{self.status}: {_strip_names(last)}"
        return self.status

    def report(self) -> str:
        """The failure as the lead needs it: the seed, how to rerun it, what differed, the source."""
        head = f"seed {self.seed}: {self.status.upper()}"
        rerun = f"rerun: python -m tests.fuzz --seed {self.seed} --show"
        source = self.program.source if self.program is not None else "<no program>"
        return f"{head}\n{rerun}\n{self.detail.rstrip()}\n--- fuzz_{self.seed}.py ---\n{source}"


def _strip_names(message: str) -> str:
    """A message without the node and resume-function names that change as a program shrinks."""
    message = re.sub(r"__resume_at_\d+_\d+", "__resume_at_N", message)
    return re.sub(r"tensor \w+ is", "tensor T is", message)


# ------------------------------------------------------------------------------------------------
# Inputs


def make_inputs(program: Program, trial: int) -> list[Any]:
    """The arguments of ``fuzz_main`` for one trial (fresh objects, the same values every call)."""
    trial = trial % (TRIALS - 1)  # the last trial repeats the first
    rng = random.Random(f"pyframe-fuzz-inputs:{program.seed}:{trial}")
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    def make(t: VType) -> Any:
        if isinstance(t, TensorT):
            return torch.randn(t.shape, generator=gen)
        if t == INT:
            return rng.randint(1, 3)
        if t == FLOAT:  # the trials pass 0.0 and -0.0 to some programs: one guard apart
            return round(rng.uniform(-1.5, 1.5), 2) if program.seed % 3 else (0.0, -0.0)[trial % 2]
        if isinstance(t, SeqT) and all(item == INT for item in t.items):
            return [rng.randint(1, 3) for _ in t.items]
        if isinstance(t, DictT):  # a dict of the caller's, its entries read and written
            return {key: make(item) for key, item in t.items}
        raise TypeError(f"no input for a parameter of type {t}")

    args: list[Any] = [make(param.type) for param in program.params]
    args.append([])  # log
    return args


def make_state(program: Program, trial: int) -> dict[str, Any]:
    """The attributes of the program's ``cfg`` before one trial's call (fresh objects)."""
    trial = trial % (TRIALS - 1)
    rng = random.Random(f"pyframe-fuzz-state:{program.seed}:{trial}")
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    state: dict[str, Any] = {}
    for param in program.state:
        if isinstance(param.type, TensorT):
            state[param.name] = torch.randn(param.type.shape, generator=gen)
        elif param.type == INT:
            state[param.name] = rng.randint(1, 3)
        else:
            state[param.name] = round(rng.uniform(-1.5, 1.5), 2)
    return state


def set_state(module: types.ModuleType, program: Program, trial: int) -> None:
    """Set the attributes of the same ``cfg`` object to this trial's values (between calls)."""
    if program.state:
        cfg = module.cfg
        for name in list(vars(cfg)):
            delattr(cfg, name)
        for name, value in make_state(program, trial).items():
            setattr(cfg, name, value)


# ------------------------------------------------------------------------------------------------
# Loading and running


def load_program(program: Program, filename: str | None = None) -> types.ModuleType:
    """Execute the program's source as a fresh module; its lines are registered in linecache."""
    filename = filename or program.filename
    linecache.cache[filename] = (len(program.source), None, program.source.splitlines(True), filename)
    module = types.ModuleType(filename.removesuffix(".py"))
    module.__file__ = filename
    exec(compile(program.source, filename, "exec"), module.__dict__)
    return module


def forget_program(program: Program, filename: str | None = None) -> None:
    linecache.cache.pop(filename or program.filename, None)


@dataclasses.dataclass
class Run:
    """One call: what it returned (or raised), the log, and the arguments afterwards."""

    result: Any
    log: list
    args: list
    error: BaseException | None = None
    state: dict = dataclasses.field(default_factory=dict)  # cfg's attributes after the call


def call(fn: Callable[..., Any], args: list[Any], module: types.ModuleType | None = None) -> Run:
    try:
        result = fn(*args)
    except Exception as e:  # noqa: BLE001 - any exception is an outcome to compare
        return Run(None, args[-1], args[:-1], e, _state_of(module))
    return Run(result, args[-1], args[:-1], state=_state_of(module))


def _state_of(module: types.ModuleType | None) -> dict:
    cfg = getattr(module, "cfg", None)
    return dict(vars(cfg)) if cfg is not None else {}


def _leaves(value: Any) -> Iterator[Any]:
    if isinstance(value, (list, tuple)):
        for item in value:
            yield from _leaves(item)
    elif isinstance(value, dict):  # (a dict passed in: its values, in its order)
        for item in value.values():
            yield from _leaves(item)
    else:
        yield value


def is_clean(run: Run) -> bool:
    """No exception, and every number and tensor it produced is finite."""
    if run.error is not None:
        return False
    for leaf in _leaves([run.result, run.log, run.args, list(run.state.values())]):
        if isinstance(leaf, torch.Tensor) and not torch.isfinite(leaf).all():
            return False
        if isinstance(leaf, float) and not math.isfinite(leaf):
            return False
    return True


def alias_pattern(run: Run) -> list[int]:
    """For each tensor of (args, result, log) in order, the position of the first one that is the
    same object: equal patterns mean the same tensors are shared in both runs."""
    first: dict[int, int] = {}
    pattern = []
    leaves = _leaves([run.args, run.result, run.log, list(run.state.values())])
    for i, leaf in enumerate(t for t in leaves if isinstance(t, torch.Tensor)):
        pattern.append(first.setdefault(id(leaf), i))
    return pattern


def compare_runs(actual: Run, expected: Run) -> str | None:
    """None if the pyframe run matches the eager run, else what differs."""
    if actual.error is not None:
        raise AssertionError("compare_runs needs a run that returned")
    try:
        assert_same_result(actual.result, expected.result, "result")
        assert_same_result(actual.log, expected.log, "log")
        assert_same_result(actual.args, expected.args, "inputs after the call")
        assert_same_result(actual.state, expected.state, "cfg's attributes after the call")
    except AssertionError as e:
        return str(e)
    mine, theirs = alias_pattern(actual), alias_pattern(expected)
    if mine != theirs:
        return (f"tensor identity differs (position of the first tensor that is the same object, over "
                f"inputs, result, log, cfg): pyframe {mine} vs eager {theirs}")
    return None


class _InternalErrors(logging.Handler):
    """Collects the warnings pyframe logs when it fails inside itself and runs a frame normally."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "internal error" not in message:
            return
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            where = traceback.extract_tb(record.exc_info[2])[-1]
            message += f": {type(exc).__name__}: {exc} (raised at {where.filename}:{where.lineno})"
        self.messages.append(message)


def pyframe_engine(backend: Callable[..., Any]) -> Engine:
    return lambda fn: pyframe.optimize(backend)(fn)


def run_program(program: Program, engine: Engine | None = None) -> Outcome:
    """Run ``program`` eagerly and under ``engine`` (pyframe by default) and compare (see module doc).

    ``engine`` maps the entry function to the callable to test; tests pass a sabotaged one to check
    that the comparison notices.
    """
    backend = CountingBackend()
    engine = engine or pyframe_engine(backend)
    module = load_program(program)
    fn = getattr(module, program.entry)
    try:
        expected = []
        for trial in range(TRIALS):
            set_state(module, program, trial)
            expected.append(call(fn, make_inputs(program, trial), module))
        if not all(is_clean(run) for run in expected):
            bad = next(run for run in expected if not is_clean(run))
            why = f"{type(bad.error).__name__}: {bad.error}" if bad.error else "nan or inf"
            return Outcome(program.seed, "invalid", f"eager run is not clean: {why}", program)

        pyframe.reset()
        handler = _InternalErrors()
        logger = logging.getLogger("pyframe")
        logger.addHandler(handler)
        try:
            optimized = engine(fn)
            for trial in range(TRIALS):
                set_state(module, program, trial)
                actual = call(optimized, make_inputs(program, trial), module)
                if actual.error is not None:
                    tb = "".join(traceback.format_exception(actual.error)).rstrip()
                    return Outcome(program.seed, "exception",
                                   f"trial {trial}: pyframe raised where eager returned\n{tb}",
                                   program, len(backend.graphs))
                difference = compare_runs(actual, expected[trial])
                if difference is not None:
                    return Outcome(program.seed, "wrong", f"trial {trial}: {difference}", program,
                                   len(backend.graphs))
        finally:
            logger.removeHandler(handler)
            pyframe.reset()
        if handler.messages:
            return Outcome(program.seed, "internal_error", "\n".join(handler.messages), program,
                           len(backend.graphs))
        return Outcome(program.seed, "ok", "", program, len(backend.graphs))
    finally:
        forget_program(program)


def check_seed(seed: int, engine: Engine | None = None) -> Outcome:
    """Generate the program of ``seed`` and run it eagerly and under pyframe.

    A program whose eager run raises or makes nan/inf says nothing about pyframe: the next attempt
    of the same seed is generated instead (up to MAX_ATTEMPTS), so the outcome is still reproducible.
    """
    for attempt in range(MAX_ATTEMPTS):
        outcome = run_program(generate_program(seed, attempt), engine)
        if outcome.status != "invalid":
            outcome.attempt = attempt
            return outcome
    return Outcome(seed, "invalid", f"no program with a clean eager run in {MAX_ATTEMPTS} attempts")

"""Dynamic shapes: FakeTensors with symbolic sizes, and the guards they leave, lowered for C++.

A trace with dynamic shapes runs on a FakeTensorMode of its own over a fresh ShapeEnv (torch's
`torch.fx.experimental.symbolic_shapes`), as torch._dynamo's does: a tensor read from the frame
with some dimensions dynamic gets a FakeTensor whose sizes there are `torch.SymInt`s (`s77`, named
by the ShapeEnv from the source, `L['x'].size()[0]`, exactly as under torch._dynamo). Sizes 0 and 1
stay static (the ShapeEnv specializes them), so a symbol always stands for a size of at least 2.

Whatever the trace decides on a symbolic size (`if x.shape[0] > 16`, a `view(-1, 2)` that needs an
even size, an int() that specializes it) the ShapeEnv records as a guard: a sympy relation between
symbols. `lower_guards` turns the ShapeEnv's knowledge into ShapeGuards (guards.py) that the C++
tree checks without Python: each symbol is read where it first appears (a tensor's size or stride,
as `TensorPropertySource`), every other appearance is an equality with it, each symbol's value range
gives its bounds, and each relation becomes a short postfix program (csrc/guard_shapes.h). A
relation the program cannot express raises `ShapeGuardError`; the caller then compiles the frame
with static shapes instead.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, Iterable

import sympy
import torch
from torch._guards import GuardSource
from torch._guards import Source as TorchSource
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext
from torch.utils._sympy.functions import CleanDiv, FloorDiv, Max, Min, Mod, PythonMod
from torch.utils._sympy.numbers import int_oo
from torch.utils._sympy.printers import PythonPrinter

from .. import config
from ..guards import ShapeGuard
from ..source import Source, TensorPropertySource
from .mode import PyframeFakeTensorMode


class ShapeGuardError(Exception):
    """A ShapeEnv guard that pyframe cannot check in C++ (an expression of a kind the programs do
    not have): the frame is compiled with static shapes instead."""


@dataclasses.dataclass(frozen=True)
class _NamedSource(TorchSource):
    """A pyframe Source as torch's ShapeEnv wants one: it names the symbols it makes after
    `name` (torch._dynamo's `L['x'].size()[0]` gives the same `s77`) and records it on guards."""

    source: Source

    @property
    def _name_template(self) -> str:
        return self.source.name()

    @functools.cached_property
    def guard_source(self) -> GuardSource:
        return GuardSource.LOCAL


class NeedsSymbolicTrace(Exception):
    """Raised by a static trace that meets a tensor with a dynamic dimension: the frame is traced
    again on a symbolic OutputGraph (convert_frame.py). Never reaches the user."""


class FrameSizes:
    """Automatic dynamic shapes, for one code object: the sizes each tensor it read had, by
    source name, None in a dimension seen with two sizes. The first compile is static; a recompile
    that finds a size changed makes that dimension dynamic, from then on, as torch._dynamo's
    `automatic_dynamic_shapes` does."""

    def __init__(self) -> None:
        # None: every dimension dynamic (the tensor was seen with two ranks)
        self.seen: dict[str, tuple[int | None, ...] | None] = {}

    def note(self, name: str, sizes: tuple[int, ...]) -> tuple[int, ...]:
        """Record `sizes` for the tensor `name`; the dimensions that are dynamic from now on."""
        if name not in self.seen:
            self.seen[name] = tuple(sizes)
            return ()
        before = self.seen[name]
        merged = None if before is None or len(before) != len(sizes) else \
            tuple(b if b == n else None for b, n in zip(before, sizes))
        self.seen[name] = merged
        return tuple(i for i in range(len(sizes)) if merged is None or merged[i] is None)


@dataclasses.dataclass
class ShapePolicy:
    """Which dimensions of a tensor read from the frame are dynamic. `dynamic`: torch.compile's
    setting (None: automatic, from `sizes`; True: every dimension, from the first compile, equal
    sizes sharing a symbol; False: none). `torch._dynamo.mark_dynamic(t, d)` (pyframe.mark_dynamic)
    makes a dimension dynamic and `mark_static` keeps one static, whatever the setting but False.
    A module's parameters and buffers stay static, as under torch._dynamo."""

    dynamic: bool | None = None
    sizes: FrameSizes | None = None
    # False for the static trace made after a symbolic one failed: a captured `Tensor.item()`
    # then breaks the graph instead of asking for a symbolic trace again.
    symbolic_allowed: bool = True
    # Data-dependent values captured in the graph as unbacked symbols (fake/unbacked.py), as
    # torch._dynamo's ShapeEnv allows them: `Tensor.item()` and `tolist()` (scalar outputs), and ops
    # whose output sizes depend on the data, `nonzero`, `x[mask]` (dynamic output shapes). See
    # `capturing`.
    scalar_outputs: bool = False
    dynamic_output_shapes: bool = False

    def dims(self, source: Source, value: torch.Tensor, module_state: bool) -> tuple[tuple[int, ...], bool]:
        """(the dynamic dimensions, whether they are duck-shaped)."""
        if self.dynamic is False or module_state or value.dim() == 0:
            return (), False
        marked = getattr(value, "_dynamo_dynamic_indices", set())
        static = getattr(value, "_dynamo_static_indices", set())
        if self.dynamic:
            dims = set(range(value.dim()))
        else:
            seen = self.sizes.note(source.name(), tuple(value.shape)) if self.sizes is not None else ()
            dims = set(seen) | set(marked)
        return tuple(sorted(d for d in dims if d not in static)), bool(self.dynamic) and not marked

    def int_may_be_dynamic(self, source: Source, value: int) -> bool:
        """Whether int_is_dynamic may answer yes, without recording `value`: with dynamic=True,
        or once the int was seen with another value."""
        if self.dynamic is not None:
            return bool(self.dynamic)
        if self.sizes is None or source.name() not in self.sizes.seen:
            return False
        seen = self.sizes.seen[source.name()]
        return seen is None or seen != (value,)

    def int_is_dynamic(self, source: Source, value: int) -> bool:
        """Whether an int argument of the frame is a symbolic input: from the first compile with
        `dynamic=True`, else once it was seen with two values (torch._dynamo's automatic dynamic)."""
        if self.dynamic is False:
            return False
        if self.dynamic:
            return True
        return self.sizes is not None and bool(self.sizes.note(source.name(), (value,)))


STATIC = ShapePolicy(dynamic=False)
STATIC_ONLY = ShapePolicy(dynamic=False, symbolic_allowed=False)


def capturing(fullgraph: bool) -> dict[str, bool]:
    """ShapePolicy's data-dependent settings for one compile, read where and when torch._dynamo reads
    them (each compile, from torch._dynamo.config, patched or not, or pyframe.config; never guarded,
    so a cached entry serves a call whatever the flags say then): `capture_scalar_outputs` and
    `capture_dynamic_output_shape_ops`, both on under fullgraph (as torch._dynamo's OutputGraph sets
    its ShapeEnv for one_graph)."""
    dynamo = torch._dynamo.config  # (pyframe.config's settings of the same names turn them on too)
    return {"scalar_outputs": fullgraph or config.capture_scalar_outputs or dynamo.capture_scalar_outputs,
            "dynamic_output_shapes": fullgraph or config.capture_dynamic_output_shape_ops
            or dynamo.capture_dynamic_output_shape_ops}


def new_symbolic_mode(shapes: ShapePolicy = STATIC) -> PyframeFakeTensorMode:
    """A FakeTensorMode over a fresh ShapeEnv, configured as torch._dynamo configures its own:
    `Tensor.item()` gives an unbacked symbol with scalar outputs captured, `nonzero()` a tensor of
    unbacked size with dynamic output shapes captured (`shapes`' settings)."""
    shape_env = ShapeEnv(allow_scalar_outputs=shapes.scalar_outputs,
                         allow_dynamic_output_shape_ops=shapes.dynamic_output_shapes)
    return PyframeFakeTensorMode(allow_non_fake_inputs=False, shape_env=shape_env)


def symbolic_fake(mode: PyframeFakeTensorMode, value: torch.Tensor, source: Source,
                  dynamic: Iterable[int], duck: bool) -> torch.Tensor:
    """The FakeTensor of `value` with the dimensions `dynamic` symbolic: each a symbol of its own
    (automatic dynamic, `mark_dynamic`), or `duck`-shaped, equal sizes sharing one symbol
    (`dynamic=True`), as torch._dynamo makes them."""
    dims = set(dynamic)
    kind = DimDynamic.DUCK if duck else DimDynamic.DYNAMIC
    sizes = [kind if i in dims else DimDynamic.STATIC for i in range(value.dim())]
    context = StatelessSymbolicContext(dynamic_sizes=sizes, constraint_sizes=[None] * value.dim())
    return mode.from_tensor(value, source=_NamedSource(source), symbolic_context=context)


def symbolic_int(mode: PyframeFakeTensorMode, value: int, source: Source) -> Any:
    """An int argument as a SymInt of its own symbol (an int when the ShapeEnv specializes it)."""
    return mode.shape_env.create_unspecified_symint_and_symbol(value, _NamedSource(source), DimDynamic.DYNAMIC)


def new_symbol(mode: PyframeFakeTensorMode, hint: int, source: Source) -> Any:
    """A fresh size symbol of the mode's ShapeEnv, hinted `hint`, named after `source` (the sizes of
    a saved graph's inputs made again: warm/store.py)."""
    return mode.shape_env.create_symbol(hint, _NamedSource(source), dynamic_dim=DimDynamic.DYNAMIC)


def has_symbolic_sizes(fake: Any) -> bool:
    return isinstance(fake, torch.Tensor) and any(type(n) is not int for n in (*fake.shape, *fake.stride()))


def lower_guards(shape_env: ShapeEnv, tensors: Iterable[tuple[Source, torch.Tensor]],
                 ints: Iterable[tuple[Source, Any]] = ()) -> list[ShapeGuard]:
    """The ShapeEnv's knowledge about the frame's symbolic tensors (`tensors`: each source read
    with its FakeTensor, in the order read) and int arguments (`ints`: source and SymInt), as
    ShapeGuards."""
    where: dict[sympy.Symbol, Source] = {}  # each symbol, at its first appearance
    relations: list[sympy.Basic] = []
    for source, fake in tensors:
        properties = [*((TensorPropertySource(source, "size", i), n) for i, n in enumerate(fake.shape)),
                      *((TensorPropertySource(source, "stride", i), n) for i, n in enumerate(fake.stride())),
                      (TensorPropertySource(source, "storage_offset"), fake.storage_offset())]
        _note_appearances(shape_env, properties, where, relations)
    _note_appearances(shape_env, list(ints), where, relations)
    for symbol in [s for s in where if not s.name.startswith("__at_")]:
        bounds = shape_env.var_to_range.get(symbol)
        if bounds is not None:
            if bounds.lower not in (-sympy.oo, -int_oo):
                relations.append(sympy.Le(int(bounds.lower), symbol, evaluate=False))
            if bounds.upper not in (sympy.oo, int_oo):
                relations.append(sympy.Le(symbol, int(bounds.upper), evaluate=False))
    for guard in shape_env.guards:
        expr = shape_env.simplify(guard.expr)
        # (what the symbols' ranges, guarded above, already decide is left out, as produce_guards does)
        if expr is not sympy.true and shape_env._maybe_evaluate_static(expr, axioms=()) is None:
            relations.append(expr)
    names = {symbol: sympy.Symbol(source.name(), integer=True) for symbol, source in where.items()}
    guards: list[ShapeGuard] = []
    seen: set[str] = set()
    for relation in relations:
        text = PythonPrinter().doprint(relation.xreplace(names))
        if text in seen:
            continue
        seen.add(text)
        program = _Program(where)
        program.emit(relation)
        guards.append(ShapeGuard(text, tuple(program.sources), tuple(program.words)))
    return guards


def _note_appearances(shape_env: ShapeEnv, properties: list[tuple[Source, Any]], where: dict[sympy.Symbol, Source],
                      relations: list[sympy.Basic]) -> None:
    """Each symbolic value read at a source: where its symbol is read, or an equality with it."""
    for at, value in properties:
        if type(value) is int:
            continue  # static: TENSOR_MATCH (or the int's guard) checks it
        expr = shape_env.simplify(value.node.expr)
        if isinstance(expr, sympy.Symbol) and expr not in where:
            where[expr] = at
        else:
            # another appearance of a symbol (or of an expression of symbols): equal to it
            read_here = sympy.Symbol(f"__at_{len(where)}", integer=True)
            where[read_here] = at
            relations.append(sympy.Eq(read_here, expr))


# csrc/guard_shapes.h's ShapeOp, in its order
(CONST, LOAD, ADD, SUB, MUL, FLOORDIV, MOD, NEG, POW, MAX, MIN, ABS,
 EQ, NE, LT, LE, GT, GE, AND, OR, NOT) = range(21)

_N_ARY: dict[type, int] = {sympy.Add: ADD, sympy.Mul: MUL, Max: MAX, Min: MIN, sympy.And: AND, sympy.Or: OR}
_BINARY: dict[type, int] = {
    FloorDiv: FLOORDIV, CleanDiv: FLOORDIV, Mod: MOD, PythonMod: MOD, sympy.Mod: MOD,
    sympy.Eq: EQ, sympy.Ne: NE, sympy.StrictLessThan: LT, sympy.LessThan: LE,
    sympy.StrictGreaterThan: GT, sympy.GreaterThan: GE,
}


class _Program:
    """A relation as csrc/guard_shapes.h's postfix words, reading `sources` (Load's operands)."""

    def __init__(self, where: dict[sympy.Symbol, Source]):
        self.where = where
        self.words: list[int] = []
        self.sources: list[Source] = []

    def emit(self, e: sympy.Basic) -> None:
        if e is sympy.true or e is sympy.false:
            self.words += [CONST, int(e is sympy.true)]
        elif isinstance(e, sympy.Integer):
            self.words += [CONST, int(e)]
        elif isinstance(e, sympy.Symbol):
            self._load(e)
        elif type(e) in _N_ARY:
            self._fold(_N_ARY[type(e)], e.args)
        elif type(e) in _BINARY:
            self._fold(_BINARY[type(e)], e.args)
        elif isinstance(e, sympy.Pow) and isinstance(e.exp, sympy.Integer) and e.exp >= 0:
            self._fold(POW, e.args)
        elif isinstance(e, sympy.Not):
            self.emit(e.args[0])
            self.words.append(NOT)
        elif isinstance(e, sympy.Abs):
            self.emit(e.args[0])
            self.words.append(ABS)
        else:
            raise ShapeGuardError(f"a shape guard pyframe cannot check in C++: {e} ({type(e).__name__})")

    def _fold(self, op: int, args: tuple) -> None:
        self.emit(args[0])
        for arg in args[1:]:
            self.emit(arg)
            self.words.append(op)

    def _load(self, symbol: sympy.Symbol) -> None:
        source = self.where.get(symbol)
        if source is None:
            raise ShapeGuardError(f"a shape guard on {symbol}, which no input's size gives")
        if source not in self.sources:
            self.sources.append(source)
        self.words += [LOAD, self.sources.index(source)]


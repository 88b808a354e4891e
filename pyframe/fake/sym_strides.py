"""Elementwise ops and `cat` of strided tensors over symbolic sizes, without FakeTensorMode.

fake/sym_rules.py answers for contiguous inputs, whose output is contiguous. A view in the middle
of a network (a transposed head, `q[..., :d]`, LLaMA's rotary embedding) gives elementwise ops and
`cat` inputs that are not contiguous, and there FakeTensorMode's fast path gives up: the op goes
through its torch/_refs decomposition, `_maybe_broadcast` and the prim's meta function, whose
output strides come from `compute_elementwise_output_logical_to_physical_perm` (the inputs' strides
compared with `guard_or_false`, a guard wherever the ShapeEnv cannot answer): 1.5-3 ms an op.

These rules compute the same output, asking each question torch's code asks about sizes and
strides, in the same form (sympy relations of the SymInts' expressions), and answer only where the
ShapeEnv answers every one of them statically (`_maybe_evaluate_static`, the first step of its
`evaluate_expr`, which records nothing). Asking a question torch would not ask is harmless (the
rule may decline more often); missing one torch asks is not, so the mirrors below ask at least what
torch asks, in its short-circuit order:

- the fast path (`fake_impls.make_fast_binary_impl`): contiguity and channels-last contiguity of
  each input; inputs all contiguous are fake/sym_rules.py's, all channels-last ones are left to
  FakeTensorMode;
- `_prim_elementwise_meta`: the inputs as `_maybe_broadcast` expands them (a broadcast dimension
  gets stride 0), then the logical-to-physical permutation (contiguity checks again, then the
  insertion sort with `should_swap`), and the output as `empty_permuted` makes it:
  `make_contiguous_strides_for` of the permuted sizes, put back in logical order;
- `cat` (torch/_refs `cat`): 1-D empty inputs dropped, the output `prims.cat(...).clone(
  memory_format=...)`: contiguous unless every input before the first contiguous-suggesting one
  looks channels-last (`suggest_memory_format`), which is left to FakeTensorMode.

The same rules serve traces with static sizes (pyframe/graph.py asks them after fake/rules.py's):
on ints every question has Python's answer, and a strided elementwise op or `cat` (a first compile
of new shapes: LLaMA's rotary embedding) skips FakeTensorMode there too.

Inputs are floating tensors of one dtype and device whose symbolic sizes are plain backed symbols
(or products of them) of at least 2 (fake/sym_rules.py's `_size_at_least_two`); strides may be any
backed expressions. tests/test_fake_sym_strides.py compares every rule with FakeTensorMode on
random shapes, permutations and slices, symbolic sizes included, and checks that the ShapeEnv is
left as it was.
"""
from __future__ import annotations

import operator
from typing import Any, Optional

import sympy
import torch
import torch.fx
from torch._prims_common import make_contiguous_strides_for
from torch._subclasses.fake_tensor import FakeTensor
from torch.fx.experimental import _config as fx_config
from torch.utils._sympy.functions import Max, Mod

from .memo import _Output
from .rules import _FLOATING, _SCALARS, apply_rule, cat_operands, fresh_output, registrar
from .sym_rules import _size_at_least_two, broadcast, plain_fake

_RULES: dict[tuple[str, Any], Any] = {}
_rule = registrar(_RULES)


class _Undecided(Exception):
    """A question about sizes only a guard would answer: the rule declines."""


def infer(op: str, target: Any, args: tuple, kwargs: dict, grad_enabled: bool,
          autocast: bool) -> Optional[_Output]:
    """The output of `target(*args, **kwargs)` (fx arguments) on strided symbolic tensors, if a
    rule knows it without deciding anything about the symbols; None to propagate it for real."""
    try:
        if (op, target) not in _RULES or fx_config.backed_size_oblivious:
            return None  # (size-oblivious: guard_or_false then answers from the static evaluation alone)
    except TypeError:  # an unhashable target
        return None
    try:
        found = apply_rule(_RULES, op, target, args, kwargs, autocast)
    except _Undecided:
        return None
    if found is None:
        return None
    shape, strides, inputs = found
    return fresh_output(shape, strides, inputs, grad_enabled)


# -- questions ------------------------------------------------------------------------------------

class _Questions:
    """Questions about sizes asked as torch's `guard_or_false`/`guard_or_true` ask them, answered
    without a guard: Python's answer on ints, else the ShapeEnv's static evaluation."""

    def __init__(self) -> None:
        self.shape_env: Any = None

    def note(self, n: Any) -> Any:
        """An int as it is, a SymInt as its expression (its ShapeEnv remembered)."""
        if type(n) is int:
            return n
        node = n.node
        if not node.has_hint():
            raise _Undecided  # (an unbacked size: FakeTensorMode decides)
        if self.shape_env is None:
            self.shape_env = node.shape_env
        elif node.shape_env is not self.shape_env:
            raise _Undecided
        return node.expr

    def decide(self, relation: Any, a: Any, b: Any) -> bool:
        """`relation(a, b)` of ints or expressions, where the ShapeEnv knows it statically."""
        if type(a) is int and type(b) is int:
            return bool(_PYTHON[relation](a, b))
        question = relation(a, b)
        if question is sympy.true or question is sympy.false:
            return bool(question)
        if self.shape_env is None:
            raise _Undecided
        found = self.shape_env._maybe_evaluate_static(question)
        if found is None:
            raise _Undecided
        return bool(found)


_PYTHON = {sympy.Eq: operator.eq, sympy.Ne: operator.ne, sympy.Ge: operator.ge, sympy.Lt: operator.lt}


def _mod(a: Any, b: Any) -> Any:
    """`a % b` as SymNode's `_sympy_mod` builds it for sizes and strides (nonnegative): torch's Mod."""
    return a % b if type(a) is int and type(b) is int else Mod(a, b)


def _is_contiguous(q: _Questions, shape: list, strides: list) -> bool:
    """`is_contiguous_or_false` (`is_contiguous(a, false_if_dde=True)`), question by question."""
    numel: Any = 1
    for n in shape:
        numel = numel * n
    if q.decide(sympy.Lt, numel, 2):
        return True
    expected: Any = 1
    expected_max: Any = 1
    for size, stride in reversed(tuple(zip(shape, strides))):
        if q.decide(sympy.Eq, size, 1):
            continue
        if q.decide(sympy.Ne, stride, expected) and q.decide(sympy.Ne, stride, expected_max):
            return False
        expected_max = expected_max * (max(size, 1) if type(size) is int else Max(size, 1))
        expected = expected * size
    return True


def _is_channels_last(q: _Questions, shape: list, strides: list) -> bool:
    """`is_channels_last_contiguous_or_false_2d`/`_3d`, as `is_contiguous_for_memory_format_or_false`
    with channels_last asks it (4-D only; other ranks are False without a question)."""
    if len(shape) != 4:
        return False
    expected: Any = 1
    for idx in (1, 3, 2, 0):
        if q.decide(sympy.Eq, shape[idx], 1):
            continue
        if q.decide(sympy.Ne, strides[idx], expected):
            return False
        expected = expected * shape[idx]
    return True


def _like_channels_last(q: _Questions, shape: list, strides: list) -> bool:
    """`are_strides_like_channels_last_or_false` (suggest_memory_format's test), question by
    question (its `min == strides[1]` is a Python comparison of SymInts: a guard unless decided)."""
    if len(shape) == 4:
        order = (1, 3, 2, 0)
    elif len(shape) == 5:
        order = (1, 4, 3, 2, 0)
    else:
        return False
    if q.decide(sympy.Eq, strides[1], 0):
        return False
    least: Any = 0
    for d in order:
        if q.decide(sympy.Eq, shape[d], 0):
            return False
        if q.decide(sympy.Lt, strides[d], least):
            return False
        if d == 0 and q.decide(sympy.Eq, least, strides[1]):
            return False
        least = strides[d] * shape[d]
    return True


def _ge(q: _Questions, a: Any, b: Any) -> bool:
    """`should_swap`'s `ge`: a >= b for nonnegative a and b."""
    if q.decide(sympy.Eq, b, 0):
        return True
    if q.decide(sympy.Eq, a, 0):
        return False
    return q.decide(sympy.Ge, a, b) or q.decide(sympy.Eq, _mod(a, b), 0)


def _physical_order(q: _Questions, shape: list, operands: list[list]) -> list[int]:
    """`compute_elementwise_output_logical_to_physical_perm(*operands)` (their strides, on the
    broadcast `shape`); _Undecided where torch would ask for a guard."""
    ndim = len(shape)
    if ndim == 0:
        return []
    if ndim == 1:
        return [0]
    contiguous = channels_last = True
    for strides in operands:
        contiguous = contiguous and _is_contiguous(q, shape, strides)
        channels_last = channels_last and _is_channels_last(q, shape, strides)
    if contiguous and not channels_last:
        return list(range(ndim))
    if channels_last and not contiguous:
        return [0, *range(2, ndim), 1]

    def should_swap(a: int, b: int) -> int:
        for strides in operands:
            sa, sb = strides[a], strides[b]
            if q.decide(sympy.Eq, sa, 0) or q.decide(sympy.Eq, sb, 0):
                continue
            if q.decide(sympy.Eq, sa, sb):
                if _ge(q, shape[b], shape[a]):
                    continue
                return 1
            if _ge(q, sb, sa):
                return -1
            if _ge(q, sa, sb):
                return 1
        return 0

    perm = list(reversed(range(ndim)))
    for i in range(1, ndim):
        dim1 = i
        for dim0 in reversed(range(i)):
            comparison = should_swap(perm[dim0], perm[dim1])
            if comparison > 0:
                perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
                dim1 = dim0
            elif comparison < 0:
                break
    return list(reversed(perm))


# -- inputs ---------------------------------------------------------------------------------------

# Elementwise refs compute float16 and bfloat16 in float32 (their type promotion wrapper converts the
# inputs and the result: other strides); cat converts nothing.
_OPMATH_ITSELF = frozenset({torch.float32, torch.float64})


def _strided(v: Any, dtypes: frozenset = _OPMATH_ITSELF) -> Optional[FakeTensor]:
    """The FakeTensor of a node whose value is a plain strided tensor of one of `dtypes` whose
    symbolic sizes are symbols (or products of them) of at least 2."""
    t = plain_fake(v, dtypes)
    if t is None:
        return None
    if any(type(n) is not int and not _size_at_least_two(n) for n in t.shape):
        return None
    return t


def _output(q: _Questions, tensors: list[FakeTensor], numbers: int) -> tuple:
    """(shape, strides, tensors) of an elementwise op on `tensors` (and `numbers` Python numbers)."""
    shapes = [tuple(t.shape) for t in tensors]
    shape = shapes[0]
    for other in shapes[1:]:
        shape = broadcast(shape, other)
        if shape is None:
            raise _Undecided
    exprs = [[q.note(n) for n in s] for s in shapes]
    strides = [[q.note(n) for n in t.stride()] for t in tensors]
    out_exprs = [q.note(n) for n in shape]
    # the fast path: every input contiguous is sym_rules' answer (declined there only for a reason
    # of its own), every input channels-last gives a channels-last output: FakeTensorMode's
    contiguous = channels_last = True
    for s, st in zip(exprs, strides):
        contiguous = contiguous and _is_contiguous(q, s, st)
        channels_last = channels_last and _is_channels_last(q, s, st)
    if contiguous or channels_last:
        raise _Undecided
    # _maybe_broadcast: an input of another shape is expanded (leading dimensions and broadcast
    # size-1 dimensions get stride 0; torch._refs.expand's broadcast_in_dim)
    expanded = []
    for s, st in zip(exprs, strides):
        if len(s) == len(out_exprs) and all(a is b or a == b for a, b in zip(s, out_exprs)):
            expanded.append(st)
            continue
        lead = len(out_exprs) - len(s)
        if any(out_exprs[i] == 1 for i in range(lead)):
            raise _Undecided  # (broadcast_in_dim's new size-1 dimensions take another stride)
        row = [0] * lead
        for size, step, out in zip(s, st, out_exprs[lead:]):
            row.append(step if size == out else 0)
        expanded.append(row)
    order = _physical_order(q, out_exprs, expanded)
    physical = make_contiguous_strides_for([shape[d] for d in order])
    out_strides = [0] * len(shape)
    for p, d in enumerate(order):
        out_strides[d] = physical[p]
    return shape, tuple(out_strides), tensors


# -- elementwise ----------------------------------------------------------------------------------

# unary ops whose decomposition is the elementwise prim of one input (its strides as above)
_UNARY = ("neg", "exp", "sin", "cos", "tanh", "sigmoid", "rsqrt", "sqrt", "reciprocal", "abs")


def _unary(args: tuple, kwargs: dict) -> Optional[tuple]:
    if len(args) != 1 or kwargs:
        return None
    t = _strided(args[0])
    return _output(_Questions(), [t], 0) if t is not None else None


for _name in _UNARY:
    _rule("call_method", _name)(_unary)
    _rule("call_function", getattr(torch, _name))(_unary)
_rule("call_function", operator.neg)(_unary)


@_rule("call_function", operator.add, operator.sub, operator.mul, operator.truediv,
       torch.add, torch.sub, torch.mul, torch.div)
@_rule("call_method", "add", "sub", "mul", "div", "__add__", "__sub__", "__mul__", "__truediv__",
       "__radd__", "__rmul__")
def _binary(args: tuple, kwargs: dict) -> Optional[tuple]:
    """Two tensors of one floating dtype and device, or one and a Python number."""
    if len(args) != 2 or kwargs:
        return None
    a, b = _strided(args[0]), _strided(args[1])
    if a is not None and b is not None:
        if a.dtype is not b.dtype or a.fake_device != b.fake_device:
            return None
        if a.dim() == 0 or b.dim() == 0:
            return None  # (a 0-d CPU tensor is a scalar to type promotion and to the strides)
        return _output(_Questions(), [a, b], 0)
    t, other = (a, args[1]) if a is not None else (b, args[0])
    if t is None or type(other) not in _SCALARS:
        return None
    return _output(_Questions(), [t], 1)


# -- cat ------------------------------------------------------------------------------------------

@_rule("call_function", torch.cat)
def _cat(args: tuple, kwargs: dict) -> Optional[tuple]:
    """torch._refs.cat: the inputs of one dtype and device, 1-D empty ones dropped, the others
    joined along `dim` (their other sizes equal as expressions); the output contiguous."""
    operands = cat_operands(args, kwargs)
    if operands is None:
        return None
    items = [_cat_input(item) for item in operands[0]]
    if any(t is None for t in items):
        return None
    dtype, device = items[0].dtype, items[0].fake_device
    if any(t.dtype is not dtype or t.fake_device != device for t in items):
        return None
    q = _Questions()
    example = next((t for t in items if t.dim() != 1), items[0])
    ndim = example.dim()
    kept = []
    for t in items:
        if t.dim() != ndim:
            if t.dim() != 1 or t.shape[0] != 0:
                return None  # (an error: FakeTensorMode raises it)
            continue
        if t.dim() == 1 and type(t.shape[0]) is int and t.shape[0] == 0:
            continue
        kept.append(t)
    # cat_compute_output_memory_format: suggest_memory_format of each input up to the first that
    # suggests the contiguous format; none does (all channels-last-like): FakeTensorMode's
    for t in items:
        if not _like_channels_last(q, [q.note(n) for n in t.shape], [q.note(n) for n in t.stride()]):
            break
    else:
        return None
    if not kept or ndim == 0:
        return None
    dim = operands[1]
    if not -ndim <= dim < ndim:
        return None
    dim %= ndim
    first = kept[0]
    shape = list(first.shape)
    length: Any = 0
    for t in kept:
        for i in range(ndim):
            if i != dim and not _same(q, t.shape[i], shape[i]):
                return None
        length = length + t.shape[dim]
    shape[dim] = length
    if type(length) is not int and not _size_at_least_two(length):
        return None
    return tuple(shape), make_contiguous_strides_for(shape), kept


def _cat_input(v: Any) -> Optional[FakeTensor]:
    """A strided floating tensor, or a 1-D empty one made while tracing (`torch.tensor([])`:
    FakeTensorMode keeps its value as a constant), which cat drops; None for anything else."""
    t = _strided(v, _FLOATING)
    if t is not None or type(v) is not torch.fx.Node:
        return t
    t = v.meta.get("example_value")
    if type(t) is not FakeTensor or t.layout is not torch.strided or t.dim() != 1 or t.shape[0] != 0:
        return None
    return t if type(t.shape[0]) is int and t.dtype in _FLOATING and not t.is_conj() and not t.is_neg() else None


def _same(q: _Questions, a: Any, b: Any) -> bool:
    """Two sizes equal as ints or as the same expression (prims.cat's check then asks nothing)."""
    if type(a) is int or type(b) is int:
        return type(a) is type(b) and a == b
    return q.note(a) == q.note(b)

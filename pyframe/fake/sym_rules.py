"""Shape rules over symbolic sizes: the output of a trace's commonest ops on tensors whose sizes
are SymInts, without FakeTensorMode.

fake/rules.py answers for static sizes. Over a ShapeEnv (dynamic shapes) every op goes through
FakeTensorMode with the Python dispatcher, and each size computed on the way is SymNode arithmetic
on sympy expressions: 1-3 ms for F.linear of a (2, s77, 32) batch, most of a dynamic recompile.
Yet a transformer's ops mostly pass on the symbolic sizes they are given: F.linear changes the last,
static, size; layer_norm, softmax, activations and elementwise ops keep every size.

A rule answers only where the real propagation decides nothing about the symbols, so that the
ShapeEnv records no guard and learns nothing (no replacement, no narrowed range), and the output is
the one FakeTensorMode makes:

- every symbolic size is a plain backed symbol (`s77`) or a product of them and a positive int
  (`2*s77`), never `s77 - 1` or an unbacked `u0`: its range (sizes 0 and 1 are specialized, never
  symbols) puts it at 2 or more;
- every comparison the op makes between sizes is decided without asking the ShapeEnv: two ints, a
  symbol with itself, or a symbol with 0 or 1 (broadcasting `s77` with 1 gives `s77`). A symbol
  against another symbol or against a larger int (`s77` broadcast with `s23`, which records
  `Eq(s77, s23)`; with 5, which specializes it) is left to the real propagation;
- every tensor argument is contiguous by its strides' expressions (`(64*s77, 64, 1)`), of one
  floating dtype and device; weights and other static arguments as fake/rules.py takes them. A few
  rules take integer and bool tensors too, where torch's type promotion has nothing to decide (both
  operands of one dtype, or an integer tensor and a Python int): +, - and *, comparisons (a bool
  output), `torch.where`, elementwise min/max, abs, and conversions to another dtype of a tensor
  that requires no grad (T5's relative position buckets are all of these, on (s, s) integer tensors).

The output is a new contiguous tensor: its sizes the inputs' SymInts, its strides computed by
SymInt arithmetic as torch computes contiguous strides. Dropout outside training is one too: under
the Python dispatcher torch/_decomp's `dropout` clones its input, where ATen gives the input back. tests/test_fake_sym_rules.py compares every
rule with FakeTensorMode on symbolic inputs, the ShapeEnv's guards, replacements and ranges included.
"""
from __future__ import annotations

import operator
from typing import Any, Callable, Optional

import torch
import torch.fx
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensor

from .memo import _Output, strides_are_contiguous
from .inplace_rules import dropout_outside_training
from .rules import (
    _FLOATING, _SCALARS, _UNARY, _only, apply_rule, cat_operands, contiguous_strides, fresh_output, registrar,
)

# (args, kwargs) -> (shape of ints and SymInts, [tensor inputs]) or None
SymRule = Callable[[tuple, dict], Optional[tuple]]
_RULES: dict[tuple[str, Any], SymRule] = {}


def infer(op: str, target: Any, args: tuple, kwargs: dict, grad_enabled: bool,
          autocast: bool) -> Optional[_Output]:
    """The output of `target(*args, **kwargs)` (fx arguments) over symbolic sizes, if a rule knows
    it without deciding anything about the symbols; None to propagate it for real."""
    found = apply_rule(_RULES, op, target, args, kwargs, autocast)
    if found is None:
        return None
    if len(found) == 4:  # (shape, (), dtype, device): a new tensor made from no tensor (arange)
        shape, _, dtype, device = found
        return _Output(shape, contiguous_strides(shape), dtype, device, False, True)
    if len(found) == 3:  # (shape, inputs, dtype): a new tensor of that dtype that requires no grad
        shape, inputs, dtype = found
        device = inputs[0].fake_device
        if any(t.fake_device != device for t in inputs):
            return None
        return _Output(shape, contiguous_strides(shape), dtype, device, False, True)
    shape, inputs = found
    return fresh_output(shape, contiguous_strides(shape), inputs, grad_enabled)


def _size_at_least_two(size: torch.SymInt) -> bool:
    """A plain backed symbol (`s77`), or a product of such symbols and a positive int (`2*s77`,
    the rows of a flattened batch): its range puts it at 2 or more, so no comparison with 0 or 1 is
    a guard."""
    node = size.node
    if not node.has_hint():  # (an unbacked symbol has no hint)
        return False
    expr = node.expr
    factors = expr.args if expr.is_Mul else (expr,)
    ranges = node.shape_env.var_to_range
    if expr.is_Integer:
        return False  # (a SymInt whose expression is a number, `s - s + 1`: torch may give its int)
    for factor in factors:
        if factor.is_Integer:
            if factor < 1:
                return False
        elif not factor.is_Symbol:
            return False
        else:
            bounds = ranges.get(factor)
            if bounds is None or bounds.lower < 2:
                return False
    return True


def _eq(a: Any, b: Any) -> Optional[bool]:
    """Whether two sizes are equal, where that is decided without the ShapeEnv: None when it is not."""
    ta, tb = type(a), type(b)
    if ta is int and tb is int:
        return a == b
    if ta is not int and tb is not int:
        return True if a.node.expr == b.node.expr else None
    number = a if ta is int else b
    return False if number <= 1 else None  # (a symbolic size here is at least 2)


def plain_fake(v: Any, dtypes: frozenset) -> Optional[FakeTensor]:
    """The FakeTensor of a node whose value is a plain strided tensor of one of `dtypes` (no
    constant of FakeTensorMode's, no conjugate or negative bit); None otherwise."""
    if type(v) is not torch.fx.Node:
        return None
    t = v.meta.get("example_value")
    if type(t) is not FakeTensor or t.constant is not None or t.layout is not torch.strided:
        return None
    if t.dtype not in dtypes or t.is_conj() or t.is_neg():
        return None
    return t


def _dense(v: Any, dtypes: frozenset = _FLOATING) -> Optional[tuple[FakeTensor, tuple]]:
    """(the FakeTensor, its sizes) of a node whose value is a dense, contiguous tensor of one of
    `dtypes` (floating ones unless said) whose symbolic sizes are plain symbols of at least 2; None
    otherwise."""
    t = plain_fake(v, dtypes)
    if t is None:
        return None
    shape = tuple(t.shape)
    if not t._has_symbolic_sizes_strides:
        return (t, shape) if t.storage_offset() == 0 and t.stride() == contiguous_strides(shape) else None
    if type(t.storage_offset()) is not int or t.storage_offset() != 0:
        return None
    for size in shape:
        if type(size) is not int and not _size_at_least_two(size):
            return None
    if not strides_are_contiguous(t.stride(), shape):
        return None
    return t, shape


def broadcast(a: tuple, b: tuple) -> Optional[tuple]:
    """The broadcast of two shapes where every pair of sizes is decided without the ShapeEnv."""
    ndim = max(len(a), len(b))
    a, b = (1,) * (ndim - len(a)) + a, (1,) * (ndim - len(b)) + b
    out = []
    for x, y in zip(a, b):
        if _eq(x, y):
            out.append(x)
        elif type(x) is int and x == 1:
            out.append(y)
        elif type(y) is int and y == 1:
            out.append(x)
        else:
            return None  # different sizes (an error) or undecided (a guard): the real propagation
    return tuple(out)


_rule = registrar(_RULES)


# -- pointwise ----------------------------------------------------------------------------------

def _unary(args: tuple, kwargs: dict) -> Optional[tuple]:
    if len(args) != 1 or kwargs:
        return None
    found = _dense(args[0])
    return (found[1], [found[0]]) if found is not None else None


def _activation(args: tuple, kwargs: dict) -> Optional[tuple]:
    """F.relu/F.silu/F.gelu and the like, not in place (as fake/rules.py's `_activation`)."""
    if len(args) == 2 and args[1] in (False, "none", "tanh"):
        args = args[:1]
    if len(args) != 1 or not _only(kwargs, {"inplace": False, "approximate": None}):
        return None
    if kwargs.get("approximate", "none") not in ("none", "tanh"):
        return None
    return _unary(args, {})


for _name in _UNARY:
    _rule("call_method", _name)(_unary)
    if hasattr(torch, _name):
        _rule("call_function", getattr(torch, _name))(_unary)
_rule("call_function", operator.neg)(_unary)
_rule("call_function", F.relu, F.silu, F.gelu, F.elu, F.leaky_relu, F.hardswish, F.mish)(_activation)
_rule("call_method", "gelu")(_activation)


@_rule("call_function", F.dropout)
def _dropout(args: tuple, kwargs: dict) -> Optional[tuple]:
    """F.dropout outside training (nn.Dropout in eval mode). Over a ShapeEnv the Python dispatcher
    decomposes it into `input.clone()` (torch/_decomp's `dropout`), not the input itself as ATen
    gives it back: a new tensor of the input's layout, requiring grad as a clone would (a dense,
    contiguous input here, so the clone's strides are the contiguous ones)."""
    x = dropout_outside_training(args, kwargs)
    return _unary((x,), {}) if x is not None else None


@_rule("call_function", operator.truediv, torch.div)
@_rule("call_method", "div", "__truediv__")
def _binary(args: tuple, kwargs: dict) -> Optional[tuple]:
    """a (op) b: tensors of one dtype that broadcast without a guard, or a tensor and a Python
    number (which takes the tensor's floating dtype)."""
    if len(args) != 2 or kwargs:
        return None
    a, b = _dense(args[0]), _dense(args[1])
    if a is not None and b is not None:
        shape = broadcast(a[1], b[1])
        return (shape, [a[0], b[0]]) if shape is not None else None
    found, other = (a, args[1]) if a is not None else (b, args[0])
    if found is None or type(other) not in _SCALARS:
        return None
    return found[1], [found[0]]


@_rule("call_function", operator.add, operator.sub, operator.mul, torch.add, torch.sub, torch.mul)
@_rule("call_method", "add", "sub", "mul", "__add__", "__sub__", "__mul__", "__radd__", "__rmul__")
def _ring(args: tuple, kwargs: dict) -> Optional[tuple]:
    """+, - and * as _binary, and of integer tensors: two of one integer dtype, or one and a Python
    int (not a float, which would promote to the default dtype; `/` always does)."""
    found = _binary(args, kwargs)
    if found is not None or len(args) != 2 or kwargs:
        return found
    a, b = _dense(args[0], _INTEGRAL), _dense(args[1], _INTEGRAL)
    if a is not None and b is not None:
        if a[0].dtype is not b[0].dtype:
            return None
        shape = broadcast(a[1], b[1])
        return (shape, [a[0], b[0]]) if shape is not None else None
    found, other = (a, args[1]) if a is not None else (b, args[0])
    if found is None or type(other) is not int:
        return None
    return found[1], [found[0]]


# -- comparisons, selection and conversions, of any dtype ------------------------------------------
# (T5's relative position buckets: integer (s, s) tensors compared, clamped, selected and converted)

_INTEGRAL = frozenset({torch.int64, torch.int32})
_ANY = _FLOATING | _INTEGRAL | {torch.bool}


@_rule("call_function", operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne,
       torch.lt, torch.le, torch.gt, torch.ge, torch.eq, torch.ne)
@_rule("call_method", "lt", "le", "gt", "ge", "eq", "ne", "__lt__", "__le__", "__gt__", "__ge__", "__eq__",
       "__ne__")
def _compare(args: tuple, kwargs: dict) -> Optional[tuple]:
    """a < b and the like: two tensors of one dtype, or a tensor and a Python number: bool."""
    if len(args) != 2 or kwargs:
        return None
    a, b = _dense(args[0], _ANY), _dense(args[1], _ANY)
    if a is not None and b is not None:
        shape = broadcast(a[1], b[1]) if a[0].dtype is b[0].dtype else None
        return (shape, [a[0], b[0]], torch.bool) if shape is not None else None
    found, other = (a, args[1]) if a is not None else (b, args[0])
    if found is None or type(other) not in (int, float):
        return None
    return found[1], [found[0]], torch.bool


@_rule("call_function", torch.where)
def _where(args: tuple, kwargs: dict) -> Optional[tuple]:
    """torch.where(condition, a, b) of a bool condition and two tensors of one dtype."""
    if len(args) != 3 or kwargs:
        return None
    cond, a, b = _dense(args[0], frozenset({torch.bool})), _dense(args[1], _ANY), _dense(args[2], _ANY)
    if cond is None or a is None or b is None or a[0].dtype is not b[0].dtype:
        return None
    if cond[0].fake_device != a[0].fake_device:
        return None
    inner = broadcast(a[1], b[1])
    shape = broadcast(cond[1], inner) if inner is not None else None
    return (shape, [a[0], b[0]]) if shape is not None else None


@_rule("call_function", torch.min, torch.max, torch.minimum, torch.maximum)
def _extremum(args: tuple, kwargs: dict) -> Optional[tuple]:
    """torch.min(a, b) and the like, elementwise, of two tensors of one (non-bool) dtype."""
    if len(args) != 2 or kwargs:
        return None
    a, b = _dense(args[0], _FLOATING | _INTEGRAL), _dense(args[1], _FLOATING | _INTEGRAL)
    if a is None or b is None or a[0].dtype is not b[0].dtype:
        return None
    shape = broadcast(a[1], b[1])
    return (shape, [a[0], b[0]]) if shape is not None else None


@_rule("call_function", torch.abs)
@_rule("call_method", "abs")
def _abs(args: tuple, kwargs: dict) -> Optional[tuple]:
    """abs of a floating or integer tensor: its dtype."""
    if len(args) != 1 or kwargs:
        return None
    found = _dense(args[0], _FLOATING | _INTEGRAL)
    return (found[1], [found[0]]) if found is not None else None


def _converted(v: Any, dtype: Any) -> Optional[tuple]:
    """A copy of a tensor that requires no grad in another dtype (one ATen gives back itself, of
    its own dtype, is fake/inplace_rules.py's `_to_itself`)."""
    found = _dense(v, _ANY)
    if found is None or type(dtype) is not torch.dtype or dtype not in _ANY or found[0].dtype is dtype:
        return None
    if found[0].requires_grad:
        return None
    return found[1], [found[0]], dtype


@_rule("call_method", "float")
def _float(args: tuple, kwargs: dict) -> Optional[tuple]:
    return _converted(args[0], torch.float32) if len(args) == 1 and not kwargs else None


@_rule("call_method", "to")
def _to_dtype(args: tuple, kwargs: dict) -> Optional[tuple]:
    """`x.to(dtype)` to another dtype."""
    return _converted(args[0], args[1]) if len(args) == 2 and not kwargs else None


# -- linear algebra and normalization -----------------------------------------------------------------

@_rule("call_function", torch._C._nn.linear, F.linear)
def _linear(args: tuple, kwargs: dict) -> Optional[tuple]:
    """x @ w.T + b: a contiguous batch whose last size is static, a static weight and bias."""
    if not _only(kwargs, {"bias": None}) or not 2 <= len(args) + len(kwargs) <= 3:
        return None
    x, w = _dense(args[0]), _dense(args[1])
    bias = args[2] if len(args) == 3 else kwargs.get("bias")
    if x is None or w is None or len(w[1]) != 2 or w[0]._has_symbolic_sizes_strides or not x[1]:
        return None
    if type(x[1][-1]) is not int or x[1][-1] != w[1][1]:
        return None
    inputs = [x[0], w[0]]
    if bias is not None:
        b = _dense(bias)
        if b is None or b[1] != (w[1][0],):
            return None
        inputs.append(b[0])
    return (*x[1][:-1], w[1][0]), inputs


@_rule("call_function", torch.matmul, operator.matmul)
@_rule("call_method", "matmul", "__matmul__")
def _matmul(args: tuple, kwargs: dict) -> Optional[tuple]:
    """Batched matmul of contiguous tensors of at least two dimensions whose contracted sizes and
    batch sizes are decided without a guard."""
    if len(args) != 2 or kwargs:
        return None
    a, b = _dense(args[0]), _dense(args[1])
    if a is None or b is None or len(a[1]) < 2 or len(b[1]) < 2 or not _eq(a[1][-1], b[1][-2]):
        return None
    batch = broadcast(a[1][:-2], b[1][:-2])
    if batch is None:
        return None
    return (*batch, a[1][-2], b[1][-1]), [a[0], b[0]]


@_rule("call_function", F.layer_norm)
def _layer_norm(args: tuple, kwargs: dict) -> Optional[tuple]:
    """Over static trailing sizes (the hidden size), with static weight and bias."""
    names = ("input", "normalized_shape", "weight", "bias", "eps")
    if len(args) > len(names) or not _only(kwargs, {n: None for n in names[len(args):]}):
        return None
    bound = dict(zip(names, args), **kwargs)
    x, normalized = _dense(bound.get("input")), bound.get("normalized_shape")
    if x is None or type(normalized) not in (tuple, list, torch.Size):
        return None
    normalized = tuple(normalized)
    if not normalized or len(normalized) > len(x[1]) or any(type(n) is not int for n in normalized):
        return None
    trailing = x[1][len(x[1]) - len(normalized):]
    if any(type(n) is not int for n in trailing) or trailing != normalized:
        return None
    inputs = [x[0]]
    for name in ("weight", "bias"):
        if bound.get(name) is not None:
            t = _dense(bound[name])
            if t is None or t[1] != normalized:
                return None
            inputs.append(t[0])
    return x[1], inputs


@_rule("call_method", "softmax", "log_softmax")
def _softmax(args: tuple, kwargs: dict) -> Optional[tuple]:
    if not _only(kwargs, {"dim": None}) or len(args) + len(kwargs) != 2:
        return None
    x = _dense(args[0])
    dim = args[1] if len(args) == 2 else kwargs["dim"]
    if x is None or type(dim) is not int or not -max(len(x[1]), 1) <= dim < max(len(x[1]), 1):
        return None
    return x[1], [x[0]]


@_rule("call_function", torch.addmm)
def _addmm(args: tuple, kwargs: dict) -> Optional[tuple]:
    """bias + a @ b (GPT-2's Conv1D on a flattened batch): `a` of symbolic rows, `b` and the bias
    static."""
    if len(args) != 3 or kwargs:
        return None
    bias, a, b = _dense(args[0]), _dense(args[1]), _dense(args[2])
    if bias is None or a is None or b is None or len(a[1]) != 2 or len(b[1]) != 2:
        return None
    if b[0]._has_symbolic_sizes_strides or bias[0]._has_symbolic_sizes_strides:
        return None
    if type(a[1][1]) is not int or a[1][1] != b[1][0] or bias[1] != (b[1][1],):
        return None
    return (a[1][0], b[1][1]), [a[0], b[0], bias[0]]


@_rule("call_function", torch.pow, operator.pow)
@_rule("call_method", "pow", "__pow__")
def _power(args: tuple, kwargs: dict) -> Optional[tuple]:
    """A floating tensor to a Python number's power: the tensor's dtype."""
    if len(args) != 2 or kwargs or type(args[1]) not in (int, float):
        return None
    return _unary(args[:1], {})


@_rule("call_method", "mean")
def _mean(args: tuple, kwargs: dict) -> Optional[tuple]:
    """`x.mean(dim, keepdim=True)` over one static dimension (RMSNorm's variance)."""
    if len(args) != 2 or set(kwargs) != {"keepdim"} or kwargs["keepdim"] is not True or type(args[1]) is not int:
        return None
    found = _dense(args[0])
    if found is None or not -len(found[1]) <= args[1] < len(found[1]):
        return None
    shape = list(found[1])
    dim = args[1] % len(shape)
    if type(shape[dim]) is not int:
        return None
    shape[dim] = 1
    return tuple(shape), [found[0]]


@_rule("call_function", torch.cat)
def _cat(args: tuple, kwargs: dict) -> Optional[tuple]:
    """Tensors joined along a static dimension, their other sizes equal as expressions."""
    operands = cat_operands(args, kwargs)
    if operands is None:
        return None
    items, dim = operands
    found = [_dense(item) for item in items]
    if any(f is None for f in found):
        return None
    ndim = len(found[0][1])
    if ndim == 0 or not -ndim <= dim < ndim or any(len(f[1]) != ndim for f in found):
        return None
    dim %= ndim
    shape = list(found[0][1])
    for f in found:
        size = f[1][dim]
        if type(size) is not int or size == 0:
            return None  # (a symbolic sum, or an empty tensor cat may skip)
        if any(not _eq(f[1][i], shape[i]) for i in range(ndim) if i != dim):
            return None
    shape[dim] = sum(f[1][dim] for f in found)
    return tuple(shape), [f[0] for f in found]


_INDEX_DTYPES = (torch.int64, torch.int32)


@_rule("call_function", F.embedding)
def _embedding(args: tuple, kwargs: dict) -> Optional[tuple]:
    """Rows of a static weight picked by a tensor of indices of symbolic sizes: the indices' sizes
    and the weight's width, the weight's dtype (`infer` sees only the weight)."""
    names = ("input", "weight", "padding_idx", "max_norm", "norm_type", "scale_grad_by_freq", "sparse")
    if len(args) > len(names) or not _only(kwargs, {n: None for n in names[len(args):]}):
        return None
    bound = dict(zip(names, args), **kwargs)
    if bound.get("max_norm") is not None or bound.get("sparse", False) is not False:
        return None  # (max_norm renormalizes the weight in place)
    padding = bound.get("padding_idx")
    if padding is not None and type(padding) is not int:
        return None
    if type(bound.get("scale_grad_by_freq", False)) is not bool:
        return None
    weight = _dense(bound.get("weight"))
    ids = bound.get("input")
    t = ids.meta.get("example_value") if type(ids) is torch.fx.Node else None
    if weight is None or len(weight[1]) != 2 or weight[0]._has_symbolic_sizes_strides:
        return None
    if padding is not None and not -weight[1][0] <= padding < weight[1][0]:
        return None  # (F.embedding raises)
    if type(t) is not FakeTensor or t.constant is not None or t.layout is not torch.strided:
        return None
    if t.dtype not in _INDEX_DTYPES or t.fake_device != weight[0].fake_device or t.dim() == 0:
        return None
    shape = tuple(t.shape)
    if type(t.storage_offset()) is not int or t.storage_offset() != 0:
        return None
    if any(type(n) is not int and not _size_at_least_two(n) for n in shape):
        return None
    if not strides_are_contiguous(t.stride(), shape):
        return None
    return (*shape, weight[1][1]), [weight[0]]


# -- factories ------------------------------------------------------------------------------------

_CPU = torch.device("cpu")


@_rule("call_function", torch.arange)
def _arange(args: tuple, kwargs: dict) -> Optional[tuple]:
    """`torch.arange(n)` of a symbolic size `n` on the CPU (a position index): torch/_refs'
    `arange` computes its length as `(n - 0 + 1 - 1) // 1`, the expression of `n`, asking only
    `n >= 0` (true of a size of at least 2); int64, contiguous, requiring no grad."""
    if len(args) != 1 or not _only(kwargs, {"device": None}) or type(args[0]) is not torch.fx.Node:
        return None
    end = args[0].meta.get("example_value")
    if type(end) is not torch.SymInt or not _size_at_least_two(end):
        return None
    device = kwargs.get("device")
    if device is None:
        device = torch.get_default_device()
    if type(device) is not torch.device or device != _CPU:
        return None
    return (end,), (), torch.int64, _CPU

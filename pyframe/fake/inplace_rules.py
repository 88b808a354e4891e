"""Rules for the ops whose output is one of their inputs: in-place ops, and the calls ATen answers
with their argument itself (`x.to(...)` of its own dtype and device, `x.contiguous()` of a
contiguous tensor, dropout outside training). The output is that very FakeTensor, given without
FakeTensorMode where the op leaves its metadata as it was (fake/rules.py has the rules of ops
that make a new tensor). tests/test_fake_rules.py compares them with FakeTensorMode.
"""
from __future__ import annotations

import inspect
import operator
from typing import Any, Callable, Optional

import torch
import torch.fx
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensor

from .rules import _SCALARS, _dense, broadcast_shapes


# -- in place -----------------------------------------------------------------------------------
# An in-place op gives back its first argument, whose metadata it leaves as it was: the output is
# that very FakeTensor. It is answered only where autograd lets the op run and changes nothing a
# trace can read: the tensor is dense and is no view (in place on a view rewrites its base's
# history), does not require grad as a leaf (autograd raises), and requires grad already if any
# other argument does (else the op would make it). The other argument is a Python number or a
# tensor of the same dtype that broadcasts to the first's shape.

InplaceRule = Callable[[tuple, dict], Optional[tuple]]  # -> (the tensor written, [other tensors])
_INPLACE_RULES: dict[tuple[str, Any], InplaceRule] = {}


def infer_inplace(op: str, target: Any, args: tuple, kwargs: dict, grad_enabled: bool,
                  autocast: bool, symbolic: bool = False) -> Optional[FakeTensor]:
    """The FakeTensor an in-place op gives back (its first argument's) if a rule knows the op
    leaves it as it was, or that an op that returns its argument itself gives (_SELF_RULES);
    None to propagate it for real. `symbolic`: the trace is over a ShapeEnv, where the Python
    dispatcher decomposes some of these ops otherwise (dropout outside training into a copy):
    there only `x.to(...)` of its own dtype and device, which ATen answers before any dispatch."""
    if autocast:
        return None
    try:
        rule = _INPLACE_RULES.get((op, target)) if not symbolic else None
        same = _SELF_RULES.get((op, target)) if not symbolic or (op, target) in _SYMBOLIC_SELF_RULES else None
    except TypeError:
        return None
    if same is not None:
        return same(args, kwargs)
    found = rule(args, kwargs) if rule is not None else None
    if found is None:
        return None
    written, others = found
    if written._is_view() or written.is_inference():
        return None
    for t in others:
        if t.dtype is not written.dtype or t.fake_device != written.fake_device:
            return None
    if grad_enabled:
        if written.requires_grad and written.is_leaf:
            return None
        if not written.requires_grad and any(t.requires_grad for t in others):
            return None
    return written


def _inplace_unary(args: tuple, kwargs: dict) -> Optional[tuple]:
    if len(args) != 1 or kwargs:
        return None
    t = _dense(args[0])
    return (t, []) if t is not None else None


def _inplace_activation(args: tuple, kwargs: dict) -> Optional[tuple]:
    """F.relu(x, inplace=True), F.silu(x, True)."""
    inplace = args[1] if len(args) == 2 else kwargs.get("inplace", False)
    if len(args) not in (1, 2) or set(kwargs) - {"inplace"} or inplace is not True:
        return None
    t = _dense(args[0])
    return (t, []) if t is not None else None


def _inplace_binary(args: tuple, kwargs: dict) -> Optional[tuple]:
    if len(args) != 2 or kwargs:
        return None
    written, other = _dense(args[0]), args[1]
    if written is None:
        return None
    if type(other) in _SCALARS:
        return written, []
    t = _dense(other)
    if t is None or broadcast_shapes(tuple(written.shape), tuple(t.shape)) != tuple(written.shape):
        return None
    return written, [t]


for _name in ("relu_", "sigmoid_", "tanh_", "neg_", "exp_", "sin_", "cos_", "zero_"):
    _INPLACE_RULES[("call_method", _name)] = _inplace_unary
_INPLACE_RULES[("call_function", torch.relu_)] = _inplace_unary
for _target in (F.relu, F.silu):
    _INPLACE_RULES[("call_function", _target)] = _inplace_activation
for _name in ("add_", "sub_", "mul_", "div_"):
    _INPLACE_RULES[("call_method", _name)] = _inplace_binary
for _target in (operator.iadd, operator.isub, operator.imul, operator.itruediv):
    _INPLACE_RULES[("call_function", _target)] = _inplace_binary


# -- ops that give back their argument ------------------------------------------------------------
# Where nothing is to be done, ATen returns the input tensor itself (the same object, at the same
# version): `x.to(dtype, device)` already of that dtype and on that device (`_to_will_alias`),
# `x.contiguous()` of a contiguous tensor, dropout outside training (`_dropout_impl`). Any tensor
# qualifies, views and leaves that require grad included: no autograd node is made.

SelfRule = Callable[[tuple, dict], Optional[FakeTensor]]
_SELF_RULES: dict[tuple[str, Any], SelfRule] = {}


def _fake(v: Any) -> Optional[FakeTensor]:
    t = v.meta.get("example_value") if type(v) is torch.fx.Node else None
    return t if type(t) is FakeTensor and t.layout is torch.strided else None


def _to_itself(args: tuple, kwargs: dict) -> Optional[FakeTensor]:
    """`x.to(dtype)`, `x.to(device)`, `x.to(device, dtype)`, or with `dtype=` / `device=` only."""
    t = _fake(args[0]) if args else None
    if t is None:
        return None
    rest = args[1:]
    if rest and kwargs:
        return None
    if rest:
        kinds = tuple(type(a) for a in rest)
        if kinds not in ((torch.dtype,), (torch.device,), (torch.device, torch.dtype)):
            return None
        wanted = dict(zip(["device" if k is torch.device else "dtype" for k in kinds], rest))
    else:
        if not kwargs or set(kwargs) - {"dtype", "device"}:
            return None
        wanted = kwargs
    dtype, device = wanted.get("dtype", t.dtype), wanted.get("device", t.fake_device)
    if type(dtype) is not torch.dtype or type(device) is not torch.device:
        return None
    return t if dtype is t.dtype and device == t.fake_device else None


def _contiguous_itself(args: tuple, kwargs: dict) -> Optional[FakeTensor]:
    t = _fake(args[0]) if len(args) == 1 and not kwargs else None
    if t is None or t._has_symbolic_sizes_strides:
        return None  # (over symbolic sizes, is_contiguous() may be a guard: the real propagation)
    return t if t.is_contiguous() else None


def dropout_outside_training(args: tuple, kwargs: dict) -> Any:
    """The input argument of F.dropout(x, p, training=False) (what nn.Dropout calls in eval mode),
    not in place; None for any other call (training, in place, p not a number in [0, 1])."""
    if len(args) > len(_DROPOUT_PARAMETERS) or any(k not in _DROPOUT_PARAMETERS for k in kwargs):
        return None  # (F.dropout's signature, bound by hand: inspect's bind costs most of the rule)
    bound = dict(_DROPOUT_DEFAULTS)
    for name, value in zip(_DROPOUT_PARAMETERS, args):
        bound[name] = value
    for name, value in kwargs.items():
        if name in _DROPOUT_PARAMETERS[:len(args)]:
            return None  # (given twice: a TypeError)
        bound[name] = value
    if len(bound) != len(_DROPOUT_PARAMETERS):
        return None  # (the input missing)
    t, p, training, inplace = (bound[name] for name in _DROPOUT_PARAMETERS)
    if training is not False or inplace is not False or type(p) not in (int, float) or not 0 <= p <= 1:
        return None  # (F.dropout raises for p outside [0, 1])
    return t


def _dropout_outside_training(args: tuple, kwargs: dict) -> Optional[FakeTensor]:
    return _fake(dropout_outside_training(args, kwargs))


_DROPOUT_PARAMETERS = tuple(inspect.signature(F.dropout).parameters)  # (input, p, training, inplace)
_DROPOUT_DEFAULTS = {name: param.default for name, param in inspect.signature(F.dropout).parameters.items()
                     if param.default is not inspect.Parameter.empty}
assert _DROPOUT_PARAMETERS == ("input", "p", "training", "inplace")
_SELF_RULES[("call_method", "to")] = _to_itself
_SYMBOLIC_SELF_RULES = {("call_method", "to")}
_SELF_RULES[("call_method", "contiguous")] = _contiguous_itself
_SELF_RULES[("call_function", F.dropout)] = _dropout_outside_training

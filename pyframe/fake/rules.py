"""Shape rules: the output of the commonest ops on dense tensors, without FakeTensorMode.

FakeTensorMode propagates an op by dispatching it, through Python, to meta kernels that are mostly
Python too: 60 us for `x.sin()`, 400 us for `F.linear` of a batch (five aten ops), 900 us for a
batched matmul. Dynamo pays this for every op; the memo (fake/memo.py) saves it for an op seen
before on same-shaped inputs, but the first of each kind in a network still pays.

Yet most of a network's ops are a few kinds (linear, convolution, pooling, normalization,
arithmetic and activations, matmul and addmm, embedding, attention, concatenation) on dense tensors of one floating
dtype, and there what the op gives is simple: a new contiguous tensor of a computed shape, with its
inputs' dtype and device, requiring grad when grad mode is on and an input requires it. A rule
answers only in that narrow case: every tensor argument contiguous (its strides exactly the
contiguous ones; matmul, attention and linear's input take any strides), of one floating dtype and one device,
arguments of the kinds the rule knows. Anything else (strided or mixed-dtype inputs, `out=`, an
argument the rule does not expect, a shape the op rejects) gets None and the real propagation.
In-place ops have rules of their own (fake/inplace_rules.py): they give back their first argument,
as do `x.to(...)` to its own dtype and device, `x.contiguous()` of a contiguous tensor and dropout
outside training.
No autocast region may be active, and torch function and dispatch modes and inference mode are
ruled out before (the memo key is None then). tests/test_fake_rules.py compares every rule with
FakeTensorMode on random shapes, strides, dtypes and grad flags.
"""
from __future__ import annotations

import inspect
import operator
from typing import Any, Callable, Optional, Sequence

import torch
import torch.fx
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensor

from .memo import _Output, _Outputs

_FLOATING = frozenset({torch.float32, torch.float64, torch.float16, torch.bfloat16})
_SCALARS = (int, float, bool)

# (args, kwargs) -> (shape, [tensor inputs]) or None; (shape, inputs, "with None") for `(out, None)`
Rule = Callable[[tuple, dict], Optional[tuple]]
_RULES: dict[tuple[str, Any], Rule] = {}


def infer(op: str, target: Any, args: tuple, kwargs: dict, grad_enabled: bool,
          autocast: bool) -> Optional[_Output | _Outputs]:
    """The output of `target(*args, **kwargs)` (fx arguments: nodes and constants) if a rule
    knows it; None to propagate it for real."""
    found = apply_rule(_RULES, op, target, args, kwargs, autocast)
    if found is None:
        return None
    shape, inputs = found[0], found[1]
    out = fresh_output(shape, contiguous_strides(shape), inputs, grad_enabled)
    if out is None:
        return None
    return _Outputs(tuple, [out, None]) if len(found) == 3 and found[2] == "with None" else out


def apply_rule(table: dict, op: str, target: Any, args: tuple, kwargs: dict, autocast: bool) -> Optional[tuple]:
    """What the rule `table` holds for (op, target) gives for these arguments (this module's
    rules, or sym_rules' for symbolic sizes); None under autocast, for a target without a rule (or
    that does not hash), or where the rule declines."""
    if autocast:
        return None
    try:
        rule = table.get((op, target))
    except TypeError:  # an unhashable target
        return None
    return rule(args, kwargs) if rule is not None else None


def registrar(table: dict) -> Callable[..., Callable[[Rule], Rule]]:
    """The decorator that registers a rule in `table` for an op and its targets."""
    def rule(op: str, *targets: Any) -> Callable[[Rule], Rule]:
        def register(fn: Rule) -> Rule:
            for target in targets:
                table[(op, target)] = fn
            return fn
        return register
    return rule


def fresh_output(shape: tuple, strides: tuple, inputs: list[FakeTensor], grad_enabled: bool) -> Optional[_Output]:
    """A new tensor of `shape` and `strides` made from `inputs`: their dtype and device (None where
    they differ), requiring grad (as a non-leaf) where autograd would make it so."""
    dtype, device = inputs[0].dtype, inputs[0].fake_device
    for t in inputs:
        if t.dtype is not dtype or t.fake_device != device:
            return None
    requires_grad = grad_enabled and any(t.requires_grad for t in inputs)
    return _Output(shape, strides, dtype, device, requires_grad, not requires_grad)


def contiguous_strides(shape: Sequence[Any]) -> tuple[Any, ...]:
    """torch's contiguous strides (c10's `contiguous_strides`: each the product of the sizes after
    it, a size below 1 counted as 1). Sizes may be symbols of at least 2 too: computed by SymInt
    arithmetic as torch computes them, each stride is the expression FakeTensorMode's would hold
    (`64*s77`)."""
    strides: list = []
    step: Any = 1
    for size in reversed(shape):
        strides.append(step)
        step = step * (max(size, 1) if type(size) is int else size)
    return tuple(reversed(strides))


def _strided(v: Any) -> Optional[FakeTensor]:
    """The FakeTensor of a node whose value is a plain strided tensor of a floating dtype."""
    if type(v) is not torch.fx.Node:
        return None
    t = v.meta.get("example_value")
    if type(t) is not FakeTensor or t.constant is not None or t.layout is not torch.strided:
        return None
    if t.dtype not in _FLOATING or t._has_symbolic_sizes_strides or t.is_conj() or t.is_neg():
        return None
    return t


def _dense(v: Any) -> Optional[FakeTensor]:
    """The FakeTensor of a node whose value is a dense, contiguous tensor of a floating dtype."""
    t = _strided(v)
    if t is None or t.storage_offset() != 0 or t.stride() != contiguous_strides(tuple(t.shape)):
        return None
    return t


_rule = registrar(_RULES)


def _only(kwargs: dict, allowed: dict[str, Any]) -> bool:
    """Every keyword is one of `allowed`, with its allowed value (a value the rule's output
    does not depend on; `None` in `allowed` accepts any)."""
    for name, value in kwargs.items():
        if name not in allowed:
            return False
        expected = allowed[name]
        if expected is not None and value != expected:
            return False
    return True


def broadcast_shapes(*shapes: tuple[int, ...]) -> Optional[tuple[int, ...]]:
    ndim = max(len(s) for s in shapes)
    out = [1] * ndim
    for shape in shapes:
        for i, size in enumerate(shape, ndim - len(shape)):
            if size == out[i] or size == 1:
                continue
            if out[i] != 1:
                return None
            out[i] = size
    return tuple(out)


# -- pointwise ----------------------------------------------------------------------------------

_UNARY = ("sin", "cos", "tan", "tanh", "sigmoid", "exp", "log", "sqrt", "rsqrt", "relu", "neg", "abs",
          "sinh", "cosh", "erf", "reciprocal")


def _unary(args: tuple, kwargs: dict) -> Optional[tuple]:
    if len(args) != 1 or kwargs:
        return None
    t = _dense(args[0])
    return (tuple(t.shape), [t]) if t is not None else None


def _activation(args: tuple, kwargs: dict) -> Optional[tuple]:
    """F.relu/F.silu/F.gelu and the like: one tensor, no in-place (an `inplace`/`approximate`
    keyword or second argument as they take)."""
    if len(args) == 2 and args[1] in (False, "none", "tanh"):
        args = args[:1]
    if len(args) != 1 or not _only(kwargs, {"inplace": False, "approximate": None}):
        return None
    if kwargs.get("approximate", "none") not in ("none", "tanh"):
        return None
    t = _dense(args[0])
    return (tuple(t.shape), [t]) if t is not None else None


for _name in _UNARY:
    _rule("call_method", _name)(_unary)
    if hasattr(torch, _name):
        _rule("call_function", getattr(torch, _name))(_unary)
_rule("call_function", operator.neg)(_unary)
_rule("call_function", F.relu, F.silu, F.gelu, F.elu, F.leaky_relu, F.hardswish, F.mish)(_activation)
_rule("call_method", "gelu")(_activation)


def _binary(args: tuple, kwargs: dict) -> Optional[tuple]:
    """a (op) b: tensors of one dtype broadcast, or a tensor and a Python number (which takes
    the tensor's floating dtype)."""
    if len(args) != 2 or kwargs:
        return None
    a, b = args
    ta, tb = _dense(a), _dense(b)
    if ta is not None and tb is not None:
        shape = broadcast_shapes(tuple(ta.shape), tuple(tb.shape))
        return (shape, [ta, tb]) if shape is not None else None
    tensor, other = (ta, b) if ta is not None else (tb, a)
    if tensor is None or type(other) not in _SCALARS:
        return None
    return tuple(tensor.shape), [tensor]


_rule("call_function", operator.add, operator.sub, operator.mul, operator.truediv,
      torch.add, torch.sub, torch.mul, torch.div)(_binary)
_rule("call_method", "add", "sub", "mul", "div", "__add__", "__sub__", "__mul__", "__truediv__",
      "__radd__", "__rmul__")(_binary)


# -- linear algebra ---------------------------------------------------------------------------------

@_rule("call_function", torch._C._nn.linear, F.linear)
def _linear(args: tuple, kwargs: dict) -> Optional[tuple]:
    if not _only(kwargs, {"bias": None}) or not 2 <= len(args) + len(kwargs) <= 3:
        return None
    x, w = _strided(args[0]), _dense(args[1])
    bias = args[2] if len(args) == 3 else kwargs.get("bias")
    if x is None or w is None or w.dim() != 2 or x.dim() == 0 or x.shape[-1] != w.shape[1]:
        return None
    inputs = [x, w]
    if bias is not None:
        b = _dense(bias)
        if b is None or tuple(b.shape) != (w.shape[0],):
            return None
        inputs.append(b)
    return (*x.shape[:-1], w.shape[0]), inputs


@_rule("call_function", torch.matmul, operator.matmul)
@_rule("call_method", "matmul", "__matmul__")
def _matmul(args: tuple, kwargs: dict) -> Optional[tuple]:
    """Batched matmul of tensors of at least two dimensions (vectors take other paths), of any
    strides (`q @ k.transpose(-2, -1)`): the product is always a new contiguous tensor."""
    if len(args) != 2 or kwargs:
        return None
    a, b = _strided(args[0]), _strided(args[1])
    if a is None or b is None or a.dim() < 2 or b.dim() < 2 or a.shape[-1] != b.shape[-2]:
        return None
    batch = broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]))
    if batch is None:
        return None
    return (*batch, a.shape[-2], b.shape[-1]), [a, b]


@_rule("call_function", torch.addmm)
@_rule("call_method", "addmm")
def _addmm(args: tuple, kwargs: dict) -> Optional[tuple]:
    """`torch.addmm(input, mat1, mat2, *, beta, alpha)` (Hugging Face's Conv1D): the product of
    two matrices of any strides plus `input` broadcast to it, a new contiguous tensor (the meta
    kernel's `new_empty`); `input` may not be larger than the product."""
    if len(args) != 3 or not _only(kwargs, {"beta": None, "alpha": None}):
        return None
    if not all(type(v) in _SCALARS for v in kwargs.values()):
        return None
    bias, a, b = _strided(args[0]), _strided(args[1]), _strided(args[2])
    if bias is None or a is None or b is None or a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        return None
    shape = (a.shape[0], b.shape[1])
    if bias.dim() > 2 or broadcast_shapes(tuple(bias.shape), shape) != shape:
        return None
    return shape, [bias, a, b]


@_rule("call_function", torch.mm)
@_rule("call_method", "mm")
def _mm(args: tuple, kwargs: dict) -> Optional[tuple]:
    """`torch.mm(a, b)` of two matrices of any strides: a new contiguous (n, m) tensor."""
    if len(args) != 2 or kwargs:
        return None
    a, b = _strided(args[0]), _strided(args[1])
    if a is None or b is None or a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        return None
    return (a.shape[0], b.shape[1]), [a, b]


@_rule("call_function", F.embedding)
def _embedding(args: tuple, kwargs: dict) -> Optional[tuple]:
    """`F.embedding(indices, weight)` (nn.Embedding's forward, padding_idx given or not): rows of a
    dense matrix picked by an integer tensor of any shape and strides, a new contiguous tensor of
    the indices' shape plus the row size, of the weight's dtype. Not with `max_norm` (it renorms the
    weight in place) or `sparse` (a sparse gradient)."""
    names = ("input", "weight", "padding_idx", "max_norm", "norm_type", "scale_grad_by_freq", "sparse")
    if not 2 <= len(args) <= len(names) or not _only(kwargs, {n: None for n in names[len(args):]}):
        return None
    bound = dict(zip(names, args), **kwargs)
    if bound.get("max_norm") is not None or bound.get("sparse", False) is not False:
        return None
    if type(bound.get("padding_idx")) not in (int, type(None)) or type(bound.get("scale_grad_by_freq", False)) is not bool:
        return None
    weight, indices = _dense(bound["weight"]), bound["input"]
    t = indices.meta.get("example_value") if type(indices) is torch.fx.Node else None
    if weight is None or weight.dim() != 2 or type(t) is not FakeTensor or t.constant is not None:
        return None
    if t.dtype not in (torch.int64, torch.int32) or t.layout is not torch.strided or t._has_symbolic_sizes_strides:
        return None
    padding = bound.get("padding_idx")
    if padding is not None and not -weight.shape[0] <= padding < weight.shape[0]:
        return None  # (F.embedding raises)
    return (*t.shape, weight.shape[1]), [weight]


# -- normalization ---------------------------------------------------------------------------------

@_rule("call_function", F.layer_norm)
def _layer_norm(args: tuple, kwargs: dict) -> Optional[tuple]:
    names = ("input", "normalized_shape", "weight", "bias", "eps")
    if len(args) > len(names) or not _only(kwargs, {n: None for n in names[len(args):]}):
        return None
    bound = dict(zip(names, args), **kwargs)
    x, normalized = _dense(bound.get("input")), bound.get("normalized_shape")
    if x is None or type(normalized) not in (tuple, list, torch.Size):
        return None
    normalized = tuple(normalized)
    if not normalized or tuple(x.shape[x.dim() - len(normalized):]) != normalized or len(normalized) > x.dim():
        return None
    inputs = [x]
    for name in ("weight", "bias"):
        if bound.get(name) is not None:
            t = _dense(bound[name])
            if t is None or tuple(t.shape) != normalized:
                return None
            inputs.append(t)
    return tuple(x.shape), inputs


@_rule("call_function", F.batch_norm)
def _batch_norm(args: tuple, kwargs: dict) -> Optional[tuple]:
    """Inference (training=False): training mode updates the running statistics in place."""
    names = ("input", "running_mean", "running_var", "weight", "bias", "training", "momentum", "eps")
    if len(args) > len(names) or not _only(kwargs, {n: None for n in names[len(args):]}):
        return None
    bound = dict(zip(names, args), **kwargs)
    x = _dense(bound.get("input"))
    if x is None or x.dim() < 2 or bound.get("training", False) is not False:
        return None
    inputs = [x]
    for name in ("running_mean", "running_var", "weight", "bias"):
        if bound.get(name) is None:
            if name.startswith("running"):
                return None  # no statistics: inference is impossible, the op raises
            continue
        t = _dense(bound[name])
        if t is None or tuple(t.shape) != (x.shape[1],):
            return None
        inputs.append(t)
    return tuple(x.shape), inputs


@_rule("call_method", "softmax", "log_softmax")
def _softmax(args: tuple, kwargs: dict) -> Optional[tuple]:
    if not _only(kwargs, {"dim": None}) or len(args) + len(kwargs) != 2:
        return None
    x = _dense(args[0])
    dim = args[1] if len(args) == 2 else kwargs["dim"]
    if x is None or type(dim) is not int or not -max(x.dim(), 1) <= dim < max(x.dim(), 1):
        return None
    return tuple(x.shape), [x]


# -- attention -------------------------------------------------------------------------------------

_MHA_PARAMETERS = tuple(inspect.signature(F.multi_head_attention_forward).parameters)
# What the rule models: packed in-projection, no extra key/value bias or zero attention, no masks,
# no attention weights asked for. (Dropout changes values only.)
_MHA_PLAIN = {"bias_k": None, "bias_v": None, "add_zero_attn": False, "key_padding_mask": None,
              "need_weights": False, "attn_mask": None, "use_separate_proj_weight": False,
              "q_proj_weight": None, "k_proj_weight": None, "v_proj_weight": None, "static_k": None,
              "static_v": None, "is_causal": False}


@_rule("call_function", F.multi_head_attention_forward)
def _multi_head_attention(args: tuple, kwargs: dict) -> Optional[tuple]:
    """nn.MultiheadAttention's functional core on batched (L, N, E) inputs, `need_weights=False`:
    `(out, None)`, `out` a new contiguous (L, N, E) tensor."""
    if len(args) > len(_MHA_PARAMETERS) or set(kwargs) - set(_MHA_PARAMETERS[len(args):]):
        return None
    bound = dict(zip(_MHA_PARAMETERS, args), **kwargs)
    if "need_weights" not in bound:  # its default (True) asks for the weights
        return None
    for name, plain in _MHA_PLAIN.items():
        value = bound.get(name, plain)
        if value is not plain and not (type(value) is bool and value == plain):
            return None
    query, key, value = (_strided(bound.get(n)) for n in ("query", "key", "value"))
    if query is None or key is None or value is None or query.dim() != 3:
        return None
    target_len, batch, embed = query.shape
    heads = bound.get("num_heads")
    if tuple(key.shape) != tuple(value.shape) or key.dim() != 3 or key.shape[1:] != query.shape[1:]:
        return None
    if bound.get("embed_dim_to_check") != embed or type(heads) is not int or heads < 1 or embed % heads:
        return None
    in_w, out_w = _dense(bound.get("in_proj_weight")), _dense(bound.get("out_proj_weight"))
    if in_w is None or out_w is None or tuple(in_w.shape) != (3 * embed, embed) or tuple(out_w.shape) != (embed, embed):
        return None
    inputs = [query, key, value, in_w, out_w]
    for name, size in (("in_proj_bias", 3 * embed), ("out_proj_bias", embed)):
        if bound.get(name) is not None:
            b = _dense(bound[name])
            if b is None or tuple(b.shape) != (size,):
                return None
            inputs.append(b)
    if type(bound.get("dropout_p")) not in (int, float) or type(bound.get("training", True)) is not bool:
        return None
    return (target_len, batch, embed), inputs, "with None"


# -- convolution and concatenation ---------------------------------------------------------------

def _pair(v: Any) -> Optional[tuple[int, int]]:
    if type(v) is int:
        return v, v
    if type(v) in (tuple, list) and len(v) == 2 and all(type(i) is int for i in v):
        return v[0], v[1]
    if type(v) in (tuple, list) and len(v) == 1 and type(v[0]) is int:
        return v[0], v[0]
    return None


@_rule("call_function", torch.conv2d, F.conv2d)
def _conv2d(args: tuple, kwargs: dict) -> Optional[tuple]:
    names = ("input", "weight", "bias", "stride", "padding", "dilation", "groups")
    if len(args) > len(names) or not _only(kwargs, {n: None for n in names[len(args):]}):
        return None
    bound = dict(zip(names, args), **kwargs)
    x, w = _dense(bound.get("input")), _dense(bound.get("weight"))
    stride, padding = _pair(bound.get("stride", 1)), _pair(bound.get("padding", 0))
    dilation, groups = _pair(bound.get("dilation", 1)), bound.get("groups", 1)
    if x is None or w is None or x.dim() != 4 or w.dim() != 4 or None in (stride, padding, dilation):
        return None
    n, c, h, width = x.shape
    out_channels, in_per_group, kh, kw = w.shape
    if type(groups) is not int or groups < 1 or c != in_per_group * groups or out_channels % groups:
        return None
    if min(stride) < 1 or min(dilation) < 1 or min(padding) < 0:
        return None
    # A tensor whose channels or whole image have size 1 is contiguous in both memory formats:
    # convolution picks one by rules of its own there.
    if c == 1 or h * width == 1 or out_channels == 1:
        return None
    inputs = [x, w]
    if bound.get("bias") is not None:
        b = _dense(bound["bias"])
        if b is None or tuple(b.shape) != (out_channels,):
            return None
        inputs.append(b)
    out_h = (h + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    out_w = (width + 2 * padding[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    if out_h < 1 or out_w < 1 or out_h * out_w == 1:
        return None
    return (n, out_channels, out_h, out_w), inputs


def _pool_args(args: tuple, kwargs: dict, names: tuple[str, ...], plain: dict[str, Any]) -> Optional[dict]:
    if len(args) > len(names) or set(kwargs) - set(names[len(args):]):
        return None
    bound = dict(zip(names, args), **kwargs)
    for name, value in plain.items():
        if bound.get(name, value) != value or type(bound.get(name, value)) is not type(value):
            return None
    return bound


def _pooled_size(size: int, kernel: int, stride: int, padding: int, dilation: int = 1) -> int:
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def _pool2d(x: FakeTensor, bound: dict, dilated: bool) -> Optional[tuple]:
    kernel = _pair(bound.get("kernel_size"))
    stride = _pair(bound.get("stride") if bound.get("stride") not in (None, []) else bound.get("kernel_size"))
    padding, dilation = _pair(bound.get("padding", 0)), _pair(bound.get("dilation", 1) if dilated else 1)
    if x is None or x.dim() != 4 or None in (kernel, stride, padding, dilation):
        return None
    n, c, h, w = x.shape
    if min(kernel) < 1 or min(stride) < 1 or min(dilation) < 1 or min(padding) < 0:
        return None
    if padding[0] * 2 > kernel[0] or padding[1] * 2 > kernel[1] or c == 1 or h * w == 1:
        return None  # (the op rejects padding over half the kernel; one channel or pixel: see conv2d)
    out_h = _pooled_size(h, kernel[0], stride[0], padding[0], dilation[0])
    out_w = _pooled_size(w, kernel[1], stride[1], padding[1], dilation[1])
    if out_h < 1 or out_w < 1 or out_h * out_w == 1:
        return None
    return (n, c, out_h, out_w), [x]


@_rule("call_function", F.max_pool2d)
def _max_pool2d(args: tuple, kwargs: dict) -> Optional[tuple]:
    names = ("input", "kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices")
    bound = _pool_args(args, kwargs, names, {"ceil_mode": False, "return_indices": False})
    return _pool2d(_dense(bound.get("input")), bound, dilated=True) if bound is not None else None


@_rule("call_function", F.avg_pool2d, torch._C._nn.avg_pool2d)
def _avg_pool2d(args: tuple, kwargs: dict) -> Optional[tuple]:
    names = ("input", "kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override")
    bound = _pool_args(args, kwargs, names, {"ceil_mode": False})
    if bound is None or bound.get("divisor_override") is not None or type(bound.get("count_include_pad", True)) is not bool:
        return None
    return _pool2d(_dense(bound.get("input")), bound, dilated=False)


@_rule("call_function", F.adaptive_avg_pool2d)
def _adaptive_avg_pool2d(args: tuple, kwargs: dict) -> Optional[tuple]:
    bound = _pool_args(args, kwargs, ("input", "output_size"), {})
    x = _dense(bound.get("input")) if bound is not None else None
    if x is None or x.dim() != 4:
        return None
    size = bound.get("output_size")
    size = (size, size) if type(size) is int else size
    if type(size) not in (tuple, list) or len(size) != 2:
        return None
    out = tuple(x.shape[2 + i] if s is None else s for i, s in enumerate(size))
    if any(type(s) is not int or s < 1 for s in out) or x.shape[1] == 1 or out[0] * out[1] == 1:
        return None
    return (x.shape[0], x.shape[1], *out), [x]


def cat_operands(args: tuple, kwargs: dict) -> Optional[tuple[list, int]]:
    """torch.cat's tensors and dimension, given as `(tensors[, dim])` with an int `dim`; else None."""
    if not _only(kwargs, {"dim": None}) or not 1 <= len(args) + len(kwargs) <= 2:
        return None
    items = args[0]
    dim = args[1] if len(args) == 2 else kwargs.get("dim", 0)
    if type(items) not in (tuple, list) or not items or type(dim) is not int:
        return None
    return list(items), dim


@_rule("call_function", torch.cat)
def _cat(args: tuple, kwargs: dict) -> Optional[tuple]:
    operands = cat_operands(args, kwargs)
    if operands is None:
        return None
    items, dim = operands
    tensors = [_dense(item) for item in items]
    if any(t is None for t in tensors):
        return None
    ndim = tensors[0].dim()
    if ndim == 0 or not -ndim <= dim < ndim or any(t.dim() != ndim for t in tensors):
        return None
    dim %= ndim
    shape = list(tensors[0].shape)
    for t in tensors[1:]:
        if any(t.shape[i] != shape[i] for i in range(ndim) if i != dim):
            return None
        shape[dim] += t.shape[dim]
    return tuple(shape), tensors

"""Corpus: structural pattern matching (`match` statements) decided while tracing: sequence
patterns with a star, mapping patterns with `**rest`, class patterns (positional through
`__match_args__`, and keyword) on dataclasses, namedtuples and tensors, guards, or-patterns,
literal and value patterns, nested patterns. Each case is one graph in torch._dynamo."""

import collections
import dataclasses
import enum

import torch

from pyframe.debug.cases import Inputs, case


@case(inputs=lambda: [torch.randn(4) for _ in range(4)])
def sequence_star_pattern(xs):
    match xs:
        case []:
            return None
        case [only]:
            return only
        case [first, *middle, last]:
            return first * last + sum(middle) + len(middle)


@case(inputs=lambda: (torch.randn(4), torch.randn(4)))
def sequence_patterns_in_order(x, y):
    out = []
    for subject in ((x,), [x, y], (x, y, x), "xy", range(3)):
        match subject:
            case [a]:
                out.append(a.cos())
            case [a, b]:
                out.append(a * b)
            case (a, _, c):  # a tuple pattern matches any sequence, a list too
                out.append(a - c if isinstance(c, torch.Tensor) else a)
            case str() as s:  # a str is never a sequence pattern's subject
                out.append(x * len(s))
    return out


@case(inputs=lambda: (torch.randn(4), {"op": "scale", "factor": 3.0, "bias": 1.0, "name": "fc"}))
def mapping_pattern_with_rest(x, cfg):
    match cfg:
        case {"op": "shift", "by": by}:
            return x + by
        case {"op": "scale", "factor": factor, **rest}:
            return x * factor + rest["bias"], sorted(rest)
        case _:
            return x


@dataclasses.dataclass
class Linear:
    weight: torch.Tensor
    bias: torch.Tensor | None = None


@dataclasses.dataclass
class Conv:
    weight: torch.Tensor
    stride: int = 1


@case(inputs=lambda: (torch.randn(3, 4), [Linear(torch.randn(4, 4), torch.randn(4)), Conv(torch.randn(4)),
                                          Linear(torch.randn(4, 4))]))
def class_pattern_positional_dataclass(x, layers):
    for layer in layers:
        match layer:
            case Linear(w, None):
                x = x @ w
            case Linear(w, b):
                x = x @ w + b
            case Conv(w, stride=2):
                x = x[:, ::2] * w[::2]
            case Conv(w):
                x = x * w
    return x


Point = collections.namedtuple("Point", "x y")


@case(inputs=lambda: (Point(torch.randn(4), 2.0), Point(torch.randn(4), torch.randn(4))))
def class_pattern_keyword_namedtuple(p, q):
    results = []
    for subject in (p, q, (p.x, 1.0)):
        match subject:
            case Point(x=x, y=float(y)):  # `float(y)` binds the subject itself
                results.append(x * y)
            case Point(x, y=torch.Tensor() as y):
                results.append(x + y)
            case (x, y):  # a plain tuple is no Point
                results.append(x - y)
    return results


@case(inputs=lambda: (torch.randn(4, 4), torch.randn(2, 3, 4)))
def guards_on_shapes(a, b):
    out = []
    for t in (a, b, a[0]):
        match t.shape:
            case (n, m) if n == m:
                out.append(t @ t)
            case (_, _, d) if d % 2 == 0:
                out.append(t.sum(-1))
            case (n,) | (n, _):
                out.append(t * n)
    return out


class Act(enum.Enum):
    RELU = "relu"
    GELU = "gelu"
    TANH = "tanh"


@case(inputs=lambda: Inputs((torch.randn(4),), {"acts": ["relu", Act.GELU, "none", 2, 0.5]}))
def or_literal_and_value_patterns(x, acts):
    for act in acts:
        match act:
            case "relu" | Act.RELU:
                x = torch.relu(x)
            case Act.GELU | Act.TANH:
                x = torch.nn.functional.gelu(x) if act is Act.GELU else torch.tanh(x)
            case 0 | 1 | 2 as n:
                x = x + n
            case float(scale) if scale < 1:
                x = x * scale
            case None | "none":
                pass
    return x


@dataclasses.dataclass
class Norm:
    eps: float
    weight: torch.Tensor


@case(inputs=lambda: (torch.randn(2, 4), {"blocks": [torch.randn(4, 4), torch.randn(4, 4)],
                                          "norm": Norm(1e-5, torch.randn(4)), "act": ("gelu", {"approximate": "tanh"})}))
def nested_patterns(x, model):
    match model:
        case {"blocks": [first, *others], "norm": Norm(eps=eps, weight=w), "act": ("gelu", {"approximate": approx})}:
            x = x @ first
            for block in others:
                x = torch.nn.functional.gelu(x @ block, approximate=approx)
            return torch.nn.functional.layer_norm(x, (4,), w, None, eps)
        case _:
            return x


@case(inputs=lambda: (torch.randn(3, 4), torch.randn(4, dtype=torch.float64), 3))
def tensor_class_patterns(a, b, k):
    out = []
    for subject in (a, b, k, (a, b)):
        match subject:
            case torch.Tensor(shape=(n, m), dtype=torch.float32):
                out.append(a.sum(0) * n + m)
            case torch.Tensor(ndim=1) as t:  # a tensor is not a sequence pattern's subject
                out.append(t.float().cos())
            case int(n) | float(n):
                out.append(a.mean() * n)
            case [torch.Tensor() as first, *_]:
                out.append(first.max())
    return out

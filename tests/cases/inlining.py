"""Corpus: calls to user Python code, inlined into the caller's graph (functions, closures,
methods, properties, super(), decorators, partials, recursion)."""

import functools

import torch

from pyframe.debug.cases import Inputs, case


def _affine(x, scale=2.0, *, shift=1.0):
    return x * scale + shift


def _scaled(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs) * 0.5
    return wrapper


@_scaled
def _cos_plus(x, y):
    return torch.cos(x) + y


class _Shape:
    def __init__(self, weight):
        self.weight = weight

    @property
    def doubled(self):
        return self.weight * 2

    def apply(self, x):
        return x * self.weight + self.doubled


class _Shifted(_Shape):
    def apply(self, x):
        return super().apply(x) - 1


_SHAPE = _Shifted(torch.full((4,), 0.5))
_CLAMP01 = functools.partial(torch.clamp, min=0.0, max=1.0)


def _depth(x, n):
    return x if n == 0 else _depth(torch.sin(x), n - 1)


@case(inputs=lambda: torch.randn(4))
def defaults_and_keywords(x):
    return _affine(x) + _affine(x, 3.0, shift=-1.0)


@case(inputs=lambda: torch.randn(4))
def star_args_and_kwargs(x):
    args, kwargs = (x, 1.5), {"shift": 0.25}
    return _affine(*args, **kwargs)


@case(inputs=lambda: (torch.randn(4), torch.randn(4)))
def decorated_with_wraps(x, y):
    return _cos_plus(x, y)


@case(inputs=lambda: torch.randn(4))
def nested_function_and_lambda(x):
    def inner(y, k=2):
        return y * k
    square = lambda t: t * t  # noqa: E731
    return inner(x) + square(x) + inner(x, k=3)


@case(inputs=lambda: torch.randn(4))
def closure_with_nonlocal(x):
    total = x

    def add(v):
        nonlocal total
        total = total + v

    add(x.sin())
    add(x.cos())
    return total


@case(inputs=lambda: torch.randn(4))
def recursion(x):
    return _depth(x, 4)


@case(inputs=lambda: torch.randn(4))
def method_property_and_super(x):
    return _SHAPE.apply(x)


@case(inputs=lambda: (torch.randn(4), torch.randn(4)))
def global_partial(x, y):
    return _CLAMP01(x + y)


@case(inputs=lambda: torch.randn(4))
def partial_made_in_frame(x):
    scale = functools.partial(torch.mul, other=2.0)
    return scale(x) + functools.partial(_affine, shift=0.0)(x)


@case(inputs=lambda: Inputs((torch.randn(4),), {"scale": 0.5}))
def keyword_only_forwarded(x, **options):
    return _affine(x, options["scale"]) + _affine(x, **{"shift": options.get("shift", 2.0)})


@torch.no_grad()
def _ema(average, x, decay=0.9):
    return average * decay + x * (1 - decay)


@case(inputs=lambda: (torch.randn(4, requires_grad=True), torch.randn(4)))
def no_grad_decorated_helper(x, y):
    return _ema(x.relu(), y) + x

"""Corpus: pointwise arithmetic, unary math and comparisons on tensors."""

import torch

from pyframe.debug.cases import case


def _pair(*shape: int) -> tuple:
    return torch.randn(*shape), torch.randn(*shape)


@case(inputs=lambda: _pair(10))
def add(a, b):
    """The overhead benchmark's function: the smallest graph there is."""
    return a + b


@case(inputs=lambda: _pair(10))
def cos_plus_sin(x, y):
    """The seed's debugging-backend `fn`."""
    a = torch.cos(x)
    b = torch.sin(y)
    return a + b


@case(inputs=lambda: _pair(4, 5))
def arithmetic_chain(a, b):
    return (a * 2 - b) / (b.abs() + 1) ** 2


@case(inputs=lambda: torch.randn(3, 4))
def method_chain(x):
    return x.exp().log1p().tanh().neg()


@case(inputs=lambda: torch.randn(8))
def sqrt_of_squares(x):
    return torch.sqrt(x.pow(2) + torch.ones_like(x))


@case(inputs=lambda: _pair(6))
def where_max(a, b):
    return torch.where(a > b, a, b), torch.maximum(a, b)


@case(inputs=lambda: torch.randn(6))
def builtin_abs_and_neg(x):
    return abs(x) - -x


@case(inputs=lambda: torch.randn(6))
def reverse_operands(x):
    return 1 - torch.sigmoid(x), 2 / (x.abs() + 1), 3 ** x.clamp(-1, 1)


@case(inputs=lambda: torch.randn(5))
def inplace_on_local(x):
    y = x.clone()
    y.mul_(2)
    y += 1
    return y


@case(inputs=lambda: (torch.randint(1, 20, (7,)), torch.randint(1, 5, (7,))))
def integer_division(a, b):
    return a // b, a % b, (a & 6) | 1


@case(inputs=lambda: torch.randn(4, 4))
def dtype_conversion(x):
    return x.to(torch.float64) * 2, (x > 0).float().mean(), x.int()

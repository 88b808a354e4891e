"""Corpus: keyword arguments, both to torch callables and in the call of the compiled function."""

import torch

from pyframe.debug.cases import Inputs, case


@case(inputs=lambda: (torch.randn(4, 5),))
def torch_call_kwargs(x):
    return torch.sum(x, dim=1, keepdim=True), torch.add(x, x, alpha=2)


@case(inputs=lambda: torch.randn(6))
def method_kwargs(x):
    return x.clamp(min=-0.5, max=0.5), x.softmax(dim=0)


@case(inputs=lambda: Inputs((torch.randn(5),), {"y": torch.randn(5)}))
def called_with_kwargs(x, y):
    return x * y


@case(inputs=lambda: Inputs((torch.randn(5),), {"scale": 3.0}))
def keyword_only_constant(x, *, scale=1.0, shift=0.5):
    """`scale` comes from the call, `shift` from the default: both are constants in the graph."""
    return x * scale + shift


@case(inputs=lambda: torch.randn(3, 4))
def factory_kwargs(x):
    return x + torch.zeros(3, 4, dtype=x.dtype), torch.full((4,), 2.0) * x, torch.arange(4.0) + x


@case(inputs=lambda: Inputs((), {"b": torch.randn(3), "a": torch.randn(3)}))
def all_keywords_reordered(a, b, c=2):
    return a - b * c

"""Corpus: reductions, with and without dims and keepdim, and ops returning named tuples."""

import torch

from pyframe.debug.cases import case


@case(inputs=lambda: torch.randn(4, 5))
def sum_all(x):
    return x.sum()


@case(inputs=lambda: torch.randn(4, 5))
def mean_over_dim(x):
    return x.mean(1), torch.mean(x, dim=0, keepdim=True)


@case(inputs=lambda: torch.randn(4, 5))
def max_with_indices(x):
    values, indices = torch.max(x, dim=1)
    return values * 2, indices


@case(inputs=lambda: torch.randn(4, 5))
def argmax_and_amax(x):
    return x.argmax(dim=-1), x.amax(dim=(0, 1)), x.min()


@case(inputs=lambda: torch.randn(6, 3))
def variance_and_std(x):
    return x.var(dim=0, unbiased=False), x.std(dim=1)


@case(inputs=lambda: torch.randn(3, 7))
def logsumexp_and_norm(x):
    return torch.logsumexp(x, dim=1), x.norm(), torch.linalg.vector_norm(x, ord=1, dim=0)


@case(inputs=lambda: torch.rand(5) + 0.5)
def cumulative(x):
    return x.cumsum(0), torch.cumprod(x, dim=0), x.prod()


@case(inputs=lambda: (torch.randn(3, 4), torch.tensor([[True, False, True, True], [False, True, True, True],
                                                      [True, True, False, True]])))
def masked_reductions(x, mask):
    """torch.masked's reductions: each one op of the graph, as torch._dynamo records them."""
    return torch.masked.sum(x, 1, mask=mask), torch.masked.amax(x, 1, mask=mask), torch.masked.softmax(x, 0, mask=mask)

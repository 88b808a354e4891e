"""Corpus: matrix products."""

import torch

from pyframe.debug.cases import case


@case(inputs=lambda: (torch.randn(3, 4), torch.randn(4, 5)))
def matmul_operator(a, b):
    return a @ b


@case(inputs=lambda: (torch.randn(3, 4), torch.randn(5, 4)))
def mm_transposed(a, b):
    return torch.mm(a, b.t())


@case(inputs=lambda: (torch.randn(2, 3, 4), torch.randn(2, 4, 5)))
def batched(a, b):
    return torch.bmm(a, b), torch.matmul(a, b).sum(-1)


@case(inputs=lambda: (torch.randn(3, 4), torch.randn(4, 2)))
def einsum_contraction(a, b):
    return torch.einsum("ij,jk->ik", a, b)


@case(inputs=lambda: (torch.randn(3), torch.randn(3, 4), torch.randn(4, 3)))
def addmm_bias(bias, a, b):
    return torch.addmm(bias, a, b, beta=0.5, alpha=2.0)


@case(inputs=lambda: (torch.randn(4), torch.randn(5)))
def outer_and_dot(u, v):
    return torch.outer(u, v), u.dot(u)

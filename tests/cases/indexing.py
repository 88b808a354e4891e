"""Corpus: subscripts, slices, advanced indexing and indexed writes on local tensors."""

import torch

from pyframe.debug.cases import case


@case(inputs=lambda: torch.randn(4, 5))
def basic_slicing(x):
    return x[1:, :2], x[0], x[:, -1], x[::2]


@case(inputs=lambda: torch.randn(3, 4))
def none_and_ellipsis(x):
    return x[None], x[..., None], x[..., 1:3]


@case(inputs=lambda: (torch.randn(5, 3), torch.tensor([4, 0, 2])))
def tensor_index(x, idx):
    return x[idx], x.index_select(1, torch.tensor([2, 0]))


@case(inputs=lambda: (torch.randn(3, 4), torch.randint(0, 4, (3, 2))))
def gather_rows(x, idx):
    return torch.gather(x, 1, idx)


@case(inputs=lambda: torch.randn(4, 4))
def mask_fill(x):
    return x.masked_fill(x < 0, 0.0), torch.where(x > 0.5, x, torch.zeros_like(x)).sum()


@case(inputs=lambda: torch.randn(3, 4))
def setitem_on_clone(x):
    y = x.clone()
    y[0] = 0.0
    y[:, 1] = x[:, 2] * 2
    return y


@case(inputs=lambda: torch.randn(4, 3))
def getitem_called_as_a_method(x):
    """`x.__getitem__(i)` and `torch.Tensor.__getitem__(x, i)` (a slot wrapper) are `x[i]`."""
    return x.__getitem__((slice(1, 3), 0)) * 2 + torch.Tensor.__getitem__(x, (slice(0, 2), 1))

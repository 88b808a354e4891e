"""Corpus: views, reshapes, concatenation and splitting."""

import torch

from pyframe.debug.cases import case


@case(inputs=lambda: torch.randn(2, 3, 4))
def view_and_reshape(x):
    return x.view(6, 4), x.reshape(2, -1), x.flatten(1)


@case(inputs=lambda: torch.randn(2, 3, 4))
def permute_transpose(x):
    return x.permute(2, 0, 1).contiguous(), x.transpose(0, 1), x.mT


@case(inputs=lambda: torch.randn(3, 4))
def squeeze_unsqueeze(x):
    y = x.unsqueeze(0).unsqueeze(-1)
    return y.squeeze(), torch.squeeze(y, 0)


@case(inputs=lambda: (torch.randn(2, 3), torch.randn(2, 3)))
def cat_and_stack(a, b):
    return torch.cat([a, b], dim=0), torch.stack((a, b), dim=1)


@case(inputs=lambda: torch.randn(6, 4))
def split_and_chunk(x):
    first, second = x.split(3)
    parts = torch.chunk(x, 2, dim=1)
    return first + second, parts


@case(inputs=lambda: torch.randn(3, 1))
def expand_and_repeat(x):
    return x.expand(3, 4), x.repeat(2, 3), x.expand_as(torch.empty(3, 5)).sum()


@case(inputs=lambda: torch.randn(5, 6))
def narrow_and_unbind(x):
    rows = x.narrow(0, 1, 3).unbind(0)
    return rows[0] + rows[2]

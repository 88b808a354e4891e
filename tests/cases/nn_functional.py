"""Corpus: torch.nn.functional calls (activations, normalization, convolution, losses)."""

import torch
import torch.nn.functional as F

from pyframe.debug.cases import case


@case(inputs=lambda: torch.randn(4, 6))
def activations(x):
    return F.relu(x), F.gelu(x), F.silu(x), F.leaky_relu(x, 0.2)


@case(inputs=lambda: torch.randn(4, 6))
def softmax_family(x):
    return F.softmax(x, dim=-1), F.log_softmax(x, dim=1)


@case(inputs=lambda: (torch.randn(2, 3, 8), torch.randn(8), torch.randn(8)))
def layer_norm(x, weight, bias):
    return F.layer_norm(x, (8,), weight, bias, eps=1e-5)


@case(inputs=lambda: (torch.randn(1, 2, 8, 8), torch.randn(4, 2, 3, 3)))
def conv_and_pool(x, weight):
    y = F.conv2d(x, weight, padding=1)
    return F.max_pool2d(y, 2), F.avg_pool2d(y, kernel_size=2, stride=2)


@case(inputs=lambda: (torch.randn(4, 5), torch.randint(0, 5, (4,)), torch.randn(4, 5)))
def losses(logits, target, other):
    return F.cross_entropy(logits, target), F.mse_loss(logits, other, reduction="sum")


@case(inputs=lambda: (torch.randn(3, 4), torch.randn(5, 4), torch.randn(5)))
def linear_and_normalize(x, weight, bias):
    return F.normalize(F.linear(x, weight, bias), dim=-1)


@case(inputs=lambda: (torch.randint(0, 10, (2, 3)), torch.randn(10, 4)))
def embedding_and_pad(idx, table):
    return F.pad(F.embedding(idx, table), (1, 1))


@case(inputs=lambda: torch.randn(4, 6))
def dropout_not_training(x):
    """Dropout with training=False: deterministic, and the op stays in the graph."""
    return F.dropout(x, p=0.3, training=False) * 2


@case(inputs=lambda: (torch.randn(8, 8), torch.randn(8, 8)))
def autocast_regions(a, b):
    """`with torch.autocast(...)` in the traced code: recorded as _enter_autocast / _exit_autocast
    around the ops it covers (which propagate in bfloat16), a nested disabled region, and
    is_autocast_enabled answered for the region the code is in."""
    with torch.autocast("cpu", dtype=torch.bfloat16):
        low = a @ b
        with torch.autocast("cpu", enabled=False):
            full = a @ b
        scale = 2.0 if torch.is_autocast_enabled("cpu") else 3.0
    return low.float() * scale, full, low.dtype == torch.bfloat16, torch.is_autocast_enabled("cpu")

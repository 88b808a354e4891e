"""Corpus: torch.utils.checkpoint.checkpoint inside a compiled function or module, in training.

torch._dynamo 2.13 records each call as one `tag_activation_checkpoint` higher-order op on a
subgraph of the checkpointed function (`wrap_body_0`), its tensor arguments and the frame's tensors
the function reads (parameters), checkpoint's own options passed on as given; then a `getitem` per
output. The results compared here are the forward outputs; tests/test_checkpoint.py checks the
gradients against eager's.
"""

import functools

import torch
import torch.nn as nn
import torch.utils.checkpoint as checkpoint_utils
from torch.utils.checkpoint import checkpoint

from pyframe.debug.cases import Inputs, case


def _leaf(*shape):
    return torch.randn(*shape, requires_grad=True)


class _Block(nn.Module):
    def __init__(self, dim: int = 8) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 2 * dim)
        self.fc2 = nn.Linear(2 * dim, dim)

    def forward(self, x):
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.norm(x))))


@case(inputs=lambda: torch.randn(2, 5, 8, requires_grad=True), tags={"train"})
class CheckpointedBlocks(nn.Module):
    """A stack whose blocks run through checkpoint, as timm's and Hugging Face's gradient
    checkpointing run them: one op per block, each block's parameters lifted into its body."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([_Block() for _ in range(3)])
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False)
        return self.head(x).sum()


@case(inputs=lambda: torch.randn(3, 8, requires_grad=True), tags={"train"})
class CheckpointThroughPartial(nn.Module):
    """`functools.partial(checkpoint, **kwargs)`, as transformers' gradient_checkpointing_enable
    builds it, with the options passed on to the op (`preserve_rng_state`)."""

    def __init__(self) -> None:
        super().__init__()
        self.block = _Block()
        self.checkpoint_fn = functools.partial(checkpoint, use_reentrant=False, preserve_rng_state=False)

    def forward(self, x):
        return self.checkpoint_fn(self.block, x) * 2


def _scaled_pair(x, y, scale, *, shift):
    return torch.sin(x) * scale + shift, torch.cos(y) * scale


@case(inputs=lambda: (_leaf(4), _leaf(4)), tags={"train"})
def checkpoint_of_a_function_with_constants_and_keywords(x, y):
    """A plain function of two tensors, a constant argument and a keyword for the function: the
    constants are the body's, the tensors its inputs; two outputs, two getitems."""
    a, b = checkpoint_utils.checkpoint(_scaled_pair, x, y, 3.0, shift=0.5, use_reentrant=False)
    return a + b


@case(inputs=lambda: Inputs((_leaf(6),)), tags={"train"})
def checkpoint_of_a_nested_function_reading_a_free_tensor(x):
    """A function made in the frame, closing over a tensor of the frame: the tensor is lifted in."""
    w = torch.linspace(-1.0, 1.0, 6)

    def body(t):
        return torch.tanh(t * w)

    return checkpoint(body, x, use_reentrant=False).sum()

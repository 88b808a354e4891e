"""Corpus: code that asks ``torch.compiler.is_compiling()`` and fails on the path it chose. Tag ``"break"``.

Library code skips eager-only work while compiling (transformers: ``if attention_mask is None and
not is_torchdynamo_compiling(): attention_mask = torch.ones(...)``), then reads what the skipped
work would have made. Traced, the value is None and the next step raises where eager runs:
``_split_into_blocks(None)`` in LongT5, ``attention_mask[:, None]`` in SwitchTransformers.
torch._dynamo runs every frame an exception leaves while tracing as Python (eager's path, where
is_compiling() is False) and compiles the frames it calls; so does pyframe for a trace that took
the compiled path. A break at the raising step would run it for real on the traced None.
"""

import torch
import torch.nn as nn

from pyframe.debug.cases import Inputs, case


def _split_into_blocks(x, block_len):
    """LongT5's helper: a (batch, seq) mask cut into blocks of `block_len` (x None: AttributeError)."""
    if x.shape[1] % block_len != 0:
        x = torch.nn.functional.pad(x, (0, block_len - x.shape[1] % block_len))
    return x.reshape(x.shape[0], -1, block_len)


def _local_attention_mask(mask, block_len):
    blocks = _split_into_blocks(mask, block_len)
    return blocks.sum(-1)


@case(inputs=lambda: torch.randn(2, 6), tags={"break"})
def mask_made_only_when_not_compiling(x, mask=None):
    """The mask eager makes is None on the compiled path; two calls deep, `None.shape` raises: the
    frame runs as Python (eager's mask), the helper's frame compiles (LongT5Stack.forward's shape)."""
    if mask is None and not torch.compiler.is_compiling():
        mask = torch.ones(x.shape[0], x.shape[1])
    local = _local_attention_mask(mask, 2)
    return x * 2 + local.sum()


class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, hidden, mask):
        return self.proj(hidden).relu() * mask


@case(inputs=lambda: Inputs((torch.randn(2, 4),), {"use_cache": False}), tags={"break"})
class MaskSubscriptedInTheFrame(nn.Module):
    """SwitchTransformersStack.forward's shape: keyword arguments with defaults, the mask left None
    on the compiled path and subscripted in the frame itself (TypeError), then a block called."""

    def __init__(self):
        super().__init__()
        self.block = _Block()

    def forward(self, hidden, attention_mask=None, *, use_cache=None, scale=2.0):
        use_cache = use_cache if use_cache is not None else True
        if attention_mask is None and not torch.compiler.is_compiling():
            attention_mask = torch.ones(hidden.shape[0], hidden.shape[1])
        causal = attention_mask[:, None, :]
        return self.block(hidden * scale, causal.sum(1)), use_cache


@case(inputs=lambda: torch.randn(2, 4), tags={"break"})
def compiled_path_exception_caught(x, mask=None):
    """The compiled path's AttributeError (`None.shape`) caught in the frame: traced as it runs
    compiled, in one graph, as torch._dynamo traces it (both paths give the same result)."""
    if mask is None and not torch.compiler.is_compiling():
        mask = torch.ones_like(x)
    try:
        n = mask.shape[0]
    except AttributeError:
        n = x.shape[0]
    return x * n

"""Corpus: model code in the styles people write it (not this repo's own architectures).

- ``NanoGPT``: a GPT-2-style decoder as nanoGPT writes it: an ``nn.ModuleDict`` of embeddings, a
  causal mask kept as a registered buffer and sliced to the sequence, ``split`` of one qkv Linear,
  ``masked_fill`` with ``-inf``, tied input and output embeddings, an ``assert`` on the input's length,
  and a loss branch on an optional ``targets`` argument (``F.cross_entropy`` with ``ignore_index``);
- ``BertStyle``: an encoder as Hugging Face models write one: optional attention mask turned into an
  additive mask with ``torch.finfo(dtype).min``, ``padding_idx`` embeddings, a position ``Parameter``
  sliced to the input, and a ``dataclass`` output (``return_dict``) or a tuple;
- ``ResNetStyle``: torchvision-style ``BasicBlock``s (``ReLU(inplace=True)``, ``out += identity``,
  an optional ``downsample`` that is ``None`` in some blocks), ``nn.Sequential`` stages, flatten, fc;
- ``RotaryAttention``: rotary position embeddings (``einsum`` of positions and an inverse-frequency
  buffer, ``cat((-x2, x1))``) in front of ``F.scaled_dot_product_attention`` (causal).
"""

from __future__ import annotations

import dataclasses
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from pyframe.debug.cases import Inputs, case


class _CausalAttention(nn.Module):
    def __init__(self, width: int, heads: int, context: int) -> None:
        super().__init__()
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.heads, self.width = heads, width
        mask = torch.tril(torch.ones(context, context)).view(1, 1, context, context)
        self.register_buffer("mask", mask)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.size()
        q, k, v = self.qkv(x).split(self.width, dim=2)
        q, k, v = (t.view(batch, length, self.heads, width // self.heads).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        scores = scores.masked_fill(self.mask[:, :, :length, :length] == 0, float("-inf"))
        y = F.softmax(scores, dim=-1) @ v
        return self.proj(y.transpose(1, 2).contiguous().view(batch, length, width))


class _DecoderBlock(nn.Module):
    def __init__(self, width: int, heads: int, context: int) -> None:
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = _CausalAttention(width, heads, context)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class NanoGPT(nn.Module):
    vocab, width, context = 50, 32, 16

    def __init__(self) -> None:
        super().__init__()
        self.transformer = nn.ModuleDict({
            "wte": nn.Embedding(self.vocab, self.width), "wpe": nn.Embedding(self.context, self.width),
            "h": nn.ModuleList([_DecoderBlock(self.width, 4, self.context) for _ in range(2)]),
            "ln_f": nn.LayerNorm(self.width),
        })
        self.lm_head = nn.Linear(self.width, self.vocab, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # tied

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        _, length = idx.size()
        assert length <= self.context, f"sequence of {length} tokens is longer than {self.context}"
        pos = torch.arange(0, length, dtype=torch.long, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        if targets is None:
            return self.lm_head(x[:, [-1], :]), None
        logits = self.lm_head(x)
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)


def _tokens() -> torch.Tensor:
    return torch.randint(0, NanoGPT.vocab, (2, 8))


@case(inputs=_tokens, tags={"eval"})
class NanoGPTGenerate(NanoGPT):
    def __init__(self) -> None:
        super().__init__()
        self.eval()


@case(inputs=lambda: (_tokens(), _tokens()), tags={"train"})
class NanoGPTLoss(NanoGPT):
    def __init__(self) -> None:
        super().__init__()
        self.train()


@dataclasses.dataclass
class EncoderOutput:
    logits: torch.Tensor
    hidden_states: torch.Tensor | None = None


class BertStyle(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embeddings = nn.Embedding(30, 16, padding_idx=0)
        self.position = nn.Parameter(torch.randn(1, 8, 16) * 0.02)
        self.query, self.key, self.value = nn.Linear(16, 16), nn.Linear(16, 16), nn.Linear(16, 16)
        self.norm = nn.LayerNorm(16, eps=1e-12)
        self.classifier = nn.Linear(16, 3)

    def forward(self, input_ids, attention_mask=None, return_dict=True):
        x = self.embeddings(input_ids) + self.position[:, : input_ids.shape[1]]
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        extended = attention_mask[:, None, None, :].to(dtype=x.dtype)
        extended = (1.0 - extended) * torch.finfo(x.dtype).min
        q, k, v = self.query(x), self.key(x), self.value(x)
        scores = torch.matmul(q.unsqueeze(1), k.unsqueeze(1).transpose(-1, -2)) / math.sqrt(q.shape[-1])
        probs = nn.functional.softmax(scores + extended, dim=-1)
        hidden = self.norm(torch.matmul(probs, v.unsqueeze(1)).squeeze(1) + x)
        logits = self.classifier(hidden[:, 0])
        if not return_dict:
            return logits, hidden
        return EncoderOutput(logits=logits, hidden_states=hidden)


@case(inputs=lambda: (torch.randint(1, 30, (2, 8)), torch.tensor([[1] * 8, [1] * 5 + [0] * 3])), tags={"eval"})
class BertStyleMasked(BertStyle):
    def __init__(self) -> None:
        super().__init__()
        self.eval()


@case(inputs=lambda: Inputs((torch.randint(1, 30, (2, 8)),), {"return_dict": False}), tags={"train"})
class BertStyleTuple(BertStyle):
    def __init__(self) -> None:
        super().__init__()
        self.train()


class _BasicBlock(nn.Module):
    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class ResNetStyle(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU(inplace=True),
                                  nn.MaxPool2d(2))
        self.layer1 = nn.Sequential(_BasicBlock(8, 8), _BasicBlock(8, 8))
        downsample = nn.Sequential(nn.Conv2d(8, 16, 1, 2, bias=False), nn.BatchNorm2d(16))
        self.layer2 = nn.Sequential(_BasicBlock(8, 16, 2, downsample), _BasicBlock(16, 16))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layer2(self.layer1(self.stem(x)))
        return self.fc(torch.flatten(self.avgpool(x), 1))


@case(inputs=lambda: torch.randn(2, 3, 16, 16), tags={"eval"})
class ResNetStyleEval(ResNetStyle):
    def __init__(self) -> None:
        super().__init__()
        self.eval()


@case(inputs=lambda: torch.randn(2, 3, 16, 16), tags={"train"})
class ResNetStyleTrain(ResNetStyle):
    def __init__(self) -> None:
        super().__init__()
        self.train()


@case(inputs=lambda: torch.randn(2, 6, 16))
class RotaryAttention(nn.Module):
    def __init__(self, width: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.qkv = nn.Linear(width, 3 * width)
        self.heads, self.head_dim = heads, width // heads
        inv_freq = 1.0 / (10000 ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def rotate(self, x: torch.Tensor) -> torch.Tensor:
        t = torch.arange(x.shape[-2], device=x.device).type_as(self.inv_freq)
        freqs = torch.einsum("i,j->ij", t, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return x * emb.cos()[None, None] + torch.cat((-x2, x1), dim=-1) * emb.sin()[None, None]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = (t.unflatten(-1, (self.heads, self.head_dim)).transpose(1, 2) for t in (q, k, v))
        out = F.scaled_dot_product_attention(self.rotate(q), self.rotate(k), v, is_causal=True)
        return out.transpose(1, 2).flatten(2)

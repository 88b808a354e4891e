"""Corpus: whole (small) models, each registered twice: in ``eval()`` mode and in training mode.

Six architectures, sized so a forward takes at most about a millisecond on one CPU thread:

- ``MLP``: Linear, ReLU, Linear;
- ``SmallConvNet``: Conv2d, BatchNorm2d, ReLU, MaxPool2d, AdaptiveAvgPool2d, Flatten, Linear;
- ``TinyDenseNet``: torchvision's DenseNet-121 scaled down (growth 8, blocks (2, 2)): dense layers
  BN-ReLU-Conv1x1-BN-ReLU-Conv3x3 whose inputs are the ``torch.cat`` of all earlier features, kept in a
  Python list, and transitions BN-ReLU-Conv1x1-AvgPool; blocks are ``nn.ModuleDict``s iterated with
  ``.items()``, as torchvision writes them;
- ``TransformerBlock``: pre-norm encoder block with hand-written multi-head attention (q/k/v Linears,
  view / transpose / reshape, softmax, matmul), LayerNorm, a GELU MLP and residuals;
- ``TorchEncoderLayer``: the same block as ``nn.TransformerEncoderLayer`` (batch_first, dropout 0,
  norm_first, GELU), whose forward goes through ``F.multi_head_attention_forward``;
- ``TinyViT``: patch embedding by a strided Conv2d, a class token ``expand``-ed and ``torch.cat``-ed,
  a position-embedding ``nn.Parameter``, two ``TransformerBlock``s in an ``nn.ModuleList`` iterated in
  forward, a final LayerNorm and a head on the class token.

The case classes (``MLPEval``, ``MLPTrain``, ...) subclass the architecture and only set the mode:
the registry builds a fresh module per engine under a fixed seed, so a training-mode BatchNorm's
running-statistics update in one engine's run never leaks into another's, and every engine sees the
same parameters. No model has active dropout, so training mode is deterministic. The eval cases are
also what benchmarks/compile_time.py and benchmarks/e2e.py time.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from pyframe.debug.cases import case

# --------------------------------------------------------------------------------------------------
# The architectures (not cases themselves: the Eval / Train subclasses below are)


class MLP(nn.Module):
    """Two Linear layers with a ReLU between them."""

    def __init__(self, d_in: int = 64, d_hidden: int = 128, d_out: int = 10) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(d_hidden, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class SmallConvNet(nn.Module):
    """Two conv stages (Conv-BN-ReLU, the first max-pooled), global average pooling and a classifier."""

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(16),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(32),
            nn.ReLU(inplace=True),
        )
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.classifier = nn.Linear(32, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.flatten(self.pool(self.features(x))))


class DenseLayer(nn.Module):
    """torchvision's ``_DenseLayer`` without checkpointing: BN-ReLU-Conv1x1 (bottleneck), BN-ReLU-Conv3x3."""

    def __init__(self, in_features: int, growth_rate: int, bn_size: int) -> None:
        super().__init__()
        self.norm1 = nn.BatchNorm2d(in_features)
        self.relu1 = nn.ReLU(inplace=True)
        self.conv1 = nn.Conv2d(in_features, bn_size * growth_rate, kernel_size=1, bias=False)
        self.norm2 = nn.BatchNorm2d(bn_size * growth_rate)
        self.relu2 = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(bn_size * growth_rate, growth_rate, kernel_size=3, padding=1, bias=False)

    def forward(self, features: list[torch.Tensor]) -> torch.Tensor:
        concatenated = torch.cat(features, 1)
        bottleneck = self.conv1(self.relu1(self.norm1(concatenated)))
        return self.conv2(self.relu2(self.norm2(bottleneck)))


class DenseBlock(nn.ModuleDict):
    """torchvision's ``_DenseBlock``: each layer reads the concatenation of every feature map before it."""

    def __init__(self, num_layers: int, in_features: int, growth_rate: int, bn_size: int) -> None:
        super().__init__()
        for i in range(num_layers):
            layer = DenseLayer(in_features + i * growth_rate, growth_rate, bn_size)
            self.add_module(f"denselayer{i + 1}", layer)

    def forward(self, init_features: torch.Tensor) -> torch.Tensor:
        features = [init_features]
        for _name, layer in self.items():
            features.append(layer(features))
        return torch.cat(features, 1)


class Transition(nn.Sequential):
    """torchvision's ``_Transition``: BN-ReLU-Conv1x1 halving the channels, then 2x2 average pooling."""

    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        self.norm = nn.BatchNorm2d(in_features)
        self.relu = nn.ReLU(inplace=True)
        self.conv = nn.Conv2d(in_features, out_features, kernel_size=1, bias=False)
        self.pool = nn.AvgPool2d(kernel_size=2, stride=2)


class TinyDenseNet(nn.Module):
    """torchvision's DenseNet (the densenet121 recipe) with growth 8, blocks (2, 2), 16 initial features."""

    def __init__(
        self,
        growth_rate: int = 8,
        block_config: tuple[int, ...] = (2, 2),
        num_init_features: int = 16,
        bn_size: int = 4,
        num_classes: int = 10,
    ) -> None:
        super().__init__()
        self.features = nn.Sequential()
        self.features.add_module("conv0", nn.Conv2d(3, num_init_features, 7, stride=2, padding=3, bias=False))
        self.features.add_module("norm0", nn.BatchNorm2d(num_init_features))
        self.features.add_module("relu0", nn.ReLU(inplace=True))
        self.features.add_module("pool0", nn.MaxPool2d(kernel_size=3, stride=2, padding=1))
        channels = num_init_features
        for i, num_layers in enumerate(block_config):
            self.features.add_module(f"denseblock{i + 1}", DenseBlock(num_layers, channels, growth_rate, bn_size))
            channels += num_layers * growth_rate
            if i != len(block_config) - 1:
                self.features.add_module(f"transition{i + 1}", Transition(channels, channels // 2))
                channels //= 2
        self.features.add_module("norm5", nn.BatchNorm2d(channels))
        self.classifier = nn.Linear(channels, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = self.features(x)
        out = F.relu(features, inplace=True)
        out = F.adaptive_avg_pool2d(out, (1, 1))
        out = torch.flatten(out, 1)
        return self.classifier(out)


class MultiHeadSelfAttention(nn.Module):
    """Scaled dot-product self-attention over ``heads`` heads, written out op by op."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.head_dim = dim // heads
        self.scale = 1.0 / math.sqrt(self.head_dim)
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, tokens, dim = x.shape
        q = self.q(x).view(batch, tokens, self.heads, self.head_dim).transpose(1, 2)
        k = self.k(x).view(batch, tokens, self.heads, self.head_dim).transpose(1, 2)
        v = self.v(x).view(batch, tokens, self.heads, self.head_dim).transpose(1, 2)
        attn = torch.matmul(q, k.transpose(-2, -1)) * self.scale
        attn = attn.softmax(dim=-1)
        out = torch.matmul(attn, v).transpose(1, 2).reshape(batch, tokens, dim)
        return self.out(out)


class TransformerBlock(nn.Module):
    """Pre-norm encoder block: ``x + attn(ln(x))``, then ``x + mlp(ln(x))`` with a GELU MLP."""

    def __init__(self, dim: int = 64, heads: int = 4, mlp_ratio: int = 2) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = MultiHeadSelfAttention(dim, heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, dim * mlp_ratio), nn.GELU(), nn.Linear(dim * mlp_ratio, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class TorchEncoderLayer(nn.Module):
    """``nn.TransformerEncoderLayer`` shaped like TransformerBlock: batch_first, dropout 0, pre-norm
    (``norm_first=True``), GELU, the same width, heads and MLP ratio."""

    def __init__(self, dim: int = 64, heads: int = 4, mlp_ratio: int = 2) -> None:
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(
            d_model=dim, nhead=heads, dim_feedforward=dim * mlp_ratio, dropout=0.0,
            activation="gelu", batch_first=True, norm_first=True,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x)


class TinyViT(nn.Module):
    """A ViT encoder: 4x4 patches of a 32x32 image, class token, position embedding, 2 blocks, head."""

    def __init__(
        self, image_size: int = 32, patch: int = 4, dim: int = 64, depth: int = 2, heads: int = 4,
        num_classes: int = 10,
    ) -> None:
        super().__init__()
        num_patches = (image_size // patch) ** 2
        self.patch_embed = nn.Conv2d(3, dim, kernel_size=patch, stride=patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.randn(1, num_patches + 1, dim) * 0.02)
        self.blocks = nn.ModuleList([TransformerBlock(dim, heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(x).flatten(2).transpose(1, 2)  # (batch, patches, dim)
        cls = self.cls_token.expand(x.shape[0], -1, -1)
        x = torch.cat((cls, x), dim=1) + self.pos_embed
        for block in self.blocks:
            x = block(x)
        x = self.norm(x)
        return self.head(x[:, 0])


# --------------------------------------------------------------------------------------------------
# Inputs


class ResidualBlock(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.l1, self.l2 = nn.Linear(width, width), nn.Linear(width, width)

    def forward(self, x):
        return x + self.l2(torch.relu(self.l1(x)))


class ResidualNet(nn.Module):
    """Residual MLP blocks and a linear head: the model of the DistributedDataParallel and FSDP2
    tests and benchmark (tests/test_distributed.py, benchmarks/distributed.py); not a corpus case."""

    def __init__(self, width: int = 256, blocks: int = 4) -> None:
        super().__init__()
        self.blocks = nn.Sequential(*[ResidualBlock(width) for _ in range(blocks)])
        self.head = nn.Linear(width, 10)

    def forward(self, x):
        return self.head(self.blocks(x))


def mlp_inputs() -> torch.Tensor:
    return torch.randn(8, 64)


def image_inputs() -> torch.Tensor:
    return torch.randn(2, 3, 32, 32)


def densenet_inputs() -> torch.Tensor:
    return torch.randn(1, 3, 32, 32)


def sequence_inputs() -> torch.Tensor:
    return torch.randn(2, 16, 64)


# --------------------------------------------------------------------------------------------------
# The cases: each architecture in eval mode and in training mode


@case(inputs=mlp_inputs, tags={"eval"})
class MLPEval(MLP):
    def __init__(self) -> None:
        super().__init__()
        self.eval()


@case(inputs=mlp_inputs, tags={"train"})
class MLPTrain(MLP):
    def __init__(self) -> None:
        super().__init__()
        self.train()


@case(inputs=image_inputs, tags={"eval"})
class SmallConvNetEval(SmallConvNet):
    """BatchNorm reads its running statistics."""

    def __init__(self) -> None:
        super().__init__()
        self.eval()


@case(inputs=image_inputs, tags={"train"})
class SmallConvNetTrain(SmallConvNet):
    """BatchNorm normalizes with batch statistics and updates running_mean / running_var /
    num_batches_tracked in place (buffer mutation inside the graph)."""

    def __init__(self) -> None:
        super().__init__()
        self.train()


@case(inputs=densenet_inputs, tags={"eval"})
class TinyDenseNetEval(TinyDenseNet):
    def __init__(self) -> None:
        super().__init__()
        self.eval()


@case(inputs=densenet_inputs, tags={"train"})
class TinyDenseNetTrain(TinyDenseNet):
    def __init__(self) -> None:
        super().__init__()
        self.train()


@case(inputs=sequence_inputs, tags={"eval"})
class TransformerBlockEval(TransformerBlock):
    def __init__(self) -> None:
        super().__init__()
        self.eval()


@case(inputs=sequence_inputs, tags={"train"})
class TransformerBlockTrain(TransformerBlock):
    def __init__(self) -> None:
        super().__init__()
        self.train()


@case(inputs=sequence_inputs, tags={"eval"})
class TorchEncoderLayerEval(TorchEncoderLayer):
    """Eval mode with grad enabled: the parameters require grad, so the layer skips its fused
    fast path (``torch._transformer_encoder_layer_fwd``) and runs the Python path."""

    def __init__(self) -> None:
        super().__init__()
        self.eval()


@case(inputs=sequence_inputs, tags={"train"})
class TorchEncoderLayerTrain(TorchEncoderLayer):
    def __init__(self) -> None:
        super().__init__()
        self.train()


@case(inputs=image_inputs, tags={"eval"})
class TinyViTEval(TinyViT):
    def __init__(self) -> None:
        super().__init__()
        self.eval()


@case(inputs=image_inputs, tags={"train"})
class TinyViTTrain(TinyViT):
    def __init__(self) -> None:
        super().__init__()
        self.train()

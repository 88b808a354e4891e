"""Corpus: more model code in the styles its projects write it (small sizes, CPU, written here).

Each model is run in eval mode under ``torch.no_grad()`` (tag ``"no_grad"``) and, where it makes
sense, in training mode (dropout and drop-path draw random numbers: tag ``"rng"`` has the harness
start every call from the case's seed).

- ``MobileNetV2``: torchvision's ``InvertedResidual`` (``ConvBNActivation`` as an ``nn.Sequential``
  subclass, ``ReLU6(inplace=True)``, depthwise convs with ``groups=hidden_dim``, a residual only when
  ``stride == 1 and inp == oup``), ``F.adaptive_avg_pool2d`` and a ``Dropout`` + ``Linear`` classifier;
- ``ConvNeXt``: the official blocks (7x7 depthwise conv, ``permute`` to channels-last, the repo's own
  ``LayerNorm`` with a ``data_format`` branch, a layer-scale ``gamma`` Parameter that may be ``None``,
  timm's ``DropPath`` (``new_empty(shape).bernoulli_``), identity in eval), drop-path rates from
  ``torch.linspace(...).item()``;
- ``ViT``: timm's ``VisionTransformer``: ``torch.jit.Final`` ``fused_attn`` flag choosing
  ``F.scaled_dot_product_attention`` or the explicit softmax, ``qkv.reshape(...).permute(...).unbind(0)``,
  ``LayerScale``, ``nn.Identity`` for norms and heads, a class token ``expand``-ed and ``cat``-ed,
  ``torch.jit.is_scripting()`` / ``is_tracing()`` checks and a ``_assert`` on the image size;
- ``Swin``: shifted-window attention: ``window_partition`` / ``window_reverse`` with view/permute,
  ``torch.roll`` shifts, a mask buffer built at init, a relative-position bias table indexed by a
  buffer, ``PatchMerging`` (``reshape``, ``permute``, ``flatten``);
- ``GPT2``: Hugging Face's GPT-2: ``Conv1D`` (``addmm`` with an (in, out) weight), ``_split_heads``
  with ``size()[:-1] + (...)``, ``past_key_values`` tuples in and ``presents`` out, ``attention_mask``
  broadcast with ``torch.finfo(self.dtype).min`` (``dtype`` a property walking the parameters),
  ``torch.where`` on a bool causal buffer, ``NewGELUActivation``, a shifted-label loss;
- ``Llama``: ``LlamaRMSNorm`` (float32 upcast), SwiGLU MLP, rotary embeddings with cached cos/sin
  buffers indexed by ``position_ids``, grouped-query attention with ``repeat_interleave``;
- ``Seq2SeqDecoder``: an attention decoder unrolled over the target (teacher forcing in training,
  greedy ``argmax`` feedback in eval), outputs collected in a list and ``torch.cat``-ed;
- ``UNet``: skip connections kept in a list, reversed, ``F.interpolate`` when the sizes differ,
  ``torch.cat`` along channels, ``ConvTranspose2d`` upsampling;
- ``EfficientNet``: EfficientNet-PyTorch's ``MBConvBlock`` (a ``namedtuple`` of block args, dynamic
  "same" padding with ``math.ceil`` and ``F.pad``, squeeze-excitation with ``F.adaptive_avg_pool2d`` and
  ``torch.sigmoid``, ``nn.SiLU``, ``drop_connect`` with ``torch.rand`` in training);
- ``DLRM``: facebookresearch/dlrm: ``nn.EmbeddingBag`` per sparse feature with offsets, a bottom and a
  top MLP, the dot interaction with ``torch.bmm`` and index tensors (``torch.tensor`` of a
  comprehension in the original, ``torch.triu_indices`` as torchrec writes it);
- ``TorchTransformerEncoder``: torch's own ``nn.TransformerEncoder`` (its eval fast-path checks and
  ``_transformer_encoder_layer_fwd``, ``F._canonical_mask`` of a padding mask; pre-norm GELU training);
- ``DiffusionUNet``: openai/guided-diffusion: ``timestep_embedding``, ``GroupNorm32`` calling
  ``super().forward(x.float())``, a ``TimestepEmbedSequential`` dispatching on ``isinstance``,
  ``ResBlock`` slicing its ``nn.Sequential`` (``self.in_layers[:-1]``), a ``while`` that unsqueezes
  the embedding, scale-shift norm, ``QKVAttentionLegacy`` with ``einsum``, ``b, c, *spatial = x.shape``;
- ``WhisperDecode``: openai/whisper's text decoder: a kv-cache dict keyed by modules, filled by
  forward hooks whose closure holds it, ``next(iter(kv_cache.values()))``, ``nn.Linear`` and
  ``nn.LayerNorm`` subclasses casting dtypes, greedy steps feeding back the last token;
- ``T5Encoder``: Hugging Face T5: ``_relative_position_bucket`` (a ``staticmethod``,
  ``relative_buckets = 0; relative_buckets += tensor``, ``torch.log``, ``torch.where``),
  ``T5LayerNorm``, the position bias computed by the first layer and passed on;
- ``YOLODetect``: YOLOv5's ``Detect`` head: the input list rewritten in place (``x[i] = ...``), grids
  cached in list attributes, ``torch.meshgrid(indexing="ij")``, ``split`` of sigmoids, a nested
  conditional return;
- ``Wav2Vec2``: Hugging Face wav2vec2's conv feature encoder and positional conv embedding under
  ``nn.utils.parametrizations.weight_norm`` (a parametrized ``weight``), ``SamePad`` slicing;
- ``DETRPosition``: DETR's ``NestedTensor`` (a plain class made in forward, ``decompose()``), the mask
  resized with ``F.interpolate(m[None].float(), ...).to(torch.bool)[0]``, ``PositionEmbeddingSine``;
- ``MoE``: a top-2 gate with dense dispatch as GShard/fairseq write it: ``argmax``, ``F.one_hot``,
  ``cumsum`` capacity positions, ``gates1_s /= denom_s``, ``einsum`` dispatch and combine, ``*input``
  varargs, the auxiliary loss stored on the module;
- ``LlamaAutocastTrain`` and ``ViTCheckpointedTrain``: training-loop wrappers, a forward under
  ``torch.autocast`` (bfloat16), timm's gradient checkpointing (``torch.utils.checkpoint``);
- ``KwargsEncoder``: a Hugging Face-style encoder passing ``*args`` / ``**kwargs`` down its layers,
  ``dict(kwargs, output_attentions=...)``, activations looked up by name in an ``ACT2FN`` table;
- ``ModelOutputTrain``: Hugging Face's ``ModelOutput`` as written there (an ``OrderedDict`` subclass
  and dataclass whose ``__post_init__`` walks ``dataclasses.fields``, ``__setitem__`` and
  ``__setattr__`` overridden);
- ``DETRDecoder``: DETR's decoder layer on ``nn.MultiheadAttention`` (sequence first, weights
  returned, a key padding mask, ``q = k = ...``);
- ``SpatialTransformer``: Stable Diffusion's ``CrossAttention`` (``torch.baddbmm`` into
  ``torch.empty`` with ``beta=0``, heads folded into the batch, an optional context);
- ``TasNet``: Conv-TasNet: ``pad_signal`` with ``.type(input.type())``, reflect ``F.pad``, ``nn.PReLU``,
  causal depthwise convs trimmed by slicing, the cumulative layer norm (``cumsum``, ``expand_as``),
  skip connections summed from ``0.0``;
- ``MegatronMLPTrain``: Megatron-LM's MLP with its ``@torch.jit.script`` fused bias-GeLU;
- ``SNGANDiscriminator``: ``nn.utils.spectral_norm`` (a callable ``SpectralNorm`` object as forward
  pre-hook, a power iteration updating buffers in training).
"""

from __future__ import annotations

import collections
import collections.abc
import dataclasses
import math
from functools import partial

import torch
import torch.nn as nn
import torch.nn.functional as F

from pyframe.debug.cases import Inputs, case

# ------------------------------------------------------------------------------------------------
# MobileNetV2 (torchvision)


def _make_divisible(v: float, divisor: int, min_value: int | None = None) -> int:
    if min_value is None:
        min_value = divisor
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


class ConvBNActivation(nn.Sequential):
    def __init__(self, in_planes: int, out_planes: int, kernel_size: int = 3, stride: int = 1,
                 groups: int = 1, norm_layer=None, activation_layer=None) -> None:
        padding = (kernel_size - 1) // 2
        if norm_layer is None:
            norm_layer = nn.BatchNorm2d
        if activation_layer is None:
            activation_layer = nn.ReLU6
        super().__init__(
            nn.Conv2d(in_planes, out_planes, kernel_size, stride, padding, groups=groups, bias=False),
            norm_layer(out_planes),
            activation_layer(inplace=True),
        )
        self.out_channels = out_planes


class InvertedResidual(nn.Module):
    def __init__(self, inp: int, oup: int, stride: int, expand_ratio: int, norm_layer=None) -> None:
        super().__init__()
        self.stride = stride
        assert stride in [1, 2]
        if norm_layer is None:
            norm_layer = nn.BatchNorm2d
        hidden_dim = int(round(inp * expand_ratio))
        self.use_res_connect = self.stride == 1 and inp == oup
        layers: list[nn.Module] = []
        if expand_ratio != 1:
            layers.append(ConvBNActivation(inp, hidden_dim, kernel_size=1, norm_layer=norm_layer))
        layers.extend([
            ConvBNActivation(hidden_dim, hidden_dim, stride=stride, groups=hidden_dim, norm_layer=norm_layer),
            nn.Conv2d(hidden_dim, oup, 1, 1, 0, bias=False),
            norm_layer(oup),
        ])
        self.conv = nn.Sequential(*layers)
        self.out_channels = oup
        self._is_cn = stride > 1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.use_res_connect:
            return x + self.conv(x)
        else:
            return self.conv(x)


class MobileNetV2(nn.Module):
    def __init__(self, num_classes: int = 10, width_mult: float = 0.25, dropout: float = 0.2) -> None:
        super().__init__()
        block = InvertedResidual
        input_channel, last_channel = 32, 64
        inverted_residual_setting = [
            # t, c, n, s
            [1, 16, 1, 1],
            [6, 24, 2, 2],
            [6, 32, 2, 2],
        ]
        input_channel = _make_divisible(input_channel * width_mult, 8)
        self.last_channel = _make_divisible(last_channel * max(1.0, width_mult), 8)
        features: list[nn.Module] = [ConvBNActivation(3, input_channel, stride=2)]
        for t, c, n, s in inverted_residual_setting:
            output_channel = _make_divisible(c * width_mult, 8)
            for i in range(n):
                stride = s if i == 0 else 1
                features.append(block(input_channel, output_channel, stride, expand_ratio=t))
                input_channel = output_channel
        features.append(ConvBNActivation(input_channel, self.last_channel, kernel_size=1))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Dropout(p=dropout), nn.Linear(self.last_channel, num_classes))
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def _forward_impl(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        x = nn.functional.adaptive_avg_pool2d(x, (1, 1))
        x = torch.flatten(x, 1)
        x = self.classifier(x)
        return x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._forward_impl(x)


def _images(size: int = 16) -> torch.Tensor:
    return torch.randn(2, 3, size, size)


@case(inputs=_images, tags={"eval", "no_grad"})
class MobileNetV2Eval(MobileNetV2):
    def __init__(self) -> None:
        super().__init__()
        self.eval()


@case(inputs=_images, tags={"train", "rng"})
class MobileNetV2Train(MobileNetV2):
    def __init__(self) -> None:
        super().__init__()
        self.train()


# ------------------------------------------------------------------------------------------------
# ConvNeXt (facebookresearch/ConvNeXt), DropPath as timm writes it


def drop_path(x, drop_prob: float = 0.0, training: bool = False, scale_by_keep: bool = True):
    if drop_prob == 0.0 or not training:
        return x
    keep_prob = 1 - drop_prob
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)  # work with diff dim tensors, not just 2D ConvNets
    random_tensor = x.new_empty(shape).bernoulli_(keep_prob)
    if keep_prob > 0.0 and scale_by_keep:
        random_tensor.div_(keep_prob)
    return x * random_tensor


class DropPath(nn.Module):
    """Drop paths (Stochastic Depth) per sample (when applied in main path of residual blocks)."""

    def __init__(self, drop_prob: float = 0.0, scale_by_keep: bool = True) -> None:
        super().__init__()
        self.drop_prob = drop_prob
        self.scale_by_keep = scale_by_keep

    def forward(self, x):
        return drop_path(x, self.drop_prob, self.training, self.scale_by_keep)

    def extra_repr(self):
        return f"drop_prob={round(self.drop_prob, 3):0.3f}"


class ConvNeXtLayerNorm(nn.Module):
    r"""LayerNorm that supports two data formats: channels_last (default) or channels_first."""

    def __init__(self, normalized_shape, eps=1e-6, data_format="channels_last"):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(normalized_shape))
        self.bias = nn.Parameter(torch.zeros(normalized_shape))
        self.eps = eps
        self.data_format = data_format
        if self.data_format not in ["channels_last", "channels_first"]:
            raise NotImplementedError
        self.normalized_shape = (normalized_shape,)

    def forward(self, x):
        if self.data_format == "channels_last":
            return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        elif self.data_format == "channels_first":
            u = x.mean(1, keepdim=True)
            s = (x - u).pow(2).mean(1, keepdim=True)
            x = (x - u) / torch.sqrt(s + self.eps)
            x = self.weight[:, None, None] * x + self.bias[:, None, None]
            return x


class ConvNeXtBlock(nn.Module):
    def __init__(self, dim, drop_path=0.0, layer_scale_init_value=1e-6):
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, kernel_size=7, padding=3, groups=dim)  # depthwise conv
        self.norm = ConvNeXtLayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, 4 * dim)  # pointwise/1x1 convs, implemented with linear layers
        self.act = nn.GELU()
        self.pwconv2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(layer_scale_init_value * torch.ones((dim)),
                                  requires_grad=True) if layer_scale_init_value > 0 else None
        self.drop_path = DropPath(drop_path) if drop_path > 0.0 else nn.Identity()

    def forward(self, x):
        input = x
        x = self.dwconv(x)
        x = x.permute(0, 2, 3, 1)  # (N, C, H, W) -> (N, H, W, C)
        x = self.norm(x)
        x = self.pwconv1(x)
        x = self.act(x)
        x = self.pwconv2(x)
        if self.gamma is not None:
            x = self.gamma * x
        x = x.permute(0, 3, 1, 2)  # (N, H, W, C) -> (N, C, H, W)

        x = input + self.drop_path(x)
        return x


class ConvNeXt(nn.Module):
    def __init__(self, in_chans=3, num_classes=10, depths=(2, 2), dims=(16, 32), drop_path_rate=0.3,
                 layer_scale_init_value=0.1, head_init_scale=1.0):
        super().__init__()
        self.downsample_layers = nn.ModuleList()  # stem and intermediate downsampling conv layers
        stem = nn.Sequential(
            nn.Conv2d(in_chans, dims[0], kernel_size=4, stride=4),
            ConvNeXtLayerNorm(dims[0], eps=1e-6, data_format="channels_first"),
        )
        self.downsample_layers.append(stem)
        for i in range(len(dims) - 1):
            downsample_layer = nn.Sequential(
                ConvNeXtLayerNorm(dims[i], eps=1e-6, data_format="channels_first"),
                nn.Conv2d(dims[i], dims[i + 1], kernel_size=2, stride=2),
            )
            self.downsample_layers.append(downsample_layer)

        self.stages = nn.ModuleList()  # feature resolution stages, each consisting of multiple residual blocks
        dp_rates = [x.item() for x in torch.linspace(0, drop_path_rate, sum(depths))]
        cur = 0
        for i in range(len(dims)):
            stage = nn.Sequential(
                *[ConvNeXtBlock(dim=dims[i], drop_path=dp_rates[cur + j],
                                layer_scale_init_value=layer_scale_init_value) for j in range(depths[i])]
            )
            self.stages.append(stage)
            cur += depths[i]

        self.norm = nn.LayerNorm(dims[-1], eps=1e-6)  # final norm layer
        self.head = nn.Linear(dims[-1], num_classes)
        self.head.weight.data.mul_(head_init_scale)
        self.head.bias.data.mul_(head_init_scale)

    def forward_features(self, x):
        for i in range(len(self.stages)):
            x = self.downsample_layers[i](x)
            x = self.stages[i](x)
        return self.norm(x.mean([-2, -1]))  # global average pooling, (N, C, H, W) -> (N, C)

    def forward(self, x):
        x = self.forward_features(x)
        x = self.head(x)
        return x


@case(inputs=_images, tags={"eval", "no_grad"})
class ConvNeXtEval(ConvNeXt):
    def __init__(self) -> None:
        super().__init__()
        self.eval()


@case(inputs=_images, tags={"train", "rng"})
class ConvNeXtTrain(ConvNeXt):
    def __init__(self) -> None:
        super().__init__()
        self.train()


# ------------------------------------------------------------------------------------------------
# Vision Transformer (timm)


def _assert(condition: bool, message: str) -> None:
    assert condition, message


def to_2tuple(x):
    if isinstance(x, collections.abc.Iterable) and not isinstance(x, str):
        return tuple(x)
    return (x, x)


class PatchEmbed(nn.Module):
    """2D Image to Patch Embedding"""

    def __init__(self, img_size=16, patch_size=4, in_chans=3, embed_dim=32, norm_layer=None, flatten=True,
                 bias=True, strict_img_size=True):
        super().__init__()
        self.patch_size = to_2tuple(patch_size)
        self.img_size = to_2tuple(img_size)
        self.grid_size = tuple([s // p for s, p in zip(self.img_size, self.patch_size)])
        self.num_patches = self.grid_size[0] * self.grid_size[1]
        self.flatten = flatten
        self.strict_img_size = strict_img_size
        self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=patch_size, stride=patch_size, bias=bias)
        self.norm = norm_layer(embed_dim) if norm_layer else nn.Identity()

    def forward(self, x):
        B, C, H, W = x.shape
        if self.img_size is not None:
            if self.strict_img_size:
                _assert(H == self.img_size[0], f"Input height ({H}) doesn't match model ({self.img_size[0]}).")
                _assert(W == self.img_size[1], f"Input width ({W}) doesn't match model ({self.img_size[1]}).")
        x = self.proj(x)
        if self.flatten:
            x = x.flatten(2).transpose(1, 2)  # NCHW -> NLC
        x = self.norm(x)
        return x


class Mlp(nn.Module):
    def __init__(self, in_features, hidden_features=None, out_features=None, act_layer=nn.GELU, bias=True,
                 drop=0.0):
        super().__init__()
        out_features = out_features or in_features
        hidden_features = hidden_features or in_features
        bias = to_2tuple(bias)
        drop_probs = to_2tuple(drop)
        self.fc1 = nn.Linear(in_features, hidden_features, bias=bias[0])
        self.act = act_layer()
        self.drop1 = nn.Dropout(drop_probs[0])
        self.norm = nn.Identity()
        self.fc2 = nn.Linear(hidden_features, out_features, bias=bias[1])
        self.drop2 = nn.Dropout(drop_probs[1])

    def forward(self, x):
        x = self.fc1(x)
        x = self.act(x)
        x = self.drop1(x)
        x = self.norm(x)
        x = self.fc2(x)
        x = self.drop2(x)
        return x


class Attention(nn.Module):
    fused_attn: torch.jit.Final[bool]

    def __init__(self, dim, num_heads=8, qkv_bias=False, qk_norm=False, attn_drop=0.0, proj_drop=0.0,
                 norm_layer=nn.LayerNorm, fused_attn=True):
        super().__init__()
        assert dim % num_heads == 0, "dim should be divisible by num_heads"
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.scale = self.head_dim ** -0.5
        self.fused_attn = fused_attn

        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.q_norm = norm_layer(self.head_dim) if qk_norm else nn.Identity()
        self.k_norm = norm_layer(self.head_dim) if qk_norm else nn.Identity()
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(proj_drop)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        q, k = self.q_norm(q), self.k_norm(k)

        if self.fused_attn:
            x = F.scaled_dot_product_attention(
                q, k, v,
                dropout_p=self.attn_drop.p if self.training else 0.0,
            )
        else:
            q = q * self.scale
            attn = q @ k.transpose(-2, -1)
            attn = attn.softmax(dim=-1)
            attn = self.attn_drop(attn)
            x = attn @ v

        x = x.transpose(1, 2).reshape(B, N, C)
        x = self.proj(x)
        x = self.proj_drop(x)
        return x


class LayerScale(nn.Module):
    def __init__(self, dim, init_values=1e-5, inplace=False):
        super().__init__()
        self.inplace = inplace
        self.gamma = nn.Parameter(init_values * torch.ones(dim))

    def forward(self, x):
        return x.mul_(self.gamma) if self.inplace else x * self.gamma


class ViTBlock(nn.Module):
    def __init__(self, dim, num_heads, mlp_ratio=4.0, qkv_bias=False, qk_norm=False, proj_drop=0.0,
                 attn_drop=0.0, init_values=None, drop_path=0.0, act_layer=nn.GELU, norm_layer=nn.LayerNorm,
                 fused_attn=True):
        super().__init__()
        self.norm1 = norm_layer(dim)
        self.attn = Attention(dim, num_heads=num_heads, qkv_bias=qkv_bias, qk_norm=qk_norm, attn_drop=attn_drop,
                              proj_drop=proj_drop, norm_layer=norm_layer, fused_attn=fused_attn)
        self.ls1 = LayerScale(dim, init_values=init_values) if init_values else nn.Identity()
        self.drop_path1 = DropPath(drop_path) if drop_path > 0.0 else nn.Identity()

        self.norm2 = norm_layer(dim)
        self.mlp = Mlp(in_features=dim, hidden_features=int(dim * mlp_ratio), act_layer=act_layer, drop=proj_drop)
        self.ls2 = LayerScale(dim, init_values=init_values) if init_values else nn.Identity()
        self.drop_path2 = DropPath(drop_path) if drop_path > 0.0 else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.drop_path1(self.ls1(self.attn(self.norm1(x))))
        x = x + self.drop_path2(self.ls2(self.mlp(self.norm2(x))))
        return x


def checkpoint_seq(functions, x):
    raise NotImplementedError("gradient checkpointing is not part of this corpus")


class VisionTransformer(nn.Module):
    def __init__(self, img_size=16, patch_size=4, in_chans=3, num_classes=10, global_pool="token", embed_dim=32,
                 depth=2, num_heads=4, mlp_ratio=2.0, qkv_bias=True, qk_norm=False, init_values=None,
                 class_token=True, no_embed_class=False, pre_norm=False, fc_norm=None, drop_rate=0.0,
                 pos_drop_rate=0.0, proj_drop_rate=0.0, attn_drop_rate=0.0, drop_path_rate=0.0,
                 fused_attn=True):
        super().__init__()
        assert global_pool in ("", "avg", "token")
        use_fc_norm = global_pool == "avg" if fc_norm is None else fc_norm
        norm_layer = partial(nn.LayerNorm, eps=1e-6)
        act_layer = nn.GELU

        self.num_classes = num_classes
        self.global_pool = global_pool
        self.num_features = self.embed_dim = embed_dim
        self.num_prefix_tokens = 1 if class_token else 0
        self.no_embed_class = no_embed_class
        self.grad_checkpointing = False

        self.patch_embed = PatchEmbed(img_size=img_size, patch_size=patch_size, in_chans=in_chans,
                                      embed_dim=embed_dim, bias=not pre_norm)
        num_patches = self.patch_embed.num_patches

        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim)) if class_token else None
        embed_len = num_patches if no_embed_class else num_patches + self.num_prefix_tokens
        self.pos_embed = nn.Parameter(torch.randn(1, embed_len, embed_dim) * 0.02)
        self.pos_drop = nn.Dropout(p=pos_drop_rate)
        self.patch_drop = nn.Identity()
        self.norm_pre = norm_layer(embed_dim) if pre_norm else nn.Identity()

        dpr = [x.item() for x in torch.linspace(0, drop_path_rate, depth)]  # stochastic depth decay rule
        self.blocks = nn.Sequential(*[
            ViTBlock(dim=embed_dim, num_heads=num_heads, mlp_ratio=mlp_ratio, qkv_bias=qkv_bias, qk_norm=qk_norm,
                     init_values=init_values, proj_drop=proj_drop_rate, attn_drop=attn_drop_rate, drop_path=dpr[i],
                     norm_layer=norm_layer, act_layer=act_layer, fused_attn=fused_attn)
            for i in range(depth)])
        self.norm = norm_layer(embed_dim) if not use_fc_norm else nn.Identity()

        self.fc_norm = norm_layer(embed_dim) if use_fc_norm else nn.Identity()
        self.head_drop = nn.Dropout(drop_rate)
        self.head = nn.Linear(self.embed_dim, num_classes) if num_classes > 0 else nn.Identity()
        if self.cls_token is not None:
            nn.init.normal_(self.cls_token, std=1e-6)

    def _pos_embed(self, x):
        if self.no_embed_class:
            x = x + self.pos_embed
            if self.cls_token is not None:
                x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1)
        else:
            to_cat = []
            if self.cls_token is not None:
                to_cat.append(self.cls_token.expand(x.shape[0], -1, -1))
            x = torch.cat(to_cat + [x], dim=1)
            x = x + self.pos_embed
        return self.pos_drop(x)

    def forward_features(self, x):
        x = self.patch_embed(x)
        x = self._pos_embed(x)
        x = self.patch_drop(x)
        x = self.norm_pre(x)
        if self.grad_checkpointing and not torch.jit.is_scripting():
            x = checkpoint_seq(self.blocks, x)
        else:
            x = self.blocks(x)
        x = self.norm(x)
        return x

    def forward_head(self, x, pre_logits: bool = False):
        if self.global_pool:
            x = x[:, self.num_prefix_tokens:].mean(dim=1) if self.global_pool == "avg" else x[:, 0]
        x = self.fc_norm(x)
        x = self.head_drop(x)
        return x if pre_logits else self.head(x)

    def forward(self, x):
        if torch.jit.is_tracing() or torch.jit.is_scripting():
            return self.forward_head(self.forward_features(x))
        x = self.forward_features(x)
        x = self.forward_head(x)
        return x


@case(inputs=_images, tags={"eval", "no_grad"})
class ViTEval(VisionTransformer):
    """Fused attention (SDPA), class-token pooling, no layer scale."""

    def __init__(self) -> None:
        super().__init__(fused_attn=True)
        self.eval()


@case(inputs=_images, tags={"train", "rng"})
class ViTTrain(VisionTransformer):
    """Explicit softmax attention with dropout, layer scale, drop-path, average pooling with fc_norm."""

    def __init__(self) -> None:
        super().__init__(fused_attn=False, global_pool="avg", init_values=0.1, drop_path_rate=0.2,
                         attn_drop_rate=0.1, proj_drop_rate=0.1, drop_rate=0.1)
        self.train()


# ------------------------------------------------------------------------------------------------
# Swin Transformer (microsoft/Swin-Transformer, timm)


def window_partition(x, window_size: int):
    B, H, W, C = x.shape
    x = x.view(B, H // window_size, window_size, W // window_size, window_size, C)
    windows = x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, window_size, window_size, C)
    return windows


def window_reverse(windows, window_size: int, H: int, W: int):
    C = windows.shape[-1]
    x = windows.view(-1, H // window_size, W // window_size, window_size, window_size, C)
    x = x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, H, W, C)
    return x


def get_relative_position_index(win_h: int, win_w: int):
    coords = torch.stack(torch.meshgrid([torch.arange(win_h), torch.arange(win_w)], indexing="ij"))  # 2, Wh, Ww
    coords_flatten = torch.flatten(coords, 1)  # 2, Wh*Ww
    relative_coords = coords_flatten[:, :, None] - coords_flatten[:, None, :]  # 2, Wh*Ww, Wh*Ww
    relative_coords = relative_coords.permute(1, 2, 0).contiguous()  # Wh*Ww, Wh*Ww, 2
    relative_coords[:, :, 0] += win_h - 1  # shift to start from 0
    relative_coords[:, :, 1] += win_w - 1
    relative_coords[:, :, 0] *= 2 * win_w - 1
    return relative_coords.sum(-1)  # Wh*Ww, Wh*Ww


class WindowAttention(nn.Module):
    def __init__(self, dim, num_heads, window_size=4, qkv_bias=True, attn_drop=0.0, proj_drop=0.0):
        super().__init__()
        self.dim = dim
        self.window_size = to_2tuple(window_size)  # Wh, Ww
        win_h, win_w = self.window_size
        self.window_area = win_h * win_w
        self.num_heads = num_heads
        head_dim = dim // num_heads
        self.scale = head_dim ** -0.5

        self.relative_position_bias_table = nn.Parameter(torch.zeros((2 * win_h - 1) * (2 * win_w - 1), num_heads))
        self.register_buffer("relative_position_index", get_relative_position_index(win_h, win_w), persistent=False)

        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(proj_drop)
        nn.init.trunc_normal_(self.relative_position_bias_table, std=0.02)
        self.softmax = nn.Softmax(dim=-1)

    def _get_rel_pos_bias(self) -> torch.Tensor:
        relative_position_bias = self.relative_position_bias_table[
            self.relative_position_index.view(-1)].view(self.window_area, self.window_area, -1)  # Wh*Ww,Wh*Ww,nH
        relative_position_bias = relative_position_bias.permute(2, 0, 1).contiguous()  # nH, Wh*Ww, Wh*Ww
        return relative_position_bias.unsqueeze(0)

    def forward(self, x, mask: torch.Tensor | None = None):
        B_, N, C = x.shape
        qkv = self.qkv(x).reshape(B_, N, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)

        q = q * self.scale
        attn = q @ k.transpose(-2, -1)
        attn = attn + self._get_rel_pos_bias()

        if mask is not None:
            num_win = mask.shape[0]
            attn = attn.view(-1, num_win, self.num_heads, N, N) + mask.unsqueeze(1).unsqueeze(0)
            attn = attn.view(-1, self.num_heads, N, N)
            attn = self.softmax(attn)
        else:
            attn = self.softmax(attn)
        attn = self.attn_drop(attn)

        x = (attn @ v).transpose(1, 2).reshape(B_, N, -1)
        x = self.proj(x)
        x = self.proj_drop(x)
        return x


class SwinTransformerBlock(nn.Module):
    def __init__(self, dim, input_resolution, num_heads=4, window_size=4, shift_size=0, mlp_ratio=2.0,
                 qkv_bias=True, proj_drop=0.0, attn_drop=0.0, drop_path=0.0, act_layer=nn.GELU,
                 norm_layer=nn.LayerNorm):
        super().__init__()
        self.dim = dim
        self.input_resolution = input_resolution
        self.window_size = window_size
        self.shift_size = shift_size
        self.mlp_ratio = mlp_ratio
        if min(self.input_resolution) <= self.window_size:
            # if window size is larger than input resolution, we don't partition windows
            self.shift_size = 0
            self.window_size = min(self.input_resolution)
        assert 0 <= self.shift_size < self.window_size, "shift_size must in 0-window_size"

        self.norm1 = norm_layer(dim)
        self.attn = WindowAttention(dim, num_heads=num_heads, window_size=self.window_size, qkv_bias=qkv_bias,
                                    attn_drop=attn_drop, proj_drop=proj_drop)
        self.drop_path = DropPath(drop_path) if drop_path > 0.0 else nn.Identity()
        self.norm2 = norm_layer(dim)
        self.mlp = Mlp(in_features=dim, hidden_features=int(dim * mlp_ratio), act_layer=act_layer, drop=proj_drop)

        if self.shift_size > 0:
            # calculate attention mask for SW-MSA
            H, W = self.input_resolution
            img_mask = torch.zeros((1, H, W, 1))  # 1 H W 1
            cnt = 0
            for h in (slice(0, -self.window_size), slice(-self.window_size, -self.shift_size),
                      slice(-self.shift_size, None)):
                for w in (slice(0, -self.window_size), slice(-self.window_size, -self.shift_size),
                          slice(-self.shift_size, None)):
                    img_mask[:, h, w, :] = cnt
                    cnt += 1
            mask_windows = window_partition(img_mask, self.window_size)  # nW, window_size, window_size, 1
            mask_windows = mask_windows.view(-1, self.window_size * self.window_size)
            attn_mask = mask_windows.unsqueeze(1) - mask_windows.unsqueeze(2)
            attn_mask = attn_mask.masked_fill(attn_mask != 0, float(-100.0)).masked_fill(attn_mask == 0, float(0.0))
        else:
            attn_mask = None
        self.register_buffer("attn_mask", attn_mask, persistent=False)

    def _attn(self, x):
        B, H, W, C = x.shape

        # cyclic shift
        if self.shift_size > 0:
            shifted_x = torch.roll(x, shifts=(-self.shift_size, -self.shift_size), dims=(1, 2))
        else:
            shifted_x = x

        # partition windows
        x_windows = window_partition(shifted_x, self.window_size)  # nW*B, window_size, window_size, C
        x_windows = x_windows.view(-1, self.window_size * self.window_size, C)  # nW*B, window_size*window_size, C

        # W-MSA/SW-MSA
        attn_windows = self.attn(x_windows, mask=self.attn_mask)  # nW*B, window_size*window_size, C

        # merge windows
        attn_windows = attn_windows.view(-1, self.window_size, self.window_size, C)
        shifted_x = window_reverse(attn_windows, self.window_size, H, W)  # B H' W' C

        # reverse cyclic shift
        if self.shift_size > 0:
            x = torch.roll(shifted_x, shifts=(self.shift_size, self.shift_size), dims=(1, 2))
        else:
            x = shifted_x
        return x

    def forward(self, x):
        B, H, W, C = x.shape
        x = x + self.drop_path(self._attn(self.norm1(x)))
        x = x.reshape(B, -1, C)
        x = x + self.drop_path(self.mlp(self.norm2(x)))
        x = x.reshape(B, H, W, C)
        return x


class PatchMerging(nn.Module):
    def __init__(self, dim, out_dim=None, norm_layer=nn.LayerNorm):
        super().__init__()
        self.dim = dim
        self.out_dim = out_dim or 2 * dim
        self.norm = norm_layer(4 * dim)
        self.reduction = nn.Linear(4 * dim, self.out_dim, bias=False)

    def forward(self, x):
        B, H, W, C = x.shape
        _assert(H % 2 == 0, f"x height ({H}) is not even.")
        _assert(W % 2 == 0, f"x width ({W}) is not even.")
        x = x.reshape(B, H // 2, 2, W // 2, 2, C).permute(0, 1, 3, 4, 2, 5).flatten(3)
        x = self.norm(x)
        x = self.reduction(x)
        return x


class SwinStyle(nn.Module):
    def __init__(self, img_size=16, patch_size=2, embed_dim=16, window_size=4, num_classes=10, drop_path_rate=0.0):
        super().__init__()
        self.patch_embed = PatchEmbed(img_size=img_size, patch_size=patch_size, embed_dim=embed_dim, flatten=False)
        res = img_size // patch_size
        self.blocks = nn.Sequential(
            SwinTransformerBlock(embed_dim, (res, res), num_heads=2, window_size=window_size, shift_size=0,
                                 drop_path=drop_path_rate),
            SwinTransformerBlock(embed_dim, (res, res), num_heads=2, window_size=window_size,
                                 shift_size=window_size // 2, drop_path=drop_path_rate),
        )
        self.downsample = PatchMerging(embed_dim)
        self.norm = nn.LayerNorm(2 * embed_dim)
        self.head = nn.Linear(2 * embed_dim, num_classes)

    def forward(self, x):
        x = self.patch_embed(x).permute(0, 2, 3, 1)  # NCHW -> NHWC
        x = self.blocks(x)
        x = self.norm(self.downsample(x))
        return self.head(x.mean(dim=(1, 2)))


@case(inputs=_images, tags={"eval", "no_grad"})
class SwinEval(SwinStyle):
    def __init__(self) -> None:
        super().__init__()
        self.eval()


@case(inputs=_images, tags={"train", "rng"})
class SwinTrain(SwinStyle):
    def __init__(self) -> None:
        super().__init__(drop_path_rate=0.2)
        self.train()


# ------------------------------------------------------------------------------------------------
# GPT-2 (Hugging Face transformers)


class Conv1D(nn.Module):
    """1D-convolutional layer as defined by Radford et al. for OpenAI GPT: a linear layer with a transposed weight."""

    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        x = x.view(size_out)
        return x


class NewGELUActivation(nn.Module):
    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return 0.5 * input * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (input + 0.044715 * torch.pow(input, 3.0))))


class GPT2Config:
    vocab_size = 64
    n_positions = 32
    n_embd = 32
    n_layer = 2
    n_head = 4
    n_inner = None
    resid_pdrop = 0.1
    embd_pdrop = 0.1
    attn_pdrop = 0.1
    layer_norm_epsilon = 1e-5
    scale_attn_weights = True
    use_cache = True


class GPT2Attention(nn.Module):
    def __init__(self, config, is_cross_attention=False):
        super().__init__()
        max_positions = config.n_positions
        self.register_buffer(
            "bias",
            torch.tril(torch.ones((max_positions, max_positions), dtype=torch.bool)).view(
                1, 1, max_positions, max_positions),
            persistent=False,
        )
        self.register_buffer("masked_bias", torch.tensor(-1e4), persistent=False)
        self.embed_dim = config.n_embd
        self.num_heads = config.n_head
        self.head_dim = self.embed_dim // self.num_heads
        self.split_size = self.embed_dim
        self.scale_attn_weights = config.scale_attn_weights
        self.is_cross_attention = is_cross_attention
        self.c_attn = Conv1D(3 * self.embed_dim, self.embed_dim)
        self.c_proj = Conv1D(self.embed_dim, self.embed_dim)
        self.attn_dropout = nn.Dropout(config.attn_pdrop)
        self.resid_dropout = nn.Dropout(config.resid_pdrop)

    def _attn(self, query, key, value, attention_mask=None, head_mask=None):
        attn_weights = torch.matmul(query, key.transpose(-1, -2))
        if self.scale_attn_weights:
            attn_weights = attn_weights / torch.full(
                [], value.size(-1) ** 0.5, dtype=attn_weights.dtype, device=attn_weights.device)
        if not self.is_cross_attention:
            query_length, key_length = query.size(-2), key.size(-2)
            causal_mask = self.bias[:, :, key_length - query_length: key_length, :key_length]
            mask_value = torch.finfo(attn_weights.dtype).min
            # Need to be a tensor, otherwise we get error: `RuntimeError: expected scalar type float but found double`.
            mask_value = torch.full([], mask_value, dtype=attn_weights.dtype, device=attn_weights.device)
            attn_weights = torch.where(causal_mask, attn_weights.to(attn_weights.dtype), mask_value)
        if attention_mask is not None:
            attn_weights = attn_weights + attention_mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_weights = attn_weights.type(value.dtype)
        attn_weights = self.attn_dropout(attn_weights)
        if head_mask is not None:
            attn_weights = attn_weights * head_mask
        attn_output = torch.matmul(attn_weights, value)
        return attn_output, attn_weights

    def _split_heads(self, tensor, num_heads, attn_head_size):
        new_shape = tensor.size()[:-1] + (num_heads, attn_head_size)
        tensor = tensor.view(new_shape)
        return tensor.permute(0, 2, 1, 3)  # (batch, head, seq_length, head_features)

    def _merge_heads(self, tensor, num_heads, attn_head_size):
        tensor = tensor.permute(0, 2, 1, 3).contiguous()
        new_shape = tensor.size()[:-2] + (num_heads * attn_head_size,)
        return tensor.view(new_shape)

    def forward(self, hidden_states, layer_past=None, attention_mask=None, head_mask=None, use_cache=False,
                output_attentions=False):
        query, key, value = self.c_attn(hidden_states).split(self.split_size, dim=2)
        query = self._split_heads(query, self.num_heads, self.head_dim)
        key = self._split_heads(key, self.num_heads, self.head_dim)
        value = self._split_heads(value, self.num_heads, self.head_dim)
        if layer_past is not None:
            past_key, past_value = layer_past
            key = torch.cat((past_key, key), dim=-2)
            value = torch.cat((past_value, value), dim=-2)
        if use_cache is True:
            present = (key, value)
        else:
            present = None
        attn_output, attn_weights = self._attn(query, key, value, attention_mask, head_mask)
        attn_output = self._merge_heads(attn_output, self.num_heads, self.head_dim)
        attn_output = self.c_proj(attn_output)
        attn_output = self.resid_dropout(attn_output)
        outputs = (attn_output, present)
        if output_attentions:
            outputs += (attn_weights,)
        return outputs  # a, present, (attentions)


class GPT2MLP(nn.Module):
    def __init__(self, intermediate_size, config):
        super().__init__()
        embed_dim = config.n_embd
        self.c_fc = Conv1D(intermediate_size, embed_dim)
        self.c_proj = Conv1D(embed_dim, intermediate_size)
        self.act = NewGELUActivation()
        self.dropout = nn.Dropout(config.resid_pdrop)

    def forward(self, hidden_states):
        hidden_states = self.c_fc(hidden_states)
        hidden_states = self.act(hidden_states)
        hidden_states = self.c_proj(hidden_states)
        hidden_states = self.dropout(hidden_states)
        return hidden_states


class GPT2Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        hidden_size = config.n_embd
        inner_dim = config.n_inner if config.n_inner is not None else 4 * hidden_size
        self.ln_1 = nn.LayerNorm(hidden_size, eps=config.layer_norm_epsilon)
        self.attn = GPT2Attention(config)
        self.ln_2 = nn.LayerNorm(hidden_size, eps=config.layer_norm_epsilon)
        self.mlp = GPT2MLP(inner_dim, config)

    def forward(self, hidden_states, layer_past=None, attention_mask=None, head_mask=None, use_cache=False,
                output_attentions=False):
        residual = hidden_states
        hidden_states = self.ln_1(hidden_states)
        attn_outputs = self.attn(hidden_states, layer_past=layer_past, attention_mask=attention_mask,
                                 head_mask=head_mask, use_cache=use_cache, output_attentions=output_attentions)
        attn_output = attn_outputs[0]  # output_attn: a, present, (attentions)
        outputs = attn_outputs[1:]
        # residual connection
        hidden_states = attn_output + residual
        residual = hidden_states
        hidden_states = self.ln_2(hidden_states)
        feed_forward_hidden_states = self.mlp(hidden_states)
        # residual connection
        hidden_states = residual + feed_forward_hidden_states
        if use_cache:
            outputs = (hidden_states,) + outputs
        else:
            outputs = (hidden_states,) + outputs[1:]
        return outputs  # hidden_states, present, (attentions, cross_attentions)


def get_parameter_dtype(parameter: nn.Module) -> torch.dtype:
    last_dtype = None
    for t in parameter.parameters():
        last_dtype = t.dtype
        if t.is_floating_point():
            return t.dtype
    return last_dtype


class GPT2LMHeadModel(nn.Module):
    def __init__(self, config=GPT2Config):
        super().__init__()
        self.config = config
        self.embed_dim = config.n_embd
        self.wte = nn.Embedding(config.vocab_size, self.embed_dim)
        self.wpe = nn.Embedding(config.n_positions, self.embed_dim)
        self.drop = nn.Dropout(config.embd_pdrop)
        self.h = nn.ModuleList([GPT2Block(config) for _ in range(config.n_layer)])
        self.ln_f = nn.LayerNorm(self.embed_dim, eps=config.layer_norm_epsilon)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight

    @property
    def dtype(self) -> torch.dtype:
        return get_parameter_dtype(self)

    def forward(self, input_ids=None, past_key_values=None, attention_mask=None, labels=None, use_cache=None,
                output_hidden_states=None, return_dict=None):
        use_cache = use_cache if use_cache is not None else self.config.use_cache
        input_shape = input_ids.size()
        input_ids = input_ids.view(-1, input_shape[-1])
        batch_size = input_ids.shape[0]
        device = input_ids.device

        if past_key_values is None:
            past_length = 0
            past_key_values = tuple([None] * len(self.h))
        else:
            past_length = past_key_values[0][0].size(-2)
        position_ids = torch.arange(past_length, input_shape[-1] + past_length, dtype=torch.long, device=device)
        position_ids = position_ids.unsqueeze(0)

        if attention_mask is not None:
            if batch_size <= 0:
                raise ValueError("batch_size has to be defined and > 0")
            attention_mask = attention_mask.view(batch_size, -1)
            attention_mask = attention_mask[:, None, None, :]
            attention_mask = attention_mask.to(dtype=self.dtype)  # fp16 compatibility
            attention_mask = (1.0 - attention_mask) * torch.finfo(self.dtype).min

        inputs_embeds = self.wte(input_ids)
        position_embeds = self.wpe(position_ids)
        hidden_states = inputs_embeds + position_embeds
        hidden_states = self.drop(hidden_states)
        output_shape = (-1,) + input_shape[1:] + (hidden_states.size(-1),)

        presents = () if use_cache else None
        all_hidden_states = () if output_hidden_states else None
        for i, (block, layer_past) in enumerate(zip(self.h, past_key_values)):
            if output_hidden_states:
                all_hidden_states = all_hidden_states + (hidden_states,)
            outputs = block(hidden_states, layer_past=layer_past, attention_mask=attention_mask,
                            use_cache=use_cache)
            hidden_states = outputs[0]
            if use_cache is True:
                presents = presents + (outputs[1],)

        hidden_states = self.ln_f(hidden_states)
        hidden_states = hidden_states.view(output_shape)
        if output_hidden_states:
            all_hidden_states = all_hidden_states + (hidden_states,)

        lm_logits = self.lm_head(hidden_states)
        loss = None
        if labels is not None:
            # Shift so that tokens < n predict n
            shift_logits = lm_logits[..., :-1, :].contiguous()
            shift_labels = labels[..., 1:].contiguous()
            loss_fct = nn.CrossEntropyLoss()
            loss = loss_fct(shift_logits.view(-1, shift_logits.size(-1)), shift_labels.view(-1))
        if not return_dict:
            output = (lm_logits, presents, all_hidden_states)
            return ((loss,) + output) if loss is not None else output
        return {"loss": loss, "logits": lm_logits, "past_key_values": presents, "hidden_states": all_hidden_states}


def _gpt2_decode_step() -> Inputs:
    """One generation step: a new token per sequence, the cache of 5 earlier ones, a padding mask."""
    cfg = GPT2Config
    head_dim = cfg.n_embd // cfg.n_head
    past = tuple((torch.randn(2, cfg.n_head, 5, head_dim), torch.randn(2, cfg.n_head, 5, head_dim))
                 for _ in range(cfg.n_layer))
    mask = torch.tensor([[1] * 6, [0, 0] + [1] * 4])
    return Inputs((torch.randint(0, cfg.vocab_size, (2, 1)),), {"past_key_values": past, "attention_mask": mask})


@case(inputs=_gpt2_decode_step, tags={"eval", "no_grad"})
class GPT2DecodeStep(GPT2LMHeadModel):
    def __init__(self) -> None:
        super().__init__()
        self.eval()


def _gpt2_train_batch() -> Inputs:
    ids = torch.randint(0, GPT2Config.vocab_size, (2, 8))
    return Inputs((ids,), {"labels": ids.clone(), "use_cache": False, "output_hidden_states": True,
                           "return_dict": True})


@case(inputs=_gpt2_train_batch, tags={"train", "rng"})
class GPT2Train(GPT2LMHeadModel):
    def __init__(self) -> None:
        super().__init__()
        self.train()


# ------------------------------------------------------------------------------------------------
# LLaMA (Hugging Face transformers, the cached cos/sin rotary of 4.3x; gpt-fast's repeat_interleave)


class LlamaConfig:
    vocab_size = 64
    hidden_size = 32
    intermediate_size = 64
    num_hidden_layers = 2
    num_attention_heads = 4
    num_key_value_heads = 2
    max_position_embeddings = 32
    rms_norm_eps = 1e-6
    rope_theta = 10000.0
    attention_dropout = 0.0


class LlamaRMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class LlamaRotaryEmbedding(nn.Module):
    def __init__(self, dim, max_position_embeddings=2048, base=10000, device=None):
        super().__init__()
        self.dim = dim
        self.max_position_embeddings = max_position_embeddings
        self.base = base
        inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2).float().to(device) / self.dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self._set_cos_sin_cache(seq_len=max_position_embeddings, device=self.inv_freq.device,
                                dtype=torch.get_default_dtype())

    def _set_cos_sin_cache(self, seq_len, device, dtype):
        self.max_seq_len_cached = seq_len
        t = torch.arange(self.max_seq_len_cached, device=device, dtype=self.inv_freq.dtype)
        freqs = torch.outer(t, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos_cached", emb.cos().to(dtype), persistent=False)
        self.register_buffer("sin_cached", emb.sin().to(dtype), persistent=False)

    def forward(self, x, seq_len=None):
        if seq_len > self.max_seq_len_cached:
            self._set_cos_sin_cache(seq_len=seq_len, device=x.device, dtype=x.dtype)
        return (
            self.cos_cached[:seq_len].to(dtype=x.dtype),
            self.sin_cached[:seq_len].to(dtype=x.dtype),
        )


def rotate_half(x):
    """Rotates half the hidden dims of the input."""
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin, position_ids, unsqueeze_dim=1):
    cos = cos[position_ids].unsqueeze(unsqueeze_dim)
    sin = sin[position_ids].unsqueeze(unsqueeze_dim)
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed, k_embed


class LlamaMLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.hidden_size = config.hidden_size
        self.intermediate_size = config.intermediate_size
        self.gate_proj = nn.Linear(self.hidden_size, self.intermediate_size, bias=False)
        self.up_proj = nn.Linear(self.hidden_size, self.intermediate_size, bias=False)
        self.down_proj = nn.Linear(self.intermediate_size, self.hidden_size, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class LlamaAttention(nn.Module):
    def __init__(self, config, layer_idx: int):
        super().__init__()
        self.config = config
        self.layer_idx = layer_idx
        self.attention_dropout = config.attention_dropout
        self.hidden_size = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.head_dim = self.hidden_size // self.num_heads
        self.num_key_value_heads = config.num_key_value_heads
        self.num_key_value_groups = self.num_heads // self.num_key_value_heads
        self.max_position_embeddings = config.max_position_embeddings
        self.rope_theta = config.rope_theta
        self.is_causal = True

        if (self.head_dim * self.num_heads) != self.hidden_size:
            raise ValueError("hidden_size must be divisible by num_heads")
        self.q_proj = nn.Linear(self.hidden_size, self.num_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(self.hidden_size, self.num_key_value_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(self.hidden_size, self.num_key_value_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, self.hidden_size, bias=False)
        self.rotary_emb = LlamaRotaryEmbedding(self.head_dim, max_position_embeddings=self.max_position_embeddings,
                                               base=self.rope_theta)

    def forward(self, hidden_states, attention_mask=None, position_ids=None):
        bsz, q_len, _ = hidden_states.size()

        query_states = self.q_proj(hidden_states)
        key_states = self.k_proj(hidden_states)
        value_states = self.v_proj(hidden_states)

        query_states = query_states.view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        key_states = key_states.view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)
        value_states = value_states.view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)

        kv_seq_len = key_states.shape[-2]
        cos, sin = self.rotary_emb(value_states, seq_len=kv_seq_len)
        query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin, position_ids)

        key_states = key_states.repeat_interleave(self.num_key_value_groups, dim=1)
        value_states = value_states.repeat_interleave(self.num_key_value_groups, dim=1)

        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) / math.sqrt(self.head_dim)
        if attention_mask is not None:
            if attention_mask.size() != (bsz, 1, q_len, kv_seq_len):
                raise ValueError(f"Attention mask should be of size {(bsz, 1, q_len, kv_seq_len)}")
            attn_weights = attn_weights + attention_mask

        # upcast attention to fp32
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)
        attn_weights = nn.functional.dropout(attn_weights, p=self.attention_dropout, training=self.training)
        attn_output = torch.matmul(attn_weights, value_states)

        attn_output = attn_output.transpose(1, 2).contiguous()
        attn_output = attn_output.reshape(bsz, q_len, self.hidden_size)
        return self.o_proj(attn_output)


class LlamaDecoderLayer(nn.Module):
    def __init__(self, config, layer_idx: int):
        super().__init__()
        self.hidden_size = config.hidden_size
        self.self_attn = LlamaAttention(config=config, layer_idx=layer_idx)
        self.mlp = LlamaMLP(config)
        self.input_layernorm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.post_attention_layernorm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)

    def forward(self, hidden_states, attention_mask=None, position_ids=None):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states = self.self_attn(hidden_states=hidden_states, attention_mask=attention_mask,
                                       position_ids=position_ids)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.post_attention_layernorm(hidden_states)
        hidden_states = self.mlp(hidden_states)
        hidden_states = residual + hidden_states
        return (hidden_states,)


class LlamaForCausalLM(nn.Module):
    def __init__(self, config=LlamaConfig):
        super().__init__()
        self.config = config
        self.padding_idx = 0
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size, self.padding_idx)
        self.layers = nn.ModuleList([LlamaDecoderLayer(config, i) for i in range(config.num_hidden_layers)])
        self.norm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    def forward(self, input_ids, attention_mask=None, position_ids=None):
        batch_size, seq_length = input_ids.shape[:2]
        device = input_ids.device
        if position_ids is None:
            position_ids = torch.arange(0, seq_length, dtype=torch.long, device=device)
            position_ids = position_ids.unsqueeze(0)
        inputs_embeds = self.embed_tokens(input_ids)

        # 4d causal mask: min where masked, 0 where attended, padding folded in
        dtype = inputs_embeds.dtype
        min_dtype = torch.finfo(dtype).min
        causal_mask = torch.full((seq_length, seq_length), fill_value=min_dtype, dtype=dtype, device=device)
        causal_mask = torch.triu(causal_mask, diagonal=1)
        causal_mask = causal_mask[None, None, :, :].expand(batch_size, 1, -1, -1)
        if attention_mask is not None:
            causal_mask = causal_mask.clone()
            padding_mask = causal_mask.eq(0.0) * attention_mask[:, None, None, :].eq(0.0)
            causal_mask = causal_mask.masked_fill(padding_mask, min_dtype)

        hidden_states = inputs_embeds
        for decoder_layer in self.layers:
            layer_outputs = decoder_layer(hidden_states, attention_mask=causal_mask, position_ids=position_ids)
            hidden_states = layer_outputs[0]
        hidden_states = self.norm(hidden_states)
        logits = self.lm_head(hidden_states)
        logits = logits.float()
        return logits


@case(inputs=lambda: (torch.randint(1, 64, (2, 6)), torch.tensor([[1] * 6, [0] + [1] * 5])),
      tags={"eval", "no_grad"})
class LlamaEval(LlamaForCausalLM):
    def __init__(self) -> None:
        super().__init__()
        self.eval()


@case(inputs=lambda: Inputs((torch.randint(1, 64, (2, 6)),), {"position_ids": torch.tensor([[0, 1, 2, 3, 0, 1]])}),
      tags={"train"})
class LlamaTrain(LlamaForCausalLM):
    def __init__(self) -> None:
        super().__init__()
        self.train()


# ------------------------------------------------------------------------------------------------
# A seq2seq attention decoder unrolled step by step (Bahdanau-style, no LSTM: a GRU-like update by hand)


class AttnDecoder(nn.Module):
    def __init__(self, vocab=20, hidden=24, max_length=5, sos_token=1, dropout_p=0.1):
        super().__init__()
        self.hidden_size = hidden
        self.max_length = max_length
        self.sos_token = sos_token
        self.embedding = nn.Embedding(vocab, hidden)
        self.Wa = nn.Linear(hidden, hidden)
        self.Ua = nn.Linear(hidden, hidden)
        self.Va = nn.Linear(hidden, 1)
        self.gates = nn.Linear(3 * hidden, 2 * hidden)
        self.candidate = nn.Linear(3 * hidden, hidden)
        self.out = nn.Linear(hidden, vocab)
        self.dropout = nn.Dropout(dropout_p)

    def attention(self, query, keys):
        scores = self.Va(torch.tanh(self.Wa(query) + self.Ua(keys)))
        scores = scores.squeeze(2).unsqueeze(1)
        weights = F.softmax(scores, dim=-1)
        context = torch.bmm(weights, keys)
        return context, weights

    def forward_step(self, input, hidden, encoder_outputs):
        embedded = self.dropout(self.embedding(input))
        query = hidden.permute(1, 0, 2)
        context, attn_weights = self.attention(query, encoder_outputs)
        x = torch.cat((embedded, context), dim=2)
        h = hidden.permute(1, 0, 2)
        z, r = torch.sigmoid(self.gates(torch.cat((x, h), dim=2))).chunk(2, dim=-1)
        n = torch.tanh(self.candidate(torch.cat((x, r * h), dim=2)))
        h = (1 - z) * n + z * h
        output = self.out(h)
        return output, h.permute(1, 0, 2), attn_weights

    def forward(self, encoder_outputs, encoder_hidden, target_tensor=None):
        batch_size = encoder_outputs.size(0)
        decoder_input = torch.empty(batch_size, 1, dtype=torch.long, device=encoder_outputs.device).fill_(
            self.sos_token)
        decoder_hidden = encoder_hidden
        decoder_outputs = []
        attentions = []

        for i in range(self.max_length):
            decoder_output, decoder_hidden, attn_weights = self.forward_step(
                decoder_input, decoder_hidden, encoder_outputs)
            decoder_outputs.append(decoder_output)
            attentions.append(attn_weights)

            if target_tensor is not None:
                # Teacher forcing: Feed the target as the next input
                decoder_input = target_tensor[:, i].unsqueeze(1)  # Teacher forcing
            else:
                # Without teacher forcing: use its own predictions as the next input
                _, topi = decoder_output.topk(1)
                decoder_input = topi.squeeze(-1).detach()  # detach from history as input

        decoder_outputs = torch.cat(decoder_outputs, dim=1)
        decoder_outputs = F.log_softmax(decoder_outputs, dim=-1)
        attentions = torch.cat(attentions, dim=1)
        return decoder_outputs, decoder_hidden, attentions


@case(inputs=lambda: (torch.randn(2, 7, 24), torch.randn(1, 2, 24)), tags={"eval", "no_grad"})
class Seq2SeqGreedyDecode(AttnDecoder):
    def __init__(self) -> None:
        super().__init__()
        self.eval()


@case(inputs=lambda: (torch.randn(2, 7, 24), torch.randn(1, 2, 24), torch.randint(0, 20, (2, 5))),
      tags={"train", "rng"})
class Seq2SeqTeacherForcing(AttnDecoder):
    def __init__(self) -> None:
        super().__init__()
        self.train()


# ------------------------------------------------------------------------------------------------
# U-Net (the widely copied aladdinpersson/milesial style)


class DoubleConv(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(in_channels, out_channels, 3, 1, 1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True),
            nn.Conv2d(out_channels, out_channels, 3, 1, 1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True),
        )

    def forward(self, x):
        return self.conv(x)


class UNET(nn.Module):
    def __init__(self, in_channels=3, out_channels=1, features=(4, 8, 16)):
        super().__init__()
        self.ups = nn.ModuleList()
        self.downs = nn.ModuleList()
        self.pool = nn.MaxPool2d(kernel_size=2, stride=2)

        # Down part of UNET
        for feature in features:
            self.downs.append(DoubleConv(in_channels, feature))
            in_channels = feature

        # Up part of UNET
        for feature in reversed(features):
            self.ups.append(nn.ConvTranspose2d(feature * 2, feature, kernel_size=2, stride=2))
            self.ups.append(DoubleConv(feature * 2, feature))

        self.bottleneck = DoubleConv(features[-1], features[-1] * 2)
        self.final_conv = nn.Conv2d(features[0], out_channels, kernel_size=1)

    def forward(self, x):
        skip_connections = []

        for down in self.downs:
            x = down(x)
            skip_connections.append(x)
            x = self.pool(x)

        x = self.bottleneck(x)
        skip_connections = skip_connections[::-1]

        for idx in range(0, len(self.ups), 2):
            x = self.ups[idx](x)
            skip_connection = skip_connections[idx // 2]

            if x.shape != skip_connection.shape:
                x = F.interpolate(x, size=skip_connection.shape[2:], mode="bilinear", align_corners=False)

            concat_skip = torch.cat((skip_connection, x), dim=1)
            x = self.ups[idx + 1](concat_skip)

        return self.final_conv(x)


@case(inputs=lambda: torch.randn(1, 3, 20, 20), tags={"eval", "no_grad"})
class UNetEval(UNET):
    """20x20: the deepest skip is 5x5, the upsampled bottleneck 4x4, so ``F.interpolate`` runs there."""

    def __init__(self) -> None:
        super().__init__()
        self.eval()


@case(inputs=lambda: torch.randn(2, 3, 16, 16), tags={"train"})
class UNetTrain(UNET):
    def __init__(self) -> None:
        super().__init__()
        self.train()


# ------------------------------------------------------------------------------------------------
# EfficientNet (lukemelas/EfficientNet-PyTorch)

BlockArgs = collections.namedtuple("BlockArgs", [
    "num_repeat", "kernel_size", "stride", "expand_ratio", "input_filters", "output_filters", "se_ratio",
    "id_skip"])
GlobalParams = collections.namedtuple("GlobalParams", [
    "batch_norm_momentum", "batch_norm_epsilon", "drop_connect_rate", "num_classes", "image_size"])


def drop_connect(inputs, p, training):
    assert 0 <= p <= 1, "p must be in range of [0,1]"
    if not training:
        return inputs
    batch_size = inputs.shape[0]
    keep_prob = 1 - p
    # generate binary_tensor mask according to probability (p for 0, 1-p for 1)
    random_tensor = keep_prob
    random_tensor += torch.rand([batch_size, 1, 1, 1], dtype=inputs.dtype, device=inputs.device)
    binary_tensor = torch.floor(random_tensor)
    output = inputs / keep_prob * binary_tensor
    return output


class Conv2dDynamicSamePadding(nn.Conv2d):
    """2D Convolutions like TensorFlow, for a dynamic image size: the padding is computed in forward."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, dilation=1, groups=1, bias=True):
        super().__init__(in_channels, out_channels, kernel_size, stride, 0, dilation, groups, bias)
        self.stride = self.stride if len(self.stride) == 2 else [self.stride[0]] * 2

    def forward(self, x):
        ih, iw = x.size()[-2:]
        kh, kw = self.weight.size()[-2:]
        sh, sw = self.stride
        oh, ow = math.ceil(ih / sh), math.ceil(iw / sw)  # change the output size according to stride ! ! !
        pad_h = max((oh - 1) * self.stride[0] + (kh - 1) * self.dilation[0] + 1 - ih, 0)
        pad_w = max((ow - 1) * self.stride[1] + (kw - 1) * self.dilation[1] + 1 - iw, 0)
        if pad_h > 0 or pad_w > 0:
            x = F.pad(x, [pad_w // 2, pad_w - pad_w // 2, pad_h // 2, pad_h - pad_h // 2])
        return F.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


class MBConvBlock(nn.Module):
    def __init__(self, block_args, global_params):
        super().__init__()
        self._block_args = block_args
        self._bn_mom = 1 - global_params.batch_norm_momentum  # pytorch's difference from tensorflow
        self._bn_eps = global_params.batch_norm_epsilon
        self.has_se = (self._block_args.se_ratio is not None) and (0 < self._block_args.se_ratio <= 1)
        self.id_skip = block_args.id_skip  # whether to use skip connection and drop connect

        Conv2d = Conv2dDynamicSamePadding

        # Expansion phase (Inverted Bottleneck)
        inp = self._block_args.input_filters  # number of input channels
        oup = self._block_args.input_filters * self._block_args.expand_ratio  # number of output channels
        if self._block_args.expand_ratio != 1:
            self._expand_conv = Conv2d(in_channels=inp, out_channels=oup, kernel_size=1, bias=False)
            self._bn0 = nn.BatchNorm2d(num_features=oup, momentum=self._bn_mom, eps=self._bn_eps)

        # Depthwise convolution phase
        k = self._block_args.kernel_size
        s = self._block_args.stride
        self._depthwise_conv = Conv2d(in_channels=oup, out_channels=oup, groups=oup, kernel_size=k, stride=s,
                                      bias=False)
        self._bn1 = nn.BatchNorm2d(num_features=oup, momentum=self._bn_mom, eps=self._bn_eps)

        # Squeeze and Excitation layer, if desired
        if self.has_se:
            num_squeezed_channels = max(1, int(self._block_args.input_filters * self._block_args.se_ratio))
            self._se_reduce = Conv2d(in_channels=oup, out_channels=num_squeezed_channels, kernel_size=1)
            self._se_expand = Conv2d(in_channels=num_squeezed_channels, out_channels=oup, kernel_size=1)

        # Pointwise convolution phase
        final_oup = self._block_args.output_filters
        self._project_conv = Conv2d(in_channels=oup, out_channels=final_oup, kernel_size=1, bias=False)
        self._bn2 = nn.BatchNorm2d(num_features=final_oup, momentum=self._bn_mom, eps=self._bn_eps)
        self._swish = nn.SiLU()

    def forward(self, inputs, drop_connect_rate=None):
        # Expansion and Depthwise Convolution
        x = inputs
        if self._block_args.expand_ratio != 1:
            x = self._expand_conv(inputs)
            x = self._bn0(x)
            x = self._swish(x)

        x = self._depthwise_conv(x)
        x = self._bn1(x)
        x = self._swish(x)

        # Squeeze and Excitation
        if self.has_se:
            x_squeezed = F.adaptive_avg_pool2d(x, 1)
            x_squeezed = self._se_reduce(x_squeezed)
            x_squeezed = self._swish(x_squeezed)
            x_squeezed = self._se_expand(x_squeezed)
            x = torch.sigmoid(x_squeezed) * x

        # Pointwise Convolution
        x = self._project_conv(x)
        x = self._bn2(x)

        # Skip connection and drop connect
        input_filters, output_filters = self._block_args.input_filters, self._block_args.output_filters
        if self.id_skip and self._block_args.stride == 1 and input_filters == output_filters:
            # The combination of skip connection and drop connect brings about stochastic depth.
            if drop_connect_rate:
                x = drop_connect(x, p=drop_connect_rate, training=self.training)
            x = x + inputs  # skip connection
        return x


class EfficientNet(nn.Module):
    def __init__(self, drop_connect_rate=0.2):
        super().__init__()
        blocks_args = [
            BlockArgs(1, 3, 1, 1, 8, 8, 0.25, True),
            BlockArgs(2, 3, 2, 6, 8, 12, 0.25, True),
            BlockArgs(1, 5, 1, 6, 12, 16, 0.25, True),
        ]
        self._global_params = GlobalParams(0.99, 1e-3, drop_connect_rate, 10, 16)
        self._blocks_args = blocks_args
        bn_mom = 1 - self._global_params.batch_norm_momentum
        bn_eps = self._global_params.batch_norm_epsilon

        self._conv_stem = Conv2dDynamicSamePadding(3, 8, kernel_size=3, stride=2, bias=False)
        self._bn0 = nn.BatchNorm2d(num_features=8, momentum=bn_mom, eps=bn_eps)

        self._blocks = nn.ModuleList([])
        for block_args in self._blocks_args:
            self._blocks.append(MBConvBlock(block_args, self._global_params))
            if block_args.num_repeat > 1:  # modify block_args to keep same output size
                block_args = block_args._replace(input_filters=block_args.output_filters, stride=1)
            for _ in range(block_args.num_repeat - 1):
                self._blocks.append(MBConvBlock(block_args, self._global_params))

        self._conv_head = Conv2dDynamicSamePadding(16, 32, kernel_size=1, bias=False)
        self._bn1 = nn.BatchNorm2d(num_features=32, momentum=bn_mom, eps=bn_eps)
        self._avg_pooling = nn.AdaptiveAvgPool2d(1)
        self._dropout = nn.Dropout(0.2)
        self._fc = nn.Linear(32, self._global_params.num_classes)
        self._swish = nn.SiLU()

    def extract_features(self, inputs):
        x = self._swish(self._bn0(self._conv_stem(inputs)))
        for idx, block in enumerate(self._blocks):
            drop_connect_rate = self._global_params.drop_connect_rate
            if drop_connect_rate:
                drop_connect_rate *= float(idx) / len(self._blocks)  # scale drop connect_rate
            x = block(x, drop_connect_rate=drop_connect_rate)
        x = self._swish(self._bn1(self._conv_head(x)))
        return x

    def forward(self, inputs):
        x = self.extract_features(inputs)
        x = self._avg_pooling(x)
        x = x.flatten(start_dim=1)
        x = self._dropout(x)
        x = self._fc(x)
        return x


@case(inputs=lambda: _images(17), tags={"eval", "no_grad"})
class EfficientNetEval(EfficientNet):
    """17x17: the stride-2 convs' "same" padding is uneven there."""

    def __init__(self) -> None:
        super().__init__()
        self.eval()


@case(inputs=lambda: _images(16), tags={"train", "rng"})
class EfficientNetTrain(EfficientNet):
    def __init__(self) -> None:
        super().__init__()
        self.train()


# ------------------------------------------------------------------------------------------------
# DLRM (facebookresearch/dlrm's dlrm_s_pytorch.py)


class DLRM_Net(nn.Module):
    def create_mlp(self, ln, sigmoid_layer):
        layers = nn.ModuleList()
        for i in range(0, ln.size - 1 if hasattr(ln, "size") else len(ln) - 1):
            n = ln[i]
            m = ln[i + 1]
            LL = nn.Linear(int(n), int(m), bias=True)
            layers.append(LL)
            if i == sigmoid_layer:
                layers.append(nn.Sigmoid())
            else:
                layers.append(nn.ReLU())
        return torch.nn.Sequential(*layers)

    def create_emb(self, m, ln):
        emb_l = nn.ModuleList()
        for i in range(0, len(ln)):
            n = ln[i]
            EE = nn.EmbeddingBag(n, m, mode="sum", sparse=False)
            emb_l.append(EE)
        return emb_l

    def __init__(self, m_spa=8, ln_emb=(10, 20, 15), ln_bot=(6, 16, 8), ln_top=(14, 16, 1),
                 arch_interaction_op="dot", arch_interaction_itself=False, sigmoid_bot=-1, sigmoid_top=1,
                 loss_threshold=0.0, use_triu_indices=False):
        super().__init__()
        self.arch_interaction_op = arch_interaction_op
        self.arch_interaction_itself = arch_interaction_itself
        self.loss_threshold = loss_threshold
        self.use_triu_indices = use_triu_indices
        self.emb_l = self.create_emb(m_spa, ln_emb)
        self.bot_l = self.create_mlp(ln_bot, sigmoid_bot)
        self.top_l = self.create_mlp(ln_top, sigmoid_top)

    def apply_mlp(self, x, layers):
        return layers(x)

    def apply_emb(self, lS_o, lS_i, emb_l):
        ly = []
        for k, sparse_index_group_batch in enumerate(lS_i):
            sparse_offset_group_batch = lS_o[k]
            E = emb_l[k]
            V = E(sparse_index_group_batch, sparse_offset_group_batch, per_sample_weights=None)
            ly.append(V)
        return ly

    def interact_features(self, x, ly):
        if self.arch_interaction_op == "dot":
            # concatenate dense and sparse features
            (batch_size, d) = x.shape
            T = torch.cat([x] + ly, dim=1).view((batch_size, -1, d))
            # perform a dot product
            Z = torch.bmm(T, torch.transpose(T, 1, 2))
            _, ni, nj = Z.shape
            offset = 1 if self.arch_interaction_itself else 0
            if self.use_triu_indices:  # torchrec's way: Z is symmetric, its upper triangle will do
                li, lj = torch.triu_indices(ni, nj, offset=1 - offset, device=Z.device)
            else:
                li = torch.tensor([i for i in range(ni) for j in range(i + offset)])
                lj = torch.tensor([j for i in range(nj) for j in range(i + offset)])
            Zflat = Z[:, li, lj]
            # concatenate dense features and interactions
            R = torch.cat([x] + [Zflat], dim=1)
        elif self.arch_interaction_op == "cat":
            R = torch.cat([x] + ly, dim=1)
        else:
            raise ValueError(f"arch_interaction_op={self.arch_interaction_op} is not supported")
        return R

    def forward(self, dense_x, lS_o, lS_i):
        x = self.apply_mlp(dense_x, self.bot_l)
        ly = self.apply_emb(lS_o, lS_i, self.emb_l)
        z = self.interact_features(x, ly)
        p = self.apply_mlp(z, self.top_l)
        if 0.0 < self.loss_threshold and self.loss_threshold < 1.0:
            z = torch.clamp(p, min=self.loss_threshold, max=(1.0 - self.loss_threshold))
        else:
            z = p
        return z


def _dlrm_batch() -> tuple:
    """4 samples: dense features, and per sparse feature the flat indices and each bag's offset."""
    dense = torch.rand(4, 6)
    offsets, indices = [], []
    for rows, bag_sizes in ((10, [1, 2, 1, 3]), (20, [2, 2, 1, 1]), (15, [1, 1, 1, 1])):
        offsets.append(torch.tensor([0] + list(torch.tensor(bag_sizes).cumsum(0)[:-1].tolist())))
        indices.append(torch.randint(0, rows, (sum(bag_sizes),)))
    return dense, offsets, indices


@case(inputs=_dlrm_batch, tags={"eval", "no_grad"})
class DLRMEval(DLRM_Net):
    def __init__(self) -> None:
        super().__init__()
        self.eval()


@case(inputs=_dlrm_batch, tags={"train"})
class DLRMTrainTriu(DLRM_Net):
    """torchrec-style index tensors and a clamped output (``loss_threshold``)."""

    def __init__(self) -> None:
        super().__init__(use_triu_indices=True, loss_threshold=0.01)
        self.train()


# ------------------------------------------------------------------------------------------------
# torch's own nn.TransformerEncoder (its eval fast path checks, its training path)


class TorchTransformerEncoder(nn.Module):
    def __init__(self, d_model=32, nhead=4, norm_first=False, activation="relu", num_layers=2):
        super().__init__()
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=64, dropout=0.1, activation=activation,
                                           batch_first=True, norm_first=norm_first)
        self.encoder = nn.TransformerEncoder(layer, num_layers=num_layers, enable_nested_tensor=False)
        self.embed = nn.Embedding(50, d_model)

    def forward(self, tokens, padding_mask=None):
        x = self.embed(tokens) * math.sqrt(self.embed.embedding_dim)
        return self.encoder(x, src_key_padding_mask=padding_mask)


def _padded_tokens() -> tuple:
    return torch.randint(1, 50, (2, 7)), torch.tensor([[False] * 7, [False] * 5 + [True] * 2])


@case(inputs=_padded_tokens, tags={"eval", "no_grad"})
class TorchTransformerEncoderEval(TorchTransformerEncoder):
    def __init__(self) -> None:
        super().__init__()
        self.eval()


@case(inputs=_padded_tokens, tags={"train", "rng"})
class TorchTransformerEncoderTrain(TorchTransformerEncoder):
    """Pre-norm with GELU (``activation="gelu"``, a string turned into ``F.gelu`` at init)."""

    def __init__(self) -> None:
        super().__init__(norm_first=True, activation="gelu")
        self.train()


# ------------------------------------------------------------------------------------------------
# A diffusion UNet's blocks (openai/guided-diffusion): timestep embedding, GroupNorm32, ResBlock


def timestep_embedding(timesteps, dim, max_period=10000):
    half = dim // 2
    freqs = torch.exp(
        -math.log(max_period) * torch.arange(start=0, end=half, dtype=torch.float32) / half
    ).to(device=timesteps.device)
    args = timesteps[:, None].float() * freqs[None]
    embedding = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
    if dim % 2:
        embedding = torch.cat([embedding, torch.zeros_like(embedding[:, :1])], dim=-1)
    return embedding


class GroupNorm32(nn.GroupNorm):
    def forward(self, x):
        return super().forward(x.float()).type(x.dtype)


def normalization(channels):
    return GroupNorm32(4, channels)


def checkpoint(func, inputs, params, flag):
    if flag:
        raise NotImplementedError("gradient checkpointing is not part of this corpus")
    else:
        return func(*inputs)


class TimestepBlock(nn.Module):
    """Any module where forward() takes timestep embeddings as a second argument."""

    def forward(self, x, emb):
        raise NotImplementedError


class TimestepEmbedSequential(nn.Sequential, TimestepBlock):
    def forward(self, x, emb):
        for layer in self:
            if isinstance(layer, TimestepBlock):
                x = layer(x, emb)
            else:
                x = layer(x)
        return x


class Upsample(nn.Module):
    def __init__(self, channels, use_conv, out_channels=None):
        super().__init__()
        self.channels = channels
        self.out_channels = out_channels or channels
        self.use_conv = use_conv
        if use_conv:
            self.conv = nn.Conv2d(self.channels, self.out_channels, 3, padding=1)

    def forward(self, x):
        assert x.shape[1] == self.channels
        x = F.interpolate(x, scale_factor=2, mode="nearest")
        if self.use_conv:
            x = self.conv(x)
        return x


class Downsample(nn.Module):
    def __init__(self, channels, use_conv, out_channels=None):
        super().__init__()
        self.channels = channels
        self.out_channels = out_channels or channels
        if use_conv:
            self.op = nn.Conv2d(self.channels, self.out_channels, 3, stride=2, padding=1)
        else:
            assert self.channels == self.out_channels
            self.op = nn.AvgPool2d(kernel_size=2, stride=2)

    def forward(self, x):
        assert x.shape[1] == self.channels
        return self.op(x)


class ResBlock(TimestepBlock):
    def __init__(self, channels, emb_channels, dropout, out_channels=None, use_conv=False,
                 use_scale_shift_norm=False, use_checkpoint=False, up=False, down=False):
        super().__init__()
        self.channels = channels
        self.emb_channels = emb_channels
        self.dropout = dropout
        self.out_channels = out_channels or channels
        self.use_conv = use_conv
        self.use_checkpoint = use_checkpoint
        self.use_scale_shift_norm = use_scale_shift_norm

        self.in_layers = nn.Sequential(
            normalization(channels),
            nn.SiLU(),
            nn.Conv2d(channels, self.out_channels, 3, padding=1),
        )
        self.updown = up or down
        if up:
            self.h_upd = Upsample(channels, False)
            self.x_upd = Upsample(channels, False)
        elif down:
            self.h_upd = Downsample(channels, False)
            self.x_upd = Downsample(channels, False)
        else:
            self.h_upd = self.x_upd = nn.Identity()

        self.emb_layers = nn.Sequential(
            nn.SiLU(),
            nn.Linear(emb_channels, 2 * self.out_channels if use_scale_shift_norm else self.out_channels),
        )
        self.out_layers = nn.Sequential(
            normalization(self.out_channels),
            nn.SiLU(),
            nn.Dropout(p=dropout),
            nn.Conv2d(self.out_channels, self.out_channels, 3, padding=1),  # zero_module(...) upstream
        )
        if self.out_channels == channels:
            self.skip_connection = nn.Identity()
        elif use_conv:
            self.skip_connection = nn.Conv2d(channels, self.out_channels, 3, padding=1)
        else:
            self.skip_connection = nn.Conv2d(channels, self.out_channels, 1)

    def forward(self, x, emb):
        return checkpoint(self._forward, (x, emb), self.parameters(), self.use_checkpoint)

    def _forward(self, x, emb):
        if self.updown:
            in_rest, in_conv = self.in_layers[:-1], self.in_layers[-1]
            h = in_rest(x)
            h = self.h_upd(h)
            x = self.x_upd(x)
            h = in_conv(h)
        else:
            h = self.in_layers(x)
        emb_out = self.emb_layers(emb).type(h.dtype)
        while len(emb_out.shape) < len(h.shape):
            emb_out = emb_out[..., None]
        if self.use_scale_shift_norm:
            out_norm, out_rest = self.out_layers[0], self.out_layers[1:]
            scale, shift = torch.chunk(emb_out, 2, dim=1)
            h = out_norm(h) * (1 + scale) + shift
            h = out_rest(h)
        else:
            h = h + emb_out
            h = self.out_layers(h)
        return self.skip_connection(x) + h


class QKVAttentionLegacy(nn.Module):
    def __init__(self, n_heads):
        super().__init__()
        self.n_heads = n_heads

    def forward(self, qkv):
        bs, width, length = qkv.shape
        assert width % (3 * self.n_heads) == 0
        ch = width // (3 * self.n_heads)
        q, k, v = qkv.reshape(bs * self.n_heads, ch * 3, length).split(ch, dim=1)
        scale = 1 / math.sqrt(math.sqrt(ch))
        weight = torch.einsum("bct,bcs->bts", q * scale, k * scale)  # More stable with f16 than dividing afterwards
        weight = torch.softmax(weight.float(), dim=-1).type(weight.dtype)
        a = torch.einsum("bts,bcs->bct", weight, v)
        return a.reshape(bs, -1, length)


class AttentionBlock(nn.Module):
    def __init__(self, channels, num_heads=1, num_head_channels=-1, use_checkpoint=False):
        super().__init__()
        self.channels = channels
        if num_head_channels == -1:
            self.num_heads = num_heads
        else:
            assert channels % num_head_channels == 0
            self.num_heads = channels // num_head_channels
        self.use_checkpoint = use_checkpoint
        self.norm = normalization(channels)
        self.qkv = nn.Conv1d(channels, channels * 3, 1)
        self.attention = QKVAttentionLegacy(self.num_heads)
        self.proj_out = nn.Conv1d(channels, channels, 1)  # zero_module(...) upstream

    def forward(self, x):
        return checkpoint(self._forward, (x,), self.parameters(), True) if self.use_checkpoint else self._forward(x)

    def _forward(self, x):
        b, c, *spatial = x.shape
        x = x.reshape(b, c, -1)
        qkv = self.qkv(self.norm(x))
        h = self.attention(qkv)
        h = self.proj_out(h)
        return (x + h).reshape(b, c, *spatial)


class TinyDiffusionUNet(nn.Module):
    def __init__(self, in_channels=3, model_channels=8, dropout=0.1, use_scale_shift_norm=True):
        super().__init__()
        self.model_channels = model_channels
        time_embed_dim = model_channels * 4
        self.time_embed = nn.Sequential(
            nn.Linear(model_channels, time_embed_dim), nn.SiLU(), nn.Linear(time_embed_dim, time_embed_dim))
        ch = model_channels
        self.input_blocks = nn.ModuleList([TimestepEmbedSequential(nn.Conv2d(in_channels, ch, 3, padding=1))])
        input_block_chans = [ch]
        for level, mult in enumerate((1, 2)):
            layers = [ResBlock(ch, time_embed_dim, dropout, out_channels=mult * model_channels,
                               use_scale_shift_norm=use_scale_shift_norm)]
            ch = mult * model_channels
            if level == 1:
                layers.append(AttentionBlock(ch, num_head_channels=4))
            self.input_blocks.append(TimestepEmbedSequential(*layers))
            input_block_chans.append(ch)
            if level == 0:
                self.input_blocks.append(TimestepEmbedSequential(
                    ResBlock(ch, time_embed_dim, dropout, use_scale_shift_norm=use_scale_shift_norm, down=True)))
                input_block_chans.append(ch)
        self.middle_block = TimestepEmbedSequential(
            ResBlock(ch, time_embed_dim, dropout, use_scale_shift_norm=use_scale_shift_norm),
            AttentionBlock(ch, num_heads=2),
            ResBlock(ch, time_embed_dim, dropout, use_scale_shift_norm=use_scale_shift_norm),
        )
        self.output_blocks = nn.ModuleList([])
        for level, mult in list(enumerate((1, 2)))[::-1]:
            for i in range(2):
                ich = input_block_chans.pop()
                layers = [ResBlock(ch + ich, time_embed_dim, dropout, out_channels=model_channels * mult,
                                   use_scale_shift_norm=use_scale_shift_norm)]
                ch = model_channels * mult
                if level and i == 1:
                    layers.append(ResBlock(ch, time_embed_dim, dropout, use_scale_shift_norm=use_scale_shift_norm,
                                           up=True))
                self.output_blocks.append(TimestepEmbedSequential(*layers))
        self.out = nn.Sequential(normalization(ch), nn.SiLU(), nn.Conv2d(ch, in_channels, 3, padding=1))

    def forward(self, x, timesteps, y=None):
        hs = []
        emb = self.time_embed(timestep_embedding(timesteps, self.model_channels))
        h = x.type(torch.float32)
        for module in self.input_blocks:
            h = module(h, emb)
            hs.append(h)
        h = self.middle_block(h, emb)
        for module in self.output_blocks:
            h = torch.cat([h, hs.pop()], dim=1)
            h = module(h, emb)
        h = h.type(x.dtype)
        return self.out(h)


def _noisy_images() -> tuple:
    return torch.randn(2, 3, 8, 8), torch.tensor([10, 500])


@case(inputs=_noisy_images, tags={"eval", "no_grad"})
class DiffusionUNetEval(TinyDiffusionUNet):
    def __init__(self) -> None:
        super().__init__()
        self.eval()


@case(inputs=_noisy_images, tags={"train", "rng"})
class DiffusionUNetTrain(TinyDiffusionUNet):
    """Without scale-shift norm: the embedding is added after the ``while`` that unsqueezes it."""

    def __init__(self) -> None:
        super().__init__(use_scale_shift_norm=False)
        self.train()


# ------------------------------------------------------------------------------------------------
# Whisper's text decoder (openai/whisper): a kv-cache dict keyed by modules, filled by forward hooks


class WhisperLayerNorm(nn.LayerNorm):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.float()).type(x.dtype)


class WhisperLinear(nn.Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight.to(x.dtype), None if self.bias is None else self.bias.to(x.dtype))


SDPA_AVAILABLE = hasattr(F, "scaled_dot_product_attention")


class WhisperMultiHeadAttention(nn.Module):
    use_sdpa = False

    def __init__(self, n_state: int, n_head: int):
        super().__init__()
        self.n_head = n_head
        self.query = WhisperLinear(n_state, n_state)
        self.key = WhisperLinear(n_state, n_state, bias=False)
        self.value = WhisperLinear(n_state, n_state)
        self.out = WhisperLinear(n_state, n_state)

    def forward(self, x, xa=None, mask=None, kv_cache=None):
        q = self.query(x)

        if kv_cache is None or xa is None or self.key not in kv_cache:
            # hooks, if installed (i.e. kv_cache is not None), will prepend the cached kv tensors;
            # otherwise, perform key/value projections for self- or cross-attention as usual.
            k = self.key(x if xa is None else xa)
            v = self.value(x if xa is None else xa)
        else:
            # for cross-attention, calculate keys and values once and reuse in subsequent calls.
            k = kv_cache[self.key]
            v = kv_cache[self.value]

        wv, qk = self.qkv_attention(q, k, v, mask)
        return self.out(wv), qk

    def qkv_attention(self, q, k, v, mask=None):
        n_batch, n_ctx, n_state = q.shape
        scale = (n_state // self.n_head) ** -0.25
        q = q.view(*q.shape[:2], self.n_head, -1).permute(0, 2, 1, 3)
        k = k.view(*k.shape[:2], self.n_head, -1).permute(0, 2, 1, 3)
        v = v.view(*v.shape[:2], self.n_head, -1).permute(0, 2, 1, 3)

        if SDPA_AVAILABLE and WhisperMultiHeadAttention.use_sdpa:
            a = F.scaled_dot_product_attention(q, k, v, is_causal=mask is not None and n_ctx > 1)
            out = a.permute(0, 2, 1, 3).flatten(start_dim=2)
            qk = None
        else:
            qk = (q * scale) @ (k * scale).transpose(-1, -2)
            if mask is not None:
                qk = qk + mask[:n_ctx, :n_ctx]
            qk = qk.float()

            w = F.softmax(qk, dim=-1).to(q.dtype)
            out = (w @ v).permute(0, 2, 1, 3).flatten(start_dim=2)
            qk = qk.detach()

        return out, qk


class WhisperResidualAttentionBlock(nn.Module):
    def __init__(self, n_state: int, n_head: int, cross_attention: bool = False):
        super().__init__()
        self.attn = WhisperMultiHeadAttention(n_state, n_head)
        self.attn_ln = WhisperLayerNorm(n_state)
        self.cross_attn = WhisperMultiHeadAttention(n_state, n_head) if cross_attention else None
        self.cross_attn_ln = WhisperLayerNorm(n_state) if cross_attention else None
        n_mlp = n_state * 4
        self.mlp = nn.Sequential(WhisperLinear(n_state, n_mlp), nn.GELU(), WhisperLinear(n_mlp, n_state))
        self.mlp_ln = WhisperLayerNorm(n_state)

    def forward(self, x, xa=None, mask=None, kv_cache=None):
        x = x + self.attn(self.attn_ln(x), mask=mask, kv_cache=kv_cache)[0]
        if self.cross_attn:
            x = x + self.cross_attn(self.cross_attn_ln(x), xa, kv_cache=kv_cache)[0]
        x = x + self.mlp(self.mlp_ln(x))
        return x


class WhisperTextDecoder(nn.Module):
    def __init__(self, n_vocab=40, n_ctx=16, n_state=32, n_head=4, n_layer=2):
        super().__init__()
        self.token_embedding = nn.Embedding(n_vocab, n_state)
        self.positional_embedding = nn.Parameter(torch.empty(n_ctx, n_state).normal_(std=0.1))
        self.blocks = nn.ModuleList(
            [WhisperResidualAttentionBlock(n_state, n_head, cross_attention=True) for _ in range(n_layer)])
        self.ln = WhisperLayerNorm(n_state)
        mask = torch.empty(n_ctx, n_ctx).fill_(-float("inf")).triu_(1)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x, xa, kv_cache=None):
        offset = next(iter(kv_cache.values())).shape[1] if kv_cache else 0
        x = self.token_embedding(x) + self.positional_embedding[offset: offset + x.shape[-1]]
        x = x.to(xa.dtype)
        for block in self.blocks:
            x = block(x, xa, mask=self.mask, kv_cache=kv_cache)
        x = self.ln(x)
        logits = (x @ torch.transpose(self.token_embedding.weight.to(x.dtype), 0, 1)).float()
        return logits


class WhisperGreedyDecoder(nn.Module):
    """Whisper's decoding loop, cut to its core: hooks fill the kv cache on the prompt, then each step
    feeds the last token only; the cache is emptied when decoding ends (cleanup_caching)."""

    n_text_ctx = 16

    def __init__(self, steps=3):
        super().__init__()
        self.decoder = WhisperTextDecoder(n_ctx=self.n_text_ctx)
        self.steps = steps
        self.kv_cache, self.hooks = self.install_kv_cache_hooks()
        self.eval()

    def install_kv_cache_hooks(self, cache=None):
        cache = {**cache} if cache is not None else {}
        hooks = []

        def save_to_cache(module, _, output):
            if module not in cache or output.shape[1] > self.n_text_ctx:
                # save as-is, for the first token or cross attention
                cache[module] = output
            else:
                cache[module] = torch.cat([cache[module], output], dim=1).detach()
            return cache[module]

        def install_hooks(layer: nn.Module):
            if isinstance(layer, WhisperMultiHeadAttention):
                hooks.append(layer.key.register_forward_hook(save_to_cache))
                hooks.append(layer.value.register_forward_hook(save_to_cache))

        self.decoder.apply(install_hooks)
        return cache, hooks

    def forward(self, tokens, audio_features):
        initial_token_length = tokens.shape[-1]
        sum_logprobs = torch.zeros(tokens.shape[0])
        for i in range(self.steps):
            step_tokens = tokens[:, -1:] if tokens.shape[-1] > initial_token_length else tokens
            logits = self.decoder(step_tokens, audio_features, kv_cache=self.kv_cache)
            logits = logits[:, -1]
            logprobs = F.log_softmax(logits.float(), dim=-1)
            next_tokens = logits.argmax(dim=-1)
            current_logprobs = logprobs[torch.arange(logprobs.shape[0]), next_tokens]
            sum_logprobs += current_logprobs
            tokens = torch.cat([tokens, next_tokens[:, None]], dim=-1)
        cached = len(self.kv_cache)
        self.kv_cache.clear()
        return tokens, sum_logprobs, cached


@case(inputs=lambda: (torch.randint(0, 40, (2, 3)), torch.randn(2, 10, 32)), tags={"eval", "no_grad"})
class WhisperDecodeEval(WhisperGreedyDecoder):
    pass


# ------------------------------------------------------------------------------------------------
# T5 (Hugging Face transformers): relative position buckets, T5LayerNorm, position_bias passed on


class T5Config:
    vocab_size = 40
    d_model = 32
    d_kv = 8
    d_ff = 64
    num_layers = 2
    num_heads = 4
    relative_attention_num_buckets = 8
    relative_attention_max_distance = 20
    dropout_rate = 0.1
    layer_norm_epsilon = 1e-6
    is_decoder = False


class T5LayerNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        variance = hidden_states.to(torch.float32).pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        # convert into half-precision if necessary
        if self.weight.dtype in [torch.float16, torch.bfloat16]:
            hidden_states = hidden_states.to(self.weight.dtype)
        return self.weight * hidden_states


class T5DenseActDense(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.wi = nn.Linear(config.d_model, config.d_ff, bias=False)
        self.wo = nn.Linear(config.d_ff, config.d_model, bias=False)
        self.dropout = nn.Dropout(config.dropout_rate)
        self.act = nn.ReLU()

    def forward(self, hidden_states):
        hidden_states = self.wi(hidden_states)
        hidden_states = self.act(hidden_states)
        hidden_states = self.dropout(hidden_states)
        if (
            isinstance(self.wo.weight, torch.Tensor)
            and hidden_states.dtype != self.wo.weight.dtype
            and self.wo.weight.dtype != torch.int8
        ):
            hidden_states = hidden_states.to(self.wo.weight.dtype)
        hidden_states = self.wo(hidden_states)
        return hidden_states


class T5Attention(nn.Module):
    def __init__(self, config, has_relative_attention_bias=False):
        super().__init__()
        self.is_decoder = config.is_decoder
        self.has_relative_attention_bias = has_relative_attention_bias
        self.relative_attention_num_buckets = config.relative_attention_num_buckets
        self.relative_attention_max_distance = config.relative_attention_max_distance
        self.d_model = config.d_model
        self.key_value_proj_dim = config.d_kv
        self.n_heads = config.num_heads
        self.dropout = config.dropout_rate
        self.inner_dim = self.n_heads * self.key_value_proj_dim
        self.q = nn.Linear(self.d_model, self.inner_dim, bias=False)
        self.k = nn.Linear(self.d_model, self.inner_dim, bias=False)
        self.v = nn.Linear(self.d_model, self.inner_dim, bias=False)
        self.o = nn.Linear(self.inner_dim, self.d_model, bias=False)
        if self.has_relative_attention_bias:
            self.relative_attention_bias = nn.Embedding(self.relative_attention_num_buckets, self.n_heads)
        self.gradient_checkpointing = False

    @staticmethod
    def _relative_position_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
        relative_buckets = 0
        if bidirectional:
            num_buckets //= 2
            relative_buckets += (relative_position > 0).to(torch.long) * num_buckets
            relative_position = torch.abs(relative_position)
        else:
            relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
        # now relative_position is in the range [0, inf)

        # half of the buckets are for exact increments in positions
        max_exact = num_buckets // 2
        is_small = relative_position < max_exact

        # The other half of the buckets are for logarithmically bigger bins in positions up to max_distance
        relative_position_if_large = max_exact + (
            torch.log(relative_position.float() / max_exact)
            / math.log(max_distance / max_exact)
            * (num_buckets - max_exact)
        ).to(torch.long)
        relative_position_if_large = torch.min(
            relative_position_if_large, torch.full_like(relative_position_if_large, num_buckets - 1)
        )

        relative_buckets += torch.where(is_small, relative_position, relative_position_if_large)
        return relative_buckets

    def compute_bias(self, query_length, key_length, device=None):
        """Compute binned relative position bias"""
        if device is None:
            device = self.relative_attention_bias.weight.device
        context_position = torch.arange(query_length, dtype=torch.long, device=device)[:, None]
        memory_position = torch.arange(key_length, dtype=torch.long, device=device)[None, :]
        relative_position = memory_position - context_position  # shape (query_length, key_length)
        relative_position_bucket = self._relative_position_bucket(
            relative_position,  # shape (query_length, key_length)
            bidirectional=(not self.is_decoder),
            num_buckets=self.relative_attention_num_buckets,
            max_distance=self.relative_attention_max_distance,
        )
        values = self.relative_attention_bias(relative_position_bucket)  # shape (query_length, key_length, num_heads)
        values = values.permute([2, 0, 1]).unsqueeze(0)  # shape (1, num_heads, query_length, key_length)
        return values

    def forward(self, hidden_states, mask=None, position_bias=None, output_attentions=False):
        batch_size, seq_length = hidden_states.shape[:2]
        real_seq_length = seq_length
        key_length = real_seq_length

        def shape(states):
            """projection"""
            return states.view(batch_size, -1, self.n_heads, self.key_value_proj_dim).transpose(1, 2)

        def unshape(states):
            """reshape"""
            return states.transpose(1, 2).contiguous().view(batch_size, -1, self.inner_dim)

        query_states = shape(self.q(hidden_states))
        key_states = shape(self.k(hidden_states))
        value_states = shape(self.v(hidden_states))

        scores = torch.matmul(query_states, key_states.transpose(3, 2))

        if position_bias is None:
            if not self.has_relative_attention_bias:
                position_bias = torch.zeros(
                    (1, self.n_heads, real_seq_length, key_length), device=scores.device, dtype=scores.dtype)
                if self.gradient_checkpointing and self.training:
                    position_bias.requires_grad = True
            else:
                position_bias = self.compute_bias(real_seq_length, key_length, device=scores.device)
            if mask is not None:
                position_bias = position_bias + mask  # (batch_size, n_heads, seq_length, key_length)

        position_bias_masked = position_bias
        scores += position_bias_masked
        attn_weights = nn.functional.softmax(scores.float(), dim=-1).type_as(scores)
        attn_weights = nn.functional.dropout(attn_weights, p=self.dropout, training=self.training)
        attn_output = unshape(torch.matmul(attn_weights, value_states))
        attn_output = self.o(attn_output)

        outputs = (attn_output,) + (None,) + (position_bias,)
        if output_attentions:
            outputs = outputs + (attn_weights,)
        return outputs


class T5Block(nn.Module):
    def __init__(self, config, has_relative_attention_bias=False):
        super().__init__()
        self.SelfAttention = T5Attention(config, has_relative_attention_bias=has_relative_attention_bias)
        self.attn_norm = T5LayerNorm(config.d_model, eps=config.layer_norm_epsilon)
        self.ff = T5DenseActDense(config)
        self.ff_norm = T5LayerNorm(config.d_model, eps=config.layer_norm_epsilon)
        self.dropout = nn.Dropout(config.dropout_rate)

    def forward(self, hidden_states, attention_mask=None, position_bias=None):
        normed = self.attn_norm(hidden_states)
        attention_output = self.SelfAttention(normed, mask=attention_mask, position_bias=position_bias)
        hidden_states = hidden_states + self.dropout(attention_output[0])
        attention_outputs = attention_output[1:]  # Keep self-attention outputs and relative position weights

        # clamp inf values to enable fp16 training
        if hidden_states.dtype == torch.float16:
            clamp_value = torch.where(
                torch.isinf(hidden_states).any(),
                torch.finfo(hidden_states.dtype).max - 1000,
                torch.finfo(hidden_states.dtype).max,
            )
            hidden_states = torch.clamp(hidden_states, min=-clamp_value, max=clamp_value)

        hidden_states = hidden_states + self.dropout(self.ff(self.ff_norm(hidden_states)))
        return (hidden_states,) + attention_outputs


class T5EncoderModel(nn.Module):
    def __init__(self, config=T5Config):
        super().__init__()
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.d_model)
        self.block = nn.ModuleList([T5Block(config, has_relative_attention_bias=bool(i == 0))
                                    for i in range(config.num_layers)])
        self.final_layer_norm = T5LayerNorm(config.d_model, eps=config.layer_norm_epsilon)
        self.dropout = nn.Dropout(config.dropout_rate)

    def get_extended_attention_mask(self, attention_mask, input_shape, dtype=None):
        if dtype is None:
            dtype = self.embed_tokens.weight.dtype
        if attention_mask.dim() == 3:
            extended_attention_mask = attention_mask[:, None, :, :]
        elif attention_mask.dim() == 2:
            extended_attention_mask = attention_mask[:, None, None, :]
        else:
            raise ValueError(f"Wrong shape for input_ids (shape {input_shape}) or attention_mask")
        extended_attention_mask = extended_attention_mask.to(dtype=dtype)  # fp16 compatibility
        extended_attention_mask = (1.0 - extended_attention_mask) * torch.finfo(dtype).min
        return extended_attention_mask

    def forward(self, input_ids, attention_mask=None, output_hidden_states=False):
        input_shape = input_ids.size()
        input_ids = input_ids.view(-1, input_shape[-1])
        inputs_embeds = self.embed_tokens(input_ids)
        batch_size, seq_length = input_shape
        if attention_mask is None:
            attention_mask = torch.ones(batch_size, seq_length, device=inputs_embeds.device)
        extended_attention_mask = self.get_extended_attention_mask(attention_mask, input_shape)

        all_hidden_states = () if output_hidden_states else None
        position_bias = None
        hidden_states = self.dropout(inputs_embeds)
        for i, layer_module in enumerate(self.block):
            if output_hidden_states:
                all_hidden_states = all_hidden_states + (hidden_states,)
            layer_outputs = layer_module(hidden_states, attention_mask=extended_attention_mask,
                                         position_bias=position_bias)
            hidden_states = layer_outputs[0]
            # We share the position biases between the layers - the first layer store them
            position_bias = layer_outputs[2]

        hidden_states = self.final_layer_norm(hidden_states)
        hidden_states = self.dropout(hidden_states)
        if output_hidden_states:
            all_hidden_states = all_hidden_states + (hidden_states,)
        return tuple(v for v in [hidden_states, all_hidden_states] if v is not None)


@case(inputs=lambda: (torch.randint(0, 40, (2, 9)), torch.tensor([[1] * 9, [1] * 6 + [0] * 3])),
      tags={"eval", "no_grad"})
class T5EncoderEval(T5EncoderModel):
    def __init__(self) -> None:
        super().__init__()
        self.eval()


@case(inputs=lambda: Inputs((torch.randint(0, 40, (2, 9)),), {"output_hidden_states": True}), tags={"train", "rng"})
class T5EncoderTrain(T5EncoderModel):
    def __init__(self) -> None:
        super().__init__()
        self.train()


# ------------------------------------------------------------------------------------------------
# YOLOv5's Detect head (ultralytics/yolov5 models/yolo.py): the input list rewritten in place,
# grids cached in list attributes and rebuilt with torch.meshgrid


class Detect(nn.Module):
    stride = None  # strides computed during build
    dynamic = False  # force grid reconstruction
    export = False  # export mode

    def __init__(self, nc=3, anchors=((10, 13, 16, 30), (30, 61, 62, 45)), ch=(8, 16), inplace=True):
        super().__init__()
        self.nc = nc  # number of classes
        self.no = nc + 5  # number of outputs per anchor
        self.nl = len(anchors)  # number of detection layers
        self.na = len(anchors[0]) // 2  # number of anchors
        self.grid = [torch.empty(0) for _ in range(self.nl)]  # init grid
        self.anchor_grid = [torch.empty(0) for _ in range(self.nl)]  # init anchor grid
        self.register_buffer("anchors", torch.tensor(anchors).float().view(self.nl, -1, 2))  # shape(nl,na,2)
        self.m = nn.ModuleList(nn.Conv2d(x, self.no * self.na, 1) for x in ch)  # output conv
        self.inplace = inplace  # use inplace ops (e.g. slice assignment)

    def forward(self, x):
        z = []  # inference output
        for i in range(self.nl):
            x[i] = self.m[i](x[i])  # conv
            bs, _, ny, nx = x[i].shape  # x(bs,255,20,20) to x(bs,3,20,20,85)
            x[i] = x[i].view(bs, self.na, self.no, ny, nx).permute(0, 1, 3, 4, 2).contiguous()

            if not self.training:  # inference
                if self.dynamic or self.grid[i].shape[2:4] != x[i].shape[2:4]:
                    self.grid[i], self.anchor_grid[i] = self._make_grid(nx, ny, i)

                xy, wh, conf = x[i].sigmoid().split((2, 2, self.nc + 1), 4)
                xy = (xy * 2 + self.grid[i]) * self.stride[i]  # xy
                wh = (wh * 2) ** 2 * self.anchor_grid[i]  # wh
                y = torch.cat((xy, wh, conf), 4)
                z.append(y.view(bs, self.na * nx * ny, self.no))

        return x if self.training else (torch.cat(z, 1),) if self.export else (torch.cat(z, 1), x)

    def _make_grid(self, nx=20, ny=20, i=0):
        d = self.anchors[i].device
        t = self.anchors[i].dtype
        shape = 1, self.na, ny, nx, 2  # grid shape
        y, x = torch.arange(ny, device=d, dtype=t), torch.arange(nx, device=d, dtype=t)
        yv, xv = torch.meshgrid(y, x, indexing="ij")
        grid = torch.stack((xv, yv), 2).expand(shape) - 0.5  # add grid offset, i.e. y = 2.0 * x - 0.5
        anchor_grid = (self.anchors[i] * self.stride[i]).view((1, self.na, 1, 1, 2)).expand(shape)
        return grid, anchor_grid


class TinyYOLO(nn.Module):
    def __init__(self, dynamic=False):
        super().__init__()
        self.backbone = nn.ModuleList([
            nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.SiLU()),
            nn.Sequential(nn.Conv2d(8, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.SiLU()),
        ])
        self.detect = Detect()
        self.detect.dynamic = dynamic
        self.detect.stride = torch.tensor([2.0, 4.0])

    def forward(self, x):
        features = []
        for stage in self.backbone:
            x = stage(x)
            features.append(x)
        return self.detect(features)


@case(inputs=_images, tags={"eval", "no_grad"})
class YOLODetectEval(TinyYOLO):
    """Warmed up as YOLOv5's ``DetectMultiBackend.warmup`` does (one eager call), so the head's
    cached grids are read from its list attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.eval()
        with torch.no_grad():
            self(torch.zeros(1, 3, 16, 16))


@case(inputs=_images, tags={"eval", "no_grad"})
class YOLODetectDynamicEval(TinyYOLO):
    """Grids rebuilt on every call (``dynamic``) and stored in the head's list attributes: the
    items replaced are never read, so their old values are not guarded."""

    def __init__(self) -> None:
        super().__init__(dynamic=True)
        self.eval()


@case(inputs=_images, tags={"train"})
class YOLODetectTrain(TinyYOLO):
    """Training returns the feature list the head rewrote in place."""

    def __init__(self) -> None:
        super().__init__()
        self.train()


# ------------------------------------------------------------------------------------------------
# wav2vec2 (Hugging Face transformers): a conv feature encoder, a weight-normed positional conv
# (torch.nn.utils.parametrizations.weight_norm: a parametrized `weight` property), SamePad


class Wav2Vec2GroupNormConvLayer(nn.Module):
    def __init__(self, in_dim, out_dim, kernel, stride, first=False):
        super().__init__()
        self.conv = nn.Conv1d(in_dim, out_dim, kernel_size=kernel, stride=stride, bias=False)
        self.activation = nn.GELU()
        self.layer_norm = nn.GroupNorm(num_groups=out_dim, num_channels=out_dim, affine=True) if first else None

    def forward(self, hidden_states):
        hidden_states = self.conv(hidden_states)
        if self.layer_norm is not None:
            hidden_states = self.layer_norm(hidden_states)
        hidden_states = self.activation(hidden_states)
        return hidden_states


class Wav2Vec2SamePadLayer(nn.Module):
    def __init__(self, num_conv_pos_embeddings):
        super().__init__()
        self.num_pad_remove = 1 if num_conv_pos_embeddings % 2 == 0 else 0

    def forward(self, hidden_states):
        if self.num_pad_remove > 0:
            hidden_states = hidden_states[:, :, : -self.num_pad_remove]
        return hidden_states


class Wav2Vec2PositionalConvEmbedding(nn.Module):
    def __init__(self, hidden_size=16, num_conv_pos_embeddings=8, num_conv_pos_embedding_groups=4):
        super().__init__()
        self.conv = nn.Conv1d(hidden_size, hidden_size, kernel_size=num_conv_pos_embeddings,
                              padding=num_conv_pos_embeddings // 2, groups=num_conv_pos_embedding_groups)
        weight_norm = nn.utils.weight_norm
        if hasattr(nn.utils.parametrizations, "weight_norm"):
            weight_norm = nn.utils.parametrizations.weight_norm
        self.conv = weight_norm(self.conv, name="weight", dim=2)
        self.padding = Wav2Vec2SamePadLayer(num_conv_pos_embeddings)
        self.activation = nn.GELU()

    def forward(self, hidden_states):
        hidden_states = hidden_states.transpose(1, 2)
        hidden_states = self.conv(hidden_states)
        hidden_states = self.padding(hidden_states)
        hidden_states = self.activation(hidden_states)
        hidden_states = hidden_states.transpose(1, 2)
        return hidden_states


class Wav2Vec2Style(nn.Module):
    def __init__(self, conv_dim=(8, 8, 16), conv_kernel=(10, 3, 3), conv_stride=(5, 2, 2), hidden_size=16):
        super().__init__()
        layers = [Wav2Vec2GroupNormConvLayer(1, conv_dim[0], conv_kernel[0], conv_stride[0], first=True)]
        for i in range(1, len(conv_dim)):
            layers.append(Wav2Vec2GroupNormConvLayer(conv_dim[i - 1], conv_dim[i], conv_kernel[i], conv_stride[i]))
        self.conv_layers = nn.ModuleList(layers)
        self._requires_grad = True
        self.layer_norm = nn.LayerNorm(conv_dim[-1], eps=1e-5)
        self.projection = nn.Linear(conv_dim[-1], hidden_size)
        self.dropout = nn.Dropout(0.1)
        self.pos_conv_embed = Wav2Vec2PositionalConvEmbedding(hidden_size)
        self.encoder_layer_norm = nn.LayerNorm(hidden_size, eps=1e-5)

    def forward(self, input_values):
        hidden_states = input_values[:, None]
        # make sure hidden_states require grad for gradient_checkpointing
        if self._requires_grad and self.training:
            hidden_states.requires_grad = True
        for conv_layer in self.conv_layers:
            hidden_states = conv_layer(hidden_states)
        extract_features = hidden_states.transpose(1, 2)
        norm_hidden_states = self.layer_norm(extract_features)
        hidden_states = self.projection(norm_hidden_states)
        hidden_states = self.dropout(hidden_states)
        position_embeddings = self.pos_conv_embed(hidden_states)
        hidden_states = hidden_states + position_embeddings
        hidden_states = self.encoder_layer_norm(hidden_states)
        return hidden_states, extract_features


@case(inputs=lambda: torch.randn(2, 160), tags={"eval", "no_grad"})
class Wav2Vec2Eval(Wav2Vec2Style):
    def __init__(self) -> None:
        super().__init__()
        self.eval()


# ------------------------------------------------------------------------------------------------
# DETR (facebookresearch/detr): NestedTensor, a user class holding tensors and a mask, and the
# sine position embedding (cumsum of the mask, interleaved sin/cos)


class NestedTensor(object):
    def __init__(self, tensors, mask):
        self.tensors = tensors
        self.mask = mask

    def decompose(self):
        return self.tensors, self.mask

    def __repr__(self):
        return str(self.tensors)


class PositionEmbeddingSine(nn.Module):
    def __init__(self, num_pos_feats=8, temperature=10000, normalize=True, scale=None):
        super().__init__()
        self.num_pos_feats = num_pos_feats
        self.temperature = temperature
        self.normalize = normalize
        if scale is not None and normalize is False:
            raise ValueError("normalize should be True if scale is passed")
        if scale is None:
            scale = 2 * math.pi
        self.scale = scale

    def forward(self, tensor_list: NestedTensor):
        x = tensor_list.tensors
        mask = tensor_list.mask
        assert mask is not None
        not_mask = ~mask
        y_embed = not_mask.cumsum(1, dtype=torch.float32)
        x_embed = not_mask.cumsum(2, dtype=torch.float32)
        if self.normalize:
            eps = 1e-6
            y_embed = y_embed / (y_embed[:, -1:, :] + eps) * self.scale
            x_embed = x_embed / (x_embed[:, :, -1:] + eps) * self.scale

        dim_t = torch.arange(self.num_pos_feats, dtype=torch.float32, device=x.device)
        dim_t = self.temperature ** (2 * (dim_t // 2) / self.num_pos_feats)

        pos_x = x_embed[:, :, :, None] / dim_t
        pos_y = y_embed[:, :, :, None] / dim_t
        pos_x = torch.stack((pos_x[:, :, :, 0::2].sin(), pos_x[:, :, :, 1::2].cos()), dim=4).flatten(3)
        pos_y = torch.stack((pos_y[:, :, :, 0::2].sin(), pos_y[:, :, :, 1::2].cos()), dim=4).flatten(3)
        pos = torch.cat((pos_y, pos_x), dim=3).permute(0, 3, 1, 2)
        return pos


class DETRBackboneJoiner(nn.Module):
    """DETR's Backbone + Joiner: features of a NestedTensor, its mask resized to each of them."""

    def __init__(self):
        super().__init__()
        self.body = nn.ModuleDict({
            "layer1": nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.ReLU()),
            "layer2": nn.Sequential(nn.Conv2d(8, 16, 3, 2, 1), nn.ReLU()),
        })
        self.position_embedding = PositionEmbeddingSine(num_pos_feats=8)
        self.input_proj = nn.Conv2d(16, 16, kernel_size=1)

    def backbone(self, tensor_list: NestedTensor):
        xs = {}
        x = tensor_list.tensors
        for name, layer in self.body.items():
            x = layer(x)
            xs[name] = x
        out = {}
        for name, x in xs.items():
            m = tensor_list.mask
            assert m is not None
            mask = F.interpolate(m[None].float(), size=x.shape[-2:]).to(torch.bool)[0]
            out[name] = NestedTensor(x, mask)
        return out

    def forward(self, samples, mask):
        samples = NestedTensor(samples, mask)
        xs = self.backbone(samples)
        out, pos = [], []
        for name, x in xs.items():
            out.append(x)
            pos.append(self.position_embedding(x).to(x.tensors.dtype))
        src, mask = out[-1].decompose()
        assert mask is not None
        return self.input_proj(src), mask, pos[-1], [p.shape for p in pos]


def _padded_images() -> tuple:
    mask = torch.zeros(2, 16, 16, dtype=torch.bool)
    mask[1, :, 12:] = True  # the second image is narrower: its right columns are padding
    return torch.randn(2, 3, 16, 16), mask


@case(inputs=_padded_images, tags={"eval", "no_grad"})
class DETRPositionEval(DETRBackboneJoiner):
    def __init__(self) -> None:
        super().__init__()
        self.eval()


# ------------------------------------------------------------------------------------------------
# A top-2 mixture of experts with dense dispatch (GShard / fairseq-moe style): topk, one_hot,
# cumsum positions in each expert's capacity, einsum dispatch and combine, an auxiliary loss


class Top2Gate(nn.Module):
    def __init__(self, model_dim, num_experts, capacity_factor=2.0):
        super().__init__()
        self.wg = nn.Linear(model_dim, num_experts, bias=False)
        self.capacity_factor = capacity_factor

    def forward(self, input):
        logits = self.wg(input)
        gates = F.softmax(logits, dim=1)
        num_tokens, num_experts = gates.shape
        capacity = 2 * math.ceil(num_tokens / num_experts * self.capacity_factor)

        indices1_s = torch.argmax(gates, dim=1, keepdim=True)
        mask1 = F.one_hot(indices1_s.squeeze(1), num_classes=num_experts)
        logits_except1 = logits.masked_fill(mask1.bool(), float("-inf"))
        indices2_s = torch.argmax(logits_except1, dim=1, keepdim=True)
        mask2 = F.one_hot(indices2_s.squeeze(1), num_classes=num_experts)

        locations1 = torch.cumsum(mask1, dim=0) - 1
        locations2 = torch.cumsum(mask2, dim=0) - 1
        locations2 += torch.sum(mask1, dim=0, keepdim=True)

        me = torch.mean(gates, dim=0)
        ce = torch.mean(mask1.to(gates.dtype), dim=0)
        l_aux = torch.mean(me * ce) * num_experts * num_experts

        mask1 = mask1 * torch.lt(locations1, capacity)
        mask2 = mask2 * torch.lt(locations2, capacity)
        locations1_s = torch.sum(locations1 * mask1, dim=1)
        locations2_s = torch.sum(locations2 * mask2, dim=1)

        gates1_s = (gates * mask1).sum(dim=1)
        gates2_s = (gates * mask2).sum(dim=1)
        denom_s = gates1_s + gates2_s
        denom_s = torch.clamp(denom_s, min=torch.finfo(denom_s.dtype).eps)
        gates1_s /= denom_s
        gates2_s /= denom_s

        gates1 = gates1_s.unsqueeze(-1) * mask1.to(gates1_s.dtype)
        gates2 = gates2_s.unsqueeze(-1) * mask2.to(gates2_s.dtype)
        locations1_sc = F.one_hot(locations1_s, num_classes=capacity)
        locations2_sc = F.one_hot(locations2_s, num_classes=capacity)
        combine1_sec = torch.bmm(gates1.unsqueeze(-1), locations1_sc.to(gates1.dtype).unsqueeze(1))
        combine2_sec = torch.bmm(gates2.unsqueeze(-1), locations2_sc.to(gates2.dtype).unsqueeze(1))
        combine_weights = combine1_sec + combine2_sec
        dispatch_mask = combine_weights.bool()
        return l_aux, combine_weights, dispatch_mask


class MOELayer(nn.Module):
    def __init__(self, model_dim=16, num_experts=4):
        super().__init__()
        self.gate = Top2Gate(model_dim, num_experts)
        self.experts = nn.ModuleList(
            nn.Sequential(nn.Linear(model_dim, 32), nn.ReLU(), nn.Linear(32, model_dim)) for _ in range(num_experts))
        self.num_local_experts = num_experts

    def forward(self, *input, **kwargs):
        assert len(input) == 1, "only single input Tensor supported"
        input = input[0]
        assert len(input.shape) == 3, "input Tensor must have dimensions: (s)equence, (t)oken, (m)odel"
        d_model = input.shape[2]
        reshaped_input = input.reshape(-1, d_model)
        self.l_aux, combine_weights, dispatch_mask = self.gate(reshaped_input)
        dispatched_input = torch.einsum("sec,sm->ecm", dispatch_mask.to(input.dtype), reshaped_input)
        chunks = dispatched_input.chunk(self.num_local_experts, dim=0)
        expert_outputs = []
        for chunk, expert in zip(chunks, self.experts):
            expert_outputs += [expert(chunk)]
        expert_output = torch.cat(expert_outputs, dim=0)
        combined_output = torch.einsum("sec,ecm->sm", combine_weights, expert_output)
        return combined_output.reshape(input.shape)


@case(inputs=lambda: torch.randn(2, 6, 16), tags={"eval", "no_grad"})
class MoEEval(MOELayer):
    def __init__(self) -> None:
        super().__init__()
        self.eval()


@case(inputs=lambda: torch.randn(2, 6, 16), tags={"train"})
class MoETrain(MOELayer):
    """The auxiliary load-balancing loss stored on the module (``self.l_aux``), returned with the output."""

    def __init__(self) -> None:
        super().__init__()
        self.train()

    def forward(self, x):
        out = super().forward(x)
        return out, self.l_aux


# ------------------------------------------------------------------------------------------------
# Training-loop wrappers around model code: mixed precision and activation checkpointing


@case(inputs=lambda: torch.randint(1, 64, (2, 6)), tags={"train"})
class LlamaAutocastTrain(LlamaForCausalLM):
    """The forward as a mixed-precision training step runs it: under ``torch.autocast`` (bfloat16
    on CPU), the loss computed in float32 outside the region."""

    def __init__(self) -> None:
        super().__init__()
        self.train()

    def forward(self, input_ids):
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            logits = super().forward(input_ids)
        shift_logits = logits[..., :-1, :].contiguous().float()
        return F.cross_entropy(shift_logits.view(-1, shift_logits.size(-1)), input_ids[..., 1:].reshape(-1))


@case(
    inputs=_images,
    tags={"train", "rng"},
    difference=(
        "torch._dynamo traces torch.utils.checkpoint.checkpoint as its tag_activation_checkpoint "
        "higher-order op (each block a subgraph called from the one graph); pyframe has no higher-order "
        "op for it: the checkpoint call is a graph break, checkpoint runs for real and the blocks are "
        "compiled as frames of their own (the loop around the call is not resumable, so the rest of "
        "forward_features runs as Python); results are equal"
    ),
)
class ViTCheckpointedTrain(VisionTransformer):
    """timm's ``set_grad_checkpointing()``: blocks run through ``torch.utils.checkpoint.checkpoint``
    (``use_reentrant=False``), as ``checkpoint_seq`` does for each block."""

    def __init__(self) -> None:
        super().__init__(fused_attn=False, drop_path_rate=0.1)
        self.grad_checkpointing = True
        self.train()

    def forward_features(self, x):
        x = self.patch_embed(x)
        x = self._pos_embed(x)
        x = self.norm_pre(x)
        if self.grad_checkpointing and not torch.jit.is_scripting():
            for block in self.blocks:
                x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)
        else:
            x = self.blocks(x)
        return self.norm(x)


# ------------------------------------------------------------------------------------------------
# A Hugging Face-style encoder layer passing **kwargs down, activations chosen by name


ACT2FN = {"gelu": nn.GELU, "relu": nn.ReLU, "silu": nn.SiLU, "gelu_new": NewGELUActivation}


class KwargsSelfAttention(nn.Module):
    def __init__(self, hidden=32, heads=4):
        super().__init__()
        self.num_attention_heads = heads
        self.attention_head_size = hidden // heads
        self.all_head_size = hidden
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        x = x.view(new_x_shape)
        return x.permute(0, 2, 1, 3)

    def forward(self, hidden_states, attention_mask=None, head_mask=None, output_attentions=False, **kwargs):
        query_layer = self.transpose_for_scores(self.query(hidden_states))
        key_layer = self.transpose_for_scores(self.key(hidden_states))
        value_layer = self.transpose_for_scores(self.value(hidden_states))
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        if attention_mask is not None:
            attention_scores = attention_scores + attention_mask
        attention_probs = nn.functional.softmax(attention_scores, dim=-1)
        if head_mask is not None:
            attention_probs = attention_probs * head_mask
        context_layer = torch.matmul(attention_probs, value_layer)
        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()
        new_context_layer_shape = context_layer.size()[:-2] + (self.all_head_size,)
        context_layer = context_layer.view(new_context_layer_shape)
        outputs = (context_layer, attention_probs) if output_attentions else (context_layer,)
        return outputs


class KwargsLayer(nn.Module):
    def __init__(self, hidden=32, hidden_act="gelu_new"):
        super().__init__()
        self.attention = KwargsSelfAttention(hidden)
        self.intermediate = nn.Linear(hidden, 2 * hidden)
        act = ACT2FN[hidden_act]
        self.intermediate_act_fn = act() if isinstance(act, type) else act
        self.output = nn.Linear(2 * hidden, hidden)
        self.norm = nn.LayerNorm(hidden)

    def forward(self, hidden_states, *args, **kwargs):
        self_attention_outputs = self.attention(hidden_states, *args, **kwargs)
        attention_output = self_attention_outputs[0]
        outputs = self_attention_outputs[1:]  # add self attentions if we output attention weights
        layer_output = self.norm(self.output(self.intermediate_act_fn(self.intermediate(attention_output)))
                                 + attention_output)
        return (layer_output,) + outputs


class KwargsEncoder(nn.Module):
    def __init__(self, num_layers=2, **config):
        super().__init__()
        self.layer = nn.ModuleList([KwargsLayer(**config) for _ in range(num_layers)])

    def forward(self, hidden_states, attention_mask=None, output_attentions=False, **kwargs):
        all_self_attentions = () if output_attentions else None
        layer_kwargs = dict(kwargs, output_attentions=output_attentions)
        for i, layer_module in enumerate(self.layer):
            layer_outputs = layer_module(hidden_states, attention_mask, **layer_kwargs)
            hidden_states = layer_outputs[0]
            if output_attentions:
                all_self_attentions = all_self_attentions + (layer_outputs[1],)
        return tuple(v for v in [hidden_states, all_self_attentions] if v is not None)


@case(inputs=lambda: Inputs((torch.randn(2, 5, 32),), {"attention_mask": torch.zeros(2, 1, 1, 5),
                                                      "output_attentions": True,
                                                      "head_mask": torch.ones(1, 4, 1, 1)}),
      tags={"eval", "no_grad"})
class KwargsEncoderEval(KwargsEncoder):
    def __init__(self) -> None:
        super().__init__()
        self.eval()


# ------------------------------------------------------------------------------------------------
# Hugging Face's ModelOutput (an OrderedDict subclass, a dataclass, __post_init__ with fields())


class ModelOutput(collections.OrderedDict):
    def __post_init__(self):
        class_fields = dataclasses.fields(self)
        if not len(class_fields):
            raise ValueError(f"{self.__class__.__name__} has no fields.")
        if not all(field.default is None for field in class_fields[1:]):
            raise ValueError(f"{self.__class__.__name__} should not have more than one required field.")
        first_field = getattr(self, class_fields[0].name)
        other_fields_are_none = all(getattr(self, field.name) is None for field in class_fields[1:])
        if other_fields_are_none and isinstance(first_field, dict):
            for key, value in first_field.items():
                self[key] = value
        else:
            for field in class_fields:
                v = getattr(self, field.name)
                if v is not None:
                    self[field.name] = v

    def __getitem__(self, k):
        if isinstance(k, str):
            inner_dict = dict(self.items())
            return inner_dict[k]
        else:
            return self.to_tuple()[k]

    def __setattr__(self, name, value):
        if name in self.keys() and value is not None:
            super().__setitem__(name, value)
        super().__setattr__(name, value)

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)

    def to_tuple(self):
        return tuple(self[k] for k in self.keys())


@dataclasses.dataclass
class SequenceClassifierOutput(ModelOutput):
    loss: torch.Tensor | None = None
    logits: torch.Tensor = None
    hidden_states: tuple | None = None
    attentions: tuple | None = None


class ModelOutputClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = KwargsEncoder()
        self.classifier = nn.Linear(32, 3)

    def forward(self, hidden_states, labels=None, return_dict=True):
        outputs = self.encoder(hidden_states, output_attentions=True)
        pooled = outputs[0][:, 0]
        logits = self.classifier(pooled)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.view(-1, 3), labels.view(-1))
        if not return_dict:
            output = (logits,) + outputs[1:]
            return ((loss,) + output) if loss is not None else output
        return SequenceClassifierOutput(loss=loss, logits=logits, attentions=outputs[1])


@case(inputs=lambda: (torch.randn(2, 5, 32), torch.tensor([0, 2])), tags={"train"})
class ModelOutputTrain(ModelOutputClassifier):
    def __init__(self) -> None:
        super().__init__()
        self.train()


# ------------------------------------------------------------------------------------------------
# nn.MultiheadAttention as DETR's decoder layer uses it (sequence first, need_weights by default)


class DETRDecoderLayer(nn.Module):
    def __init__(self, d_model=16, nhead=4, dim_feedforward=32, dropout=0.1):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout)
        self.multihead_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout)
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.dropout = nn.Dropout(dropout)
        self.linear2 = nn.Linear(dim_feedforward, d_model)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout1, self.dropout2, self.dropout3 = nn.Dropout(dropout), nn.Dropout(dropout), nn.Dropout(dropout)
        self.activation = F.relu

    def with_pos_embed(self, tensor, pos):
        return tensor if pos is None else tensor + pos

    def forward(self, tgt, memory, memory_key_padding_mask=None, pos=None, query_pos=None):
        q = k = self.with_pos_embed(tgt, query_pos)
        tgt2 = self.self_attn(q, k, value=tgt)[0]
        tgt = tgt + self.dropout1(tgt2)
        tgt = self.norm1(tgt)
        tgt2, weights = self.multihead_attn(query=self.with_pos_embed(tgt, query_pos),
                                            key=self.with_pos_embed(memory, pos), value=memory,
                                            key_padding_mask=memory_key_padding_mask)
        tgt = tgt + self.dropout2(tgt2)
        tgt = self.norm2(tgt)
        tgt2 = self.linear2(self.dropout(self.activation(self.linear1(tgt))))
        tgt = tgt + self.dropout3(tgt2)
        tgt = self.norm3(tgt)
        return tgt, weights


def _detr_decoder_inputs() -> Inputs:
    mask = torch.zeros(2, 9, dtype=torch.bool)
    mask[1, 6:] = True
    return Inputs((torch.randn(5, 2, 16), torch.randn(9, 2, 16)),
                  {"memory_key_padding_mask": mask, "pos": torch.randn(9, 2, 16), "query_pos": torch.randn(5, 2, 16)})


@case(inputs=_detr_decoder_inputs, tags={"eval", "no_grad"})
class DETRDecoderEval(DETRDecoderLayer):
    def __init__(self) -> None:
        super().__init__()
        self.eval()


@case(inputs=_detr_decoder_inputs, tags={"train", "rng"})
class DETRDecoderTrain(DETRDecoderLayer):
    def __init__(self) -> None:
        super().__init__()
        self.train()


# ------------------------------------------------------------------------------------------------
# Stable Diffusion's CrossAttention (ldm): baddbmm into an empty tensor with beta=0, heads folded
# into the batch, an optional context


class CrossAttention(nn.Module):
    def __init__(self, query_dim=16, context_dim=None, heads=2, dim_head=8, dropout=0.0):
        super().__init__()
        inner_dim = dim_head * heads
        context_dim = context_dim if context_dim is not None else query_dim
        self.scale = dim_head ** -0.5
        self.heads = heads
        self.to_q = nn.Linear(query_dim, inner_dim, bias=False)
        self.to_k = nn.Linear(context_dim, inner_dim, bias=False)
        self.to_v = nn.Linear(context_dim, inner_dim, bias=False)
        self.to_out = nn.Sequential(nn.Linear(inner_dim, query_dim), nn.Dropout(dropout))

    def reshape_heads_to_batch_dim(self, tensor):
        batch_size, seq_len, dim = tensor.shape
        head_size = self.heads
        tensor = tensor.reshape(batch_size, seq_len, head_size, dim // head_size)
        tensor = tensor.permute(0, 2, 1, 3).reshape(batch_size * head_size, seq_len, dim // head_size)
        return tensor

    def reshape_batch_dim_to_heads(self, tensor):
        batch_size, seq_len, dim = tensor.shape
        head_size = self.heads
        tensor = tensor.reshape(batch_size // head_size, head_size, seq_len, dim)
        tensor = tensor.permute(0, 2, 1, 3).reshape(batch_size // head_size, seq_len, dim * head_size)
        return tensor

    def forward(self, hidden_states, context=None, mask=None):
        query = self.to_q(hidden_states)
        context = context if context is not None else hidden_states
        key = self.to_k(context)
        value = self.to_v(context)
        query = self.reshape_heads_to_batch_dim(query)
        key = self.reshape_heads_to_batch_dim(key)
        value = self.reshape_heads_to_batch_dim(value)
        attention_scores = torch.baddbmm(
            torch.empty(query.shape[0], query.shape[1], key.shape[1], dtype=query.dtype, device=query.device),
            query, key.transpose(-1, -2), beta=0, alpha=self.scale)
        attention_probs = attention_scores.softmax(dim=-1)
        hidden_states = torch.bmm(attention_probs, value)
        hidden_states = self.reshape_batch_dim_to_heads(hidden_states)
        return self.to_out(hidden_states)


class SpatialTransformerStyle(nn.Module):
    def __init__(self, channels=16, context_dim=12):
        super().__init__()
        self.norm = nn.GroupNorm(4, channels, eps=1e-6)
        self.proj_in = nn.Conv2d(channels, channels, 1)
        self.attn1 = CrossAttention(channels)
        self.attn2 = CrossAttention(channels, context_dim=context_dim)
        self.norm1, self.norm2 = nn.LayerNorm(channels), nn.LayerNorm(channels)
        self.proj_out = nn.Conv2d(channels, channels, 1)

    def forward(self, x, context=None):
        b, c, h, w = x.shape
        x_in = x
        x = self.proj_in(self.norm(x))
        x = x.permute(0, 2, 3, 1).reshape(b, h * w, c)
        x = self.attn1(self.norm1(x)) + x
        x = self.attn2(self.norm2(x), context=context) + x
        x = x.reshape(b, h, w, c).permute(0, 3, 1, 2)
        return self.proj_out(x) + x_in


@case(inputs=lambda: (torch.randn(2, 16, 4, 4), torch.randn(2, 7, 12)), tags={"eval", "no_grad"})
class SpatialTransformerEval(SpatialTransformerStyle):
    def __init__(self) -> None:
        super().__init__()
        self.eval()


# ------------------------------------------------------------------------------------------------
# Conv-TasNet's separator pieces: reflect padding, PReLU, cumulative layer norm with cumsum


class cLN(nn.Module):
    """Cumulative layer norm (Conv-TasNet): statistics over time steps seen so far."""

    def __init__(self, dimension, eps=1e-8):
        super().__init__()
        self.eps = eps
        self.gain = nn.Parameter(torch.ones(1, dimension, 1))
        self.bias = nn.Parameter(torch.zeros(1, dimension, 1))

    def forward(self, input):
        batch_size = input.size(0)
        channel = input.size(1)
        time_step = input.size(2)
        step_sum = input.sum(1)  # B, T
        step_pow_sum = input.pow(2).sum(1)  # B, T
        cum_sum = torch.cumsum(step_sum, dim=1)  # B, T
        cum_pow_sum = torch.cumsum(step_pow_sum, dim=1)  # B, T
        entry_cnt = torch.arange(channel, channel * (time_step + 1), channel, dtype=input.dtype,
                                 device=input.device)
        entry_cnt = entry_cnt.view(1, -1).expand_as(cum_sum)
        cum_mean = cum_sum / entry_cnt  # B, T
        cum_var = (cum_pow_sum - 2 * cum_mean * cum_sum) / entry_cnt + cum_mean.pow(2)  # B, T
        cum_std = (cum_var + self.eps).sqrt()  # B, T
        cum_mean = cum_mean.unsqueeze(1)
        cum_std = cum_std.unsqueeze(1)
        x = (input - cum_mean.expand_as(input)) / cum_std.expand_as(input)
        return x * self.gain.expand_as(x).type(x.type()) + self.bias.expand_as(x).type(x.type())


class DepthConv1d(nn.Module):
    def __init__(self, input_channel, hidden_channel, kernel, padding, dilation=1, skip=True, causal=False):
        super().__init__()
        self.causal = causal
        self.skip = skip
        self.conv1d = nn.Conv1d(input_channel, hidden_channel, 1)
        self.padding = (kernel - 1) * dilation if self.causal else padding
        self.dconv1d = nn.Conv1d(hidden_channel, hidden_channel, kernel, dilation=dilation,
                                 groups=hidden_channel, padding=self.padding)
        self.res_out = nn.Conv1d(hidden_channel, input_channel, 1)
        self.nonlinearity1 = nn.PReLU()
        self.nonlinearity2 = nn.PReLU()
        if self.causal:
            self.reg1 = cLN(hidden_channel, eps=1e-08)
            self.reg2 = cLN(hidden_channel, eps=1e-08)
        else:
            self.reg1 = nn.GroupNorm(1, hidden_channel, eps=1e-08)
            self.reg2 = nn.GroupNorm(1, hidden_channel, eps=1e-08)
        if self.skip:
            self.skip_out = nn.Conv1d(hidden_channel, input_channel, 1)

    def forward(self, input):
        output = self.reg1(self.nonlinearity1(self.conv1d(input)))
        if self.causal:
            output = self.reg2(self.nonlinearity2(self.dconv1d(output)[:, :, :-self.padding]))
        else:
            output = self.reg2(self.nonlinearity2(self.dconv1d(output)))
        residual = self.res_out(output)
        if self.skip:
            skip = self.skip_out(output)
            return residual, skip
        else:
            return residual


class TasNetStyle(nn.Module):
    def __init__(self, causal=True):
        super().__init__()
        self.encoder = nn.Conv1d(1, 8, 4, stride=2, bias=False)
        self.blocks = nn.ModuleList([DepthConv1d(8, 16, 3, padding=2 ** i, dilation=2 ** i, causal=causal)
                                     for i in range(3)])
        self.output = nn.Sequential(nn.PReLU(), nn.Conv1d(8, 8, 1))

    def pad_signal(self, input):
        if input.dim() not in [2, 3]:
            raise RuntimeError("Input can only be 2 or 3 dimensional.")
        if input.dim() == 2:
            input = input.unsqueeze(1)
        batch_size = input.size(0)
        nsample = input.size(2)
        rest = 4 - (2 + nsample % 4) % 4
        if rest > 0:
            pad = torch.zeros(batch_size, 1, rest).type(input.type())
            input = torch.cat([input, pad], 2)
        pad_aux = torch.zeros(batch_size, 1, 2).type(input.type())
        input = torch.cat([pad_aux, input, pad_aux], 2)
        return input, rest

    def forward(self, input):
        output, rest = self.pad_signal(input)
        output = F.pad(self.encoder(output), (1, 1), mode="reflect")
        skip_connection = 0.0
        for block in self.blocks:
            residual, skip = block(output)
            output = output + residual
            skip_connection = skip_connection + skip
        return torch.sigmoid(self.output(skip_connection)), rest


@case(inputs=lambda: torch.randn(2, 37), tags={"train"})
class TasNetTrain(TasNetStyle):
    def __init__(self) -> None:
        super().__init__()
        self.train()


# ------------------------------------------------------------------------------------------------
# Megatron-LM's MLP with its TorchScript-fused bias GeLU


@torch.jit.script
def bias_gelu(bias, y):
    x = bias + y
    return x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))


class ParallelMLPStyle(nn.Module):
    """Megatron's ParallelMLP without the parallelism: the first linear skips its bias
    (``skip_bias_add``) and returns it, the fused ``@torch.jit.script`` bias-GeLU adds it."""

    def __init__(self, hidden=16, ffn=64):
        super().__init__()
        self.dense_h_to_4h = nn.Linear(hidden, ffn, bias=False)
        self.dense_h_to_4h_bias = nn.Parameter(torch.randn(ffn) * 0.1)
        self.dense_4h_to_h = nn.Linear(ffn, hidden)
        self.bias_gelu_fusion = True

    def forward(self, hidden_states):
        intermediate_parallel, bias_parallel = self.dense_h_to_4h(hidden_states), self.dense_h_to_4h_bias
        if self.bias_gelu_fusion:
            intermediate_parallel = bias_gelu(bias_parallel, intermediate_parallel)
        else:
            intermediate_parallel = F.gelu(intermediate_parallel + bias_parallel)
        return self.dense_4h_to_h(intermediate_parallel)


@case(inputs=lambda: torch.randn(2, 8, 16), tags={"train"})
class MegatronMLPTrain(ParallelMLPStyle):
    def __init__(self) -> None:
        super().__init__()
        self.train()


# ------------------------------------------------------------------------------------------------
# An SNGAN discriminator: torch.nn.utils.spectral_norm, a SpectralNorm object as forward pre-hook
# (its __call__ runs a power iteration under no_grad, updating the u and v buffers in training)


class SNDiscriminator(nn.Module):
    def __init__(self):
        super().__init__()
        sn = nn.utils.spectral_norm
        self.main = nn.Sequential(
            sn(nn.Conv2d(3, 8, 4, 2, 1)), nn.LeakyReLU(0.1, inplace=True),
            sn(nn.Conv2d(8, 16, 4, 2, 1)), nn.LeakyReLU(0.1, inplace=True),
        )
        self.fc = sn(nn.Linear(16 * 4 * 4, 1))

    def forward(self, x):
        h = self.main(x)
        return self.fc(h.view(h.size(0), -1)), self.fc.weight_u.clone()


@case(inputs=_images, tags={"train"})
class SNGANDiscriminatorTrain(SNDiscriminator):
    def __init__(self) -> None:
        super().__init__()
        self.train()


@case(inputs=_images, tags={"eval", "no_grad"})
class SNGANDiscriminatorEval(SNDiscriminator):
    def __init__(self) -> None:
        super().__init__()
        self.eval()

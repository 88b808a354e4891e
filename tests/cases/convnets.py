"""Corpus: convolutional vision models in the styles their projects write them (small sizes, CPU,
written here).

Each model is run in eval mode under ``torch.no_grad()`` (tag ``"no_grad"``) and, where it makes
sense, in training mode (dropout and drop-path draw random numbers: tag ``"rng"`` has the harness
start every call from the case's seed).

- ``ResNetStyle``: torchvision-style ``BasicBlock``s (``ReLU(inplace=True)``, ``out += identity``,
  an optional ``downsample`` that is ``None`` in some blocks), ``nn.Sequential`` stages, flatten, fc;
- ``MobileNetV2``: torchvision's ``InvertedResidual`` (``ConvBNActivation`` as an ``nn.Sequential``
  subclass, ``ReLU6(inplace=True)``, depthwise convs with ``groups=hidden_dim``, a residual only when
  ``stride == 1 and inp == oup``), ``F.adaptive_avg_pool2d`` and a ``Dropout`` + ``Linear`` classifier;
- ``ConvNeXt``: the official blocks (7x7 depthwise conv, ``permute`` to channels-last, the repo's own
  ``LayerNorm`` with a ``data_format`` branch, a layer-scale ``gamma`` Parameter that may be ``None``,
  timm's ``DropPath`` (``new_empty(shape).bernoulli_``), identity in eval), drop-path rates from
  ``torch.linspace(...).item()``;
- ``UNet``: skip connections kept in a list, reversed, ``F.interpolate`` when the sizes differ,
  ``torch.cat`` along channels, ``ConvTranspose2d`` upsampling;
- ``EfficientNet``: EfficientNet-PyTorch's ``MBConvBlock`` (a ``namedtuple`` of block args, dynamic
  "same" padding with ``math.ceil`` and ``F.pad``, squeeze-excitation with ``F.adaptive_avg_pool2d`` and
  ``torch.sigmoid``, ``nn.SiLU``, ``drop_connect`` with ``torch.rand`` in training);
- ``YOLODetect``: YOLOv5's ``Detect`` head: the input list rewritten in place (``x[i] = ...``), grids
  cached in list attributes, ``torch.meshgrid(indexing="ij")``, ``split`` of sigmoids, a nested
  conditional return;
- ``SNGANDiscriminator``: ``nn.utils.spectral_norm`` (a callable ``SpectralNorm`` object as forward
  pre-hook, a power iteration updating buffers in training).
"""

from __future__ import annotations

import collections
import collections.abc
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from pyframe.debug.cases import case

# ------------------------------------------------------------------------------------------------
# ResNet (torchvision's BasicBlock)

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

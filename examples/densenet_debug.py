"""The "custom backend" seed with a DenseNet: a debugging backend prints the FX graph pyframe captures.

The seed notebook compiles torchvision's ``densenet121()`` (training mode, a 16x3x128x128 batch) with
a backend that calls ``gm.graph.print_tabular()`` and returns ``gm.forward``. torchvision is not
needed here: the DenseNet below is torchvision's recipe written out (dense blocks whose layers read
the ``torch.cat`` of all earlier feature maps, BN-ReLU-Conv1x1-BN-ReLU-Conv3x3; transitions
BN-ReLU-Conv1x1-AvgPool), by default scaled down to growth 8 and blocks (2, 2) on a 32x32 image so the
table stays readable. ``--densenet121`` builds the real densenet121 configuration on the seed's input.

What to look for in the table: the whole forward is one graph (no graph breaks); every parameter and
buffer is a placeholder (``l_self_modules_features_modules_conv0_parameters_weight_``...); the Python
list of features and ``nn.ModuleDict.items()`` leave no trace but ``cat`` nodes; in training mode
each ``batch_norm`` is preceded by an in-place ``add_`` on its ``num_batches_tracked`` buffer.

Run:  python examples/densenet_debug.py [--densenet121] [--eval]
"""

from __future__ import annotations

import argparse
import copy
from typing import Callable, List

import torch
import torch.nn as nn
import torch.nn.functional as F

import pyframe


def custom_backend(gm: torch.fx.GraphModule, example_inputs: List[torch.Tensor]) -> Callable:
    print("custom backend called with FX graph:")
    gm.graph.print_tabular()
    return gm.forward


# --------------------------------------------------------------------------------------------------
# DenseNet, as torchvision.models.densenet writes it (without memory-efficient checkpointing)


class DenseLayer(nn.Module):
    """BN-ReLU-Conv1x1 (a bottleneck of ``bn_size * growth_rate`` channels), then BN-ReLU-Conv3x3."""

    def __init__(self, in_features: int, growth_rate: int, bn_size: int) -> None:
        super().__init__()
        self.norm1 = nn.BatchNorm2d(in_features)
        self.relu1 = nn.ReLU(inplace=True)
        self.conv1 = nn.Conv2d(in_features, bn_size * growth_rate, kernel_size=1, bias=False)
        self.norm2 = nn.BatchNorm2d(bn_size * growth_rate)
        self.relu2 = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(bn_size * growth_rate, growth_rate, kernel_size=3, padding=1, bias=False)

    def forward(self, features: List[torch.Tensor]) -> torch.Tensor:
        concatenated = torch.cat(features, 1)
        bottleneck = self.conv1(self.relu1(self.norm1(concatenated)))
        return self.conv2(self.relu2(self.norm2(bottleneck)))


class DenseBlock(nn.ModuleDict):
    """Each layer reads the concatenation of the block's input and every earlier layer's output."""

    def __init__(self, num_layers: int, in_features: int, growth_rate: int, bn_size: int) -> None:
        super().__init__()
        for i in range(num_layers):
            self.add_module(f"denselayer{i + 1}", DenseLayer(in_features + i * growth_rate, growth_rate, bn_size))

    def forward(self, init_features: torch.Tensor) -> torch.Tensor:
        features = [init_features]
        for _name, layer in self.items():
            features.append(layer(features))
        return torch.cat(features, 1)


class Transition(nn.Sequential):
    """BN-ReLU-Conv1x1 halving the channels, then 2x2 average pooling."""

    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        self.norm = nn.BatchNorm2d(in_features)
        self.relu = nn.ReLU(inplace=True)
        self.conv = nn.Conv2d(in_features, out_features, kernel_size=1, bias=False)
        self.pool = nn.AvgPool2d(kernel_size=2, stride=2)


class DenseNet(nn.Module):
    """torchvision's DenseNet; the defaults are a small one, ``densenet121()`` below is the real size."""

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


def densenet121() -> DenseNet:
    """torchvision's densenet121 configuration (about 8M parameters, ~550 ops in the graph)."""
    return DenseNet(growth_rate=32, block_config=(6, 12, 24, 16), num_init_features=64, num_classes=1000)


# --------------------------------------------------------------------------------------------------


def pick_device() -> torch.device:
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--densenet121", action="store_true",
                        help="the full densenet121 configuration on the seed's 16x3x128x128 input")
    parser.add_argument("--eval", action="store_true", help="eval mode (BatchNorm reads running stats)")
    args = parser.parse_args()

    device = pick_device()
    print(f"Using device: {device}")
    torch.manual_seed(0)
    model = (densenet121() if args.densenet121 else DenseNet()).to(torch.float32).to(device)
    model.train(not args.eval)
    x = torch.randn(*((16, 3, 128, 128) if args.densenet121 else (4, 3, 32, 32)), device=device)

    reference = copy.deepcopy(model)  # eager twin: in training mode BatchNorm updates its buffers
    opt_model = pyframe.optimize(custom_backend)(model)
    out = opt_model(x)
    torch.testing.assert_close(out, reference(x))
    torch.testing.assert_close(model.state_dict(), reference.state_dict())
    print(f"\noutput {tuple(out.shape)}, equal to eager (and so are the updated BatchNorm buffers):")
    print(out)


if __name__ == "__main__":
    main()

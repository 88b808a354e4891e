"""The "speedy backend" seed: hand each graph to TorchScript and its inference optimizations.

The backend traces the FX graph with ``torch.jit.trace`` and runs ``torch.jit.optimize_for_inference``
on the result (freezing, then fusing what it can). It is used on a small eval-mode model, under
``torch.no_grad()`` as inference code is; the script checks the result against eager and times both.

Run:  python examples/speedy_backend.py
"""

import timeit
from typing import List

import torch

import pyframe


def optimize_for_inference_compiler(gm: torch.fx.GraphModule, example_inputs: List[torch.Tensor]):
    scripted = torch.jit.trace(gm.eval(), example_inputs)  # freezing needs an eval-mode module
    return torch.jit.optimize_for_inference(scripted)


class SmallConvNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, kernel_size=3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.head = torch.nn.Linear(8, 4)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        return self.head(y.mean(dim=(2, 3)))


def main() -> None:
    torch.manual_seed(0)
    model = SmallConvNet().eval()
    x = torch.randn(4, 3, 32, 32)
    code_to_accelerate = pyframe.optimize(optimize_for_inference_compiler)(model)
    with torch.no_grad():
        expected = model(x)
        result = code_to_accelerate(x)  # first call: trace, compile, run
        torch.testing.assert_close(result, expected, rtol=1e-4, atol=1e-4)
        eager_s = min(timeit.repeat(lambda: model(x), number=50, repeat=5)) / 50
        fast_s = min(timeit.repeat(lambda: code_to_accelerate(x), number=50, repeat=5)) / 50
    print(f"result matches eager; eager {eager_s * 1e6:.0f} us/call, "
          f"optimized {fast_s * 1e6:.0f} us/call")


if __name__ == "__main__":
    main()

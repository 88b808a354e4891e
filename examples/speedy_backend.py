"""The "speedy backend" seed: hand each graph to TorchScript and its inference optimizations.

The seed gives the backend twice: one turns the FX graph into TorchScript with ``torch.jit.trace``,
the other with ``torch.jit.script``; both then run ``torch.jit.optimize_for_inference`` on it
(freezing, then fusing what it can). Each is used on a small eval-mode model, under
``torch.no_grad()`` as inference code is; the script checks the result against eager and times it.

Run:  python examples/speedy_backend.py
"""

import timeit
from typing import List

import torch

import pyframe


def optimize_for_inference_compiler(gm: torch.fx.GraphModule, example_inputs: List[torch.Tensor]):
    scripted = torch.jit.trace(gm.eval(), example_inputs)  # freezing needs an eval-mode module
    return torch.jit.optimize_for_inference(scripted)


def optimize_for_inference_script_compiler(gm: torch.fx.GraphModule, example_inputs: List[torch.Tensor]):
    scripted = torch.jit.script(gm.eval())  # the docs' later version: script instead of trace
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
    with torch.no_grad():
        expected = model(x)
        eager_s = min(timeit.repeat(lambda: model(x), number=50, repeat=5)) / 50
        print(f"eager: {eager_s * 1e6:.0f} us/call")
        for compiler in (optimize_for_inference_compiler, optimize_for_inference_script_compiler):
            code_to_accelerate = pyframe.optimize(compiler)(model)
            result = code_to_accelerate(x)  # first call: trace or script, optimize, run
            torch.testing.assert_close(result, expected, rtol=1e-4, atol=1e-4)
            fast_s = min(timeit.repeat(lambda f=code_to_accelerate: f(x), number=50, repeat=5)) / 50
            print(f"{compiler.__name__}: result matches eager; {fast_s * 1e6:.0f} us/call")


if __name__ == "__main__":
    main()

"""The "debugging backend" seed: a backend that prints every FX graph it is given.

Three programs from the custom-backend docs, with pyframe.optimize in place of torch.compile:
``fn`` (one graph: cos, sin, add), ``MockModule`` (ReLU of cos: the module's call is inlined into
the graph) and ``toy_example``, whose ``if b.sum() < 0`` on a tensor is a graph break: one graph up
to the branch, then one resume function per branch taken (three graphs over 100 random calls).

pyframe has this backend built in under the name "print": ``pyframe.optimize("print")(fn)``.

Run:  python examples/debug_backend.py
"""

from typing import List

import torch

import pyframe


def my_compiler(gm: torch.fx.GraphModule, example_inputs: List[torch.Tensor]):
    print("my_compiler() called with FX graph:")
    gm.graph.print_tabular()
    return gm.forward  # return a python callable


@pyframe.optimize(my_compiler)
def fn(x, y):
    a = torch.cos(x)
    b = torch.sin(y)
    return a + b


class MockModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.relu = torch.nn.ReLU()

    def forward(self, x):
        return self.relu(torch.cos(x))


@pyframe.optimize(my_compiler)
def toy_example(a, b):
    x = a / (torch.abs(a) + 1)
    if b.sum() < 0:
        b = b * -1
    return x * b


def main() -> None:
    print("--- fn")
    fn(torch.randn(10), torch.randn(10))

    print("--- MockModule")
    mod = MockModule()
    optimized_mod = pyframe.optimize(my_compiler)(mod)
    optimized_mod(torch.randn(10))

    print("--- toy_example, 100 calls")
    for _ in range(100):
        toy_example(torch.randn(10), torch.randn(10))


if __name__ == "__main__":
    main()

"""The seed programs: what `python -m pyframe demo` runs, shipped with the package.

The custom-backend documentation's ``fn`` (cos, sin, add) and ``MockModule`` (ReLU of cos), its
``toy_example`` (a data-dependent branch that breaks the graph) and the talk's ``DynamicModule``,
verbatim. Each is also a ``@case`` with inputs drawn under the case's seed (modules built under it
too), so eager, pyframe and torch._dynamo get the same weights and the same inputs wherever the
demo runs: in a source checkout or not, with or without numpy. The corpus (tests/cases/) holds the
same programs among many; it is not part of the installed package, this module is.

Where it sits: on top of the public API, like a user's module (pyframe.debug.cases only registers).
"""

from __future__ import annotations

import torch

from pyframe.debug.cases import case

__all__ = ["fn", "MockModule", "toy_example", "DynamicModule", "SEED_CASES"]

#: The module name `load_cases` takes to get the cases below (the demo's comparison table).
SEED_CASES = __name__


@case(inputs=lambda: (torch.randn(10), torch.randn(10)))
def fn(x, y):
    a = torch.cos(x)
    b = torch.sin(y)
    return a + b


@case(inputs=lambda: torch.randn(10))
class MockModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.relu = torch.nn.ReLU()

    def forward(self, x):
        return self.relu(torch.cos(x))


@case(inputs=lambda: (torch.randn(10), -torch.randn(10).abs()), name="toy_example_negative", tags={"break"})
@case(inputs=lambda: (torch.randn(10), torch.randn(10).abs()), tags={"break"})
def toy_example(a, b):
    x = a / (torch.abs(a) + 1)
    if b.sum() < 0:
        b = b * -1
    return x * b


@case(inputs=lambda: torch.randn(10).abs(), tags={"break"})
class DynamicModule(torch.nn.Module):
    def forward(self, x: torch.Tensor):
        if x.sum() > 0:
            return x * x
        return 3 * x

"""The DynamicModule seed: control flow that torch.fx cannot trace and pyframe compiles in pieces.

``DynamicModule.forward`` branches on ``x.sum() > 0``. ``torch.fx.symbolic_trace`` fails on it (a
Proxy has no truth value); pyframe instead breaks the graph at the branch: one graph computes the
condition, Python takes the branch, and each branch's code becomes a graph of its own. Calling with
``x`` and ``-x`` takes both branches: three graphs in all, printed below as Python code.

Run:  python examples/dynamic_module.py
"""

import torch
import torch.nn as nn
from torch.fx.proxy import TraceError

import pyframe


class DynamicModule(nn.Module):
    def forward(self, x: torch.Tensor):
        if x.sum() > 0:
            return x * x
        return 3 * x


graphs = []


def collect_graphs(gm: torch.fx.GraphModule, samples):
    graphs.append(gm.graph)
    return gm.forward


def main() -> None:
    try:
        torch.fx.symbolic_trace(DynamicModule())
    except TraceError:
        print("torch.fx.symbolic_trace: Tracing Error!!")

    model = pyframe.optimize(collect_graphs)(DynamicModule())
    x = torch.randn(10)
    torch.testing.assert_close(model(x), DynamicModule()(x))
    torch.testing.assert_close(model(-x), DynamicModule()(-x))
    print(f"pyframe.optimize: {len(graphs)} graphs")
    for graph in graphs:
        print(graph.python_code("self").src.strip())
        print("==" * 10)


if __name__ == "__main__":
    main()

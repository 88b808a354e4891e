"""The graph-rewriting seed: a backend that deletes dropout from the graph before running it.

``MyModule`` is Linear(100, 3) followed by Dropout(p=0.3), left in training mode, so eagerly its
output is random. The backend finds the ``torch.nn.functional.dropout`` node (the module's call is
inlined into the graph, so dropout appears as that function), points its users at its input and
erases it: the optimized module then returns exactly ``Linear(x)``. Both versions of the seed's
backend are here: one edits ``gm``'s graph in place, one edits a deep copy and builds a new module.

Run:  python examples/dropout_rewrite.py
"""

from copy import deepcopy

import torch
import torch.nn as nn

import pyframe


class MyModule(nn.Module):
    def __init__(self):
        super().__init__()
        self._linear = nn.Linear(100, 3)
        self._dropout = nn.Dropout(p=0.3)

    def forward(self, x: torch.Tensor):
        out = self._linear(x)
        out = self._dropout(out)
        return out


def my_backend_in_place(gm: torch.fx.GraphModule, sample_inputs: list[torch.Tensor]):
    for node in gm.graph.nodes:
        if node.target == torch.nn.functional.dropout:
            node.replace_all_uses_with(node.args[0])
            gm.graph.erase_node(node)
    gm.recompile()
    return gm.forward


new_graph = None


def my_backend_on_copy(gm: torch.fx.GraphModule, sample_inputs: list[torch.Tensor]):
    global new_graph
    new_graph = deepcopy(gm.graph)
    for node in new_graph.nodes:
        if node.target == torch.nn.functional.dropout:
            node.replace_all_uses_with(node.args[0])
            new_graph.erase_node(node)
    new_graph.lint()
    new_gm = torch.fx.GraphModule(root=gm, graph=new_graph)
    return new_gm.forward


def main() -> None:
    torch.manual_seed(0)
    my_model = MyModule()
    x = torch.randn(10, 100, dtype=torch.float32)
    without_dropout = my_model._linear(x)
    for backend in (my_backend_in_place, my_backend_on_copy):
        pyframe.reset()
        my_model_ = pyframe.optimize(backend)(my_model)
        torch.testing.assert_close(my_model_(x), without_dropout)
        torch.testing.assert_close(my_model_(x), without_dropout)  # a cache hit: still no dropout
        print(f"{backend.__name__}: the optimized module returns Linear(x), dropout removed")
    print("the rewritten graph:")
    new_graph.print_tabular()


if __name__ == "__main__":
    main()

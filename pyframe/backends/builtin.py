"""The built-in backends that need nothing but torch: "eager" and "print".

"aot_eager" and "inductor" are torch's own and come from torch's registry (see registry.py); "onnxrt"
is in onnxrt.py.
"""
from __future__ import annotations

from typing import Callable

import torch

from .registry import register_backend


@register_backend
def eager(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> Callable:
    """Run the captured graph as it is (what pyframe also falls back to when a backend fails)."""
    return gm.forward


@register_backend(name="print")
def print_graph(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> Callable:
    """The seeds' debugging backend: print each graph as a table, then run it as it is."""
    name = gm.meta.get("pyframe_name", "a graph")
    print(f"pyframe: {name}, {len(example_inputs)} inputs:")
    gm.graph.print_tabular()
    return gm.forward

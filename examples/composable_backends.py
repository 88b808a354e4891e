"""The "composable backends" seed: try one compiler, fall back to the next, finally run the graph as is.

The seed's ``my_compiler`` calls TensorRT, then another backend, each inside ``try``, moving on when one
raises or returns None, and returns ``gm.forward`` when none succeeded. ``composed(*candidates)``
below is that function for any list of backends (callables, or names pyframe knows), and records
which one compiled each graph. The candidates here:

- ``cuda_graphs_if_available``: returns None on a machine without CUDA (as the seed's TensorRT would);
- ``"onnxrt"``: ONNX Runtime (raises when the onnx extra is not installed, or when the graph has an op
  torch.onnx cannot translate: ``nn.TransformerEncoderLayer``'s fused inference kernel is one);
- ``torchscript``: ``torch.jit.script`` of the graph module, which takes any graph of torch calls.

Run:  python examples/composable_backends.py
"""

from __future__ import annotations

from typing import Callable

import torch

import pyframe
from pyframe.backends import backend_name


def composed(*candidates: str | Callable, log: list[str] | None = None) -> Callable:
    """A backend trying `candidates` in order; `log` receives, per graph, the name of the one used."""
    def my_compiler(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> Callable:
        for candidate in candidates:
            name = backend_name(candidate)
            try:
                compiled = pyframe.lookup_backend(candidate)(gm, example_inputs)
            except Exception as e:  # this candidate cannot take the graph: try the next one
                print(f"  {name} failed: {type(e).__name__}: {str(e).splitlines()[0][:120]}")
                continue
            if compiled is not None:
                print(f"  compiled by {name}")
                if log is not None:
                    log.append(name)
                return compiled
            print(f"  {name} returned None")
        if log is not None:
            log.append("gm.forward")
        return gm.forward  # nothing worked: run the graph as it is
    return my_compiler


def cuda_graphs_if_available(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> Callable | None:
    if not torch.cuda.is_available():
        return None
    return pyframe.lookup_backend("cudagraphs")(gm, example_inputs)


def torchscript(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> Callable:
    return torch.jit.script(gm)


def mlp_step(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.relu(x @ w).sum(dim=-1)


def main() -> None:
    torch.manual_seed(0)
    backend = composed(cuda_graphs_if_available, "onnxrt", torchscript)

    print("--- a function of plain tensor ops")
    x, w = torch.randn(4, 8), torch.randn(8, 8)
    torch.testing.assert_close(pyframe.optimize(backend)(mlp_step)(x, w), mlp_step(x, w))

    print("--- nn.TransformerEncoderLayer in eval mode under no_grad (its fused kernel)")
    layer = torch.nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, batch_first=True).eval()
    tokens = torch.randn(2, 5, 16)
    with torch.no_grad():
        torch.testing.assert_close(pyframe.optimize(backend)(layer)(tokens), layer(tokens), rtol=1e-4, atol=1e-4)
    print("results equal eager's")


if __name__ == "__main__":
    main()

"""The onnxruntime seed: an MLP trained with forward and backward running in ONNX Runtime.

The seed's MLP (Linear 10->32, ReLU, Linear 32->1) is trained with Adam (lr 0.1) and an L1 loss on
batches of 5 of scikit-learn's diabetes set (442 rows of 10 features; a synthetic set of the same
shape when scikit-learn is not installed), three epochs, once eagerly and once under
``pyframe.optimize("onnxrt")``; the per-epoch losses agree. Then, as the seed does, the same loop with
a backend built by hand: torch's ``aot_autograd`` around ``pyframe.backends.onnxrt.onnx_graph_compiler``,
recording every ONNX model made, printed at the end (the forward graph and the backward graph).

The last batch of an epoch has 2 rows, not 5. pyframe has no dynamic shapes: that batch compiles a
second entry (a second forward and backward model) on its first call, and ``dynamic=True`` is
accepted and changes nothing. So four ONNX models are made in all, where the seed's dynamic run
makes two.

Needs the onnx extra:  pip install -e ".[onnx]"
Run:  python examples/onnxrt_training.py [--epochs N] [--dynamic] [--show-onnx]
"""

from __future__ import annotations

import argparse
from typing import Any, Callable

import torch

import pyframe
from pyframe.backends.onnxrt import onnx_graph_compiler


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.Sequential(
            torch.nn.Linear(10, 32),
            torch.nn.ReLU(),
            torch.nn.Linear(32, 1),
        )

    def forward(self, x):
        return self.layers(x)


def regression_data() -> tuple[torch.Tensor, torch.Tensor, str]:
    """scikit-learn's diabetes set as the seed reads it (features / 10), or a synthetic one alike."""
    try:
        from sklearn.datasets import load_diabetes
    except ImportError:
        g = torch.Generator().manual_seed(0)
        x = torch.randn(442, 10, generator=g) * 0.0476  # the diabetes features' scale (unit L2 norm columns)
        y = 152.0 + x @ (torch.randn(10, 1, generator=g) * 400.0) + 50.0 * torch.randn(442, 1, generator=g)
        return x / 10, y, "synthetic (442, 10): scikit-learn is not installed"
    x, y = load_diabetes(return_X_y=True)
    return (torch.from_numpy(x / 10).to(torch.float32), torch.from_numpy(y).to(torch.float32).reshape(-1, 1),
            "scikit-learn's diabetes set")


def train(model: torch.nn.Module, step_model: Callable[..., Any], epochs: int = 3, batch_size: int = 5,
          verbose: bool = False) -> list[float]:
    """The seed's loop; `step_model` is `model` or a compiled version of it. Returns per-epoch losses."""
    x, y, _ = regression_data()
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=batch_size,
                                         shuffle=True, generator=torch.Generator().manual_seed(0))
    loss_function = torch.nn.L1Loss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-1)
    losses = []
    for epoch in range(epochs):
        current_loss = 0.0
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = loss_function(step_model(inputs), targets)
            loss.backward()
            optimizer.step()
            current_loss += loss.item()
        losses.append(current_loss)
        if verbose:
            print(f"Loss after epoch {epoch + 1}: {current_loss}")
    return losses


def fresh_mlp(seed: int = 0) -> MLP:
    torch.manual_seed(seed)
    return MLP()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--dynamic", action="store_true", help="pass dynamic=True (pyframe: no effect)")
    parser.add_argument("--show-onnx", action="store_true", help="print every ONNX model as text")
    args = parser.parse_args()
    print(f"data: {regression_data()[2]}")

    print("--- eager")
    eager_model = fresh_mlp()
    eager = train(eager_model, eager_model, args.epochs, verbose=True)

    print('--- pyframe.optimize("onnxrt")')
    model = fresh_mlp()
    compiled = pyframe.optimize("onnxrt", dynamic=args.dynamic)(model)
    onnx = train(model, compiled, args.epochs, verbose=True)
    torch.testing.assert_close(onnx, eager, rtol=1e-4, atol=0.0)
    print("per-epoch losses equal eager's (rtol 1e-4)")

    print("--- aot_autograd(fw_compiler=onnx_graph_compiler), recording the ONNX models")
    from torch._dynamo.backends.common import aot_autograd

    models: list[tuple[str, Any]] = []

    def recording(kind: str) -> Callable:
        def compiler(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> Callable:
            compiled_fn = onnx_graph_compiler(gm, example_inputs)
            models.append((kind, compiled_fn.onnx_graph.model))
            return compiled_fn
        return compiler

    backend = aot_autograd(fw_compiler=recording("forward"), bw_compiler=recording("backward"))
    model = fresh_mlp()
    by_hand = train(model, pyframe.optimize(backend)(model), args.epochs)
    torch.testing.assert_close(by_hand, eager, rtol=1e-4, atol=0.0)
    print(f"losses {by_hand}: equal to eager's; {len(models)} ONNX models were made "
          f"(a forward and a backward for batches of 5, again for the last batch of 2)")
    import onnx.printer

    for i, (kind, proto) in enumerate(models if args.show_onnx else models[:2]):
        print(f"\n-- model {i}: {kind}")
        print(onnx.printer.to_text(proto.graph))

if __name__ == "__main__":
    main()

"""Corpus: Python constants and tensor metadata folded at trace time; containers built and returned.

Cases tagged ``"nograph"`` compute only with constants and metadata: torch._dynamo makes no graph.
"""

import enum
import math
from typing import Any, Callable, Optional

import numpy as np
import torch

from pyframe.debug.cases import case

SCALE = 3.0
OFFSETS = (1, 2, 3)


@case(inputs=lambda: torch.randn(5))
def constant_arithmetic(x):
    k = 2**3 + 1
    return x * (k / 2) - math.sqrt(2) * math.pi


@case(inputs=lambda: torch.randn(5))
def global_constants(x):
    return x * SCALE + OFFSETS[1]


STEPS = np.int64(8)
RATE = np.float32(0.5)


@case(inputs=lambda: torch.randn(5), difference=(
    "torch._dynamo makes a numpy scalar read from the frame a graph input (G_STEPS_, a 0-d tensor, its ops "
    "in the graph too); pyframe makes it a constant of the graph, guarded by value (a new value recompiles), "
    "so the ops are the same but the graph takes no input for it"))
def numpy_scalar_constants(x):
    """NumPy numbers are constants guarded by value, operands of tensor operators as Python numbers
    (torch._dynamo makes them graph inputs, 0-d tensors: the ops are the same)."""
    return x + STEPS, x * RATE, RATE * x - STEPS


@case(inputs=lambda: torch.randn(3, 4), tags={"nograph"})
def metadata_only(x):
    return x.shape, x.dtype, x.size(), x.dim(), x.size(1) * 2, x.numel()


@case(inputs=lambda: torch.randn(2, 6), tags={"nograph"})
def dtype_and_shape_tests(x):
    return x.dtype == torch.float32, x.is_floating_point(), len(x.shape), x.shape[-1] // 2


@case(inputs=lambda: torch.randn(2, 3, 4))
def shape_driven_view(x):
    batch = x.shape[0]
    return x.view(batch, -1), x.new_zeros(x.size()), x.sum() / x.numel()


@case(inputs=lambda: torch.randn(6))
def slice_by_shape_arithmetic(x):
    half = x.shape[-1] // 2
    return x[:half] * x[half:]


@case(inputs=lambda: torch.randn(4))
def return_containers(x):
    return (x + 1, [x * 2, 3, "label"], {"double": x + x, "n": x.dim()})


@case(inputs=lambda: (torch.randn(3), torch.randn(3)))
def build_list_then_sum(a, b):
    items = [a, b, a * b]
    pair = (items[0], items[-1])
    return torch.stack(items).sum(0) + pair[1], len(items)


class _Channel(enum.IntEnum):
    RED = 1
    GREEN = 2


@case(inputs=lambda: torch.randn(2, 3))
def int_enum_members(x):
    """IntEnum members passed to tensor ops: plain ints in the graph's code, as Dynamo writes them."""
    return x * _Channel.GREEN + torch.full((2, 3), _Channel.RED), x.roll(_Channel.RED, dims=(_Channel.RED,))


@case(inputs=lambda: torch.randn(4))
def python_scalar_types_as_dtypes(x):
    """Python's int, float and bool given where torch takes a dtype (llama4's `.to(int)`): the graph
    names torch.int64, torch.float64 and torch.bool, as torch._dynamo's does."""
    return x.to(int) + torch.zeros(4, dtype=float).to(x.dtype), torch.full((2,), 3, dtype=bool)


@case(inputs=lambda: torch.randn(3))
def type_expressions_in_annotations(x):
    """A nested function's annotations are evaluated at its `def`: `list[int] | None`,
    `Callable[[Any], bool] | None`, `Optional[T]` are constants (torch's pytree helpers define such
    functions inside the calls vmap makes)."""
    def scale(a: list[int] | None = None, pred: Callable[[Any], bool] | None = None) -> Optional[float]:
        return 2.0 if a is None else float(len(a))

    kinds = (dict[str, int] | None, Optional[int], Callable[[Any], bool])
    return x * scale() + len(kinds)

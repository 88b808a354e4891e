"""Corpus: torch function modes entered inside a compiled function (`with Mode():`).

While a torch.overrides.TorchFunctionMode is on the stack, every overridable torch call (a torch
function, a Tensor method, an operator on tensors, an aten op) goes through its
`__torch_function__(func, types, args, kwargs)`, with the mode popped meanwhile. torch._dynamo 2.13
traces the mode's method inline, so the graph holds what the mode called: the same for pyframe.
"""

import torch
from torch.overrides import TorchFunctionMode

from pyframe.debug.cases import case


class _AddIsSub(TorchFunctionMode):
    """Turns torch.add into torch.sub; everything else passes through."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.add:
            return torch.sub(*args, **(kwargs or {}))
        return func(*args, **(kwargs or {}))


class _MulIsAdd(TorchFunctionMode):
    """Turns the `*` operator (Tensor.mul, as eager hands it to the mode) into an addition."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.Tensor.mul:
            return args[0] + args[1]
        return func(*args, **(kwargs or {}))


class _IndexWithTensors(TorchFunctionMode):
    """`t[i, j]` with tensor or int indices as one aten.index over tensors (the shape of
    torch._dynamo's TransformGetItemToIndex, which transformers' masks index through)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.Tensor.__getitem__:
            index = args[1] if isinstance(args[1], tuple) else (args[1],)
            if all(isinstance(i, (torch.Tensor, int)) for i in index):
                tensors = [torch.tensor(i) if isinstance(i, int) else i for i in index]
                return torch.ops.aten.index(args[0], tensors)
        return func(*args, **(kwargs or {}))


@case(inputs=lambda: torch.randn(4))
def mode_replaces_a_torch_function(x):
    """torch.add inside the block is a subtraction; outside it, an addition."""
    with _AddIsSub():
        y = torch.add(x, 1.0) * 2
    return torch.add(y, 1.0)


@case(inputs=lambda: torch.randn(4))
def mode_sees_the_operators(x):
    """`x * 3` reaches the mode as Tensor.mul, `x - 1` as Tensor.sub, `2 - x` as Tensor.__rsub__
    with the tensor first, `x[0]` as Tensor.__getitem__ (passed through)."""
    with _MulIsAdd():
        return x * 3 - 1, 2 - x, 2 * x, x[0]


@case(inputs=lambda: (torch.randn(3, 5), torch.tensor([0, 2])))
def mode_turns_indexing_into_aten_index(x, rows):
    """Indexing by tensors and ints inside the mode is aten.index on tensors."""
    with _IndexWithTensors():
        picked = x[rows, 1]
    return picked + x[0, 0]


@case(inputs=lambda: torch.randn(4))
def nested_modes_innermost_first(x):
    """Two modes: the inner sees each call first; its own calls go to the outer one."""
    with _AddIsSub():
        with _MulIsAdd():
            return torch.add(x * 2, 1.0)


class _Scale(torch.autograd.Function):
    """An autograd.Function whose own `apply` calls Function.apply through super()."""

    @staticmethod
    def forward(x, factor):
        return x * factor

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.factor = inputs[1]

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.factor, None

    @classmethod
    def apply(cls, *args, **kwargs):
        return super().apply(*args, **kwargs)


@case(inputs=lambda: torch.randn(4))
def autograd_function_with_its_own_apply(x):
    """`super().apply(...)` in the class's own apply is Function.apply: the forward is traced."""
    return _Scale.apply(x, 3.0).sin()

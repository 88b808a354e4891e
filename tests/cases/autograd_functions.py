"""Corpus: torch.autograd.Function.apply inside a compiled function, one graph each.

When an input requires grad, torch._dynamo 2.13 traces forward and backward into subgraphs and
records one `autograd_function_apply` higher-order op (then a `getitem` per tensor output); when
none does, or grad mode is off, it inlines the forward. The results compared here are the forward
outputs; tests/test_autograd_function.py checks the gradients (the custom backward's) against eager.
"""

import torch
import torch.nn as nn

from pyframe.debug.cases import Inputs, case

_W = torch.linspace(-1.0, 1.0, 4)


def _leaf(*shape):
    return torch.randn(*shape, requires_grad=True)


class ScaledSin(torch.autograd.Function):
    """A tensor and a constant argument; the constant kept on ctx, the input saved. Its backward
    deliberately is not the derivative of forward (3 * g * k): only the custom backward gives it."""

    @staticmethod
    def forward(ctx, x, k):
        ctx.save_for_backward(x)
        ctx.k = k
        return x.sin() * k

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 3 * grad * ctx.k, None


class SavedProduct(torch.autograd.Function):
    """Two saved inputs and a constant stored on ctx (`ctx.scale = 2`)."""

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        ctx.scale = 2
        return x * y

    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        return grad * y * ctx.scale, grad * x * ctx.scale


class OnlyNeededGrads(torch.autograd.Function):
    """`ctx.needs_input_grad`: a gradient only for the inputs that require one."""

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x * y + y

    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        gx = grad * y if ctx.needs_input_grad[0] else None
        gy = grad * (x + 1) if ctx.needs_input_grad[1] else None
        return gx, gy


class MaxWithIndex(torch.autograd.Function):
    """Two outputs, the index marked non-differentiable (`ctx.mark_non_differentiable`)."""

    @staticmethod
    def forward(ctx, x):
        index = x.argmax(dim=0, keepdim=True)
        ctx.mark_non_differentiable(index)
        ctx.save_for_backward(x, index)
        return x.gather(0, index), index

    @staticmethod
    def backward(ctx, grad, grad_index):
        x, index = ctx.saved_tensors
        return torch.zeros_like(x).scatter(0, index, grad)


class ExpSetupContext(torch.autograd.Function):
    """forward without ctx, and a `setup_context` staticmethod that saves the output."""

    @staticmethod
    def forward(x, k):
        return x.exp() * k

    @staticmethod
    def setup_context(ctx, inputs, output):
        _, k = inputs
        ctx.save_for_backward(output)
        ctx.k = k

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return grad * out, None


class StashedMatmul(torch.autograd.Function):
    """A tensor kept as a ctx attribute (`ctx.x = x`), and a shape read while tracing."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.x = x
        ctx.rows = x.shape[0]
        return x @ w

    @staticmethod
    def backward(ctx, grad):
        return None, ctx.x.t() @ grad / ctx.rows


class TripleGrad(torch.autograd.Function):
    """A clone whose backward triples the gradient."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return 3 * grad


class SumAndProduct(torch.autograd.Function):
    """Two tensor outputs and a constant one."""

    @staticmethod
    def forward(ctx, x, y):
        return x + y, x * y, 2

    @staticmethod
    def backward(ctx, grad_sum, grad_product, grad_constant):
        return grad_sum + grad_product, grad_sum - grad_product


class TimesGlobal(torch.autograd.Function):
    """forward and backward read a global tensor: an extra input of the forward graph, saved for
    the backward graph, with no gradient."""

    @staticmethod
    def forward(ctx, x):
        return x * _W

    @staticmethod
    def backward(ctx, grad):
        return grad * _W * 10


class DoubleInPlace(torch.autograd.Function):
    """Changes its input in place and says so (`ctx.mark_dirty`)."""

    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


class ScaleByKeyword(torch.autograd.Function):
    """A keyword argument to apply, moved to its position as eager's apply does."""

    @staticmethod
    def forward(ctx, x, scale=3.0):
        ctx.scale = scale
        return x * scale

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        return grad * ctx.scale * 2, None


@case(inputs=lambda: _leaf(6))
def apply_with_constant_argument(x):
    return ScaledSin.apply(x, 2.0).sum()


@case(inputs=lambda: (_leaf(5), _leaf(5)))
def save_for_backward_and_ctx_attribute(x, y):
    return SavedProduct.apply(x, y) + 1


@case(inputs=lambda: (_leaf(5), torch.randn(5)))
def needs_input_grad(x, y):
    return OnlyNeededGrads.apply(x, y).relu()


@case(inputs=lambda: _leaf(7))
def mark_non_differentiable(x):
    value, index = MaxWithIndex.apply(x)
    return value * 2, index


@case(inputs=lambda: _leaf(4))
def setup_context_style(x):
    return ExpSetupContext.apply(x, 0.5)


@case(inputs=lambda: (torch.randn(3, 4), _leaf(4, 2)))
def tensor_stored_on_ctx(x, w):
    return StashedMatmul.apply(x, w).tanh()


@case(inputs=lambda: (_leaf(4), _leaf(4)))
def several_outputs(x, y):
    total, product, two = SumAndProduct.apply(x, y)
    return total * two + product


@case(inputs=lambda: _leaf(4))
def global_tensor_in_forward(x):
    return TimesGlobal.apply(x.cos())


@case(inputs=lambda: _leaf(4))
def mark_dirty_in_place(x):
    y = x * 1.0
    z = DoubleInPlace.apply(y)
    return z + 1, y is z


@case(inputs=lambda: _leaf(4))
def keyword_argument_and_once_differentiable(x):
    return ScaleByKeyword.apply(x, scale=0.5) + ScaleByKeyword.apply(x)


@case(inputs=lambda: _leaf(4))
def two_functions_chained(x):
    return TripleGrad.apply(ScaledSin.apply(x, 1.5)).sum()


@case(inputs=lambda: torch.randn(4))
def inputs_without_grad_inline_forward(x):
    """No input requires grad: the forward is inlined (no higher-order op)."""
    return TripleGrad.apply(x) * 2 + ScaledSin.apply(x, 2.0)


@case(inputs=lambda: _leaf(4))
def under_no_grad(x):
    """Grad mode off: the forward is inlined inside the no_grad block."""
    with torch.no_grad():
        y = TripleGrad.apply(x) * 2
    return y + x


@case(inputs=lambda: Inputs((torch.randn(2, 6),)))
class FunctionInModuleForward(nn.Module):
    """Called in an nn.Module's forward on a Linear's output (which requires grad)."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(6, 4)

    def forward(self, x):
        return TripleGrad.apply(self.linear(x)).relu()

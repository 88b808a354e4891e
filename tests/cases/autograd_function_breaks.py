"""Corpus: torch.autograd.Function.apply where tracing stops, and the call runs eagerly.

What cannot be traced in forward or backward breaks the graph at the `apply` call (as in
torch._dynamo 2.13): the call runs as plain Python, and its forward, called by autograd, is
compiled as a frame of its own (its graphs are counted too).
"""

import torch

from pyframe.debug.cases import case


def _leaf(*shape):
    return torch.randn(*shape, requires_grad=True)


class PrintsInForward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        print("forward")
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


class BranchesInForward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        if x.sum() > 0:
            return x * 2
        return x * 3

    @staticmethod
    def backward(ctx, grad):
        return grad


class PrintsInBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        print("backward")
        return grad * 2


class Product(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x * y

    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        return grad * y, grad * x


class WithJvp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2

    @staticmethod
    def jvp(ctx, tangent):
        return tangent * 2


class UnmaterializedGrads(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, grad_double, grad_triple):
        grad = grad_double * 2
        if grad_triple is not None:
            grad = grad + grad_triple * 3
        return grad


@case(inputs=lambda: _leaf(5), tags={"break"})
def print_in_forward(x):
    """`print` in forward: the apply runs eagerly; forward's frame breaks at the print."""
    return PrintsInForward.apply(x.sin()).cos()


@case(inputs=lambda: _leaf(5), tags={"break"})
def branch_on_tensor_in_forward(x):
    return BranchesInForward.apply(x + 1) - 1


@case(inputs=lambda: _leaf(5), tags={"break"})
def print_in_backward(x):
    """Backward cannot be traced: the apply runs eagerly (backward runs later, in .backward())."""
    return PrintsInBackward.apply(x.sin()).cos()


@case(inputs=lambda: _leaf(5), tags={"break"})
def same_tensor_passed_twice(x):
    """torch._dynamo breaks on a tensor passed to two inputs of forward; so does pyframe."""
    y = x.exp()
    return Product.apply(y, y) + 1


@case(inputs=lambda: _leaf(5), tags={"break"})
def custom_jvp(x):
    return WithJvp.apply(x.sin()).cos()


@case(
    inputs=lambda: _leaf(5),
    tags={"break"},
    difference=(
        "torch._dynamo traces ctx.set_materialize_grads(False) and drops it: its backward is "
        "traced with gradient tensors (zeros at run time) where eager passes None, so a backward "
        "testing `is None` (as this one) is traced down the other branch; pyframe breaks at the "
        "apply and runs it eagerly"
    ),
)
def set_materialize_grads_false(x):
    double, triple = UnmaterializedGrads.apply(x.sin())
    return double.cos()

"""Corpus: functions and callables as objects. Attributes of functools.partial objects, of functions
made in the frame and of builtins, read and branched on; attributes set on a function or a tensor
(replayed after the graph); a nested function handed to a tensor operation."""

import functools

import torch

from pyframe.debug.cases import case


def _scaled_add(x, y, scale=1.0):
    return (x + y) * scale


_ADD_TWICE = functools.partial(torch.add, alpha=2)


@case(inputs=lambda: (torch.randn(4), torch.randn(4)))
def partial_attributes(x, y):
    """A partial made in the frame and one passed as a global: .func, .args, .keywords read back."""
    p = functools.partial(_scaled_add, x, scale=3.0)
    out = p.func(*p.args, y, **p.keywords)
    if p.keywords["scale"] > 2 and len(p.args) == 1:
        out = out + _ADD_TWICE.func(x, y, **_ADD_TWICE.keywords)
    return out


@case(inputs=lambda: torch.randn(4))
def nested_function_attributes(x):
    """The attributes of a function made in the frame are known while tracing."""

    def inner(a, b=2.0, *, c=3.0):
        return a * b + c

    y = inner(x)
    if inner.__name__ == "inner" and inner.__qualname__.endswith("<locals>.inner"):
        y = y + len(inner.__module__)
    if inner.__code__.co_argcount == 2 and not inner.__dict__:
        y = y * inner.__code__.co_kwonlyargcount
    return y


@case(inputs=lambda: torch.randn(4), difference=(
    "torch._dynamo cannot read __closure__ of a function made in the frame and runs the frame as "
    "Python (its one graph is the inlined function's, compiled on its own); pyframe reads the "
    "cells and traces the frame in one graph"))
def closure_cells_of_a_nested_function(x):
    """__closure__ of a function made in the frame: its cells and their contents."""
    scale = 2.5
    shift = x.cos()

    def inner(a):
        return a * scale + shift

    cells = inner.__closure__
    return inner(x) + cells[0].cell_contents * len(cells), cells[1].cell_contents


@case(inputs=lambda: torch.randn(4))
def wraps_made_in_the_frame(x):
    """functools.wraps over a nested function: the wrapper's __wrapped__, __name__ and __doc__."""

    def base(a):
        """Doubles."""
        return a * 2

    @functools.wraps(base)
    def wrapper(a):
        return base(a) + 1

    y = wrapper(x)
    if wrapper.__wrapped__ is base and wrapper.__name__ == "base" and wrapper.__doc__ == "Doubles.":
        y = wrapper.__wrapped__(y)
    return y


@case(inputs=lambda: torch.randn(4))
def builtin_function_attributes(x):
    """__name__ and __self__ of builtins and of bound builtin methods."""
    y = x.sin()
    if len.__name__ == "len" and torch.sin.__name__ == "sin":
        y = y + 1
    if x.add.__name__ == "add" and x.mul.__name__ == "mul":
        y = y * 2
    return y


def _counted(a):
    return a + 1


@case(inputs=lambda: torch.randn(4))
def attribute_set_on_a_function(x):
    """`fn.calls = 0` on a function made in the frame, read back while tracing."""

    def step(a):
        return a * 2

    step.calls = 0
    x = step(x)
    step.calls += 1
    return x * step.calls + _counted(x) * len(step.__dict__)


@case(inputs=lambda: torch.randn(4))
def attribute_set_on_a_tensor(x):
    """`t.tag = "a"` on a tensor made in the frame, read back while tracing."""
    y = x * 2
    y.tag = "scaled"
    y.factor = 3
    if y.tag == "scaled":
        y = y * y.factor
    return y


@case(inputs=lambda: torch.randn(4, requires_grad=True))
def hook_is_a_nested_function(x):
    """A nested function registered as a gradient hook of an input tensor."""
    factor = 3.0

    def hook(grad):
        return grad * factor

    x.register_hook(hook)
    return (x * 2).sin()


@case(inputs=lambda: torch.randn(4))
def functions_kept_in_a_dict_and_called_by_name(x):
    """Nested functions chosen by their __name__ from a table built in the frame."""

    def double(a):
        return a * 2

    def negate(a):
        return -a

    table = {f.__name__: f for f in (double, negate)}
    return table["negate"](table["double"](x))


@case(inputs=lambda: torch.randn(3), difference=(
    "not yet traced: torch._dynamo captures torch.func.grad as a higher-order op; pyframe runs the frame as Python (the function's frame, called by functorch on its wrapped tensors, runs as Python too)"))
def function_transform_of_a_nested_function(x):
    """torch.func.grad of a function made in the frame."""

    def loss(a):
        return (a.sin() * 2).sum()

    return torch.func.grad(loss)(x)


@case(inputs=lambda: torch.randn(3, requires_grad=True))
def hook_of_a_nested_function_on_an_input(x):
    """x.register_hook(fn) with a closure made in the frame: registered after the graph."""
    scale = x.detach().abs() + 1

    def hook(grad):
        return grad * scale

    x.register_hook(hook)
    return (x * 3).sum()


@case(inputs=lambda: (torch.randn(4, requires_grad=True), torch.randn(4)))
def hook_on_a_tensor_the_graph_makes(x, w):
    """`y.register_hook(fn)` with a closure over a tensor of the frame, on a tensor the graph made:
    the hook is traced into a graph of its own, registered by the register_hook op (torch._dynamo
    2.13's), and later uses of y take the op's result."""
    y = x * 3
    k = w + 1

    def hook(grad):
        return grad * k

    y.register_hook(hook)
    z = x * 2
    z.register_hook(lambda grad: None)
    return y.sum() + z.sum()


@case(inputs=lambda: torch.randn(4))
def annotations_of_a_nested_function(x):
    """`f.__annotations__` of a function made in the frame with annotations: MAKE_FUNCTION's
    name/value pairs, read as a dict (and kept where the function is rebuilt)."""
    def scale(t: torch.Tensor, k: int = 2) -> torch.Tensor:
        return t * k

    ann = scale.__annotations__
    return scale(x) * len(ann) + (ann["k"] is int) + (ann["return"] is torch.Tensor)

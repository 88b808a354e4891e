"""Corpus: control flow decided while tracing: loops over iterables of known length (unrolled),
`while` on Python values, branches on constants, shapes, types and None, and with-statements on
context managers written in Python."""

import contextlib

import torch

from pyframe.debug.cases import Inputs, case


@case(inputs=lambda: torch.randn(4))
def for_range_with_break_and_continue(x):
    for i in range(10):
        if i == 1:
            continue
        if i > 4:
            break
        x = x * 0.5 + i
    return x


@case(inputs=lambda: (torch.randn(4), torch.randn(4)))
def enumerate_zip_reversed(x, y):
    total = x
    for i, (a, b) in enumerate(zip(reversed([x, y]), [1.0, 2.0]), start=1):
        total = total + a * b * i
    return total


@case(inputs=lambda: torch.randn(4))
def dict_items_loop(x):
    weights = {"a": 1.0, "b": -2.0}
    out = x
    for name, w in weights.items():
        out = out + x * w if name == "a" else out - x * w
    return out


@case(inputs=lambda: torch.randn(3, 4))
def loop_over_tensor_rows(x):
    return torch.stack([row * i for i, row in enumerate(x)])


@case(inputs=lambda: torch.randn(8))
def while_on_shape(x):
    while x.shape[0] > 2:
        x = x[1:] + x[:-1]
    return x


@case(inputs=lambda: torch.randn(4))
def while_counter(x):
    i = 0
    while i < 3:
        x = x + i
        i += 1
    return x


@case(inputs=lambda: torch.randn(2, 3, 4))
def branch_on_dim_and_shape(x):
    if x.dim() == 3 and x.shape[-1] % 2 == 0:
        x = x.flatten(1)
    if x.size(0) > 4:
        return x.sum()
    return x.mean(0)


@case(inputs=lambda: Inputs((torch.randn(4),), {"mask": None}))
def branch_on_none(x, mask=None, scale=None):
    if mask is not None:
        x = x * mask
    scale = 2.0 if scale is None else scale
    return x * scale


@case(inputs=lambda: (torch.randn(4), [1, 2, 3]))
def branch_on_isinstance(x, extra):
    if isinstance(extra, (list, tuple)):
        return x + len(extra)
    return x * 2


@case(inputs=lambda: torch.randn(4))
def branch_on_dtype_and_grad_mode(x):
    if x.dtype == torch.float32 and x.is_floating_point():
        x = x.to(torch.float64) * 2
    if torch.is_grad_enabled():
        x = x + 1
    return x


@case(inputs=lambda: torch.randn(4))
def nested_loops(x):
    out = x
    for i in range(2):
        for j in range(2):
            out = out + x * (i * 2 + j)
    return out


@contextlib.contextmanager
def _scaled(factor):
    yield factor * 2


class _Depth:
    """A context manager written as a class: __enter__ / __exit__ are inlined."""

    def __init__(self):
        self.depth = 0

    def __enter__(self):
        self.depth += 1
        return self

    def __exit__(self, *exc):
        self.depth -= 1
        return False


@case(inputs=lambda: torch.randn(4))
def with_generator_context_manager(x):
    with _scaled(3) as k:
        y = x * k
    with contextlib.nullcontext(2.0) as two:
        y = y + two
    return y


@case(inputs=lambda: torch.randn(4))
def with_class_context_manager(x):
    depth = _Depth()
    with depth as d:
        y = x + d.depth
    return y * (depth.depth + 1)


@case(inputs=lambda: torch.randn(4))
def set_algebra_on_constants(x):
    s = {1, 2, 3} | {4}
    s.discard(1)
    return x * len(s) + (2 in s) + len({1, 2} & {2, 3})


@case(inputs=lambda: torch.randn(4, requires_grad=True))
def grad_mode_blocks_that_change_nothing(x):
    """Blocks that set the mode already in force record nothing (torch._dynamo coalesces them)."""
    with torch.enable_grad():
        y = x * 3
    with torch.no_grad():
        z = x + 1
        with torch.no_grad():
            z = z * 2
        with torch.set_grad_enabled(False):
            z = z - 1
    return y, z, y.requires_grad, z.requires_grad


@case(inputs=lambda: torch.randn(4, requires_grad=True))
def grad_mode_blocks_back_to_back(x):
    """Leaving one block and entering the next with the same mode: the two switches cancel."""
    with torch.no_grad():
        a = x + 1
    with torch.no_grad():
        b = a * 2
    c = b + x
    with torch.enable_grad():
        d = c.sin()
    return d, d.requires_grad

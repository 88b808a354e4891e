"""Torch function modes entered in traced code (pyframe/translator/variables/torch_function_modes.py):
what the mode does reaches the graph, a break inside the mode keeps eager's result, and nothing is
left on torch's real stack."""
from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode

import pyframe
from pyframe.debug.compare import CountingBackend


class AddIsSub(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.add:
            return torch.sub(*args, **(kwargs or {}))
        return func(*args, **(kwargs or {}))


def test_a_break_inside_the_mode_runs_the_frame_as_python_with_the_mode():
    def f(x):
        with AddIsSub():
            y = torch.add(x, 1.0)
            print("", end="")  # a break while the mode is on the stack
            return torch.add(y, 1.0)

    x = torch.randn(3)
    backend = CountingBackend()
    torch.testing.assert_close(pyframe.optimize(backend)(f)(x), x - 2.0)
    assert torch._C._len_torch_function_stack() == 0


def test_a_mode_made_outside_the_frame_and_entered_inside():
    mode = AddIsSub()

    def f(x, m):
        with m:
            return torch.add(x, 1.0) * 2

    x = torch.randn(3)
    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(f)
    torch.testing.assert_close(compiled(x, mode), (x - 1.0) * 2)
    torch.testing.assert_close(compiled(x, mode), (x - 1.0) * 2)
    assert len(backend.graphs) == 1
    assert torch._C._len_torch_function_stack() == 0


def test_the_stack_length_seen_inside_the_mode():
    class Depth(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    def f(x):
        before = torch._C._len_torch_function_stack()
        with Depth():
            inside = torch._C._len_torch_function_stack()
            y = x + 1
        return y * (inside - before)

    x = torch.randn(3)
    backend = CountingBackend()
    torch.testing.assert_close(pyframe.optimize(backend)(f)(x), f(x))
    assert len(backend.graphs) == 1

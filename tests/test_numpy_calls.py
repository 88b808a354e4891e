"""NumPy functions called by traced code on values known while tracing are folded into constants
(pyframe/translator/variables/numpy_functions.py), where torch._dynamo 2.13 traces them into its
graph through torch._numpy (`wrapped_lcm`, `wrapped_ceil`...), often with graph breaks around
them: library code computes chunk sizes and paddings this way (transformers' Reformer: `np.lcm`,
`np.sqrt`). Results are compared with eager, graphs counted. NumPy calls on arrays are traced into
the graph through torch._numpy, as torch._dynamo traces them (tests/test_numpy_graphs.py); reading
an array's value into Python (`float(np.mean(a))`) is a graph break.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import pyframe
from pyframe.debug.compare import CountingBackend


def lcm_chunk(x):
    k = int(np.lcm(4, 6))
    return x.reshape(-1, k).sum(-1) / np.sqrt(16)


def ceil_pad(x, n):
    pad = int(np.ceil(n / 4) * 4) - n
    return torch.nn.functional.pad(x, (0, pad)), pad


def numpy_comparisons(x):
    k = np.int64(8)
    if k % 4 != 0:  # np.False_: a NumPy bool, a constant
        return x - 1
    return x * float(np.log2(k)), type(k % 4 != 0).__name__, np.prod((2, 3)), type(np.prod((2, 3))).__name__


@pytest.mark.parametrize("fn, args", [(lcm_chunk, lambda: (torch.ones(24),)),
                                      (ceil_pad, lambda: (torch.ones(2, 5), 5)),
                                      (numpy_comparisons, lambda: (torch.ones(3),))])
def test_numpy_calls_on_constants_are_folded(fn, args):
    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(fn)
    for _ in range(2):
        out, expected = compiled(*args()), fn(*args())
        if isinstance(expected, tuple):
            torch.testing.assert_close(out[0], expected[0])
            assert out[1:] == expected[1:] and [type(v) for v in out[1:]] == [type(v) for v in expected[1:]]
        else:
            torch.testing.assert_close(out, expected)
    assert len(backend.graphs) == 1
    assert not any("wrapped" in op or "np" in op for op in backend.graphs[0].ops)


def test_a_numpy_value_read_into_python_is_a_graph_break():
    """The calls on the array are in the graph (as torch._dynamo records them); float() of their
    result, a NumPy scalar, reads it into Python: the break."""
    def fn(x):
        y = x * 2
        scale = float(np.mean(np.array([1.0, 3.0])))
        return y * scale

    backend = CountingBackend()
    torch.testing.assert_close(pyframe.optimize(backend)(fn)(torch.ones(3)), fn(torch.ones(3)))
    assert backend.graphs[0].ops == ("mul", "wrapped_array", "wrapped_mean")
    explained = pyframe.explain(fn)(torch.ones(3))
    assert explained.graph_break_count >= 1
    assert any("numpy" in str(b.reason) for b in explained.break_reasons)

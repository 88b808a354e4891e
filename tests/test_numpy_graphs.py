"""NumPy code on arrays in the graph (pyframe/translator/variables/ndarray.py): what the corpus
(tests/cases/numpy_arrays.py) does not show. Graphs compared with torch._dynamo's where it is right;
results always with eager's, ndarrays as arrays of the same dtype and kind (an array is no NumPy
scalar); where torch._dynamo gives another result than eager (a 0-d array for a NumPy scalar,
torch._numpy's dtype for NumPy's, NumPy's generator replaced by torch's), pyframe gives eager's."""
from __future__ import annotations

import gc
import subprocess
import sys
import weakref

import numpy as np
import pytest
import torch
import torch._dynamo

import pyframe
from pyframe.debug.compare import CountingBackend, assert_same_result


def _run(engine: str, fn, make_args, calls: int = 2):
    """(graphs, results) of `calls` calls of fn compiled by `engine` on fresh arguments."""
    backend = CountingBackend()
    if engine == "dynamo":
        torch._dynamo.reset()
        compiled = torch.compile(fn, backend=backend)
    else:
        pyframe.reset()
        compiled = pyframe.optimize(backend)(fn)
    results = []
    for _ in range(calls):
        torch.manual_seed(0)
        results.append(compiled(*make_args()))
    return backend.graphs, results


def _eager(fn, make_args):
    torch.manual_seed(0)
    return fn(*make_args())


# -- programs whose graphs are torch._dynamo's ---------------------------------------------------


def clip_and_norms(x):
    a = x.numpy()
    return torch.from_numpy(np.clip(a, a_min=-0.5, a_max=0.5) + np.linalg.norm(a, axis=1, keepdims=True))


def stacked_views(x):
    a = x.numpy()
    b = np.stack([a, a * 2], axis=0).reshape(2, -1)
    return torch.from_numpy(b.mean(axis=1) - np.maximum(b, 0).sum(axis=1))


def comparisons_and_logic(x):
    a = x.numpy()
    m = (a > 0) & (a < 1) | (a == 0)
    return torch.from_numpy(np.where(m, a, -a)), torch.from_numpy(m.astype(np.int64).sum(axis=0))


def arrays_passed_in(a, b):
    return np.matmul(a, b.T) + 1.0


def array_and_tensor_passed_in(a, x):
    y = torch.from_numpy(np.exp(a)) * x
    return y.sum(), np.abs(a)


def numpy_then_torch_then_numpy(x):
    a = x.relu().numpy()
    t = torch.as_tensor(np.sqrt(a + 1.0)).softmax(-1)
    return t.numpy() * 2


SAME_GRAPHS = [
    (clip_and_norms, lambda: (torch.randn(3, 4),)),
    (stacked_views, lambda: (torch.randn(3, 4),)),
    (comparisons_and_logic, lambda: (torch.randn(3, 4),)),
    (arrays_passed_in, lambda: (np.arange(6.0).reshape(2, 3), np.ones((4, 3)))),
    (array_and_tensor_passed_in, lambda: (np.linspace(0.0, 1.0, 6).reshape(2, 3), torch.ones(2, 3, dtype=torch.float64))),
    (numpy_then_torch_then_numpy, lambda: (torch.randn(2, 5),)),
]


@pytest.mark.parametrize("fn, make_args", SAME_GRAPHS, ids=[fn.__name__ for fn, _ in SAME_GRAPHS])
def test_graphs_are_dynamos(fn, make_args):
    theirs, their_results = _run("dynamo", fn, make_args)
    ours, our_results = _run("pyframe", fn, make_args)
    expected = _eager(fn, make_args)
    for result in (*our_results, *their_results):  # (torch._dynamo is right here, or this proves nothing)
        assert_same_result(result, expected)
    assert [g.ops for g in ours] == [g.ops for g in theirs]
    assert [g.code for g in ours] == [g.code for g in theirs]
    assert len(ours) == 1


# -- arrays passed in: guards ----------------------------------------------------------------------


def test_an_array_passed_in_is_guarded_by_dtype_shape_and_strides():
    def fn(a, x):
        return x + torch.from_numpy(a * 2)

    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(fn)
    arrays = [np.ones((2, 3)), np.full((2, 3), 2.0),  # a new array, the same metadata: a hit
              np.ones((2, 3), dtype=np.float32), np.ones((3, 3)), np.ones((2, 6))[:, ::2]]
    for a in arrays:
        x = torch.ones(a.shape, dtype=torch.float64)
        assert_same_result(compiled(a, x), fn(a, x))
    assert len(backend.graphs) == 4
    guards = [e.guards for e in pyframe.debug.cache_entries(fn)]
    assert all("type(L['a']) is numpy.ndarray" in g for g in guards)
    assert any("L['a'].dtype == dtype('float64')" in g and "L['a'].shape == (2, 3)" in g
               and "L['a'].strides == (24, 8)" in g for g in guards)
    assert any("L['a'].strides == (48, 16)" in g for g in guards)  # (every other column)


def test_an_array_passed_in_and_returned_is_the_same_object():
    def fn(a, x):
        return a, x + 1

    a = np.ones(3)
    out = pyframe.optimize(CountingBackend())(fn)(a, torch.ones(3))
    assert out[0] is a


def test_an_array_changed_in_place_is_changed_for_the_caller():
    def fn(a):
        a *= 3
        a[0] = -1.0
        return np.sum(a)

    mine, theirs = np.arange(4.0), np.arange(4.0)
    assert_same_result(pyframe.optimize(CountingBackend())(fn)(mine), fn(theirs))
    np.testing.assert_array_equal(mine, theirs)


# -- what eager gives, where torch._dynamo gives something else --------------------------------------


def test_numpy_scalars_are_numpy_scalars():
    """A reduction or an element is a NumPy scalar (np.float32), `a[...]` an array, as in eager
    (torch._dynamo hands back 0-d arrays)."""
    def fn(x):
        a = x.numpy()
        s = a.sum()
        return s, a[0, 0], a[...], isinstance(s, np.ndarray), type(s).__name__

    backend = CountingBackend()
    x = torch.randn(3, 4)
    out = pyframe.optimize(backend)(fn)(x)
    assert_same_result(out, fn(x))
    assert type(out[0]) is np.float32 and type(out[2]) is np.ndarray
    assert len(backend.graphs) == 1


def test_a_dtype_torch_numpy_computes_otherwise_is_a_graph_break():
    """torch._numpy divides int64 arrays into float32 (torch's default dtype), NumPy into float64:
    the division runs in Python, the rest is in the graph."""
    def fn(a):
        return a / 2, a // 2

    a = np.arange(6).reshape(2, 3)
    backend = CountingBackend()
    assert_same_result(pyframe.optimize(backend)(fn)(a), fn(a))
    reasons = [str(b.reason) for b in pyframe.explain(fn)(a).break_reasons]
    assert any("torch._numpy gives float32 where NumPy gives float64" in r for r in reasons), reasons


@pytest.mark.parametrize("fn, reason", [
    (lambda x: torch.from_numpy(x.numpy() + np.random.rand(3)), "numpy.random"),
    (lambda x: np.sin(x) * 2, "numpy.sin() of a tensor"),
    (lambda x: (x.numpy() * 2, x.numpy().dtype), "numpy.ndarray.dtype"),
    (lambda x: x.numpy().tolist(), "numpy.ndarray.tolist()"),
], ids=["numpy_random", "ufunc_of_a_tensor", "dtype", "tolist"])
def test_what_is_not_traced_breaks_the_graph_and_gives_eagers_result(fn, reason):
    backend = CountingBackend()
    np.random.seed(0)
    out = pyframe.optimize(backend)(fn)(torch.ones(3))
    np.random.seed(0)
    assert_same_result(out, fn(torch.ones(3)))
    reasons = [str(b.reason) for b in pyframe.explain(fn)(torch.ones(3)).break_reasons]
    assert any(reason in r for r in reasons), reasons


def test_numpy_of_a_tensor_that_requires_grad_raises_as_in_eager():
    def fn(x):
        return torch.from_numpy(x.numpy() + 1)

    x = torch.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="requires grad"):
        fn(x)
    with pytest.raises(RuntimeError, match="requires grad"):
        pyframe.optimize(CountingBackend())(fn)(x)


# -- cost: importing pyframe loads nothing of torch._numpy ---------------------------------------


def test_importing_pyframe_does_not_load_torch_numpy():
    """(ndarray.py loads it when a trace first meets NumPy code on an array)"""
    code = ("import sys, torch, pyframe\n"
            "assert 'torch._numpy' not in sys.modules\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


def test_the_graph_callables_live_as_long_as_their_graphs():
    """One callable per node (numpy_ops.py): nothing of pyframe's keeps it once the graph is gone."""
    refs = []

    def backend(gm, example_inputs):
        refs.extend(weakref.ref(n.target) for n in gm.graph.nodes if "wrapped" in getattr(n.target, "__name__", ""))
        return gm.forward

    def fn(x):
        return torch.from_numpy(np.sin(x.numpy()) * 2)

    pyframe.reset()
    pyframe.optimize(backend)(fn)(torch.ones(3))
    assert len(refs) == 2
    pyframe.reset()
    gc.collect()
    assert all(ref() is None for ref in refs)

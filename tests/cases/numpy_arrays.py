"""Corpus: NumPy code on arrays, traced into the graph through torch._numpy as torch._dynamo traces it.

`x.numpy()` is `x.view_as(x)` in the graph, an array the trace holds; NumPy's functions, ufuncs,
methods, attributes and operators on it are calls of `torch._dynamo.utils`-named wrappers of their
torch._numpy counterparts (`wrapped_sin`, `numpy_attr_wrapper`); `torch.from_numpy(a)` is
`torch.as_tensor`; an array passed to the frame is a graph input (the tensor over its memory), and an
array handed back is made an array again after the graph (pyframe/translator/variables/ndarray.py).
Where the program reads an array's data into Python, the break is in tests/cases/graph_breaks.py.
"""

import numpy as np
import torch

from pyframe.debug.cases import case


@case(inputs=lambda: torch.randn(4))
def numpy_round_trip(x):
    """`.numpy()` shares memory with the tensor; numpy arithmetic, then back with torch.from_numpy."""
    y = x + 1
    arr = x.numpy()
    return torch.from_numpy(arr * 2) - y


@case(inputs=lambda: torch.randn(3, 4))
def ufuncs(x):
    a = x.numpy()
    return torch.from_numpy(np.sin(a) + np.exp(a) * np.add(a, 1.0))


@case(inputs=lambda: torch.randn(3, 4))
def reductions(x):
    a = x.numpy()
    return torch.from_numpy(np.sum(a, axis=0) + a.sum(axis=0) + np.mean(a) + a.max())


@case(inputs=lambda: torch.randn(3, 4))
def methods_and_attributes(x):
    """`.T` through numpy_attr_wrapper; shape, ndim and size are constants."""
    a = x.numpy()
    b = a.T.reshape(2, 6).astype(np.float64)
    return torch.from_numpy(b * a.shape[0] + a.ndim + a.size)


@case(inputs=lambda: torch.randn(3, 4))
def operators(x):
    a = x.numpy()
    b = (a + 1) * 2 - a / 3
    c = a @ a.T
    m = a > 0
    return torch.from_numpy(b), torch.from_numpy(c), torch.from_numpy(m), torch.from_numpy(-a ** 2)


@case(inputs=lambda: torch.randn(3, 4))
def where_and_concatenate(x):
    a = x.numpy()
    w = np.where(a > 0, a, 0.0)
    return torch.from_numpy(np.concatenate([w, a], axis=0))


@case(inputs=lambda: torch.randn(3, 4))
def indexing(x):
    a = x.numpy()
    return torch.from_numpy(a[0] + a[:, 1:3].sum(1)[0] + a[1, 2])


@case(inputs=lambda: torch.randn(3, 4))
def item_assignment_and_inplace(x):
    a = x.clone().numpy()
    a += 1
    a[0] = 0.0
    return torch.from_numpy(a)


@case(inputs=lambda: torch.randn(3, 4))
def arrays_made_in_the_graph(x):
    """np.ones of a constant shape and np.zeros_like of an array: calls of the graph."""
    a = x.numpy()
    b = np.ones((3, 4)) + np.zeros_like(a)
    return torch.from_numpy(a * b)


@case(inputs=lambda: torch.randn(3, 4))
def functions_without_a_ufunc(x):
    a = x.numpy()
    return torch.from_numpy(np.clip(np.maximum(a, 0.1), 0.0, 0.5) + np.transpose(a).sum(0)[:3].reshape(3, 1))


@case(inputs=lambda: torch.randn(3, 4))
def returns_an_array(x):
    """The frame returns an ndarray, as eager does: the graph's output made an array again."""
    a = (x * 2).numpy()
    return np.cos(a)


@case(inputs=lambda: torch.randn(3, 4))
def returns_an_array_and_a_tensor(x):
    a = x.numpy()
    return a + 1, x - 1


@case(inputs=lambda: (np.arange(12.0).reshape(3, 4), torch.randn(3, 4)))
def array_argument(a, x):
    """An ndarray passed in is a graph input (`L_a_ : torch.Tensor`), guarded by dtype and shape."""
    return x + torch.from_numpy(np.sin(a))


@case(inputs=lambda: np.arange(12.0, dtype=np.float32).reshape(3, 4))
def array_argument_and_result(a):
    return np.sum(a * 2, axis=1)


@case(inputs=lambda: (np.arange(6.0).reshape(2, 3), torch.ones(2, 3)))
def array_argument_changed_in_place(a, x):
    a += 1
    return x + torch.from_numpy(a)


@case(inputs=lambda: torch.randn(3, 4))
def asarray_of_a_tensor(x):
    a = np.asarray(x)
    return torch.as_tensor(a * 3)


@case(inputs=lambda: torch.randn(3, 4))
def tensor_times_a_numpy_result(x):
    """Tensor ops take arrays as their tensors: `x * s` is the tensor's mul."""
    a = x.numpy()
    s = a.sum()
    return x * s, x * torch.from_numpy(np.abs(a)).sum()


@case(inputs=lambda: torch.randn(3, 4))
def tensor_plus_an_array(x):
    a = np.cos(x.numpy())
    return x + a


@case(inputs=lambda: torch.randn(3, 4))
def length_and_iteration(x):
    a = x.numpy()
    out = a[0] * len(a)
    for row in a:
        out = out + row
    return torch.from_numpy(out)


@case(inputs=lambda: torch.randn(3, 4))
def array_of_constants(x):
    b = np.array([1.0, 2.0, 3.0, 4.0])
    return x * torch.from_numpy(b)


@case(inputs=lambda: torch.randn(3, 4))
def numpy_scalar_operand(x):
    """np.float64(2.0): a NumPy scalar, strongly typed, made in the graph (`wrapped_float64`)."""
    a = x.numpy()
    return torch.from_numpy(a * np.float64(2.0))


@case(inputs=lambda: torch.randn(3, 4))
def list_of_arrays(x):
    a = x.numpy()
    return [a, a + 1, np.concatenate((a, a))]


@case(inputs=lambda: torch.randn(3, 4))
def identity_and_type_of_arrays(x):
    a = x.numpy()
    b = a
    c = a + 0
    return a is b, a is c, isinstance(a, np.ndarray), type(a).__name__, c


@case(inputs=lambda: torch.randn(3, 4))
def copy_then_change_in_place(x):
    """`a.copy()` is a copy: changing it leaves x as it was."""
    a = x.numpy().copy()
    a += 5
    return x, torch.from_numpy(a)


@case(inputs=lambda: torch.randn(3, 4))
def inplace_on_a_view_of_a_tensor(x):
    """`y.numpy()` shares y's memory: `a *= 2` changes y, as in eager."""
    y = x.clone()
    a = y.numpy()
    a *= 2
    return y


@case(inputs=lambda: torch.randn(3, 4))
def astype_to_python_and_numpy_types(x):
    """Python types are torch dtypes in the graph (`torch.int64`), NumPy's their names (`'float64'`)."""
    a = x.numpy()
    return a.astype(int), a.astype(np.float64).astype(bool), np.zeros((2, 2), dtype=np.float32)


@case(inputs=lambda: torch.randn(4, 3))
def array_of_a_transposed_tensor(x):
    a = x.t().numpy()
    return torch.from_numpy(a * 2), a.shape


@case(inputs=lambda: torch.randn(3, 4))
def shape_of_an_array_to_torch(x):
    a = x.numpy()
    return torch.zeros(a.shape) + x, torch.ones(a.shape[1])


@case(inputs=lambda: torch.arange(12).reshape(3, 4))
def integer_arithmetic(x):
    a = x.numpy()
    return a % 5, a // 3, a ** 2, -a, a.max(axis=1), np.sqrt(a)


@case(inputs=lambda: torch.randn(3, 4))
def unhashable_array_as_a_dict_key(x):
    """hash() of an array raises TypeError, caught in the frame: no break."""
    a = x.numpy()
    try:
        d = {a: 1}
    except TypeError:
        d = {}
    return len(d), x + 1

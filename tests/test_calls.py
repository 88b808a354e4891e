"""Calls the translator inlines that are neither plain functions nor modules: bound methods passed
around as values, functions wrapped by torch's context-manager decorators, functools.reduce.

Each is compared with eager (results) and with torch._dynamo (one graph, the same ops).
"""
from __future__ import annotations

import functools
import operator

import pytest
import torch
import torch._dynamo

import pyframe
from pyframe.debug.compare import CountingBackend


@torch.no_grad()
def ema(average, x, decay=0.9):
    return average * decay + x * (1 - decay)


class Scaler:
    def __init__(self, factor):
        self.factor = factor

    def apply(self, x):
        return x * self.factor


SCALE = Scaler(3.0).apply  # a bound method kept as a global


def reduce_sum(x, y):
    return functools.reduce(operator.add, [x, y, x * y], torch.zeros(()))


def decorated_no_grad(x, y):
    return ema(x.relu(), y) + 1


def bound_method_global(x, y):
    return SCALE(x) - y


def bound_method_argument(x, y, fn=Scaler(0.5).apply):
    return fn(x + y)


class Halver:
    def _scale(self, x, factor):
        return x * factor

    half = functools.partialmethod(_scale, factor=0.5)  # a function whose signature is advertised


def partialmethod_call(x, y, h=Halver()):
    return h.half(x) + y


@pytest.mark.parametrize("fn", [reduce_sum, decorated_no_grad, bound_method_global, bound_method_argument])
def test_inlined_like_torch_dynamo(fn):
    x, y = torch.randn(4, requires_grad=True), torch.randn(4)
    ours, dynamo = CountingBackend(), CountingBackend()
    result = pyframe.optimize(ours)(fn)(x, y)
    expected = fn(x, y)
    torch.testing.assert_close(result, expected)
    assert result.requires_grad == expected.requires_grad
    torch._dynamo.reset()
    torch._dynamo.optimize(dynamo)(fn)(x, y)
    assert len(ours.graphs) == len(dynamo.graphs) == 1
    assert [g.ops for g in ours.graphs] == [g.ops for g in dynamo.graphs]


def test_rebinding_a_bound_method_recompiles():
    global SCALE
    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(bound_method_global)
    x, y = torch.randn(4), torch.randn(4)
    torch.testing.assert_close(compiled(x, y), x * 3.0 - y)
    old = SCALE
    try:
        SCALE = Scaler(5.0).apply  # another object bound: its factor is read again
        torch.testing.assert_close(compiled(x, y), x * 5.0 - y)
    finally:
        SCALE = old
    assert len(backend.graphs) == 2


CLIP = functools.partial(torch.clamp, min=0.0, max=1.0)


def global_partial(x, y):
    return CLIP(x + y)


def partial_made_here(x, y):
    scale = functools.partial(torch.mul, other=2.0)
    return scale(x) + functools.partial(torch.add, y)(x)


def min_max_of_tensors_and_numbers(x, y):
    a, b = x.sum(), y.sum()
    a = min(max(a, 0), 1)
    return max(a, b) - min(a, b) + x


def operator_getters(x, y):
    return operator.itemgetter(1)((x, y)) + x * operator.attrgetter("shape")(x)[0]


@pytest.mark.parametrize("fn", [global_partial, partial_made_here, min_max_of_tensors_and_numbers,
                                operator_getters])
def test_more_callables_like_torch_dynamo(fn):
    test_inlined_like_torch_dynamo(fn)


def test_replacing_a_global_partial_recompiles():
    global CLIP
    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(global_partial)
    x, y = torch.randn(4), torch.randn(4)
    torch.testing.assert_close(compiled(x, y), (x + y).clamp(0.0, 1.0))
    old = CLIP
    try:
        CLIP = functools.partial(torch.clamp, min=-0.5)  # other keywords
        torch.testing.assert_close(compiled(x, y), (x + y).clamp(min=-0.5))
    finally:
        CLIP = old
    assert len(backend.graphs) == 2


@pyframe.run
def _cached_only(x):
    return torch.sin(x) * 10


def test_functions_wrapped_by_pyframe_are_inlined_or_break():
    """Inside a traced region the outer optimize decides: optimize/run-wrapped helpers are traced
    into its graph; a disable()-wrapped one breaks the graph and runs with pyframe off (fullgraph
    names it)."""
    inner = CountingBackend()
    helper = pyframe.optimize(inner)(lambda x: _cached_only(x) + 1)
    outer = CountingBackend()

    def fn(x):
        return torch.relu(helper(x))

    x = torch.randn(4)
    torch.testing.assert_close(pyframe.optimize(outer)(fn)(x), torch.relu(torch.sin(x) * 10 + 1))
    assert [g.ops for g in outer.graphs] == [("sin", "mul", "add", "relu")]
    assert inner.graphs == []

    disabled = pyframe.disable(lambda x: torch.sin(x) * 10)

    def with_disabled(x):
        return disabled(x + 1) + 1

    backend = CountingBackend()
    torch.testing.assert_close(pyframe.optimize(backend)(with_disabled)(x), with_disabled(x))
    assert [g.ops for g in backend.graphs] == [("add",), ("add",)]
    with pytest.raises(pyframe.exc.Unsupported, match="disable"):
        pyframe.optimize(CountingBackend(), fullgraph=True)(with_disabled)(x)


@functools.lru_cache(maxsize=8)
def _inverse(n):
    return 1.0 / n


@functools.cache
def _affine(x, k):
    return x * k + 1


def lru_cached_helpers(x, y):
    return _affine(x, _inverse(x.shape[0])) + y * _inverse.__wrapped__(2)


def test_lru_cache_wrapped_functions_are_traced_through_with_a_warning():
    """As torch._dynamo does: the wrapped function is inlined and its cache ignored (a warning says so)."""
    _affine.cache_clear()
    with pytest.warns(UserWarning) as record:
        pyframe.optimize(CountingBackend())(lru_cached_helpers)(torch.randn(4), torch.randn(4))
    messages = [str(w.message) for w in record]
    for name in ("_affine", "_inverse"):
        assert any(f"{name}, a functools.lru_cache-wrapped function, at " in m and "test_calls.py" in m for m in messages)
    assert _affine.cache_info().currsize == 0  # the traced call did not go through the cache
    with pytest.warns(UserWarning):
        test_inlined_like_torch_dynamo(lru_cached_helpers)


def test_a_partialmethod_of_a_user_object_is_inlined():
    """`h.half(x)` with `half = functools.partialmethod(_scale, factor=0.5)`: its function, bound,
    with the stored arguments (inlining it once took its advertised signature for its code's)."""
    x, y = torch.randn(4, requires_grad=True), torch.randn(4)
    ours = CountingBackend()
    torch.testing.assert_close(pyframe.optimize(ours)(partialmethod_call)(x, y), partialmethod_call(x, y))
    # (torch._dynamo 2.13 compiles only the mul into its graph here)
    assert [g.ops for g in ours.graphs] == [("mul", "add")]



def _attribute_or(self, name, default):
    try:
        return torch.nn.Module.__getattr__(self, name)
    except AttributeError:
        return default


class DefaultingModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    # read through the class, a function whose inspect signature (self, name, *, default) is not its code's
    __getattr__ = functools.partialmethod(_attribute_or, default=2.0)

    def forward(self, x):
        return self.lin(x) * self.scale


def test_a_partialmethod_getattr_of_a_module_is_inlined_by_its_code():
    model, x = DefaultingModule(), torch.randn(2, 4)
    ours = CountingBackend()
    torch.testing.assert_close(pyframe.optimize(ours)(model)(x), model(x))
    assert [g.ops for g in ours.graphs] == [("linear", "mul")]
    records = pyframe.convert_frame.records_for(DefaultingModule.forward.__code__)
    assert [r.error for r in records] == [None]


def _ops_under_both(fn, *args):
    ours, dynamo = CountingBackend(), CountingBackend()
    result = pyframe.optimize(ours)(fn)(*args)
    torch._dynamo.reset()
    expected = torch._dynamo.optimize(dynamo)(fn)(*args)
    return result, expected, [g.ops for g in ours.graphs], [g.ops for g in dynamo.graphs]


class _Stages(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.seq = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU(), torch.nn.Linear(3, 3))
        self.layers = torch.nn.ModuleList([torch.nn.Linear(3, 3), torch.nn.Tanh()])

    def forward(self, x):
        h = self.seq[:-1](x)  # guided-diffusion's `in_rest, in_conv = self.in_layers[:-1], self.in_layers[-1]`
        for layer in self.layers[1:]:
            h = layer(h)
        return torch.nn.ReLU()(h)


def test_modules_made_while_tracing_log_their_creation_like_torch_dynamo():
    """A Sequential or ModuleList sliced, or a module class called, makes a new nn.Module: its
    __init__ calls torch._C._log_api_usage_once, which torch._dynamo (inlining __init__) records."""
    torch.manual_seed(0)
    model, x = _Stages(), torch.randn(2, 3)
    result, expected, ours, theirs = _ops_under_both(model, x)
    torch.testing.assert_close(result, expected)
    assert ours == theirs == [("_log_api_usage_once", "linear", "relu", "_log_api_usage_once", "tanh",
                               "_log_api_usage_once", "relu")]


def test_private_helpers_of_torch_nn_functional_are_inlined():
    """F._canonical_mask (nn.TransformerEncoder, nn.MultiheadAttention) is Python, which
    torch._dynamo inlines: its ops are recorded, not the helper as one op of the graph."""
    import torch.nn.functional as F

    def fn(x, mask):
        mask = F._canonical_mask(mask=mask, mask_name="mask", other_type=None, other_name="",
                                 target_type=x.dtype)
        return x + mask

    result, expected, ours, theirs = _ops_under_both(fn, torch.randn(2, 3), torch.tensor([[True, False, False]] * 2))
    torch.testing.assert_close(result, expected)
    assert ours == theirs == [("zeros_like", "masked_fill_", "add")]


@torch.jit.script
def _scripted_bias_gelu(bias, y):
    x = bias + y
    return x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))


def test_torch_jit_script_functions_are_inlined_like_torch_dynamo():
    """A `@torch.jit.script` helper (Megatron's bias_gelu) was a graph break on each side of its
    call: its Python original, which torch.jit.script keeps as `_torchdynamo_inline`, is inlined."""
    def fn(x, bias):
        return _scripted_bias_gelu(bias, x * 2).sum(-1)

    result, expected, ours, theirs = _ops_under_both(fn, torch.randn(2, 4), torch.randn(4))
    torch.testing.assert_close(result, expected)
    assert ours == theirs and len(ours) == 1 and "tanh" in ours[0]


def test_a_methodcaller_with_keyword_arguments_outlives_the_frame():
    def fn(x, sep):
        caller = operator.methodcaller("split", sep, maxsplit=1)
        return x + 1, caller, caller("a,b,c")

    assert not pyframe.explain(fn)(torch.randn(3), ",").break_reasons
    backend = CountingBackend()
    _, caller, parts = pyframe.optimize(backend)(fn)(torch.randn(3), ",")
    assert parts == ["a", "b,c"] and caller("x,y,z") == ["x", "y,z"] and len(backend.graphs) == 1
    assert repr(caller) == "operator.methodcaller('split', ',', maxsplit=1)"

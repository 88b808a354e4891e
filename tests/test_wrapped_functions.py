"""Functions wrapped by functools.wraps / update_wrapper (tests/cases/wrapped_functions.py holds the
programs torch._dynamo captures in one graph): wrappers made in the frame leave it with the
attributes eager gives them (names, doc, `__wrapped__`, a `__dict__` whose values are the wrapped
function's own objects), update_wrapper on an object of the caller's is replayed on it, instances of
a dataclass whose metaclass wraps its generated `__init__` are read and written, and the programs
torch._dynamo gets wrong or breaks on."""
from __future__ import annotations

import dataclasses
import functools

import torch

import pyframe
from pyframe.debug.compare import CountingBackend, assert_same_result
from tests.cases.wrapped_functions import _Sample, _Traced, _double, _plus_one, _tagged, _times
from tests.test_builtin_descriptors import ahead_of_dynamo, run_pyframe, seeded


def _vec():
    return torch.randn(4)


def _attributes(f) -> dict:
    """What functools copies and keeps: names, doc, module, the `__dict__`'s keys, the
    `__wrapped__` chain (by qualified name)."""
    found = {k: getattr(f, k, "<missing>") for k in ("__name__", "__qualname__", "__doc__", "__module__")}
    found["__dict__"] = sorted(vars(f))
    chain, g = [], f
    while hasattr(g, "__wrapped__"):
        g = g.__wrapped__
        chain.append(getattr(g, "__qualname__", type(g).__name__))
    found["chain"] = chain
    return found


def test_wrappers_made_in_the_frame_leave_it_as_eager_makes_them():
    def fn(x):
        def base(a):
            """Base doc."""
            return a * 2

        base.extra = [1]
        outer = _plus_one(_times(3)(base))
        only_doc = functools.wraps(base, assigned=("__doc__",), updated=())(lambda a: a)
        tagged = _tagged(_double)
        traced = _Traced(base)
        return outer(x), outer, only_doc, tagged, traced

    x = torch.randn(3)
    expected = fn(x)
    result, graphs = run_pyframe(fn, (x,))
    assert len(graphs) == 1
    torch.testing.assert_close(result[0], expected[0])
    for made, eager in zip(result[1:], expected[1:]):
        assert _attributes(made) == _attributes(eager)
        torch.testing.assert_close(made(x), eager(x))
    outer = result[1]
    assert outer.__wrapped__.__wrapped__.extra is outer.extra  # (wraps copies __dict__ shallowly)
    assert result[3].meta is _double.meta and result[3].__wrapped__ is _double
    assert result[4].__wrapped__ is outer.__wrapped__.__wrapped__


def test_the_dict_of_a_wrapper_made_in_the_frame():
    """`sorted(wrapper.__dict__)`: what update_wrapper put there (torch._dynamo lists seven names)."""
    def fn(x):
        outer = _plus_one(_times(2)(_double))
        return outer(x), sorted(outer.__dict__), outer.meta is _double.meta

    ahead_of_dynamo(fn, seeded(_vec))


def test_wraps_of_a_torch_function_and_of_a_partial():
    """A partial has no `__name__` (wraps skips it); `__wrapped__` is the partial itself (torch._dynamo
    breaks the graph in two)."""
    def fn(x):
        relu = functools.wraps(torch.relu)(lambda t: torch.relu(t) * 2)
        scaled = functools.partial(torch.mul, other=3.0)
        wrapped_partial = functools.wraps(scaled)(lambda t: scaled(t) + 1)
        return (relu(x) + wrapped_partial(x), relu.__name__, relu.__wrapped__ is torch.relu,
                wrapped_partial.__wrapped__ is scaled, hasattr(wrapped_partial, "__name__"),
                wrapped_partial.__module__, wrapped_partial.__doc__ == functools.partial.__doc__)

    ahead_of_dynamo(fn, seeded(_vec))


class _Holder:
    pass


def test_update_wrapper_on_an_object_of_the_caller_is_replayed_on_it():
    def fn(x, holder):
        functools.update_wrapper(holder, _double)
        holder.__name__ = holder.__name__ + "_held"
        return x * holder.__wrapped__(2)

    def make():
        return torch.ones(3), _Holder()

    eager_args, args = make(), make()
    expected = fn(*eager_args)
    result, graphs = run_pyframe(fn, args)
    assert_same_result(result, expected)
    assert len(graphs) == 1
    assert vars(args[1]).keys() == vars(eager_args[1]).keys()
    assert _attributes(args[1]) == _attributes(eager_args[1]) and args[1].meta is _double.meta


def test_instances_of_a_dataclass_whose_metaclass_wraps_its_init():
    """The metaclass's `__setattr__` wrapped the generated `__init__` (in `<string>`); it has no say
    in stores on the instances, made in the frame or the caller's."""
    def fn(x, s):
        t = _Sample(x, b=x + 1)
        s.a = s.a * t.b
        t.b = s.a
        return t.a + t.b + t.count, [f.name for f in dataclasses.fields(t)]

    def make():
        torch.manual_seed(0)
        return torch.randn(3), _Sample(torch.randn(3))

    eager_args, args = make(), make()
    expected = fn(*eager_args)
    backend = CountingBackend()
    result = pyframe.optimize(backend, fullgraph=True)(fn)(*args)
    assert_same_result(result, expected)
    assert len(backend.graphs) == 1
    torch.testing.assert_close(args[1].a, eager_args[1].a)
    assert args[1].count == eager_args[1].count == 1

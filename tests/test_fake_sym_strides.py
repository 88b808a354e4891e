"""Elementwise ops and `cat` of strided (non-contiguous) tensors over symbolic sizes
(pyframe/fake/sym_strides.py), against FakeTensorMode over a ShapeEnv with the Python dispatcher.

A rule either declines or gives exactly what the real propagation gives (sizes and strides as the
same expressions, dtype, device, grad flags), and it answers only where the real propagation leaves
the ShapeEnv as it was. The inputs are views (permutations, transposes, slices) of tensors with
symbolic and static sizes, broadcast against one another, of several floating dtypes.
"""
from __future__ import annotations

import operator
import random
from typing import Any

import pytest
import torch
import torch.fx
from torch._dispatch.python import enable_python_dispatcher

from torch._subclasses.fake_tensor import FakeTensorMode

from pyframe.fake import sym_strides
from pyframe.fake.memo import _symbolic_tensor_key
from pyframe.fake.shapes import new_symbolic_mode, symbolic_fake
from pyframe.source import LocalSource
from tests.test_fake_sym_rules import _knowledge as _shape_env_knowledge, _meta, real_propagation


def _knowledge(shape_env) -> tuple:
    return _shape_env_knowledge(shape_env) if shape_env is not None else ()


class Harness:
    """`static`: a FakeTensorMode with no ShapeEnv, as a trace with static shapes propagates in
    (the rules answer there too)."""

    def __init__(self, static: bool = False) -> None:
        self.mode = FakeTensorMode() if static else new_symbolic_mode()
        self.graph = torch.fx.Graph()
        self.answered = 0

    def fake(self, shape: tuple, dynamic: tuple = (), dtype: torch.dtype = torch.float32,
             requires_grad: bool = False, name: str | None = None) -> torch.Tensor:
        name = name or f"t{len(self.graph.nodes)}"
        real = torch.randn(shape, dtype=dtype, requires_grad=requires_grad)
        if dynamic and self.mode.shape_env is not None:
            return symbolic_fake(self.mode, real, LocalSource(name), dynamic, duck=False)
        return self.mode.from_tensor(real, static_shapes=True)

    def view(self, fake: torch.Tensor, how: Any) -> torch.Tensor:
        with self.mode, enable_python_dispatcher():
            return how(fake)

    def node(self, fake: torch.Tensor) -> torch.fx.Node:
        node = self.graph.placeholder(f"t{len(self.graph.nodes)}")
        node.meta["example_value"] = fake
        return node

    def check(self, op: str, target: Any, args: tuple, kwargs: dict | None = None, grad: bool = True) -> bool:
        kwargs = kwargs or {}
        before = _knowledge(self.mode.shape_env)
        out = sym_strides.infer(op, target, args, kwargs, grad, autocast=False)
        assert _knowledge(self.mode.shape_env) == before, f"{target}: the rule decided something"
        real, tensors = real_propagation(self.mode, op, target, args, kwargs, grad, out)
        if out is None or real is None:
            return False
        assert _knowledge(self.mode.shape_env) == before, f"{target}: the real propagation decided something"
        description = (target, [_meta(a) for a in tensors])
        assert _meta(out.build(self.mode)) == _meta(real), description
        assert out.value_key == _symbolic_tensor_key(real), (description, out.value_key, _symbolic_tensor_key(real))
        self.answered += 1
        return True


def _rotary(h: Harness, heads: int) -> tuple:
    """LLaMA's rotary embedding on a transposed (2, s, heads, 8) projection."""
    q = h.view(h.fake((2, 7, heads * 8), dynamic=(1,), name="q"),
               lambda t: t.view(2, t.shape[1], heads, 8).transpose(1, 2))
    cos = h.view(q, lambda t: torch.empty(1, t.shape[2], 8).unsqueeze(1))  # (q's symbol)
    return q, cos


def test_rotary_embedding_ops_are_answered_as_fake_tensor_mode_gives_them():
    h = Harness()
    q, cos = _rotary(h, 4)
    x1 = h.view(q, lambda t: t[..., :4])
    x2 = h.view(q, lambda t: t[..., 4:])
    nq, ncos, n1, n2 = h.node(q), h.node(cos), h.node(x1), h.node(x2)
    neg = h.node(h.view(x2, lambda t: -t))
    empty = h.node(h.fake((0,)))
    assert h.check("call_function", operator.mul, (nq, ncos))
    assert h.check("call_function", operator.add, (nq, nq))
    assert h.check("call_function", operator.neg, (n2,))
    assert h.check("call_function", torch.cat, ((neg, n1),), {"dim": -1})
    assert h.check("call_function", torch.cat, ((empty, nq),), {"dim": -2})  # (DynamicCache's first update)
    constant = h.node(h.view(q, lambda t: torch.tensor([])))  # (a constant of FakeTensorMode's)
    assert constant.meta["example_value"].constant is not None
    assert h.check("call_function", torch.cat, ((constant, nq),), {"dim": -2})
    assert h.check("call_method", "__rmul__", (nq, 0.5))
    assert h.check("call_function", operator.truediv, (nq, 2.0))


_OPS = [
    ("call_function", operator.add), ("call_function", operator.sub), ("call_function", operator.mul),
    ("call_function", operator.truediv), ("call_function", torch.add), ("call_method", "mul"),
    ("call_method", "__radd__"),
]
_UNARY = [("call_function", getattr(torch, n)) for n in sym_strides._UNARY] + \
         [("call_method", n) for n in sym_strides._UNARY] + [("call_function", operator.neg)]


def _random_view(h: Harness, rng: random.Random, shape: tuple, dynamic: tuple, dtype: torch.dtype,
                 grad: bool) -> torch.Tensor:
    fake = h.fake(shape, dynamic, dtype, grad)
    kind = rng.choice(["permute", "transpose", "slice", "plain", "expand", "step"])
    ndim = len(shape)
    if kind == "permute":
        order = list(range(ndim))
        rng.shuffle(order)
        return h.view(fake, lambda t: t.permute(order))
    if kind == "transpose" and ndim >= 2:
        d0, d1 = rng.sample(range(ndim), 2)
        return h.view(fake, lambda t: t.transpose(d0, d1))
    if kind == "slice":
        d = rng.randrange(ndim)
        if type(fake.shape[d]) is int and fake.shape[d] >= 2:
            stop = rng.randrange(1, fake.shape[d])
            return h.view(fake, lambda t: t.narrow(d, 0, stop))
    if kind == "step":
        d = rng.randrange(ndim)
        return h.view(fake, lambda t: t[(slice(None),) * d + (slice(None, None, 2),)])
    if kind == "expand":
        d = rng.randrange(ndim)
        if shape[d] == 1:
            sizes = [-1] * ndim
            sizes[d] = 3
            return h.view(fake, lambda t: t.expand(sizes))
    return fake


@pytest.mark.parametrize("static", [False, True], ids=["symbolic", "static"])
def test_random_strided_elementwise_ops_are_fake_tensor_modes(static):
    rng = random.Random(0)
    h = Harness(static)
    answered = 0
    for trial in range(300):
        ndim = rng.randint(1, 4)
        shape = tuple(rng.choice([1, 2, 3, 4, 5]) for _ in range(ndim))
        dynamic = tuple(d for d in range(ndim) if shape[d] >= 2 and rng.random() < 0.5)
        dtype = rng.choice([torch.float32, torch.float32, torch.float64, torch.float16])
        grad = rng.random() < 0.2
        a = _random_view(h, rng, shape, dynamic, dtype, grad)
        na = h.node(a)
        choice = rng.random()
        if choice < 0.3:
            op, target = rng.choice(_UNARY)
            answered += h.check(op, target, (na,))
        elif choice < 0.45:
            op, target = rng.choice(_OPS)
            answered += h.check(op, target, (na, rng.choice([2, 0.5, True])), grad=rng.random() < 0.5)
        else:
            # another operand: the same view again, one with some sizes 1, or of fewer dimensions
            other = list(a.shape)
            kind = rng.random()
            if kind < 0.3:
                b = a
            else:
                if kind < 0.6:
                    other = [1 if rng.random() < 0.4 else n for n in other]
                else:
                    other = other[rng.randrange(len(other)):]
                b = h.view(h.fake(tuple(1 if type(n) is not int else n for n in other), (), dtype),
                           lambda t: t.expand([n if type(n) is int else -1 for n in other])
                           if False else t)
                if any(type(n) is not int for n in other):
                    with h.mode, enable_python_dispatcher():
                        b = torch.empty(other, dtype=dtype)
                        if rng.random() < 0.5 and b.dim() >= 2:
                            b = b.transpose(0, -1).contiguous().transpose(0, -1)
            nb = h.node(b)
            op, target = rng.choice(_OPS)
            pair = (na, nb) if rng.random() < 0.5 else (nb, na)
            answered += h.check(op, target, pair)
    assert answered >= 60, answered


@pytest.mark.parametrize("static", [False, True], ids=["symbolic", "static"])
def test_random_strided_cats_are_fake_tensor_modes(static):
    rng = random.Random(1)
    h = Harness(static)
    answered = 0
    for trial in range(200):
        ndim = rng.randint(1, 5)
        shape = [rng.choice([1, 2, 3, 4]) for _ in range(ndim)]
        dynamic = tuple(d for d in range(ndim) if shape[d] >= 2 and rng.random() < 0.5)
        dim = rng.randrange(-ndim, ndim)
        base = h.fake(tuple(shape), dynamic, name=f"c{trial}")
        items = []
        for _ in range(rng.randint(1, 3)):
            kind = rng.random()
            if kind < 0.3:
                items.append(base)
            elif kind < 0.6 and ndim >= 2:
                # same sizes, other strides: a transposed contiguous tensor transposed back
                d0, d1 = rng.sample(range(ndim), 2)
                items.append(h.view(base, lambda t: t.transpose(d0, d1).contiguous().transpose(d0, d1)))
            elif kind < 0.8:
                items.append(h.view(base, lambda t: t[(slice(None),) * (dim % ndim) + (slice(None, None, 2),)]))
            else:
                items.append(h.fake((0,)))
        rng.shuffle(items)
        nodes = tuple(h.node(t) for t in items)
        answered += h.check("call_function", torch.cat, (nodes,), {"dim": dim})
    assert answered >= 30, answered


def test_a_symint_of_the_number_1_is_not_taken_for_a_size_of_at_least_two():
    """A SymInt whose expression is a number (`s - s + 1`: FakeTensorMode makes such sizes) is
    compared by torch as its value, 1 here: the rules leave tensors of such sizes to it."""
    from pyframe.fake.sym_rules import _size_at_least_two

    h = Harness()
    x = h.fake((2, 7), dynamic=(1,), name="x")
    one = x.shape[1] - x.shape[1] + 1
    assert type(one) is torch.SymInt and not _size_at_least_two(one)
    with h.mode, enable_python_dispatcher():
        a = torch.empty(5, one)
        b = torch.empty(1, 5).t()
    assert h.check("call_function", operator.truediv, (h.node(a), h.node(b))) is False

"""The shape rules (pyframe/fake/rules.py, inplace_rules.py) against FakeTensorMode: on random shapes, dtypes, strides,
grad flags and arguments, a rule either declines (None) or gives exactly the real propagation's
shape, stride, dtype, device, requires_grad and leafness; it never answers where the op raises."""
from __future__ import annotations

import operator
import random

import pytest
import torch
import torch.fx
import torch.nn.functional as F

from pyframe.fake import inplace_rules
from pyframe.fake import rules as fake_rules
from pyframe.fake.memo import _tensor_key
from pyframe.graph import fake_mode


def _meta(t) -> tuple:
    if isinstance(t, (tuple, list)):
        return (type(t).__name__, *(_meta(item) for item in t))
    if t is None:
        return ("None",)
    return tuple(t.shape), t.stride(), t.dtype, t.device, t.requires_grad, t.is_leaf


class Harness:
    """Fake inputs as fx nodes (what a rule reads), and the real propagation to compare with."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.graph = torch.fx.Graph()
        self.answered = self.declined = 0

    def tensor(self, shape, dtype=torch.float32, requires_grad=None, layout="contiguous"):
        real = torch.empty(shape, dtype=dtype)
        if layout == "transposed" and real.dim() >= 2:
            real = real.transpose(-1, -2).contiguous().transpose(-1, -2)
        elif layout == "channels_last" and real.dim() == 4:
            real = real.contiguous(memory_format=torch.channels_last)
        elif layout == "expanded" and real.dim() >= 1:
            real = torch.empty(shape[1:], dtype=dtype).expand(shape)
        elif layout == "offset":
            real = torch.empty(real.numel() + 1, dtype=dtype)[1:].view(shape)
        if requires_grad is None:
            requires_grad = dtype.is_floating_point and self.rng.random() < 0.5
        if requires_grad:
            real.requires_grad_()
        node = self.graph.placeholder(f"t{len(self.graph.nodes)}")
        node.meta["example_value"] = fake_mode().from_tensor(real, static_shapes=True)
        return node

    def check(self, op: str, target, args: tuple, kwargs: dict | None = None) -> None:
        kwargs = kwargs or {}
        grad = self.rng.random() < 0.8
        out = fake_rules.infer(op, target, args, kwargs, grad, autocast=False)
        real = self.real(op, target, args, kwargs, grad, out)
        if real is not None:
            built = out.build(fake_mode())
            assert _meta(built) == _meta(real), (target, args, kwargs)
            if not isinstance(real, tuple):  # the key a node made from this answer is given
                assert out.value_key == _tensor_key(real), (target, args, kwargs)

    def real(self, op: str, target, args: tuple, kwargs: dict, grad: bool, answer) -> torch.Tensor | None:
        """The real propagation's output when the rule answered (`answer` not None); None when it
        declined, which it must where the op raises. Counts both."""
        fake_args = torch.fx.node.map_arg(args, lambda n: n.meta["example_value"])
        fake_kwargs = torch.fx.node.map_arg(kwargs, lambda n: n.meta["example_value"])
        try:
            with fake_mode(), torch.set_grad_enabled(grad):
                if op == "call_method":
                    real = getattr(fake_args[0], target)(*fake_args[1:], **fake_kwargs)
                else:
                    real = target(*fake_args, **fake_kwargs)
        except Exception as e:
            assert answer is None, f"{target} answered where the op raises {type(e).__name__}: {e}"
            real = None
        if answer is None or real is None:
            self.declined += 1
            return None
        self.answered += 1
        return real

    def shape(self, ndim: int, low: int = 1, high: int = 5) -> tuple[int, ...]:
        return tuple(self.rng.randint(low, high) for _ in range(ndim))

    def layout(self) -> str:
        return self.rng.choice(["contiguous"] * 6 + ["transposed", "channels_last", "offset", "expanded"])

    def dtype(self) -> torch.dtype:
        return self.rng.choice([torch.float32] * 6 + [torch.float64, torch.bfloat16, torch.int64])


def _broadcastable(h: Harness, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A suffix of `shape` with some sizes replaced by 1 (or, now and then, one that clashes)."""
    suffix = shape[h.rng.randint(0, len(shape)):]
    return tuple(1 if h.rng.random() < 0.3 else (s + 1 if h.rng.random() < 0.05 else s) for s in suffix)


def _run(check_one, seed: int = 0, cases: int = 300) -> Harness:
    h = Harness(seed)
    for _ in range(cases):
        check_one(h)
    assert h.answered >= cases // 4, f"the rule answered {h.answered} of {cases} cases"
    return h


@pytest.mark.parametrize("seed", range(3))
def test_unary_and_activations(seed):
    def one(h: Harness):
        x = h.tensor(h.shape(h.rng.randint(0, 4)), h.dtype(), layout=h.layout())
        op, target, args, kwargs = h.rng.choice([
            ("call_function", torch.sin, (x,), {}), ("call_method", "tanh", (x,), {}),
            ("call_function", torch.sigmoid, (x,), {}), ("call_function", operator.neg, (x,), {}),
            ("call_function", F.relu, (x,), {}), ("call_function", F.relu, (x,), {"inplace": False}),
            ("call_function", F.gelu, (x,), {}), ("call_function", F.gelu, (x,), {"approximate": "tanh"}),
            ("call_function", F.silu, (x,), {}), ("call_method", "relu", (x,), {}),
        ])
        h.check(op, target, args, kwargs)

    _run(one, seed)


@pytest.mark.parametrize("seed", range(3))
def test_binary_arithmetic_with_broadcasting_and_numbers(seed):
    def one(h: Harness):
        shape = h.shape(h.rng.randint(0, 4))
        dtype = h.dtype()
        a = h.tensor(shape, dtype, layout=h.layout())
        kind = h.rng.random()
        if kind < 0.5:
            b = h.tensor(_broadcastable(h, shape), dtype if h.rng.random() < 0.9 else h.dtype(), layout=h.layout())
        else:
            b = h.rng.choice([2, 0.5, True, -3])
        if h.rng.random() < 0.3:
            a, b = b, a
        target = h.rng.choice([operator.add, operator.sub, operator.mul, operator.truediv, torch.add, torch.mul])
        h.check("call_function", target, (a, b))

    _run(one, seed)


@pytest.mark.parametrize("seed", range(3))
def test_linear(seed):
    def one(h: Harness):
        k, n = h.rng.randint(1, 6), h.rng.randint(1, 6)
        x = h.tensor(h.shape(h.rng.randint(1, 3)) + (k if h.rng.random() < 0.95 else k + 1,), layout=h.layout())
        w = h.tensor((n, k), layout=h.layout())
        bias = h.rng.choice([None, h.tensor((n,)), h.tensor((n,)), h.tensor((1,))])
        args = (x, w) if bias is None and h.rng.random() < 0.5 else (x, w, bias)
        h.check("call_function", torch._C._nn.linear, args)

    _run(one, seed)


@pytest.mark.parametrize("seed", range(8))
def test_matmul(seed):
    def one(h: Harness):
        n, k, m = h.shape(3)
        batch = h.shape(h.rng.randint(0, 2))
        a = h.tensor(batch + (n, k), layout=h.layout())
        b = h.tensor(_broadcastable(h, batch) + (k if h.rng.random() < 0.95 else k + 1, m), layout=h.layout())
        h.check("call_function", h.rng.choice([torch.matmul, operator.matmul]), (a, b))

    _run(one, seed)


@pytest.mark.parametrize("seed", range(4))
def test_addmm_and_mm(seed):
    def one(h: Harness):
        n, k, m = h.shape(3)
        dtype = h.dtype()
        a = h.tensor((n, k), dtype, layout=h.layout())
        b = h.tensor((k if h.rng.random() < 0.95 else k + 1, m), dtype if h.rng.random() < 0.95 else h.dtype(),
                     layout=h.layout())
        if h.rng.random() < 0.3:
            h.check("call_function", torch.mm, (a, b)) if h.rng.random() < 0.5 else h.check("call_method", "mm", (a, b))
            return
        bias_shape = h.rng.choice([(m,), (1,), (n, m), (1, m), (n, 1), (), (m + 1,), (2, n, m)])
        bias = h.tensor(bias_shape, dtype, layout=h.layout())
        kwargs = h.rng.choice([{}, {}, {"beta": 0.5}, {"alpha": 2, "beta": 1}])
        if h.rng.random() < 0.5:
            h.check("call_function", torch.addmm, (bias, a, b), kwargs)
        else:
            h.check("call_method", "addmm", (bias, a, b), kwargs)

    _run(one, seed)


@pytest.mark.parametrize("seed", range(3))
def test_embedding(seed):
    def one(h: Harness):
        rows, dim = h.rng.randint(1, 6), h.rng.randint(1, 6)
        index_dtype = h.rng.choice([torch.int64, torch.int64, torch.int32, torch.float32])
        shape = h.shape(h.rng.randint(0, 3))
        indices = h.tensor(shape, index_dtype, requires_grad=False, layout=h.layout())
        weight = h.tensor((rows, dim) if h.rng.random() < 0.95 else (rows,), h.dtype(), layout=h.layout())
        args, kwargs = (indices, weight), h.rng.choice([
            {}, {}, {"padding_idx": 0}, {"padding_idx": -1}, {"padding_idx": 7}, {"max_norm": 1.0},
            {"sparse": True}, {"scale_grad_by_freq": True}])
        if h.rng.random() < 0.3 and "padding_idx" in kwargs:
            args, kwargs = (indices, weight, kwargs["padding_idx"]), {}
        h.check("call_function", F.embedding, args, kwargs)

    _run(one, seed, cases=200)


@pytest.mark.parametrize("seed", range(3))
def test_layer_norm_batch_norm_softmax(seed):
    def one(h: Harness):
        shape = h.shape(h.rng.randint(2, 4))
        x = h.tensor(shape, layout=h.layout())
        kind = h.rng.randrange(3)
        if kind == 0:
            normalized = shape[-h.rng.randint(1, 2):]
            weight = h.tensor(normalized) if h.rng.random() < 0.7 else None
            bias = h.tensor(normalized) if h.rng.random() < 0.7 else None
            h.check("call_function", F.layer_norm, (x, normalized, weight, bias, 1e-5))
        elif kind == 1:
            c = shape[1]
            stats = [h.tensor((c,), requires_grad=False), h.tensor((c,), requires_grad=False)]
            affine = [h.tensor((c,)), h.tensor((c,))] if h.rng.random() < 0.7 else [None, None]
            h.check("call_function", F.batch_norm, (x, *stats, *affine, False, 0.1, 1e-5))
        else:
            h.check("call_method", h.rng.choice(["softmax", "log_softmax"]), (x, h.rng.randint(-len(shape), len(shape) - 1)))

    _run(one, seed)


@pytest.mark.parametrize("seed", range(3))
def test_conv2d(seed):
    def one(h: Harness):
        n, c, out = h.rng.randint(1, 3), h.rng.randint(1, 4), h.rng.randint(1, 5)
        groups = h.rng.choice([1, 1, 1, c])
        out = out * groups
        size = h.rng.randint(1, 9)
        kernel = h.rng.randint(1, 3)
        x = h.tensor((n, c, size, size + h.rng.randint(0, 2)), layout=h.layout())
        w = h.tensor((out, c // groups, kernel, kernel))
        bias = h.tensor((out,)) if h.rng.random() < 0.6 else None
        stride, padding = h.rng.choice([1, 2, (1, 2)]), h.rng.choice([0, 1, (1, 0)])
        h.check("call_function", torch.conv2d, (x, w, bias, stride, padding, 1, groups))

    _run(one, seed)


@pytest.mark.parametrize("seed", range(3))
def test_cat(seed):
    def one(h: Harness):
        shape = h.shape(h.rng.randint(1, 4))
        dim = h.rng.randrange(len(shape))
        parts = []
        for _ in range(h.rng.randint(1, 3)):
            s = list(shape)
            s[dim] = h.rng.randint(1, 4)
            parts.append(h.tensor(tuple(s), layout=h.layout()))
        h.check("call_function", torch.cat, (parts, dim - len(shape) if h.rng.random() < 0.3 else dim))

    _run(one, seed)


def test_rules_decline_what_they_do_not_model():
    h = Harness(0)
    x, w = h.tensor((2, 3)), h.tensor((4, 3))
    assert fake_rules.infer("call_function", F.relu, (x,), {"inplace": True}, True, False) is None
    assert fake_rules.infer("call_function", torch.add, (x, x), {"alpha": 2}, True, False) is None
    assert fake_rules.infer("call_function", torch._C._nn.linear, (x, w), {}, True, autocast=True) is None
    assert fake_rules.infer("call_function", torch.sin, (x,), {"out": x}, True, False) is None
    out = fake_rules.infer("call_function", torch._C._nn.linear, (x, w), {}, True, False)
    assert out is not None and out.shape == (2, 4)


@pytest.mark.parametrize("seed", range(3))
def test_in_place_ops(seed):
    """An in-place rule answers with its first argument's very FakeTensor, and only where the real
    propagation gives back that tensor with its metadata unchanged (it raises on a leaf that
    requires grad and on views of one; it makes a tensor require grad when the other argument does)."""
    h = Harness(seed)
    for _ in range(300):
        shape = h.shape(h.rng.randint(0, 3))
        dtype = h.dtype()
        x = h.tensor(shape, dtype, layout=h.layout())
        if h.rng.random() < 0.4:  # a value made by an op on a leaf, as most traced tensors are
            x_fake = x.meta["example_value"]
            with fake_mode(), torch.enable_grad():
                made = x_fake * 2
            x = h.graph.placeholder(f"t{len(h.graph.nodes)}")
            x.meta["example_value"] = made
        other = h.tensor(_broadcastable(h, shape), dtype if h.rng.random() < 0.9 else h.dtype()) \
            if h.rng.random() < 0.5 else h.rng.choice([2, 0.5, True])
        op, target, args, kwargs = h.rng.choice([
            ("call_method", "relu_", (x,), {}), ("call_method", "add_", (x, other), {}),
            ("call_method", "mul_", (x, other), {}), ("call_function", operator.iadd, (x, other), {}),
            ("call_function", operator.itruediv, (x, other), {}), ("call_function", F.relu, (x,), {"inplace": True}),
            ("call_function", F.silu, (x, True), {}), ("call_function", torch.relu_, (x,), {}),
        ])
        grad = h.rng.random() < 0.8
        written = x.meta["example_value"]
        before = _meta(written)
        answer = inplace_rules.infer_inplace(op, target, args, kwargs, grad, autocast=False)
        real = h.real(op, target, args, kwargs, grad, answer)
        if real is not None:
            assert answer is written and real is written, target
            assert _meta(real) == before, (target, args)
    assert h.answered >= 75, f"the rules answered {h.answered} of 300 cases"


@pytest.mark.parametrize("seed", range(3))
def test_ops_that_give_back_their_argument(seed):
    """`x.to(...)`, `x.contiguous()` and F.dropout outside training answer with their argument's
    very FakeTensor, and only where the real propagation gives back that tensor itself (any
    layout, a leaf that requires grad included); elsewhere (a conversion, a copy, training, p out
    of range) they decline."""
    h = Harness(seed)
    cpu, meta = torch.device("cpu"), torch.device("meta")
    for _ in range(300):
        dtype = h.dtype()
        x = h.tensor(h.shape(h.rng.randint(0, 3)), dtype, layout=h.layout())
        other = h.rng.choice([dtype, dtype, torch.float32, torch.int64])
        device = h.rng.choice([cpu, cpu, meta])
        op, target, args, kwargs = h.rng.choice([
            ("call_method", "to", (x, other), {}), ("call_method", "to", (x, device), {}),
            ("call_method", "to", (x, device, other), {}), ("call_method", "to", (x,), {"dtype": other}),
            ("call_method", "to", (x,), {"device": device, "dtype": other}),
            ("call_method", "to", (x, other), {"copy": True}), ("call_method", "to", (x, "cpu"), {}),
            ("call_method", "contiguous", (x,), {}),
            ("call_method", "contiguous", (x,), {"memory_format": torch.contiguous_format}),
            ("call_function", F.dropout, (x, 0.1, False, False), {}), ("call_function", F.dropout, (x,), {}),
            ("call_function", F.dropout, (x,), {"p": h.rng.choice([0.0, 0.5, 1.0, 1.5]), "training": False}),
            ("call_function", F.dropout, (x, 0.5, False, True), {}),
        ])
        grad = h.rng.random() < 0.8
        written = x.meta["example_value"]
        before = _meta(written)
        answer = inplace_rules.infer_inplace(op, target, args, kwargs, grad, autocast=False)
        real = h.real(op, target, args, kwargs, grad, answer)
        if real is not None:
            assert answer is written and real is written, (target, args, kwargs)
            assert _meta(real) == before
    assert h.answered >= 75, f"the rules answered {h.answered} of 300 cases"


@pytest.mark.parametrize("seed", range(3))
def test_multi_head_attention(seed):
    """F.multi_head_attention_forward as nn.MultiheadAttention calls it (batch_first inputs arrive
    transposed), with and without biases and dropout; the weights asked for, masks, or extra key
    biases make the rule decline."""
    def one(h: Harness):
        heads = h.rng.choice([1, 2, 4])
        embed = heads * h.rng.randint(1, 4) * (1 if h.rng.random() < 0.95 else 3)
        n, length, source = h.rng.randint(1, 3), h.rng.randint(1, 5), h.rng.randint(1, 5)
        if h.rng.random() < 0.5:
            query = h.tensor((n, length, embed), layout="transposed" if h.rng.random() < 0.2 else "contiguous")
            query_t = h.graph.call_method("transpose", (query, 0, 1))
            with fake_mode():
                query_t.meta["example_value"] = query.meta["example_value"].transpose(0, 1)
            query = query_t
        else:
            query = h.tensor((length, n, embed))
        key = query if h.rng.random() < 0.6 else h.tensor((source, n, embed))
        in_w, out_w = h.tensor((3 * embed, embed)), h.tensor((embed, embed))
        in_b = h.tensor((3 * embed,)) if h.rng.random() < 0.7 else None
        out_b = h.tensor((embed,)) if h.rng.random() < 0.7 else None
        dropout, training = h.rng.choice([(0.0, False), (0.0, True), (0.5, True)])
        kwargs = {"training": training, "need_weights": h.rng.random() >= 0.85}
        if h.rng.random() < 0.1:
            kwargs["attn_mask"] = h.tensor((length, key.meta["example_value"].shape[0]), requires_grad=False)
        args = (query, key, key, embed if h.rng.random() < 0.95 else embed + 1, heads, in_w, in_b, None, None,
                False, dropout, out_w, out_b)
        h.check("call_function", F.multi_head_attention_forward, args, kwargs)

    h = Harness(seed)
    for _ in range(150):
        one(h)
    assert h.answered >= 60, f"the rule answered {h.answered} of 150 cases"


@pytest.mark.parametrize("seed", range(3))
def test_pooling(seed):
    def one(h: Harness):
        n, c = h.rng.randint(1, 2), h.rng.randint(1, 4)
        x = h.tensor((n, c, h.rng.randint(1, 9), h.rng.randint(1, 9)), layout=h.layout())
        kind = h.rng.randrange(3)
        if kind == 2:
            size = h.rng.choice([1, 2, 3, (2, None), (None, 3), (1, 1)])
            h.check("call_function", F.adaptive_avg_pool2d, (x, size))
            return
        kernel, stride = h.rng.choice([2, 3, (2, 1)]), h.rng.choice([None, 1, 2, (2, 1)])
        padding = h.rng.choice([0, 0, 1, 2])
        if kind == 0:
            kwargs = {"ceil_mode": True} if h.rng.random() < 0.1 else {}
            h.check("call_function", F.max_pool2d, (x, kernel, stride, padding, h.rng.choice([1, 1, 2])), kwargs)
        else:
            h.check("call_function", F.avg_pool2d, (x, kernel, stride, padding), {})

    _run(one, seed)

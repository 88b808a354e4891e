"""pyframe's FakeTensorMode (pyframe/fake/mode.py) against torch's: the view ops it takes a short
path for, or makes again from its memo of views (fake/views.py), give what FakeTensorMode gives,
autograd's view relation, storage and version counter included, on random shapes, strides and grad
flags."""
from __future__ import annotations

import random

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from pyframe.fake.mode import PyframeFakeTensorMode, direct_view

aten = torch.ops.aten


def _describe(t, inputs, unit_strides: bool = True) -> tuple:
    """The metadata compared; `unit_strides=False` leaves out the strides of size-1 dimensions. The
    version counter is compared from the input's count: the converter gives an input whose storage
    it has met before with `set_`, which counts (from_tensor of a tensor freed and made again)."""
    if isinstance(t, (tuple, list)):
        return (type(t).__name__, *(_describe(item, inputs, unit_strides) for item in t))
    if not isinstance(t, torch.Tensor):
        return ("value", t)
    base = t._base
    stride = t.stride() if unit_strides else tuple(s if n != 1 else None for n, s in zip(t.shape, t.stride()))
    return (type(t).__name__, tuple(t.shape), stride, t.storage_offset(), t.dtype, str(t.device),
            t.requires_grad, t.is_leaf, t._is_view(), type(t.grad_fn).__name__,
            None if base is None else [base is i for i in inputs],
            [torch._C._is_alias_of(t, i) for i in inputs], t._version - inputs[0]._version)


def _views(rng: random.Random, x: torch.Tensor) -> list[tuple]:
    ndim = x.dim()
    calls = [(aten.alias.default, (x,)), (aten.detach.default, (x,))]
    if ndim >= 1:
        dims = list(range(ndim))
        rng.shuffle(dims)
        calls += [(aten.permute.default, (x, dims)), (aten.unsqueeze.default, (x, rng.randint(-ndim - 1, ndim))),
                  (aten.unbind.int, (x, rng.randrange(ndim))),
                  (aten.expand.default, (x, [rng.choice([2, 3]) if s == 1 else s for s in x.shape])),
                  (aten.squeeze.dims, (x, [rng.randrange(ndim)])),
                  (aten.as_strided.default, (x, [1] * ndim, [1] * ndim, 0))]
        dim = rng.randrange(-ndim, ndim)
        size = x.shape[dim]
        calls += [(aten.select.int, (x, dim, rng.randint(-size - 1, size))),  # out of range too
                  (aten.slice.Tensor, (x, dim, rng.choice([None, -2, 0, 1, 5]), rng.choice([None, -1, 2, 9]),
                                       rng.choice([1, 2]))),
                  (aten.view.default, (x, [-1])),  # raises on some strides, as it must
                  (aten.view.default, (x, [*x.shape[:-1], 1, x.shape[-1]])),
                  (aten.split.Tensor, (x, rng.choice([1, 2, 3]), dim)),
                  (aten.split_with_sizes.default, (x, _parts(rng, size), dim))]
    if ndim >= 2:
        calls += [(aten.transpose.int, (x, 0, rng.randrange(-ndim, ndim))),
                  (aten.diagonal.default, (x, 0, 0, 1))]
    if ndim <= 2:
        calls.append((aten.t.default, (x,)))
    return calls


def _parts(rng: random.Random, size: int) -> list[int]:
    """Sizes that add up to `size` (one in five times, to one more: the op then raises)."""
    parts = []
    while sum(parts) < size:
        parts.append(rng.randint(0, size - sum(parts)))
    return parts + [1] if rng.random() < 0.2 else parts


def _input(rng: random.Random) -> torch.Tensor:
    shape = tuple(rng.choice([1, 2, 3, 4]) for _ in range(rng.randint(0, 4)))
    t = torch.empty(shape)
    kind = rng.randrange(4)
    if kind == 1 and t.dim() >= 2:
        t = t.transpose(0, 1)
    elif kind == 2 and t.numel():
        t = torch.empty(t.numel() + 3)[3:].view(shape)
    if rng.random() < 0.5:
        t = t.detach().requires_grad_()
    return t


@pytest.mark.parametrize("seed", range(4))
def test_views_match_fake_tensor_mode(seed):
    rng = random.Random(seed)
    ours, theirs = PyframeFakeTensorMode(), FakeTensorMode()
    shortcut = 0
    for _ in range(150):
        real = _input(rng)
        made_by_op = rng.random() < 0.4
        for func, args in _views(rng, real):
            results, outputs = [], []
            where = (func, tuple(real.shape), real.stride())
            for mode in (ours, theirs):
                x = mode.from_tensor(real, static_shapes=True)
                with mode, torch.enable_grad():
                    if made_by_op:
                        x = x * 2  # a tensor with a grad_fn, as most traced values are
                    call_args = (x, *args[1:])
                    try:
                        out = func(*call_args)
                        outputs.append(out)
                        results.append(_describe(out, [x], unit_strides=False))
                    except Exception as e:
                        results.append(("raised", type(e).__name__))
                    if mode is ours and results[-1][0] != "raised":  # again: made by the memo of views
                        again = func(*call_args)
                        assert _describe(again, [x], unit_strides=False) == results[-1], where
                        assert _describe(again, [x]) == _describe(out, [x]), where
            try:  # the op on real tensors: what the program itself gets
                eager = func(real.detach() * 2 if made_by_op else real.detach(), *args[1:])
            except Exception as e:
                eager = e
            if results[0][0] == "raised" and results[1][0] == "raised":
                # Both refuse the call (a trace then breaks the graph). The error itself may differ:
                # FakeTensorMode's Python view kernel raises ValueError where the meta kernel, as the
                # op on real tensors, raises RuntimeError; the short path must raise what eager does.
                assert isinstance(eager, Exception), where
                assert results[0][1] == type(eager).__name__, where
            else:
                assert results[0] == results[1], where
                # Strides of size-1 dimensions: FakeTensorMode's Python view kernel picks its own
                # (x of shape (1, 3), strides (1, 1): view(1, 1, 3) is (1, 3, 1) there); the short
                # path must give the strides the program's own tensors have ((3, 3, 1)). (Compared on
                # inputs read from the frame: `x * 2` itself may set those strides apart already.)
                strides = lambda t: [v.stride() for v in t] if isinstance(t, (tuple, list)) else t.stride()
                if not made_by_op:
                    assert strides(outputs[0]) == strides(eager), where
                if not direct_view(func):
                    assert results[0] == results[1] and strides(outputs[0]) == strides(outputs[1]), where
            shortcut += direct_view(func)
    assert shortcut > 500  # the short path was taken
    assert ours.views.hits > 100  # and the memo of views (split, unbind, diagonal...)


def test_the_short_path_covers_the_common_views_only():
    # (view, select and slice: FakeTensorMode's own kernels for them matter for symbolic sizes only)
    for func in (aten.transpose.int, aten.t.default, aten.permute.default, aten.expand.default,
                 aten.unsqueeze.default, aten.view.default, aten.slice.Tensor, aten.select.int):
        assert direct_view(func), func
    for func in (aten.add.Tensor, aten.add_.Tensor, aten.t_.default, aten.reshape.default, aten.index.Tensor,
                 aten.split.Tensor, aten._unsafe_view.default):
        assert not direct_view(func), func  # not a plain view, or FakeTensorMode has its own handling

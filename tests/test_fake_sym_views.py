"""Views over symbolic sizes (pyframe/fake/views.py): PyframeFakeTensorMode over a ShapeEnv
remembers the views it made and makes `transpose` and `permute` directly. Each view must be what
FakeTensorMode itself gives (sizes and strides as the same expressions, the offset, the input's
storage, an autograd view of the input), and the ShapeEnv must be left as FakeTensorMode leaves it.
"""
from __future__ import annotations

import pytest
import torch
from torch._dispatch.python import enable_python_dispatcher
from torch._subclasses.fake_tensor import FakeTensorMode

import pyframe
from pyframe.fake.mode import PyframeFakeTensorMode
from pyframe.fake.shapes import _NamedSource
from pyframe.source import LocalSource
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext


def _mode(cls: type) -> FakeTensorMode:
    mode = cls(allow_non_fake_inputs=False, shape_env=ShapeEnv(allow_scalar_outputs=False,
                                                                allow_dynamic_output_shape_ops=False))
    mode.remember_views = True  # (as a symbolic OutputGraph sets it while tracing)
    return mode


def _symbolic(mode: FakeTensorMode, shape: tuple, dynamic: tuple, name: str = "x") -> torch.Tensor:
    sizes = [DimDynamic.DYNAMIC if i in dynamic else DimDynamic.STATIC for i in range(len(shape))]
    context = StatelessSymbolicContext(dynamic_sizes=sizes, constraint_sizes=[None] * len(shape))
    return mode.from_tensor(torch.randn(shape), source=_NamedSource(LocalSource(name)), symbolic_context=context)


def _meta(t: torch.Tensor, base: torch.Tensor) -> tuple:
    return (tuple(str(s) for s in t.shape), tuple(str(s) for s in t.stride()), str(t.storage_offset()),
            t.dtype, t._is_view(), t._base is base, torch._C._is_alias_of(t, base), t is base)


def _knowledge(mode: FakeTensorMode) -> tuple:
    env = mode.shape_env
    return ([str(g.expr) for g in env.guards], dict(env.replacements),
            {k: (v.lower, v.upper) for k, v in env.var_to_range.items()})


PROGRAMS = {
    "transpose": lambda x: x.transpose(1, 2),
    "transpose_negative": lambda x: x.transpose(-1, 0),
    "permute": lambda x: x.permute(0, 2, 1, 3),
    "t_of_a_matrix": lambda x: x[0, 0].t(),
    "view": lambda x: x.view(x.shape[0], x.shape[1], 12),
    "view_flat": lambda x: x.view(-1),
    "reshape_of_a_transpose": lambda x: x.transpose(1, 2).reshape(x.shape[0], -1),
    "expand": lambda x: x[:, :1].expand(x.shape[0], x.shape[1], 3, 4),
    "slice": lambda x: x[:, 1:],
    "select": lambda x: x[:, 1],
    "split": lambda x: x.split(2, dim=-1),
    "unbind": lambda x: x.unbind(2),
    "unsqueeze": lambda x: x.unsqueeze(1),
    # computed without a dispatch where every question is decided statically; the others dispatch
    "view_split_and_merge": lambda x: x.view(x.shape[0], x.shape[1], 2, 6),
    "view_batch_merged": lambda x: x.view(-1, 3, 4),
    "view_batch_merged_and_split_again": lambda x: x.view(-1, 12).view(x.shape[0], x.shape[1], 12),
    "view_inferred_middle": lambda x: x.view(2, -1, 4),
    "view_inferred_last": lambda x: x.view(2, x.shape[1], -1),
    "view_to_2d": lambda x: x.view(2, -1),
    "view_of_a_flat_tensor_to_2d": lambda x: x.view(-1).view(x.shape[0], -1),
    "view_of_static_sizes": lambda x: x[0, 0].view(2, 6),
    "view_that_guards_divisibility": lambda x: x.view(4, -1),
    "view_that_guards_equality": lambda x: x.view(x.shape[1], 2, 12),
    "view_with_a_size_1": lambda x: x.view(2, 1, -1),
    "view_of_a_transpose_fails": lambda x: x.transpose(1, 2).view(-1),
    "view_of_a_split_part": lambda x: x.view(2, x.shape[1], 12).split(6, dim=-1)[1].view(2, x.shape[1], 2, -1),
    "view_of_a_transpose_to_its_own_sizes": lambda x: x.transpose(1, 2).view(2, 3, x.shape[1], 4),
    "view_of_a_slice_merging_its_tail": lambda x: x[:, :, 1:].view(2, x.shape[1], 8),
    "view_of_a_transpose_merging_its_tail": lambda x: x.transpose(0, 1).view(x.shape[1], 2, 12),
    "view_of_a_transpose_splitting_a_symbol_fails": lambda x: x.transpose(0, 1).view(-1, 24),
    "unsqueeze_last": lambda x: x.unsqueeze(-1),
    "unsqueeze_first": lambda x: x.unsqueeze(0),
    "unsqueeze_of_a_transpose": lambda x: x.transpose(1, 2).unsqueeze(2),
    "unsqueeze_of_a_size_1": lambda x: x[:, :1].unsqueeze(1),
    "expand_new_leading": lambda x: x.expand(3, -1, -1, -1, -1),
    "expand_new_leading_1": lambda x: x.expand(1, x.shape[0], x.shape[1], 3, 4),
    "expand_a_1_to_a_symbol": lambda x: x[:, :1].expand(-1, x.shape[1], -1, -1),
    "expand_a_1_to_an_int": lambda x: x[:, :1].expand(2, 7, 3, 4),
    "expand_of_a_transpose": lambda x: x[:, :, :1].transpose(1, 2).expand(-1, 3, -1, -1),
    "expand_to_the_symbols_value": lambda x: x.expand(2, 5, 3, 4),  # (specializes: dispatched)
    "expand_too_few_sizes": lambda x: x.expand(3, 4),
    "slice_of_a_static_size": lambda x: x[..., :2],
    "slice_of_a_static_size_from": lambda x: x[..., 2:],
    "slice_negative_bounds": lambda x: x[..., -3:-1],
    "slice_past_the_end": lambda x: x[..., 1:9],
    "slice_empty": lambda x: x[..., 3:1],
    "slice_with_a_step": lambda x: x[..., ::3],
    "slice_of_the_first_size": lambda x: x[1:],  # (the offset: 1 * 60*s)
    "slice_of_a_slice": lambda x: x[..., 1:][..., 1:],
    "slice_of_a_transpose": lambda x: x.transpose(1, 3)[:, 1:3],
    "slice_whole_symbol": lambda x: x[:, 0:],
    "slice_symbol_with_a_step": lambda x: x[:, ::2],
    "slice_symbol_from_1": lambda x: x[:, 1:],  # (dispatched)
    "slice_symbol_to_3": lambda x: x[:, :3],  # (dispatched)
    "narrow": lambda x: x.narrow(2, 1, 2),
    "split_uneven": lambda x: x.split(3, dim=-1),
    "split_of_a_transpose": lambda x: x.transpose(1, 3).split(1, dim=1),
    "split_of_the_first_size": lambda x: x.split(1),
    "split_with_sizes": lambda x: x.split([1, 3], dim=-1),
    "split_with_sizes_wrong": lambda x: x.split([1, 2], dim=-1),
    "split_of_a_symbol": lambda x: x.split(2, dim=1),  # (dispatched)
    "chunk": lambda x: x.chunk(2, dim=-1),
    # the views of each part of a split: the memo's entry for the first serves the others, shifted
    "views_of_each_split_part": lambda x: [p.view(2, x.shape[1], 3, 2, 2) for p in x.split(4, dim=-1)[0].split(2, -1)],
    "unsqueeze_of_each_part": lambda x: [p.unsqueeze(1) for p in x.split(1, dim=2)],
    "slices_of_each_part": lambda x: [p[..., 1:] for p in x.split(1, dim=2)],
    "selects_of_each_part": lambda x: [p.select(-1, 1) for p in x.split(2, dim=-1)],
    "views_of_each_part_with_a_1": lambda x: [p.view(2, x.shape[1], 1, 4) for p in x.split(1, dim=2)],
    "to_its_own_dtype": lambda x: x.to(x.dtype),
    "aten_to_its_own_dtype": lambda x: torch.ops.aten.to.dtype(x, x.dtype),  # (x itself: no view)
    "alias": lambda x: torch.ops.aten.alias(x),
}


def _run(cls: type, program) -> tuple:
    mode = _mode(cls)
    x = _symbolic(mode, (2, 5, 3, 4), dynamic=(1,))
    outs = []
    with mode, enable_python_dispatcher():
        for _ in range(3):  # (the first dispatch, then the memo's hits)
            try:
                out = program(x)
            except (RuntimeError, ValueError) as e:  # (a view the strides do not allow: the same error)
                outs.append(str(e))
                continue
            outs.append([_meta(o, x) for o in out] if isinstance(out, (tuple, list)) else _meta(out, x))
    return outs, _knowledge(mode), mode


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_views_are_fake_tensor_modes_own(name):
    ours, our_knowledge, mode = _run(PyframeFakeTensorMode, PROGRAMS[name])
    theirs, their_knowledge, _ = _run(FakeTensorMode, PROGRAMS[name])
    assert ours == theirs
    assert our_knowledge == their_knowledge


def test_repeated_views_hit_the_memo_and_permutations_need_no_dispatch():
    mode = _mode(PyframeFakeTensorMode)
    x = _symbolic(mode, (2, 5, 12), dynamic=(1,))
    with mode, enable_python_dispatcher():
        for _ in range(4):
            x.view(x.shape[0], x.shape[1], 3, 4)
        views = mode.views
        assert views.misses >= 1 and views.hits >= 3
        before = FakeTensorMode.cache_hits + FakeTensorMode.cache_misses
        misses = views.misses
        x.transpose(1, 2).permute(2, 1, 0)
        # made directly: neither FakeTensorMode's dispatch cache nor the memo was asked
        assert FakeTensorMode.cache_hits + FakeTensorMode.cache_misses == before
        assert views.misses == misses


def test_the_backend_gets_the_mode_without_pyframes_shortcuts():
    seen = []

    def backend(gm, example_inputs):
        mode = torch._guards.TracingContext.try_get().fake_mode
        if mode.shape_env is not None:
            seen.append((mode.remember_views, mode.cache_enabled))
        return gm.forward

    def fn(x):
        return x.transpose(0, 1).reshape(-1) * 2

    pyframe.reset()
    compiled = pyframe.optimize(backend)(fn)
    for n in (3, 4):  # (the second compile is symbolic)
        x = torch.randn(n, 5)
        torch.testing.assert_close(compiled(x), fn(x))
    pyframe.reset()
    assert seen == [(False, FakeTensorMode(shape_env=None).cache_enabled)]


def test_unsqueeze_and_views_of_contiguous_tensors_need_no_dispatch(monkeypatch):
    dispatched = []
    real_dispatch = FakeTensorMode.dispatch

    def spy(self, func, types, args=(), kwargs=None):
        if getattr(func, "is_view", False):
            dispatched.append(func)
        return real_dispatch(self, func, types, args, kwargs)

    mode = _mode(PyframeFakeTensorMode)
    x = _symbolic(mode, (2, 5, 12), dynamic=(1,))
    s = x.shape[1]
    monkeypatch.setattr(FakeTensorMode, "dispatch", spy)
    with mode, enable_python_dispatcher():
        heads = x.view(x.shape[0], s, 3, -1)  # the static size split
        rows = heads.view(-1, 12)             # the batch merged with the symbol
        back = rows.view(x.shape[0], s, 12)   # and split from it again
        mask = x.unsqueeze(1).unsqueeze(-1)
        assert dispatched == []
        x.view(4, -1)  # (Mod(2*s, 4) needs a guard: dispatched, guarded as FakeTensorMode guards it)
        assert torch.ops.aten.view.default in dispatched
    assert [str(n) for n in heads.shape] == ["2", str(s), "3", "4"]
    assert [str(n) for n in heads.stride()] == [str(12 * s), "12", "4", "1"]
    assert str(rows.shape[0]) == str(2 * s) and [str(n) for n in back.stride()] == [str(n) for n in x.stride()]
    assert [str(n) for n in mask.shape] == ["2", "1", str(s), "12", "1"] and mask._base is x


def test_slices_of_static_sizes_and_whole_symbols_need_no_dispatch(monkeypatch):
    dispatched = []
    real_dispatch = FakeTensorMode.dispatch

    def spy(self, func, types, args=(), kwargs=None):
        if getattr(func, "is_view", False):
            dispatched.append(func)
        return real_dispatch(self, func, types, args, kwargs)

    mode = _mode(PyframeFakeTensorMode)
    x = _symbolic(mode, (2, 5, 4, 8), dynamic=(1,)).transpose(1, 2)  # (2, 4, s, 8), not contiguous
    monkeypatch.setattr(FakeTensorMode, "dispatch", spy)
    with mode, enable_python_dispatcher():
        first, second = x[..., :4], x[..., 4:]  # (LLaMA's rotate_half)
        whole = x[:, :, 0:]
        x.split(3, dim=-1)
        x.split([2, 6], dim=-1)
        assert dispatched == []
        x[:, :, 1:]  # (`1 <= s`, `s >= 1`... asked of the ShapeEnv: dispatched)
        assert torch.ops.aten.slice.Tensor in dispatched
    assert [str(n) for n in second.stride()] == [str(n) for n in x.stride()]
    assert second.storage_offset() == 4 and first.storage_offset() == 0 and second._base is x._base
    assert [str(n) for n in whole.shape] == [str(n) for n in x.shape]


def _view_of_an_equal_symbol(cls: type) -> tuple:
    mode = _mode(cls)
    x, y = _symbolic(mode, (2, 5, 12), dynamic=(1,), name="x"), _symbolic(mode, (2, 5, 12), dynamic=(1,), name="y")
    with mode, enable_python_dispatcher():
        x + y  # (the ShapeEnv learns that the two symbols are equal)
        view = y.view(2, x.shape[1], 3, 4)
    return _meta(view, y), _knowledge(mode)


def test_a_view_keeps_the_inputs_size_where_the_shape_env_knows_it_equal_to_the_one_asked_for():
    assert _view_of_an_equal_symbol(PyframeFakeTensorMode) == _view_of_an_equal_symbol(FakeTensorMode)


def test_views_of_a_splits_parts_share_one_memo_entry():
    """GPT-2's heads: `q, k, v = qkv.split(...)` then the same view of each part, at offsets 0, 32,
    64: one entry of the memo, its offsets relative to the part's, made three times."""
    mode = _mode(PyframeFakeTensorMode)
    x = _symbolic(mode, (2, 5, 3, 4), dynamic=(1,))
    with mode, enable_python_dispatcher():
        parts = x.split(1, dim=2)
        views = mode.views
        hits = views.hits
        outs = [p.view(2, x.shape[1], 1, 4) for p in parts]
        assert views.hits - hits == 2
    theirs_mode = _mode(FakeTensorMode)
    y = _symbolic(theirs_mode, (2, 5, 3, 4), dynamic=(1,))
    with theirs_mode, enable_python_dispatcher():
        theirs = [p.view(2, y.shape[1], 1, 4) for p in y.split(1, dim=2)]
    assert [_meta(o, x) for o in outs] == [_meta(o, y) for o in theirs]

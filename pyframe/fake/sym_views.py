"""Views over symbolic sizes: a memo of the views one trace with dynamic shapes makes.

A view op (`transpose`, `view`, `expand`, `split`...) on FakeTensors over a ShapeEnv goes through
FakeTensorMode's Python decomposition of it (`torch._refs`) and its dispatch cache, whose entries
for symbolic outputs are checked by building the output a second time: 1-3 ms a view, a third of
a transformer's dynamic recompile once its other ops are memoized (fake/memo.py) or given by rules.
And the memo of fake/memo.py cannot hold a view: its output must share its input's storage and be
an autograd view of it, which only the dispatch of the op itself makes.

So this memo sits inside that dispatch (PyframeFakeTensorMode.dispatch, below autograd, which
makes the view relation as for any view op): keyed by the op and its arguments' metadata (symbolic
sizes as their expressions), it remembers the sizes, strides and storage offset of the view(s) the
first dispatch gave, and a hit makes them directly, as `as_strided` of the input on the meta
device, wrapped as FakeTensorMode wraps its outputs. The view's metadata is what the first dispatch
gave, the storage is the input's: all that a later op can read. As with FakeTensorMode's own cache
over a ShapeEnv, a hit adds no guard: what the first dispatch decided about these expressions, this
ShapeEnv has recorded; the checks `as_strided` makes on the remembered sizes (in bounds of the
storage) are decided by it, and run with guards suppressed as FakeTensorMode's cache runs them.

`transpose` and `permute` need no first dispatch: their view is the input's sizes and strides in
another order, at the same offset, which no comparison of sizes decides (`permuted`).
"""
from __future__ import annotations

from typing import Any, Optional

import torch
from torch._ops import OpOverload
from torch._subclasses import fake_tensor as ft
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode, in_kernel_invocation_manager

from .memo import new_fake

_CONSTANTS = (int, float, bool, str, type(None), torch.dtype, torch.device, torch.layout, torch.memory_format)
_MAX_ENTRIES = 4096


class _Unkeyable(Exception):
    pass


def memoizable(func: Any) -> bool:
    """An aten view op FakeTensorMode has no special handling for (not a handler of its own, not
    in-place on the view's metadata, not a lift)."""
    return (isinstance(func, OpOverload) and func.is_view and func not in ft._DISPATCH_META_HANDLERS
            and func not in ft._DISPATCH_HANDLE_DIRECTLY and func not in FakeTensorMode.lift_fns
            and torch.Tag.inplace_view not in func.tags)


class SymbolicViews:
    """The memo of the views made over one ShapeEnv (it must not serve another)."""

    def __init__(self, mode: FakeTensorMode) -> None:
        self.mode = mode
        self._entries: dict[tuple, tuple] = {}
        self.hits = self.misses = 0

    def key(self, func: OpOverload, args: tuple, kwargs: dict) -> Optional[tuple[tuple, FakeTensor]]:
        """(the key of the call, its one tensor argument), or None when it cannot be memoized."""
        tensors: list[FakeTensor] = []
        try:
            key = (func, self._key(args, tensors), self._key(kwargs, tensors))
        except _Unkeyable:
            return None
        return (key, tensors[0]) if len(tensors) == 1 else None

    def permuted(self, func: OpOverload, args: tuple, kwargs: dict) -> Optional[FakeTensor]:
        """`x.transpose(d0, d1)` or `x.permute(dims)` made directly, or None (not one of them, or
        arguments other than a plain tensor and int dimensions)."""
        if kwargs or func not in _PERMUTATIONS or not args:
            return None
        base = args[0]
        if type(base) is not FakeTensor or base.fake_mode is not self.mode or base.constant is not None:
            return None
        if base.layout is not torch.strided or base.is_conj() or base.is_neg():
            return None
        order = _order(func, base.dim(), args[1:])
        if order is None:
            return None
        shape, stride = base.shape, base.stride()
        return self._view(base, [shape[d] for d in order], [stride[d] for d in order], base.storage_offset())

    def lookup(self, key: tuple, base: FakeTensor) -> Any:
        """The view(s) remembered for `key`, made on `base`; None on a miss."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        self.hits += 1
        kind, items = entry
        views = [self._view(base, *item) for item in items]
        return views[0] if kind is None else kind(views)

    def remember(self, key: tuple, base: FakeTensor, out: Any) -> None:
        """After a real dispatch: keep its output's metadata if it is a view (or a tuple or list of
        views) of `base` this memo can make again."""
        self.misses += 1
        kind = type(out) if type(out) in (tuple, list) else None
        outs = out if kind is not None else (out,)
        items = []
        for view in outs:
            if not self._plain_view_of(view, base):
                return
            items.append((tuple(view.shape), view.stride(), view.storage_offset()))
        if len(self._entries) >= _MAX_ENTRIES:
            self._entries.clear()
        self._entries[key] = (kind, tuple(items))

    def _view(self, base: FakeTensor, shape: tuple, stride: tuple, offset: Any) -> FakeTensor:
        with in_kernel_invocation_manager(self.mode), self.mode.shape_env.suppress_guards():
            meta = torch.ops.aten.as_strided.default(base, shape, stride, offset)
        return new_fake(self.mode, meta, base.fake_device)

    def _plain_view_of(self, view: Any, base: FakeTensor) -> bool:
        if view is base:  # (`x.to(x.dtype)` is x itself: no view could stand for it)
            return False
        if type(view) is not FakeTensor or view.fake_mode is not self.mode or view.constant is not None:
            return False
        if view.layout is not torch.strided or view.requires_grad or view.dtype is not base.dtype:
            return False
        if view.is_conj() or view.is_neg() or view.fake_device != base.fake_device:
            return False
        if not torch._C._is_alias_of(view, base):
            return False
        # (an unbacked size has no hint: FakeTensorMode's cache leaves those alone too)
        return all(type(n) is int or n.node.has_hint() for n in (*view.shape, *view.stride(), view.storage_offset()))

    def _key(self, v: Any, tensors: list) -> Any:
        tp = type(v)
        if tp in _CONSTANTS:
            return (tp, v)
        if tp is torch.SymInt:
            return ("sym", v.node.expr)
        if tp is FakeTensor:
            if v.fake_mode is not self.mode or v.constant is not None or v.layout is not torch.strided:
                raise _Unkeyable
            if v.is_conj() or v.is_neg():
                raise _Unkeyable
            tensors.append(v)
            return ("tensor", _dims(v.shape), _dims(v.stride()), _dims((v.storage_offset(),)), v.dtype,
                    v.fake_device)
        if tp is tuple or tp is list:
            return (tp, tuple([self._key(item, tensors) for item in v]))
        if tp is dict:
            return (tp, tuple([(k, self._key(item, tensors)) for k, item in v.items()]))
        raise _Unkeyable


_PERMUTATIONS = (torch.ops.aten.transpose.int, torch.ops.aten.permute.default)


def _order(func: OpOverload, ndim: int, args: tuple) -> Optional[list[int]]:
    """The order of the input's dimensions in a transpose's or permute's output, from int
    dimensions in range; None for anything else (the op's own dispatch raises or decides)."""
    bound = max(ndim, 1)  # (a 0-d tensor takes dimension 0 or -1)
    if func is torch.ops.aten.transpose.int:
        if len(args) != 2 or type(args[0]) is not int or type(args[1]) is not int:
            return None
        if not all(-bound <= d < bound for d in args):
            return None
        order = list(range(ndim))
        if ndim:
            d0, d1 = args[0] % ndim, args[1] % ndim
            order[d0], order[d1] = order[d1], order[d0]
        return order
    if len(args) != 1 or type(args[0]) not in (list, tuple) or len(args[0]) != ndim:
        return None
    if not all(type(d) is int and -bound <= d < bound for d in args[0]):
        return None
    order = [d % ndim for d in args[0]] if ndim else []
    return order if sorted(order) == list(range(ndim)) else None


def _dims(dims: Any) -> tuple:
    return tuple([d if type(d) is int else ("sym", d.node.expr) for d in dims])

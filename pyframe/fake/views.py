"""A memo of views: the view ops one FakeTensorMode runs, remembered by their inputs' metadata.

A view op (`transpose`, `view`, `expand`, `split`...) on FakeTensors cannot be rebuilt from
remembered metadata above the dispatch (fake/memo.py): its output must share its input's storage
and be an autograd view of it, which only the dispatch of the op itself makes. Yet its cost is in
getting there. Over a ShapeEnv FakeTensorMode runs it through its Python decomposition
(`torch._refs`) and its dispatch cache, whose entries for symbolic outputs are checked by building
the output a second time: 1-3 ms a view, a third of a transformer's dynamic recompile once its
other ops are memoized or given by rules. On static sizes the plain views take mode.py's short
path (30-70 us: a C++ meta kernel, which a hit of this memo does not beat), but `split`, a
composite op, goes through FakeTensorMode's decomposition: a millisecond each. Those come here.

So this memo sits inside that dispatch (PyframeFakeTensorMode.dispatch, below autograd, which
makes the view relation as for any view op): keyed by the op and its arguments' metadata (symbolic
sizes as their expressions), it remembers the sizes, strides and storage offset of the view(s) the
first dispatch gave, and a hit makes them directly, as `as_strided` of the input on the meta
device, wrapped as FakeTensorMode wraps its outputs. The view's metadata is what the first dispatch
gave, the storage is the input's: all that a later op can read. As with FakeTensorMode's own cache
over a ShapeEnv, a hit adds no guard: what the first dispatch decided about these expressions, this
ShapeEnv has recorded; the checks `as_strided` makes on the remembered sizes (in bounds of the
storage) are decided by it, and run with guards suppressed as FakeTensorMode's cache runs them.
The static mode, shared by every trace of the process (graph.py's fake_mode), keeps one memo for
the process, as its propagation memo is kept; a mode over a ShapeEnv keeps its own, which must not
serve another ShapeEnv (one that has not recorded those guards).

`transpose` and `permute` need no first dispatch: their view is the input's sizes and strides in
another order, at the same offset, which no comparison of sizes decides (`permuted`). Nor do
`split` and `slice` on static sizes, whose parts are offsets and sizes by integer arithmetic, and
`unsqueeze` (ATen's rule: the new dimension's stride is the next one's stride times its size).

Over a ShapeEnv, `unsqueeze`, `expand` and `view` need none either (`computed`, on a miss of
the memo): their view is computed as torch's own decompositions compute it (`broadcast_in_dim`
for the first two; `view`'s `_reshape_view_helper`: `infer_size`, then the split and collapse
of dimensions), asking each question those ask about the sizes in the same form, and answered only
where the ShapeEnv answers it statically (`_maybe_evaluate_static`, the first step of its
`evaluate_expr`), which records nothing. Any question it would decide by a guard (a view of
`(s77,)` as `(-1, 2)` guards `Eq(Mod(s77, 2), 0)`), a size 0 or 1, a collapse of dimensions whose
strides do not match as expressions, and the first dispatch runs as before. (On static sizes the
first dispatch decides `view` and `expand`: those decompositions and the meta kernels that the
program's own tensors get may set the strides of size-1 dimensions apart.)
"""
from __future__ import annotations

import contextlib
import functools
import operator
import sys
from typing import Any, Optional

import sympy
import torch
from torch._ops import OpOverload
from torch._subclasses import fake_tensor as ft
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode, in_kernel_invocation_manager
from torch.fx.experimental import _config as fx_config
from torch.utils._sympy.functions import Mod

from .memo import new_fake
from .rules import contiguous_strides
from .sym_rules import _size_at_least_two

_CONSTANTS = (int, float, bool, str, type(None), torch.dtype, torch.device, torch.layout, torch.memory_format)
_MAX_ENTRIES = 4096


class _Unkeyable(Exception):
    pass


@functools.cache
def memoizable(func: Any) -> bool:
    """An aten view op FakeTensorMode has no special handling for (not a handler of its own, not
    in-place on the view's metadata, not a lift)."""
    return (isinstance(func, OpOverload) and func.is_view and func not in ft._DISPATCH_META_HANDLERS
            and func not in ft._DISPATCH_HANDLE_DIRECTLY and func not in FakeTensorMode.lift_fns
            and torch.Tag.inplace_view not in func.tags)


class ViewMemo:
    """The memo of the views made by one FakeTensorMode (over a ShapeEnv: it must not serve another)."""

    def __init__(self, mode: FakeTensorMode) -> None:
        self.mode = mode
        self._entries: dict[tuple, tuple] = {}
        self.hits = self.misses = 0

    def clear(self) -> None:
        self._entries.clear()

    def key(self, func: OpOverload, args: tuple, kwargs: dict) -> Optional[tuple[tuple, FakeTensor]]:
        """(the key of the call, its one tensor argument), or None when it cannot be memoized."""
        tensors: list[FakeTensor] = []
        relative = func in _SHIFTED_BY_OFFSET
        try:
            key = (func, relative, self._key(args, tensors, relative), self._key(kwargs, tensors, relative))
        except _Unkeyable:
            return None
        return (key, tensors[0]) if len(tensors) == 1 else None

    def permuted(self, func: OpOverload, args: tuple, kwargs: dict) -> Optional[FakeTensor]:
        """`x.transpose(d0, d1)` or `x.permute(dims)` made directly, or None (not one of them, or
        arguments other than a plain tensor and int dimensions)."""
        if kwargs or func not in _PERMUTATIONS or not self._plain_base(args):
            return None
        base = args[0]
        order = _order(func, base.dim(), args[1:])
        if order is None:
            return None
        shape, stride = base.shape, base.stride()
        return self._view(base, [shape[d] for d in order], [stride[d] for d in order], base.storage_offset())

    def computed(self, func: OpOverload, args: tuple, kwargs: dict) -> Optional[FakeTensor]:
        """`x.unsqueeze(d)`, `x.split(...)`, `x[a:b]`, and over a ShapeEnv `x.expand(sizes)` or
        `x.view(sizes)`, computed without a dispatch where torch's decomposition of it decides every
        question about the sizes statically; None to dispatch it (see the module's docstring)."""
        if kwargs or fx_config.backed_size_oblivious or not self._plain_base(args):
            return None  # (size-oblivious: FakeTensorMode's view takes another path)
        if self.mode.shape_env is None and func not in _COMPUTED_ON_STATIC_SIZES:
            return None
        base = args[0]
        if func is _SLICE:
            return self._sliced(base, *args[1:]) if len(args) <= 5 else None
        if func is _SPLIT or func is _SPLIT_WITH_SIZES:
            return self._split(func, base, *args[1:]) if len(args) <= 3 else None
        if len(args) != 2:
            return None
        if func is _UNSQUEEZE:
            return self._unsqueezed(base, args[1])
        if func is _VIEW:
            return self._viewed(base, args[1])
        if func is _EXPAND:
            return self._expanded(base, args[1])
        return None

    def _plain_base(self, args: tuple) -> bool:
        """The view's input (its first argument) is a plain strided FakeTensor of this mode: no
        constant, no conjugate or negative bit."""
        if not args:
            return False
        base = args[0]
        if type(base) is not FakeTensor or base.fake_mode is not self.mode or base.constant is not None:
            return False
        return base.layout is torch.strided and not base.is_conj() and not base.is_neg()

    def _expanded(self, base: FakeTensor, sizes: Any) -> Optional[FakeTensor]:
        """`torch._refs.expand`, then `broadcast_in_dim`: each size kept (-1 or itself, the stride
        kept) or a size 1 broadcast (stride 0), new leading sizes of stride 0 (a 1: as unsqueeze
        makes it). Decided here: ints, sizes of at least 2 against 1 and -1, and a size against
        itself; a symbol asked for another expression dispatches (that check may guard)."""
        if type(sizes) not in (list, tuple) or len(sizes) < base.dim():
            return None
        shape, stride = list(base.shape), list(base.stride())
        if not all(type(n) is int or _size_at_least_two(n) for n in (*shape, *sizes)):
            return None
        lead = len(sizes) - len(shape)
        out_shape, out_stride = list(sizes), [0] * len(sizes)
        for i, (size, step) in enumerate(zip(shape, stride)):
            wanted = sizes[lead + i]
            if type(wanted) is int and wanted == -1:
                out_shape[lead + i], out_stride[lead + i] = size, step
            elif _expr(wanted) == _expr(size):  # (ints equal, or the same expression)
                out_stride[lead + i] = step
            elif type(size) is int and size == 1:
                if type(wanted) is int and wanted < 0:
                    return None  # (an error)
                out_stride[lead + i] = 0
            else:
                return None
        for i in range(lead):
            wanted = sizes[i]
            if type(wanted) is int and wanted < 0:
                return None
            if type(wanted) is int and wanted == 1:
                out_stride[i] = 1 if not shape else stride[0] * shape[0]
                # (broadcast_in_dim: a new size 1 before the first of the input's dimensions)
        return self._view(base, out_shape, out_stride, base.storage_offset())

    def _sliced(self, base: FakeTensor, dim: Any = 0, start: Any = None, end: Any = None,
                step: Any = 1) -> Optional[FakeTensor]:
        """FakeTensorMode's own `slice.Tensor` (fake_impls' `slice_forward`): int bounds on a
        static dimension (its questions are then about ints: Python answers them), or the whole of
        a symbolic one (`x[:, 0:]`: `0 <= s` and `s >= 0`, true of a size of at least 2); the
        view's offset and stride computed by the same SymInt arithmetic."""
        ndim = base.dim()
        if ndim == 0 or type(dim) is not int or not -ndim <= dim < ndim or type(step) is not int or step <= 0:
            return None
        if not (start is None or type(start) is int) or not (end is None or type(end) is int):
            return None
        dim %= ndim
        sizes, strides = list(base.shape), list(base.stride())
        size = sizes[dim]
        if type(size) is int:
            start_index = 0 if start is None else _slice_index(size, start)
            end_index = size if end is None or end == sys.maxsize else _slice_index(size, end)
            new_size: Any = (end_index - start_index + step - 1) // step if end_index >= start_index else 0
        else:
            if not _size_at_least_two(size) or start not in (None, 0) or end not in (None, sys.maxsize):
                return None
            start_index, end_index = 0, size
            new_size = (end_index - start_index + step - 1) // step
        offset = base.storage_offset() + start_index * strides[dim]
        sizes[dim] = new_size
        strides[dim] = strides[dim] * step
        return self._view(base, sizes, strides, offset)

    def _split(self, func: OpOverload, base: FakeTensor, sizes: Any, dim: Any = 0) -> Optional[Any]:
        """torch/_decomp's `split` (a tuple: chunks of `sizes`, the last one what is left) and
        torch/_refs' `split_with_sizes` (a list), along a static dimension in int sizes: each part
        `as_strided` of the input at the offset the parts before it take, by the same arithmetic."""
        ndim = base.dim()
        if type(dim) is not int or not -ndim <= dim < ndim:
            return None
        dim %= ndim
        dim_size = base.shape[dim]
        if type(dim_size) is not int or dim_size == 0:
            return None
        if func is _SPLIT:
            if type(sizes) is not int or sizes <= 0:
                return None
            chunks = (dim_size + sizes - 1) // sizes
            parts = [sizes] * chunks
            parts[-1] = sizes - (sizes * chunks - dim_size)
        else:
            if type(sizes) not in (list, tuple) or not all(type(n) is int and n >= 0 for n in sizes):
                return None
            if sum(sizes) != dim_size:
                return None  # (an error: FakeTensorMode raises it)
            parts = list(sizes)
        shape, stride = list(base.shape), base.stride()
        offset = base.storage_offset()
        views = []
        for size in parts:
            shape[dim] = size
            views.append(self._view(base, list(shape), stride, offset))
            offset = offset + stride[dim] * size
        return tuple(views) if func is _SPLIT else views

    def _unsqueezed(self, base: FakeTensor, dim: Any) -> Optional[FakeTensor]:
        """`torch._refs.unsqueeze`: `broadcast_in_dim` to the sizes with a 1 inserted. It asks of
        each size whether it is 1 (decided here for ints and sizes of at least 2) and whether it
        equals itself; the new dimension's stride is `stride * size` of the dimension it precedes
        (1 at the end), ATen's rule too."""
        ndim = base.dim()
        if type(dim) is not int or not -(ndim + 1) <= dim <= ndim:
            return None
        dim %= ndim + 1
        shape, stride = list(base.shape), list(base.stride())
        if not all(type(n) is int or _size_at_least_two(n) for n in shape):
            return None
        new_stride = 1 if dim == ndim else stride[dim] * shape[dim]
        return self._view(base, shape[:dim] + [1] + shape[dim:], stride[:dim] + [new_stride] + stride[dim:],
                          base.storage_offset())

    def _viewed(self, base: FakeTensor, sizes: Any) -> Optional[FakeTensor]:
        """`torch._refs._reshape_view_helper` (FakeTensorMode's `view`) on an input whose sizes are
        all at least 2 (so that its `== 1` and `== 0` questions are decided) to sizes of at least 2
        and at most one -1, the -1 computed as `infer_size` computes it (`numel // newsize`)."""
        shape, strides = tuple(base.shape), base.stride()
        if not shape or type(sizes) not in (list, tuple) or not sizes:
            return None
        if type(base.storage_offset()) is not int or not all(_at_least_two(n) for n in shape):
            return None
        target = list(sizes)
        inferred = [i for i, n in enumerate(target) if type(n) is int and n == -1]
        if len(inferred) > 1 or not all(_at_least_two(n) for i, n in enumerate(target) if i not in inferred):
            return None
        numel = base.numel()
        if inferred:  # infer_size: numel % newsize == 0 checked, then numel // newsize
            newsize = functools.reduce(operator.mul, [n for i, n in enumerate(target) if i != inferred[0]], 1)
            if _expr(numel % newsize) != 0:
                return None
            target[inferred[0]] = numel // newsize
            if not _at_least_two(target[inferred[0]]):
                return None
        if functools.reduce(operator.mul, [_expr(n) for n in target], 1) != _expr(numel):
            return None  # (the numel check, decided as an identity of expressions)
        contiguous = self._contiguous(shape, strides)
        if contiguous is None:
            return None
        if contiguous and (len(target) == 1 or (len(target) == 2 and len(shape) == 1)):
            # (the helper's special cases of a contiguous input: as_strided to the contiguous view)
            return self._view(base, target, list(contiguous_strides(tuple(target))), base.storage_offset())
        regrouped = self._regrouped([[n, st] for n, st in zip(shape, strides)], target)
        if regrouped is None:
            return None
        return self._view(base, *regrouped, base.storage_offset())

    def _contiguous(self, shape: tuple, strides: tuple) -> Optional[bool]:
        """`is_contiguous_or_false` (`check_contiguous_sizes_strides`), question by question, for
        sizes of at least 2 (its `numel() < 2` and `x == 1` are False); None if one is undecided."""
        expected: Any = 1
        expected_max: Any = 1
        for size, stride in reversed(tuple(zip(shape, strides))):
            differs = self._decide(_ne(_expr(stride), _expr(expected)))
            if differs is None:
                return None
            if differs:
                differs = self._decide(_ne(_expr(stride), _expr(expected_max)))
                if differs is None or differs:
                    return None if differs is None else False
            expected_max = expected_max * torch.sym_max(size, 1)
            expected = expected * size
        return True

    def _regrouped(self, have: list, target: list) -> Optional[tuple[list, list]]:
        """The sizes and strides `_reshape_view_helper_core_alg` gives the view of sizes and
        strides `have` (pairs, ints or SymInts) as `target`, collapsing and splitting dimensions as
        it does, every question it asks on the way decided statically; None where one is not (or
        the view fails). (A size it keeps is the input's, as there, not `target`'s: the two may be
        different expressions the ShapeEnv knows equal.)"""
        idx = 0
        for length in target:
            if idx >= len(have):
                return None
            size, step = have[idx]
            same = self._decide(_eq(_expr(length), _expr(size)))
            if same is None:
                return None
            if same:
                idx += 1
                continue
            accum, end = size, idx
            while True:  # `while accum % length != 0: accum *= next size`
                remainder = self._decide(_ne(_mod(_expr(accum), _expr(length)), 0))
                if remainder is None:
                    return None
                if not remainder:
                    break
                end += 1
                if end >= len(have):
                    return None
                accum = accum * have[end][0]
            if end != idx:  # _collapse_view_helper: valid if each stride is the next's times its size
                step = have[end][1]
                for i in range(end - 1, idx - 1, -1):
                    if _expr(have[i][1]) != _expr(have[i + 1][1]) * _expr(have[i + 1][0]):
                        return None  # (not a view, or not decided as an identity)
                    smaller = self._decide(_lt(_expr(have[i][1]), _expr(step)))  # (its min())
                    if smaller is None:
                        return None
                    if smaller:
                        step = have[i][1]
                have[idx:end + 1] = [[accum, step]]
            same = self._decide(_eq(_expr(accum), _expr(length)))
            if same is None:
                return None
            if not same:  # split_dim: its own `% != 0` check is the one decided above
                inner = accum // length
                if not _at_least_two(inner):
                    return None  # (a quotient left unsimplified: its questions are not ours)
                have[idx:idx + 1] = [[length, step * inner], [inner, step]]
            idx += 1
        if idx != len(have):  # (a tail of 1s to squeeze: there is none, no size is 1)
            return None
        return [n for n, _ in have], [st for _, st in have]

    def _decide(self, question: Any) -> Optional[bool]:
        """A question about sizes as the ShapeEnv's evaluate_expr would answer it without a guard:
        Python's answer on ints, sympy's on expressions it decides, else the ShapeEnv's static
        evaluation (its value ranges); None when only a guard would decide it."""
        if type(question) is bool:
            return question
        if question is sympy.true or question is sympy.false:
            return bool(question)
        if self.mode.shape_env is None:
            return None
        found = self.mode.shape_env._maybe_evaluate_static(question)
        return None if found is None else bool(found)

    def lookup(self, key: tuple, base: FakeTensor) -> Any:
        """The view(s) remembered for `key`, made on `base`; None on a miss."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        self.hits += 1
        kind, items = entry
        if key[1] and type(base.storage_offset()) is int:  # (offsets remembered from the input's)
            start = base.storage_offset()
            views = [self._view(base, shape, stride, start + offset) for shape, stride, offset in items]
        else:
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
            offset = view.storage_offset()
            if key[1] and type(base.storage_offset()) is int:
                if type(offset) is not int:
                    return
                offset -= base.storage_offset()
            items.append((tuple(view.shape), view.stride(), offset))
        if len(self._entries) >= _MAX_ENTRIES:
            self._entries.clear()
        self._entries[key] = (kind, tuple(items))

    def _view(self, base: FakeTensor, shape: tuple, stride: tuple, offset: Any) -> FakeTensor:
        shape_env = self.mode.shape_env
        with in_kernel_invocation_manager(self.mode), \
                shape_env.suppress_guards() if shape_env is not None else contextlib.nullcontext():
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

    def _key(self, v: Any, tensors: list, relative: bool) -> Any:
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
            offset = v.storage_offset()
            # (an int offset is left out where the view's offset is the input's plus what the rest
            # of the key decides: the view of a split's second part is the first part's, shifted)
            at = "int" if relative and type(offset) is int else _dims((offset,))
            return ("tensor", _dims(v.shape), _dims(v.stride()), at, v.dtype, v.fake_device)
        if tp is tuple or tp is list:
            return (tp, tuple([self._key(item, tensors, relative) for item in v]))
        if tp is dict:
            return (tp, tuple([(k, self._key(item, tensors, relative)) for k, item in v.items()]))
        raise _Unkeyable


_PERMUTATIONS = (torch.ops.aten.transpose.int, torch.ops.aten.permute.default)
_UNSQUEEZE, _EXPAND = torch.ops.aten.unsqueeze.default, torch.ops.aten.expand.default
_VIEW = torch.ops.aten.view.default
_SLICE = torch.ops.aten.slice.Tensor
_SPLIT, _SPLIT_WITH_SIZES = torch.ops.aten.split.Tensor, torch.ops.aten.split_with_sizes.default
# Views whose output offsets are the input's plus an amount its sizes, strides and the other
# arguments decide (their decompositions read the offset only to add to it), and whose questions
# about sizes never involve the offset: memoized relative to an int offset of the input.
# Views computed on static sizes too: by integer arithmetic that is ATen's own.
_COMPUTED_ON_STATIC_SIZES = frozenset({_UNSQUEEZE, _SLICE, _SPLIT, _SPLIT_WITH_SIZES})
_SHIFTED_BY_OFFSET = frozenset({_VIEW, _UNSQUEEZE, _EXPAND, _SLICE, _SPLIT, _SPLIT_WITH_SIZES,
                                torch.ops.aten.select.int})


def _slice_index(size: int, index: int) -> int:
    """fake_impls' `_compute_slice_index` on ints: an index clamped into [0, size]."""
    if 0 <= index <= size:
        return index
    if index < 0 and index >= -size:
        return index + size
    if index < -size:
        return 0
    return size  # (index > size)


def _expr(n: Any) -> Any:
    """An int as it is, a SymInt as its sympy expression."""
    return n if type(n) is int else n.node.expr


def _at_least_two(n: Any) -> bool:
    """An int of at least 2, or a SymInt (or sympy expression) of backed symbols of at least 2
    (fake/sym_rules.py's `_size_at_least_two`)."""
    if type(n) is int:
        return n >= 2
    if isinstance(n, torch.SymInt):
        if n.node.expr.is_Integer:  # (a number as a SymInt, `s*12 // (s*3)`: kept as the view's size)
            return n.node.expr >= 2
        return _size_at_least_two(n)
    return False


# The questions as SymNode's operators build them (sympy.Eq, sympy.Ne, torch's Mod for sizes).
def _eq(a: Any, b: Any) -> Any:
    return a == b if type(a) is int and type(b) is int else sympy.Eq(a, b)


def _ne(a: Any, b: Any) -> Any:
    return a != b if type(a) is int and type(b) is int else sympy.Ne(a, b)


def _mod(a: Any, b: Any) -> Any:
    return a % b if type(a) is int and type(b) is int else Mod(a, b)


def _lt(a: Any, b: Any) -> Any:
    return a < b if type(a) is int and type(b) is int else sympy.Lt(a, b)


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

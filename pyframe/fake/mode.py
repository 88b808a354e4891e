"""pyframe's FakeTensorMode: FakeTensorMode with a short path for the plain view ops.

A view (`x.transpose(1, 2)`, `x.permute(...)`, `w.t()`, `x.expand(...)`) cannot be rebuilt from
remembered metadata: it must share its input's storage and be a view of it for autograd, which only
the dispatch that makes it does. FakeTensorMode gets there through ~150 us of Python (its dispatch
cache's key and bookkeeping, constant propagation and device checks, then the meta kernel under
`in_kernel_invocation_manager`, then wrapping the result), a fifth of a transformer's trace.

For view ops that FakeTensorMode itself runs on that plain path (a C++ meta kernel, no fake kernel
of its own, no decomposition) and for inputs that make every other branch of it inert (FakeTensors
of this mode, without constants or symbolic sizes, on one device), this mode takes that path
directly: the meta kernel under `in_kernel_invocation_manager`, then the output wrapped as
FakeTensorMode wraps it. The outputs are the ones FakeTensorMode makes (tests/test_fake_mode.py
compares them, autograd's view relation and storage included); anything else goes to it.

`view`, `select` and `slice` take the short path too: FakeTensorMode's own kernels for them are
written for symbolic sizes and compute the meta kernel's view on static ones, except for the
strides of size-1 dimensions, where the meta kernel gives what the program's own tensors have and
FakeTensorMode's Python view kernel its own choice (`view` of a (1, 3) tensor with strides (1, 1)
to (1, 1, 3): (3, 3, 1) in eager, (1, 3, 1) there).

The other views (`split`, which FakeTensorMode decomposes: a millisecond) go to this mode's memo of
views (fake/views.py), which remembers what the first dispatch of each kind of view gave and makes
it again as `as_strided` of the input below autograd (no cheaper than a meta kernel: the short
path stays first). Over a ShapeEnv (dynamic shapes) the short path is closed (a C++ meta kernel
may specialize a symbolic size to an int): every view goes to the memo, a miss to FakeTensorMode.

The answers FakeTensorMode gives first of all, without a dispatch (`prim.device` and the size
queries C++ asks of a view's output), are given here before anything else.
"""
from __future__ import annotations

import functools
import logging
from typing import Any

import torch
from torch._ops import HigherOrderOperator, OpOverload
from torch._subclasses import fake_impls
from torch._subclasses import fake_tensor as ft
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode, in_kernel_invocation_manager
from torch.fx.experimental import _config as fx_config

from ..dynamo_interop import hide_from_dynamo

from .memo import new_fake
from .views import ViewMemo
from .views import memoizable as memoizable_view


@functools.cache
def direct_view(func: Any) -> bool:
    """Whether FakeTensorMode runs `func` on its plain path: an aten view op with a meta kernel,
    which it neither decomposes nor hands to a fake kernel or handler of its own."""
    try:
        return _plain_path_view(func)
    except RuntimeError:  # an overload the dispatcher does not know (TorchScript's list ones)
        return False


# Views FakeTensorMode has fake kernels of its own for, written for symbolic sizes (unbacked sizes,
# size-oblivious reasoning); on static sizes they compute the view the meta kernel computes.
_STATIC_SIZE_IMPLS = (torch.ops.aten.view.default, torch.ops.aten.select.int, torch.ops.aten.slice.Tensor)


def _plain_path_view(func: Any) -> bool:
    if func in _STATIC_SIZE_IMPLS:
        return fake_impls.has_meta(func)
    if not isinstance(func, OpOverload) or func.namespace != "aten" or not func.is_view:
        return False
    if func in ft._DISPATCH_META_HANDLERS or func in ft._DISPATCH_HANDLE_DIRECTLY or func in FakeTensorMode.lift_fns:
        return False
    if torch.Tag.inplace_view in func.tags or "prims::" in func._schema.name:
        return False
    from torch._decomp import decomposition_table, meta_table

    if func not in meta_table and not (torch.Tag.view_copy in func.tags or func in FakeTensorMode._cpp_meta_supports_symint):
        if func in decomposition_table and ft.torch_decomp_decompositions(func):
            return False
        implicit = torch._C.DispatchKey.CompositeImplicitAutograd
        if implicit in func.py_kernels or torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), implicit):
            return False
    if torch._library.simple_registry.singleton.find(func.name()).fake_impl.kernel:
        return False
    if any(check(func) for check, _ in fake_impls.op_implementations_checks):
        return False
    return fake_impls.has_meta(func)


class PyframeFakeTensorMode(FakeTensorMode):
    # Over a ShapeEnv: views from the memo of fake/views.py, while pyframe traces (graph.py turns
    # it off before the backend, which traces with this mode under its own proxy modes). The static
    # mode is pyframe's own (the backend makes its own): it always remembers them.
    remember_views: bool = False

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        """No torch._dynamo.disable wrapper around `__torch_dispatch__` (TorchDispatchMode's
        __init_subclass__ adds one otherwise): it resets torch._dynamo's frame hook twice on every
        dispatch, a tenth of a view's. torch._dynamo skips that code all the same: it is marked
        below (hide_from_dynamo), as pyframe's compiler is."""
        return False

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        # FakeTensorMode's own, without its call counter
        if torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE) is not None:
            raise AssertionError(f"FakeTensorMode should not be set when dispatching {func}")
        return self.dispatch(func, types, args, kwargs)

    @functools.cached_property
    def avoid_device_init(self) -> bool:
        """FakeTensorMode asks on every entry whether any accelerator is available (a tenth of a
        propagation); the answer stands for the life of the process."""
        return FakeTensorMode.avoid_device_init.fget(self)

    def dispatch(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func in _META_HANDLERS and not _fake_log.isEnabledFor(logging.DEBUG):
            # `prim.device` and the size queries, which C++ asks of the output of every view: what
            # FakeTensorMode answers first, without its debug line (made under no_dispatch)
            return _META_HANDLERS[func](args)
        if (memoizable_view(func) or direct_view(func)) and not self.in_kernel_invocation \
                and not self.propagate_real_tensors:
            if self.shape_env is None:  # (over a ShapeEnv a view's sizes may be symbolic anywhere in its arguments)
                if not fx_config.backed_size_oblivious:
                    if direct_view(func) and not kwargs:  # (its meta kernel costs no more than a memo's hit)
                        return self._dispatch_view(func, types, args, {})
                    if memoizable_view(func):  # (split: FakeTensorMode's decomposition, ~1 ms)
                        return self._remembered_view(func, types, args, kwargs or {})
            elif self.remember_views and memoizable_view(func):
                return self._remembered_view(func, types, args, kwargs or {})
        return super().dispatch(func, types, args, kwargs or {})

    @functools.cached_property
    def views(self) -> ViewMemo:
        """The memo of the views this mode made (fake/views.py): for the process, on static sizes."""
        return ViewMemo(self)

    def _remembered_view(self, func: Any, types: Any, args: tuple, kwargs: dict) -> Any:
        views = self.views
        out = views.permuted(func, args, kwargs)
        if out is not None:
            return out
        found = views.key(func, args, kwargs)
        if found is None:
            return self._dispatch_view(func, types, args, kwargs)
        key, base = found
        out = views.lookup(key, base)
        if out is None:
            out = views.computed(func, args, kwargs)  # (unsqueeze, split, slice; over a ShapeEnv, view, expand)
            if out is None:
                out = self._dispatch_view(func, types, args, kwargs)
            views.remember(key, base, out)
        return out

    def _dispatch_view(self, func: Any, types: Any, args: tuple, kwargs: dict) -> Any:
        """A view made by its op: on static sizes the short path where it applies, else FakeTensorMode's."""
        if self.shape_env is None and not kwargs and direct_view(func):
            device = _common_device(self, args)
            if device is not None:
                with in_kernel_invocation_manager(self):
                    out = func(*args)
                return _wrap(self, out, device)
        return super().dispatch(func, types, args, kwargs)


def use_fake_kernel_of(op: HigherOrderOperator) -> None:
    """Let a higher-order op (`torch.ops.higher_order.cond`) run on pyframe's FakeTensors with the
    kernel it registered for FakeTensorMode: it looks its kernels up by the mode's exact type, so a
    subclass of the mode finds none of them."""
    if PyframeFakeTensorMode not in op.python_key_table and FakeTensorMode in op.python_key_table:
        op.py_impl(PyframeFakeTensorMode)(op.python_key_table[FakeTensorMode])


def _common_device(mode: FakeTensorMode, args: tuple) -> torch.device | None:
    """The device of the view's tensor argument, if every tensor argument is a plain FakeTensor
    of `mode` on it; None otherwise (FakeTensorMode's own path decides)."""
    device = None
    for arg in args:
        if isinstance(arg, (list, tuple)):
            if any(isinstance(a, torch.Tensor) for a in arg):
                return None
            continue
        if isinstance(arg, torch.Tensor):
            if type(arg) is not FakeTensor or arg.fake_mode is not mode or arg.constant is not None:
                return None
            if arg._has_symbolic_sizes_strides or (device is not None and arg.fake_device != device):
                return None
            device = arg.fake_device
        elif isinstance(arg, torch.SymInt):
            return None
    return device


def _wrap(mode: FakeTensorMode, out: Any, device: torch.device) -> Any:
    if isinstance(out, (list, tuple)):
        return type(out)(_wrap(mode, item, device) for item in out)
    if isinstance(out, FakeTensor) and out.fake_mode is mode:
        return out
    if type(out) is torch.Tensor and not out.requires_grad:
        # A fresh meta tensor (autograd sits above this dispatch): wrapped as FakeTensorMode wraps
        # it (from_meta_and_device: the constructor, and a memo from it nothing else reaches).
        return new_fake(mode, out, device)
    if isinstance(out, torch.Tensor):
        return mode.fake_tensor_converter.from_meta_and_device(mode, out, device)
    return out


_META_HANDLERS = ft._DISPATCH_META_HANDLERS
_fake_log = ft.log

hide_from_dynamo(PyframeFakeTensorMode.__torch_dispatch__.__code__, PyframeFakeTensorMode.dispatch.__code__)

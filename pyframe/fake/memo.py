"""Cheap FakeTensors: a memo of propagation, and a direct path for plain graph inputs.

The memo: the output metadata of an op, keyed by its inputs' metadata.

Tracing runs every recorded op on FakeTensors to learn its output's shape, stride and dtype. That
goes through FakeTensorMode's Python dispatch and costs 60-100 us an op, most of a trace's time on
long graphs. Yet a FakeTensor carries nothing but metadata, and the metadata of an op's output is
a function of the op, its inputs' metadata, its constant arguments and torch's global state, so
a program that repeats an op on same-shaped tensors (the blocks of a network, a chain of
elementwise ops) needs to propagate it only once. A hit builds the output FakeTensor directly
from the remembered metadata (~5 us; ~20 us for one that needs a grad_fn).

Only outputs that are indistinguishable from a fresh tensor are remembered: one plain FakeTensor,
its own new storage (not a view or an alias of an input: in-place ops, `out=` and views of inputs
always propagate) and no input mutated. An output that requires grad is rebuilt as the real propagation
makes it: not a leaf, with a `grad_fn` (autograd records one when the fresh tensor is overwritten,
in place and on the meta kernel, by a meta scalar that requires grad: ~10 us more), so in-place ops
and `is_leaf` behave on it as on the real one; a leaf that requires grad (`torch.zeros(2, requires_grad=True)`) is rebuilt as a leaf. A key holds only
values whose identity or value decides the output: tensors by metadata (a constant FakeTensorMode
keeps the values of only when it is empty, marked apart: `torch.tensor([])`), and constants of a
few immutable types; any other argument makes the op unmemoizable.

Over a ShapeEnv (a trace with dynamic shapes) a memo of its own serves one trace: its keys hold
symbolic sizes as their sympy expressions (`s77`, `64*s77`), so the second block of a transformer,
which repeats the first's ops on the same symbolic shapes, hits the first's entries, and a hit
builds a FakeTensor with the remembered SymInts. It adds no guard, as FakeTensorMode's own cache
over a ShapeEnv adds none: whatever the first propagation decided on those expressions it recorded
in this ShapeEnv, which then knows it. Such a memo never outlives its ShapeEnv (another ShapeEnv
has not recorded those guards).

The direct path (`plain_fake`): FakeTensorMode.from_tensor describes a real tensor's storage,
view base and subclass in full (~90 us a tensor). Most graph inputs are parameters, buffers and
arguments that are none of these special things (a dense leaf tensor on the CPU that owns its
storage exactly), and their FakeTensor is built in ~15 us from the same metadata.

`torch.tensor(data)` of Python numbers (`constant_tensor`): FakeTensorMode makes the real tensor,
lifts it (`aten.lift_fresh`), then fakes a copy through from_real_tensor, keeping the copy as the
FakeTensor's `constant` when it has at most one element (~170 us, 500 us in a trace). The real
tensor is made here the same way, outside the mode, and faked by the direct path, its `constant`
set as the lift sets it.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorConfig, FakeTensorMode

_MAX_ENTRIES = 4096
_CONSTANT_TYPES = (int, float, bool, str, type(None), torch.dtype, torch.device, torch.layout, torch.memory_format)
_META = torch.device("meta")


class _Unkeyable(Exception):
    pass


class _Output:
    """What a hit rebuilds: a fresh, contiguous-or-strided tensor on the fake device, requiring grad
    as the real output did (with a grad_fn unless that was a leaf)."""

    __slots__ = ("shape", "stride", "dtype", "device", "requires_grad", "is_leaf", "value_key", "_by_empty")

    def __init__(self, shape: tuple, stride: tuple, dtype: torch.dtype, device: torch.device,
                 requires_grad: bool, is_leaf: bool) -> None:
        self.shape, self.stride, self.dtype, self.device = shape, stride, dtype, device
        self.requires_grad, self.is_leaf = requires_grad, is_leaf
        # What _tensor_key gives for every tensor build() makes (fresh: no offset, conj or neg bit),
        # so the key of a node made from a hit needs no reading back.
        self.value_key = (_dims_key(shape), _dims_key(stride), 0, dtype, device, requires_grad)
        self._by_empty: Optional[bool] = None  # (fresh's choice, made on its first build)

    @classmethod
    def of(cls, t: FakeTensor) -> "_Output":
        return cls(tuple(t.shape), t.stride(), t.dtype, t.fake_device, t.requires_grad, t.is_leaf)

    def build(self, mode: FakeTensorMode) -> FakeTensor:
        fake = self.fresh(mode)
        if self.requires_grad:
            if self.is_leaf:
                fake.requires_grad_()
            else:
                _give_grad_fn(fake, mode)
        return fake

    def fresh(self, mode: FakeTensorMode) -> FakeTensor:
        if mode.shape_env is None:
            meta = torch.empty_strided(self.shape, self.stride, dtype=self.dtype, device=_META)
        else:
            # (as FakeTensorMode rebuilds a cached output: what the sizes imply was decided when
            # they were first computed; the meta tensor's own bookkeeping adds no guard)
            if self._by_empty is None:
                self._by_empty = by_empty(self.shape, self.stride)
            with mode.shape_env.suppress_guards():
                meta = None
                if self._by_empty:
                    meta = torch.empty(self.shape, dtype=self.dtype, device=_META)
                    if not same_dims(meta.stride(), self.stride):
                        meta = None  # (a size the ShapeEnv cannot put at 1 or more: empty() strides by Max(1, s))
                if meta is None:
                    meta = torch.empty_strided(self.shape, self.stride, dtype=self.dtype, device=_META)
        return new_fake(mode, meta, self.device)


def by_empty(shape: tuple, stride: tuple) -> bool:
    """Whether `torch.empty(shape)` makes the tensor `torch.empty_strided(shape, stride)` makes,
    over symbolic sizes, in fewer SymInt operations (each a Python call on sympy expressions: ten
    for a (2, s, 64) tensor by empty_strided, seven by empty; a symbolic build is ~200 us).

    `stride` must be the contiguous strides of `shape` as expressions (empty() computes those), and
    at most one size symbolic: empty_strided's storage size is 1 + sum(stride * (size - 1)) and
    empty's numel * itemsize, which sympy brings to one canonical expression only where every
    symbolic size has an int stride (`512*s0` both ways); with two symbolic sizes the sum keeps a
    product unexpanded (`4*s1*(s0 - 1) + ...`), a different expression of the same number."""
    if sum(type(n) is not int for n in shape) > 1:
        return False
    return strides_are_contiguous(stride, shape)


def strides_are_contiguous(strides: tuple, shape: tuple) -> bool:
    """Whether `strides` are the contiguous strides of `shape` (each the product of the sizes after
    it, an int size below 1 counted as 1), compared as expressions, with no SymInt arithmetic."""
    if len(strides) != len(shape):
        return False
    step: Any = 1  # an int, or the sympy expression of the product so far
    for stride, size in zip(reversed(strides), reversed(shape)):
        if type(stride) is int:
            if type(step) is not int or stride != step:
                return False
        elif type(step) is int or stride.node.expr != step:
            return False
        step = step * (max(size, 1) if type(size) is int else size.node.expr)
    return True


def same_dims(a: tuple, b: tuple) -> bool:
    """Two tuples of sizes (or strides) alike: the same ints, the same symbolic expressions."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if type(x) is int or type(y) is int:
            if type(x) is not type(y) or x != y:
                return False
        elif x.node.expr != y.node.expr:
            return False
    return True


class _Outputs:
    """What a hit rebuilds for an op that gives a tuple or list of fresh tensors (and Nones)."""

    __slots__ = ("kind", "items")

    def __init__(self, kind: type, items: list[Optional[_Output]]) -> None:
        self.kind, self.items = kind, items

    def build(self, mode: FakeTensorMode) -> Any:
        return self.kind([None if item is None else item.build(mode) for item in self.items])


_anchor: Optional[torch.Tensor] = None


def _give_grad_fn(fake: FakeTensor, mode: FakeTensorMode) -> None:
    """Make a fresh FakeTensor a non-leaf that requires grad, as an op's output on inputs that
    require grad is: `fake.copy_(anchor)`, a meta scalar that requires grad broadcast into it, has
    autograd record a CopyBackwards node on it. The copy runs as FakeTensorMode runs its kernels
    (`in_kernel_invocation_manager`: Python dispatch off, the meta kernel, a no-op), and the version
    counter the copy bumped is put back: the real output is fresh, at version 0. Example values are
    never differentiated."""
    global _anchor
    if _anchor is None:
        _anchor = torch.empty((), device=_META, requires_grad=True)
    previous, meta_included = mode.in_kernel_invocation, torch._C._meta_in_tls_dispatch_include()
    mode.in_kernel_invocation = True
    torch._C._set_meta_in_tls_dispatch_include(True)
    try:
        with torch._C._DisableTorchDispatch(), torch.enable_grad():
            fake.copy_(_anchor)
    finally:
        torch._C._set_meta_in_tls_dispatch_include(meta_included)
        mode.in_kernel_invocation = previous
    torch._C._autograd._unsafe_set_version_counter((fake,), (0,))


class PropagationMemo:
    """`mode`: the FakeTensorMode the outputs are built for. Over a ShapeEnv (`mode.shape_env`) the
    memo keys symbolic sizes by expression, and must serve that ShapeEnv's trace only."""

    def __init__(self, mode: FakeTensorMode) -> None:
        self.mode = mode
        self.symbolic = mode.shape_env is not None
        self._tensor_key = _symbolic_tensor_key if self.symbolic else _tensor_key
        self._entries: dict[tuple, _Output] = {}
        self.hits = self.misses = 0

    @staticmethod
    def global_state() -> Optional[tuple]:
        """The global state a key holds, read once per trace (the trace runs none of the user's
        code, so it cannot change it); None when nothing may be memoized under it."""
        if torch._C._is_torch_function_mode_enabled() or torch.is_inference_mode_enabled():
            return None  # a user's mode sees (and may change) every call; inference tensors have no versions
        if torch._C._len_torch_dispatch_stack() or torch._C._are_functorch_transforms_active():
            return None  # a user's dispatch mode or a torch.func transform would see what a hit builds
        return torch.get_default_dtype(), _autocast_state("cpu"), _autocast_state("cuda")

    def key(self, op: str, target: Any, args: tuple, kwargs: dict, modes: tuple, state: Optional[tuple],
            node_keys: dict) -> Optional[tuple]:
        """The memo key of one call, or None when it cannot be memoized. `modes`: the trace's own
        grad mode and autocast regions; `state`: global_state(); `node_keys`: the keys of the
        trace's nodes' values so far (the owner empties it when a real propagation may have
        changed a value's metadata in place)."""
        if state is None:
            return None
        try:
            tensor_key = self._tensor_key
            args_key = tuple([_key_of(arg, node_keys, tensor_key) for arg in args])
            kwargs_key = tuple([(k, _key_of(v, node_keys, tensor_key)) for k, v in kwargs.items()]) if kwargs else ()
            return (op, target, args_key, kwargs_key, modes, state)
        except (_Unkeyable, TypeError):  # TypeError: an unhashable target
            return None

    def entry(self, key: tuple) -> Optional[Any]:
        """The `_Output` (or `_Outputs`) remembered for `key`, counted as a hit; None on a miss."""
        try:
            out = self._entries.get(key)
        except TypeError:
            return None
        if out is not None:
            self.hits += 1
        return out

    def clear(self) -> None:
        self._entries.clear()

    def store(self, key: tuple, out: _Output) -> None:
        """Remember what a shape rule (fake/rules.py) gave for `key`."""
        self.misses += 1
        if len(self._entries) >= _MAX_ENTRIES:
            self._entries.clear()
        self._entries[key] = out

    def remember(self, key: tuple, fake_inputs: list[torch.Tensor], versions: list[int], example: Any) -> None:
        """After a real propagation: keep its output if fresh tensors could stand for it (one, or
        a tuple or list of them and Nones: `F.multi_head_attention_forward` gives `(out, None)`)."""
        self.misses += 1
        if type(example) in (tuple, list):
            tensors = [t for t in example if t is not None]
            if not tensors or not all(_is_fresh(t, self.mode, fake_inputs, versions) for t in tensors):
                return
            if any(torch._C._is_alias_of(a, b) for i, a in enumerate(tensors) for b in tensors[i + 1:]):
                return
            out: Any = _Outputs(type(example), [None if t is None else _Output.of(t) for t in example])
        elif _is_fresh(example, self.mode, fake_inputs, versions):
            out = _Output.of(example)
        else:
            return
        if len(self._entries) >= _MAX_ENTRIES:
            self._entries.clear()
        try:
            self._entries[key] = out
        except TypeError:
            pass


def new_fake(mode: FakeTensorMode, meta: torch.Tensor, device: torch.device) -> FakeTensor:
    """`FakeTensor(mode, meta, device)` for a fresh meta tensor, in a third of its time.

    The constructor validates its arguments, then wraps `meta` and sets a dozen attributes to the
    same values every time (the mode, the device, empty memos). Here the wrapping is done as the
    constructor does it and the attributes are copied from one FakeTensor the constructor made for
    this mode and device, so the two are alike in every attribute (tests/test_fake_memo.py)."""
    # (kept on the mode, not in a table of this module: a trace with dynamic shapes has a mode of
    # its own, which must not outlive it)
    templates = mode.__dict__.get("_pyframe_fake_templates")
    if templates is None:
        templates = mode.__dict__["_pyframe_fake_templates"] = {}
    template = templates.get(device)
    if template is None:
        if FakeTensorConfig.debug:
            return FakeTensor(mode, meta, device)  # the constructor records a traceback: take its path
        template = templates[device] = dict(FakeTensor(mode, meta, device).__dict__)
    fake = _make_subclass(FakeTensor, meta, False, dispatch_device=True, device_for_backend_keys=device)
    if mode._allow_unsafe_data_ptr_access:
        torch._C._set_warn_deprecated_on_mutable_data_ptr(fake)
    else:
        torch._C._set_throw_on_mutable_data_ptr(fake)
    fake.__dict__.update(template)
    return fake


_make_subclass = torch.Tensor._make_subclass


def plain_fake(mode: FakeTensorMode, t: torch.Tensor) -> Optional[FakeTensor]:
    """The FakeTensor of a plain real tensor, as `mode.from_tensor(t, static_shapes=True)` makes it;
    None when `t` is anything else (a view, a subclass, sparse, ..., or memory it shares)."""
    tp = type(t)
    if tp is not torch.Tensor and tp is not torch.nn.Parameter:
        return None
    if t.layout is not torch.strided or t.device.type != "cpu" or not t.is_leaf or t._is_view():
        return None
    if t.is_inference() or torch.is_inference_mode_enabled():
        return None
    if t.storage_offset() != 0 or t.is_conj() or t.is_neg() or t.is_quantized or t.is_nested or t.__dict__:
        return None
    meta = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=_META)
    if meta.untyped_storage().nbytes() != t.untyped_storage().nbytes():
        return None  # the storage holds more than this tensor reaches (resized, or shared)
    fake = new_fake(mode, meta, t.device)
    if t.requires_grad:
        fake.requires_grad_()
    if tp is torch.nn.Parameter:
        fake._is_param = True  # isinstance(fake, nn.Parameter), as from_tensor makes it
    return fake


def constant_tensor(mode: FakeTensorMode, args: tuple, kwargs: dict) -> Optional[FakeTensor]:
    """The FakeTensor of `torch.tensor(*args, **kwargs)` as FakeTensorMode makes it, for data of
    Python numbers, lists and tuples (no tensor, symbolic value or graph node in them) and only
    `dtype` and `device` given; None otherwise (the real propagation decides, errors included)."""
    if len(args) != 1 or not set(kwargs) <= {"dtype", "device"} or not _plain_data(args[0]):
        return None
    try:
        real = torch.tensor(args[0], **kwargs)
    except Exception:  # (the real propagation raises it again, as FakeTensorMode words it)
        return None
    fake = plain_fake(mode, real)
    if fake is None:
        return None
    if mode.may_turn_const(real):  # what the lift keeps: its own copy of the values
        fake.constant = real
        mode.fake_tensor_converter.add_constant_storage_mapping(fake)
    return fake


def _plain_data(data: Any) -> bool:
    tp = type(data)
    if tp is int or tp is float or tp is bool:
        return True
    return (tp is list or tp is tuple) and all(_plain_data(item) for item in data)


def tensor_inputs(args: tuple, kwargs: dict) -> list[torch.Tensor]:
    """The FakeTensors among a call's (already faked) arguments, nested containers included."""
    found: list[torch.Tensor] = []

    def visit(v: Any) -> None:
        if isinstance(v, torch.Tensor):
            found.append(v)
        elif isinstance(v, (tuple, list)):
            for item in v:
                visit(item)
        elif isinstance(v, dict):
            for item in v.values():
                visit(item)

    visit(args)
    visit(kwargs)
    return found


def _key_of(v: Any, node_keys: dict, tensor_key: Callable[[Any], tuple]) -> Any:
    tp = type(v)
    if tp is torch.fx.Node:
        key = node_keys.get(v)
        if key is None:
            key = node_keys[v] = tensor_key(v.meta.get("example_value"))
        return key
    if tp in _CONSTANT_TYPES:
        return (tp, v)
    if tp is tuple or tp is list or tp is torch.Size:
        return (tp, tuple([_key_of(item, node_keys, tensor_key) for item in v]))
    if tp is dict:
        return (tp, tuple([(k, _key_of(item, node_keys, tensor_key)) for k, item in v.items()]))
    if tp is slice:
        return (tp, _key_of(v.start, node_keys, tensor_key), _key_of(v.stop, node_keys, tensor_key),
                _key_of(v.step, node_keys, tensor_key))
    raise _Unkeyable


def _tensor_key(t: Any) -> tuple:
    if type(t) is not FakeTensor or t.layout is not torch.strided:
        raise _Unkeyable
    if t.is_conj() or t.is_neg() or t.is_inference() or t._has_symbolic_sizes_strides:
        raise _Unkeyable
    # (a torch.Size hashes and compares as the tuple of its sizes)
    key = t.shape, t.stride(), t.storage_offset(), t.dtype, t.fake_device, t.requires_grad
    if t.constant is not None:
        # A constant FakeTensorMode keeps the values of (`torch.tensor([])`): its values may decide
        # the output (constant propagation), so only an empty one, which has none, is keyed, apart
        # from a plain tensor of its metadata (a cache's first `torch.cat([empty, x])`).
        if t.constant.numel() != 0:
            raise _Unkeyable
        return (*key, "empty constant")
    return key


def _symbolic_tensor_key(t: Any) -> tuple:
    """The key of a value of a trace over a ShapeEnv: a FakeTensor's metadata with its symbolic
    sizes and strides as their expressions, or a symbolic size itself (`x.shape[1]`, an argument of
    `view`). A SymInt is keyed apart from an int of its value (the output may be symbolic or not)."""
    if type(t) is torch.SymInt:
        return ("sym", t.node.expr)
    if type(t) is not FakeTensor or t.layout is not torch.strided:
        raise _Unkeyable
    if t.is_conj() or t.is_neg() or t.is_inference():
        raise _Unkeyable
    offset = t.storage_offset()
    if type(offset) is not int:
        raise _Unkeyable
    key = _dims_key(t.shape), _dims_key(t.stride()), offset, t.dtype, t.fake_device, t.requires_grad
    if t.constant is not None:
        if t.constant.numel() != 0:
            raise _Unkeyable
        return (*key, "empty constant")
    return key


def _dims_key(dims: Any) -> tuple:
    """Sizes or strides as a key: ints as they are, a SymInt as ("sym", its expression)."""
    return tuple([d if type(d) is int else ("sym", d.node.expr) for d in dims])


def _is_fresh(example: Any, mode: FakeTensorMode, inputs: list[torch.Tensor], versions: list[int]) -> bool:
    if type(example) is not FakeTensor or example.fake_mode is not mode:
        return False
    if example.constant is not None or example.layout is not torch.strided:
        return False
    # A view is remembered only when it is a view of the op's own temporary (F.linear of a batch is
    # a view of its addmm's output): no graph value shares its storage, so it is a fresh tensor to
    # everything the trace or a backend can ask (the alias checks below).
    if example._has_symbolic_sizes_strides and mode.shape_env is None:
        return False
    offset = example.storage_offset()  # (a SymInt is not compared: that would be a guard)
    if type(offset) is not int or offset != 0:
        return False
    if example.is_conj() or example.is_neg():
        return False
    for t, version in zip(inputs, versions):
        if t._version != version or torch._C._is_alias_of(example, t):
            return False
    return True


def _autocast_state(device: str) -> Optional[torch.dtype]:
    return torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else None

"""VariableBuilder: from a real value read from the frame to a symbolic value, with its guards.

This is where a trace's assumptions are made and recorded: a tensor becomes a graph input guarded
by TENSOR_MATCH, an int a constant guarded by its value, a module or a function a value guarded by
identity, a tuple a container guarded by its type and length (and its items, one by one).
"""
from __future__ import annotations

import collections
import enum
import functools
import inspect
import sys
import types
import weakref
from typing import Any

import torch

from ...exc import Unsupported
from ...fake.shapes import has_symbolic_sizes
from ...guards import GuardKind
from ...source import AttrSource, ItemSource, NumpyTensorSource, Source
from .autograd_function import AutogradFunctionVariable, is_autograd_function, is_bound_apply
from . import tensor_hooks  # noqa: F401  (registers the tracer of `y.register_hook(fn)`)
from . import reduction  # noqa: F401  (registers object's __reduce_ex__, __reduce__, __getstate__)
from .base import Tracer, VariableTracker
from .builtins import BUILTIN_FUNCTIONS, PURE_FUNCTIONS, BuiltinVariable
from .constant import REGEX_TYPES, TYPE_EXPRESSION_TYPES, ConstantVariable, is_numpy_scalar
from .checkpoint import CHECKPOINT, CheckpointVariable
from .cond import COND, CondVariable
from .copying import CopyFunctionVariable, DeepcopyFunctionVariable, is_copy, is_deepcopy
from .dicts import DictVariable
from .lists import ListVariable
from .namedtuples import NamedTupleFactoryVariable
from .tree_map import TreeMapFunctionVariable, is_tree_map
from .builtin_descriptors import wrap_bound_builtin_method, wrap_builtin_descriptor
from .numpy_functions import NumpyFunctionVariable, is_numpy_callable
from .ndarray import NdarrayVariable
from .partials import PartialVariable
from .functions import (
    CodeObjectVariable, InspectSignatureVariable, LruCacheWrapperVariable, UserFunctionVariable,
)
from .contexts import GRAD_MODE_CLASSES, GradModeClassVariable
from .methods import InlinedMethodVariable
from .super_object import SuperVariable
from .nn_module import NNModuleVariable
from .number_inputs import NUMBER_INPUT_TYPES, wrap_number_input
from .frame_objects import UserObjectVariable
from .objects import DisabledFunctionVariable, GraphBreakFunctionVariable, PythonObjectVariable
from .marked import wrap_marked
from .tensor import TensorVariable
from .torch import PythonModuleVariable, TorchFunctionVariable, is_torch_op
from .weakrefs import wrap_weakref
from .wrap_containers import (
    add_guard, track_mutable, wrap_constant_collection, wrap_container_subclass, wrap_mapping, wrap_mapping_proxy,
    wrap_sequence,
)


_EQUALS_TYPES = (bool, int, float, complex, str, bytes, torch.device)
# Trackers with no state a trace changes: wrap() gives one per source and output graph. (What a
# trace does to a function or a class, an attribute set, is kept by the side effects, which
# wrap() asks first; a constant is a value.)
_IMMUTABLE_TRACKERS = (PythonModuleVariable, TorchFunctionVariable, BuiltinVariable, UserFunctionVariable,
                       PythonObjectVariable, ConstantVariable, NumpyFunctionVariable)
_CONTAINER_TYPES = (list, dict, collections.OrderedDict, collections.defaultdict)


def wrap(tx: Tracer, value: Any, source: Source | None, guard: bool = True) -> VariableTracker:
    """The symbolic value of `value`, guarded on `source` when there is one and `guard` is set."""
    if source is not None:
        known = tx.side_effects.known(source)  # a mutable object read before: the same tracker
        if known is not None:
            return known
        # A module or function read before (`torch` and `torch.sin` on every line of a long
        # function): the same tracker, its guard already added. A global the trace assigns is
        # read from the side effects before this (read_global), and no module attribute is
        # assigned (it breaks the graph), so the value behind a source stays the same.
        cached = tx.output.immutable_trackers.get((source, guard))
        if cached is not None:
            return cached
        tracker = _wrap(tx, value, source, guard)
        if is_immutable_tracker(tracker):
            tx.output.immutable_trackers[(source, guard)] = tracker
        return tracker
    if type(value) in _CONTAINER_TYPES:
        # A list or dict read where no source reaches it (a global of torch's own code, read
        # unguarded: pytree's table of node types on every flatten): one tracker per object, as a
        # sourced one has, so its items are wrapped once and a change the trace makes is seen by
        # the next read.
        known = tx.side_effects.known_unsourced(value)
        if known is not None:
            return known
        return tx.side_effects.track_unsourced(value, _wrap(tx, value, None, guard))
    return _wrap(tx, value, source, guard)


def is_immutable_tracker(tracker: VariableTracker) -> bool:
    """A tracker of a module, torch function or builtin: nothing a trace does changes it, so one
    tracker serves every read of its source."""
    return type(tracker) in _IMMUTABLE_TRACKERS


def _wrap(tx: Tracer, value: Any, source: Source | None, guard: bool) -> VariableTracker:
    """The first kind of value in _KINDS that `value` is, wrapped with its guards; else a user object."""
    guards = tx.output.guards if guard and source is not None else None
    for wrap_kind in _KINDS:
        tracker = wrap_kind(tx, value, source, guard, guards)
        if tracker is not None:
            return tracker
    return _wrap_user_object(tx, value, source, guard, guards)


def _wrap_tensor(tx: Tracer, value: Any, source: Source | None, guard: bool,
                 guards: Any) -> VariableTracker | None:
    """A tensor: a graph input, guarded by TENSOR_MATCH (and by how it aliases the other inputs)."""
    if isinstance(value, torch.Tensor):
        if torch.nn.parameter.is_lazy(value):  # a lazy module's parameter before its first call
            raise Unsupported("an uninitialized (lazy) parameter or buffer")
        if torch._C._functorch.is_functorch_wrapped_tensor(value):
            # (the function a torch.func.grad / vmap runs, called with its wrapped tensors: they
            # have no storage for a FakeTensor to copy, and pyframe does not trace the transforms)
            raise Unsupported("a tensor wrapped by a torch.func transform (grad, vmap) is not traced")
        if source is None:
            raise Unsupported("a tensor that is not an input of the frame (a global tensor made in C?)")
        if value.layout is not torch.strided:  # (sparse, mkldnn: no strides for a FakeTensor's guards)
            raise Unsupported(f"a tensor of layout {value.layout} (only strided tensors are traced)")
        model_state = type(value) is torch.nn.Parameter or _is_buffer(source)
        # (a module's parameters, buffers and tensors in submodules keep static shapes, as under
        # torch._dynamo: force_parameter_static_shapes, force_nn_module_property_static_shapes)
        node = tx.output.add_input(source, value, model_state or "._modules[" in source.name())
        fake = node.meta["example_value"]
        tx.output.guards.add_tensor(source, value, fake if has_symbolic_sizes(fake) else None)  # always: an input
        if not model_state:
            # Which inputs are one tensor is part of what the graph means to a backend that
            # functionalizes it (aot_autograd, inductor: `x.mul_(2); y.mul_(2)` with x is y), so
            # it is guarded, as torch._dynamo guards it; parameters and buffers, the model's own
            # state, are left out, as torch._dynamo leaves them (skip_no_tensor_aliasing_guards_on_parameters).
            tx.output.guards.add_aliasing(source, value)
        return TensorVariable(node, source, type(value))
    return None


def _wrap_ndarray(tx: Tracer, value: Any, source: Source | None, guard: bool,
                  guards: Any) -> VariableTracker | None:
    """A NumPy array passed to the frame: a graph input, the tensor over its memory (made by the
    transformed code from the array on each call: NumpyTensorSource), as torch._dynamo takes it;
    guarded by its type, dtype, shape and strides, its sizes static (ndarray.py)."""
    numpy = sys.modules.get("numpy")  # (a value cannot be one unless numpy is imported)
    if numpy is None or type(value) is not numpy.ndarray:
        return None
    if source is None:
        raise Unsupported("a numpy.ndarray that is not an input of the frame")
    if not value.flags.writeable:
        raise Unsupported("a read-only numpy.ndarray (its tensor could be written to)")
    try:
        tensor = torch.as_tensor(value)
    except Exception as e:  # (an array of objects, strings, another byte order)
        raise Unsupported(f"a numpy.ndarray of dtype {value.dtype} has no tensor ({type(e).__name__})") from e
    add_guard(guards, source, GuardKind.TYPE_MATCH, numpy.ndarray)
    for attr in ("dtype", "shape", "strides"):
        add_guard(guards, AttrSource(source, attr) if source is not None else None, GuardKind.EQUALS_MATCH,
             getattr(value, attr))
    tensor_source = NumpyTensorSource(source)
    node = tx.output.add_input(tensor_source, tensor, module_state=True)  # (static sizes: guarded above)
    return NdarrayVariable(node, tensor_source)


# The interpreter's fixed records, structseqs of constants (`sys.version_info >= (3, 10)`).
_INTERPRETER_INFO = (sys.version_info, sys.flags, sys.float_info, sys.int_info, sys.hash_info)
_INTERPRETER_INFO_IDS = frozenset(map(id, _INTERPRETER_INFO))  # (they live as long as the interpreter)


def _wrap_constant(tx: Tracer, value: Any, source: Source | None, guard: bool,
                   guards: Any) -> VariableTracker | None:
    """None, a number, a string, a dtype, an enum member: a constant, guarded by its value (or identity)."""
    if value is None:
        add_guard(guards, source, GuardKind.NONE_MATCH)
        return ConstantVariable(None, source)
    if guards is not None and type(value) in NUMBER_INPUT_TYPES:  # a SymInt input, or a lazy constant
        return wrap_number_input(tx, value, source)
    if type(value) in _EQUALS_TYPES or is_numpy_scalar(value):
        add_guard(guards, source, GuardKind.EQUALS_MATCH, value)
        return ConstantVariable(value, source)
    if type(value) in REGEX_TYPES or isinstance(value, TYPE_EXPRESSION_TYPES):
        # a compiled pattern (a module's `_PATTERN = re.compile(...)`), a match; `list[int] | None`
        add_guard(guards, source, GuardKind.ID_MATCH, value)
        return ConstantVariable(value, source)
    if isinstance(value, (torch.dtype, torch.layout, torch.memory_format, enum.Enum)) or value is Ellipsis \
            or value is NotImplemented \
            or type(value) is torch.torch_version.TorchVersion \
            or id(value) in _INTERPRETER_INFO_IDS:
        # (torch.__version__: a str, compared as a version; sys.version_info and the like: tuples
        # of constants the interpreter fixed at start, of a type that cannot be made again)
        add_guard(guards, source, GuardKind.ID_MATCH, value)
        return ConstantVariable(value, source)
    return None


def _wrap_marked_function(tx: Tracer, value: Any, source: Source | None, guard: bool,
                          guards: Any) -> VariableTracker | None:
    """A function torch._dynamo, pyframe or torch.jit marked: graph_break and disable are honoured;
    what pyframe.optimize or torch.jit.script wrapped is inlined; torch.utils.checkpoint's
    checkpoint (disabled for torch._dynamo, which traces it as a higher-order op) is that op, and
    torch.cond the `cond` op."""
    if value is CHECKPOINT:
        add_guard(guards, source, GuardKind.ID_MATCH, value)
        return CheckpointVariable(source)
    if value is collections.namedtuple:  # called with constants: the class is made while tracing
        add_guard(guards, source, GuardKind.ID_MATCH, value)
        return NamedTupleFactoryVariable(source)
    if value is COND:  # (torch.cond: eager compiles it with torch._dynamo; traced as its op)
        add_guard(guards, source, GuardKind.ID_MATCH, value)
        return CondVariable(source)
    marked = wrap_marked(value, source, guards)  # pyframe's and torch.compiler's markers (marked.py)
    if marked is not None:
        return marked
    if isinstance(value, types.FunctionType) and _is_dynamo_hint(value):
        add_guard(guards, source, GuardKind.ID_MATCH, value)
        if value.__name__ == "graph_break":
            return GraphBreakFunctionVariable(value, source)
        # torch._dynamo.disable / torch.compiler.disable: honoured as pyframe.disable is
        return DisabledFunctionVariable(_disabled_twin(tx, value), None)
    if tx.hooks.is_pyframe_wrapper(value):  # a function wrapped by pyframe.optimize/disable/run
        add_guard(guards, source, GuardKind.ID_MATCH, value)
        if value.callback is None:
            return DisabledFunctionVariable(value, source)
        # Inside a traced region the outer optimize decides: the wrapped function is inlined.
        return wrap(tx, value.fn, AttrSource(source, "fn") if source is not None else None, guard)
    if isinstance(value, torch.jit.ScriptFunction) and \
            isinstance(getattr(value, "_torchdynamo_inline", None), types.FunctionType):
        # `@torch.jit.script def bias_gelu(bias, y)` (Megatron's fused helpers): torch.jit.script
        # keeps the Python function as `_torchdynamo_inline`, which is inlined, as torch._dynamo does.
        add_guard(guards, source, GuardKind.ID_MATCH, value)
        inline_source = AttrSource(source, "_torchdynamo_inline") if source is not None else None
        return wrap(tx, value._torchdynamo_inline, inline_source, guard)
    return None


def _wrap_module(tx: Tracer, value: Any, source: Source | None, guard: bool,
                 guards: Any) -> VariableTracker | None:
    """An nn.Module, guarded by its type (and by what the trace reads of it), as torch._dynamo 2.13
    guards its unspecialized modules: another instance of the same structure (the next block of
    a model, compiled once) runs the same entry. A Python module, guarded by identity."""
    if isinstance(value, torch.nn.Module):
        add_guard(guards, source, GuardKind.TYPE_MATCH, type(value))
        return track_mutable(tx, source, value, NNModuleVariable(value, source))
    if isinstance(value, types.ModuleType):
        add_guard(guards, source, GuardKind.ID_MATCH, value)
        return PythonModuleVariable(value, source)
    return None


def _wrap_torch_or_builtin(tx: Tracer, value: Any, source: Source | None, guard: bool,
                           guards: Any) -> VariableTracker | None:
    """A torch function or a builtin, guarded by identity; a list's or dict's bound method, read
    through the container."""
    if is_torch_op(value):
        add_guard(guards, source, GuardKind.ID_MATCH, value)
        return TorchFunctionVariable(value, source)
    if _is_builtin(value):
        # `OrderedDict.fromkeys` is a new bound method at each read: equal, never the same object
        # (but `C.__new__`, object's, is stored in object's dict as it is: the same object each read)
        bound_to_class = isinstance(value, types.BuiltinMethodType) and isinstance(value.__self__, type) \
            and vars(value.__self__).get(value.__name__) is not value
        add_guard(guards, source, GuardKind.EQUALS_MATCH if bound_to_class else GuardKind.ID_MATCH, value)
        return BuiltinVariable(value, source)
    if isinstance(value, types.BuiltinMethodType) and type(value.__self__) in _CONTAINER_TYPES:
        # `out.append` held on the stack across a graph break (`out.append(f(x))` with f breaking):
        # the method of the container it is bound to, read through it.
        add_guard(guards, source, GuardKind.TYPE_MATCH, types.BuiltinMethodType)
        if guards is not None:
            guards.add(AttrSource(source, "__name__"), GuardKind.EQUALS_MATCH, value.__name__)
        obj = wrap(tx, value.__self__, AttrSource(source, "__self__") if source is not None else None, guard)
        if not isinstance(obj, (ListVariable, DictVariable)):  # (a dict whose keys are not modelled)
            raise Unsupported(f"a method of a {type(value.__self__).__name__} the trace does not model")
        return obj.var_getattr(tx, value.__name__)
    return None


def _wrap_special_object(tx: Tracer, value: Any, source: Source | None, guard: bool,
                         guards: Any) -> VariableTracker | None:
    """A super() object held across a break; inspect.signature, copy.deepcopy and pytree.tree_map,
    answered while tracing."""
    if type(value) is super and value.__self__ is not None:
        # a super() object held across a graph break (`s = super(); <break>; s.method()`)
        add_guard(guards, source, GuardKind.TYPE_MATCH, super)
        if guards is not None:
            guards.add(AttrSource(source, "__thisclass__"), GuardKind.ID_MATCH, value.__thisclass__)
        obj = wrap(tx, value.__self__, AttrSource(source, "__self__") if source is not None else None, guard)
        return SuperVariable(value.__thisclass__, obj)
    if value is inspect.signature:  # answered while tracing, from guarded facts
        add_guard(guards, source, GuardKind.ID_MATCH, value)
        return InspectSignatureVariable(value, source)
    if is_deepcopy(value):  # its copies of user objects are made here (copying.py)
        add_guard(guards, source, GuardKind.ID_MATCH, value)
        return DeepcopyFunctionVariable(value, source)
    if is_copy(value):  # its copies of user objects are made here (copying.py)
        add_guard(guards, source, GuardKind.ID_MATCH, value)
        return CopyFunctionVariable(value, source)
    if is_tree_map(value):  # mapped here over the containers the trace holds (tree_map.py)
        add_guard(guards, source, GuardKind.ID_MATCH, value)
        return TreeMapFunctionVariable(value, source)
    return None


def _wrap_numpy_callable(tx: Tracer, value: Any, source: Source | None, guard: bool,
                         guards: Any) -> VariableTracker | None:
    """A NumPy function or ufunc (`np.lcm`, `np.prod`): folded when called on constants
    (numpy_functions.py), guarded by identity."""
    if not is_numpy_callable(value):
        return None
    add_guard(guards, source, GuardKind.ID_MATCH, value)
    return NumpyFunctionVariable(value, source)


def _wrap_callable(tx: Tracer, value: Any, source: Source | None, guard: bool,
                   guards: Any) -> VariableTracker | None:
    """A Python function, bound method, `MyFn.apply`, lru_cache wrapper or functools.partial: inlined
    when called, guarded by what it is made of."""
    if isinstance(value, types.FunctionType):
        if value.__closure__ is None and "<locals>" not in value.__qualname__:
            add_guard(guards, source, GuardKind.ID_MATCH, value)
        else:  # made anew by each call of its parent (a nested def, lambda or comprehension, with
            # cells or without): what it computes is its code, its cells and defaults (guarded where read)
            add_guard(guards, source, GuardKind.TYPE_MATCH, types.FunctionType)
            if source is not None and guards is not None:
                guards.add(AttrSource(source, "__code__"), GuardKind.ID_MATCH, value.__code__)
        return UserFunctionVariable(value, source)
    if is_bound_apply(value):  # `MyFn.apply` held as a value: read through the class it binds
        add_guard(guards, source, GuardKind.TYPE_MATCH, types.MethodType)
        if guards is not None:
            guards.add(AttrSource(source, "__func__"), GuardKind.ID_MATCH, value.__func__)
        cls = wrap(tx, value.__self__, AttrSource(source, "__self__") if source is not None else None, guard)
        return cls.var_getattr(tx, "apply")
    if isinstance(value, types.MethodType) and isinstance(value.__func__, types.FunctionType):
        # A bound method (a context manager's `clone`, a callback): its function inlined, `self`
        # read through it. Made anew by each attribute read, so guarded by what it binds.
        add_guard(guards, source, GuardKind.TYPE_MATCH, types.MethodType)
        func_source = AttrSource(source, "__func__") if source is not None else None
        if guards is not None:
            guards.add(func_source, GuardKind.ID_MATCH, value.__func__)
        obj = wrap(tx, value.__self__, AttrSource(source, "__self__") if source is not None else None, guard)
        return InlinedMethodVariable(value.__func__, obj, source)
    if isinstance(value, functools._lru_cache_wrapper) and \
            isinstance(inspect.getattr_static(value, "__wrapped__", None), types.FunctionType):
        add_guard(guards, source, GuardKind.TYPE_MATCH, type(value))  # and the wrapped function, by its own guard
        wrapped = wrap(tx, value.__wrapped__, AttrSource(source, "__wrapped__") if source is not None else None, guard)
        return LruCacheWrapperVariable(value, wrapped, source)
    if type(value) is functools.partial:
        add_guard(guards, source, GuardKind.TYPE_MATCH, functools.partial)
        at = (lambda name: AttrSource(source, name)) if source is not None else (lambda name: None)
        if guards is not None:  # partial's fields cannot be rebound, but the object can be replaced
            guards.add(at("args"), GuardKind.LEN_MATCH, len(value.args))
            guards.add(at("keywords"), GuardKind.DICT_KEYS_MATCH, tuple(value.keywords))
        func = wrap(tx, value.func, at("func"), guard)
        args = [wrap(tx, a, ItemSource(at("args"), i) if source is not None else None, guard)
                for i, a in enumerate(value.args)]
        keywords = {k: wrap(tx, v, ItemSource(at("keywords"), k) if source is not None else None, guard)
                    for k, v in value.keywords.items()}
        return PartialVariable(func, args, keywords, source, value.keywords, value if source is not None else None)
    return None


def _wrap_class(tx: Tracer, value: Any, source: Source | None, guard: bool,
                guards: Any) -> VariableTracker | None:
    """A class (grad-mode context classes and autograd.Function subclasses have trackers of their own)
    or a code object, guarded by identity."""
    if isinstance(value, type) and value in GRAD_MODE_CLASSES:
        add_guard(guards, source, GuardKind.ID_MATCH, value)
        return GradModeClassVariable(value, source)
    if is_autograd_function(value):  # its apply is traced (autograd_function.py)
        add_guard(guards, source, GuardKind.ID_MATCH, value)
        return AutogradFunctionVariable(value, source)
    if isinstance(value, types.CodeType):
        add_guard(guards, source, GuardKind.ID_MATCH, value)
        return CodeObjectVariable(value, source)
    if isinstance(value, type):
        add_guard(guards, source, GuardKind.ID_MATCH, value)
        return PythonObjectVariable(value, source)
    return None


def _wrap_user_object(tx: Tracer, value: Any, source: Source | None, guard: bool,
                      guards: Any) -> VariableTracker:
    """Anything else: an instance of a user class, guarded by its type (its attributes when read)."""
    add_guard(guards, source, GuardKind.TYPE_MATCH, type(value))
    return track_mutable(tx, source, value, UserObjectVariable(value, source))


# Each kind of value, in the order they are tried: a value is the first kind whose function
# returns a tracker (the order matters where kinds overlap: a named tuple is a tuple, a builtin
# type or grad-mode class is a class).
_KINDS = (_wrap_tensor, _wrap_constant, wrap_sequence, wrap_mapping, wrap_mapping_proxy, wrap_container_subclass,
          wrap_builtin_descriptor, wrap_constant_collection, _wrap_marked_function, _wrap_module,
          _wrap_ndarray, _wrap_numpy_callable, _wrap_torch_or_builtin, wrap_bound_builtin_method, wrap_weakref, _wrap_special_object,
          _wrap_callable, _wrap_class)


def _is_buffer(source: Source) -> bool:
    """A tensor read as a module's buffer (`L['self']._modules['bn']._buffers['running_mean']`)."""
    return isinstance(source, ItemSource) and isinstance(source.base, AttrSource) and source.base.attr == "_buffers"


_DISABLED_TWINS: "weakref.WeakKeyDictionary[types.FunctionType, Any]" = weakref.WeakKeyDictionary()


def _is_dynamo_hint(fn: types.FunctionType) -> bool:
    """torch._dynamo.graph_break, or a function torch._dynamo.disable / torch.compiler.disable wrapped."""
    if fn.__name__ == "graph_break" and fn.__module__ == "torch._dynamo.decorators":
        return True
    return fn.__dict__.get("_torchdynamo_disable") is True


def _disabled_twin(tx: Tracer, fn: types.FunctionType) -> Any:
    """pyframe.disable(fn), one per function: the transformed code calls it as a constant."""
    twin = _DISABLED_TWINS.get(fn)
    if twin is None:
        twin = _DISABLED_TWINS[fn] = tx.hooks.disable(fn)
    return twin


def _is_builtin(value: Any) -> bool:
    """A builtin function or type (len, int, super, ...), a math/operator function, or a Python
    function folded as they are (re.sub: PURE_FUNCTIONS)."""
    if not isinstance(value, (types.BuiltinFunctionType, type, types.FunctionType)):
        # never hash anything else: a user object's __hash__ may raise or run code (a frozen
        # dataclass's, in its own __init__, reads fields not set yet)
        return False
    try:
        return value in BUILTIN_FUNCTIONS or value in PURE_FUNCTIONS
    except TypeError:  # unhashable (a class whose metaclass makes it so)
        return False

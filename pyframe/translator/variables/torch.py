"""torch's callables and Python modules (torch, torch.nn.functional, math, operator...).

A call to a torch function becomes a call_function node with the function itself as its target,
exactly as torch._dynamo records it (`torch.cos`, `torch.nn.functional.relu`). Functions that only
report state or metadata (`torch.is_tensor`, `torch.is_floating_point`) fold to constants.
"""
from __future__ import annotations

import inspect
import os
import types
from typing import Any, Sequence

import torch

from ... import markers
from ...exc import Unsupported
from ...source import AttrSource, Source
from .base import VariableTracker
from .constant import ConstantVariable
from .exceptions import RaisedException, raise_symbolic
from .functorch import FUNCTORCH_FUNCTIONS, call_functorch
from .torch_function_modes import STACK_FUNCTIONS, call_stack_function
from .ndarray import to_torch
from .tensor import TensorVariable, call_in_graph

_TORCH_DIR = os.path.dirname(torch.__file__)
_TORCH_OP_MODULES = ("torch", "torch.nn.functional", "torch.functional", "torch._C._nn", "torch._C._linalg",
                     "torch._C._fft", "torch._C._special", "torch._C._VariableFunctions", "torch.linalg",
                     "torch.fft", "torch.special", "torch._ops.aten",
                     "torch.masked._ops")  # (torch.masked.sum...: in the graph whole, as torch._dynamo records them)

# Answered while tracing: from metadata (static shapes), from guarded global state, or from
# constants alone (promote_types of two dtypes).
_FOLDABLE = {torch.is_tensor, torch.is_floating_point, torch.is_complex, torch.numel, torch.is_grad_enabled,
             torch.get_default_dtype, torch.is_storage, torch.typename, torch.is_inference_mode_enabled,
             torch.is_autocast_enabled, torch.promote_types}


# Asked by library code to choose a path (torch.jit.script_if_tracing's wrapper, ...): pyframe is
# neither TorchScript, the JIT tracer nor fx.symbolic_trace, so the answer is a constant (as
# torch._dynamo folds them; is_fx_tracing's deprecation warning is not given).
_TRACING_QUERIES = {torch._C._is_tracing: False, torch.jit.is_tracing: False, torch.jit.is_scripting: False,
                    torch._C._get_tracing_state: None, torch.fx._symbolic_trace.is_fx_tracing: False,
                    torch.fx._symbolic_trace.is_fx_symbolic_tracing: False,
                    # nn.MultiheadAttention's eval fast path (`torch._native_multi_head_attention`)
                    # asks whether make_fx traces, reading torch's dispatch-mode stack: answered
                    # True, as torch._dynamo answers it (pytorch#164721), so that its slow path,
                    # F.multi_head_attention_forward, is traced: the same graph as torch._dynamo's.
                    torch.nn.modules.activation._is_make_fx_tracing: True}


def _is_compiling_query(fn: Any) -> bool:
    """torch.compiler.is_compiling, torch._dynamo.is_compiling, pyframe.is_compiling...: True while
    pyframe traces."""
    return fn is markers.is_compiling or (getattr(fn, "__name__", "") in ("is_compiling", "is_dynamo_compiling")
                                          and getattr(fn, "__module__", "").startswith("torch"))


# Python modules whose attributes are trusted not to be rebound: read without a guard.
TRUSTED_MODULES = ("torch", "math", "operator", "builtins", "functools", "itertools", "collections", "typing")


# Whether any argument overrides __torch_function__: known from the argument types, which
# TENSOR_MATCH guards exactly (plain tensors and Parameters do not override it).
_TORCH_FUNCTION_QUERIES = {torch.overrides.has_torch_function, torch.overrides.has_torch_function_unary,
                           torch.overrides.has_torch_function_variadic}


def _overrides_torch_function(vt: VariableTracker, tx) -> bool:
    if isinstance(vt, TensorVariable):
        return vt.class_type not in (torch.Tensor, torch.nn.Parameter)
    if vt.is_python_constant() or not hasattr(vt, "items"):
        return False
    items = vt.items.values() if isinstance(vt.items, dict) else vt.items
    return any(_overrides_torch_function(item, tx) for item in items)


_TENSOR_GETITEM = torch._C.TensorBase.__getitem__


def is_torch_op(value: Any) -> bool:
    """A torch function, Tensor method or aten op that belongs in the graph. (What
    disallow_in_graph marked never reaches here: builder.py wraps it first.)"""
    if isinstance(value, (torch._ops.OpOverloadPacket, torch._ops.OpOverload)):
        return True
    if value is _TENSOR_GETITEM:  # `torch.Tensor.__getitem__(x, i)`, a slot wrapper: `x[i]`
        return True
    if not isinstance(value, (types.BuiltinFunctionType, types.FunctionType, types.MethodDescriptorType)):
        return False  # (and set lookups below only ever see hashable functions)
    if value in _TORCH_FUNCTION_QUERIES or value in _TRACING_QUERIES or value is torch._C._set_grad_enabled \
            or value in FUNCTORCH_FUNCTIONS or value in STACK_FUNCTIONS or value in _SYMBOL_CHECKS:
        return True
    if _is_compiling_query(value):
        return True
    if isinstance(value, types.MethodDescriptorType):
        return getattr(value, "__objclass__", None) is torch._C.TensorBase
    if _is_functional_helper(value):
        return False
    if isinstance(value, types.FunctionType) and not value.__code__.co_filename.startswith(_TORCH_DIR):
        # A Python function of the user's whose __module__ says torch: functools.wraps copies it
        # from the torch function it wraps (`@wraps(torch.cos) def wrapper`); its code is its own.
        return markers.allowed_in_graph(value)
    return getattr(value, "__module__", None) in _TORCH_OP_MODULES or markers.allowed_in_graph(value)


def _is_functional_helper(value: Any) -> bool:
    """A private Python helper of torch.nn.functional (`F._canonical_mask`, `F._in_projection_packed`,
    `F._mha_shape_check`): inlined, its tensor work recorded op by op, as torch._dynamo traces
    them; not an op of the graph."""
    return isinstance(value, types.FunctionType) and value.__name__.startswith("_") \
        and value.__module__ == "torch.nn.functional"


# Process-wide defaults that the factory ops after them read (`torch.ones(2)`'s dtype): set in
# the graph, they would not reach the ops traced after them nor the guard on the default dtype, so
# each is a graph break (it runs as Python; the code after it is traced under the new default).
_DEFAULT_SETTERS = {torch.set_default_dtype, torch.set_default_tensor_type, torch.set_default_device}


# Facts stated about sizes and values read from tensors, recorded in the graph as torch._dynamo
# records them (its runtime-assert pass turns them into asserts: fake/unbacked.py).
# torch._check_is_size is wrapped by typing_extensions.deprecated: in the graph all the same.
_SYMBOL_CHECKS = (torch._check, torch._check_is_size)


def _check(tx, args: Sequence[VariableTracker], kwargs: dict[str, VariableTracker]) -> VariableTracker:
    """`torch._check(cond, message=None)`: a condition known while tracing is checked now (True:
    nothing recorded; False: left to Python, which raises); a symbolic one (`u >= 0`, u read from a
    tensor, or a dynamic size compared) is recorded, as torch._dynamo records it, when no message
    comes with it (torch._dynamo makes the message an attribute of the graph: not modelled, a break)."""
    bound = dict(zip(("cond", "message"), args), **kwargs)
    if len(args) > 2 or set(bound) - {"cond", "message"} or "cond" not in bound:
        raise Unsupported("torch._check() with other arguments than (cond, message)")
    cond, message = bound["cond"], bound.get("message")
    if cond.is_symbolic and cond.python_type() is bool:  # (a size's too: kept as an assert, not guarded)
        if message is not None and not (message.is_python_constant() and message.as_python_constant() is None):
            raise Unsupported("torch._check() of a symbolic condition with a message")
        return call_in_graph(tx, "call_function", torch._check, [cond], {})
    if cond.is_python_constant() and type(cond.as_python_constant()) is bool:
        if cond.as_python_constant():
            return ConstantVariable(None)
        raise Unsupported("torch._check() of a condition that does not hold: Python raises")
    raise Unsupported(f"torch._check() of {cond.describe()} (a bool or a symbolic condition is traced)")


def _set_grad_enabled(tx, enabled: VariableTracker) -> VariableTracker:
    """`torch._C._set_grad_enabled(b)` (what torch.no_grad's __enter__ calls): recorded in the
    graph at every call, as torch._dynamo records it, and the ops after it are traced in that mode
    (a grad-mode context manager records only the changes it makes, contexts.py)."""
    value = enabled.as_python_constant()
    if type(value) is not bool:  # (torch raises TypeError: left to Python)
        raise Unsupported(f"torch._C._set_grad_enabled({value!r}) takes a bool")
    tx.output.record_effect(torch._C._set_grad_enabled, (value,))
    tx.output.grad_enabled = value
    return ConstantVariable(None)


def is_trusted_module(module: types.ModuleType) -> bool:
    return module.__name__.split(".")[0] in TRUSTED_MODULES


def _check_side_effect_free(tx, fn: types.FunctionType, args, kwargs) -> None:
    """A function the user allowed in the graph is run on FakeTensors while tracing and by the
    graph on every call: a Python side effect of it (`log.append(...)`) would happen once more, at
    compile time. So it is first traced as any function is (a probe): with no side effect and
    nothing untraceable, the frame is traced again with it as one node (Unsupported.proven_pure);
    otherwise the call is a graph break and runs as Python, once per call, as in eager."""
    if id(fn) in tx.root.pure_calls:
        return
    effects = tx.side_effects.effects
    try:
        tx.inline_call(fn, list(args), dict(kwargs))
    except (Unsupported, RaisedException) as e:
        if isinstance(e, Unsupported) and e.proven_pure is not None:
            raise  # another allowed function called in it, found pure first: traced again as a node
        raise Unsupported(f"{fn.__qualname__}, allowed in the graph, does what the trace cannot check: it runs as Python") from e
    if tx.side_effects.effects != effects:
        raise Unsupported(f"{fn.__qualname__}, allowed in the graph, has Python side effects: it runs as Python")
    pure = Unsupported(f"{fn.__qualname__}, allowed in the graph, is free of side effects")
    pure.proven_pure = id(fn)
    raise pure


def _pad(tx, args: Sequence[VariableTracker], kwargs: dict[str, VariableTracker]) -> VariableTracker:
    """F.pad, which torch._dynamo traces through rather than records: its body calls
    `torch._C._nn.pad(input, pad, mode, value)`, all four given, but for a deterministic replicate
    pad on an accelerator (a decomposition of its own: then F.pad stays one node)."""
    try:
        bound = inspect.signature(torch.nn.functional.pad).bind(*args, **kwargs)
    except TypeError as e:
        raise Unsupported(f"F.pad() with these arguments: {e}") from e
    bound.apply_defaults()
    tensor, pad, mode, value = (v if isinstance(v, VariableTracker) else ConstantVariable(v)
                                for v in bound.arguments.values())
    if not (isinstance(tensor, TensorVariable) and tensor.class_type in (torch.Tensor, torch.nn.Parameter)) \
            or (tensor.example.device.type != "cpu" and mode.as_python_constant() == "replicate"):
        return call_in_graph(tx, "call_function", torch.nn.functional.pad, args, kwargs)
    return call_in_graph(tx, "call_function", torch._C._nn.pad, [tensor, pad, mode, value], {})


class TorchFunctionVariable(VariableTracker):
    def __init__(self, fn: Any, source: Source | None = None):
        super().__init__(source)
        self.fn = fn

    def real_object(self) -> Any:
        return self.fn

    def python_type(self) -> type:
        return type(self.fn)

    def as_python_constant(self) -> Any:
        return self.fn

    def call(self, tx, args, kwargs) -> VariableTracker:
        if _is_compiling_query(self.fn):
            tx.root.took_compiled_path = True
            return ConstantVariable(True)
        if self.fn in _TORCH_FUNCTION_QUERIES:
            return ConstantVariable(any(_overrides_torch_function(a, tx) for a in args))
        if self.fn in _TRACING_QUERIES:
            if _TRACING_QUERIES[self.fn]:  # (answered True while tracing; False when run as Python)
                tx.root.took_compiled_path = True
            return ConstantVariable(_TRACING_QUERIES[self.fn])
        if self.fn is torch.is_grad_enabled:  # the mode as traced (`with torch.no_grad()` changes it)
            return ConstantVariable(tx.output.grad_enabled)
        if self.fn is torch.is_autocast_enabled and args and tx.output.autocast_stack:
            device = args[0].as_python_constant()  # inside a traced autocast region: the innermost
            for region_device, _, enabled, _ in reversed(tx.output.autocast_stack):  # for that device
                if region_device == device:
                    return ConstantVariable(bool(enabled))
        if self.fn is torch._C._set_grad_enabled and len(args) == 1 and not kwargs:
            return _set_grad_enabled(tx, args[0])
        if self.fn in FUNCTORCH_FUNCTIONS:
            return call_functorch(tx, self.fn, args, kwargs)
        if self.fn in STACK_FUNCTIONS and not kwargs:
            return call_stack_function(tx, self.fn, args)
        if self.fn is torch._check:
            return _check(tx, args, kwargs)
        if self.fn is torch._check_is_size:  # (a wrapper of torch's, not the user's: no purity probe)
            return call_in_graph(tx, "call_function", self.fn, args, kwargs)
        if self.fn in _DEFAULT_SETTERS:
            raise Unsupported(f"torch.{self.fn.__name__}() changes what the ops after it make")
        if self.fn in (torch.is_tensor, torch.is_storage) and len(args) == 1 and not kwargs \
                and not isinstance(args[0], TensorVariable):
            # a test of the type alone (isinstance, `type(obj) in _storage_classes`): a tuple of
            # tensors has no constant value, but its type answers
            cls = args[0].python_type()
            return ConstantVariable(issubclass(cls, torch.Tensor) if self.fn is torch.is_tensor
                                    else cls in torch._storage_classes)
        if self.fn in _FOLDABLE:
            values = [a.example if isinstance(a, TensorVariable) else a.as_python_constant() for a in args]
            kw = {k: v.as_python_constant() for k, v in kwargs.items()}
            return ConstantVariable(self.fn(*values, **kw))
        if isinstance(self.fn, types.MethodDescriptorType) or self.fn is _TENSOR_GETITEM:
            # torch.Tensor.add(x, y) is x.add(y)
            if not args or not isinstance(args[0], TensorVariable):
                raise Unsupported(f"Tensor.{self.fn.__name__} called on a non-tensor")
            return args[0].call_method(tx, self.fn.__name__, args[1:], kwargs)
        if isinstance(self.fn, types.FunctionType) and not self.fn.__code__.co_filename.startswith(_TORCH_DIR):
            _check_side_effect_free(tx, self.fn, args, kwargs)  # (allowed in the graph by the user)
        if self.fn is torch.nn.functional.pad:
            return _pad(tx, args, kwargs)
        converted = to_torch(tx, self.fn, args, kwargs)  # `torch.from_numpy(a)` of an array of the graph
        if converted is not None:
            return converted
        return call_in_graph(tx, "call_function", self.fn, args, kwargs)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        """Its names (what functools.wraps copies from it); an attribute it lacks is an
        AttributeError (a torch function is guarded by identity, and trusted not to change)."""
        if not hasattr(self.fn, name):
            raise_symbolic(AttributeError, f"'{type(self.fn).__name__}' object has no attribute '{name}'")
        value = getattr(self.fn, name)
        if name in ("__name__", "__qualname__", "__module__", "__doc__") and isinstance(value, (str, type(None))):
            return ConstantVariable(value)
        return super().var_getattr(tx, name)

    def reconstruct(self, cg) -> None:
        if self.source is not None:
            cg.load_source(self.source)
        else:
            cg.load_const(self.fn)

    def describe(self) -> str:
        return f"torch function {getattr(self.fn, '__qualname__', self.fn)}"

    def __repr__(self) -> str:
        return f"TorchFunctionVariable({getattr(self.fn, '__name__', self.fn)})"


class PythonModuleVariable(VariableTracker):
    """A Python module (`torch`, `torch.nn.functional as F`, `math`, a user module)."""

    def __init__(self, module: types.ModuleType, source: Source | None = None):
        super().__init__(source)
        self.module = module
        # Attributes read before that are modules or functions (`torch.sin` on every line): a
        # trace assigns no module attribute, so they stay what they were, guards and all.
        self._functions: dict[str, VariableTracker] = {}

    def real_object(self) -> Any:
        return self.module

    def python_type(self) -> type:
        return types.ModuleType

    def as_python_constant(self) -> Any:
        return self.module

    def var_getattr(self, tx, name: str) -> VariableTracker:
        found = self._functions.get(name)
        if found is None:
            found = self._read_attr(tx, name)
            if type(found) in (PythonModuleVariable, TorchFunctionVariable):
                self._functions[name] = found
        return found

    def _read_attr(self, tx, name: str) -> VariableTracker:
        try:
            value = getattr(self.module, name)
        except AttributeError as e:
            raise Unsupported(f"module {self.module.__name__} has no attribute {name!r}") from e
        source = AttrSource(self.source, name) if self.source is not None else None
        if is_trusted_module(self.module):
            return tx.wrap(value, source, guard=False)
        return tx.wrap(value, source)

    def reconstruct(self, cg) -> None:
        if self.source is not None:
            cg.load_source(self.source)
        else:  # imported in the frame (IMPORT_NAME): the module object itself
            cg.load_const(self.module)

    def describe(self) -> str:
        return f"module {self.module.__name__}"

    def __repr__(self) -> str:
        return f"PythonModuleVariable({self.module.__name__})"


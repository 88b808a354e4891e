"""Python builtins and the operator module: folded on constants, recorded on tensors.

The opcode handlers route every operator through here (`a + b` is `BuiltinVariable(operator.add)`),
so the rules for what an operator does with tensors, containers and constants live in one place.
"""
from __future__ import annotations

import builtins
import collections
import functools
import math
import operator
import re
import sys
import types
from typing import Any, Callable, Sequence

import torch

from ...exc import Unsupported
from ...source import AttrSource
from .base import VariableTracker, class_attribute, constant_args
from .constant import ConstantVariable, python_scalar
from .container_operators import CONTAINER_OPERATORS
from .container_subclass import ContainerSubclassMixin, as_base_value
from .builtin_descriptors import is_builtin_descriptor
from .dict_subclass import DictSubclassMixin
from .dicts import DICT_HANDLERS, DictVariable
from .dict_keys import name_as_constructed
from .iterators import iterate
from .namedtuples import tuple_new
from .lists import TupleVariable
from .sets import SET_HANDLERS, build_set
from .exceptions import ExceptionVariable, is_exception_class, raise_symbolic
from .partials import PartialVariable
from .super_object import SuperVariable, zero_arg_super
from .methods import make_method
from .mappingproxy import MadeMappingProxyVariable
from .objects import NewObjectVariable, PythonObjectVariable, register_constructor
from .object_builtins import delattr_, fake_id_compare, getattr_, hasattr_, id_, setattr_, type_, vars_
from .isinstance_checks import isinstance_of
from .iteration_builtins import ITERATION_HANDLERS, reduce_items
from .special_methods import DUNDERS, contains, identity, is_tensor, length, python_method, text_of, truth, user_operator
from .static_lookup import is_plain_class
from .ndarray import NdarrayVariable, is_ndarray, ndarray_operator
from .read_values import builtin_of_read_value, number_of_read_value, number_of_tensor
from .tensor import SymNodeVariable, SymSliceVariable, TensorVariable, call_in_graph, sym_operation
from .weakrefs import weakref_comparisons

# Builtins with no side effects: calling them on constants while tracing is safe.
_PURE_BUILTINS = {abs, all, any, bool, chr, divmod, float, format, hash, int, isinstance, issubclass, len,
                  max, min, ord, pow, range, repr, round, sorted, str, sum, tuple, list, dict, type, slice,
                  reversed, enumerate, zip, getattr, hasattr, callable, frozenset, set, complex, bytes,
                  bin, oct, hex, ascii}
PURE_FUNCTIONS = (_PURE_BUILTINS
                  # class methods of the immutable builtins, which make a new value from constants
                  | {int.from_bytes, float.fromhex, bytes.fromhex, str.maketrans, bytes.maketrans}
                  # read as a constant, as torch._dynamo folds it (inspect.unwrap's bound on a chain)
                  | {sys.getrecursionlimit}
                  | {getattr(operator, n) for n in dir(operator) if not n.startswith("_")}
                  | {getattr(math, n) for n in dir(math) if callable(getattr(math, n)) and not n.startswith("_")}
                  # regular expressions on constant strings: what a library computes names and keys
                  # with (`re.sub(r"[-_.]+", "-", name)`), folded as torch._dynamo folds them. Their
                  # Python code reads and fills re's module cache (`re._cache`), which a trace must
                  # not model; compiled patterns and matches are constants (constant.py's REGEX_TYPES)
                  | {re.sub, re.subn, re.match, re.fullmatch, re.search, re.split, re.findall, re.escape,
                     re.compile})

# Operators recorded in the graph when a tensor is involved (torch._dynamo records the same targets).
_TENSOR_OPERATORS = {getattr(operator, n) for n in (
    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and_", "or_", "xor", "lshift",
    "rshift", "iadd", "isub", "imul", "itruediv", "ifloordiv", "imod", "ipow", "imatmul", "iand", "ior",
    "ixor", "ilshift", "irshift", "neg", "pos", "invert", "abs", "lt", "le", "gt", "ge", "eq", "ne",
    "getitem", "setitem")} | {abs}

_INPLACE_TO_BINARY = {operator.iadd: operator.add, operator.isub: operator.sub, operator.imul: operator.mul,
                      operator.itruediv: operator.truediv, operator.ifloordiv: operator.floordiv,
                      operator.imod: operator.mod, operator.ipow: operator.pow, operator.imatmul: operator.matmul,
                      operator.iand: operator.and_, operator.ior: operator.or_, operator.ixor: operator.xor,
                      operator.ilshift: operator.lshift, operator.irshift: operator.rshift}


INPLACE_OPERATORS = {*_INPLACE_TO_BINARY, operator.setitem}
_REFLECTED_COMPARISONS = {operator.lt: operator.gt, operator.gt: operator.lt, operator.le: operator.ge,
                          operator.ge: operator.le, operator.eq: operator.eq, operator.ne: operator.ne}


class BuiltinVariable(VariableTracker):
    def __init__(self, fn: Callable, source=None):
        super().__init__(source)
        self.fn = fn

    def real_object(self) -> Any:
        return self.fn

    def python_type(self) -> type:
        return type(self.fn)

    def as_python_constant(self) -> Any:
        return self.fn

    def call(self, tx, args: Sequence[VariableTracker], kwargs: dict[str, VariableTracker]) -> VariableTracker:
        fn = self.fn
        for arg in args:
            if type(arg) is ConstantVariable:
                arg.realize_for_dispatch()
        if isinstance(fn, type) and is_exception_class(fn):
            return ExceptionVariable.make(fn, list(args), kwargs)
        if (fn is locals or fn is vars) and not args and not kwargs:
            try:
                return tx.locals_snapshot()
            except Unsupported as cause:  # a local pyframe cannot hold: the whole frame runs as Python
                e = Unsupported(f"{fn.__name__}() of a frame with a local pyframe cannot trace: {cause}")
                e.whole_frame = tx.parent is None
                raise e from cause
        if fn in _CALLER_FRAME_READERS and _reads_caller_frame(fn, args, kwargs):
            # In an inlined call, the break at the root's call runs that function for real.
            e = Unsupported(f"{fn.__name__}() reads the frame's local variables")
            e.whole_frame = tx.parent is None
            raise e
        if fn in _SYM_OPERATORS and not kwargs:  # `n // 2` on a symbolic size (dynamic shapes)
            result = sym_operation(tx, _SYM_OPERATORS[fn], args)
            if result is not None:
                return result
        if fn is slice and not kwargs and any(isinstance(a, SymNodeVariable) for a in args):
            return SymSliceVariable(args)
        if (fn is int or fn is float) and len(args) == 1 and not kwargs and isinstance(args[0], SymNodeVariable) \
                and not args[0].is_python_constant():  # (of a value read from a tensor)
            return number_of_read_value(tx, fn, args[0])
        if args and (type(args[0]) is NdarrayVariable or (len(args) == 2 and type(args[1]) is NdarrayVariable)) \
                and not kwargs:  # NumPy's operator on an array (`a + 1`, `a[1:]`), recorded as NumPy's
            result = ndarray_operator(tx, operator.abs if fn is abs else fn, args)
            if result is not None:
                return result
            if fn in (max, min, float, int, bool, complex):  # (reading its data into Python, or not modelled)
                raise Unsupported(f"{fn.__name__}() of {args[0].describe() if is_ndarray(args[0]) else 'a numpy.ndarray'}")
        if fn in _READ_VALUE_BUILTINS:
            result = builtin_of_read_value(tx, fn, args, kwargs)
            if result is not None:
                return result
        if (fn is int or fn is float) and len(args) == 1 and not kwargs and isinstance(args[0], TensorVariable) \
                and tx.output.shapes.scalar_outputs:  # (the tensor's value read, captured)
            return number_of_tensor(tx, fn, args[0])
        handler = _HANDLERS.get(fn)
        if handler is not None:
            try:
                result = handler(tx, *args, **kwargs)
            except TypeError as e:
                if e.__traceback__ is not None and e.__traceback__.tb_next is None:
                    # the handler was never entered: a call with arguments it does not model
                    raise Unsupported(f"{getattr(fn, '__name__', fn)}() with these arguments") from e
                raise
            if result is not None:
                return result
        # `x * 1.5`, `x + y` on tensors: no user class's operator can apply (only tensors and
        # constants), the common case, taken without looking for one.
        plain_operands = all(type(a) in _PLAIN_OPERANDS for a in args)
        if fn in DUNDERS and not kwargs and not plain_operands:
            result = user_operator(tx, fn, args)
            if result is not None:
                return result
        if not plain_operands and fn not in _OWN_OBJECT and any(isinstance(a, ContainerSubclassMixin) for a in args):
            return _on_base_values(tx, self, args, kwargs)
        if fn in _TENSOR_OPERATORS and any(is_tensor(a) for a in args) and not kwargs:
            if fn in _INPLACE_TO_BINARY and not is_tensor(args[0]):
                # `s = 0.9; s += t`: a number has no __iadd__, so Python computes `s + t` (a new
                # tensor bound to s), and the graph records `add`, as torch._dynamo's does.
                fn = _INPLACE_TO_BINARY[fn]
            if fn is abs:  # recorded as the operator it calls, as torch._dynamo records it
                fn = operator.abs
            if fn in _REFLECTED_COMPARISONS and not is_tensor(args[0]):
                # `0 < t`: the number cannot compare itself with a tensor, so Python asks the tensor
                # (`t > 0`), and that is what the graph records, as torch._dynamo's does
                fn, args = _REFLECTED_COMPARISONS[fn], [args[1], args[0]]
            # (`x + np.int64(8)`: the NumPy number is an operand as a Python number would be)
            result = call_in_graph(tx, "call_function", fn, [python_scalar(a) for a in args], {})
            if fn in _INPLACE_TO_BINARY and isinstance(args[0], TensorVariable):
                return args[0].inplace_result(result)  # `x += y` on a tensor mutates x: the same object
            return result
        if fn in PURE_FUNCTIONS:
            pargs, pkwargs = constant_args(args, kwargs, f"{getattr(fn, '__name__', fn)}()")
            try:
                return tx.wrap_constant(fn(*pargs, **pkwargs))
            except Exception as e:
                if type(e).__module__ == "builtins" and all(type(a) in (str, int) for a in e.args):
                    # `1 / 0`, `int("x")`: the same error, raised in the traced program, where a
                    # try or with block may catch it (uncaught, the frame runs as Python)
                    raise_symbolic(type(e), *e.args)
                raise Unsupported(f"{getattr(fn, '__name__', fn)}() raises {type(e).__name__}: {e}") from e
        raise Unsupported(f"call to builtin {getattr(fn, '__qualname__', fn)}")

    def reconstruct(self, cg) -> None:
        if self.source is not None:
            cg.load_source(self.source)
        else:
            cg.load_const(self.fn)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        attr = getattr(self.fn, name, None)  # `itertools.chain.from_iterable`, `dict.fromkeys`...
        if isinstance(attr, types.BuiltinFunctionType) and (attr in BUILTIN_FUNCTIONS or attr in PURE_FUNCTIONS):
            return BuiltinVariable(attr, AttrSource(self.source, name) if self.source is not None else None)
        if name in ("__name__", "__qualname__", "__module__", "__doc__") and isinstance(attr, (str, type(None))):
            return ConstantVariable(attr)  # fixed for a builtin (`type(x).__name__` of a tuple)
        if is_builtin_descriptor(attr):  # `dict.__setitem__`, `list.append`, `int.__add__`, `object.__setattr__`
            return tx.wrap(attr, AttrSource(self.source, name) if self.source is not None else None,
                           guard=self.source is not None)
        return super().var_getattr(tx, name)

    def describe(self) -> str:
        return f"builtin {getattr(self.fn, '__qualname__', self.fn)}"

    def __repr__(self) -> str:
        return f"BuiltinVariable({getattr(self.fn, '__name__', self.fn)})"




_PLAIN_OPERANDS = (TensorVariable, ConstantVariable, SymNodeVariable)
# Operators on symbolic sizes, recorded in the graph (an in-place one as its binary form: an int
# is immutable), as torch._dynamo records them.
_SYM_OPERATORS = {
    **{fn: fn for fn in (operator.add, operator.sub, operator.mul, operator.floordiv, operator.mod, operator.pow,
                         operator.truediv, operator.neg, operator.pos, operator.lt, operator.le, operator.eq,
                         operator.ne, operator.gt, operator.ge)},
    operator.iadd: operator.add, operator.isub: operator.sub, operator.imul: operator.mul,
    operator.ifloordiv: operator.floordiv, operator.imod: operator.mod, operator.ipow: operator.pow,
    operator.itruediv: operator.truediv,
}

_READ_VALUE_BUILTINS = {max, min, abs, math.sqrt, bool, round}  # (see read_values.builtin_of_read_value)

# Builtins that look at the object itself (its type, identity, attributes), not at its items.
_OWN_OBJECT = {type, isinstance, issubclass, id, operator.is_, operator.is_not, getattr, hasattr, setattr,
               delattr, vars, callable, super, repr, str, hash}


def _on_base_values(tx, builtin: BuiltinVariable, args: Sequence[VariableTracker], kwargs) -> VariableTracker:
    """A builtin operation on an instance of a list, tuple, set or frozenset subclass that its class
    does not define in Python (`len(obj)`, `obj | other`, `x in obj`): the base's, on its items. An
    in-place operator that changes the items keeps the object (`obj += [...]` on a list subclass)."""
    fn, first = builtin.fn, args[0]
    if fn in _INPLACE_TO_BINARY and isinstance(first, ContainerSubclassMixin) and first.base in (list, set):
        first.check_mutable(tx)
    result = builtin.call(tx, [as_base_value(a) for a in args], kwargs)
    return first if isinstance(first, ContainerSubclassMixin) and result is first.base_var else result


# -- handlers: return a VariableTracker, or None to fall through to the generic rules -----------


def _callable(tx, obj: VariableTracker) -> VariableTracker:
    """callable(x): whether type(x) (not its metaclass: `list` has a __call__, lists do not)
    defines __call__, as CPython's tp_call slot says."""
    return ConstantVariable(any("__call__" in vars(k) for k in obj.python_type().__mro__))


_CALLER_FRAME_READERS = (breakpoint, dir, eval, exec)


def _reads_caller_frame(fn: Any, args: Sequence[VariableTracker], kwargs: dict) -> bool:
    """dir() without an argument, eval() and exec() without namespaces, breakpoint():
    they read the calling frame's variables, which the compiled frame keeps in the trace (its
    slots hold the entry values), so no graph break can run them right."""
    if fn is breakpoint:
        return True
    if fn is dir:
        return not args and not kwargs
    return fn in (eval, exec) and len(args) < 2 and not {"globals", "locals"} & set(kwargs)


def _getitem(tx, obj: VariableTracker, key: VariableTracker) -> VariableTracker | None:
    if is_tensor(obj):
        if isinstance(key, SymNodeVariable) and key.python_type() is int:
            # `x[n - 1]` with a symbolic index: torch.select, as torch._dynamo records it
            return call_in_graph(tx, "call_function", torch.select, [obj, ConstantVariable(0), key], {})
        return None
    getitem = getattr(obj, "getitem", None)
    if getitem is not None:
        return getitem(tx, key)
    return None


def build_dict(tx, dict_type: type, args: Sequence[VariableTracker], kwargs: dict[str, VariableTracker]) -> VariableTracker:
    """dict(...), OrderedDict(...), defaultdict(factory, ...) made in the frame: from a mapping, an
    iterable of pairs and keywords, keys being constants."""
    factory = None
    if dict_type is collections.defaultdict:
        factory, args = (args[0], args[1:]) if args else (ConstantVariable(None), args)
    if len(args) > 1:
        raise Unsupported(f"{dict_type.__name__}() with {len(args)} positional arguments")
    built = DictVariable({}, None, dict_type, factory)
    if args:
        source = args[0]
        if isinstance(source, DictVariable):
            for key, value in source.items.items():
                name_as_constructed(key, value)
            built.update(tx, source)
        elif isinstance(source, DictSubclassMixin):
            # dict() and defaultdict() merge as dict.update does; OrderedDict() as MutableMapping's
            pairs = source.mapping_pairs(tx, dict_merge=dict_type is not collections.OrderedDict)
            for key, value in pairs:
                name_as_constructed(key, value)
            built.items.update(pairs)
        elif python_method(source, "keys") is not None:  # a user mapping: keys(), then obj[key]
            for key in list(iterate(tx, source.call_method(tx, "keys", [], {}))):
                value = BuiltinVariable(operator.getitem).call(tx, [source, key], {})
                name_as_constructed(key, value)
                built.store(tx, key, value)
        else:
            if python_method(source, "__iter__") is not None and \
                    class_attribute(source.python_type(), "keys", None) is not None:
                raise Unsupported(f"{dict_type.__name__}() of a {source.python_type().__qualname__} whose keys is not a method")
            for pair in iterate(tx, source):
                key, value = pair.unpack(tx)
                name_as_constructed(key, value)
                built.store(tx, key, value)
    for key, value in kwargs.items():
        name_as_constructed(key, value)
    built.items.update(kwargs)
    return built


def _dict(tx, *args: VariableTracker, **kwargs: VariableTracker) -> VariableTracker:
    return build_dict(tx, dict, args, kwargs)


def _fromkeys(dict_type: type) -> Callable:
    """dict.fromkeys(keys, value=None) (and OrderedDict's, defaultdict's): one value, every key."""
    def handler(tx, keys: VariableTracker, value: VariableTracker | None = None) -> VariableTracker:
        value = value if value is not None else ConstantVariable(None)
        factory = ConstantVariable(None) if dict_type is collections.defaultdict else None
        built = DictVariable({}, None, dict_type, factory)
        for key in iterate(tx, keys):
            built.store(tx, key, value)
        return built
    return handler


_DICT_TYPES = (dict, collections.OrderedDict, collections.defaultdict)


def _set(set_type: type) -> Callable:
    def handler(tx, obj: VariableTracker | None = None) -> VariableTracker | None:
        if obj is not None and obj.is_python_constant() and set_type is frozenset:
            return None  # frozenset((1, 2)): folded to a constant
        return build_set(tx, set_type, obj)
    return handler


def _super(tx, *args: VariableTracker) -> VariableTracker:
    if not args:
        return zero_arg_super(tx)
    if len(args) == 2:
        return SuperVariable(args[0].as_python_constant(), args[1])
    raise Unsupported("super() with one argument")


def _sum(tx, iterable: VariableTracker, start: VariableTracker | None = None) -> VariableTracker:
    """sum() as Python computes it: start + item0 + item1 ... (tensors are added in the graph).
    torch._dynamo's polyfill is `functools.reduce(operator.add, iterable, start)`, named as such."""
    return reduce_items(tx, BuiltinVariable(operator.add), iterable, start if start is not None else ConstantVariable(0))


class OperatorGetterVariable(VariableTracker):
    """operator.itemgetter(...) / attrgetter(...) made while tracing: a call reads the items or
    (dotted) attributes of its argument, each traced like `obj[key]` / `obj.name`."""

    def __init__(self, kind: type, keys: tuple):
        super().__init__()
        self.kind, self.keys = kind, keys

    def python_type(self) -> type:
        return self.kind

    def call(self, tx, args, kwargs) -> VariableTracker:
        if len(args) != 1 or kwargs:
            raise Unsupported(f"{self.kind.__name__} object called with {len(args)} arguments")
        results = []
        for key in self.keys:
            if self.kind is operator.itemgetter:
                results.append(BuiltinVariable(operator.getitem).call(tx, [args[0], ConstantVariable(key)], {}))
            else:
                value = args[0]
                for name in key.split("."):
                    value = value.var_getattr(tx, name)
                results.append(value)
        return results[0] if len(results) == 1 else TupleVariable(results)

    def reconstruct(self, cg) -> None:
        cg.push_null()
        cg.load_const(self.kind)
        for key in self.keys:
            cg.load_const(key)
        cg.call(len(self.keys))


def _exc_info(tx) -> VariableTracker:
    """`sys.exc_info()` where no exception is being handled: in the trace (no except block of it
    around the call) nor around the frame (guarded: a call from inside an except block of a
    caller compiles again, and breaks there)."""
    if tx.handled_exception() is not None or sys.exc_info()[1] is not None:
        raise Unsupported("sys.exc_info() while an exception is being handled")
    tx.output.guards.add_handled_exception(False)
    return TupleVariable([ConstantVariable(None)] * 3)


def _exception(tx) -> VariableTracker:
    return _exc_info(tx).items[1]


def _partial(tx, fn: VariableTracker, *args: VariableTracker, **kwargs: VariableTracker) -> VariableTracker:
    if isinstance(fn, PartialVariable):  # partial(partial(f, a), b) is partial(f, a, b), as CPython makes it
        return PartialVariable(fn.func, [*fn.args, *args], {**fn.keywords, **kwargs})
    return PartialVariable(fn, list(args), kwargs)


class MethodCallerVariable(VariableTracker):
    """operator.methodcaller(name, *args, **kwargs) made while tracing: a call is
    `obj.name(*args, **kwargs)`, traced as the method call it is."""

    def __init__(self, name: str, args: list[VariableTracker], kwargs: dict[str, VariableTracker]):
        super().__init__()
        self.name, self.args, self.kwargs = name, args, kwargs

    def python_type(self) -> type:
        return operator.methodcaller

    def call(self, tx, args, kwargs) -> VariableTracker:
        if len(args) != 1 or kwargs:
            raise Unsupported(f"methodcaller object called with {len(args)} arguments")
        return tx.load_attr(args[0], self.name).call(tx, list(self.args), dict(self.kwargs))

    def rebuilt_from(self) -> list[VariableTracker]:
        return [*self.args, *self.kwargs.values()]

    def reconstruct(self, cg) -> None:
        """`operator.methodcaller(name, *args, **kwargs)` called again with the same arguments."""
        cg.push_null()
        cg.load_const(operator.methodcaller)
        cg.load_const(self.name)
        for arg in (*self.args, *self.kwargs.values()):
            arg.reconstruct(cg)
        if self.kwargs:
            cg.emit("KW_NAMES", tuple(self.kwargs))  # (3.11: the names of the last arguments)
        cg.call(1 + len(self.args) + len(self.kwargs))


def _methodcaller(tx, name: VariableTracker, *args: VariableTracker, **kwargs: VariableTracker) -> VariableTracker:
    return MethodCallerVariable(name.as_python_constant(), list(args), kwargs)


def _getter(kind: type) -> Callable:
    def handler(tx, *keys: VariableTracker) -> VariableTracker:
        return OperatorGetterVariable(kind, tuple(k.as_python_constant() for k in keys))
    return handler


def _object_new(tx, cls: VariableTracker, *args: VariableTracker) -> VariableTracker | None:
    """`object.__new__(cls)` (`cls.__new__(cls)` in a metaclass's `__call__`): a new instance of a
    plain class, its `__init__` not run."""
    if args or not isinstance(cls, PythonObjectVariable) or not is_plain_class(cls.value):
        raise Unsupported(f"object.__new__ of {cls.describe()}")
    return NewObjectVariable(cls.value, cls.source)


def _not(tx, obj: VariableTracker) -> VariableTracker:
    return ConstantVariable(not truth(tx, obj))


_FAKE_ID_HANDLERS = {operator.eq: fake_id_compare(operator.eq), operator.ne: fake_id_compare(operator.ne)}
_WEAKREF_HANDLERS = weakref_comparisons(lambda tx, op, a, b: BuiltinVariable(op).call(tx, [a, b], {}), identity)


def _either(*tables: dict[Callable, Callable]) -> dict[Callable, Callable]:
    """The handlers of several tables, one per function: those of one function tried in turn (`|`
    is a union of sets or a merge of dicts), the first that does not fall through answering."""
    merged: dict[Callable, list[Callable]] = {}
    for table in tables:
        for fn, handler in table.items():
            merged.setdefault(fn, []).append(handler)

    def chain(handlers: list[Callable]) -> Callable:
        if len(handlers) == 1:
            return handlers[0]

        def handler(tx, *args, **kwargs):
            for h in handlers:
                result = h(tx, *args, **kwargs)
                if result is not None:
                    return result
            return None
        return handler

    return {fn: chain(handlers) for fn, handlers in merged.items()}


_HANDLERS: dict[Callable, Callable] = {
    len: length, callable: _callable, isinstance: isinstance_of, getattr: getattr_, hasattr: hasattr_, setattr: setattr_, delattr: delattr_,
    type: type_, str: text_of(str), repr: text_of(repr),
    **ITERATION_HANDLERS, **_either(SET_HANDLERS, DICT_HANDLERS, _FAKE_ID_HANDLERS, _WEAKREF_HANDLERS),
    operator.is_: identity(False), operator.is_not: identity(True), operator.contains: contains,
    operator.getitem: _getitem, operator.not_: _not, super: _super, sum: _sum,
    set: _set(set), frozenset: _set(frozenset), dict: _dict, id: id_, vars: vars_,
    operator.methodcaller: _methodcaller, operator.itemgetter: _getter(operator.itemgetter), operator.attrgetter: _getter(operator.attrgetter),
    functools.partial: _partial, **{t.fromkeys: _fromkeys(t) for t in _DICT_TYPES},
    sys.exc_info: _exc_info, sys.exception: _exception,
    bool: lambda tx, obj: ConstantVariable(truth(tx, obj)), object.__new__: _object_new, tuple.__new__: tuple_new,
    **CONTAINER_OPERATORS,
}

BUILTIN_FUNCTIONS = {v for v in vars(builtins).values() if callable(v)} | {t.fromkeys for t in _DICT_TYPES} | {
    functools.partial, object.__new__, tuple.__new__, sys.exc_info, sys.exception, *ITERATION_HANDLERS}

register_constructor(lambda cls: cls is types.MethodType, make_method)
register_constructor(lambda cls: cls is types.MappingProxyType, MadeMappingProxyVariable.make)
# `OrderedDict(...)` and `defaultdict(...)` are classes, called as such (objects.py asks): made as dict() is.
register_constructor(lambda cls: cls in (collections.OrderedDict, collections.defaultdict),
                     lambda tx, cls, cls_source, args, kwargs: build_dict(tx, cls, args, kwargs))

"""Binding an inlined call's arguments to the callee's parameters, as CPython binds them when it
makes the callee's frame (the locals a child translator starts with)."""
from __future__ import annotations

import inspect
import types
import weakref
from typing import Any

from ..exc import Unsupported
from ..source import AttrSource, ItemSource, Source
from .variables import VariableTracker
from .variables.dicts import DictVariable
from .variables.lists import TupleVariable


def bind_arguments(tx: Any, fn: types.FunctionType, args: list[VariableTracker],
                   kwargs: dict[str, VariableTracker], fn_source: Source | None = None) -> dict[str, VariableTracker]:
    """The locals an inlined call of `fn` starts with: each parameter's tracker, `*args` as a
    tuple, `**kwargs` as a dict, a default wrapped from where it lives (guarded when `fn` was read
    from a source). A call that does not bind is Unsupported, with inspect's reason."""
    plain = _bind_plainly(fn, args, kwargs)
    if plain is not None:
        bound, varargs, varkw = plain
        result: dict[str, VariableTracker] = {}
        for name, value in bound.items():
            if name == varargs:
                value = TupleVariable(list(value))
            elif name == varkw:
                value = DictVariable(value)
            elif not isinstance(value, VariableTracker):  # a default: guarded where it lives
                value = tx.wrap(value, _default_source(fn, fn_source, name), guard=fn_source is not None)
            result[name] = value
        return result
    signature = _code_signature(fn)
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as e:
        raise Unsupported(f"call to {fn.__qualname__}: {e}") from e
    bound.apply_defaults()
    result: dict[str, VariableTracker] = {}
    for name, value in bound.arguments.items():
        kind = signature.parameters[name].kind
        if kind is inspect.Parameter.VAR_POSITIONAL:
            value = TupleVariable(list(value))
        elif kind is inspect.Parameter.VAR_KEYWORD:
            value = DictVariable(dict(value))
        elif not isinstance(value, VariableTracker):  # a default: guarded where it lives
            value = tx.wrap(value, _default_source(fn, fn_source, name), guard=fn_source is not None)
        # inspect names a comprehension's implicit `.0` argument `implicit0`.
        if name.startswith("implicit") and f".{name[8:]}" in fn.__code__.co_varnames:
            name = f".{name[8:]}"
        result[name] = value
    return result


def _bind_plainly(fn: types.FunctionType, args: list, kwargs: dict) -> tuple[dict[str, Any], str | None, str | None] | None:
    """The call's arguments by parameter name, in the code's order, defaults filled (values, not
    trackers), read off the code object as inspect's bind gives them (bind costs most of an
    inlined call's setup): `*args` as a tuple and `**kwargs` as a dict, whose names come second and
    third. None for a function with positional-only parameters, or a call that does not bind
    (inspect then says why)."""
    code = fn.__code__
    if code.co_posonlyargcount:
        return None
    n_positional, n_kwonly = code.co_argcount, code.co_kwonlyargcount
    names = code.co_varnames[:n_positional + n_kwonly]
    flags, after = code.co_flags, n_positional + n_kwonly
    varargs = code.co_varnames[after] if flags & inspect.CO_VARARGS else None
    varkw = code.co_varnames[after + (varargs is not None)] if flags & inspect.CO_VARKEYWORDS else None
    if len(args) > n_positional and varargs is None:
        return None
    bound = dict(zip(names, args[:n_positional]))
    extra_kwargs: dict[str, Any] = {}
    for name, value in kwargs.items():
        if name in bound:
            return None
        if name in names:
            bound[name] = value
        elif varkw is not None:
            extra_kwargs[name] = value
        else:
            return None
    if len(bound) == len(names) and varargs is None and varkw is None:
        return {name: bound[name] for name in names}, None, None
    defaults = fn.__defaults__ or ()
    first_default = n_positional - len(defaults)
    kwdefaults = fn.__kwdefaults__ or {}
    result = {}
    for i, name in enumerate(names):
        if i == n_positional and varargs is not None:  # (inspect's order: the parameters' own)
            result[varargs] = tuple(args[n_positional:])
        if name in bound:
            result[name] = bound[name]
        elif i < n_positional and i >= first_default:
            result[name] = defaults[i - first_default]
        elif i >= n_positional and name in kwdefaults:
            result[name] = kwdefaults[name]
        else:
            return None  # a missing argument: inspect's message
    if varargs is not None and varargs not in result:
        result[varargs] = tuple(args[n_positional:])
    if varkw is not None:
        result[varkw] = extra_kwargs
    return result, varargs, varkw


_signatures: "weakref.WeakKeyDictionary[types.FunctionType, tuple]" = weakref.WeakKeyDictionary()
_ADVERTISED_SIGNATURES = ("__signature__", "_partialmethod", "__partialmethod__")  # (3.13 renames it)


def _code_signature(fn: types.FunctionType) -> inspect.Signature:
    """The parameters `fn`'s code takes, whatever signature it advertises: a `__signature__` set
    on it (torch._refs do) describes its callers' view, not the frame its code makes; so does the
    `_partialmethod` of the function a functools.partialmethod makes (inspect reads it).

    Remembered per function while its code and defaults stay the objects they were (a module's
    forward is bound at every call site; inspect.signature costs more than binding)."""
    if any(name in fn.__dict__ for name in _ADVERTISED_SIGNATURES):
        plain = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
        plain.__kwdefaults__ = fn.__kwdefaults__
        return inspect.signature(plain, follow_wrapped=False)
    try:
        code, defaults, kwdefaults, signature = _signatures[fn]
        if code is fn.__code__ and defaults is fn.__defaults__ and kwdefaults is fn.__kwdefaults__:
            return signature
    except (KeyError, TypeError):  # (TypeError: a function that cannot be weakly referenced)
        pass
    signature = inspect.signature(fn, follow_wrapped=False)
    try:
        _signatures[fn] = (fn.__code__, fn.__defaults__, fn.__kwdefaults__, signature)
    except TypeError:
        pass
    return signature


def _default_source(fn: types.FunctionType, fn_source: Source | None, name: str) -> Source | None:
    """`fn.__defaults__[i]` or `fn.__kwdefaults__[name]`, for a function read from a source."""
    if fn_source is None:
        return None
    if fn.__kwdefaults__ and name in fn.__kwdefaults__:
        return ItemSource(AttrSource(fn_source, "__kwdefaults__"), name)
    positional = fn.__code__.co_varnames[:fn.__code__.co_argcount]
    first_default = len(positional) - len(fn.__defaults__ or ())
    return ItemSource(AttrSource(fn_source, "__defaults__"), positional.index(name) - first_default)

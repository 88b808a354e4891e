"""Builtins that iterate: list(), tuple(), enumerate, zip, map, filter, reversed, iter, next, sorted,
min, max, any, all, functools.reduce and itertools; and the C functions that iterate whose Python
versions (polyfills.py) are inlined instead: itertools.accumulate, groupby and islice, Counter's
helper.

Lazy ones (zip, map, filter) return iterators that produce their items as their consumer asks, so
the calls traced for them interleave with the consumer's as in Python (variables/iterators.py).
builtins.py maps each builtin to its handler here.
"""
from __future__ import annotations

import collections
import functools
import itertools
from typing import Callable, Iterator

import torch

from ...exc import Unsupported
from . import polyfills
from .base import VariableTracker
from .constant import ConstantVariable
from .dict_subclass import DictSubclassMixin
from .exceptions import ExceptionVariable, RaisedException
from .iterators import ListIteratorVariable, Remake, iterate
from .lists import BaseListVariable, FrameListVariable, ListVariable, TupleVariable, sort_trackers
from .special_methods import is_tensor, length, python_method
from .tensor import call_in_graph


def _sequence(kind: type) -> Callable:
    def build(tx, obj: VariableTracker | None = None) -> VariableTracker:
        items = [] if obj is None else obj.unpack(tx)
        return ListVariable(items) if kind is list else TupleVariable(items)
    return build


# torch._dynamo runs sum, functools.reduce and enumerate as Python functions of its
# own (torch/_dynamo/polyfills), and the STORE_FAST of each item they take names that item's node
# (`for element in it: value = function(value, element)`). pyframe computes them directly and gives
# the items the names those stores give them, at the moment they give them, so its graphs read as
# torch._dynamo's (`value_1 = value + element_1`).
def _named(vt: VariableTracker, name: str) -> VariableTracker:
    vt.set_name_hint(name)
    return vt


def _enumerate(tx, obj: VariableTracker, start: VariableTracker | None = None) -> VariableTracker:
    first = start.as_python_constant() if start is not None else 0
    # (the polyfill's `for x in iterable: yield start, x`)
    pairs = (TupleVariable([ConstantVariable(i), _named(v, "x")]) for i, v in enumerate(iterate(tx, obj), first))
    return ListIteratorVariable([], enumerate, pairs)


def _zip(tx, *objs: VariableTracker, strict: VariableTracker | None = None) -> VariableTracker:
    if strict is not None and strict.as_python_constant():  # lengths are known: checked now
        columns = [list(iterate(tx, o)) for o in objs]
        if len({len(c) for c in columns}) > 1:
            raise Unsupported("zip(strict=True) of iterables of different lengths raises ValueError")
        objs = tuple(ListVariable(c) for c in columns)
    arguments = zip(*(iterate(tx, o) for o in objs))
    tuples = (TupleVariable(list(items)) for items in arguments)
    return _remakeable(ListIteratorVariable([], zip, tuples), None, arguments, objs)


def _map(tx, fn: VariableTracker, *objs: VariableTracker) -> VariableTracker:
    """map(): fn is called (traced) for each item as the consumer takes it, as Python calls it."""
    if not objs:
        raise Unsupported("map() with no iterable")
    arguments = zip(*(iterate(tx, o) for o in objs))
    results = (fn.call(tx, list(items), {}) for items in arguments)
    return _remakeable(ListIteratorVariable([], map, results), fn, arguments, objs)


def _remakeable(iterator: ListIteratorVariable, fn: VariableTracker | None, arguments: Iterator,
                objs: tuple[VariableTracker, ...]) -> ListIteratorVariable:
    """A zip or map over lists and tuples is made again as itself if it outlives the frame
    (iterators.Remake); over anything else (an iterator, a generator), as a tuple iterator, which
    the frame may not hand back."""
    if all(isinstance(o, BaseListVariable) for o in objs):
        iterator.remake = Remake(fn, arguments, len(objs))
    return iterator


def _filter(tx, fn: VariableTracker, obj: VariableTracker) -> VariableTracker:
    keep_truthy = fn.is_python_constant() and fn.as_python_constant() is None  # filter(None, ...)

    def kept() -> Iterator[VariableTracker]:
        for item in iterate(tx, obj):
            if (item if keep_truthy else fn.call(tx, [item], {})).truth():
                yield item
    return ListIteratorVariable([], filter, kept())


def _reversed(tx, obj: VariableTracker) -> VariableTracker:
    if isinstance(obj, ListIteratorVariable):
        raise Unsupported(f"reversed() of an iterator ({obj.python_type().__name__})")
    if isinstance(obj, DictSubclassMixin):  # its __reversed__ (dict's, or its own), not its __iter__
        return obj.call_special(tx, "__reversed__", [])
    found = python_method(obj, "__reversed__")
    if found is not None:  # a user class's own, inlined
        return tx.inline_call(found[0], [obj], {}, fn_source=found[1])
    if python_method(obj, "__iter__") is not None or python_method(obj, "__getitem__") is not None:
        # reversed() of a user object without __reversed__ indexes it from len()-1 down (never
        # through its __iter__): `obj[i]`, each call inlined
        size = length(tx, obj)
        if size is None:
            raise Unsupported(f"reversed() of a {obj.python_type().__qualname__} without __len__")
        items = [obj.getitem(tx, ConstantVariable(i)) for i in reversed(range(size.as_python_constant()))]
        return ListIteratorVariable(items, type(reversed([])))
    return ListIteratorVariable(list(reversed(obj.unpack(tx))), type(reversed([])))


def _iter(tx, obj: VariableTracker, *sentinel: VariableTracker) -> VariableTracker:
    if sentinel:
        raise Unsupported("iter(callable, sentinel)")
    if isinstance(obj, ListIteratorVariable):
        return obj  # an iterator is its own iterator
    if type(obj) in (ListVariable, FrameListVariable):  # sees items appended while it runs, as a list iterator does
        return ListIteratorVariable(obj.items, type(iter([])))
    return ListIteratorVariable(obj.unpack(tx))


def _next(tx, obj: VariableTracker, *default: VariableTracker) -> VariableTracker:
    if not isinstance(obj, ListIteratorVariable):
        raise Unsupported(f"next() of {obj}")
    item = obj.next()
    if item is not None:
        return item
    if default:
        return default[0]
    value = obj.stop_value  # a generator's return value
    raise RaisedException(ExceptionVariable(StopIteration, [] if value is None else [value]))


def _itertools(fn: Callable) -> Callable:
    """itertools over iterables of known length: itertools itself arranges the symbolic items
    (it never looks at their values), and the result is the list of what it yields."""
    def handler(tx, *args: VariableTracker, **kwargs: VariableTracker) -> VariableTracker:
        if fn in _ITERTOOLS_ONE_ITERABLE:  # combinations(iterable, r), permutations(iterable, r)...
            iterables = [args[0].unpack(tx), *(a.as_python_constant() for a in args[1:])]
        elif fn == itertools.chain.from_iterable:
            iterables = [[item.unpack(tx) for item in args[0].unpack(tx)]]
        else:
            iterables = [a.unpack(tx) for a in args]
        options = {k: v if k == "fillvalue" else v.as_python_constant() for k, v in kwargs.items()}
        if fn is itertools.zip_longest:
            options.setdefault("fillvalue", ConstantVariable(None))
        kind = fn if isinstance(fn, type) else fn.__self__  # chain.from_iterable makes a chain
        return ListIteratorVariable([TupleVariable(list(i)) if isinstance(i, tuple) else i
                                     for i in fn(*iterables, **options)], kind)
    return handler


def reduce_items(tx, fn: VariableTracker, iterable: VariableTracker, *initial: VariableTracker) -> VariableTracker:
    """functools.reduce: fn called item by item (each call traced like any other); the values named
    as the polyfill's locals `value` and `element` name them. (sum() is reduced here too.)"""
    items = iterate(tx, iterable)
    total = initial[0] if initial else next(items, None)
    if total is None:
        raise Unsupported("functools.reduce() of an empty sequence with no initial value")
    total.set_name_hint("value")
    for item in items:
        item.set_name_hint("element")
        total = _named(fn.call(tx, [total, item], {}), "value")
    return total


def _minmax(fn: Callable) -> Callable:
    """min/max of constants, folded; of tensors and numbers, recorded as torch._dynamo records them:
    `max(t, 0)` is `torch.clamp(t, min=0)`, `max(t, u)` is `torch.maximum(t, u)` (min alike)."""
    bound, pairwise = ("min", torch.maximum) if fn is max else ("max", torch.minimum)

    def handler(tx, *args: VariableTracker, key: VariableTracker | None = None,
                default: VariableTracker | None = None) -> VariableTracker | None:
        items = list(iterate(tx, args[0])) if len(args) == 1 else list(args)
        if not items:
            if default is not None:
                return default
            raise Unsupported(f"{fn.__name__}() of an empty sequence raises ValueError")
        if key is not None and not (key.is_python_constant() and key.as_python_constant() is None):
            keys = [key.call(tx, [item], {}) for item in items]
            if not all(k.is_python_constant() for k in keys):
                raise Unsupported(f"{fn.__name__}() with keys unknown while tracing")
            values = [k.as_python_constant() for k in keys]
            return items[values.index(fn(values))]  # the first item with the extreme key, as Python
        if all(i.is_python_constant() for i in items):
            return ConstantVariable(fn(i.as_python_constant() for i in items))
        if not any(is_tensor(i) for i in items):
            return None
        result = items[0]
        for item in items[1:]:
            if is_tensor(result) and is_tensor(item):
                result = call_in_graph(tx, "call_function", pairwise, [result, item], {})
            else:
                tensor, number = (result, item) if is_tensor(result) else (item, result)
                if not number.is_python_constant():
                    return None
                result = call_in_graph(tx, "call_function", torch.clamp, [tensor], {bound: number})
        return result
    return handler


def _sorted(tx, iterable: VariableTracker, *, key: VariableTracker | None = None,
            reverse: VariableTracker | None = None) -> VariableTracker | None:
    """sorted(iterable, key=..., reverse=...): the items themselves (tensors too), reordered by
    keys known while tracing."""
    items = list(iterate(tx, iterable))
    if key is None and all(i.is_python_constant() for i in items):
        if iterable.is_python_constant():
            return None  # folded like any pure builtin on constants
        # (a dict's keys, whose values are tensors): sorted now, as the pure builtins are
        descending = reverse.as_python_constant() if reverse is not None else False
        try:
            return tx.wrap_constant(sorted((i.as_python_constant() for i in items), reverse=descending))
        except TypeError as e:  # Python raises it too when the frame runs
            raise Unsupported(f"sorted() raises TypeError: {e}") from e
    return ListVariable(sort_trackers(tx, items, key, reverse))


def _any_all(fn: Callable) -> Callable:
    def handler(tx, iterable: VariableTracker) -> VariableTracker:
        return ConstantVariable(fn(item.truth() for item in iterate(tx, iterable)))
    return handler


def _repeat(tx, obj: VariableTracker, times: VariableTracker | None = None) -> VariableTracker:
    if times is None:  # endless: a generator, asked one item at a time
        return tx.inline_call(polyfills.repeat_forever, [obj], {})
    return ListIteratorVariable([obj] * times.as_python_constant(), itertools.repeat)


_ITERTOOLS_ONE_ITERABLE = (itertools.combinations, itertools.combinations_with_replacement,
                           itertools.permutations)


_ITERTOOLS = (itertools.chain, itertools.chain.from_iterable, itertools.product, itertools.zip_longest,
              *_ITERTOOLS_ONE_ITERABLE)


def _polyfill(fn: Callable) -> Callable:
    """A C function replaced by its Python version, inlined: every step traced."""
    def handler(tx, *args: VariableTracker, **kwargs: VariableTracker) -> VariableTracker:
        return tx.inline_call(fn, list(args), kwargs)
    return handler


_POLYFILLS = {itertools.accumulate: polyfills.accumulate, itertools.groupby: polyfills.groupby,
              itertools.islice: polyfills.islice, collections._count_elements: polyfills.count_elements,
              itertools.starmap: polyfills.starmap, itertools.compress: polyfills.compress,
              itertools.dropwhile: polyfills.dropwhile, itertools.takewhile: polyfills.takewhile,
              itertools.filterfalse: polyfills.filterfalse, itertools.count: polyfills.count,
              itertools.cycle: polyfills.cycle, itertools.pairwise: polyfills.pairwise}


# The handler of each builtin here (builtins.py's table merges them into its own).
ITERATION_HANDLERS: dict[Callable, Callable] = {
    list: _sequence(list), tuple: _sequence(tuple), enumerate: _enumerate, zip: _zip, reversed: _reversed,
    map: _map, filter: _filter, iter: _iter, next: _next, functools.reduce: reduce_items, itertools.repeat: _repeat,
    **{fn: _itertools(fn) for fn in _ITERTOOLS}, **{fn: _polyfill(py) for fn, py in _POLYFILLS.items()},
    sorted: _sorted, min: _minmax(min), max: _minmax(max), any: _any_all(any), all: _any_all(all),
}

"""Python versions of standard-library functions written in C, inlined in their place.

A C function of the standard library cannot be traced: its body is not bytecode. For a few that
user code calls with symbolic values (tensors, items of lists the trace holds), the translator
inlines one of these functions instead, which computes the same result the same way, step by step
in Python, so every step is traced like the user's own code (`accumulate(xs)` adds in the graph,
`Counter.update` counts through the dict the trace holds). iteration_builtins.py and builtins.py
map each C function to its polyfill here.

The names of their variables are those of torch._dynamo's polyfills (torch/_dynamo/polyfills/),
since a tensor takes the name of the first variable it is stored in (`datum = l_x_ * 2`).

Generators are lazy as their C originals are: `accumulate` computes each running total when its
consumer asks for it. Each is a plain Python function of the standard library's semantics; none of
them imports pyframe.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator


def accumulate(iterable: Iterable, func: Callable | None = None, *, initial: Any = None) -> Iterator:
    """itertools.accumulate: running totals (`func(total, item)`, `+` by default)."""
    iterator = iter(iterable)  # (as the C version, iter() at the call, before the first next())
    return _accumulate(iterator, func, initial)


def _accumulate(iterator: Iterator, func: Callable | None, total: Any) -> Iterator:
    if total is None:
        for total in iterator:  # the first item starts the total
            break
        else:
            return
    yield total
    for element in iterator:
        total = total + element if func is None else func(total, element)
        yield total


def islice(iterable: Iterable, *args: Any) -> Iterator:
    """itertools.islice(iterable, [start,] stop [, step]): lazy, consuming the iterable as the C
    version does (up to each item it gives, and on to `stop` when asked past the last one)."""
    bounds = slice(*args)
    start = 0 if bounds.start is None else bounds.start
    step = 1 if bounds.step is None else bounds.step
    stop = bounds.stop
    if stop is not None and (type(stop) is not int or stop < 0):
        raise ValueError("Stop argument for islice() must be None or an integer: 0 <= x <= sys.maxsize.")
    if type(start) is not int or start < 0 or type(step) is not int or step < 1:
        raise ValueError("Indices for islice() must be None or an integer: 0 <= x <= sys.maxsize.")
    return _islice(iter(iterable), start, stop, step)


def _islice(iterator: Iterator, next_index: int, stop: int | None, step: int) -> Iterator:
    # A traced tensor's node takes the name of the first local it is stored in, so each item is
    # first stored where torch._dynamo's islice stores it: in `x` without a stop (its enumerate's
    # loop variable), in `element` with one (`for i, element in zip(...)`). Without a stop every
    # item is read; with one, the first max(start, stop) (those skipped too, as the C version).
    if stop is None:
        index = 0
        for x in iterator:
            if index == next_index:
                yield x
                next_index += step
            index += 1
        return
    for index, element in zip(range(max(next_index, stop)), iterator):
        if index == next_index:
            yield element
            next_index += step


def starmap(function: Callable, iterable: Iterable) -> Iterator:
    """itertools.starmap: `function(*args)` for each tuple of arguments."""
    iterator = iter(iterable)
    return (function(*args) for args in iterator)


def compress(data: Iterable, selectors: Iterable) -> Iterator:
    """itertools.compress: the items of `data` whose selector is true."""
    return (datum for datum, selector in zip(data, selectors) if selector)


def dropwhile(predicate: Callable, iterable: Iterable) -> Iterator:
    """itertools.dropwhile: the items from the first for which `predicate` is false on."""
    return _dropwhile(predicate, iter(iterable))


def _dropwhile(predicate: Callable, iterator: Iterator) -> Iterator:
    for x in iterator:
        if not predicate(x):
            yield x
            break
    yield from iterator


def takewhile(predicate: Callable, iterable: Iterable) -> Iterator:
    """itertools.takewhile: the items before the first for which `predicate` is false."""
    return _takewhile(predicate, iter(iterable))


def _takewhile(predicate: Callable, iterator: Iterator) -> Iterator:
    for x in iterator:
        if not predicate(x):
            return
        yield x


def filterfalse(predicate: Callable | None, iterable: Iterable) -> Iterator:
    """itertools.filterfalse: the items for which `predicate` (truth, for None) is false."""
    iterator = iter(iterable)
    return (element for element in iterator if not (element if predicate is None else predicate(element)))


def pairwise(iterable: Iterable) -> Iterator:
    """itertools.pairwise: each item with the one after it."""
    return _pairwise(iter(iterable))


def _pairwise(iterator: Iterator) -> Iterator:
    a = None
    first = True
    for b in iterator:
        if first:
            first = False
        else:
            yield a, b
        a = b


def count(start: Any = 0, step: Any = 1) -> Iterator:
    """itertools.count: start, start + step, ... without end (its consumer stops it)."""
    return _count(start, step)


def _count(n: Any, step: Any) -> Iterator:
    while True:
        yield n
        n += step


def repeat_forever(obj: Any) -> Iterator:
    """itertools.repeat(obj) without a count: obj without end (its consumer, a zip, stops it)."""
    while True:
        yield obj


def cycle(iterable: Iterable) -> Iterator:
    """itertools.cycle: the items, again and again (saved on the first pass, as the C version)."""
    return _cycle(iter(iterable))


def _cycle(iterator: Iterator) -> Iterator:
    saved = []
    for element in iterator:
        yield element
        saved.append(element)
    while saved:
        for element in saved:
            yield element


def groupby(iterable: Iterable, key: Callable | None = None) -> Iterator:
    """itertools.groupby: (key, iterator over the group) for each run of items with equal keys.
    A group is read to its end before it is given (the C version reads it as its consumer asks;
    the items and their order are the same)."""
    current_key = group = None
    for element in iterable:
        k = element if key is None else key(element)
        if group is not None and k == current_key:
            group.append(element)
            continue
        if group is not None:
            yield current_key, iter(group)
        current_key, group = k, [element]
    if group is not None:
        yield current_key, iter(group)


def count_elements(mapping: Any, iterable: Iterable) -> None:
    """collections._count_elements (Counter.update's C helper): `mapping[e] = mapping.get(e, 0) + 1`
    for each item, through the mapping's own get and __setitem__."""
    get = mapping.get
    for element in iterable:
        mapping[element] = get(element, 0) + 1

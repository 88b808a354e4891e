"""Iterators: what GET_ITER leaves on the stack, and what iter(), zip(), map(), filter(), itertools
and inlined generator functions return. Lazy ones produce their items one at a time, as Python does.
"""
from __future__ import annotations

from typing import Iterator

from ...source import Source
from .base import VariableTracker


_TUPLE_ITERATOR, _LIST_ITERATOR = type(iter(())), type(iter([]))


def iterate(tx, iterable: VariableTracker) -> Iterator[VariableTracker]:
    """The items of `iterable`, an iterator's (a generator's) taken one at a time as Python would."""
    if isinstance(iterable, ListIteratorVariable):
        while (item := iterable.next()) is not None:
            yield item
    else:
        yield from iterable.unpack(tx)


def extension_items(tx, container: VariableTracker, iterable: VariableTracker) -> Iterator[VariableTracker]:
    """What `container.extend(iterable)` adds, as CPython takes it: a copy first when extending with
    itself, else one item at a time (a generator reading the container sees it grow)."""
    return iter(iterable.unpack(tx)) if iterable is container else iterate(tx, iterable)


class ListIteratorVariable(VariableTracker):
    """An iterator: what GET_ITER leaves on the stack, and what iter(), zip(), map(), enumerate(),
    reversed(), filter(), itertools and generators return. `items` holds the items it has
    produced; a lazy one (map, zip, a generator...) produces the rest from `pending`, one at a
    time as its consumer asks, so calls traced for them interleave with the consumer's as in Python.
    `kind` is the type Python would give it (zip, map, list_iterator...). One read from the frame
    (a tuple iterator, as a loop's iterator reaches a resume function) has a source: its items are
    the ones it has still to give, and the side-effect replay moves the real one on by `index`."""

    def __init__(self, items: list[VariableTracker], kind: type = type(iter(())),
                 pending: Iterator[VariableTracker] | None = None, source: Source | None = None):
        super().__init__(source)
        self.items = items
        self.index = 0
        self.kind = kind
        self.pending = pending

    def python_type(self) -> type:
        return self.kind

    # What the StopIteration of the last next() that found it exhausted carries (`yield from`'s
    # value): None but for a generator returning a value.
    stop_value: VariableTracker | None = None

    def next(self) -> VariableTracker | None:
        if self.index == len(self.items) and not self._produce():
            return None
        self.index += 1
        return self.items[self.index - 1]

    def unpack(self, tx) -> list[VariableTracker]:
        rest, self.index = self.remaining(), len(self.items)
        return rest

    def remaining(self) -> list[VariableTracker]:
        """The items still to come, without consuming them (a lazy iterator computes them now)."""
        while self._produce():
            pass
        return self.items[self.index:]

    def _produce(self) -> bool:
        if self.pending is None:
            return False
        item = next(self.pending, None)
        if item is None:
            self.pending = None
            return False
        self.items.append(item)
        return True

    def reconstruct(self, cg) -> None:
        """`iter((items still to come))`: a graph break inside a loop continues the same iterations.
        One read from the frame is itself, moved on by the replay (side_effects.py)."""
        if self.source is not None:
            cg.load_source(self.source)
            return
        if self.remade():
            arguments, remake = self._arguments_left(), self.remake

            def remade() -> None:  # `zip(*columns)`, `map(fn, *columns)`
                cg.push_null()
                cg.load_const(self.kind)
                if remake.fn is not None:
                    remake.fn.reconstruct(cg)
                for column in range(remake.arity):
                    for row in arguments:
                        row[column].reconstruct(cg)
                    cg.emit("BUILD_TUPLE", len(arguments))
                cg.call(remake.arity + (remake.fn is not None))

            cg.rebuild_once(self, remade)
            return
        rest = self.remaining()

        def build() -> None:
            for item in rest:
                item.reconstruct(cg)
            # iter() of a list is a list_iterator, as the one the trace stands for was
            cg.emit("BUILD_LIST" if self.kind is _LIST_ITERATOR else "BUILD_TUPLE", len(rest))
            cg.emit("GET_ITER")

        cg.rebuild_once(self, build)  # one iterator, however many places hold it

    def rebuilt_as_itself(self) -> bool:
        """Whether reconstruct() gives back an iterator of the type Python gave (a tuple or a
        list iterator, the frame's own, or a zip or map made again as itself: `remake`); a
        generator, filter, enumerate... is rebuilt as a tuple iterator, which only a loop's hidden
        iterator may be."""
        return self.source is not None or self.kind in (_TUPLE_ITERATOR, _LIST_ITERATOR) or self.remade()

    # How a zip or a map is made again (Remake), or None.
    remake: "Remake | None" = None

    def remade(self) -> bool:
        """Rebuilt by its Remake: a zip, or a map none of whose results the trace has made and not
        handed on (those calls are traced; the others are left to the rebuilt map)."""
        return self.remake is not None and (self.kind is zip or self.index == len(self.items))

    def held(self) -> list[VariableTracker]:
        """The values rebuilding it rebuilds: the items still to come, or a remade one's function
        and arguments still to come (its calls not made)."""
        if not self.remade():
            return self.remaining()
        rows = self._arguments_left()  # (column by column, the order it is rebuilt in)
        return [*self.remake.held(), *(row[column] for column in range(self.remake.arity) for row in rows)]

    def _arguments_left(self) -> list[tuple[VariableTracker, ...]]:
        produced = [tuple(item.items) for item in self.items[self.index:]] if self.kind is zip else []
        return [*produced, *self.remake.arguments_left()]


class Remake:
    """How a zip or map made in the trace is made again as itself where it outlives the frame:
    `zip(*columns)` or `map(fn, *columns)` over the arguments still to come, as torch._dynamo
    rebuilds its ZipVariable and MapVariable; a map's calls still to come are left to the rebuilt
    map, made when its consumer asks, as Python makes them. Only for arguments that are lists and
    tuples (their items are taken, unchanged, when the frame ends: nothing lazy runs early)."""

    def __init__(self, fn: VariableTracker | None, arguments: Iterator[tuple[VariableTracker, ...]], arity: int):
        self.fn = fn                    # map's function; None for zip
        self.arity = arity              # how many iterables it takes
        self._arguments = arguments     # the argument tuples, shared with the iterator's `pending`
        self._left: list[tuple[VariableTracker, ...]] | None = None

    def held(self) -> list[VariableTracker]:
        return [self.fn] if self.fn is not None else []

    def arguments_left(self) -> list[tuple[VariableTracker, ...]]:
        if self._left is None:  # (the trace is over: nothing takes from them any more)
            self._left = [tuple(arguments) for arguments in self._arguments]
        return self._left


"""copy.copy and copy.deepcopy of user objects by copy's protocol, where the corpus cannot hold the
case: torch._dynamo 2.13 copies these otherwise than eager (its polyfill of object.__reduce_ex__
always gives `obj.__dict__` as the state: it ignores a class's own `__getstate__` and `__reduce__`,
and on an instance with `__slots__` and no `__dict__` it raises, so it runs the whole frame as
Python), and the corpus needs torch._dynamo's graphs to agree with eager. Here pyframe is compared
with eager alone: the results, what is left in the objects passed in, the graphs and the breaks.

The protocol (CPython's copy module and typeobject.c): `cls.__copy__` if the class has one; else
`obj.__reduce_ex__(4)`, whose object's version gives `(copyreg.__newobj__, (cls, *newargs), state,
None, None)`, the state being `obj.__getstate__()` (object's: the instance dict, or `(dict, slots)`),
and copy._reconstruct makes `cls.__new__(cls, *newargs)` and gives it the state through
`__setstate__` if the copy has one, else `__dict__.update` and setattr for the slots.
"""
from __future__ import annotations

import copy
from typing import Any, Callable

import torch

import pyframe
from pyframe.debug.compare import CountingBackend, assert_same_result


class Pair:
    """Slots only, one of them private (its name mangled), no instance dict."""

    __slots__ = ("first", "second", "__hidden")

    def __init__(self, first):
        self.first = first
        self.__hidden = 2

    def hidden(self):
        return self.__hidden


class Tagged(Pair):
    """A subclass without __slots__: an instance dict as well as its base's slots."""

    def __init__(self, first):
        super().__init__(first)
        self.tag = "t"


class Cached:
    """Its own __getstate__ (a cache dropped) and __setstate__ (a flag set)."""

    def __init__(self):
        self.k = 2
        self.cache = [1, 2, 3]

    def __getstate__(self):
        state = dict(self.__dict__)
        del state["cache"]
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.cache = []
        self.restored = True


class Doubling:
    """Its own __reduce__: copied by calling the class with another argument."""

    def __init__(self, k):
        self.k = k

    def __reduce__(self):
        return (Doubling, (self.k * 2,))


class Versioned:
    """Its own __reduce_ex__, which receives the protocol number copy asks for (4)."""

    def __init__(self, k):
        self.k = k

    def __reduce_ex__(self, protocol):
        return (Versioned, (self.k + protocol,))


class Plain:
    def __init__(self):
        self.k = 3
        self.items = ["a"]


class WithDeepcopy:
    """Its own __deepcopy__, which takes copy's memo (a dict keyed by ids)."""

    def __init__(self):
        self.k = 1

    def __deepcopy__(self, memo):
        fresh = WithDeepcopy()
        fresh.k = self.k + 10
        return fresh


def _state(value: Any) -> Any:
    """What an object holds: its instance dict and the slots that are set."""
    if isinstance(value, (tuple, list)):
        return type(value)(_state(v) for v in value)
    if not hasattr(value, "__dict__") and not hasattr(type(value), "__slots__") or isinstance(value, torch.Tensor):
        return value
    held = dict(getattr(value, "__dict__", {}))
    for klass in type(value).__mro__:
        for name in vars(klass).get("__slots__", ()):
            name = f"_{klass.__name__}{name}" if name.startswith("__") else name
            if hasattr(value, name):
                held[name] = getattr(value, name)
    return type(value).__name__, {k: _state(v) for k, v in held.items()}


def _check(fn: Callable, make_args: Callable[[], tuple], graphs: int = 1, breaks: int = 0) -> None:
    """fn under pyframe gives eager's result (first call and cache hit), leaves its arguments as
    eager leaves them, in `graphs` graphs with `breaks` breaks."""
    x = torch.randn(4)
    eager_args, ours_args = make_args(), make_args()
    expected = fn(x, *eager_args)
    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(fn)
    assert_same_result(_state(compiled(x, *ours_args)), _state(expected))
    assert_same_result(_state(ours_args), _state(eager_args))
    assert_same_result(_state(compiled(x, *make_args())), _state(expected))
    assert len(backend.graphs) == graphs
    assert len(pyframe.explain(fn)(x, *make_args()).break_reasons) == breaks


def test_copy_of_objects_with_slots():
    """The slots that hold a value are set on the copy (a private one by its mangled name), one
    never set stays unset; an instance dict beside the slots is copied too."""
    def fn(x, pair, tagged):
        twin = copy.copy(pair)
        twin.first = 10
        made = copy.copy(Pair(4))
        both = copy.copy(tagged)
        both.tag = "copied"
        return (x * twin.first + pair.first + twin.hidden() + made.first + both.first, hasattr(twin, "second"),
                both.tag, tagged.tag, both.hidden())

    _check(fn, lambda: (Pair(3), Tagged(5)))


def test_deepcopy_of_objects_with_slots():
    def fn(x, tagged):
        tagged.second = [1]
        twin = copy.deepcopy(tagged)
        twin.second.append(2)
        return x * twin.first, twin.second, tagged.second, twin.hidden()

    _check(fn, lambda: (Tagged(5),))


def test_copy_through_getstate_and_setstate():
    """The class's __getstate__ gives the state and its __setstate__ takes it (both inlined)."""
    def fn(x, cached):
        shallow, deep = copy.copy(cached), copy.deepcopy(cached)
        return x * (shallow.k + deep.k), shallow.cache, deep.restored, shallow, deep, cached.cache

    _check(fn, lambda: (Cached(),))


def test_copy_through_the_class_reduce():
    """A class's __reduce__ (object's __reduce_ex__ calls it) and its own __reduce_ex__ (given 4)."""
    def fn(x, doubling, versioned):
        a, b = copy.copy(doubling), copy.deepcopy(doubling)
        c = copy.copy(versioned)
        return x * (a.k + b.k + c.k), a, c

    _check(fn, lambda: (Doubling(3), Versioned(1)))


def test_object_reduce_called_directly():
    """object's __reduce_ex__(4) and __getstate__ as a program calls them: the reduce tuple, its
    state the instance dict itself."""
    def fn(x, plain, pair):
        rv = plain.__reduce_ex__(4)
        return x + 1, rv[0] is copyreg_newobj, rv[1], rv[2] is plain.__dict__, object.__getstate__(pair)

    import copyreg
    copyreg_newobj = copyreg.__newobj__
    _check(fn, lambda: (Plain(), Pair(1)))

    def returned(x, plain):
        return x + 1, plain.__reduce_ex__(4)

    plain = Plain()
    rv = pyframe.optimize(CountingBackend())(returned)(torch.randn(2), plain)[1]
    assert rv == returned(torch.randn(2), plain)[1] and rv[2] is plain.__dict__  # (the dict itself, not a copy)


def test_copy_shares_the_values_and_changes_through_them_reach_the_original():
    """A shallow copy holds the original's values: a list appended to through the copy is the
    original's list, changed after the graph as eager changes it."""
    def fn(x, plain):
        plain.k = 7  # (a store the trace made before the copy: the copy sees it)
        twin = copy.copy(plain)
        twin.items.append("b")
        twin.k = 1
        return x * twin.k + plain.k, twin.items is plain.items

    _check(fn, lambda: (Plain(),))


def test_a_class_changed_after_compiling_is_copied_the_new_way():
    """What the protocol asked of the class is guarded: a __copy__ or __getstate__ added to the
    class afterwards is used by the next call, as eager uses it."""
    class Box:
        def __init__(self):
            self.k = 2

    def fn(x, box):
        twin = copy.copy(box)
        return x * twin.k, vars(twin)

    compiled = pyframe.optimize(CountingBackend())(fn)
    x = torch.randn(3)
    assert compiled(x, Box())[1] == {"k": 2}
    Box.__getstate__ = lambda self: {"k": 5}
    assert compiled(x, Box())[1] == fn(x, Box())[1] == {"k": 5}
    Box.__copy__ = lambda self: self
    box = Box()
    assert compiled(x, box)[1] is fn(x, box)[1] is vars(box)


def test_deepcopy_through_a_class_deepcopy():
    """A class's __deepcopy__ is what copy.deepcopy calls, given a new memo dict; met inside another
    object being copied, it would be given copy's memo, a dict keyed by ids that objects made while
    tracing do not have: the graph breaks there, and the copy is eager's."""
    def top(x, obj):
        twin = copy.deepcopy(obj)
        return x * twin.k + obj.k

    def nested(x, obj):
        holder = Plain()
        holder.inner = obj
        twin = copy.deepcopy(holder)
        return x * twin.inner.k + obj.k, twin.inner.k

    _check(top, lambda: (WithDeepcopy(),))
    _check(nested, lambda: (WithDeepcopy(),), graphs=1, breaks=1)
    reasons = pyframe.explain(nested)(torch.randn(4), WithDeepcopy()).break_reasons
    assert "__deepcopy__" in reasons[0].reason

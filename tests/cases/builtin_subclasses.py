"""Corpus: user classes deriving from set, frozenset, list, tuple, dict, collections.UserDict, int,
float and str.

Each instance is made in the frame or passed in; the programs use the base type's methods and
operators, methods the subclass overrides (inlined), `isinstance`, and `super()` calls into the base.
All of them are one graph in torch._dynamo.
"""

import collections

import torch

from pyframe.debug.cases import case


class _TagSet(set):
    """A set that counts how many tags were added through `tag`."""

    def tag(self, *names):
        for name in names:
            self.add(name)
        return len(self)


class _Frozen(frozenset):
    def weight(self):
        return len(self) * 2


class _Stack(list):
    def push(self, item):
        self.append(item)
        return self

    def top(self):
        return self[-1]


class _Logged(list):
    def append(self, item):
        super().append(item * 2)


class _Coords(tuple):
    def norm1(self):
        return sum(abs(v) for v in self)


class _Defaulting(dict):
    def __missing__(self, key):
        return key * 10


class _Registry(dict):
    def __setitem__(self, key, value):
        super().__setitem__(key.lower(), value)

    def total(self):
        return sum(self.values())


class _Index(int):
    def next(self):
        return _Index(self + 1)


class _Tag(str):
    def shout(self):
        return self.upper() + "!"

    def doubled(self):
        return _Tag(super().__add__(self))


class _Store(collections.UserDict):
    def __setitem__(self, key, value):
        super().__setitem__(key, value + 1)


@case(inputs=lambda: torch.randn(5))
def set_subclass_made_in_frame(x):
    s = _TagSet(["a"])
    n = s.tag("b", "c", "a")
    both = s | {"d"}
    return x * n + len(both), isinstance(s, set), "b" in s, sorted(s & {"a", "c", "z"})


@case(inputs=lambda: torch.randn(5))
def frozenset_subclass_method_and_algebra(x):
    f = _Frozen({1, 2, 3})
    g = f - {2}
    return x + f.weight() + len(g) + (3 in f), isinstance(f, frozenset), f >= {1}


@case(inputs=lambda: torch.randn(5))
def list_subclass_methods_and_indexing(x):
    st = _Stack()
    st.push(x).push(x + 1).push(x * 2)
    st.extend([x - 1])
    first = st.pop(0)
    return st.top() + first + st[1] + len(st), isinstance(st, list)


@case(inputs=lambda: torch.randn(5))
def list_subclass_override_calls_super(x):
    items = _Logged()
    items.append(x)
    items.append(x + 1)
    return sum(items), len(items)


@case(inputs=lambda: (_Stack([torch.randn(5), torch.randn(5)]),))
def list_subclass_passed_in(st):
    return st.top() * 2 + st[0], len(st), type(st).__name__


@case(inputs=lambda: torch.randn(5))
def tuple_subclass_made_in_frame(x):
    c = _Coords((1, -2, 3))
    return x * c.norm1() + c[0] + len(c), isinstance(c, tuple), c + (4,)


@case(inputs=lambda: torch.randn(5))
def dict_subclass_missing(x):
    d = _Defaulting(a=1)
    return x + d["a"] + d[3], "b" in d, len(d)


@case(inputs=lambda: torch.randn(5))
def dict_subclass_setitem_override(x):
    r = _Registry()
    r["A"] = x
    r["b"] = x * 2
    return r.total() + r["a"], sorted(r.keys()), isinstance(r, dict)


@case(inputs=lambda: torch.randn(5))
def userdict_subclass(x):
    store = _Store()
    store["k"] = 1
    store.update({"j": 2})
    return x * store["k"] + store["j"], len(store), "k" in store, sorted(store)


@case(inputs=lambda: (torch.randn(5), _TagSet({"x", "y"})))
def set_subclass_passed_in(x, tags):
    extra = tags | {"z"}
    return x + len(extra) + ("x" in tags), tags.issubset({"x", "y", "q"})


@case(inputs=lambda: torch.randn(6))
def int_subclass_made_in_frame(x):
    """An int subclass's own method makes another instance; the base's operators give plain ints;
    torch reads the value as an int (a size, a slice bound), and the instance leaves the frame."""
    i = _Index(2).next()
    j = i * 2
    return x[:i].sum() + torch.ones(i).sum() * j + (i == 3), int(i), type(i) is _Index, type(j) is int


_START = _Index(4)


@case(inputs=lambda: torch.randn(4))
def int_subclass_read_from_a_global(x):
    """An instance read from the frame: guarded by type and value."""
    i = _START
    return x * i.next() + (i > 3) + isinstance(i, int)


_NAME = _Tag("ab")


@case(inputs=lambda: torch.randn(4))
def str_subclass_methods_and_formatting(x):
    """A str subclass: its methods, str's methods (plain strs), super() into str, iteration,
    indexing and formatting, as the base value."""
    t, u = _NAME, _Tag("xyz")
    chars = [c for c in u]
    text = f"{u}-{_Index(3)}"
    return (x * len(t.shout()) + t.count("a") + len(chars) + (u[0] == "x") + len(text),
            str(t.doubled()), type(t.doubled()).__name__, str(u), type(t.upper()) is str)


class _Vector(tuple):
    def __new__(cls, *coords):
        return super().__new__(cls, coords)

    def dot(self, other):
        return sum(a * b for a, b in zip(self, other))


@case(inputs=lambda: torch.randn(4))
def tuple_subclass_with_its_own_new(x):
    """A tuple subclass whose __new__ (inlined) calls the base's through super()."""
    v = _Vector(1, 2, 3)
    return x * v.dot(_Vector(1, 1, 1)) + len(v), isinstance(v, tuple)


class _Slot(int):
    def next(self):
        return _Slot(self + 1)


@case(inputs=lambda: torch.randn(4))
def int_subclass_instances_as_dict_keys(x):
    """Instances of an int subclass (made in the frame) as keys of a dict and a set: equal to
    and hashing as their values, so a plain int finds them; the dict keeps the instances."""
    first = _Slot(1)
    table = {first: x, first.next(): x * 2, 5: x * 3}
    seen = {first, 1, _Slot(2)}
    out = table[2] + table[_Slot(5)]
    for key in table:
        out = out + table[key] * key
    return out, len(seen), [type(k).__name__ for k in table]


class _History(list):
    def record(self, value):
        self.append(value)
        return len(self)


@case(inputs=lambda: (torch.randn(4), _History([1.0, 2.0])))
def list_subclass_passed_in_and_changed(x, history):
    """A list subclass's instance passed in, changed through its own method and list's (append,
    item store, pop, +=): its items are put back after the graph (list.__setitem__ over a slice)."""
    n = history.record(x)
    history[0] = 10.0
    history.pop(1)
    history += [3.0]
    return x * n + history[1], len(history), history[0]


@case(inputs=lambda: torch.randn(4))
def item_assignment_to_a_tuple_subclass_raises(x):
    """`t[0] = v` on a tuple subclass's instance raises TypeError (the type has no __setitem__),
    caught in the frame: raised in the trace, with Python's message."""
    pair = _Vector(1, 2)
    try:
        pair[0] = 5
    except TypeError as e:
        return x * pair[0] + len(str(e))
    return x

"""Corpus: builtin methods reached as descriptors.

`super().m(...)`, `Base.m(self, ...)` and `type(self).m(self, ...)` where `m` is a builtin base's
own slot wrapper or method descriptor (`dict.__setitem__`, `list.append`, `set.add`,
`tuple.__getitem__`...), on instances of builtin subclasses made in the frame and read from it, and
through mixins between the subclass and the base; the same unbound methods called on plain builtin
values (`dict.__setitem__(d, k, v)`, `str.join(",", parts)`, `map(str.upper, names)`), and a
method-wrapper of a plain value. One graph in torch._dynamo (the programs torch._dynamo does not
capture in one graph are in tests/test_builtin_descriptors.py).
"""

import collections

import torch

from pyframe.debug.cases import case


# -- dict and OrderedDict subclasses ---------------------------------------------------------------

class _Doubling(dict):
    def __setitem__(self, key, value):
        dict.__setitem__(self, key, value * 2)

    def read(self, key):
        return dict.__getitem__(self, key) + dict.get(self, "missing", 0) + dict.__contains__(self, key)


class _UpperMixin:
    def __setitem__(self, key, value):
        super().__setitem__(key.upper(), value)

    def __getitem__(self, key):
        return super().__getitem__(key.upper())


class _MixedDict(_UpperMixin, dict):
    pass


@case(inputs=lambda: torch.randn(4))
def dict_subclass_base_methods_called_on_the_class(x):
    d = _Doubling()
    d["a"] = x
    d["b"] = x + 1
    return d.read("a") + type(d).__getitem__(d, "b"), len(d), dict.keys(d)


@case(inputs=lambda: (torch.randn(4), _Doubling(a=torch.randn(4))))
def dict_subclass_from_the_frame_base_methods(x, d):
    d["b"] = x
    return d.read("b") + dict.__getitem__(d, "a") + type(d).__getitem__(d, "a"), sorted(d)


@case(inputs=lambda: torch.randn(4))
def dict_subclass_super_through_a_mixin(x):
    d = _MixedDict()
    d["a"] = x
    d["b"] = x * 3
    return d["a"] + d["B"], sorted(d)


@case(inputs=lambda: (torch.randn(4), _MixedDict(A=torch.randn(4))))
def dict_subclass_from_the_frame_super_through_a_mixin(x, d):
    d["c"] = x
    return d["a"] * d["c"], sorted(d)


class _Od(collections.OrderedDict):
    def __getitem__(self, key):
        return collections.OrderedDict.__getitem__(self, key) * 2

    def put(self, key, value):
        super().__setitem__(key, value)


@case(inputs=lambda: (torch.randn(4), _Od(a=torch.randn(4), b=torch.randn(4))))
def ordered_dict_subclass_from_the_frame(x, o):
    o.put("c", x)
    return o["a"] + type(o).__getitem__(o, "c") + collections.OrderedDict.__getitem__(o, "b"), list(o)


class _Reg(dict):
    def __setitem__(self, key, value):
        setter = super().__setitem__
        setter(key, value)
        getattr(super(), "__setitem__")(key + "_copy", value)


@case(inputs=lambda: torch.randn(4))
def super_method_held_in_a_local_and_read_by_getattr(x):
    r = _Reg()
    r["a"] = x
    return r["a"] + r["a_copy"], sorted(r)


# -- list, tuple, set and frozenset subclasses -----------------------------------------------------

class _CountingMixin:
    def append(self, item):
        super().append(item + 1)


class _Counted(_CountingMixin, list):
    def size(self):
        return super().__len__()


class _Pair(tuple):
    def second(self):
        return tuple.__getitem__(self, 1) + super().__getitem__(0)

    def joined(self, other):
        return super().__add__(other)


class _Names(set):
    def add(self, name):
        set.add(self, name.lower())
        return super().__contains__(name.lower())


class _Frozen(frozenset):
    def has(self, item):
        return frozenset.__contains__(self, item) or super().__contains__(item * 10)


@case(inputs=lambda: (torch.randn(4), _Counted([torch.randn(4)])))
def list_subclass_from_the_frame_super_through_a_mixin(x, items):
    items.append(x)
    return items[0] + items[-1] + items.size(), len(items)


@case(inputs=lambda: (torch.randn(4), _Pair((2, 3))))
def tuple_subclass_from_the_frame_base_methods(x, p):
    return x * p.second() + tuple.__getitem__(p, 0), p.joined((4,))


@case(inputs=lambda: torch.randn(4))
def set_subclass_base_methods(x):
    s = _Names()
    found = s.add("A")
    set.add(s, "b")
    return x * len(s) + found + set.__contains__(s, "a"), sorted(set.union(s, {"z"}))


@case(inputs=lambda: (torch.randn(4), _Frozen({1, 2})))
def frozenset_subclass_from_the_frame_base_methods(x, f):
    g = _Frozen({3})
    return x * (f.has(1) + g.has(3) + f.has(0)) + frozenset.__len__(f), sorted(frozenset.union(f, g))


class _Tags(set):
    def has(self, tag):
        return set.__contains__(self, tag) and super().__len__() > 1


@case(inputs=lambda: (torch.randn(4), _Tags({"a", "b"})))
def set_subclass_from_the_frame(x, tags):
    return x * tags.has("a") + len(set.union(tags, {"c"})) + set.__len__(tags)


# -- plain builtin values --------------------------------------------------------------------------

@case(inputs=lambda: (torch.randn(4), {"w": torch.randn(4)}))
def dict_methods_on_a_dict_from_the_frame(x, d):
    y = x + 1
    dict.__setitem__(d, "y", y)
    return dict.__getitem__(d, "w") * dict.get(d, "y"), dict.__contains__(d, "y"), sorted(dict.keys(d))


@case(inputs=lambda: torch.randn(4))
def ordered_dict_methods_on_an_ordered_dict(x):
    o = collections.OrderedDict(a=x)
    collections.OrderedDict.__setitem__(o, "b", x * 2)
    collections.OrderedDict.move_to_end(o, "a")
    return o["b"] + collections.OrderedDict.__getitem__(o, "a"), list(o)


@case(inputs=lambda: torch.randn(4))
def tuple_and_set_methods(x):
    t = (x, x + 1)
    s = {1, 2}
    set.add(s, 3)
    set.discard(s, 1)
    f = frozenset({4})
    return (tuple.__getitem__(t, 1) * tuple.__len__(t), tuple.count((1, 5, 5), 5), len(tuple.__add__(t, (x,))),
            sorted(set.union(s, f)), set.__contains__(s, 3), frozenset.__contains__(f, 4),
            sorted(frozenset.union(f, {5})))


@case(inputs=lambda: torch.randn(4))
def str_methods_on_constants(x):
    parts = ["a", "bc", "d"]
    joined = str.join(",", parts)
    text = str.__add__(joined, "!") + str.upper("x") + str.format("{}-{}", 1, 2)
    upper = list(map(str.upper, parts))
    by_length = sorted(parts, key=str.__len__)
    return x * len(text) + str.count(joined, ","), text, upper, by_length, str.startswith(joined, "a")


@case(inputs=lambda: torch.randn(4))
def method_wrappers_of_plain_values(x):
    d = {}
    setitem = d.__setitem__
    setitem("a", x)
    add = (3).__add__
    upper = "ab".upper
    push = [].append
    push(x)
    return d["a"] * add(4) + len(upper()), d.__getitem__("a")

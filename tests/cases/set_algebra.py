"""Corpus: sets and dicts with any keys.

Set algebra between sets, frozensets, dict views and user sets (and the in-place forms and
comparisons); `dict | dict`, `|=`, `==` between dicts and views; keys that are tensors, modules,
functions, classes, enum members or plain objects, which hash by identity as Python hashes them;
reads of a class's `__dict__` (a mappingproxy); torch.utils._pytree flatten and unflatten. All of
them are one graph in torch._dynamo.
"""

import collections
import dataclasses
import enum
import types

import torch
import torch.utils._pytree as pytree

from pyframe.debug.cases import case


class _Color(enum.Enum):
    RED = 1
    GREEN = 2


class _Marker:
    pass


_MARK_A, _MARK_B = _Marker(), _Marker()


class _Config:
    scale = 3
    name = "cfg"

    def method(self):
        return 1


def _double(t):
    return t * 2


def _triple(t):
    return t * 3


@case(inputs=lambda: torch.randn(5))
def set_operators(x):
    a, b = {1, 2, 3}, {3, 4}
    f = frozenset({2, 3, 9})
    r = (a | b, a & b, a - b, a ^ b, a | f, f & a, f - a)
    return x + sum(len(s) for s in r), sorted(a ^ f), type(f | a).__name__


@case(inputs=lambda: torch.randn(5))
def set_inplace_operators(x):
    s = {1, 2}
    s |= {3, 4}
    s &= {1, 3, 4, 7}
    s -= {4}
    s ^= {5, 1}
    return x * len(s), sorted(s)


@case(inputs=lambda: torch.randn(5))
def set_comparisons(x):
    a, b = {1, 2}, {1, 2, 3}
    facts = (a < b, a <= b, b > a, a >= a, a == {2, 1}, a != b, frozenset(a) == a, a.isdisjoint({7}))
    return x + sum(facts), facts


@case(inputs=lambda: torch.randn(5))
def dict_views_set_algebra(x):
    d = {"a": x, "b": x + 1, "c": x * 2}
    e = {"b": 0, "d": 1}
    common = d.keys() & e.keys()
    every = d.keys() | e.keys()
    only = d.keys() - {"c"}
    return sum(d[k] for k in sorted(common)) + len(every), sorted(only), d.keys() ^ e.keys() == {"a", "c", "d"}


@case(inputs=lambda: torch.randn(5))
def dict_merge_operators(x):
    base = {"a": x, "b": 1}
    over = {"b": x + 1, "c": 2}
    merged = base | over
    base |= {"d": x * 3}
    base |= [("e", 5)]
    return merged["b"] + base["d"] + merged["c"] + base["e"], list(merged), list(base)


@case(inputs=lambda: torch.randn(5))
def dict_equality(x):
    d1 = {"a": 1, "b": 2}
    d2 = dict(b=2, a=1)
    return x + (d1 == d2) + (d1 != {"a": 1}), d1.keys() == d2.keys(), d1.items() == d2.items()


@case(inputs=lambda: torch.randn(5))
def set_of_tensors(x):
    y = x + 1
    s = {x, y}
    s.add(x)
    return sum(s) if len(s) == 2 else x, x in s, (x * 2) in s


@case(inputs=lambda: torch.randn(5))
def dict_keyed_by_functions_and_classes(x):
    table = {_double: "d", _triple: "t"}
    kinds = {int: 1, _Config: 2}
    out = x
    for fn, tag in table.items():
        out = out + fn(x) + len(tag)
    return out + kinds[_Config], _double in table


@case(inputs=lambda: (torch.randn(5), torch.randn(5)))
def tuple_keys_holding_tensors(x, y):
    """Tuples holding tensors as keys of dicts and sets: equal when their items are (a tensor by its
    identity, a number by value: (1.0, x) finds (1, x)), whether x and y are one tensor guarded."""
    d = {(x, "a"): 1, (y, "a"): 2, (1, (x * 2, 3)): 4}
    d[(x, "a")] += 10
    s = {(x, 1), (x, 1), (y, 2)}
    found = ((1.0, x) in {(1, x): 0}) + ((y, 2) in s)
    return x * d[(x, "a")] + y * d[(y, "a")] + found, len(d), len(s)


@dataclasses.dataclass(frozen=True)
class _Slot:
    name: str
    index: int


@case(inputs=lambda: torch.randn(5))
def frozen_dataclass_keys(x):
    """Frozen dataclass instances as keys of a dict, a set and a Counter: equal (and hashing) by their
    fields, as the `__eq__` and `__hash__` dataclasses writes compare them."""
    d = {_Slot("a", 1): x, _Slot("b", 2): x * 2}
    seen = {_Slot("a", 1), _Slot("a", 1)}
    counts = collections.Counter([_Slot("a", 1), _Slot("a", 1), _Slot("b", 2)])
    return d[_Slot("b", 2)] + counts[_Slot("a", 1)], len(seen), _Slot("a", 1) in d


@case(inputs=lambda: torch.randn(5))
def dict_keyed_by_enum_and_objects(x):
    weights = {_Color.RED: 2.0, _Color.GREEN: 3.0}
    marks = {_MARK_A: x, _MARK_B: x + 1}
    seen = {_MARK_A, _Color.RED}
    return x * weights[_Color.GREEN] + marks[_MARK_B], _MARK_B in seen, _Color.RED in seen


@case(inputs=lambda: torch.randn(5))
def set_of_enum_members_algebra(x):
    on = {_Color.RED}
    all_colors = set(_Color)
    off = all_colors - on
    return x * len(off), [c.name for c in sorted(off, key=lambda c: c.value)]


@case(inputs=lambda: torch.randn(5))
def class_dict_reads(x):
    attrs = _Config.__dict__
    names = sorted(k for k in attrs if not k.startswith("__"))
    return x * attrs["scale"], names, "method" in attrs, attrs.get("missing", 0)


@case(inputs=lambda: torch.randn(5))
def pytree_flatten_unflatten(x):
    tree = {"a": [x, x + 1], "b": (x * 2, {"c": x - 1})}
    leaves, spec = pytree.tree_flatten(tree)
    doubled = pytree.tree_unflatten([leaf * 2 for leaf in leaves], spec)
    return doubled["b"][1]["c"] + doubled["a"][0], len(leaves), spec.num_leaves


@case(inputs=lambda: torch.randn(5))
def pytree_map(x):
    tree = [x, (x + 1, {"k": x * 2})]
    out = pytree.tree_map(lambda t: t.sin(), tree)
    return out[1][1]["k"] + out[0]


@case(inputs=lambda: (torch.randn(5), {"a": torch.randn(5), "b": torch.randn(5)}))
def dict_passed_in_merged_and_compared(x, d):
    merged = d | {"c": x}
    return merged["a"] + merged["c"], list(merged), d.keys() == {"a", "b"}


@case(inputs=lambda: torch.randn(5))
def ids_of_tensors_in_a_set(x):
    """id() of tensors the graph makes (known only as distinct from each other), gathered in a
    set. (id() of an input is a constant guarded by identity: tests/test_object_keys.py.)"""
    y = x * 2
    z = y
    s = {id(y), id(x.cos()), id(z)}
    return y * len(s)


@case(inputs=lambda: torch.randn(5))
def cache_keyed_by_id_of_tensors(x):
    """A dict keyed by id() of tensors, as a memo of computed values: a tensor seen twice is one
    key."""
    cache = {}
    y, w = x.sin(), x.cos()
    for t in (w, y, w, y):
        if id(t) not in cache:
            cache[id(t)] = t * 2
    return sum(cache.values()) + len(cache)


@case(inputs=lambda: torch.randn(5))
def ids_of_containers_made_in_the_frame_compared(x):
    """id() of lists made while tracing: equal for one list, different for two, in a set."""
    a, b = [1], [2]
    c = a
    seen = {id(a), id(b), id(c)}
    return x * len(seen) + (id(a) == id(c)) + (id(a) != id(b))


@case(inputs=lambda: torch.randn(4))
def mappingproxy_made_in_the_frame(x):
    """`types.MappingProxyType(d)` over a dict of the frame: a read-only live view (a store into d
    after it shows through), read by key, len, `in`, get, values() and iteration."""
    weights = {"a": 1.0}
    view = types.MappingProxyType(weights)
    weights["b"] = 3.0
    total = sum(view.values()) + len(view) + ("b" in view) + view.get("z", 0.5)
    return x * view["b"] + total, [k for k in view]


@case(inputs=lambda: torch.randn(4))
def isdisjoint_stops_at_the_first_common_item(x):
    """`s.isdisjoint(gen)` takes the generator's items one at a time and stops at the first one in
    s, as CPython does (it builds no set): the generator keeps the rest, and its side effects stop
    there too."""
    seen = []

    def items():
        for i in (1, 2, 3, 4):
            seen.append(i)
            yield i

    g = items()
    disjoint = {2, 7}.isdisjoint(g)
    return x * len(seen) + disjoint, list(g), frozenset({9}).isdisjoint(v * 3 for v in (1, 3))

"""Corpus: tuples, lists, dicts, sets, namedtuples and dataclasses built and used while tracing."""

import collections
import dataclasses
import itertools

import torch

from pyframe.debug.cases import case

_Pair = collections.namedtuple("_Pair", "first second")


@dataclasses.dataclass
class _Stats:
    mean: torch.Tensor
    std: torch.Tensor
    count: int = 1


@case(inputs=lambda: torch.randn(6))
def tuple_slicing_and_unpacking(x):
    parts = (x, x * 2, x * 3, x * 4)
    first, *middle, last = parts
    return first + sum(middle) + last + parts[1:3][0]


@case(inputs=lambda: torch.randn(6))
def list_methods(x):
    items = [x]
    items.append(x + 1)
    items.extend([x * 2, x * 3])
    items.insert(0, x - 1)
    last = items.pop()
    items.reverse()
    return torch.stack(items).sum(0) + last


@case(inputs=lambda: torch.randn(6))
def dict_methods(x):
    d = {"a": x + 1, "b": x * 2}
    v = d.pop("b") + d.get("a") + d.get("missing", 3)
    d.update({"c": x.relu()})
    d.setdefault("e", x - 1)
    return v + sum(d.values()) + len(d) + ("c" in d)


@case(inputs=lambda: torch.randn(6))
def dict_views_are_live(x):
    d = {"a": x + 1}
    keys, values, items = d.keys(), d.values(), d.items()
    d["b"] = x * 2  # added after the views were made: they see it
    total = sum(values) + sum(v for _, v in items)
    return total, "b" in keys, len(values), list(keys), keys == {"a": 0, "b": 1}.keys()


@case(inputs=lambda: torch.randn(6))
def dict_view_returned_then_dict_grows(x):
    d = {"a": x.sin()}
    view = d.values()
    d.update(b=x.cos())
    return view, len(d)


@case(inputs=lambda: torch.randn(6))
def ordered_dict(x):
    d = collections.OrderedDict()
    d["a"] = x
    d["b"] = x * 2
    return [k for k in d][0] == "a", sum(d.values())


@case(inputs=lambda: torch.randn(6))
def comprehensions(x):
    squares = [x * i for i in range(3)]
    table = {i: x + i for i in range(2)}
    evens = {i * 2 for i in range(4)}
    return sum(squares) + table[1] + max(evens)


@case(inputs=lambda: torch.randn(6))
def set_of_constants(x):
    seen = {1, 2, 2}
    seen.add(3)
    return x * len(seen) if 2 in seen else x


@case(inputs=lambda: torch.randn(6))
def namedtuple_built_and_read(x):
    p = _Pair(x.sin(), second=x.cos())
    a, b = p
    return p.first + b * 2 + p[1] + a


@case(inputs=lambda: torch.randn(6))
def dataclass_built_and_returned(x):
    stats = _Stats(x.mean(), x.std(), count=3)
    return (x - stats.mean) / stats.std * stats.count, stats


@case(inputs=lambda: (torch.randn(6), _Pair(torch.randn(6), 2.0)))
def namedtuple_argument(x, pair):
    first, scale = pair
    return x * scale + first + pair.first


@case(inputs=lambda: torch.randn(6))
def itertools_helpers(x):
    chained = list(itertools.chain([x], (x * 2,)))
    tail = list(itertools.islice([x, x + 1, x + 2], 1, None))
    pairs = list(itertools.product([x, x - 1], [1, 2]))
    return sum(chained) + tail[-1] + sum(a * b for a, b in pairs)


@case(inputs=lambda: torch.randn(6))
def list_slice_assignment(x):
    parts = [x, x, x]
    parts[1:] = [x * 3, x * 4]
    parts[0] = x - 1
    return torch.stack(parts)


@case(inputs=lambda: torch.randn(6))
def list_repetition_and_concat(x):
    return torch.stack([x] * 2 + [x + 1]).sum(0)


@case(inputs=lambda: {"w": torch.randn(6), "b": torch.randn(6)})
def dict_argument(params):
    return params["w"] * 2 + params.get("b") + len(params)


@case(inputs=lambda: [torch.randn(6), torch.randn(6), torch.randn(6)])
def list_argument_reversed_sorted(xs):
    order = sorted(range(len(xs)), reverse=True)
    return sum(xs[i] * i for i in order) + list(reversed(xs))[0]


@case(inputs=lambda: (torch.randn(6), torch.randn(6)))
def dict_update_from_pairs_copy_and_fromkeys(x, y):
    d = {"a": x, "b": y}
    d.update([("b", y + 1), ["c", x * 2]])
    d.update(zip("ab", [x + 3, y - 2]))
    snapshot = d.copy()
    d["a"] = x * 10  # the copy keeps the old value
    empty = dict.fromkeys(["p", "q"])
    ordered = collections.OrderedDict.fromkeys(("p", "q"), y)
    counts = collections.defaultdict.fromkeys("pq", 0)
    return d["a"] + snapshot["a"] + d["c"] + ordered["q"], empty["p"] is None, counts["q"], type(ordered) is dict

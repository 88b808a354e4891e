"""Corpus: tuples, lists, dicts, sets, namedtuples and dataclasses built and used while tracing."""

import collections
import copy
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


# -- dicts keyed by objects that hash by identity (tensors, modules, functions, classes) -------------


@case(inputs=lambda: torch.randn(2, 4))
class ParamKeyedStateDict(torch.nn.Module):
    """Optimizer-style state: one entry per parameter, keyed by the parameter itself."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.scale = torch.nn.Parameter(torch.ones(4))

    def forward(self, x):
        state = {p: torch.zeros_like(p) for p in self.parameters()}
        for p in self.parameters():
            state[p] = state[p] + p * 0.5
        y = self.fc(x) * self.scale
        return y + sum(s.sum() for s in state.values()), len(state), self.scale in state


@case(inputs=lambda: torch.randn(2, 4))
class ModuleKeyedMap(torch.nn.Module):
    """`{module: name}` and `{module: factor}` maps, looked up with the modules themselves."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
        self.b = torch.nn.ReLU()
        self.c = torch.nn.Linear(4, 4)

    def forward(self, x):
        names = {self.a: "a", self.b: "b", self.c: "c"}
        factors = {m: i + 1 for i, m in enumerate(self.children())}
        for m in (self.c, self.b, self.a):
            x = m(x) * factors[m] + len(names[m])
        return x, names.get(self.b), self.a in names, [names[m] for m in factors]


def _dispatch_int(x, v):
    return x * v


def _dispatch_float(x, v):
    return x + v


def _dispatch_tensor(x, v):
    return x * v.sum()


_DISPATCH = {int: _dispatch_int, float: _dispatch_float, torch.Tensor: _dispatch_tensor}


@case(inputs=lambda: (torch.randn(6), 3, 0.5, torch.randn(2)))
def type_keyed_dispatch_get(x, i, f, t):
    """A dispatch table keyed by types, as copy.deepcopy's: `table.get(type(v))`."""
    for v in (i, f, t, "skipped"):
        handler = _DISPATCH.get(type(v))
        if handler is not None:
            x = handler(x, v)
    return x, _DISPATCH.get(str, "none"), torch.Tensor in _DISPATCH, len(_DISPATCH)


def _double(x):
    return x * 2


def _negate(x):
    return -x


_FN_WEIGHTS = {_double: 0.5, _negate: -1.0}


@case(inputs=lambda: torch.randn(6))
def function_keyed_cache(x):
    """A cache keyed by functions (made in the frame), weighted by a global table keyed by functions."""
    cache = {}
    for fn in (_double, _negate, _double):
        if fn not in cache:
            cache[fn] = fn(x) * _FN_WEIGHTS[fn]
    return sum(cache.values()), len(cache), list(cache) == [_double, _negate]


@case(inputs=lambda: torch.randn(6))
def dict_literal_with_tensor_keys(x):
    """Tensor keys next to constant ones: a tensor input and a tensor the graph computes."""
    y = x.sin()
    d = {x: 1.0, y: 2.0, "bias": 3.0, 1: 4.0}
    total = sum(k * v for k, v in d.items() if isinstance(k, torch.Tensor))
    return total + d["bias"] + d[y] + d[True], len(d), x in d, (x + 0) in d, d.get(x.cos(), -1.0)


_P = torch.nn.Parameter(torch.ones(6))
_Q = torch.nn.Parameter(torch.full((6,), 2.0))
_PARAM_STATE = {_P: torch.zeros(6), _Q: torch.zeros(6)}


@case(inputs=lambda: torch.randn(6))
def global_param_keyed_state_mutated(x):
    """A global dict keyed by Parameters, updated in place by the frame (replayed after the graph)."""
    for p in (_P, _Q):
        _PARAM_STATE[p] = p * x
    last = _PARAM_STATE.pop(_Q)
    _PARAM_STATE[_Q] = last + 1  # back in, at the end: the keys are as they were
    return sum(_PARAM_STATE.values()), len(_PARAM_STATE), _Q in _PARAM_STATE


@case(inputs=lambda: torch.randn(6))
def returns_tensor_keyed_dict(x):
    """A dict keyed by a tensor input, a computed tensor and a string, returned: rebuilt after the graph."""
    y = x.cos()
    return {x: x.sin(), y: y * 2, "n": 2}, y


@case(inputs=lambda: torch.randn(2, 4))
class IterateParamKeyedDict(torch.nn.Module):
    """Iterating a parameter-keyed dict: its keys, values and items, in insertion order."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        grads = {p: p * 2 for p in self.parameters()}
        total = self.fc(x).sum()
        for p, g in grads.items():
            total = total + (p * g).sum()
        for p in grads:
            total = total - p.mean()
        shapes = [tuple(p.shape) for p in grads.keys()]
        return total, shapes, [g.shape for g in grads.values()]


@case(inputs=lambda: (torch.randn(6), torch.randn(6)))
def tensor_arguments_as_keys(x, y):
    """Two tensors passed in, as keys of one dict: whether they are one key is guarded (they alias
    or not), so new tensors at the next call compile nothing."""
    d = {x: 1.0}
    d[y] = 2.0
    return x * d[x] + y * d[y], len(d), d.get(x + 1, 0.0)


@case(inputs=lambda: (torch.randn(6), [1, 2], 3))
def deepcopy_dispatch_table(x, items, n):
    """copy.deepcopy's own dispatch dict (a global dict keyed by types), read with `.get` and `in`."""
    atomic = copy._deepcopy_dispatch.get(type(n))
    container = copy._deepcopy_dispatch.get(type(items), None)
    scale = n if atomic is copy._deepcopy_atomic else 1
    return x * scale, container is copy._deepcopy_list, type(x) in copy._deepcopy_dispatch, \
        copy._deepcopy_dispatch[type(None)] is atomic


@case(inputs=lambda: (torch.randn(3), _Pair(torch.randn(3), 2)))
def namedtuple_class_attributes_read_on_instances(x, pair):
    """`pair._fields` and `__match_args__` read on instances (an argument, one built in the frame),
    and `torch.max`'s structseq's `n_fields`: what their class says."""
    built = _Pair(x, 1)
    stats = x.max(0)
    return x * len(pair._fields) + built.__match_args__.index("second") + stats.n_fields, built._fields


@case(inputs=lambda: (torch.randn(3), _Pair(torch.randn(3), 2)))
def namedtuple_replace_and_asdict(x, pair):
    """`pair._replace(first=...)` (a new namedtuple of the same class) and `._asdict()`, on a
    namedtuple argument and on one built in the frame; a bad field name raises ValueError."""
    doubled = pair._replace(second=pair.second * 2)
    built = _Pair(x.sum(0), 1)._replace(first=x * doubled.second)
    try:
        pair._replace(third=1)
        bad = False
    except ValueError:
        bad = True
    fields = doubled._asdict()
    return built, doubled, fields["first"] + built.first, list(fields), bad


@case(inputs=lambda: torch.randn(6))
def list_remove_and_copy(x):
    """list.remove drops the first equal item (ValueError when there is none); list.copy is shallow."""
    items = [3, 1, 2, 1]
    items.remove(1)
    copied = items.copy()
    copied.append(9)
    try:
        items.remove(7)
    except ValueError:
        missing = True
    return x * sum(items) + len(copied), items, copied, missing


@case(inputs=lambda: (torch.randn(6), [torch.randn(6), 2]))
def list_remove_of_the_same_tensor(x, pair):
    """remove() of the very tensor an item holds finds it by identity, as CPython's compare does first."""
    t = pair[0]
    stack = [t, x]
    stack.remove(t)
    return stack[0] * len(stack)

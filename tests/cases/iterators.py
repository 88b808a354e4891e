"""Corpus: iterators as Python makes them (iter, next, zip, map, filter, enumerate, reversed,
itertools), lazy where Python is lazy; defaultdict; library helpers that ask whether they are traced."""

import collections
import itertools

import torch

from pyframe.debug.cases import case

COUNTS = collections.defaultdict(list)


@case(inputs=lambda: torch.randn(4))
def next_of_islice_and_reversed(x):
    parts = [x + 1, x * 2, x - 3]
    second = next(itertools.islice(parts, 1, None))
    last = next(iter(reversed(parts)))
    return second / last


@case(inputs=lambda: torch.randn(4))
def next_with_default_after_exhaustion(x):
    it = iter([x.sin()])
    first = next(it)
    rest = next(it, None)
    return first if rest is None else first + rest


@case(inputs=lambda: (torch.randn(4), torch.randn(4), torch.randn(4)))
def map_is_lazy_under_sum(a, b, c):
    """sum() pulls one mapped item at a time: add(x, 1) and the running sum interleave."""
    return sum(map(lambda t: t.cos() * 2, [a, b, c]))


@case(inputs=lambda: (torch.randn(4), torch.randn(4)))
def map_of_two_iterables(a, b):
    return torch.stack(list(map(torch.add, [a, b], [b, a])))


@case(inputs=lambda: torch.randn(4))
def filter_with_function_and_none(x):
    scales = list(filter(None, [0, 2, 0, 3]))
    odd = list(filter(lambda s: s % 2 == 1, range(6)))
    return x * sum(scales) + len(odd)


@case(inputs=lambda: (torch.randn(4), torch.randn(4)))
def zip_consumed_by_a_loop_then_exhausted(a, b):
    pairs = zip([a, b], [b.exp(), a.exp()])
    total = torch.zeros(4)
    for u, v in pairs:
        total = total + u * v
    for u, v in pairs:  # an iterator runs once
        total = total - 100
    return total


@case(inputs=lambda: torch.randn(4))
def enumerate_from_a_start_over_a_generator(x):
    out = x
    for i, t in enumerate((x * k for k in range(3)), 1):
        out = out + t * i
    return out


@case(inputs=lambda: torch.randn(4))
def iterator_type_checks(x):
    it = zip([1], [2])
    return x + 1 if isinstance(it, zip) and not isinstance(it, list) else x - 1


@case(inputs=lambda: torch.randn(4))
def defaultdict_made_in_the_frame(x):
    buckets = collections.defaultdict(list)
    for i, t in enumerate([x, x * 2, x * 3]):
        buckets[i % 2].append(t)
    counts = collections.defaultdict(int)
    counts["a"] += 2
    return torch.cat(buckets[0]) * counts["a"] + len(buckets[1]) + counts["missing"]


@case(inputs=lambda: torch.randn(4))
def defaultdict_global_mutated(x):
    COUNTS.clear()
    COUNTS["seen"].append(x + 1)
    return COUNTS["seen"][0] * len(COUNTS["other"])


@torch.jit.script_if_tracing
def _scripted_if_tracing(x):
    return x * 1.5


@case(inputs=lambda: torch.randn(4))
def jit_decorated_helpers_are_inlined(x):
    if torch.jit.is_scripting() or torch.jit.is_tracing():
        return x
    return _scripted_if_tracing(x) + 1


@case(inputs=lambda: torch.randn(4))
def function_names_are_constants(x):
    name = _scripted_if_tracing.__name__
    return x * len(name) if name.startswith("_scripted") and "iterators" in _scripted_if_tracing.__module__ else x


@case(inputs=lambda: torch.randn(10, 10))
def tensor_new_with_a_size(x):
    y = torch.ones(5, 8)
    z = x.new(y.size())
    w = x.new(2, 3)
    return z.shape == y.shape, w.shape, x.new([1.0, 2.0])


@case(inputs=lambda: (torch.randn(4), torch.randn(4)))
def itertools_combinatorics(a, b):
    out = a
    for x, y in itertools.combinations([a, b, a * 2], 2):
        out = out + x * y
    for x, y in itertools.permutations([a, b], 2):
        out = out - x / (y.abs() + 1)
    for x, y in itertools.pairwise([a, b, a]):
        out = out + (x - y)
    for x in itertools.chain.from_iterable([[a, b], (b,)]):
        out = out * 0.5 + x
    return out


# A zip or map over lists and tuples that outlives the frame is made again as itself over its
# arguments still to come (torch._dynamo's ZipVariable and MapVariable rebuild them so); a map's
# function still to run runs when the caller takes the items, as in Python.
@case(inputs=lambda: (torch.randn(4), torch.randn(4)))
def zip_returned_is_made_again_as_a_zip(a, b):
    return zip([a + b, b.sin()], (a.cos(), b * 2), ["first", "second"])


MAPPED = []


def _double_and_log(t):
    MAPPED.append(len(MAPPED))
    return t * 2


@case(inputs=lambda: torch.randn(4))
def map_returned_runs_its_function_when_consumed(x):
    return map(_double_and_log, [x + 1, x.exp()])


@case(inputs=lambda: (torch.randn(4), torch.randn(4)))
def partly_consumed_zip_and_map_returned(a, b):
    pairs = zip([a, b], [b + 1, a + 1])
    first = next(pairs)
    sums = map(torch.add, [a, b], [b, a * 3])
    second = next(sums)
    return first, pairs, second, sums

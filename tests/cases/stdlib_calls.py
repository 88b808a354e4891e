"""Corpus: standard-library code called by user code.

unittest's assertEqual, contextlib's context managers, itertools, functools, operator, collections'
Counter and ChainMap, copy, dataclasses and enum, each called as a user's program calls it. The
library's own globals and free variables are reached through the function that uses them. All of
them are one graph in torch._dynamo.
"""

import collections
import contextlib
import copy
import dataclasses
import enum
import functools
import itertools
import operator
import re
import typing
import unittest

import torch

from pyframe.debug.cases import case

_CHECKER = unittest.TestCase()


@dataclasses.dataclass
class _Settings:
    scale: float
    shift: int = 0
    tags: tuple = ()


class _Mode(enum.Enum):
    TRAIN = "train"
    EVAL = "eval"


class _Flag(enum.IntFlag):
    A = 1
    B = 2


@functools.lru_cache(maxsize=None)
def _table(n):
    return tuple(range(n))


@case(inputs=lambda: torch.randn(5))
def testcase_assert_equal(x):
    _CHECKER.assertEqual(x.shape, (5,))
    _CHECKER.assertTrue(x.dim() == 1)
    _CHECKER.assertIn(2, [1, 2])
    return x + 1


@case(inputs=lambda: torch.randn(5))
def contextlib_suppress_and_nullcontext(x):
    with contextlib.suppress(IndexError):
        [][1]
    with contextlib.nullcontext(x + 1) as y:
        z = y * 2
    return z


@contextlib.contextmanager
def _catching(log):
    try:
        yield len(log)
    except IndexError:
        log.append("caught")


class _Watching:
    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.seen = exc_type
        return False


@case(inputs=lambda: torch.randn(5))
def builtin_errors_inside_with_blocks(x):
    log = []
    with _catching(log):
        y = x * 2
        (1, 2)[5]
    watch = _Watching()
    try:
        with watch:
            {}["missing"]
    except KeyError as e:
        y = y + len(e.args)
    return y, log, watch.seen is KeyError


@case(inputs=lambda: torch.randn(5))
def contextlib_exit_stack(x):
    with contextlib.ExitStack() as stack:
        stack.callback(lambda: None)
        b = x + 1
    return b


@case(inputs=lambda: torch.randn(5))
def exit_stack_entering_a_context(x):
    """ExitStack.enter_context binds the context's __exit__ with types.MethodType: traced as the
    method it makes (the frame is not run as Python)."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(contextlib.suppress(ValueError))
        y = x * 2
    return y + 1


@case(inputs=lambda: torch.randn(5))
def itertools_accumulate_and_product(x):
    sums = list(itertools.accumulate([1, 2, 3, 4]))
    prods = list(itertools.accumulate([1, 2, 3], operator.mul))
    pairs = list(itertools.product([1, 2], "ab"))
    return x * sums[-1] + prods[-1] + len(pairs)


@case(inputs=lambda: torch.randn(5))
def itertools_starmap_compress_and_pairwise(x):
    """starmap over pairwise of tensors, compress, filterfalse: lazy itertools over tensors, each
    step traced through a Python version of the C function (as torch._dynamo's polyfills)."""
    sums = list(itertools.starmap(torch.add, itertools.pairwise([x, x + 1, x + 2])))
    kept = sum(itertools.compress([x, x * 2, x * 3], [1, 0, 1]))
    present = sum(itertools.filterfalse(lambda t: t is None, [x, None, x * 4]))
    return sums[0] + sums[1] + kept + present


@case(inputs=lambda: torch.randn(5))
def itertools_takewhile_dropwhile_count_cycle(x):
    """takewhile/dropwhile with a predicate, count() zipped with a list, cycle() cut by islice."""
    head = list(itertools.takewhile(lambda n: n < 2, [0, 1, 2, 3, 1]))
    rest = list(itertools.dropwhile(lambda n: n < 2, [0, 1, 2, 3, 1]))
    out = x * sum(head) + sum(rest)
    for i, t in zip(itertools.count(1, 2), [x, x * 2]):
        out = out + i * t
    return out + sum(itertools.islice(itertools.cycle([x, x - 1]), 5))


@case(inputs=lambda: torch.randn(5))
def lru_cache_applied_in_the_frame(x):
    """`@functools.lru_cache(maxsize=None)` on a nested function: the decorator lru_cache returns is
    made inside functools (a graph break calls it) and rebuilt with functools' globals."""
    @functools.lru_cache(maxsize=None)
    def table(n):
        return n * n

    return x * table(3)


@case(inputs=lambda: torch.randn(5))
def itertools_islice_with_steps(x):
    picked = list(itertools.islice(range(20), 2, 12, 3))
    tail = list(itertools.islice([x, x + 1, x + 2, x + 3], 1, None, 2))
    return x + sum(picked) + sum(tail), picked


def _shifted(x, n):
    for i in range(n):
        yield x + i


@case(inputs=lambda: torch.randn(5))
def itertools_islice_of_a_generator(x):
    every_other = list(itertools.islice(_shifted(x, 6), 1, None, 2))
    first = list(itertools.islice(_shifted(x, 6), 3))  # the generator is run only as far as needed
    return sum(every_other) + first[-1]


@case(inputs=lambda: torch.randn(5))
def itertools_groupby_and_running_totals_of_tensors(x):
    words = ["aa", "ab", "b", "bc", "c"]
    runs = [(k, len(list(g))) for k, g in itertools.groupby(words, key=lambda w: w[0])]
    totals = list(itertools.accumulate([x, x * 2, x * 3], initial=x))
    return totals[-1] * len(runs), runs, [(k, list(g)) for k, g in itertools.groupby([1, 1, 2, 3, 3])]


@case(inputs=lambda: torch.randn(5))
def functools_reduce_over_tensors(x):
    total = functools.reduce(operator.add, [x, x * 2, x * 3])
    prod = functools.reduce(lambda a, b: a * b, [1, 2, 3], 10)
    return total + prod


@case(inputs=lambda: torch.randn(5))
def functools_lru_cache_function(x):
    return x * len(_table(4)) + _table(3)[-1]


@case(inputs=lambda: torch.randn(5))
def operator_getters_and_methodcaller(x):
    s = _Settings(2.0, 1)
    get_scale = operator.attrgetter("scale")
    second = operator.itemgetter(1)
    pick = operator.itemgetter(0, 2)
    upper = operator.methodcaller("upper")
    return x * get_scale(s) + second([x, x + 1]), pick("abc"), upper("q")


@case(inputs=lambda: torch.randn(5))
def collections_counter(x):
    c = collections.Counter(["a", "b", "a", "c", "a"])
    c.update("bd")
    return x * c["a"] + c["z"] + c["b"], len(c)


@case(inputs=lambda: torch.randn(5))
def collections_chain_map(x):
    defaults = {"scale": 1, "shift": 0}
    user = {"scale": 3}
    cm = collections.ChainMap(user, defaults)
    return x * cm["scale"] + cm["shift"], len(cm), "shift" in cm


@case(inputs=lambda: torch.randn(5))
def copy_of_containers(x):
    cfg = {"a": [1, 2], "b": (3, 4)}
    deep = copy.deepcopy(cfg)
    deep["a"].append(9)
    return x + len(cfg["a"]) + deep["a"][-1], deep


@case(inputs=lambda: torch.randn(5))
def dataclasses_replace_and_asdict(x):
    s = _Settings(2.0, 1, ("a",))
    t = dataclasses.replace(s, shift=4)
    fields = dataclasses.asdict(t)
    return x * t.scale + fields["shift"], sorted(fields), dataclasses.astuple(s)


@case(inputs=lambda: torch.randn(5))
def enum_features(x):
    mode = _Mode("eval")
    both = _Flag.A | _Flag.B
    names = [m.name for m in _Mode]
    return x * (mode is _Mode.EVAL) + int(both) + len(_Mode), names, mode.value, _Flag.B in both




@case(inputs=lambda: torch.randn(5))
def deque_with_maxlen_above_its_length(x):
    """A maxlen larger than the items given keeps them all; only a push past it drops one."""
    d = collections.deque([1, 2, 3], maxlen=4)
    d.appendleft(0)
    d.append(4)
    return x * d[0] + d.popleft() + len(d), list(d)


@case(inputs=lambda: torch.randn(5))
def str_join_of_a_generator(x):
    """str.join takes all of a generator's items: a generator expression of strings."""
    parts = "Hello, World".lower().split(", ")
    joined = "-".join(p.upper() for p in parts)
    return x * len(joined), joined


@case(inputs=lambda: torch.randn(5))
def enum_members_mapping(x):
    """An enum class's __members__ (EnumType's property: a mappingproxy of name to member)."""
    members = _Mode.__members__
    weights = {m: float(i + 1) for i, m in enumerate(_Mode)}
    return sum(x * weights[m] for m in members.values()) + len(members), list(members), "EVAL" in members


@case(inputs=lambda: torch.randn(5))
def isinstance_with_typing_aliases(x):
    """isinstance() against typing.Sequence / typing.Mapping / typing.List (bare aliases): the
    collections.abc classes or builtins they stand for."""
    vals = [1, "a", [1], {"a": 1}, (2,)]
    seqs = sum(isinstance(v, typing.Sequence) for v in vals)
    maps = sum(isinstance(v, (typing.Mapping, typing.List)) for v in vals)
    return x * seqs + maps


@case(inputs=lambda: torch.randn(5))
def counter_arithmetic_and_elements(x):
    """Counter + and -, and elements() (a chain.from_iterable: a chain object)."""
    a, b = collections.Counter(a=3, b=1), collections.Counter(a=1, b=2)
    both, rest = a + b, a - b
    items = a.elements()
    return x * (both["a"] + both["b"] + rest["a"] + len(rest)) + len(list(items))


@case(inputs=lambda: torch.randn(4))
def namedtuple_class_made_in_the_frame(x):
    """collections.namedtuple called in the frame with constants: the class is made while tracing
    (it and its instances stay inside the frame); defaults, fields, indexing and `_make`."""
    Point = collections.namedtuple("Point", "a b c", defaults=[0])
    p = Point(1, 2)
    return x * (p.a + p.c + p[1]) + sum(p) + Point._make([4, 5, 6]).c + len(Point._fields)


@dataclasses.dataclass
class _Point:
    t: torch.Tensor
    k: int
    tags: list = dataclasses.field(default_factory=list)


@case(inputs=lambda: (torch.randn(4), _Point(torch.randn(4), 2)))
def shallow_copy_of_user_objects(x, given):
    """copy.copy of a dataclass instance made in the frame and of one passed in: a new instance
    holding the same attribute values (the list is shared), as copy._reconstruct makes it."""
    made = _Point(x * 2, 3)
    a, b = copy.copy(made), copy.copy(given)
    a.k = 5
    b.tags.append("seen")
    return made.t * made.k + a.t * a.k + b.t * b.k, len(given.tags), a.tags is made.tags


@case(inputs=lambda: torch.randn(4))
def endless_repeat_zipped_and_mapped(x):
    """itertools.repeat(obj) without a count, stopped by the zip and the map that consume it."""
    weighted = sum(a * b for a, b in zip([1.0, 2.0], itertools.repeat(x)))
    scaled = list(map(torch.mul, [x, x * 2], itertools.repeat(3)))
    return weighted + scaled[0] + scaled[1]


@case(inputs=lambda: (torch.randn(4), collections.deque([1.0, 2.0])))
def deque_passed_in_and_changed(x, window):
    """A collections.deque passed in, appended to at both ends and popped: its maxlen guarded, its
    items put back after the graph (clear, then extend). (With a maxlen, torch._dynamo 2.13 gives
    another result than eager here, so the corpus leaves it unbounded.)"""
    window.append(x.sum())
    window.append(4.0)
    window.appendleft(0.5)
    oldest = window.popleft()
    return x * oldest + window[-1], len(window), window.maxlen


_SEPARATORS = re.compile(r"[-_.]+")


@case(inputs=lambda: (torch.randn(3), "Layer_12.attn"))
def regular_expressions_on_constant_strings(x, name):
    """A library's name and key handling: re's functions and a module's compiled pattern on the
    frame's strings, folded while tracing (their Python code fills re's own cache)."""
    key = _SEPARATORS.sub("-", name).lower()
    m = re.match(r"(\w+)-(\d+)", key)
    parts = re.split(r"-", key)
    return x * int(m.group(2)) + len(parts), key, m.groups(), re.findall(r"\d", key), bool(re.search("attn", key))

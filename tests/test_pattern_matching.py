"""`match` statements traced with CPython 3.11's semantics (translator/ops_match.py): what makes a
sequence or a mapping, MATCH_KEYS's lookups, MATCH_CLASS's `__match_args__`, self-matching builtins
and missing attributes, the errors CPython raises, guards on what a match relied on, and clean
graph breaks where the translator cannot decide. The corpus (tests/cases/pattern_matching.py)
compares graphs with torch._dynamo; these tests pin down the semantics against eager."""
from __future__ import annotations

import collections
import collections.abc
import dataclasses

import pytest
import torch

import pyframe
from pyframe.debug.compare import CountingBackend, assert_same_result


def compiled_run(fn, *args):
    """fn(*args) under pyframe: its result (checked against eager), the backend and the explanation."""
    backend = CountingBackend()
    result = pyframe.optimize(backend)(fn)(*args)
    assert_same_result(result, fn(*args))
    return result, backend


def break_reasons(fn, *args) -> list[str]:
    return [r.reason for r in pyframe.explain(fn)(*args).break_reasons]


def kind(x, subject):
    match subject:
        case [_, _]:
            return x + 2
        case [*_]:
            return x + 1
        case {}:
            return x - 1
        case _:
            return x * 0


@pytest.mark.parametrize("subject, expected", [
    ((1, 2), 2), ([1, 2, 3], 1), (range(2), 2), (torch.Size([3]), 1), ("ab", 0), (b"ab", 0),
    (bytearray(b"ab"), 0), ({"a": 1}, -1), (collections.OrderedDict(a=1), -1),
    (collections.defaultdict(int), -1), (collections.namedtuple("P", "a b")(1, 2), 2), (3, 0),
], ids=lambda v: type(v).__name__)
def test_sequence_and_mapping_are_decided_by_the_type_flags(subject, expected):
    x = torch.ones(2)
    result, backend = compiled_run(kind, x, subject)
    torch.testing.assert_close(result, x + expected if expected else x * 0)
    assert len(backend.graphs) == 1
    assert break_reasons(kind, x, subject) == []


def test_a_tensor_is_neither_a_sequence_nor_a_mapping():
    x = torch.ones(2)
    result, backend = compiled_run(kind, x, torch.zeros(2))
    torch.testing.assert_close(result, x * 0)
    assert len(backend.graphs) == 1


def test_mapping_pattern_does_not_make_a_defaultdicts_missing_value():
    def fn(x, d):
        match d:
            case {"missing": _}:
                return x * 100
            case {"present": p, **rest}:
                return x + p, type(rest), rest
        return x

    d = collections.defaultdict(lambda: 5, present=7, other=1)
    result, backend = compiled_run(fn, torch.ones(2), d)
    assert result[1] is dict and result[2] == {"other": 1}
    assert dict(d) == {"present": 7, "other": 1}  # `get` was used: no value made for "missing"
    assert len(backend.graphs) == 1


class Keys:
    A = "k"
    B = "k"
    ONE = 1.0
    TRUE = True


def test_mapping_keys_compare_as_dict_keys_do():
    def fn(x, d):
        match d:
            case {Keys.ONE: a, Keys.TRUE: b}:  # (1.0 and True are one key: a duplicate)
                return x * a * b
        return x

    with pytest.raises(ValueError, match=r"mapping pattern checks duplicate key \(True\)"):
        fn(torch.ones(2), {1: 3.0, 2: 1.0})
    with pytest.raises(ValueError, match=r"mapping pattern checks duplicate key \(True\)"):
        pyframe.optimize(CountingBackend())(fn)(torch.ones(2), {1: 3.0, 2: 1.0})

    def one_key(x, d):
        match d:
            case {1.0: a}:  # finds the int key 1
                return x * a
        return x

    result, _ = compiled_run(one_key, torch.ones(2), {1: 3.0})
    torch.testing.assert_close(result, torch.full((2,), 3.0))


def test_duplicate_keys_raise_inside_the_frame():
    def fn(x, d):
        try:
            match d:
                case {Keys.A: _, Keys.B: _}:
                    return x * 100
        except ValueError:
            return x - 1
        return x

    result, backend = compiled_run(fn, torch.ones(2), {"k": 1, "j": 2})
    torch.testing.assert_close(result, torch.zeros(2))
    assert len(backend.graphs) == 1


def test_a_duplicate_after_a_missing_key_goes_unnoticed():
    def fn(x, d):
        match d:
            case {"missing": _, Keys.A: _, Keys.B: _}:
                return x * 100
        return x + 1

    compiled_run(fn, torch.ones(2), {"k": 1, "j": 2, "i": 3})


class Mapping(collections.abc.Mapping):
    def __init__(self, **items):
        self.items_ = items

    def __getitem__(self, key):
        return self.items_[key]

    def __len__(self):
        return len(self.items_)

    def __iter__(self):
        return iter(self.items_)


class Sequence(collections.abc.Sequence):
    def __init__(self, *items):
        self.items_ = list(items)

    def __getitem__(self, index):
        return self.items_[index]

    def __len__(self):
        return len(self.items_)


def test_user_mappings_and_sequences_are_traced_through_their_methods():
    def fn(x, m, s):
        match m:
            case {"scale": scale, "missing": _}:
                x = x * 100
            case {"scale": scale}:
                x = x * scale
        match s:
            case [first, *_, last]:
                x = x + first - last
        return x

    _, backend = compiled_run(fn, torch.ones(2), Mapping(scale=3.0), Sequence(1.0, 2.0, 5.0))
    assert len(backend.graphs) == 1
    assert break_reasons(fn, torch.ones(2), Mapping(scale=3.0), Sequence(1.0, 2.0, 5.0)) == []


@dataclasses.dataclass
class Point:
    x: object
    y: object


class Plain:
    def __init__(self, v):
        self.v = v


class Bad:
    __match_args__ = ["v"]

    def __init__(self, v):
        self.v = v


@pytest.mark.parametrize("pattern_fn, error", [
    ("too_many", r"Point\(\) accepts 2 positional sub-patterns \(3 given\)"),
    ("no_match_args", r"Plain\(\) accepts 0 positional sub-patterns \(1 given\)"),
    ("not_a_tuple", r"Bad.__match_args__ must be a tuple \(got list\)"),
    ("repeated", r"Point\(\) got multiple sub-patterns for attribute 'x'"),
    ("not_a_type", r"called match pattern must be a type"),
])
def test_class_pattern_errors_are_cpythons(pattern_fn, error):
    def too_many(x, p):
        match p:
            case Point(a, b, c):
                return x
        return x * 2

    def no_match_args(x, p):
        match p:
            case Plain(v):
                return x * v
        return x * 2

    def not_a_tuple(x, p):
        match p:
            case Bad(v):
                return x * v
        return x * 2

    def repeated(x, p):
        match p:
            case Point(a, x=b):
                return x * a
        return x * 2

    def not_a_type(x, p):
        match p:
            case Keys.A():
                return x
        return x * 2

    fn = locals()[pattern_fn]
    subject = {"no_match_args": Plain(2.0), "not_a_tuple": Bad(2.0)}.get(pattern_fn, Point(1.0, 2.0))
    with pytest.raises(TypeError, match=error):
        fn(torch.ones(2), subject)
    with pytest.raises(TypeError, match=error):
        pyframe.optimize(CountingBackend())(fn)(torch.ones(2), subject)


class MyInt(int):
    pass


def test_builtin_types_match_their_one_positional_sub_pattern_against_the_subject():
    def fn(x, items):
        out = []
        for item in items:
            match item:
                case bool(b):  # (before int: True is an int too)
                    out.append(x * 0 if b else x)
                case MyInt(n):
                    out.append(x * 10 if n is item else x)
                case int(n) | float(n):
                    out.append(x * n)
                case str(s) if s:
                    out.append(x + len(s))
                case tuple((a, b)):
                    out.append(x * a + b)
        return out

    _, backend = compiled_run(fn, torch.ones(2), [True, MyInt(3), 4, 0.5, "abc", "", (2, 3)])
    assert len(backend.graphs) == 1


class WithGetattr:
    def __getattr__(self, name):
        if name == "w":
            return 2.0
        raise AttributeError(name)


class WithProperty:
    @property
    def p(self):
        raise AttributeError("p")


def test_a_missing_attribute_fails_the_match():
    def fn(x, obj, dyn, prop):
        made = Plain(3.0)
        match made:
            case Plain(z=_):
                x = x * 100
            case Plain(v=v):
                x = x * v
        match obj:
            case Point(z=_):
                x = x * 100
            case Point(x=a):
                x = x + a
        match dyn:
            case WithGetattr(z=_):
                x = x * 100
            case WithGetattr(w=w):
                x = x * w
        match prop:
            case WithProperty(p=_):
                x = x * 100
        return x

    args = (torch.ones(2), Point(1.0, 2.0), WithGetattr(), WithProperty())
    result, backend = compiled_run(fn, *args)
    torch.testing.assert_close(result, torch.full((2,), 8.0))
    assert len(backend.graphs) == 1
    assert break_reasons(fn, *args) == []


def test_an_attribute_found_missing_is_guarded():
    def fn(x, p):
        match p:
            case Point(z=z):
                return x * z
            case Point(x=a):
                return x + a

    compiled = pyframe.optimize(CountingBackend())(fn)
    p = Point(1.0, 2.0)
    torch.testing.assert_close(compiled(torch.ones(2), p), torch.full((2,), 2.0))
    p.z = 5.0  # now the first case matches: the guard sees it
    torch.testing.assert_close(compiled(torch.ones(2), p), torch.full((2,), 5.0))


def test_match_args_and_dict_contents_are_guarded():
    @dataclasses.dataclass
    class Pair:
        a: object
        b: object

    def fn(x, pair, cfg):
        match pair:
            case Pair(first, _):
                x = x * first
        match cfg:
            case {"mode": "add", "v": v}:
                return x + v
            case {"mode": "mul", "v": v}:
                return x * v
        return x

    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(fn)
    x = torch.ones(2)
    for cfg in ({"mode": "add", "v": 1.0}, {"mode": "mul", "v": 3.0}, {"mode": "add", "v": 1.0}):
        assert_same_result(compiled(x, Pair(2.0, 5.0), cfg), fn(x, Pair(2.0, 5.0), cfg))
    assert len(backend.graphs) == 2
    Pair.__match_args__ = ("b", "a")
    assert_same_result(compiled(x, Pair(2.0, 5.0), {"mode": "add", "v": 1.0}), x * 5.0 + 1.0)
    assert len(backend.graphs) == 3


def test_what_cannot_be_decided_breaks_the_graph_cleanly():
    class LoudMapping(Mapping):
        def get(self, key, default=None):
            print("get", key)
            return Mapping.get(self, key, default)

    class LoudAttr:
        __match_args__ = ("v",)

        @property
        def v(self):
            print("reading v")
            return 3.0

    def fn(x, m, obj):
        x = x + 1
        match m:
            case {"k": k}:
                x = x * k
        x = x.cos()
        match obj:
            case LoudAttr(v):
                x = x * v
        return x.sin()

    args = (torch.ones(2), LoudMapping(k=2.0), LoudAttr())
    _, backend = compiled_run(fn, *args)
    assert len(backend.graphs) == 3
    assert all("print" in reason for reason in break_reasons(fn, *args))

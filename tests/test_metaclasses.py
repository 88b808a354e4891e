"""Classes whose metaclass is a Python subclass of `type`, beyond what the corpus
(tests/cases/metaclasses.py) compares with torch._dynamo: programs where torch._dynamo itself
falls back or gives another result than eager, and the guards on what a trace read from a
metaclass (changing it after compiling recompiles).
"""
from __future__ import annotations

import collections
import dataclasses
import functools

import torch
import torch._dynamo

import pyframe
from pyframe.debug.compare import CountingBackend


class Clamped(type):
    """Class attributes named `limit` are stored clamped to [0, 10]."""

    def __setattr__(cls, name, value):
        if name == "limit":
            value = max(0, min(10, value))
        super().__setattr__(name, value)


class Limits(metaclass=Clamped):
    limit = 5


def test_a_metaclass_setattr_on_a_class_attribute_written_in_the_frame_is_inlined():
    """`Limits.limit = ...` goes through the metaclass's __setattr__ in the trace (no break), and
    is replayed on the class after the graph by type.__setattr__ (not through it again).
    (torch._dynamo 2.13 gives 25 here: it stores past the metaclass's __setattr__.)"""

    def fn(x):
        Limits.limit = Limits.limit + 20
        return x * Limits.limit

    Limits.limit = 5
    expected = fn(torch.ones(2))
    assert Limits.limit == 10
    Limits.limit = 5
    backend = CountingBackend()
    torch.testing.assert_close(pyframe.optimize(backend)(fn)(torch.ones(2)), expected)
    assert Limits.limit == 10
    assert len(backend.graphs) == 1
    explained = pyframe.explain(fn)(torch.ones(2))
    assert explained.graph_break_count == 0, explained.break_reasons


class Serial(type):
    """Numbers the instances its __call__ makes, through type.__call__."""

    count = 0

    def __call__(cls, *args, **kwargs):
        obj = super().__call__(*args, **kwargs)
        obj.serial = 7
        return obj


class Numbered(metaclass=Serial):
    def __init__(self, k):
        self.k = k


def test_a_metaclass_call_that_sets_attributes_is_traced():
    """torch._dynamo 2.13 falls back to eager here (it looks `serial` up through the
    metaclass); pyframe makes one graph."""

    def fn(x):
        n = Numbered(2.0)
        return x * n.k + n.serial, n

    backend = CountingBackend()
    out, made = pyframe.optimize(backend)(fn)(torch.ones(3))
    torch.testing.assert_close(out, torch.full((3,), 9.0))
    assert type(made) is Numbered and vars(made) == {"k": 2.0, "serial": 7}
    assert len(backend.graphs) == 1


class Described(type):
    @property
    def label(cls):
        return cls.__name__.lower() + cls.suffix

    def factor(cls):
        return cls.base * 2

    def __getattr__(cls, name):
        if name.startswith("scale_"):
            return int(name[len("scale_"):])
        raise AttributeError(name)


class Thing(metaclass=Described):
    suffix = "!"
    base = 3


def test_metaclass_reads_are_traced_and_guarded():
    """A property, a method and `__getattr__` of the metaclass are inlined; changing what they
    read (a class attribute) or the metaclass's method itself recompiles."""

    def fn(x):
        return x * Thing.factor() + Thing.scale_4, Thing.label, hasattr(Thing, "other"), getattr(Thing, "nope", 1)

    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(fn)
    x = torch.ones(2)
    for _ in range(2):
        assert compiled(x)[1:] == fn(x)[1:]
        torch.testing.assert_close(compiled(x)[0], fn(x)[0])
    assert len(backend.graphs) == 1
    Thing.base = 5
    try:
        torch.testing.assert_close(compiled(x)[0], fn(x)[0])
        assert len(backend.graphs) == 2
        Thing.suffix = "?"
        assert compiled(x)[1] == "thing?"
        original = Described.factor
        Described.factor = lambda cls: 100
        try:
            torch.testing.assert_close(compiled(x)[0], torch.full((2,), 104.0))
        finally:
            Described.factor = original
    finally:
        Thing.base, Thing.suffix = 3, "!"


class Duck(type):
    calls = 0

    def __instancecheck__(cls, obj):
        return hasattr(type(obj), "quack")


class Quacker(metaclass=Duck):
    pass


class Mallard:
    def quack(self):
        return 1


class Stone:
    pass


def test_python_instancecheck_on_objects_made_in_the_frame_and_passed_in():
    """`isinstance(obj, Quacker)` runs the metaclass's __instancecheck__, inlined, on an object
    the frame made as on one passed in; another input's class is guarded."""

    def fn(x, thing):
        made = Mallard()
        return x * (isinstance(made, Quacker) + 2 * isinstance(thing, Quacker)), isinstance(Stone(), (Stone, Quacker))

    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(fn)
    x = torch.ones(2)
    for thing in (Mallard(), Stone(), Mallard()):
        out, flag = compiled(x, thing)
        expected, expected_flag = fn(x, thing)
        torch.testing.assert_close(out, expected)
        assert flag == expected_flag
    assert len(backend.graphs) == 2


def _rename(kwargs):
    if "old" in kwargs:
        kwargs["new"] = kwargs.pop("old")


class Renaming(type):
    """Wraps every __init__ set on its classes, the one @dataclass sets included."""

    def __setattr__(cls, name, value):
        if name == "__init__":
            init = value

            @functools.wraps(init)
            def __init__(self, *args, **kwargs):
                _rename(kwargs)
                init(self, *args, **kwargs)

            value = __init__
        super().__setattr__(name, value)


class Output(collections.OrderedDict, metaclass=Renaming):
    def __post_init__(self):
        for field in dataclasses.fields(self):
            if getattr(self, field.name) is not None:
                self[field.name] = getattr(self, field.name)

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)


@dataclasses.dataclass
class Hidden(Output):
    hidden: torch.Tensor = None
    new: torch.Tensor = None


def test_instances_of_a_metaclass_dict_subclass_outlive_the_frame():
    """Made in the frame through the wrapped dataclass __init__, returned: rebuilt as a real
    instance of the class, its items and attributes as eager's."""

    def fn(x):
        return Hidden(hidden=x + 1, old=x * 2)

    backend = CountingBackend()
    out = pyframe.optimize(backend)(fn)(torch.ones(2))
    expected = fn(torch.ones(2))
    assert type(out) is Hidden and list(out.keys()) == list(expected.keys()) == ["hidden", "new"]
    torch.testing.assert_close(out["new"], expected["new"])
    torch.testing.assert_close(out.hidden, expected.hidden)
    assert len(backend.graphs) == 1
    torch._dynamo.reset()
    dynamo = CountingBackend()
    torch._dynamo.optimize(dynamo)(fn)(torch.ones(2))
    assert [g.ops for g in dynamo.graphs] == [g.ops for g in backend.graphs]


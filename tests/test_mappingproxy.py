"""A class's `__dict__` (a mappingproxy) read in the frame (variables/mappingproxy.py): its keys
guarded in order through the proxy, its values read and guarded one by one, and what the trace
relied on recompiled for when the class changes."""
from __future__ import annotations

import pytest
import torch

import pyframe
from pyframe import _C
from pyframe.debug.compare import CountingBackend


@pytest.fixture(autouse=True)
def _fresh():
    pyframe.reset()
    yield
    pyframe.reset()


def _hits(fn) -> list[int]:
    return sorted(e.hits for e in _C.get_cache_entries(fn.__code__))


def _class():
    class Config:
        scale = 3

        def method(self):
            return 1

    return Config


@pytest.mark.parametrize("skip_unchanged", [True, False])
def test_iterating_a_class_dict_recompiles_when_its_keys_change(skip_unchanged, monkeypatch):
    monkeypatch.setattr(pyframe.config, "skip_guards_on_unchanged_objects", skip_unchanged)
    Config = _class()

    def fn(x):
        names = [k for k in Config.__dict__ if not k.startswith("_")]
        return x * len(names), names

    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(fn)
    x = torch.randn(3)
    for _ in range(2):
        out, names = compiled(x)
        assert names == ["scale", "method"]
        torch.testing.assert_close(out, x * 2)
    assert len(backend.graphs) == 1 and _hits(fn) == [1]
    Config.extra = 0  # a new key: the keys guard fails
    out, names = compiled(x)
    assert names == ["scale", "method", "extra"] and len(backend.graphs) == 2
    torch.testing.assert_close(out, x * 3)
    del Config.extra
    assert compiled(x)[1] == ["scale", "method"] and len(backend.graphs) == 2  # the first entry again


def test_a_value_read_from_a_class_dict_is_guarded_by_itself():
    Config = _class()

    def fn(x):
        attrs = Config.__dict__
        return x * attrs["scale"], "method" in attrs, attrs.get("missing", 0), len(attrs) > 2

    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(fn)
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x)[0], x * 3)
    compiled(x)
    assert _hits(fn) == [1]
    Config.scale = 5  # same keys, another value
    torch.testing.assert_close(compiled(x)[0], x * 5)
    assert len(backend.graphs) == 2
    fails = [r.reason for r in pyframe.convert_frame.records_for(fn.__code__)]
    assert "__dict__['scale'] == 3" in fails[-1]


def test_the_class_dict_of_an_argument_s_type():
    class A:
        k = 1

    class B:
        k = 2
        j = 0

    def fn(x, obj):
        d = type(obj).__dict__
        return x * d["k"], sorted(n for n in d if not n.startswith("__"))

    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(fn)
    x = torch.randn(3)
    for obj, k, names in ((A(), 1, ["k"]), (B(), 2, ["j", "k"]), (A(), 1, ["k"])):
        out, got = compiled(x, obj)
        torch.testing.assert_close(out, x * k)
        assert got == names
    assert len(backend.graphs) == 2


def test_a_class_dict_read_after_the_trace_assigned_a_class_attribute_is_left_to_python():
    Config = _class()

    def fn(x):
        Config.scale = 4
        return x * Config.__dict__["scale"]

    x = torch.randn(3)
    torch.testing.assert_close(pyframe.optimize(CountingBackend())(fn)(x), x * 4)
    assert Config.scale == 4

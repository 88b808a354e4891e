"""Repeated reads of plain attributes of the frame's objects (UserObjectVariable.generic_getattr).

A plain value read from an object the frame holds is repeated without its lookups while nothing
the replay would change has changed. Each program here reads an attribute, changes what the read
depends on (the attribute, the instance dict, the class, a base, a deletion), and reads it again:
the second read must see the change, as eager does. The objects are made before each call and the
classes restored after, so each run starts from the same state. (torch._dynamo 2.13 does not see
the class attribute stored in `_set_class` and reads 2.0 twice, so the results are compared with
eager's only.)
"""
from __future__ import annotations

import dataclasses

import pytest
import torch

import pyframe
from pyframe.debug.compare import CountingBackend


class Base:
    scale = 2.0


class Holder(Base):
    __slots__ = ("a",)  # (and the instance dict Base's instances have)

    def __init__(self):
        self.a = 1.0
        self.b = 3.0


def _set_instance(obj, x):
    first = obj.b
    obj.b = 5.0
    return x * first + x * obj.b


def _set_slot(obj, x):
    first = obj.a
    obj.a = 7.0
    return x * first + x * obj.a


def _set_class(obj, x):
    first = obj.scale
    Holder.scale = 4.0
    return x * first + x * obj.scale


def _set_base(obj, x):
    first = obj.scale
    Base.scale = 6.0
    return x * first + x * obj.scale


def _write_dict(obj, x):
    first = obj.b
    obj.__dict__["b"] = 9.0
    return x * first + x * obj.b


def _delete_shadow(obj, x):
    obj.scale = 8.0
    first = obj.scale
    del obj.scale
    return x * first + x * obj.scale


def _repeat(obj, x):
    total = x
    for _ in range(5):
        total = total + x * obj.a + x * obj.b + x * obj.scale
    return total


def _restore():
    Base.scale = 2.0
    if "scale" in vars(Holder):
        del Holder.scale


@pytest.mark.parametrize("program", [_set_instance, _set_slot, _set_class, _set_base, _write_dict, _delete_shadow,
                                     _repeat])
def test_a_repeated_read_sees_every_change(program):
    x = torch.randn(3)
    results = {}
    for engine in ("eager", "pyframe"):
        _restore()
        obj = Holder()
        backend = CountingBackend()
        fn = pyframe.optimize(backend)(program) if engine == "pyframe" else program
        results[engine] = (fn(obj, x), vars(obj).copy(), obj.a, Base.scale, vars(Holder).get("scale"))
        if engine == "pyframe":
            assert len(backend.graphs) >= 1
    _restore()
    torch.testing.assert_close(results["pyframe"][0], results["eager"][0])
    assert results["pyframe"][1:] == results["eager"][1:]


def test_a_dataclass_fields_names_read_in_a_loop_compile_to_one_graph():
    @dataclasses.dataclass
    class Config:
        width: int = 2
        depth: int = 3

    fields = dataclasses.fields(Config)

    def fn(x):
        n = 0
        for _ in range(3):
            for field in fields:
                n += len(field.name)
        return x + n

    backend = CountingBackend()
    x = torch.randn(2)
    torch.testing.assert_close(pyframe.optimize(backend)(fn)(x), fn(x))
    assert len(backend.graphs) == 1


class _Slotted:
    __slots__ = ("set_one", "unset_one")

    def __init__(self):
        self.set_one = 2


def test_a_slot_never_set_is_missing_in_the_trace():
    """Reading a `__slots__` member that holds nothing raises AttributeError, as a missing attribute
    does: hasattr is False, getattr's default is given, for an object passed in (guarded to stay
    unset) and one made in the trace."""
    def fn(x, given):
        made = _Slotted()
        return (x * given.set_one + getattr(made, "unset_one", 5), hasattr(given, "unset_one"),
                hasattr(made, "unset_one"), hasattr(made, "set_one"))

    ours = CountingBackend()
    compiled = pyframe.optimize(ours)(fn)
    x = torch.randn(3)
    result, expected = compiled(x, _Slotted()), fn(x, _Slotted())
    torch.testing.assert_close(result[0], expected[0])
    assert result[1:] == expected[1:] == (False, False, True)
    filled = _Slotted()
    filled.unset_one = 1
    assert compiled(x, filled)[1] is True  # (the guard: set now, read again)
    assert len(ours.graphs) == 2
    assert not pyframe.explain(fn)(x, _Slotted()).break_reasons

"""`dataclasses.fields(obj)` on objects made while tracing is inlined once per class and then
repeated (pyframe/translator/variables/class_reads.py): results, graphs and guards as when each
call is inlined, and the repeat is dropped whenever what the call reads may have changed."""
from __future__ import annotations

import dataclasses

import torch

import pyframe
from pyframe.debug.compare import CountingBackend
from pyframe.translator.instructions import InstructionTranslator


@dataclasses.dataclass
class Pair:
    first: torch.Tensor
    second: torch.Tensor = None
    scale: float = 2.0

    def __setattr__(self, name, value):  # as a Hugging Face ModelOutput: fields() at every store
        names = {f.name for f in dataclasses.fields(self)}
        super().__setattr__(name, value * 1 if name in names and isinstance(value, torch.Tensor) else value)


def _inlined_fields_calls(fn, *args) -> tuple[object, int, list]:
    """fn(*args) under pyframe: its result, how many times dataclasses.fields was inlined, graphs."""
    calls, original = [0], InstructionTranslator.inline_call

    def counting(self, function, *rest, **kw):
        calls[0] += function is dataclasses.fields
        return original(self, function, *rest, **kw)

    backend = CountingBackend()
    InstructionTranslator.inline_call = counting
    try:
        result = pyframe.optimize(backend)(fn)(*args)
    finally:
        InstructionTranslator.inline_call = original
    return result, calls[0], backend.graphs


def _eager_and_compiled(cls: type, fn, x) -> tuple[object, object, int]:
    """fn(x) eagerly and under pyframe (result, fields() inlinings), `cls.__dataclass_fields__`, which
    fn replaces, put back after each."""
    saved = dict(cls.__dataclass_fields__)
    try:
        expected = fn(x)
    finally:
        cls.__dataclass_fields__ = dict(saved)
    try:
        result, inlined, _ = _inlined_fields_calls(fn, x)
    finally:
        cls.__dataclass_fields__ = dict(saved)
    return expected, result, inlined


def test_fields_of_objects_of_one_class_is_inlined_once():
    def f(x):
        a = Pair(x, x + 1)
        b = Pair(x * 2)
        return a.first + a.second + b.first * b.scale + len(dataclasses.fields(b))

    x = torch.randn(3)
    result, inlined, graphs = _inlined_fields_calls(f, x)
    torch.testing.assert_close(result, f(x))
    assert len(graphs) == 1
    assert inlined == 1  # (eight calls: three stores per object, one in f; the same source each time)


def test_a_class_changed_in_the_trace_is_read_again():
    @dataclasses.dataclass
    class Box:
        a: int = 1
        b: int = 2

    def f(x):
        before = len(dataclasses.fields(Box()))
        Box.__dataclass_fields__ = {"a": Box.__dataclass_fields__["a"]}  # a store on the class
        after = len(dataclasses.fields(Box()))
        return x + before * 10 + after

    expected, result, inlined = _eager_and_compiled(Box, f, torch.randn(2))
    torch.testing.assert_close(result, expected)  # (21: a repeat of the first call would give 22)
    assert inlined >= 2  # read again after the store


def test_an_object_with_its_own_attribute_of_the_name_is_inlined():
    @dataclasses.dataclass
    class Box:
        a: int = 1

    def f(x):
        first, second = Box(), Box()
        n = len(dataclasses.fields(first))
        object.__setattr__(second, "__dataclass_fields__", {})
        try:
            m = len(dataclasses.fields(second))
        except TypeError:
            m = -1
        return x + n * 10 + m

    x = torch.randn(2)
    result, _, _ = _inlined_fields_calls(f, x)
    torch.testing.assert_close(result, f(x))


def test_the_guards_of_the_first_call_reject_a_changed_class():
    @dataclasses.dataclass
    class Box:
        a: torch.Tensor = None
        b: int = 3

    def f(x):
        one, two = Box(x), Box(x + 1)
        return sum(getattr(one, fl.name) * 1 for fl in dataclasses.fields(two) if fl.name == "a") + \
            len(dataclasses.fields(one))

    backend = CountingBackend()
    opt = pyframe.optimize(backend)(f)
    x = torch.randn(2)
    torch.testing.assert_close(opt(x), f(x))
    Box.__dataclass_fields__["c"] = dataclasses.field(default=0)  # a field the guards did not see
    Box.__dataclass_fields__["c"].name, Box.__dataclass_fields__["c"]._field_type = "c", dataclasses._FIELD
    Box.c = 0
    torch.testing.assert_close(opt(x), f(x))
    assert len(backend.graphs) == 2  # recompiled


def test_a_dict_made_in_the_trace_and_stored_on_the_class_is_read_again():
    @dataclasses.dataclass
    class Box:
        a: int = 1
        b: int = 2

    def f(x):
        Box.__dataclass_fields__ = {}                      # a dict of the trace's, on the class
        before = len(dataclasses.fields(Box()))
        Box.__dataclass_fields__["a"] = saved["a"]         # changed without a store on the class
        after = len(dataclasses.fields(Box()))
        return x + before * 10 + after

    saved = dict(Box.__dataclass_fields__)
    expected, result, _ = _eager_and_compiled(Box, f, torch.randn(2))
    torch.testing.assert_close(result, expected)  # (1: a repeat of the first call would give 0)

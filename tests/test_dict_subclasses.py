"""Instances of dict and OrderedDict subclasses (variables/dict_subclass.py): Hugging Face-style
ModelOutputs and plain dict subclasses, made in the frame or passed in.

The corpus (tests/cases/dict_subclasses.py) checks graphs against torch._dynamo; these tests check
what the corpus cannot see: results compared without the harness's deepcopy (which rebuilds a
ModelOutput through its own __setitem__ and would hide a missing attribute), identity between an
item and its attribute, mutations of the caller's objects replayed once and through the base's own
methods, guards, and clean graph breaks where tracing stops.
"""
from __future__ import annotations

import collections
import dataclasses
import typing

import pytest
import torch

import pyframe
from pyframe.debug.compare import CountingBackend, assert_same_result
from tests.cases.dict_subclasses import (
    Bag, BertLikeEncoder, ClassifierOutput, DoublingDict, EncoderOutput, ModelOutput,
)


def _same(actual, expected) -> None:
    """Equal results, and every dict subclass's attributes equal too (at any depth)."""
    assert_same_result(actual, expected)
    if isinstance(expected, dict) and type(expected) not in (dict, collections.OrderedDict):
        assert list(vars(actual)) == list(vars(expected))
        for name in vars(expected):
            _same(getattr(actual, name), getattr(expected, name))
    if isinstance(expected, (tuple, list)):
        for a, e in zip(actual, expected):
            _same(a, e)


def _one_graph(fn, *args):
    """fn compiled with fullgraph=True (any graph break raises), its result and its graphs."""
    backend = CountingBackend()
    result = pyframe.optimize(backend, fullgraph=True)(fn)(*args)
    assert len(backend.graphs) == 1, [g.ops for g in backend.graphs]
    return result, backend.graphs


# -- ModelOutput made in the frame ---------------------------------------------------------------

def test_model_output_returned_is_the_real_class_with_items_and_attributes():
    def fn(x):
        return ClassifierOutput(logits=x.sin(), hidden_states=None, attentions=x * 2)

    x = torch.randn(3)
    result, _ = _one_graph(fn, x)
    expected = fn(x)
    _same(result, expected)
    assert type(result) is ClassifierOutput
    assert list(result.keys()) == ["logits", "attentions"] and result.hidden_states is None
    assert result.logits is result["logits"] and result[1] is result.attentions  # one tensor, not two


def test_model_output_reads_in_one_graph():
    def fn(x):
        out = ClassifierOutput(logits=x.cos(), hidden_states=x.relu())
        keys = [k for k in out]
        total = sum(v.sum() for v in out.values())
        return (out[0] + out["hidden_states"] + out.logits, out.to_tuple(), out[-1:], len(out), keys,
                "attentions" in out, total, {**out}, dict(out))

    x = torch.randn(4)
    result, _ = _one_graph(fn, x)
    _same(result, fn(x))


def test_model_output_kwargs_unpacked_into_a_call():
    def head(logits, hidden_states):
        return logits * hidden_states

    def fn(x):
        return head(**ClassifierOutput(logits=x + 1, hidden_states=x - 1))

    x = torch.randn(4)
    result, _ = _one_graph(fn, x)
    _same(result, fn(x))


def test_model_output_refuses_update_as_in_eager():
    def fn(x):
        out = ClassifierOutput(logits=x)
        try:
            out.update(logits=x * 2)
        except RuntimeError:
            return x + 1
        return x

    x = torch.randn(2)
    result, _ = _one_graph(fn, x)
    _same(result, fn(x))


def test_model_output_live_at_a_graph_break():
    def fn(x):
        out = ClassifierOutput(logits=x.sin(), hidden_states=x.cos())
        if x.sum() > 0:  # data dependent: the output is rebuilt for the resume function
            return out[1] + out.logits, out
        return out["logits"] - 1, out

    compiled = pyframe.optimize(CountingBackend())(fn)
    for sign in (1.0, -1.0):
        x = torch.full((3,), sign)
        result = compiled(x)
        _same(result, fn(x))
        assert result[1].logits is result[1]["logits"]


def test_bert_like_encoder_matches_eager_and_dynamo():
    torch.manual_seed(0)
    model = BertLikeEncoder()
    hidden, mask = torch.randn(2, 5, 8), torch.zeros(2, 1, 5)
    ours, dynamo = CountingBackend(), CountingBackend()
    result = pyframe.optimize(ours, fullgraph=True)(model)(hidden, mask)
    _same(result, model(hidden, mask))
    assert type(result) is EncoderOutput and len(result.hidden_states) == 4
    torch._dynamo.reset()
    torch.compile(model, backend=dynamo, dynamic=False)(hidden, mask)
    assert [g.ops for g in ours.graphs] == [g.ops for g in dynamo.graphs]


# -- instances passed in ---------------------------------------------------------------------------

def test_model_output_argument_mutated_is_replayed_once():
    def fn(out, x):
        out["attentions"] = x * 3
        out.logits = out.logits + 1  # __setattr__ keeps the item in sync
        return out.to_tuple()

    x = torch.randn(4)
    ours, expected = ClassifierOutput(logits=x.clone()), ClassifierOutput(logits=x.clone())
    result, _ = _one_graph(fn, ours, x)
    _same(result, fn(expected, x))
    _same(ours, expected)
    assert ours.attentions is ours["attentions"] and ours.logits is ours["logits"]


class Audited(collections.OrderedDict):
    """Counts the writes through its own __setitem__ (in an attribute): a replay that ran it again
    would count twice."""

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__("writes", getattr(self, "writes", 0) + 1)


def test_replay_does_not_run_the_subclass_methods_again():
    def fn(d, x):
        d["b"] = x * 2
        d.update(c=x + 1)  # OrderedDict.update stores through the subclass's __setitem__
        return d["a"] + 1

    x = torch.randn(3)
    ours, expected = Audited(a=x), Audited(a=x)
    result, _ = _one_graph(fn, ours, x)
    _same(result, fn(expected, x))
    assert ours.writes == expected.writes == 3
    _same(ours, expected)


def test_items_are_read_from_the_storage_not_through_getitem():
    """A graph input read from an instance whose __getitem__ doubles: the transformed code loads it
    with dict.__getitem__ (DictItemSource), as the guards read it."""
    def fn(d, x):
        return d["a"] + x, list(d.values()), super(DoublingDict, d).__getitem__("b")

    d = DoublingDict(a=torch.randn(3), b=torch.randn(3))
    x = torch.randn(3)
    result, _ = _one_graph(fn, d, x)
    _same(result, fn(d, x))


def test_guards_on_type_and_keys():
    def fn(d, x):
        return x * len(d) + sum(d.values())

    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(fn)
    x = torch.randn(3)
    for d in (Bag(a=x), Bag(a=x), Bag(a=x, b=x), {"a": x}, DoublingDict(a=x)):
        _same(compiled(d, x), fn(d, x))
    assert len(backend.graphs) == 4  # the second Bag with the same keys is a cache hit


# -- plain dict subclasses --------------------------------------------------------------------------

def test_dict_subclass_methods_and_copy_semantics():
    def fn(x):
        bag = Bag(a=x)
        bag.setdefault("b", x * 2)
        copied = bag.copy()  # dict.copy: a plain dict
        ordered = DoublingDict(a=x)
        ordered_copy = ordered.copy()  # OrderedDict.copy: type(self)(), then copy[k] = self[k]
        return bag.total(), copied, ordered_copy, dict(ordered), bag.pop("a"), bag

    x = torch.randn(3)
    result, _ = _one_graph(fn, x)
    _same(result, fn(x))
    assert type(result[1]) is dict and type(result[2]) is DoublingDict


class Tagged(dict):
    def tag(self, key, value):
        dict.__setitem__(self, key, value)  # the base's method, read from the class
        object.__setattr__(self, "last", key)
        return self


def test_base_methods_called_through_the_class():
    def fn(x):
        return Tagged().tag("a", x.exp()).tag("b", x.log1p())

    x = torch.rand(3)
    result, _ = _one_graph(fn, x)
    _same(result, fn(x))
    assert result.last == "b"


# -- where tracing stops: clean graph breaks, the right results ---------------------------------------

class Truthy(dict):
    def __bool__(self):
        return True


class Slotted(dict):
    __slots__ = ()


def _breaks_and_matches(fn, *args) -> None:
    """fn is not traced whole (a graph break, or inside a try block the frame left to Python),
    and its result is eager's."""
    explanation = pyframe.explain(fn)(*args)
    assert explanation.graph_break_count >= 1 or explanation.skipped
    pyframe.reset()
    _same(pyframe.optimize(CountingBackend())(fn)(*args), fn(*args))


def test_truth_of_a_subclass_with_its_own_bool_is_inlined():
    """`if d:` calls the subclass's Python __bool__, inlined: one graph, as torch._dynamo makes."""
    def fn(x):
        d = Truthy()
        if d:
            return x + 1
        return x - 1

    x = torch.randn(3)
    backend = CountingBackend()
    _same(pyframe.optimize(backend)(fn)(x), fn(x))
    assert len(backend.graphs) == 1
    assert pyframe.explain(fn)(x).graph_break_count == 0


def test_attribute_on_a_subclass_without_instance_dict_breaks():
    def fn(x):
        d = Slotted(a=x + 1)
        try:
            d.extra = 1
        except AttributeError:
            return d["a"] * 2
        return d["a"]

    _breaks_and_matches(fn, torch.randn(3))


def test_unsupported_builtin_method_through_super_rebuilds_it_at_the_break():
    class Sized(dict):
        def size_and(self, x):
            return x.sin(), super().__sizeof__()  # not modelled: run by Python at a break

    d = Sized(a=1)
    x = torch.randn(3)
    backend = CountingBackend()
    result = pyframe.optimize(backend)(d.size_and)(x)
    _same(result, d.size_and(x))
    assert len(backend.graphs) == 1


def test_super_of_a_plain_class_rebuilt_at_a_graph_break():
    class Named:
        def describe(self, x):
            return x.cos() + 1, super().__repr__()  # object.__repr__: a break with super() live

    obj = Named()
    x = torch.randn(3)
    result = pyframe.optimize(CountingBackend())(obj.describe)(x)
    _same(result, obj.describe(x))


def test_defaultdict_subclass_is_left_to_python():
    class Groups(collections.defaultdict):
        pass

    def fn(x):
        g = Groups(list)
        g["a"].append(x)
        return g["a"][0] + 1

    x = torch.randn(3)
    _same(pyframe.optimize(CountingBackend())(fn)(x), fn(x))


# -- the harness ---------------------------------------------------------------------------------------

def test_assert_same_result_compares_attributes_of_dict_subclasses():
    x = torch.ones(2)
    a, b = ClassifierOutput(logits=x), ClassifierOutput(logits=x)
    assert_same_result(a, b)
    object.__setattr__(a, "hidden_states", x)  # an attribute only: the items are equal
    with pytest.raises(AssertionError, match="__dict__"):
        assert_same_result(a, b)


def test_instance_containing_itself_is_left_to_python():
    def fn(d, x):
        return d["x"] + x

    d = Bag(x=torch.ones(2))
    d["self"] = d
    _same(pyframe.optimize(CountingBackend())(fn)(d, torch.ones(2)), fn(d, torch.ones(2)))

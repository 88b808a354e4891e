"""Instances of list, tuple, set and frozenset subclasses (variables/container_subclass.py): made in
the frame and returned as the right class, read from the frame under guards on type and length (or
value), the base's operations on their items, the subclass's overrides and super() inlined."""
from __future__ import annotations

import torch

import pyframe
from pyframe.debug.compare import CountingBackend


class Stack(list):
    def push(self, item):
        self.append(item)
        return self


class Doubling(list):
    def append(self, item):
        super().append(item * 2)


class Tags(set):
    pass


class Pair(tuple):
    def total(self):
        return self[0] + self[1]


def test_an_instance_made_in_the_frame_is_returned_as_its_class_with_its_items_and_attributes():
    def fn(x):
        st = Stack([x])
        st.push(x + 1)
        st.note = "n"
        d = Doubling()
        d.append(x)
        d += [x]  # list.__iadd__: the same object, extended
        return st, d, Pair((x, 2)).total(), Tags({1, 2}) | {3}

    backend = CountingBackend()
    x = torch.randn(3)
    st, d, total, tags = pyframe.optimize(backend)(fn)(x)
    assert len(backend.graphs) == 1
    assert type(st) is Stack and st.note == "n" and len(st) == 2
    torch.testing.assert_close(st[1], x + 1)
    assert type(d) is Doubling and len(d) == 2
    torch.testing.assert_close(d[0], x * 2)
    torch.testing.assert_close(total, x + 2)
    assert type(tags) is set and tags == {1, 2, 3}  # set.__or__ makes a plain set


def test_an_instance_passed_in_is_guarded_by_type_and_length_or_value():
    def fn(st, tags):
        return st[0] + len(st) + ("a" in tags)

    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(fn)
    for st in (Stack([torch.randn(2)]), Stack([torch.randn(2)])):
        torch.testing.assert_close(compiled(st, Tags({"a"})), fn(st, Tags({"a"})))
    assert len(backend.graphs) == 1  # new instances, same type, length and tags: hits
    two = Stack([torch.randn(2), torch.randn(2)])
    torch.testing.assert_close(compiled(two, Tags({"a"})), fn(two, Tags({"a"})))
    assert len(backend.graphs) == 2  # another length
    one = Stack([torch.randn(2)])
    assert (compiled(one, Tags({"b"})) == fn(one, Tags({"b"}))).all()
    assert len(backend.graphs) == 3  # other tags
    plain = [torch.randn(2)]
    torch.testing.assert_close(compiled(plain, Tags({"a"})), fn(plain, Tags({"a"})))
    assert len(backend.graphs) == 4  # a plain list is another type


def test_a_mutation_of_an_instance_passed_in_is_left_to_python():
    def fn(x, st):
        st.append(x)
        return x + 1

    st = Stack()
    out = pyframe.optimize(CountingBackend())(fn)(torch.ones(2), st)
    torch.testing.assert_close(out, torch.ones(2) + 1)
    assert len(st) == 1  # appended by Python, once

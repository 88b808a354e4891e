"""Instances of list, tuple, set, frozenset, int, float and str subclasses (variables/container_subclass.py): made in
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


# -- int, float and str subclasses ------------------------------------------------------------------


class Index(int):
    def next(self):
        return Index(self + 1)


class Meters(float):
    def __add__(self, other):
        return Meters(float(self) + float(other))

    def __repr__(self):
        return f"{float(self)}m"


class Shouting(str):
    def __index__(self):  # (never used: a str is no index; it makes the class convert in Python)
        return 0

    def __str__(self):
        return self.upper()


def test_scalar_subclass_instances_made_in_the_frame_leave_it_as_their_class():
    def fn(x):
        i = Index(2).next()
        i.note = "n"
        m = Meters(1.5) + Meters(2.0)
        return x * i * m, i, m, repr(m), str(Shouting("hi")), f"{Shouting('a')}"

    backend = CountingBackend()
    out = pyframe.optimize(backend)(fn)(torch.ones(2))
    expected = fn(torch.ones(2))
    torch.testing.assert_close(out[0], expected[0])
    assert type(out[1]) is Index and out[1] == 3 and out[1].note == "n"
    assert type(out[2]) is Meters and out[2] == 3.5
    assert out[3:] == expected[3:] == ("3.5m", "HI", "A")
    assert len(backend.graphs) == 1


def test_a_scalar_subclass_instance_passed_in_is_guarded_by_type_and_value():
    def fn(x, i):
        return x * i.next()

    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(fn)
    for i in (Index(3), Index(3)):
        torch.testing.assert_close(compiled(torch.ones(2), i), fn(torch.ones(2), i))
    assert len(backend.graphs) == 1  # another instance of the same value: a hit
    torch.testing.assert_close(compiled(torch.ones(2), Index(5)), fn(torch.ones(2), Index(5)))
    assert len(backend.graphs) == 2  # another value


def test_an_int_subclass_converting_in_python_is_not_read_as_its_value_by_torch():
    class Odd(int):
        def __index__(self):
            return 1

    def fn(x):
        return torch.ones(Odd(3)) + x

    backend = CountingBackend()
    torch.testing.assert_close(pyframe.optimize(backend)(fn)(torch.ones(1)), fn(torch.ones(1)))


class Label(str):
    def __new__(cls, text, weight=1):
        obj = super().__new__(cls, text)
        obj.weight = weight
        return obj

    def __init__(self, text, weight=1):
        self.inited = True


class Singleton(tuple):
    def __new__(cls, *items):
        return items[0] if len(items) == 1 else super().__new__(cls, items)


def test_a_subclass_own_new_is_inlined_and_then_its_init_runs():
    def fn(x):
        label = Label("ab", weight=3)
        one = Singleton(7)  # __new__ returns no instance of the class: no __init__
        pair = Singleton(1, 2)
        return x * label.weight * len(label) + one + len(pair), label, pair

    backend = CountingBackend()
    out = pyframe.optimize(backend)(fn)(torch.ones(2))
    expected = fn(torch.ones(2))
    torch.testing.assert_close(out[0], expected[0])
    assert type(out[1]) is Label and out[1] == "ab" and out[1].weight == 3 and out[1].inited
    assert type(out[2]) is Singleton and out[2] == (1, 2)
    assert len(backend.graphs) == 1

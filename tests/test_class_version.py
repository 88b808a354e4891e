"""What a trace remembers of classes: `_C.class_version` and class_attribute's memo.

class_attribute (translator/variables/base.py) answers the same few questions about classes a
thousand times a trace; while a trace runs it remembers each answer for as long as
`_C.class_version` of the class stays the same. These tests change a class, a base, a metaclass
and the bases themselves between two reads and check that the second read sees the change.
"""
from __future__ import annotations

import pytest

from pyframe import _C
from pyframe.translator.variables.base import class_attribute, remembering_class_reads

MISSING = object()


def _classes():
    class Meta(type):
        pass

    class Base(metaclass=Meta):
        def method(self):
            return "base"

    class Child(Base):
        pass

    return Meta, Base, Child


def test_class_version_changes_with_the_class_its_bases_and_its_metaclass():
    Meta, Base, Child = _classes()
    seen = {_C.class_version(Child)}
    Child.x = 1
    seen.add(_C.class_version(Child))
    Base.y = 2
    seen.add(_C.class_version(Child))
    Meta.z = 3
    seen.add(_C.class_version(Child))
    del Child.x
    seen.add(_C.class_version(Child))
    assert len(seen) == 5 and 0 not in seen
    assert _C.class_version(Child) == _C.class_version(Child)  # unchanged: the same version


def test_class_version_takes_classes_only():
    with pytest.raises(TypeError, match="takes a class"):
        _C.class_version(object())


@pytest.mark.parametrize("change", ["class", "base", "metaclass", "bases"])
def test_a_remembered_read_sees_every_change(change):
    Meta, Base, Child = _classes()

    class Other:
        def method(self):
            return "other"

    with remembering_class_reads(_C.class_version):
        assert class_attribute(Child, "method", MISSING) is Base.__dict__["method"]
        assert class_attribute(Child, "extra", MISSING) is MISSING
        assert class_attribute(Child, "method", MISSING) is Base.__dict__["method"]  # (remembered)
        if change == "class":
            Child.method = Other.method
            Child.extra = 1
        elif change == "base":
            Base.method = Other.method
            Base.extra = 1
        elif change == "metaclass":
            Meta.extra = 1  # (a class reads its metaclass's attributes too)
        else:
            Child.__bases__ = (Other,)
            Other.extra = 1
        expected = Other.__dict__["method"] if change != "metaclass" else Base.__dict__["method"]
        assert class_attribute(Child, "method", MISSING) is expected
        assert class_attribute(Child, "extra", MISSING) == 1


def test_nothing_is_remembered_outside_a_trace():
    _, Base, Child = _classes()
    with remembering_class_reads(_C.class_version):
        class_attribute(Child, "method", MISSING)
    from pyframe.translator.variables import base

    assert base._class_reads == {} and base._class_version is None

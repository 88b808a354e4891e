"""The Python versions of C functions of the standard library that the translator inlines
(pyframe/translator/variables/polyfills.py) give what the C functions give, and consume their
iterables as far, item for item (a generator feeding them runs its traced steps no further)."""
from __future__ import annotations

import collections
import itertools
import operator

import pytest

from pyframe.translator.variables import polyfills


def _consumed(use, n: int = 10) -> tuple[object, list[int]]:
    taken: list[int] = []

    def source():
        for i in range(n):
            taken.append(i)
            yield i
    return use(source()), taken


@pytest.mark.parametrize("args", [(3,), (None,), (1, None, 2), (2, 8, 3), (0, 0), (5, 2), (3, 4), (1, 20, 4)])
def test_islice_gives_and_consumes_what_the_c_version_does(args):
    assert _consumed(lambda it: list(polyfills.islice(it, *args))) == \
        _consumed(lambda it: list(itertools.islice(it, *args)))
    # taken one item at a time: the same items read so far
    assert _consumed(lambda it: next(polyfills.islice(it, *args), None)) == \
        _consumed(lambda it: next(itertools.islice(it, *args), None))


@pytest.mark.parametrize("args", [(-1,), (1, -1), (0, 5, 0), (0.5,)])
def test_islice_rejects_what_the_c_version_rejects(args):
    for fn in (itertools.islice, polyfills.islice):
        with pytest.raises(ValueError):
            fn([], *args)


@pytest.mark.parametrize("items", [[], [1], [1, 2, 3]])
def test_accumulate(items):
    assert list(polyfills.accumulate(items)) == list(itertools.accumulate(items))
    assert list(polyfills.accumulate(items, operator.mul, initial=5)) == \
        list(itertools.accumulate(items, operator.mul, initial=5))


@pytest.mark.parametrize("items", ["", "aabccca", [1, 1, 2, 1]])
def test_groupby(items):
    def runs(groups):
        return [(k, list(g)) for k, g in groups]
    assert runs(polyfills.groupby(items)) == runs(itertools.groupby(items))
    assert runs(polyfills.groupby(items, key=lambda v: v != 1)) == runs(itertools.groupby(items, key=lambda v: v != 1))


def test_count_elements():
    expected, got = {"a": 1}, {"a": 1}
    collections._count_elements(expected, "abca")
    polyfills.count_elements(got, "abca")
    assert got == expected

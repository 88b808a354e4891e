"""Corpus: copy.copy and copy.deepcopy of instances of user classes, by copy's protocol.

copy.copy(obj) calls the class's `__copy__` if it has one; otherwise it takes the object's reduce,
`obj.__reduce_ex__(4)` (object's: `(copyreg.__newobj__, (cls,), obj.__dict__, None, None)`), and
copy._reconstruct makes `cls.__new__(cls)` and puts the state in it: a new object holding the same
attribute values. copy.deepcopy does the same with the state deep-copied, one copy per object (its
memo). The objects are read from the frame or made in it; the copies are changed, the originals
keep their values. (Instances with `__slots__`, and classes with their own `__getstate__`,
`__setstate__` or `__reduce__`, which torch._dynamo 2.13 does not copy as copy does, are tested
against eager alone: tests/test_copy_protocol.py.)
"""

import copy

import torch

from pyframe.debug.cases import case


class _Settings:
    """A plain configuration object."""

    def __init__(self, hidden=4):
        self.hidden = hidden
        self.names = ["a", "b"]
        self.table = {0: "x", 1: "y"}


class _Aliased:
    """A config that maps some names to others on every read and store (its own __getattribute__
    and __setattr__), holding a set among its values."""

    aliases = {"width": "hidden"}

    def __init__(self):
        self.hidden = 4
        self.ignored = {"p", "q"}
        self.encoder_layers = 2
        self.inner = _Settings(3)

    def __setattr__(self, key, value):
        if key in super().__getattribute__("aliases"):
            key = super().__getattribute__("aliases")[key]
        super().__setattr__(key, value)

    def __getattribute__(self, key):
        if key != "aliases" and key in super().__getattribute__("aliases"):
            key = super().__getattribute__("aliases")[key]
        return super().__getattribute__(key)


class _Counted:
    """A class whose __copy__ makes the copy its own way."""

    def __init__(self, n):
        self.n = n
        self.history = [n]

    def __copy__(self):
        twin = _Counted(self.n + 1)
        twin.history = self.history + ["copied"]
        return twin


@case(inputs=lambda: (torch.randn(4), _Settings()))
def copy_of_an_object_read_from_the_frame(x, settings):
    """A shallow copy: a new object with the original's attribute values (the list is the same one);
    an attribute set on the copy leaves the original as it was."""
    twin = copy.copy(settings)
    twin.hidden = 7
    twin.names.append("c")
    return (x * twin.hidden + settings.hidden, twin, settings.hidden, twin.names is settings.names,
            twin is settings, type(twin) is _Settings)


@case(inputs=lambda: torch.randn(4))
def copy_of_an_object_made_in_the_frame(x):
    """copy.copy of an object the frame made, and of one with no attributes: new objects, made in
    the trace as their originals were."""
    made = _Settings(2)
    twin = copy.copy(made)
    twin.hidden = 5
    empty = copy.copy(_Settings.__new__(_Settings))
    return x * made.hidden + x * twin.hidden, twin, made, vars(empty), twin.table is made.table


@case(inputs=lambda: (torch.randn(4), _Counted(3)))
def copy_through_the_class_copy_method(x, counted):
    """A class's __copy__ is what copy.copy calls."""
    twin = copy.copy(counted)
    return x * twin.n + counted.n, twin.history, counted.history


# Read through globals, the same objects at every call, as a model's config is: torch._dynamo runs
# copy.deepcopy itself, whose memo is keyed by `id(x)`, and so pins each object it copies by identity
# (a new object at each call would compile a graph at each call).
_CONFIG = _Aliased()
_SHARED = _Settings()


@case(inputs=lambda: torch.randn(4))
def deepcopy_of_a_config_with_aliased_names(x):
    """copy.deepcopy of a config whose class maps names on reads and stores: the copy's values are
    copies (its set, its list, its nested object), the original keeps its own; then names moved on
    the copy, as transformers' get_text_config does."""
    config = _CONFIG
    twin = copy.deepcopy(config)
    twin.width = 8
    for key in list(vars(twin)):
        if key.startswith("encoder_"):
            value = getattr(twin, key)
            delattr(twin, key)
            setattr(twin, "num_" + key[len("encoder_"):], value)
    twin.inner.names.append("c")
    return (x * twin.hidden + config.width, sorted(vars(twin)), twin.ignored, twin.ignored == config.ignored,
            twin.inner.names, config.inner.names, twin.inner is config.inner)


@case(inputs=lambda: torch.randn(4))
def deepcopy_copies_a_shared_object_once(x):
    """One object reached twice in the original is one copy reached twice in the copy (deepcopy's
    memo)."""
    settings = _SHARED
    holder = _Settings(1)
    holder.left = settings
    holder.right = settings
    twin = copy.deepcopy(holder)
    twin.left.hidden = 9
    return x * twin.right.hidden + settings.hidden, twin.left is twin.right, twin.left is settings

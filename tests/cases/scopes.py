"""Corpus: scopes as live views. locals(), vars(), globals() and obj.__dict__ read after writes made
earlier in the frame, and written through."""

import types

import torch

from pyframe.debug.cases import case

SCALE = 3.0


@case(inputs=lambda: torch.randn(4))
def locals_sees_earlier_writes(x):
    """locals() holds every local bound so far, with its latest value."""
    y = x + 1
    y = y * 2
    names = locals()
    return names["y"] + names["x"] * len(names)


@case(inputs=lambda: torch.randn(4))
def vars_without_arguments_is_locals(x):
    a = x.sin()
    scope = vars()
    b = scope["a"] * 2
    return b + ("b" in scope)


@case(inputs=lambda: torch.randn(4))
def globals_read_by_name(x):
    """globals() as a mapping: a module constant and a module function read by name."""
    g = globals()
    return x * g["SCALE"] + g["_helper"](x) + ("missing" in g)


def _helper(x):
    return x.cos()


class _Holder:
    def __init__(self, t):
        self.t = t


@case(inputs=lambda: torch.randn(4))
def instance_dict_is_a_live_view(x):
    """obj.__dict__ taken early sees stores made later, and a store into it is an attribute."""
    h = _Holder(x)
    d = h.__dict__
    h.u = x * 2
    d["w"] = x + 1
    return d["u"] + h.w + len(d)


@case(inputs=lambda: (torch.randn(4), _Holder(torch.randn(4))))
def dict_of_an_argument_written_both_ways(x, h):
    """The same, for an object passed in: both kinds of store are replayed after the graph."""
    d = vars(h)
    h.extra = x * 3
    d["t"] = d["t"] + d["extra"]
    return h.t * 2


@case(inputs=lambda: torch.randn(4))
def locals_in_a_nested_function(x):
    """locals() of an inlined function: its arguments and the locals bound before the call."""

    def inner(a, k=2):
        b = a * k
        return locals()

    scope = inner(x)
    return scope["b"] + scope["a"] * scope["k"]

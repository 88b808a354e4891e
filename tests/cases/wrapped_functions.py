"""Corpus: functions wrapped by functools.wraps / functools.update_wrapper.

Decorators whose wrapper calls the wrapped function, two and three deep, applied at import time and
in the traced frame; `__wrapped__` read and called; `inspect.unwrap`; the wrapper's names, doc and
`__dict__` as functools copies them; a dataclass's generated `__init__` replaced on its class by a
wrapper (a class decorator, a metaclass). One graph in torch._dynamo.
"""

import dataclasses
import functools
import inspect

import torch

from pyframe.debug.cases import case


def _plus_one(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs) + 1
    return wrapper


def _times(k):
    def decorate(fn):
        def wrapper(x, *args, **kwargs):
            return fn(x, *args, **kwargs) * k
        return functools.update_wrapper(wrapper, fn)
    return decorate


def _tagged(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)
    wrapper.tag = "t"
    return wrapper


@_plus_one
@_times(3)
@_tagged
def _scaled(x, shift=0.0):
    """Scales."""
    x.marker = None if hasattr(x, "nothing") else 0
    return x.sin() + shift


@case(inputs=lambda: torch.randn(4))
def three_deep_wraps_made_at_import(x):
    y = _scaled(x, shift=2.0)
    inner = _scaled.__wrapped__.__wrapped__
    return (y + inner(x) + _scaled.__wrapped__(x), _scaled.__name__, _scaled.__qualname__, _scaled.__doc__,
            _scaled.tag, inspect.unwrap(_scaled).__name__)


@case(inputs=lambda: torch.randn(4))
def unwrap_and_call(x):
    base = inspect.unwrap(_scaled)
    return base(x) * 2 + _scaled.__wrapped__.__wrapped__.__wrapped__(x)


def _double(a):
    """Doubles."""
    return a * 2


_double.meta = {"k": 1}


@case(inputs=lambda: torch.randn(4))
def wraps_made_in_the_frame_two_deep(x):
    outer = _plus_one(_times(2)(_double))
    y = outer(x)
    if outer.__wrapped__.__wrapped__ is _double and outer.meta["k"] == 1:
        y = y + outer.__wrapped__(x)
    return y, outer.__name__, outer.__doc__, outer.__qualname__, inspect.unwrap(outer) is _double


@case(inputs=lambda: torch.randn(4))
def update_wrapper_in_the_frame(x):
    def base(a, b=1.0):
        """Base."""
        return a - b

    def wrapper(*args, **kwargs):
        return base(*args, **kwargs) * 3

    functools.update_wrapper(wrapper, base, assigned=("__name__", "__doc__"), updated=())
    w2 = functools.wraps(wrapper)(lambda a: wrapper(a, b=2.0))
    return (w2(x) + wrapper.__wrapped__(x), wrapper.__name__, w2.__name__, w2.__doc__,
            w2.__wrapped__.__wrapped__ is base, "__wrapped__" in w2.__dict__)


@case(inputs=lambda: torch.randn(4))
def decorator_applied_in_the_frame_to_a_nested_function(x):
    scale = x.cos()

    @_plus_one
    @_tagged
    def inner(a):
        return a * scale

    return inner(x) + inner.__wrapped__(x), inner.tag, inner.__name__, inner.__wrapped__.__qualname__


# -- a dataclass's __init__ replaced by a wrapper --------------------------------------------------

def _checked_init(cls):
    original = cls.__init__

    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.checked = True

    cls.__init__ = __init__
    return cls


@_checked_init
@dataclasses.dataclass
class _Point:
    x: torch.Tensor
    y: float = 1.0

    def norm(self):
        return self.x * self.y


class _PostInitMeta(type):
    def __init__(cls, name, bases, namespace):
        super().__init__(name, bases, namespace)
        if "__init__" in namespace:  # (the class statement's own; dataclass sets it after)
            return

    def __setattr__(cls, name, value):
        if name == "__init__":
            original = value

            @functools.wraps(original)
            def wrapped_init(self, *args, **kwargs):
                original(self, *args, **kwargs)
                self.count = len(args) + len(kwargs)

            value = wrapped_init
        super().__setattr__(name, value)


@dataclasses.dataclass
class _Sample(metaclass=_PostInitMeta):
    a: torch.Tensor
    b: torch.Tensor = None


@case(inputs=lambda: torch.randn(4))
def dataclass_init_wrapped_by_a_class_decorator(x):
    p = _Point(x, y=2.0)
    return p.norm() + p.checked, _Point.__init__.__name__, _Point.__init__.__wrapped__.__qualname__


@case(inputs=lambda: (torch.randn(4), _Point(torch.randn(4))))
def dataclass_init_wrapper_called_on_an_object_from_the_frame(x, p):
    q = _Point(x)
    _Point.__init__.__wrapped__(q, x * 2, 3.0)
    return q.norm() + p.norm(), q.checked, q.y


@case(inputs=lambda: torch.randn(4))
def dataclass_init_wrapped_by_a_metaclass_setattr(x):
    s = _Sample(x, b=x + 1)
    return s.a * s.b * s.count, _Sample.__init__.__wrapped__.__name__, _Sample.__init__.__name__


# -- more shapes of wrappers -----------------------------------------------------------------------

class _Traced:
    """A callable object that wraps a function, as functools.update_wrapper makes it look like it."""

    def __init__(self, fn, counted=False):
        functools.update_wrapper(self, fn)
        self.calls = 0 if counted else None

    def __call__(self, *args, **kwargs):
        if self.calls is not None:
            self.calls += 1
        return self.__wrapped__(*args, **kwargs)


@_Traced
def _traced_gelu(x):
    """Gelu."""
    return torch.nn.functional.gelu(x)


@case(inputs=lambda: torch.randn(4))
def callable_object_wrapper_made_at_import(x):
    return _traced_gelu(x) + _traced_gelu.__wrapped__(x), _traced_gelu.__name__, _traced_gelu.__doc__


@case(inputs=lambda: torch.randn(4))
def callable_object_wrapper_made_in_the_frame(x):
    def inner(a):
        """Inner."""
        return a.relu()

    traced = _Traced(inner, counted=True)
    y = traced(x) + traced(x * 2)
    return y * traced.calls, traced.__name__, traced.__doc__, traced.__wrapped__ is inner


@case(inputs=lambda: torch.randn(4))
def unwrap_with_a_stop(x):
    stopped = inspect.unwrap(_scaled, stop=lambda f: hasattr(f, "tag"))
    return stopped(x), stopped.tag, stopped is _scaled.__wrapped__.__wrapped__


class _Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    @_plus_one
    def forward(self, x):
        return self.lin(x)


class _Child(_Block):
    @_times(2)
    def forward(self, x):
        return super().forward(x) + _Block.forward.__wrapped__(self, x)


@case(inputs=lambda: torch.randn(2, 4))
class WrappedMethodsThroughSuper(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.block = _Child()

    def forward(self, x):
        return self.block(x) + self.block.forward.__wrapped__(self.block, x)


@case(inputs=lambda: torch.randn(4))
def wrapper_dict_shares_the_wrapped_functions_values(x):
    outer = _plus_one(_double)
    first = outer.meta["k"]
    outer.meta["k"] = first + 1  # the same dict object as _double.meta (wraps copies __dict__ shallowly)
    y = outer(x) * _double.meta["k"]
    _double.meta["k"] = first
    return y, outer.meta is _double.meta

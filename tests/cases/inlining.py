"""Corpus: calls to user Python code, inlined into the caller's graph (functions, closures,
methods, properties, super(), decorators, partials, recursion, closures over an inlined call's
variables that escape the frame)."""

import functools
import inspect

import torch

from pyframe.debug.cases import Inputs, case


def _affine(x, scale=2.0, *, shift=1.0):
    return x * scale + shift


def _scaled(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs) * 0.5
    return wrapper


@_scaled
def _cos_plus(x, y):
    return torch.cos(x) + y


class _Shape:
    def __init__(self, weight):
        self.weight = weight

    @property
    def doubled(self):
        return self.weight * 2

    def apply(self, x):
        return x * self.weight + self.doubled


class _Shifted(_Shape):
    def apply(self, x):
        return super().apply(x) - 1


_SHAPE = _Shifted(torch.full((4,), 0.5))
_CLAMP01 = functools.partial(torch.clamp, min=0.0, max=1.0)


def _depth(x, n):
    return x if n == 0 else _depth(torch.sin(x), n - 1)


@case(inputs=lambda: torch.randn(4))
def defaults_and_keywords(x):
    return _affine(x) + _affine(x, 3.0, shift=-1.0)


@case(inputs=lambda: torch.randn(4))
def star_args_and_kwargs(x):
    args, kwargs = (x, 1.5), {"shift": 0.25}
    return _affine(*args, **kwargs)


@case(inputs=lambda: (torch.randn(4), torch.randn(4)))
def decorated_with_wraps(x, y):
    return _cos_plus(x, y)


@case(inputs=lambda: torch.randn(4))
def nested_function_and_lambda(x):
    def inner(y, k=2):
        return y * k
    square = lambda t: t * t  # noqa: E731
    return inner(x) + square(x) + inner(x, k=3)


@case(inputs=lambda: torch.randn(4))
def closure_with_nonlocal(x):
    total = x

    def add(v):
        nonlocal total
        total = total + v

    add(x.sin())
    add(x.cos())
    return total


@case(inputs=lambda: torch.randn(4))
def recursion(x):
    return _depth(x, 4)


@case(inputs=lambda: torch.randn(4))
def method_property_and_super(x):
    return _SHAPE.apply(x)


@case(inputs=lambda: (torch.randn(4), torch.randn(4)))
def global_partial(x, y):
    return _CLAMP01(x + y)


@case(inputs=lambda: torch.randn(4))
def partial_made_in_frame(x):
    scale = functools.partial(torch.mul, other=2.0)
    return scale(x) + functools.partial(_affine, shift=0.0)(x)


@case(inputs=lambda: Inputs((torch.randn(4),), {"scale": 0.5}))
def keyword_only_forwarded(x, **options):
    return _affine(x, options["scale"]) + _affine(x, **{"shift": options.get("shift", 2.0)})


@torch.no_grad()
def _ema(average, x, decay=0.9):
    return average * decay + x * (1 - decay)


@case(inputs=lambda: (torch.randn(4, requires_grad=True), torch.randn(4)))
def no_grad_decorated_helper(x, y):
    return _ema(x.relu(), y) + x


def _accumulate(x):
    total = x
    scale = 1.0

    def add(v):
        nonlocal total
        total = total + v * scale

    def rescale(k):
        nonlocal scale
        scale = k
        add(x)

    add(x.sin())
    rescale(2.0)
    add(x.cos())
    return total


@case(inputs=lambda: torch.randn(4))
def nested_functions_assign_each_others_cells(x):
    return _accumulate(x) * 2


class _Calls:
    """A result holding functions: equal to another when calling them gives equal values."""

    def __init__(self, *fns):
        self.fns = fns

    def __eq__(self, other):
        return isinstance(other, _Calls) and len(self.fns) == len(other.fns) and \
            all(torch.allclose(a(), b()) for a, b in zip(self.fns, other.fns))


def _make_scaler(x):
    y = x + 1

    def scaled():
        return y * 2

    return scaled


@case(inputs=lambda: torch.randn(4))
def closure_over_inlined_call_returned(x):
    """`scaled` closes over `y`, a variable of the inlined `_make_scaler`: returned, it gets a real cell."""
    scaled = _make_scaler(x)
    return scaled() + 1, _Calls(scaled)


class _Box:
    fn = None

    def __eq__(self, other):
        if not isinstance(other, _Box) or (self.fn is None) != (other.fn is None):
            return False
        return self.fn is None or torch.allclose(self.fn(), other.fn())


@case(inputs=lambda: (torch.randn(4), [], {}, _Box()))
def closures_over_inlined_calls_stored(x, fns, table, box):
    first = _make_scaler(x)
    fns.append(first)
    table["second"] = _make_scaler(x * 2)
    box.fn = first
    return x.cos(), _Calls(*fns, *table.values()), box


def _make_bumper(start):
    count = start

    def bump():
        nonlocal count
        count = count + 1
        return count

    def peek():
        return count

    return bump, peek


@case(inputs=lambda: torch.randn(4))
def escaping_closures_share_a_made_cell(x):
    """`bump` (traced) changes the cell `peek` returns with: the cell made for it holds the new value."""
    bump, peek = _make_bumper(x)
    bump()
    return peek() * 2, _Calls(peek)


class _Base:
    def __init__(self, t):
        super().__init__()
        self.t = t


class _Derived(_Base):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.k = 2.0


class _Explicit:
    def __init__(self, v):
        super(_Explicit, self).__init__()
        self.v = v


@case(inputs=lambda: torch.randn(4))
def super_init_reaches_object(x):
    """`super().__init__()` of a class deriving from object is object.__init__: nothing to trace."""
    a, b, c = _Base(x), _Derived(x * 2), _Explicit(3.0)
    return a.t + b.t * b.k + c.v


def _tagged(tag):
    def deco(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            return fn(*args, **kwargs) + tag
        return wrapper
    return deco


@case(inputs=lambda: torch.randn(4))
def wraps_chain_made_while_tracing(x):
    """A chain of functools.wraps decorators made in the trace around torch.cos: the wrappers are
    inlined (their `__module__`, copied from torch.cos, makes them no torch op)."""
    around_torch = _tagged(1.0)(_tagged(2.0)(torch.cos))
    return around_torch(x)


@case(inputs=lambda: torch.randn(4))
def wraps_chain_followed_back(x):
    """`__wrapped__` followed back to the function a decorator of the module wraps."""
    inner = _cos_plus
    while hasattr(inner, "__wrapped__"):
        inner = inner.__wrapped__
    return inner(x, x)


def _signature_size(fn):
    return len(inspect.signature(fn).parameters)


@case(inputs=lambda: (torch.randn(4), _Shape(3.0)))
def signature_of_a_bound_method(x, shape):
    """inspect.signature of a function and of a bound method, answered from guarded facts."""
    if _signature_size(shape.apply) == 1 and _signature_size(_affine) == 3:
        return shape.apply(x)
    return x

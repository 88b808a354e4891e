"""Corpus: Python objects the traced code works with: operators defined by user classes,
__getattr__ fallbacks, dict subclasses used as configs, closures that keep state between calls,
annotations evaluated at def time, exceptions raised and caught."""

import collections
import collections.abc
import dataclasses
import functools
import types
import typing

import torch

from pyframe.debug.cases import case


class Vec:
    """A value class whose operators build new instances (their methods are inlined)."""

    def __init__(self, val):
        self.val = val

    def __add__(self, other):
        return Vec(self.val + other.val)

    def __mul__(self, other):
        if isinstance(other, (int, float)):
            return Vec(self.val * other)
        return Vec(self.val * other.val)

    def __rmul__(self, other):
        return Vec(self.val * other)

    def __neg__(self):
        return Vec(-self.val)


@case(inputs=lambda: (torch.randn(4), torch.randn(4)))
def user_class_operators(a, b):
    v = -(Vec(a) + Vec(b) * Vec(a)) * 2
    w = 3 * Vec(b)
    return (v + w).val


class AttrDict(dict):
    def __getattr__(self, name):
        return self[name]


class Defaults:
    scale = 2.0

    def __init__(self):
        self.shift = 1.0

    def __getattr__(self, name):
        return 0.5


DEFAULTS = Defaults()


@case(inputs=lambda: (AttrDict(offset=3.0, gain=2.0), torch.randn(4)))
def getattr_fallbacks(cfg, x):
    return x * cfg.gain + cfg.offset + DEFAULTS.scale - DEFAULTS.shift + DEFAULTS.missing


def _make_counter(start):
    total = torch.full((4,), start)

    def bump(step):
        nonlocal total
        total = total + step
        return total

    return bump


@case(inputs=lambda: torch.randn(4))
class ClosureCellWrittenByInlinedCall(torch.nn.Module):
    """The counter's cell outlives the call: its new value is stored after the graph runs."""

    def __init__(self):
        super().__init__()
        self.bump = _make_counter(0.0)

    def forward(self, x):
        first = self.bump(x)
        return first + self.bump(1.0), self.bump.__closure__[0].cell_contents


@case(inputs=lambda: torch.randn(4))
def annotations_and_nested_defaults(x):
    def scale(y: typing.List[torch.Tensor], k: typing.Optional[float] = None, bias=x * 2):
        return y[0] * (k or 1.0) + bias
    return scale([x], 3.0) + scale([x])


@case(inputs=lambda: torch.randn(4))
def exception_caught_in_the_frame(x):
    table = {"a": x + 1}
    try:
        y = table["missing"]
    except KeyError as e:
        y = table["a"] * len(e.args)
    try:
        raise ValueError("bad", 3)
    except (TypeError, ValueError) as e:
        y = y + e.args[1]
    return y


ACTIVATIONS = frozenset([torch.relu, torch.tanh])


@case(inputs=lambda: torch.randn(4))
def imports_ids_and_sets_of_functions(x):
    import torch.nn.functional as F
    from math import pi

    act = torch.relu
    y = act(x) if act in ACTIVATIONS else F.gelu(x)
    return y * pi + (id(act) == id(torch.relu))



@case(inputs=lambda: torch.randn(5))
def import_inside_function(x):
    """An `import` statement in the body, between two tensor ops: the module is looked up."""
    y = x.sin()
    import math

    return y * math.pi


class _Marker:
    """No __eq__ anywhere on its MRO: `==` is identity."""


_MARKER = _Marker()


@case(inputs=lambda: torch.randn(4))
def default_equality_is_identity(x):
    fresh = _Marker()
    if fresh == None:  # noqa: E711
        x = x - 100
    if fresh != _Marker():
        x = x.sin()
    if _MARKER == _MARKER and fresh != _MARKER and not (fresh == 3):
        x = x + 1
    return x


@dataclasses.dataclass
class _Settings:
    """A config object: fields, and a class-level default (not a field)."""

    scale: float = 1.0
    dropout = 0.0


_Scaled = collections.namedtuple("_Scaled", "value scale")


@case(inputs=lambda: (torch.randn(4), _Settings(scale=2.0), types.SimpleNamespace(bias=1.0),
                      _Scaled(torch.randn(4), 3.0)))
def getattr_default_and_hasattr(x, settings, ns, scaled):
    """An attribute the object does not have gives getattr's default (guarded: hasattr is False)."""
    x = x * getattr(settings, "scale", 1.0) + getattr(settings, "shift", 0.5) + getattr(settings, "dropout", 1.0)
    x = x + getattr(ns, "bias", 0.0) - getattr(ns, "gain", 2.0)
    if hasattr(scaled, "value") and not hasattr(scaled, "offset"):
        x = x + scaled.value * scaled.scale
    return x


class _Rows:
    def __init__(self, t):
        super().__init__()
        self.t = t

    def __len__(self):
        return self.t.shape[0]


@case(inputs=lambda: torch.randn(3, 4))
def len_of_user_class_from_tensor_metadata(x):
    """`__len__` returns a size from the tensor's metadata: a constant under static shapes."""
    rows = _Rows(x)
    return x * len(rows) + len(_Rows(x[0]))


class _AliasedConfig:
    """A config whose aliases are resolved by its own __getattribute__ / __setattr__ (both end in
    object's through super()), as Hugging Face's configs resolve `attribute_map`."""

    aliases = {"width": "hidden_size"}

    def __init__(self, **values):
        for name, value in values.items():
            setattr(self, name, value)

    def __getattribute__(self, key):
        if key != "aliases" and key in super().__getattribute__("aliases"):
            key = super().__getattribute__("aliases")[key]
        return super().__getattribute__(key)

    def __setattr__(self, key, value):
        if key in super().__getattribute__("aliases"):
            key = super().__getattribute__("aliases")[key]
        super().__setattr__(key, value)


class _Activations(collections.abc.Mapping):
    """A mapping (not a dict) whose `in`, len and iteration are its own methods."""

    _table = {"relu": torch.relu, "tanh": torch.tanh}

    def __getitem__(self, key):
        return self._table[key]

    def __iter__(self):
        return iter(self._table)

    def __len__(self):
        return len(self._table)


@case(inputs=lambda: (torch.randn(4), _AliasedConfig(width=2.0, act="tanh")))
def attribute_protocol_of_configs(x, config):
    """Reads through a class's own __getattribute__, missing attributes (getattr's default,
    hasattr), `in` / len / `for` through a Mapping's methods, vars() of an object made here."""
    table = _Activations()
    if config.act in table and not hasattr(config, "dropout"):
        x = table[config.act](x) * config.width
    for name in table:
        x = x + table[name](x) * getattr(config, f"{name}_scale", 0.5)
    made = _Rows(x)
    return x * len(table) + len(vars(made))


class _Span(typing.NamedTuple):
    start: torch.Tensor
    stop: torch.Tensor
    weight: float = 1.0

    @property
    def width(self):
        return self.stop - self.start

    def scaled(self, k):
        return self.width * self.weight * k

    def shifted(self, d):
        return self._replace(start=self.start + d, stop=self.stop + d)


@case(inputs=lambda: (_Span(torch.randn(4), torch.randn(4), 2.0),))
def namedtuple_class_methods_and_properties(span):
    """A typing.NamedTuple's own methods and properties are inlined, on one read from the frame and
    on one made while tracing."""
    moved = span.shifted(1.0)
    made = _Span(span.start * 2, span.stop, 0.5)
    return span.scaled(3) + moved.width + made.scaled(1), made.weight


@case(inputs=lambda: torch.randn(4))
def exception_context_and_suppression(x):
    """An exception raised while another is handled is chained to it (__context__); `raise ... from
    None` sets __suppress_context__, `from e` sets __cause__ too."""
    try:
        try:
            {}["missing"]
        except KeyError:
            raise ValueError("plain")
    except ValueError as e:
        chained = isinstance(e.__context__, KeyError) and not e.__suppress_context__
    try:
        try:
            raise KeyError("a")
        except KeyError:
            raise ValueError("b") from None
    except ValueError as e:
        hidden = e.__suppress_context__ and e.__cause__ is None and e.__context__ is not None
    return x * chained + hidden


class _Scaler:
    """A method wrapped by functools.lru_cache: the wrapper, stored on the class, binds like a
    function (transformers' Logger.warning_once)."""

    @functools.lru_cache(None)
    def factor(self, n):
        return n * 2


_SCALER = _Scaler()


@case(inputs=lambda: torch.randn(3))
def lru_cache_method_of_an_object(x):
    """The call traces the wrapped function, as torch._dynamo does, the cache not consulted."""
    return x * _SCALER.factor(3) + _Scaler().factor(1)

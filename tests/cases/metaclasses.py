"""Corpus: classes whose metaclass is a Python subclass of `type`.

A metaclass decides how its classes are called (`__call__`, type.__call__'s `__new__`/`__init__`
protocol), read and written (`__getattr__`, `__setattr__`, properties and methods of the metaclass),
and tested (`__instancecheck__`, `__subclasscheck__`); instances of those classes behave as any
instance. The programs make instances in the frame and take them as inputs, of plain classes, of
dataclasses whose `__init__` the metaclass wraps, and of dict and list subclasses. All of them are
one graph in torch._dynamo.
"""

import abc
import collections
import dataclasses
import functools

import torch

from pyframe.debug.cases import case


# -- a metaclass that wraps the __init__ @dataclass sets (transformers 5.24's ModelOutput shape) ---
def _rename_old_keys(kwargs):
    if "old" in kwargs:
        kwargs["new"] = kwargs.pop("old")


class _RenamingMeta(type):
    """Wraps every `__init__` set on its classes (the one @dataclass sets after the class statement
    too) so that the keyword `old` reaches it as `new`."""

    def __setattr__(cls, name, value):
        if name == "__init__":
            init = value

            @functools.wraps(init)
            def __init__(self, *args, **kwargs):
                _rename_old_keys(kwargs)
                init(self, *args, **kwargs)

            value = __init__
        super().__setattr__(name, value)


class _Output(collections.OrderedDict, metaclass=_RenamingMeta):
    """An ordered dict whose fields are also attributes, kept in step by __setattr__/__setitem__."""

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is not None:
                self[field.name] = value

    def __setattr__(self, name, value):
        if name in self.keys() and value is not None:
            super().__setitem__(name, value)
        super().__setattr__(name, value)

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)

    def to_tuple(self):
        return tuple(self[k] for k in self.keys())


@dataclasses.dataclass
class _HiddenOutput(_Output):
    hidden: torch.Tensor = None
    new: torch.Tensor = None
    extra: torch.Tensor = None


@case(inputs=lambda: torch.randn(4, 3))
def dataclass_output_whose_metaclass_wraps_init(x):
    out = _HiddenOutput(hidden=x.relu(), old=x * 2)
    out.extra = x - 1
    return out.hidden + out["new"] + out.extra, len(out), list(out.keys()), out.to_tuple()[1] + 1


@case(inputs=lambda: (_HiddenOutput(hidden=torch.randn(3), new=torch.randn(3)),))
def dataclass_output_of_a_metaclass_passed_in(out):
    return out.hidden * out["new"], "extra" in out, type(out).__name__


# -- metaclass __call__, methods, properties and __getattr__ read through the class --------------
class _Registry(type):
    """Answers unknown class attributes, and gives its classes a label and a factory."""

    scales = ("scale", "gain")

    def __getattr__(cls, name):
        if name.startswith("scale") or name == "gain":
            return 3.0
        raise AttributeError(name)

    @property
    def label(cls):
        return cls.__name__.lower()

    def make_default(cls):
        return cls(1.0)


class _Scaler(metaclass=_Registry):
    def __init__(self, k):
        self.k = k

    def __call__(self, x):
        return x * self.k


@case(inputs=lambda: torch.randn(5))
def metaclass_getattr_property_and_method(x):
    s = _Scaler(2.0)
    d = _Scaler.make_default()
    return s(x) * _Scaler.scale + d(x), _Scaler.label, hasattr(_Scaler, "missing"), _Scaler.scales


class _Counted(type):
    """type.__call__'s protocol by hand: __new__, then __init__ if __new__ made an instance."""

    def __call__(cls, *args, **kwargs):
        obj = cls.__new__(cls)
        if isinstance(obj, cls):
            obj.__init__(*args, **kwargs)
        return obj


class _Pair(metaclass=_Counted):
    def __init__(self, a, b=1):
        self.a, self.b = a, b

    def total(self, x):
        return x * self.a + self.b


@case(inputs=lambda: torch.randn(5))
def metaclass_call_runs_new_then_init(x):
    p = _Pair(3, b=2)
    return p.total(x), isinstance(p, _Pair), type(p) is _Pair


# -- __instancecheck__ / __subclasscheck__ of a metaclass ------------------------------------------
class _Duck(type):
    """isinstance/issubclass answered by the presence of a `quack` method."""

    def __instancecheck__(cls, obj):
        return hasattr(type(obj), "quack")

    def __subclasscheck__(cls, sub):
        return hasattr(sub, "quack")


class _Quacker(metaclass=_Duck):
    pass


class _Mallard:
    def quack(self):
        return 2


class _Stone:
    pass


@case(inputs=lambda: (torch.randn(5), _Mallard(), _Stone()))
def metaclass_instancecheck_and_subclasscheck(x, bird, stone):
    a = isinstance(bird, _Quacker)
    b = isinstance(stone, _Quacker)
    c = issubclass(_Mallard, _Quacker)
    d = isinstance(_Mallard(), (_Stone, _Quacker))
    return x * (a + 2 * b + 4 * c + 8 * d), a, b, c, d


class _Shape(abc.ABC):
    @abc.abstractmethod
    def area(self):
        ...


class _Square:
    def __init__(self, s):
        self.s = s

    def area(self):
        return self.s * self.s


_Shape.register(_Square)


@case(inputs=lambda: (torch.randn(5), _Square(3)))
def abc_virtual_subclass_passed_in_and_made(x, sq):
    made = _Square(2)
    return x * sq.area() + made.area(), isinstance(sq, _Shape), isinstance(made, _Shape), issubclass(_Square, _Shape)


# -- a metaclass's __setattr__ on class attributes, and what __init_subclass__/__set_name__ made ---
class _Clamped(type):
    """Class attributes named `limit` are stored clamped to [0, 10]."""

    def __setattr__(cls, name, value):
        if name == "limit":
            value = max(0, min(10, value))
        super().__setattr__(name, value)


class _Limits(metaclass=_Clamped):
    limit = 5


@case(inputs=lambda: torch.randn(5))
def metaclass_setattr_on_a_class_attribute_read_back(x):
    y = x * _Limits.limit
    return y + 1, _Limits.limit


class _Field:
    def __set_name__(self, owner, name):
        self.name = "_" + name

    def __get__(self, obj, owner=None):
        return self if obj is None else getattr(obj, self.name) * 2

    def __set__(self, obj, value):
        setattr(obj, self.name, value)


class _Auto(type):
    def __new__(meta, name, bases, ns):
        cls = super().__new__(meta, name, bases, ns)
        cls.fields = tuple(k for k, v in ns.items() if isinstance(v, _Field))
        return cls


class _Record(metaclass=_Auto):
    width = _Field()
    height = _Field()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.kind = cls.__name__.lower()

    def __init__(self, w, h):
        self.width, self.height = w, h


class _Rect(_Record):
    pass


@case(inputs=lambda: (torch.randn(5), _Rect(2, 3)))
def set_name_init_subclass_and_metaclass_new(x, given):
    r = _Rect(1, 4)
    return x * r.width + given.height, _Rect.fields, _Rect.kind, r._width


# -- list and dict subclasses with a metaclass of their own ----------------------------------------
class _Tagged(type):
    def __repr__(cls):
        return f"<tagged {cls.__name__}>"


class _Stack(list, metaclass=_Tagged):
    def push(self, v):
        super().append(v)
        return self


class _Table(dict, metaclass=_Tagged):
    def __getitem__(self, key):
        return super().__getitem__(key.lower())


@case(inputs=lambda: (torch.randn(5), _Table(a=torch.ones(5))))
def builtin_subclasses_whose_metaclass_is_a_type_subclass(x, table):
    st = _Stack([x])
    st.push(x + 1)
    t = _Table(b=x * 3)
    return sum(st) + t["B"] + table["A"], len(st), repr(_Stack)

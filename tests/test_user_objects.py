"""Instances made inside the traced frame: namedtuples, dataclasses and plain user classes.

Their construction is traced (the class's `__init__` inlined), so the tensor work around them stays in
one graph as in torch._dynamo; an instance that outlives the frame (returned, stored in a list the
caller holds, alive at a graph break) is built for real with the attributes the trace gave it.
"""
from __future__ import annotations

import collections
import copy
import dis
import dataclasses

import pytest
import torch
import torch._dynamo

import pyframe
from pyframe.debug.compare import CountingBackend

Pair = collections.namedtuple("Pair", "first second")
Scaled = collections.namedtuple("Scaled", "value scale", defaults=(2.0,))


@dataclasses.dataclass
class Stats:
    mean: torch.Tensor
    std: torch.Tensor
    count: int = 1

    def normalize(self, x):
        return (x - self.mean) / self.std


class Affine:
    def __init__(self, weight, bias=0.0):
        self.weight = weight
        self.bias = bias

    @property
    def doubled(self):
        return self.weight * 2

    def __call__(self, x):
        return x * self.weight + self.bias


class ShiftedAffine(Affine):
    def __init__(self, weight, shift):
        super().__init__(weight, bias=shift)

    def __call__(self, x):
        return super().__call__(x) + self.doubled


def namedtuple_fields(x):
    p = Pair(x.sin(), second=x.cos())
    s = Scaled(p.first)
    first, second = p
    return first + second * s.scale + s.value


def dataclass_method(x):
    stats = Stats(x.mean(), x.std())
    return stats.normalize(x) * stats.count


def class_with_super_and_property(x):
    layer = ShiftedAffine(x.abs(), shift=1.0)
    return layer(x) + Affine(3.0)(x)


def returned_objects(x):
    return Pair(x + 1, 2), Stats(x.mean(), x.std(), count=3), ShiftedAffine(x * 2, 0.5)


def _same(a, b) -> None:
    if isinstance(b, torch.Tensor):
        torch.testing.assert_close(a, b)
    elif isinstance(b, tuple):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif hasattr(b, "__dict__"):
        assert type(a) is type(b) and list(vars(a)) == list(vars(b))
        _same(tuple(vars(a).values()), tuple(vars(b).values()))
    else:
        assert a == b


@pytest.mark.parametrize("fn", [namedtuple_fields, dataclass_method, class_with_super_and_property,
                                returned_objects])
def test_instances_made_in_the_frame_stay_in_one_graph(fn):
    x = torch.randn(5)
    ours, dynamo = CountingBackend(), CountingBackend()
    result = pyframe.optimize(ours)(fn)(x)
    _same(result, fn(x))
    torch._dynamo.reset()
    torch._dynamo.optimize(dynamo)(fn)(x)
    assert len(ours.graphs) == len(dynamo.graphs) == 1
    assert [g.ops for g in ours.graphs] == [g.ops for g in dynamo.graphs]


def test_instance_alive_at_a_graph_break_is_built_for_the_resume_function():
    def fn(x):
        layer = Affine(x.sin(), bias=1.0)
        if x.sum() > 0:  # data dependent: a graph break with `layer` live
            return layer(x)
        return layer(-x)

    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(fn)
    for sign in (1.0, -1.0):
        x = torch.full((3,), sign)
        _same(compiled(x), fn(x))


def test_instance_stored_in_the_callers_list():
    def fn(x, out):
        out.append(Affine(x.relu()))
        return x * 2

    ours, expected = [], []
    x = torch.randn(4)
    _same(pyframe.optimize(CountingBackend())(fn)(x, ours), fn(x, expected))
    assert len(ours) == 1 and type(ours[0]) is Affine
    _same(ours[0], expected[0])


def test_class_with_its_own_setattr_is_inlined():
    """Its __setattr__ is traced (it ends in object.__setattr__); an instance that outlives the
    frame is built with object.__setattr__, not through the class's again."""
    class Logged:
        def __init__(self, value):
            self.value = value

        def __setattr__(self, name, value):
            object.__setattr__(self, name, value * 2)

    def fn(x):
        return Logged(x).value + 1

    def made(x):
        return Logged(x.cos())

    x = torch.randn(3)
    ours, dynamo = CountingBackend(), CountingBackend()
    torch.testing.assert_close(pyframe.optimize(ours)(fn)(x), fn(x))
    torch._dynamo.reset()
    torch._dynamo.optimize(dynamo)(fn)(x)
    assert len(ours.graphs) == len(dynamo.graphs) == 1
    torch.testing.assert_close(pyframe.optimize(CountingBackend())(made)(x).value, made(x).value)


class Stamped:
    """Its own __setattr__ (as a Hugging Face ModelOutput or a frozen dataclass): the stores the
    trace records are object.__setattr__ itself."""

    def __init__(self, a, b, tag):
        self.a = a
        self.b = b
        self.tag = tag

    def __setattr__(self, name, value):
        super().__setattr__(name, value)


class StampedWithSetter(Stamped):
    """`b` is a property with a setter: object.__setattr__ runs it, never the instance dict. The
    trace inlines the setter, so the instance dict it builds holds `_b`, a plain name."""

    @property
    def b(self):
        return self._b

    @b.setter
    def b(self, value):
        object.__setattr__(self, "_b", value * 3)


class StampedDict(collections.OrderedDict):
    """A dict subclass with attributes too (the shape of a ModelOutput)."""

    def __setattr__(self, name, value):
        super().__setattr__(name, value)


def _make_stamped(cls):
    def fn(x):
        obj = cls(x + 1, x * 2, "t") if cls is not StampedDict else cls(first=x)
        if cls is StampedDict:
            obj.a, obj.b, obj.tag = x + 1, x * 2, "t"
        return obj
    return fn


@pytest.mark.parametrize("cls", [Stamped, StampedWithSetter, StampedDict])
def test_an_object_made_in_the_frame_gets_its_attributes_in_one_store(cls):
    # Rebuilt after the graph with every attribute in its instance dict, in order: one store of
    # the whole `__dict__` where nothing but the instance dict takes the names (a property's
    # Python setter ran in the trace: what it stored is a plain name).
    fn = _make_stamped(cls)
    x = torch.randn(3)
    expected = fn(x)
    got = pyframe.optimize(CountingBackend())(fn)(x)
    assert type(got) is cls and list(vars(got)) == list(vars(expected))
    for name, value in vars(expected).items():
        if torch.is_tensor(value):
            torch.testing.assert_close(vars(got)[name], value)
        else:
            assert vars(got)[name] == value
    if cls is StampedDict:
        assert list(got) == ["first"] and torch.equal(got["first"], x)
    (entry,) = pyframe._C.get_cache_entries(fn.__code__)
    whole_dict_stores = [i for i in dis.get_instructions(entry.code) if i.opname == "LOAD_CONST" and i.argval == "__dict__"]
    assert len(whole_dict_stores) == 1


class Config:
    depth = 2

    def __init__(self, **values):
        self.__dict__.update(values)


class Fallback:
    def __getattr__(self, name):
        if name == "known":
            return 4.0
        raise AttributeError(name)

    @property
    def broken(self):
        raise AttributeError("broken")


class Intercepting:
    def __getattribute__(self, name):
        return 1.0 if name == "seen" else object.__getattribute__(self, name)


class PairWithDict(Pair):  # no __slots__: its instances have a __dict__ and may hold more
    pass


def test_getattr_default_for_a_missing_attribute_is_guarded():
    def fn(x, cfg):
        return x * getattr(cfg, "scale", 1.0) + getattr(cfg, "depth", 0)

    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(fn)
    x = torch.randn(3)
    cfg = Config()
    _same(compiled(x, cfg), x + 2)
    assert len(backend.graphs) == 1
    cfg.scale = 3.0  # now it has one: the HASATTR guard fails and the frame is traced again
    _same(compiled(x, cfg), x * 3 + 2)
    Config.depth = 5
    try:
        _same(compiled(x, Config(scale=3.0)), x * 3 + 5)
    finally:
        Config.depth = 2
    assert len(backend.graphs) == 3


def test_getattr_default_after_an_attribute_error_raised_while_tracing():
    def fn(x, obj):
        return x * getattr(obj, "known", 0.0) + getattr(obj, "unknown", 1.0) + getattr(obj, "broken", 2.0)

    x = torch.randn(3)
    backend = CountingBackend()
    _same(pyframe.optimize(backend)(fn)(x, Fallback()), fn(x, Fallback()))
    assert len(backend.graphs) == 1
    assert not pyframe.explain(fn)(x, Fallback()).break_reasons


def test_hasattr_on_namedtuples_and_what_cannot_be_decided():
    def fn(x, pair, obj):
        if hasattr(pair, "first") and not hasattr(pair, "third"):
            x = x + pair.first
        return x * getattr(obj, "seen", 2.0) + getattr(obj, "other", 3.0)

    x = torch.randn(3)
    backend = CountingBackend()
    _same(pyframe.optimize(backend)(fn)(x, Pair(1.0, 2.0), Config()), fn(x, Pair(1.0, 2.0), Config()))
    assert len(backend.graphs) == 1
    extended = PairWithDict(1.0, 2.0)
    extended.third = 3.0
    args = (x, extended, Config())
    assert pyframe.explain(fn)(*args).break_reasons  # an instance dict on a namedtuple: left to Python
    _same(pyframe.optimize(CountingBackend())(fn)(*args), fn(*args))
    # a Python __getattribute__ is inlined; the attribute it does not intercept is guarded to stay
    # missing (a new instance attribute recompiles)
    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(fn)
    obj = Intercepting()
    _same(compiled(x, Pair(1.0, 2.0), obj), fn(x, Pair(1.0, 2.0), obj))
    assert len(backend.graphs) == 1
    obj.other = 5.0
    _same(compiled(x, Pair(1.0, 2.0), obj), fn(x, Pair(1.0, 2.0), obj))
    assert len(backend.graphs) == 2


def test_class_attribute_is_getattr_static_of_a_class():
    """variables.base.class_attribute and static_attribute read the MRO's dicts directly for classes
    whose metaclasses keep type's `__dict__` (type, ABCMeta, EnumType); for every class, instance
    and name they must give what inspect.getattr_static gives, a metaclass that shadows `__dict__`
    included."""
    import abc
    import collections
    import enum
    import inspect

    from pyframe.translator.variables.base import class_attribute, static_attribute

    class Base(abc.ABC):  # a metaclass of its own, which keeps type's __dict__
        x = 1

    class Derived(Base):
        z = property(lambda self: 3)

    class Shadowing(type):
        __dict__ = {"x": "not the class's"}

    class Odd(metaclass=Shadowing):  # getattr_static's own path
        x = 4

    class Plain:
        __slots__ = ("a",)
        y = property(lambda self: 2)

    class Color(enum.Enum):
        RED = 1

    missing = object()
    classes = [torch.nn.Linear, torch.nn.Sequential, torch.nn.TransformerEncoderLayer, dict,
               collections.OrderedDict, int, type, Base, Plain, Color, torch.Tensor, torch.nn.Parameter,
               collections.namedtuple("Pair", "a b"), object, Derived, Odd, Shadowing, abc.ABCMeta]
    names = ["forward", "weight", "training", "__call__", "__dict__", "__class__", "__name__", "mro",
             "__init__", "items", "T", "_modules", "__getattr__", "a", "y", "x", "RED", "__mro__",
             "__doc__", "__module__", "__qualname__", "__slots__", "__getitem__", "absent"]
    for cls in classes:
        for name in names:
            assert class_attribute(cls, name, missing) is inspect.getattr_static(cls, name, missing), (cls, name)
    derived = Derived()
    derived.x = 5
    derived.__dict__["z"] = 6  # shadowed by the property, a data descriptor
    for obj in [derived, Odd(), Color.RED, torch.nn.Linear(2, 2), Plain()]:
        for name in [*names, "z", "value", "name", "_value_"]:
            assert static_attribute(obj, name, missing) is inspect.getattr_static(obj, name, missing), (obj, name)


class Registry:
    created = 0  # counted by every instance, through type(self)
    scale = 2.0

    def __init__(self):
        type(self).created += 1


def count_instances(x):
    Registry()
    return x + Registry.created


def scale_through_the_class(x, obj):
    return x * type(obj).scale + obj.__class__.scale


def test_a_class_attribute_read_through_type_of_an_object_is_guarded():
    """`type(self).created += 1` and `type(obj).scale`: the class comes from the object, and what
    the trace reads of it is guarded (once, its value was a constant of the first trace, and every
    later call stored and added that same value)."""
    runs = {}
    for engine in ("eager", "pyframe", "dynamo"):
        Registry.created, Registry.scale = 0, 2.0
        backend = CountingBackend()
        torch._dynamo.reset()
        fn = {"eager": lambda f: f, "pyframe": pyframe.optimize(backend),
              "dynamo": lambda f: torch.compile(f, backend=backend, dynamic=False)}[engine]
        counted, scaled = fn(count_instances), fn(scale_through_the_class)
        obj, results = Registry(), []
        for i in range(3):
            results.append(counted(torch.zeros(2)))
            Registry.scale = 2.0 + i
            results.append(scaled(torch.ones(2), obj))
        runs[engine] = results, Registry.created, len(backend.graphs)
    torch.testing.assert_close(runs["pyframe"][:2], runs["eager"][:2])
    assert runs["pyframe"][2] == runs["dynamo"][2] == 6  # one graph per value read, in both functions


def test_calling_an_object_inlines_its_class_call():
    """`obj(x)` for an instance of a class with a Python __call__ (spectral_norm's SpectralNorm
    forward pre-hook is one) was `call of UserObjectVariable`, a graph break: the class's
    __call__ is inlined, as torch._dynamo does; the hooked modules stay in the one graph."""
    class Scale:
        def __init__(self, factor):
            self.factor = factor

        def __call__(self, x):
            return x * self.factor

    scale = Scale(3.0)

    def fn(x):
        return scale(x + 1)

    backend = CountingBackend()
    x = torch.randn(4)
    torch.testing.assert_close(pyframe.optimize(backend)(fn)(x), fn(x))
    assert [g.ops for g in backend.graphs] == [("add", "mul")]

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.utils.spectral_norm(torch.nn.Linear(4, 4)), torch.nn.ReLU())
    eager_model = copy.deepcopy(model)
    backend = CountingBackend()
    torch.testing.assert_close(pyframe.optimize(backend)(model)(x[None]), eager_model(x[None]))
    torch.testing.assert_close(model[0].weight_u, eager_model[0].weight_u)  # the power iteration's update
    assert len(backend.graphs) == 1 and "linear" in backend.graphs[0].ops


# -- class attributes written in the frame -------------------------------------------------------


class _Counter:
    calls = 0
    step = 1


class _SubCounter(_Counter):
    pass


def test_class_counter_is_replayed_and_its_guard_recompiles_as_dynamo() -> None:
    """`Cls.calls += 1`: one graph, the store replayed after it; the trace read the old count
    (guarded), so the next call, seeing the new one, compiles again, as torch._dynamo does."""
    def fn(x, obj):
        _Counter.calls += _Counter.step
        return x * obj.calls, hasattr(obj, "calls")

    results = []
    for engine in ("eager", "pyframe", "dynamo"):
        _Counter.calls = 0
        backend = CountingBackend()
        run = fn if engine == "eager" else (pyframe.optimize(backend) if engine == "pyframe"
                                            else torch._dynamo.optimize(backend))(fn)
        torch._dynamo.reset()
        results.append(([run(torch.ones(2), _SubCounter())[0].tolist() for _ in range(3)], _Counter.calls,
                        len(backend.graphs)))
    eager, ours, dynamo = results
    assert ours[:2] == eager[:2] == ([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]], 3)
    assert ours[2] == dynamo[2] == 3


def test_class_attribute_store_hits_the_cache_while_the_class_is_unchanged() -> None:
    class Config:
        scale = 1.0

    def fn(x):
        Config.scale = 2.0
        return x * Config.scale

    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(fn)
    for _ in range(3):
        torch.testing.assert_close(compiled(torch.ones(2)), torch.full((2,), 2.0))
    assert len(backend.graphs) == 1 and Config.scale == 2.0
    Config.scale = 5.0  # the trace never read it: nothing to guard, the store is replayed
    torch.testing.assert_close(compiled(torch.ones(2)), torch.full((2,), 2.0))
    assert len(backend.graphs) == 1 and Config.scale == 2.0


def test_storing_a_function_into_a_class_is_left_to_python() -> None:
    class Shape:
        def area(self):
            return 1.0

    def fn(x, s):
        Shape.area = lambda self: 2.0  # changes every instance's method lookup
        return x * s.area()

    torch.testing.assert_close(pyframe.optimize(CountingBackend())(fn)(torch.ones(2), Shape()), torch.full((2,), 2.0))


class _Table(collections.UserDict):
    def __setitem__(self, key, value):
        super().__setitem__(key, value * 2)


def test_item_assignment_and_deletion_go_through_the_class_s_own_methods():
    """`obj[k] = v` and `del obj[k]` on a user class (a collections.UserDict subclass, its
    MutableMapping.update) inline the class's __setitem__/__delitem__, made in the frame or passed in."""
    def fn(x, passed):
        t = _Table()
        t["a"] = x
        t.update({"b": 1}, c=2)
        del t["c"]
        passed["q"] = 3
        return t["a"] + t["b"], sorted(t), t, passed

    x = torch.randn(3)
    assert not pyframe.explain(fn)(x, _Table()).break_reasons
    backend = CountingBackend()
    passed = _Table()
    out, keys, made, same = pyframe.optimize(backend)(fn)(x, passed)
    torch.testing.assert_close(out, x * 2 + 2)
    assert keys == ["a", "b"] and type(made) is _Table and made.data.keys() == {"a", "b"}
    assert same is passed and passed.data == {"q": 6} and len(backend.graphs) == 1


def test_class_attribute_read_through_an_instance_guards_the_instance_dict() -> None:
    class Config:
        scale = 1.0

    def fn(x, cfg):
        Config.scale = 2.0
        return x * cfg.scale

    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(fn)
    plain, shadowing = Config(), Config()
    shadowing.scale = 7.0
    torch.testing.assert_close(compiled(torch.ones(2), plain), torch.full((2,), 2.0))
    torch.testing.assert_close(compiled(torch.ones(2), Config()), torch.full((2,), 2.0))
    assert len(backend.graphs) == 1
    torch.testing.assert_close(compiled(torch.ones(2), shadowing), torch.full((2,), 7.0))  # its own
    assert len(backend.graphs) == 2


# -- metaclasses -----------------------------------------------------------------------------------


class _Tagging(type):
    def __call__(cls, *args, **kwargs):
        obj = super().__call__(*args, **kwargs)  # type.__call__: __init__ runs
        obj.tagged = True
        return obj


class _Tagged(metaclass=_Tagging):
    def __init__(self, w):
        self.w = w


def test_metaclass_call_through_super_is_inlined_and_guarded() -> None:
    """A metaclass's own __call__ ending in type's (torch._dynamo runs this frame as Python):
    one graph, the instance returned built for real; replacing the metaclass's __call__ recompiles."""
    def fn(x):
        obj = _Tagged(x * 2)
        return obj.w + obj.tagged, obj

    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(fn)
    for _ in range(2):
        result, obj = compiled(torch.ones(2))
        torch.testing.assert_close(result, torch.full((2,), 3.0))
        assert type(obj) is _Tagged and obj.tagged is True
    assert len(backend.graphs) == 1
    original = _Tagging.__call__

    def untagged(cls, *args):
        obj = type.__call__(cls, *args)
        obj.tagged = False
        return obj

    _Tagging.__call__ = untagged
    try:
        result, obj = compiled(torch.ones(2))
    finally:
        _Tagging.__call__ = original
    torch.testing.assert_close(result, torch.full((2,), 2.0))
    assert obj.tagged is False and len(backend.graphs) > 1  # (type.__call__ called directly: a break)


def _spec_of_a_tree_made_here(x):
    import torch.utils._pytree as pytree

    leaves, spec = pytree.tree_flatten({"a": [x, x + 1], "b": (x * 2, {"c": x - 1})})
    out = pytree.tree_unflatten([leaf.cos() for leaf in leaves], spec)
    return out["b"][1]["c"] + out["a"][1], spec, spec.num_leaves


def test_a_python_class_of_torch_built_from_traced_values_is_traced_as_a_user_class():
    """torch's own Python classes (pytree's TreeSpec, a frozen slots dataclass) are folded when
    their arguments are constants; built from values of the trace (a list of child specs made in
    the frame), their __init__ is inlined as a user class's, in one graph as in torch._dynamo.
    The spec returned is built for real and equals eager's."""
    from pyframe.debug.compare import count_breaks
    x = torch.randn(3)
    expected = _spec_of_a_tree_made_here(x)
    counts = {}
    for engine in ("pyframe", "dynamo"):
        pyframe.reset()
        torch._dynamo.reset()
        backend = CountingBackend()
        compiled = pyframe.optimize(backend)(_spec_of_a_tree_made_here) if engine == "pyframe" else \
            torch.compile(_spec_of_a_tree_made_here, backend=backend, dynamic=False)
        for _ in range(2):
            out, spec, n = compiled(x)
            torch.testing.assert_close(out, expected[0])
            assert spec == expected[1] and n == expected[2] == 4
            assert spec.num_nodes == expected[1].num_nodes
        counts[engine] = (len(backend.graphs), count_breaks(engine))
    assert counts["pyframe"] == counts["dynamo"] == (1, 0)


class _CountingIndex:
    """An index whose __index__ has an effect: each call gives the next stop."""

    def __init__(self) -> None:
        self.calls = 0

    def __index__(self) -> int:
        self.calls += 1
        return self.calls


def test_a_user_index_in_a_slice_runs_as_often_as_eagerly():
    # The slice `t[:i]` holds a user object: not a constant of the graph (fx cannot write it, and
    # propagating it would call __index__ while tracing); the subscript runs as Python.
    def fn(t, i):
        return t[:i] * 2

    t, ours, theirs = torch.arange(10.0), _CountingIndex(), _CountingIndex()
    compiled = pyframe.optimize(CountingBackend())(fn)
    for _ in range(3):
        torch.testing.assert_close(compiled(t, ours), fn(t, theirs))
    assert ours.calls == theirs.calls == 3

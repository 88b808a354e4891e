"""The attribute protocol of user objects: a class's own `__getattribute__` / `__setattr__` (inlined,
ending in object's through `super()`), `__getattr__` after an AttributeError, missing attributes
(getattr's default, hasattr, `except AttributeError`), `in` / `len` / `for` through the class's
methods, and `__dict__` / `vars()` / `id()` / `dataclasses.fields()`.

Each program runs eagerly, under pyframe and under torch._dynamo with the same counting backend.
"""
from __future__ import annotations

import collections.abc
import copy
import dataclasses
import sys

import torch
import torch._dynamo

import pyframe
from pyframe.debug.compare import CountingBackend


def _compare(fn, *args, graphs: int = 1):
    """fn under pyframe gives eager's result in `graphs` graphs, as many as torch._dynamo's."""
    ours, dynamo = CountingBackend(), CountingBackend()
    expected = fn(*args)
    torch.testing.assert_close(pyframe.optimize(ours)(fn)(*args), expected)
    torch._dynamo.reset()
    torch.testing.assert_close(torch._dynamo.optimize(dynamo)(fn)(*args), expected)
    assert len(ours.graphs) == graphs, pyframe.explain(fn)(*args).break_reasons
    assert len(dynamo.graphs) == graphs
    return ours


class Mapped:
    """A config whose reads and writes of aliases go to their canonical names."""

    aliases = {"width": "hidden"}

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


class Checked:
    """A mixin whose __getattribute__ looks at the instance dict first."""

    def __getattribute__(self, key):
        frozen = super().__getattribute__("__dict__").get("_frozen")
        if frozen is not None and key in frozen:
            raise AttributeError(f"{key} is frozen")
        return super().__getattribute__(key)


class MappedChecked(Mapped, Checked):
    pass


def test_own_getattribute_is_inlined_through_a_mixin_chain():
    def fn(x, cfg):
        return x * cfg.width + cfg.hidden + getattr(cfg, "scale", 0.5)

    cfg = MappedChecked(width=3.0)
    _compare(fn, torch.randn(4), cfg)


def test_missing_attribute_through_own_getattribute_is_guarded():
    def fn(x, cfg):
        if hasattr(cfg, "scale"):
            x = x * cfg.scale
        return x + getattr(cfg, "shift", 1.0)

    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(fn)
    cfg, x = MappedChecked(width=2.0), torch.randn(3)
    torch.testing.assert_close(compiled(x, cfg), fn(x, cfg))
    assert len(backend.graphs) == 1
    cfg.scale = 4.0  # the instance dict changes: traced again
    torch.testing.assert_close(compiled(x, cfg), fn(x, cfg))
    cfg._frozen = ("scale",)  # the __getattribute__ now refuses it: traced again
    torch.testing.assert_close(compiled(x, cfg), fn(x, cfg))
    assert len(backend.graphs) == 3



def _explained(fn, *args) -> tuple[list[str], list[str]]:
    """The guards and the graphs' code pyframe makes for fn(*args)."""
    out = pyframe.explain(fn)(*args)
    return out.guards, [gm.code for gm in out.graphs]


def test_super_reading_its_class_cell_again_keeps_guards_and_graphs(monkeypatch):
    # After the first super() of a method of a class, the trace takes that class from the
    # `__class__` cell without wrapping it again (CellOps.super_class): the same graphs, the same
    # guards as wrapping it at every super().
    from pyframe.translator.cells import CellOps

    def fn(x, cfg):
        return x * cfg.width + cfg.hidden * cfg.width + getattr(cfg, "scale", 0.5) + cfg.hidden

    args = (torch.randn(4), MappedChecked(width=3.0))
    once = _explained(fn, *args)
    monkeypatch.setattr(CellOps, "super_class", lambda tx: tx.read_free_var("__class__").as_python_constant())
    assert once == _explained(fn, *args)
    _compare(fn, *args)


class Plain:
    """A config whose own __getattribute__ only hands over to object's."""

    def __init__(self, **values):
        self.__dict__.update(values)

    def __getattribute__(self, key):
        return super().__getattribute__(key)


def _python_calls(fn, name: str) -> int:
    """How many Python frames of functions called `name` a call of fn runs."""
    calls = 0

    def profile(frame, event, arg):
        nonlocal calls
        calls += event == "call" and frame.f_code.co_name == name

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return calls


def test_a_cache_hit_runs_no_python_getattribute():
    # Guards and the transformed code read what the trace read as object's lookup gives it
    # (the class's __getattribute__ ends there): a cache hit runs none of the class's Python.
    def fn(x, cfg):
        return x * cfg.scale + cfg.bias

    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(fn)
    cfg, x = Plain(scale=2.0, bias=torch.randn(3)), torch.randn(3)
    expected = fn(x, cfg)
    torch.testing.assert_close(compiled(x, cfg), expected)
    assert _python_calls(lambda: compiled(x, cfg), "__getattribute__") == 0
    assert _python_calls(lambda: fn(x, cfg), "__getattribute__") == 2  # (eagerly: each read)
    cfg.scale = 3.0  # the instance dict changes: traced again, with the new value
    torch.testing.assert_close(compiled(x, cfg), fn(x, cfg))
    assert len(backend.graphs) == 2


def test_an_aliased_attribute_is_guarded_where_it_is_stored():
    def fn(x, cfg):
        return x * cfg.width  # `width` is stored as `hidden`

    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(fn)
    cfg, x = Mapped(width=2.0), torch.randn(3)
    torch.testing.assert_close(compiled(x, cfg), x * 2.0)
    cfg.hidden = 4.0
    torch.testing.assert_close(compiled(x, cfg), x * 4.0)
    Mapped.aliases = {"width": "other"}  # the class's map changes: `width` is read elsewhere
    try:
        cfg.other = 7.0
        torch.testing.assert_close(compiled(x, cfg), x * 7.0)
    finally:
        Mapped.aliases = {"width": "hidden"}
    assert len(backend.graphs) == 3


class Logged:
    """A __getattribute__ with an effect of its own: every read of a plain name is logged. (Dunder
    reads are not: CPython's isinstance reads `__class__` through it, and pyframe's trace calls
    isinstance on the objects it meets, as torch._dynamo's does.)"""

    def __init__(self, scale, log):
        self.scale, self.log = scale, log

    def __getattribute__(self, key):
        if key != "log" and not key.startswith("__"):
            super().__getattribute__("log").append(key)
        return super().__getattribute__(key)


def test_a_repeated_read_through_own_getattribute_sees_the_stores_between():
    # The second and third reads of `width` repeat the first unless something was stored in
    # between (attribute_protocol._inline_getattribute): here two stores, one through the alias.
    def fn(x, cfg):
        a = x * cfg.width
        cfg.hidden = cfg.width + 1.0
        b = x * cfg.width
        cfg.width = 10.0
        return a + b + x * cfg.width + x * cfg.width

    cfg, expected_cfg, x = Mapped(width=2.0), Mapped(width=2.0), torch.randn(3)
    expected = fn(x, expected_cfg)
    torch.testing.assert_close(pyframe.optimize(CountingBackend())(fn)(x, cfg), expected)
    assert vars(cfg) == vars(expected_cfg) == {"hidden": 10.0}


def test_a_getattribute_with_an_effect_runs_at_every_read():
    def fn(x, obj):
        return x * obj.scale + x * obj.scale

    obj, expected_obj, x = Logged(2.0, []), Logged(2.0, []), torch.randn(3)
    expected = fn(x, expected_obj)
    torch.testing.assert_close(pyframe.optimize(CountingBackend())(fn)(x, obj), expected)
    assert obj.log == expected_obj.log == ["scale", "scale"]


def test_own_setattr_store_is_replayed_once():
    def fn(x, cfg):
        cfg.width = 5.0  # the alias: stored as `hidden`
        return x * cfg.hidden

    cfg, expected_cfg, x = Mapped(width=1.0), Mapped(width=1.0), torch.randn(3)
    expected = fn(x, expected_cfg)
    torch.testing.assert_close(pyframe.optimize(CountingBackend())(fn)(x, cfg), expected)
    assert vars(cfg) == vars(expected_cfg) == {"hidden": 5.0}


def test_attribute_error_in_the_trace_is_caught():
    class Lazy:
        def __getattr__(self, name):
            if name.startswith("opt_"):
                return 2.0
            raise AttributeError(name)

    def fn(x, obj):
        try:
            scale = obj.missing
        except AttributeError:
            scale = obj.opt_scale
        return x * scale

    _compare(fn, torch.randn(3), Lazy())


class Registry(collections.abc.MutableMapping):
    """A mapping with class-wide entries and per-instance overrides (not a dict subclass)."""

    _shared = {"relu": torch.relu, "tanh": torch.tanh}

    def __init__(self):
        self._local = {}

    def __getitem__(self, key):
        if key in self._local:
            return self._local[key]
        return self._shared[key]

    def __setitem__(self, key, value):
        self._local[key] = value

    def __delitem__(self, key):
        del self._local[key]

    def __iter__(self):
        return iter({**self._shared, **self._local})

    def __len__(self):
        return len(self._shared.keys() | self._local.keys())


REGISTRY = Registry()


def test_contains_len_and_iteration_through_the_class_methods():
    def fn(x, name):
        if name not in REGISTRY or "gelu" in REGISTRY:
            return x
        for key in REGISTRY:
            x = x + REGISTRY[key](x)
        return x * len(REGISTRY)

    _compare(fn, torch.randn(3), "tanh")


class Counts(dict):
    """A dict subclass with its own `in`, len and iteration."""

    def __contains__(self, key):
        return super().__contains__(key.lower())

    def __len__(self):
        return super().__len__() * 10

    def __iter__(self):
        return iter(sorted(super().keys()))


def test_dict_subclass_with_its_own_contains_len_and_iter():
    def fn(x, counts):
        total = x * len(counts)
        for key in counts:
            total = total + counts[key]
        return total if "A" in counts else -total

    _compare(fn, torch.randn(3), Counts(b=2.0, a=1.0))


@dataclasses.dataclass
class Output:
    first: torch.Tensor
    second: torch.Tensor | None = None

    def present(self):
        return [f.name for f in dataclasses.fields(self) if self.__dict__.get(f.name) is not None]


def test_dict_of_an_object_made_in_the_trace_is_a_live_view():
    def fn(x):
        out = Output(x.sin())
        view = vars(out)
        names = out.present()
        out.second = x.cos()  # seen through the view read before
        view["first"] = view["first"] * 2  # and a store through the view seen as the attribute
        return out.first + view["second"], len(names), len(out.present())

    _compare(fn, torch.randn(3))


def test_dict_of_an_object_of_the_frame_shows_stores_of_the_trace():
    class Holder:
        def __init__(self):
            self.a = 1.0

    def fn(x, obj):
        obj.b = 2.0
        return x * obj.__dict__["a"] + obj.__dict__.get("b", 0.0) + len(vars(obj))

    obj, expected_obj, x = Holder(), Holder(), torch.randn(3)
    expected = fn(x, expected_obj)
    torch.testing.assert_close(pyframe.optimize(CountingBackend())(fn)(x, obj), expected)
    assert vars(obj) == vars(expected_obj)


def test_id_of_a_dict_of_the_frame_is_a_guarded_constant():
    def fn(x, table, other):
        return x + 1 if id(table) == id(other) else x - 1

    table = {"a": 1}
    for other in (table, {"a": 1}):
        torch.testing.assert_close(pyframe.optimize(CountingBackend())(fn)(torch.ones(2), table, other),
                                   fn(torch.ones(2), table, other))


def test_object_is_none_holds_for_any_object_of_its_type():
    class State:
        pass

    def fn(x, state):
        return x + 1 if state is not None else x - 1

    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(fn)
    for _ in range(3):  # a new object each call: its type decides, no recompile
        torch.testing.assert_close(compiled(torch.ones(2), State()), torch.ones(2) + 1)
    torch.testing.assert_close(compiled(torch.ones(2), None), torch.ones(2) - 1)
    assert len(backend.graphs) == 2


class Ladder:
    """A sequence by __len__ and __getitem__, with an __iter__ and a __reversed__ of its own."""

    def __init__(self, steps):
        self.steps = steps

    def __len__(self):
        return len(self.steps)

    def __getitem__(self, i):
        return self.steps[i] * 2

    def __iter__(self):
        return iter(self.steps)


class Backwards(Ladder):
    def __reversed__(self):
        return iter([10.0, 20.0])


def test_reversed_and_dict_of_user_objects_follow_their_protocols():
    """reversed() indexes from the end (or calls __reversed__), never __iter__; dict() and
    dict.update() read a mapping through keys() and obj[key], not as an iterable of pairs."""
    def fn(x):
        table = Registry()
        copied, updated = dict(table), {}
        updated.update(table)
        ladder = Ladder([1.0, 2.0, 3.0])
        return (x + sum(reversed(ladder)) + sum(reversed(Backwards([1.0]))) + sum(ladder),
                list(reversed(ladder)), sorted(copied), sorted(updated), {**table} == copied)

    x = torch.randn(3)
    result, expected = pyframe.optimize(CountingBackend())(fn)(x), fn(x)
    torch.testing.assert_close(result[0], expected[0])
    assert result[1:] == expected[1:]


class Settings:
    """Copied the default way (object's __reduce_ex__), with an own __setattr__ resolving aliases."""

    aliases = {"w": "width"}

    def __init__(self):
        self.width = 2.0
        self.names = ["a", "b"]
        self.table = {0: "x"}
        self.nested = Nested()

    def __setattr__(self, key, value):
        if key in super().__getattribute__("aliases"):
            key = super().__getattribute__("aliases")[key]
        super().__setattr__(key, value)


class Nested:
    def __init__(self):
        self.depth = 3


def test_deepcopy_of_a_user_object_and_delattr_of_the_copy():
    """The copy is a new instance with copied attributes (the original untouched); attributes of
    an object made in the trace can be deleted."""
    def fn(x, settings):
        clone = copy.deepcopy(settings)
        clone.names.append("c")
        clone.w = 5.0
        del clone.nested
        snapshot = copy.deepcopy(clone.__dict__)
        delattr(clone, "table")
        total = x * clone.width + len(settings.names) + len(clone.names) + settings.nested.depth
        return total, sorted(snapshot), hasattr(clone, "nested"), clone

    ours = CountingBackend()
    settings, expected_settings, x = Settings(), Settings(), torch.randn(3)
    result, expected = pyframe.optimize(ours)(fn)(x, settings), fn(x, expected_settings)
    torch.testing.assert_close(result[0], expected[0])
    assert result[1:3] == expected[1:3]
    assert type(result[3]) is Settings and vars(result[3]) == vars(expected[3])
    assert settings.names == ["a", "b"] and hasattr(settings, "nested")
    assert len(ours.graphs) == 1
    assert not pyframe.explain(fn)(x, Settings()).break_reasons


class _Shadowing:
    default = 5.0


class _Logged:
    def __init__(self):
        object.__setattr__(self, "log", [])

    def __delattr__(self, name):
        self.log.append("-" + name)
        object.__delattr__(self, name)


def _shadowing():
    obj = _Shadowing()
    obj.default, obj.w = 1.0, 3
    return obj


def test_del_of_an_attribute_of_an_object_passed_in_is_replayed_after_the_graph() -> None:
    """`del obj.attr` on an argument: one graph; later reads find the class's
    value or raise AttributeError in the trace; the deletion happens for real after the graph."""
    def fn(x, obj):
        del obj.default
        value = obj.default  # the class's, shadowed until now
        obj.tmp = x
        del obj.tmp          # stored, then deleted: nothing left to replay
        try:
            del obj.tmp
        except AttributeError:
            value = value + 1
        return x * value + hasattr(obj, "tmp") + len(vars(obj))

    objects, results, backend = [], [], CountingBackend()
    for run in (fn, pyframe.optimize(backend)(fn)):  # (torch._dynamo runs this one as Python)
        objects.append(_shadowing())
        results.append(run(torch.ones(2), objects[-1]))
    torch.testing.assert_close(results[1], results[0])
    assert vars(objects[0]) == vars(objects[1]) == {"w": 3}
    assert len(backend.graphs) == 1


def test_del_through_the_class_own_delattr_and_its_guard() -> None:
    def fn(x, obj):
        obj.a = x
        del obj.a
        return x + len(obj.log)

    objects, results, backend = [], [], CountingBackend()
    for run in (fn, pyframe.optimize(backend)(fn)):  # (torch._dynamo runs this one as Python)
        objects.append(_Logged())
        results.append(run(torch.ones(2), objects[-1]))
    torch.testing.assert_close(results[1], results[0])
    assert objects[0].log == objects[1].log == ["-a"] and not hasattr(objects[1], "a")
    assert len(backend.graphs) == 1

    def drop(x, obj):
        del obj.w
        return x + 1

    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(drop)
    compiled(torch.ones(2), _shadowing())
    compiled(torch.ones(2), _shadowing())
    assert len(backend.graphs) == 1  # a hit: the guard holds
    try:  # one without `w` fails the guard, and raises as Python does
        compiled(torch.ones(2), _Shadowing())
    except AttributeError:
        pass
    else:
        raise AssertionError("del of a missing attribute did not raise")


class _Counted:
    """`count` computed by its own __getattribute__ from a list it holds."""

    def __init__(self, items):
        self.items = items

    def __getattribute__(self, name):
        if name == "count":
            return len(object.__getattribute__(self, "items"))
        return object.__getattribute__(self, name)


def test_a_repeated_getattribute_read_sees_every_change_of_what_it_read():
    # The read is repeated while what it read is unchanged (SideEffects.remember_read): here a
    # list of the object's own, then a list the trace made and stored, changed without a store.
    counted = _Counted([1])

    def f(x):
        a = counted.count
        again = counted.count            # repeated: nothing changed
        counted.items = []               # a store on the object
        b = counted.count
        counted.items.append(1)          # the trace's own list, changed in place
        c = counted.count
        return x + a * 1000 + again * 100 + b * 10 + c

    x = torch.randn(2)
    expected = f(x)
    counted.items = [1]
    backend = CountingBackend()
    torch.testing.assert_close(pyframe.optimize(backend)(f)(x), expected)  # (1101 + x: not 1100)
    assert counted.items == [1] and len(backend.graphs) == 1


class _ClassLevel:
    """A descriptor that answers differently for the class and for its instances."""

    def __get__(self, obj, objtype=None):
        return objtype.base * 10 if obj is None else obj.k


class _Reads:
    base = 2
    level = _ClassLevel()

    def __init__(self, k):
        self.k = k


def test_a_descriptor_read_through_its_class_runs_its_get_with_no_instance(monkeypatch):
    def fn(x):
        return x * _Reads.level + _Reads(3).level

    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(fn)
    torch.testing.assert_close(compiled(torch.ones(2)), fn(torch.ones(2)))
    monkeypatch.setattr(_Reads, "base", 5)  # what __get__ read is guarded
    torch.testing.assert_close(compiled(torch.ones(2)), fn(torch.ones(2)))
    assert len(backend.graphs) == 2


class ConfigMixin(torch.nn.Module):
    def __getattr__(self, name):
        if "_internal" in self.__dict__ and name in self.__dict__["_internal"] and name not in self.__dict__:
            return self._internal[name]
        return super().__getattr__(name)


class Scaled(ConfigMixin):
    def __init__(self):
        super().__init__()
        self._internal = dict(scale=2.0)
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        return self.lin(x) * self.scale


def test_a_modules_dict_read_by_its_own_getattr_is_guarded():
    """`self.__dict__` of a module, read in its class's __getattr__: one graph, as
    torch._dynamo's; the config value and the dict's keys are guarded (a changed value, or an
    instance attribute that now shadows the config, recompiles with eager's result)."""
    model = Scaled()
    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(model)
    x = torch.randn(2, 3)
    torch.testing.assert_close(compiled(x), model(x))
    torch.testing.assert_close(compiled(x), model(x))
    assert len(backend.graphs) == 1
    model._internal["scale"] = 5.0
    torch.testing.assert_close(compiled(x), model(x))
    assert len(backend.graphs) == 2
    model.__dict__["scale"] = 7.0  # an instance attribute: found before __getattr__ runs
    torch.testing.assert_close(compiled(x), model(x))
    assert len(backend.graphs) == 3

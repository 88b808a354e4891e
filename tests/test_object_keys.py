"""Dicts keyed by objects that hash by identity: tensors, parameters, modules, functions, classes.

Each test runs the function eagerly and under pyframe and compares the results (and any state the
function mutates); the guard tests check what recompiles: a dict read from the frame is guarded by
its keys in order, by identity (`keys_by_id`), and tensors of the frame the trace compared as keys
by how they alias (`aliasing`). The C tests at the bottom drive the guard tree directly.
"""
from __future__ import annotations

import collections
import enum
import functools
import gc

import pytest
import torch

import pyframe
from pyframe import _C, convert_frame
from pyframe.debug.compare import CountingBackend, assert_same_result


def compile_count(fn, *calls, backend=None):
    """Run fn eagerly and under pyframe on each argument tuple; compare; return the graphs made."""
    backend = backend or CountingBackend()
    compiled = pyframe.optimize(backend)(fn)
    for args in calls:
        assert_same_result(compiled(*args), fn(*args))
    return len(backend.graphs)


def break_reasons(fn) -> list[str]:
    return [str(r.error) for r in convert_frame.records_for(fn.__code__) if r.error is not None]


def guard_texts(fn) -> list[str]:
    return [text for e in _C.get_cache_entries(fn.__code__) for text in e.guards.texts()]


# -- dicts made in the frame --------------------------------------------------------------------


def test_two_distinct_tensors_are_never_one_key():
    def fn(x):
        twin = x.clone()  # equal values, another object
        d = {x: 1, twin: 2, x.view(-1): 3}
        return len(d), d[x], d[twin], twin in d, x.sin() in d

    x = torch.ones(3)
    assert compile_count(fn, (x,), (torch.ones(3),)) == 1
    assert pyframe.optimize("eager")(fn)(x) == (3, 1, 2, True, False)
    assert not break_reasons(fn)


def test_tensor_arguments_as_keys_are_guarded_by_how_they_alias():
    def fn(x, y):
        d = {x: 1.0}
        d[y] = 2.0  # a second key, or the first one again
        return len(d), d[x] * x

    backend = CountingBackend()
    a, b = torch.randn(3), torch.randn(3)
    # fresh tensors never recompile; passing one tensor twice does, once
    assert compile_count(fn, (a, b), (torch.randn(3), torch.randn(3)), (a, a), (b, b), (b, a),
                         backend=backend) == 2
    assert pyframe.optimize(backend)(fn)(a, a)[0] == 1
    assert any(t.startswith("aliasing(L['x'], L['y']) == [0, 1]") or t.startswith("aliasing(L['y'], L['x']) == [0, 1]")
               for t in guard_texts(fn))


def test_keys_of_every_kind_mixed_with_constants_in_order():
    class Color(enum.Enum):
        RED = 1

    class Plain:
        pass

    lin = torch.nn.Linear(2, 2)
    marker = Plain()

    def helper():
        return 0

    def fn(x):
        y = x.cos()
        d = {1: "one", x: "x", lin: "lin", helper: "helper", torch.Tensor: "type", Color.RED: "red",
             y: "y", marker: "marker", len: "len", (1, "a"): "tuple", None: "none"}
        d[1.0] = "float one"  # 1 == 1.0 == True: the same key, which keeps its first object
        d[True] = "true"
        d[lin] = "lin again"
        return list(d.values()), [k for k in d if isinstance(k, (int, float))], d[True], d.get(y), d[x] + d[marker]

    x = torch.randn(2)
    assert compile_count(fn, (x,), (torch.randn(2),)) == 1
    assert not break_reasons(fn)


def test_dict_methods_on_tensor_keys():
    lin = torch.nn.Linear(3, 3)

    def fn(x):
        d = collections.OrderedDict()
        for p in lin.parameters():
            d[p] = p * 2
        d[x] = x
        d.move_to_end(lin.weight)
        first, _ = d.popitem(last=False)  # the bias
        missing = d.pop(x.sin(), None)
        d.setdefault(lin.bias, x + 1)
        del d[x]
        merged = {**d, "n": len(d)}
        merged.update([(x, 5)])
        return first is lin.bias, missing, list(merged)[-1] is x, len(merged), sum(v.sum() for v in d.values())

    assert compile_count(fn, (torch.randn(3),)) == 1
    assert not break_reasons(fn)


def test_a_missing_tensor_key_raises_key_error_in_the_trace():
    w = torch.nn.Parameter(torch.ones(2))

    def fn(x):
        d = {w: x}
        try:
            return d[x]
        except KeyError as e:
            return x + 1, e.args[0] is x

    assert compile_count(fn, (torch.randn(2),)) == 1


def test_dict_returned_and_across_a_graph_break_keeps_its_key_objects():
    def fn(x):
        y = x.cos()
        d = {x: x.sin(), y: 2, "k": 3}
        torch._dynamo.graph_break()
        return d, y

    x = torch.randn(3)
    d, y = pyframe.optimize("eager")(fn)(x)
    keys = list(d)
    assert keys[0] is x and keys[1] is y and keys[2] == "k"
    torch.testing.assert_close(d[x], x.sin())


def test_keys_that_do_not_hash_by_identity_break_the_graph_cleanly():
    class ByValue:
        def __init__(self, v):
            self.v = v

        def __eq__(self, other):
            return isinstance(other, ByValue) and other.v == self.v

        def __hash__(self):
            return hash(self.v)

    def fn(x, key):
        d = {key: x}
        return d[ByValue(1)] * 2

    compile_count(fn, (torch.randn(2), ByValue(1)))
    assert any("does not hash by identity" in r for r in break_reasons(fn))


def test_a_tensor_keyed_dict_passed_to_a_torch_function_breaks_cleanly():
    def fn(x):
        return torch.cat(list({x: 1, x.cos(): 2}.keys()) + [x])

    assert compile_count(fn, (torch.randn(2),)) == 1


# -- dicts read from the frame ------------------------------------------------------------------

P = torch.nn.Parameter(torch.ones(3))
Q = torch.nn.Parameter(torch.full((3,), 2.0))
STATE: dict = {}
TABLE = {int: "int", float: "float", torch.Tensor: "tensor"}


def _fresh_state():
    return {P: torch.zeros(3), Q: torch.zeros(3), "steps": torch.zeros(())}


def step(x):
    for p in (P, Q):
        STATE[p] = STATE[p] + p.detach() * x
    STATE["steps"] = STATE["steps"] + 1
    return STATE[Q].sum()


def test_a_global_dict_keyed_by_parameters_is_mutated_in_place(monkeypatch):
    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(step)
    x = torch.randn(3)
    monkeypatch.setitem(globals(), "STATE", _fresh_state())
    eager_state = STATE
    expected = [step(x) for _ in range(3)]
    monkeypatch.setitem(globals(), "STATE", _fresh_state())
    pf_state = STATE
    got = [compiled(x) for _ in range(3)]
    assert_same_result(got, expected)
    assert STATE is pf_state and list(pf_state)[:2] == [P, Q] and list(pf_state)[0] is P
    assert_same_result(pf_state, eager_state)
    assert len(backend.graphs) == 1  # the values change, the keys do not: no recompile
    texts = guard_texts(step)
    keys_guard = next(t for t in texts if t.startswith("keys_by_id(G['STATE'])"))
    assert f"[{id(P)}, {id(Q)}, 'steps']" in keys_guard and "Parameter(size=[3])" in keys_guard


def test_another_key_object_or_a_new_key_recompiles(monkeypatch):
    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(step)
    x = torch.randn(3)
    monkeypatch.setitem(globals(), "STATE", _fresh_state())
    compiled(x)
    compiled(x)
    assert len(backend.graphs) == 1
    other = torch.nn.Parameter(torch.ones(3))  # same metadata as P, another object
    monkeypatch.setitem(globals(), "STATE", {other: torch.zeros(3), Q: torch.zeros(3), "steps": torch.zeros(())})
    STATE[P] = torch.zeros(3)  # another key object, and a key more: recompiles, and the result follows
    state_copy = {k: v.clone() for k, v in STATE.items()}
    got = compiled(x)
    monkeypatch.setitem(globals(), "STATE", state_copy)
    assert_same_result(got, step(x))
    reasons = [r.reason for r in convert_frame.records_for(step.__code__)]
    assert any("keys_by_id(G['STATE'])" in r for r in reasons[1:]), reasons
    del STATE[P]
    with pytest.raises(KeyError):
        compiled(x)  # STATE[P] is missing now: eager raises too
    # (the KeyError, raised while tracing inside the loop, is a graph break in a loop: from then on
    # the frame runs as Python, as under torch._dynamo)
    assert convert_frame.records_for(step.__code__)[-1].status == "skipped_by_rule"


def test_a_key_that_died_fails_the_guard(monkeypatch):
    def fn(x):
        return sum(v for v in LOCAL_STATE.values()) + x

    t = torch.ones(2)
    monkeypatch.setitem(globals(), "LOCAL_STATE", {t: torch.ones(2)})
    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(fn)
    compiled(torch.ones(2))
    del t
    monkeypatch.setitem(globals(), "LOCAL_STATE", {torch.ones(2): torch.ones(2)})  # may reuse the id
    gc.collect()
    compiled(torch.ones(2))
    assert len(backend.graphs) == 2


def test_a_type_keyed_global_table_get():
    def fn(x, v):
        kind = TABLE.get(type(v), "other")
        return (x * 2 if kind == "int" else x + 1), kind, torch.Tensor in TABLE

    backend = CountingBackend()
    assert compile_count(fn, (torch.randn(2), 3), (torch.randn(2), 3), backend=backend) == 1
    assert compile_count(fn, (torch.randn(2), "s"), (torch.randn(2), 2.5), backend=backend) == 3
    assert any(t.startswith("keys_by_id(G['TABLE'])") for t in guard_texts(fn))
    assert not break_reasons(fn)


def test_a_frame_tensor_looked_up_in_a_frame_dict():
    table = {P: "p", Q: "q"}

    def fn(x, t):
        return x * len(table[t]) if t in table else x, table.get(t, "none")

    x = torch.randn(3)
    # P, Q or another tensor: the lookup depends on which tensor `t` is, and is guarded so
    compile_count(fn, (x, P), (x, Q), (x, torch.ones(3)), (x, torch.ones(3)), (x, P), (x, Q))
    entries = _C.get_cache_entries(fn.__code__)
    assert len(entries) == 3 and sum(e.hits for e in entries) == 3
    # (`table` is a closure variable: L['table']; the input x is in the same check, as every
    # tensor input is: see test_guards.test_the_same_tensor_passed_twice_recompiles...)
    assert "aliasing(L['t'], list(dict.keys(L['table']))[0], list(dict.keys(L['table']))[1], L['x']) == [0, 1, 2, 3]" \
        in "\n".join(guard_texts(fn))


class Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(3, 3), torch.nn.Linear(3, 3)
        self.scales = {self.a: 2.0, self.b: 3.0}
        self.w = torch.nn.Parameter(torch.ones(3))

    def forward(self, x, t):
        for m, s in self.scales.items():
            x = m(x) * s
        known = {self.w: 1.0}
        return x * known.get(t, 0.5)


@pytest.mark.parametrize("skip_unchanged", [True, False])
def test_a_module_parameter_and_an_argument_compared_as_keys(monkeypatch, skip_unchanged):
    # `t` is or is not the module's parameter: guarded by the tensors' aliasing, which reads the
    # parameter inside the module's subtree (skipped while unchanged)
    monkeypatch.setattr(pyframe.config, "skip_guards_on_unchanged_objects", skip_unchanged)
    model = Scaled()
    backend = CountingBackend()
    x = torch.randn(3)
    calls = [(x, torch.ones(3)), (x, model.w), (x, torch.ones(3)), (x, model.w)]
    compiled = pyframe.optimize(backend)(model)
    for args in calls:
        assert_same_result(compiled(*args), model(*args))
    assert len(backend.graphs) == 2
    model.w = torch.nn.Parameter(torch.ones(3))  # another parameter: the old one is just a tensor now
    assert_same_result(compiled(x, calls[1][1]), model(x, calls[1][1]))
    assert_same_result(compiled(x, model.w), model(x, model.w))


def test_an_ordered_dict_reordered_recompiles():
    lin1, lin2 = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    table = collections.OrderedDict([(lin1, 1.0), (lin2, 2.0)])

    def fn(x):
        return [m(x) * s for m, s in table.items()][0]

    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(fn)
    x = torch.randn(2)
    assert_same_result(compiled(x), fn(x))
    table.move_to_end(lin1)  # the dict beneath is unchanged: the guard reads the OrderedDict's order
    assert_same_result(compiled(x), fn(x))
    assert len(backend.graphs) == 2


class Ordered(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
        self.order = collections.OrderedDict([(self.a, 1.0), (self.b, 2.0)])
        self.names = collections.OrderedDict([("a", 1.0), ("b", 2.0)])

    def forward(self, x):
        for m, s in self.order.items():
            x = m(x) * s
        return x, list(self.names)


def test_an_ordered_dict_reordered_inside_a_module_subtree_skipped_while_unchanged():
    # move_to_end keeps the dict's version: a subtree checking an OrderedDict's order is never skipped
    model = Ordered()
    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(model)
    x = torch.randn(2)
    for reorder in (None, lambda: model.order.move_to_end(model.a), lambda: model.names.move_to_end("a")):
        if reorder is not None:
            reorder()
        for _ in range(2):
            assert_same_result(compiled(x), model(x))
    assert len(backend.graphs) == 3


def test_a_function_keyed_cache_made_in_the_frame():
    def double(x):
        return x * 2

    def negate(x):
        return -x

    def fn(x):
        cache = {}
        for f in (double, negate, double):
            if f not in cache:
                cache[f] = f(x)
        return cache[double] + cache[negate], list(cache) == [double, negate]

    assert compile_count(fn, (torch.randn(2),)) == 1
    assert not break_reasons(fn)


# -- the harness ----------------------------------------------------------------------------------


def test_assert_same_result_compares_tensor_keys_by_identity_or_value():
    x = torch.ones(2)
    assert_same_result({x: 1, "a": 2}, {x: 1, "a": 2})
    assert_same_result({x.clone(): torch.ones(1)}, {x: torch.ones(1)})  # copies: equal values
    lin = torch.nn.Linear(1, 1)
    assert_same_result({lin: 1}, {lin: 1})
    for actual, expected in [({x: 1}, {x + 1: 1}), ({x: 1}, {"x": 1}), ({x: 1, "a": 2}, {"a": 2, x: 1}),
                             ({1: 0}, {True: 0}), ({x: 1}, {x: 2})]:
        with pytest.raises(AssertionError):
            assert_same_result(actual, expected)


# -- the C guards ---------------------------------------------------------------------------------


def test_c_dict_keys_id_match_and_entry_accessors():
    a, b = torch.ones(2), torch.zeros(2)
    root = _C.RootGuardManager()
    node = root.global_("d")
    node.add_dict_keys_id_match((a, "x", b), [True, False, True], "keys")
    node.dict_key(2).add_id_match(b, "key 2")
    node.dict_value(0).add_equals_match(1, "value 0")
    assert node.dict_key(2).source == "list(dict.keys(G['d']))[2]"
    assert node.dict_value(0).source == "G['d'][list(dict.keys(G['d']))[0]]"
    d = {a: 1, "x": 2, b: 3}
    assert root.check({}, {"d": d}, {}) and root.check({}, {"d": d}, {})  # (the second: cached entry)
    d[a] = 5
    assert root.first_failure({}, {"d": d}, {}) == "value 0"
    d[a] = 1
    assert root.check({}, {"d": d}, {})
    for other in ({b: 3, "x": 2, a: 1}, {a.clone(): 1, "x": 2, b: 3}, {a: 1, "x": 2}, {a: 1, 1: 2, b: 3}):
        assert root.first_failure({}, {"d": other}, {}) == "keys"
    assert not root.check({}, {"d": [a, "x", b]}, {})


def test_c_dict_keys_follow_an_ordered_dicts_own_order():
    od = collections.OrderedDict([("p", 1), ("q", 2)])
    root = _C.RootGuardManager()
    node = root.global_("od")
    node.add_dict_keys_match(("p", "q"), "keys")
    node.dict_key(0).add_equals_match("p", "first key")
    assert root.check({}, {"od": od}, {})
    od.move_to_end("p")
    assert root.first_failure({}, {"od": od}, {}) == "keys"


def test_c_dict_keys_match_tells_1_from_true():
    root = _C.RootGuardManager()
    root.global_("d").add_dict_keys_match((1, "a"), "keys")
    assert root.check({}, {"d": {1: 0, "a": 0}}, {})
    assert not root.check({}, {"d": {True: 0, "a": 0}}, {})


def test_c_aliasing_match():
    a, b = torch.ones(1), torch.ones(1)
    root = _C.RootGuardManager()
    nodes = [root.local(name, i) for i, name in enumerate("xyz")]
    root.add_aliasing_match(nodes, [0, 1, 0], "aliasing")
    assert root.check({"x": a, "y": b, "z": a}, {}, {})
    for bad in ({"x": a, "y": a, "z": a}, {"x": a, "y": b, "z": b}, {"x": a, "y": b}):
        assert not root.check(bad, {}, {})
    assert root.first_failure({"x": a, "y": a, "z": a}, {}, {}) == "aliasing"
    assert root.texts()[-1] == "aliasing"


@pytest.mark.parametrize("n_classes", [3, 32, 33, 80], ids=lambda n: f"{n}_classes")
def test_c_aliasing_match_holds_exactly_for_its_partition(n_classes):
    """The partition check against a brute-force one, on random arrangements, with the classes
    numbered in any order (the tree renumbers them) and with more classes than it compares
    pairwise."""
    import random

    rng = random.Random(n_classes)
    objects = [object() for _ in range(n_classes + 2)]
    size = n_classes + 5
    root = _C.RootGuardManager()
    nodes = [root.local(f"v{i}", i) for i in range(size)]
    classes = [rng.randrange(n_classes) for _ in range(size)]
    root.add_aliasing_match(nodes, [100 - c for c in classes], "aliasing")  # any numbering

    def partition(values):
        return all((values[i] is values[j]) == (classes[i] == classes[j]) for i in range(size) for j in range(size))

    matching = [objects[c] for c in classes]
    assert root.check({f"v{i}": v for i, v in enumerate(matching)}, {}, {})
    for _ in range(200):
        values = list(matching)
        i = rng.randrange(size)
        values[i] = rng.choice(objects)
        assert root.check({f"v{i}": v for i, v in enumerate(values)}, {}, {}) == partition(values)


def _tuple_keyed(x, y):
    d = {(x, "a"): 1, (y, "a"): 2}
    return x * d[(x, "a")] + y * d[(y, "a")], d


def test_tuple_keys_holding_tensors_are_guarded_by_how_the_tensors_alias():
    """`(x, "a")` and `(y, "a")` are one key when x is y: decided on the first call's tensors and
    guarded, so passing one tensor twice compiles again; the dict returned has the tuples as keys."""
    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(_tuple_keyed)
    x, y = torch.randn(3), torch.randn(3)
    for args in ((x, y), (x, x)):
        result, d = compiled(*args)
        expected, eager_d = _tuple_keyed(*args)
        torch.testing.assert_close(result, expected)
        assert [(k[0] is args[0] or k[0] is args[1], k[1], v) for k, v in d.items()] == \
            [(True, k[1], v) for k, v in eager_d.items()]
        assert len(d) == len(eager_d)
    assert len(backend.graphs) == 2


# -- id() ---------------------------------------------------------------------------------------


def test_id_of_an_input_tensor_is_a_constant_pinned_by_identity():
    def fn(x, y):
        return x * (id(x) == id(y)) + len({id(x), id(y)})

    a, b = torch.randn(3), torch.randn(3)
    backend = CountingBackend()
    # the same tensors hit; another tensor recompiles (ID_MATCH, as torch._dynamo guards it)
    assert compile_count(fn, (a, b), (a, b), (a, a), backend=backend) == 2
    assert compile_count(fn, (b, a), backend=backend) == 3
    assert any(t.startswith("id(L['x']) == ") for t in guard_texts(fn))
    assert not break_reasons(fn)


def test_id_of_a_tensor_the_graph_makes_is_only_compared_or_hashed():
    def fn(x):
        y = x + 1
        z = y.mul_(2)  # in place: the same object
        same = id(y) == id(z)
        return y * same + len({id(y), id(z), id(x.sin())})

    assert compile_count(fn, (torch.randn(3),), (torch.randn(3),)) == 1
    assert not break_reasons(fn)


def test_id_of_a_tensor_the_graph_makes_leaving_the_frame_is_its_real_id():
    def fn(x):
        y = x + 1
        return y, id(y), [id(y)]

    y, ident, idents = pyframe.optimize(CountingBackend())(fn)(torch.randn(3))
    assert ident == id(y) and idents == [id(y)]


def test_id_of_a_made_tensor_against_another_number_breaks():
    def fn(x):
        y = x + 1
        return y * (id(y) == 7)

    backend = CountingBackend()
    x = torch.randn(3)
    assert_same_result(pyframe.optimize(backend)(fn)(x), fn(x))
    # (the break leaves the fake id on the stack, which no code can rebuild: the frame runs as Python)
    assert any("cannot rebuild an int" in r for r in break_reasons(fn))


def _plus_one(x):
    return x + 1


def test_partials_read_from_the_frame_are_keys_by_identity():
    """functools.partial objects hash and compare by identity: as keys of a dict passed in, and
    looked up by partials read from the frame, one graph as torch._dynamo's (the lookup pinned each
    partial by identity: an equal partial that is another object recompiles)."""
    first, second = functools.partial(_plus_one), functools.partial(_plus_one)

    def fn(x, table, key):
        return table[key](x) * 2, len(table)

    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(fn)
    table = {first: torch.sin, second: torch.cos}
    for key in (first, second, first):
        out, expected = compiled(torch.ones(3), table, key), fn(torch.ones(3), table, key)
        torch.testing.assert_close(out[0], expected[0])
        assert out[1] == expected[1]
    assert [g.ops for g in backend.graphs] == [("sin", "mul"), ("cos", "mul")]
    assert pyframe.explain(fn)(torch.ones(3), table, first).graph_break_count == 0

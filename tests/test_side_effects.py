"""Mutations of lists, dicts and objects that outlive the frame: traced into one graph, replayed after it.

Each test runs the same function eagerly and under pyframe on fresh, equal state and compares both
the results and the mutated state; where torch._dynamo handles the case in one graph, the graph
count is compared with its own under the same counting backend.
"""
from __future__ import annotations

import collections
import copy

import pytest
import torch
import torch._dynamo

import pyframe
from pyframe.debug.compare import CountingBackend

RESULTS: list = []
CONFIG = {"scale": 2.0}


class Holder:
    def __init__(self):
        self.count = 0
        self.last = None


def run_both(fn, *state, calls: int = 2):
    """Call fn eagerly and under pyframe on deep copies of `state`; compare results and state."""
    backend = CountingBackend()
    eager_state, pf_state = copy.deepcopy(state), copy.deepcopy(state)
    compiled = pyframe.optimize(backend)(fn)
    for i in range(calls):
        x = torch.randn(4, generator=torch.Generator().manual_seed(i))
        torch.testing.assert_close(compiled(x, *pf_state), fn(x, *eager_state))
    _assert_same_state(pf_state, eager_state)
    return backend


def dynamo_graphs(fn, *state) -> int:
    backend = CountingBackend()
    torch._dynamo.reset()
    torch._dynamo.optimize(backend)(fn)(torch.randn(4), *copy.deepcopy(state))
    return len(backend.graphs)


def _assert_same_state(actual, expected) -> None:
    if isinstance(expected, (list, tuple, collections.deque)):
        assert type(actual) is type(expected) and len(actual) == len(expected), (actual, expected)
        assert getattr(actual, "maxlen", None) == getattr(expected, "maxlen", None)
        for a, e in zip(actual, expected):
            _assert_same_state(a, e)
    elif isinstance(expected, dict):
        assert list(actual) == list(expected), (actual, expected)
        for k in expected:
            _assert_same_state(actual[k], expected[k])
    elif isinstance(expected, Holder):
        _assert_same_state(vars(actual), vars(expected))
    elif isinstance(expected, torch.Tensor):
        torch.testing.assert_close(actual, expected)
    else:
        assert actual == expected


def list_methods(x, acc):
    acc.append(x.sin())
    acc.extend([x.cos(), x + 1])
    first = acc.pop(0)
    acc.insert(0, first * 2)
    return x * len(acc) + acc[-1]


def dict_methods(x, d):
    d["y"] = x * d["scale"]
    d.update({"z": x.relu()})
    d.setdefault("w", x - 1)
    old = d.pop("scale")
    return d["y"] + old


def attribute_stores(x, h):
    h.last = x.exp()
    h.count = h.count + 1
    setattr(h, "extra", h.last * 2)
    return h.extra + h.count


def items_of_each_other(x, a, b):
    a.insert(0, b[0])  # a gets b's old first item, even though b is cleared after
    b.clear()
    b.append(x * 3)
    return x.sin()


def deque_window(x, window):
    window.append(x.sin())
    window.appendleft(x * 2)  # (maxlen 3: drops the newest)
    oldest = window.popleft()
    window.extend([x + 1])
    return oldest + window[-1]


class Log(list):
    def record(self, value):
        self.append(value)


def list_subclass_items(x, log):
    log.record(x.cos())
    log[0] = log[0] * 2
    del log[1:2]
    log += [x]
    return x * len(log)


@pytest.mark.parametrize("fn, state", [
    (list_methods, ([torch.ones(4)],)),
    (dict_methods, ({"scale": 3.0},)),
    (attribute_stores, (Holder(),)),
    (items_of_each_other, ([torch.zeros(4)], [torch.ones(4), torch.full((4,), 2.0)])),
    (deque_window, (collections.deque([torch.ones(4), torch.zeros(4)], maxlen=3),)),
    (list_subclass_items, (Log([torch.ones(4), torch.zeros(4)]),)),
], ids=["list", "dict", "attributes", "cross-references", "bounded-deque", "list-subclass"])
def test_mutations_are_replayed_after_one_graph(fn, state):
    backend = run_both(fn, *state, calls=1)
    assert len(backend.graphs) == dynamo_graphs(fn, *state) == 1


def test_state_stays_right_over_cached_calls():
    acc: list = []

    def fn(x, acc):
        acc.append(x * 2)
        return x + 1

    compiled = pyframe.optimize(CountingBackend())(fn)
    expected = []
    x = torch.randn(3)
    for _ in range(3):  # the length grows: each call has a new guard on it, as in torch._dynamo
        compiled(x, acc)
        expected.append(x * 2)
    _assert_same_state(acc, expected)


def test_global_list_and_dict():
    def fn(x):
        y = x * CONFIG["scale"]
        RESULTS.append(y)
        CONFIG["last"] = y.sum()
        return y

    RESULTS.clear()
    CONFIG.pop("last", None)
    backend = CountingBackend()
    x = torch.randn(5)
    out = pyframe.optimize(backend)(fn)(x)
    assert len(backend.graphs) == 1
    assert len(RESULTS) == 1 and RESULTS[0] is not None
    torch.testing.assert_close(RESULTS[0], x * 2.0)
    torch.testing.assert_close(CONFIG["last"], (x * 2.0).sum())
    torch.testing.assert_close(out, x * 2.0)


def test_module_attribute_store():
    class Remember(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(4, 4)
            self.last = None

        def forward(self, x):
            self.last = self.linear(x).relu()
            return self.last + 1

    torch.manual_seed(0)
    model = Remember()
    backend = CountingBackend()
    x = torch.randn(2, 4)
    out = pyframe.optimize(backend)(model)(x)
    assert len(backend.graphs) == 1
    torch.testing.assert_close(model.last, model.linear(x).relu())
    torch.testing.assert_close(out, model.last + 1)


def test_mutation_before_a_graph_break_is_visible_to_the_unsupported_step():
    seen = []

    def fn(x, acc):
        acc.append(x.sin())
        seen.append(len(acc))   # a closure's list: replayed too, with the length after the append
        n = int(x.sum() > 0)    # data dependent: a graph break, after which acc is read for real
        acc.append(x.cos() + n)
        return x

    backend = run_both(fn, [], calls=1)
    assert len(backend.graphs) == 2
    assert seen == [1, 1]  # the eager run and pyframe's each saw one item


def test_one_object_reached_two_ways_is_not_mutated_by_the_trace():
    def fn(x, a, b):
        a.append(x.sin())
        return x + len(b)

    shared: list = []
    expected: list = []
    x = torch.randn(3)
    out = pyframe.optimize(CountingBackend())(fn)(x, shared, shared)
    torch.testing.assert_close(out, fn(x, expected, expected))
    _assert_same_state(shared, expected)


def appending_while_iterating(x, lst):
    for item in lst:
        if len(lst) < 4:
            lst.append(item + 1)
    return torch.stack(lst).sum(0)


def test_a_loop_over_a_list_sees_what_the_loop_appends():
    run_both(appending_while_iterating, [torch.ones(4)], calls=1)


G_COUNT = 0
G_LAST = None


def _reset_globals() -> None:
    global G_COUNT, G_LAST
    G_COUNT, G_LAST = 0, None
    globals().pop("G_NEW", None)


def assign_globals(x):
    global G_COUNT, G_LAST, G_NEW
    old = G_LAST            # read before the assignment: the old object, not what the replay stores
    G_LAST = x.sin()
    G_COUNT += 1
    G_NEW = G_LAST * 2      # a global that did not exist, read back in the same trace
    return G_NEW + G_COUNT, old


def _run_assign_globals(fn, calls: int = 3) -> list:
    _reset_globals()
    out = []
    for i in range(calls):
        out.append(fn(torch.full((3,), float(i))))
    return [*out, G_COUNT, G_LAST, G_NEW]


def test_global_assignments_are_replayed_after_one_graph():
    expected = _run_assign_globals(assign_globals)
    backend = CountingBackend()
    actual = _run_assign_globals(pyframe.optimize(backend)(assign_globals))
    torch.testing.assert_close(actual, expected)
    torch._dynamo.reset()
    dynamo = CountingBackend()
    _run_assign_globals(torch.compile(assign_globals, backend=dynamo, dynamic=False))
    # one graph per call: G_COUNT is a constant of the trace, guarded by value, as in torch._dynamo
    # (whose first trace, with G_NEW not yet defined, leaves the `+ G_COUNT` out of its graph)
    assert [g.ops for g in backend.graphs] == [("sin", "mul", "add")] * 3
    assert [g.ops for g in dynamo.graphs][1:] == [g.ops for g in backend.graphs][1:]


def test_global_assigned_before_a_graph_break_is_seen_after_it():
    def fn(x):
        global G_COUNT
        G_COUNT += 1
        torch._dynamo.graph_break()
        return x + G_COUNT

    _reset_globals()
    expected = [fn(torch.ones(2)) for _ in range(2)], G_COUNT
    _reset_globals()
    compiled = pyframe.optimize(CountingBackend())(fn)
    actual = [compiled(torch.ones(2)) for _ in range(2)], G_COUNT
    torch.testing.assert_close(actual, expected)


def test_global_of_another_module_assigned_by_an_inlined_function():
    namespace: dict = {"hits": 0}
    exec(compile("def bump(x):\n    global hits\n    hits = hits + 1\n    return x * hits\n",
                 "other_module.py", "exec"), namespace)
    bump = namespace["bump"]

    def fn(x):
        return bump(x) + 1

    x = torch.ones(3)
    expected = [fn(x), fn(x)]
    assert namespace["hits"] == 2
    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(fn)
    actual = [compiled(x), compiled(x)]
    torch.testing.assert_close(actual, [x * 3 + 1, x * 4 + 1])
    assert namespace["hits"] == 4
    assert len(backend.graphs) == 2  # `hits` is guarded by value: a new graph per value
    torch.testing.assert_close(expected, [x * 1 + 1, x * 2 + 1])


G_ACTIVATION = torch.relu


def test_global_function_rebound_after_it_was_read_is_seen_by_later_reads():
    """A module-level function read once (its tracker then served again by name without a
    lookup) and assigned later in the same trace: reads after the store see the new one."""
    def fn(x):
        global G_ACTIVATION
        y = G_ACTIVATION(x)
        G_ACTIVATION = torch.tanh
        z = G_ACTIVATION(x)
        G_ACTIVATION = torch.relu
        return y + z

    x = torch.randn(5)
    expected = fn(x)
    backend = CountingBackend()
    torch.testing.assert_close(pyframe.optimize(backend)(fn)(x), expected)
    assert G_ACTIVATION is torch.relu
    assert [g.ops for g in backend.graphs] == [("relu", "tanh", "add")]


def test_one_object_reached_two_ways_has_one_tracker_and_an_aliasing_guard():
    """The same list passed twice: appended to through one argument, measured through the other.
    It was a graph break (two trackers would disagree); now the second read gets the first's
    tracker, one graph as torch._dynamo makes, and the aliasing is guarded: distinct lists recompile."""
    def fn(x, a, b):
        a.append(x.sin())
        return x + len(b)

    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(fn)
    shared, expected = [], []
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x, shared, shared), fn(x, expected, expected))
    _assert_same_state(shared, expected)
    assert len(backend.graphs) == 1 == dynamo_graphs(fn, [], [])
    a, b, a_eager, b_eager = [], [], [], []
    torch.testing.assert_close(compiled(x, a, b), fn(x, a_eager, b_eager))  # len(b) == 0 here
    _assert_same_state((a, b), (a_eager, b_eager))
    assert len(backend.graphs) == 2


def test_a_dict_in_a_module_and_in_its_hooks_closure():
    """Whisper's kv cache: a dict that is a module attribute and is also captured by forward hooks
    on submodules, which fill it; the module reads and clears it (a graph break at each hook call, once)."""
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.key, self.value = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)
            cache = self.cache = {}

            def save(module, _, output):
                cache[module] = output if module not in cache else torch.cat([cache[module], output])
                return cache[module]

            self.key.register_forward_hook(save)
            self.value.register_forward_hook(save)

        def forward(self, x):
            k = self.key(x)
            v = self.value(x)
            k = self.key(x + 1)
            n = len(self.cache)
            self.cache.clear()
            return k, v, n

    torch.manual_seed(0)
    model, x = Net(), torch.randn(2, 4)
    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(model)
    for _ in range(2):
        out = compiled(x)
        expected = model(x)
        for a, e in zip(out, expected):
            torch.testing.assert_close(a, e)
        assert model.cache == {}
    assert len(backend.graphs) == 1


class _Log:
    def __init__(self) -> None:
        self.entries: list = []


class _Logged(torch.nn.Module):
    """A module whose forward appends to a list reached through two attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(3, 3)
        self.box = _Log()
        self.box.inner = _Log()

    def forward(self, x):
        y = self.linear(x)
        self.box.inner.entries.append(y.sum())
        return y


def test_a_mutation_through_a_long_path_reaches_the_object_of_each_call():
    """The list `self.box.inner.entries` is read by the guards on every call; the transformed code
    appends to the one they fetched (an export), not to the one the compiling call saw: after the
    path is rebound the next call's list gets the item, and a second instance compiled with its own
    entry gets its own."""
    import dis

    from pyframe.debug import cache_entries

    model = _Logged()
    compiled = pyframe.optimize(CountingBackend())(model)
    x = torch.randn(2, 3)
    for _ in range(3):
        torch.testing.assert_close(compiled(x), model.linear(x))
    assert len(model.box.inner.entries) == 3
    transformed = cache_entries(model.forward)[0].transformed
    attrs = {i.argval for i in dis.get_instructions(transformed) if i.opname == "LOAD_ATTR"}
    assert "inner" not in attrs and "box" not in attrs  # (taken from the guards' exports)

    first = model.box.inner.entries
    model.box.inner = _Log()  # the same path, another list
    compiled(x)
    assert len(first) == 3 and len(model.box.inner.entries) == 1
    model.box = _Log()
    model.box.inner = _Log()
    compiled(x)
    compiled(x)
    assert len(model.box.inner.entries) == 2

"""Guards: what recompiles, what hits the cache, the recompile limit, and freeing entries."""
from __future__ import annotations

import copy
import gc
import math
import types
import warnings
import weakref

import pytest
import torch

import pyframe
from pyframe import _C
from pyframe.debug.compare import CountingBackend, engine_unavailable_reason, optimize_with, reset_engines

SCALE = 2.0


@pytest.fixture(autouse=True)
def _fresh():
    pyframe.reset()
    yield
    pyframe.reset()


class Counter:
    def __init__(self):
        self.compiles = 0

    def __call__(self, gm, example_inputs):
        self.compiles += 1
        return gm.forward


def scaled(x, k):
    return x * k + SCALE


def hits(fn) -> list[int]:
    return [e.hits for e in _C.get_cache_entries(fn.__code__)]


@pytest.mark.parametrize("change", ["dtype", "shape", "requires_grad", "constant"])
def test_each_change_recompiles_exactly_once(change):
    counter = Counter()
    opt = pyframe.optimize(counter)(scaled)
    x, k = torch.randn(3), 2
    variants = {
        "dtype": (x.double(), k), "shape": (torch.randn(4), k),
        "requires_grad": (x.clone().requires_grad_(), k), "constant": (x, 3),
    }
    first, second = (x, k), variants[change]
    for args in (first, second, first, second, second):
        torch.testing.assert_close(opt(*args), scaled(*args))
    assert counter.compiles == 2
    assert len(_C.get_cache_entries(scaled.__code__)) == 2
    assert sum(hits(scaled)) == 3  # the five calls: two compiles, three hits


def test_a_rebound_global_recompiles_once(monkeypatch):
    counter = Counter()
    opt = pyframe.optimize(counter)(scaled)
    x = torch.randn(3)
    opt(x, 2)
    monkeypatch.setattr(__import__(__name__), "SCALE", 5.0)
    torch.testing.assert_close(opt(x, 2), x * 2 + 5.0)
    opt(x, 2)
    assert counter.compiles == 2
    reasons = [r.reason for r in pyframe.convert_frame.records_for(scaled.__code__)]
    assert reasons[0] == "first compile"
    assert "G['SCALE'] == 2.0" in reasons[1]


def _plus_one(x):
    return x + 1


def _times_hundred(x):
    return x * 100


class _Block(torch.nn.Module):
    def forward(self, x):
        return _plus_one(x) * 2


def test_new_code_in_an_inlined_function_recompiles():
    # `fn.__code__ = ...` keeps the function object: its code is guarded apart from its identity
    # (as torch._dynamo guards `G['fn'].__code__`), for a global function and one a module calls.
    counter, block = Counter(), _Block()
    opt_fn = pyframe.optimize(counter)(lambda x: _plus_one(x) - 1)
    opt_block = pyframe.optimize(counter)(block)
    x, code = torch.randn(3), _plus_one.__code__
    torch.testing.assert_close(opt_fn(x), x)
    torch.testing.assert_close(opt_block(x), (x + 1) * 2)
    _plus_one.__code__ = _times_hundred.__code__
    try:
        torch.testing.assert_close(opt_fn(x), x * 100 - 1)
        torch.testing.assert_close(opt_block(x), x * 200)
    finally:
        _plus_one.__code__ = code
    assert counter.compiles == 4


class _CountedRepr:
    """An object whose __repr__ counts its calls: a guard's text must not call it (it may have
    effects, be slow, or raise)."""

    reprs = 0

    def __float__(self):
        return 1.5

    def __repr__(self):
        _CountedRepr.reprs += 1
        return "_CountedRepr()"


_A_GLOBAL_COUNTED_REPR = _CountedRepr()  # in this module's globals, which the guards below pin


def test_guard_text_never_runs_a_class_own_repr():
    # `id(G) == ...  # <repr>`: the globals dict's repr would call every global's own __repr__
    counter, obj, x = Counter(), _CountedRepr(), torch.randn(3)
    opt = pyframe.optimize(counter)(lambda t, o: t * float(o))
    for _ in range(2):
        torch.testing.assert_close(opt(x, obj), x * 1.5)
    assert counter.compiles == 1
    assert _CountedRepr.reprs == 0


def test_grad_mode_is_a_guard():
    counter = Counter()
    opt = pyframe.optimize(counter)(scaled)
    x = torch.randn(3)
    opt(x, 2)
    with torch.no_grad():
        opt(x, 2)
    assert counter.compiles == 2


def matmul_then_branch_on_dtype(a, b):
    y = a @ b
    if y.dtype == torch.bfloat16:  # Python sees autocast's dtype while tracing
        return y.float() * 2
    return y * 3


def test_autocast_state_is_a_guard():
    """Compiled outside autocast, then called inside it (and back): each state gets its own
    entry, and the Python branch taken on the dtype is the one eager takes."""
    counter = Counter()
    opt = pyframe.optimize(counter)(matmul_then_branch_on_dtype)
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    torch.testing.assert_close(opt(a, b), (a @ b) * 3)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = matmul_then_branch_on_dtype(a, b)
        assert expected.dtype == torch.float32
        torch.testing.assert_close(opt(a, b), expected)
    with torch.autocast("cpu", dtype=torch.float16):
        torch.testing.assert_close(opt(a, b), matmul_then_branch_on_dtype(a, b))
    torch.testing.assert_close(opt(a, b), (a @ b) * 3)
    assert counter.compiles == 3
    assert sorted(hits(matmul_then_branch_on_dtype)) == [0, 0, 1]  # the first entry, hit at the end
    reasons = [r.reason for r in pyframe.convert_frame.records_for(matmul_then_branch_on_dtype.__code__)]
    assert "torch.is_autocast_enabled('cpu') == False" in reasons[1]
    assert "torch.get_autocast_dtype('cpu') == torch.bfloat16" in reasons[2]


def scaled_unless_inference(x):
    if torch.is_inference_mode_enabled():  # folded to a constant while tracing
        return x + 1
    return x * 2


def test_inference_mode_is_a_guard_apart_from_grad_mode():
    counter = Counter()
    opt = pyframe.optimize(counter)(scaled_unless_inference)
    x = torch.randn(3)
    with torch.no_grad():  # grad mode off in both: only inference mode tells them apart
        torch.testing.assert_close(opt(x), x * 2)
    with torch.inference_mode():
        torch.testing.assert_close(opt(x), x + 1)
    assert counter.compiles == 2


def test_default_dtype_is_a_guard():
    counter = Counter()
    opt = pyframe.optimize(counter)(scaled)
    x = torch.randn(3)
    opt(x, 2)
    torch.set_default_dtype(torch.float64)
    try:
        torch.testing.assert_close(opt(x, 2), x * 2 + SCALE)
    finally:
        torch.set_default_dtype(torch.float32)
    opt(x, 2)
    assert counter.compiles == 2
    assert sorted(hits(scaled)) == [0, 1]


def test_guard_text_is_readable_python():
    pyframe.optimize("eager")(scaled)(torch.randn(3), 2)
    texts = _C.get_cache_entries(scaled.__code__)[0].guards.texts()
    assert "L['k'] == 2" in texts
    assert "G['SCALE'] == 2.0" in texts
    assert any(t.startswith("check_tensor(L['x'], torch.Tensor, torch.float32") for t in texts)


def test_recompile_limit_runs_eagerly_with_one_warning(monkeypatch):
    monkeypatch.setattr(pyframe.config, "recompile_limit", 3)
    counter = Counter()
    opt = pyframe.optimize(counter, dynamic=False)(scaled)  # (static: an entry per value of k)
    x = torch.randn(2)
    with pytest.warns(UserWarning, match="recompile_limit.*L\\['k'\\] == ") as caught:
        for k in range(6):
            torch.testing.assert_close(opt(x, k), scaled(x, k))
    assert counter.compiles == 3
    assert len([w for w in caught if "recompile_limit" in str(w.message)]) == 1
    assert _C.get_code_state(scaled.__code__) == "run_only"
    opt(x, 1)  # an earlier entry still hits
    assert sum(hits(scaled)) == 1


class _PrintingBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        x = self.lin(x)
        print(end="")  # a graph break in every block: each block's forward is a frame of its own
        return x.relu()


def test_a_stack_of_blocks_runs_the_entries_of_one_block_as_torch_dynamo_does(monkeypatch):
    """Each block's forward is a frame of its own (a break in every block), guarded on its `self`
    by type and by what the trace read of it, as torch._dynamo 2.13 guards modules: twelve blocks
    run two entries (the first block's input has no grad, the others' have), not one per block;
    no recompile limit is reached. The limit still holds: new shapes (static: one entry each)
    stop at 3 entries."""
    monkeypatch.setattr(pyframe.config, "recompile_limit", 3)
    torch.manual_seed(0)
    net = torch.nn.Sequential(*[_PrintingBlock() for _ in range(12)])
    counter = Counter()
    x = torch.randn(2, 4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.testing.assert_close(pyframe.optimize(counter, dynamic=False)(net)(x), net(x))
    assert not [w for w in caught if "recompile_limit" in str(w.message)]
    code = _PrintingBlock.forward.__code__
    assert sorted(e.hits for e in _C.get_cache_entries(code)) == [0, 10]
    first = pyframe.optimize(counter, dynamic=False)(net[0])
    with pytest.warns(UserWarning, match="recompile_limit"):
        for n in range(1, 6):
            torch.testing.assert_close(first(torch.randn(n, 4)).shape, torch.Size([n, 4]))
    assert len(_C.get_cache_entries(code)) == 3


def test_a_stack_of_blocks_compiles_the_graphs_torch_dynamo_compiles():
    if (why := engine_unavailable_reason("dynamo")) is not None:
        pytest.skip(why)
    torch.manual_seed(0)
    net = torch.nn.Sequential(*[_PrintingBlock() for _ in range(6)])
    x = torch.randn(2, 4)
    graphs = {}
    for engine in ("pyframe", "dynamo"):
        graphs[engine] = CountingBackend()
        torch.testing.assert_close(optimize_with(engine, net, graphs[engine])(x), net(x))
        reset_engines()
    # the forward's graph for an input without grad and for one with, and one of the resume function
    assert len(graphs["pyframe"].graphs) == len(graphs["dynamo"].graphs) == 3
    assert [g.ops for g in graphs["pyframe"].graphs] == [g.ops for g in graphs["dynamo"].graphs]


def test_a_fresh_module_on_each_call_runs_one_entry():
    """A function given a new module of one structure on each call: the module is guarded by its
    type and its parameters by their metadata (they are graph inputs), so one entry serves them
    all, as under torch._dynamo."""
    counter = Counter()

    def apply(m, x):
        return m(x).relu()

    opt = pyframe.optimize(counter)(apply)
    x = torch.randn(2, 4)
    for _ in range(4):
        m = torch.nn.Linear(4, 4)
        torch.testing.assert_close(opt(m, x), apply(m, x))
    assert counter.compiles == 1 and [e.hits for e in _C.get_cache_entries(apply.__code__)] == [3]


def test_entries_of_objects_that_died_are_dropped_and_do_not_count(monkeypatch):
    """An entry whose guards pin an argument by identity (the trace read `id(m)`) can never hit
    again once that object has died: it is dropped at the next miss of the code, so a function
    given a fresh object on each call keeps compiling (one entry alive at a time) instead of
    running eagerly from the limit on."""
    monkeypatch.setattr(pyframe.config, "recompile_limit", 3)
    counter = Counter()

    def apply(m, x):
        return m(x).relu() + (id(m) % 7)

    opt = pyframe.optimize(counter)(apply)
    x = torch.randn(2, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no recompile-limit warning
        for _ in range(6):
            m = torch.nn.Linear(4, 4)
            torch.testing.assert_close(opt(m, x), apply(m, x))
            del m  # (no collection: the module dies by reference counting, pyframe keeping no cycle to it)
    assert [r.status for r in pyframe.convert_frame.records_for(apply.__code__)] == ["compiled"] * 6
    assert len(_C.get_cache_entries(apply.__code__)) == 1
    assert counter.compiles == 6


def test_death_of_a_function_frees_its_entries():
    # A code object of its own (a nested def would live on in its parent's co_consts).
    namespace = {"torch": torch}
    exec(compile("def local_fn(x):\n    return torch.relu(x) * 3\n", "dead_fn.py", "exec"), namespace)
    graphs = []

    def keep(gm, example_inputs):
        graphs.append(weakref.ref(gm))
        return gm.forward

    f = namespace.pop("local_fn")
    pyframe.optimize(keep)(f)(torch.randn(3))
    gc.collect()
    assert graphs[0]() is not None
    del f, namespace
    gc.collect()
    assert graphs[0]() is None


def test_reset_frees_entries():
    graphs = []

    def keep(gm, example_inputs):
        graphs.append(weakref.ref(gm))
        return gm.forward

    pyframe.optimize(keep)(scaled)(torch.randn(3), 2)
    gc.collect()
    assert graphs[0]() is not None
    pyframe.reset()
    gc.collect()
    assert graphs[0]() is None


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.drop = torch.nn.Dropout(0.5)
        self.scale = 2.0

    def forward(self, x):
        return self.drop(self.lin(x)) * self.scale


def _warmed_up(cls, monkeypatch, skip_unchanged: bool, calls: int):
    """(model, its optimized form, the counting backend, an input) after `calls` cached calls,
    with unchanged module subtrees skipped or not."""
    monkeypatch.setattr(pyframe.config, "skip_guards_on_unchanged_objects", skip_unchanged)
    torch.manual_seed(0)
    model, counter, x = cls().eval(), Counter(), torch.randn(2, 4)
    opt = pyframe.optimize(counter)(model)
    for _ in range(calls):
        torch.testing.assert_close(opt(x), model(x))
    return model, opt, counter, x


class Deep(torch.nn.Module):
    def __init__(self, depth=3):
        super().__init__()
        self.blocks = torch.nn.ModuleList([Block() for _ in range(depth)])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


@pytest.mark.parametrize("skip_unchanged", [True, False])
@pytest.mark.parametrize("change", ["eval", "attribute", "new parameter", "new submodule", "same-metadata parameter",
                                    "forward hook", "forward pre-hook"])
def test_a_change_deep_in_a_module_tree_recompiles_once(monkeypatch, skip_unchanged, change):
    # With skipping on, the module tree's guards are skipped while its dicts are unchanged: each
    # change below goes through a dict, so it must be seen exactly as with every guard checked.
    model, opt, counter, x = _warmed_up(Deep, monkeypatch, skip_unchanged, calls=3)
    target = model.blocks[2]
    if change == "eval":
        model.train()  # sets `training` in every module's __dict__
    elif change == "attribute":
        target.scale = 3.0
    elif change == "new parameter":  # other strides (as torch._dynamo, same metadata would not recompile)
        target.lin.weight = torch.nn.Parameter(torch.randn(4, 4).t())
    elif change == "same-metadata parameter":  # a graph input like any other: new values, same graph
        target.lin.weight = torch.nn.Parameter(torch.randn(4, 4))
    elif change == "forward hook":  # a hook table: a leaf dict of the snapshot, checked last
        target.lin.register_forward_hook(lambda mod, args, out: out * 2)
    elif change == "forward pre-hook":
        target.drop.register_forward_pre_hook(lambda mod, args: (args[0] + 1,))
    else:
        target.lin = torch.nn.Linear(4, 4)
    for _ in range(3):
        torch.manual_seed(1)
        got = opt(x)
        torch.manual_seed(1)
        torch.testing.assert_close(got, model(x))
    code = type(model).forward.__code__
    if change in ("same-metadata parameter", "new submodule"):
        # (a graph input like any other; a submodule of the same type with such parameters, as
        # torch._dynamo guards modules: by type, and their parameters by metadata)
        assert counter.compiles == 1 and [e.hits for e in _C.get_cache_entries(code)] == [5]
    else:
        assert counter.compiles == 2
        assert sorted(e.hits for e in _C.get_cache_entries(code)) == [2, 2]


def test_a_snapshot_records_each_fact_once(monkeypatch):
    # A Linear's snapshot: its type and instance dict (one fact, not a type and then a
    # type-and-dict), its class's metaclass and version (covering the class's dict), its forward's
    # code, and the version of each dict read: `_parameters` (the weight and bias are read through
    # it, so it is checked in order) and the four hook tables (leaves, checked after the rest).
    _warmed_up(Deep, monkeypatch, skip_unchanged=True, calls=3)
    snapshots = {source: kinds for source, _, _, _, kinds in _entry_guards(Deep).snapshots()}
    assert snapshots["L['self']._modules['blocks']._modules['0']._modules['lin']"] == {
        "type_and_dict": 1, "type": 1, "class_version": 1, "field": 1, "dict": 1, "leaf_dict": 4}
    # the model's holds every block's: the classes' once, the hook tables of the modules called
    # (each block, its Linear and its Dropout)
    whole = snapshots["L['self']"]
    assert whole["class_version"] == 3 and whole["leaf_dict"] == 4 * 3 * 3


def test_graph_inputs_come_from_the_guards_exports():
    torch.manual_seed(0)
    model = Deep(depth=2).eval()
    opt = pyframe.optimize(Counter())(model)
    x = torch.randn(2, 4)
    torch.testing.assert_close(opt(x), model(x))
    (entry,) = _C.get_cache_entries(type(model).forward.__code__)
    assert _C.EXPORTS_LOCAL in entry.code.co_varnames
    assert entry.guards.export_count == 1 + 2 * 2  # x, then each block's weight and bias
    with torch.no_grad():  # values change in place (an optimizer step): the same objects
        for p in model.parameters():
            p.mul_(0.5)
    torch.testing.assert_close(opt(x), model(x))
    assert [e.hits for e in _C.get_cache_entries(type(model).forward.__code__)] == [1]



class Table(dict):
    """A dict subclass held by a module (a registry, a config mapping)."""


class UsesTable(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.table = Table(scale=2.0, shift=1.0)

    def forward(self, x):
        y = self.lin(x)
        for name in self.table:  # the keys, in order
            y = y * self.table[name] if name == "scale" else y + self.table[name]
        return y


@pytest.mark.parametrize("skip_unchanged", [True, False])
@pytest.mark.parametrize("change", ["value", "new key", "reordered", "same contents"])
def test_a_dict_subclass_under_a_module_is_seen_changing(monkeypatch, skip_unchanged, change):
    # A dict subclass's storage changes only with its version: a snapshot may cover it, and
    # every change of its items or their order must still be seen.
    model, opt, counter, x = _warmed_up(UsesTable, monkeypatch, skip_unchanged, calls=2)
    if change == "value":
        model.table["scale"] = 5.0
    elif change == "new key":
        model.table["bias"] = 3.0
    elif change == "reordered":
        model.table["scale"] = model.table.pop("scale")
    else:
        model.table["scale"] = 2.0  # stored again: a new version, the same facts
    for _ in range(2):
        torch.testing.assert_close(opt(x), model(x))
    assert counter.compiles == (1 if change == "same contents" else 2)



ACTS = types.ModuleType("acts")  # a module object the inlined code reads an attribute of
ACTS.act = torch.relu


class ActMeta(type):
    """A metaclass of the user's (its attributes come before a class's own data)."""


class ActBase(torch.nn.Module, metaclass=ActMeta):
    def scale(self, y):
        return y * 2


class ActBlock(ActBase):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return type(self).scale(self, ACTS.act(self.lin(x)))


class WithActBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.block = ActBlock()

    def forward(self, x):
        return self.block(x) + 1


@pytest.mark.parametrize("skip_unchanged", [True, False])
@pytest.mark.parametrize("change", ["base method", "subclass method", "module attribute", "metaclass", "none"])
def test_what_inlined_code_reads_from_classes_and_modules_is_seen_changing(monkeypatch, skip_unchanged, change):
    # A submodule's forward, reached through its class, reads a method of a base class and an
    # attribute of a module object: each is covered by the version of the class or the module's
    # dict in a snapshot, and every replacement must still be seen.
    monkeypatch.setattr(ACTS, "act", torch.relu)
    monkeypatch.setattr(ActBase, "scale", ActBase.scale)
    model, opt, counter, x = _warmed_up(WithActBlock, monkeypatch, skip_unchanged, calls=2)
    if change == "base method":
        monkeypatch.setattr(ActBase, "scale", lambda self, y: y * 3)
    elif change == "subclass method":
        monkeypatch.setattr(ActBlock, "scale", lambda self, y: y - 1, raising=False)
    elif change == "module attribute":
        monkeypatch.setattr(ACTS, "act", torch.tanh)
    elif change == "metaclass":  # a data descriptor of the metaclass comes before the class's own
        monkeypatch.setattr(ActMeta, "scale", property(lambda cls: lambda self, y: y * 5), raising=False)
    for _ in range(2):
        torch.testing.assert_close(opt(x), model(x))
    assert counter.compiles == (1 if change == "none" else 2)


def _scaled(y, k=2.0):
    return y * k


def _make_shifted(shift):
    def shifted(y):
        return y + shift
    return shifted


def _make_shifted_down(shift):
    def shifted(y):
        return y - shift
    return shifted


_SHIFTED = _make_shifted(1.0)


class SlotConfig:
    __slots__ = ("power",)

    def __init__(self):
        self.power = 2


class OwnLookupConfig:
    """A class with a Python __getattribute__ (as Hugging Face's configs have)."""

    def __init__(self):
        self.bias = 0.5

    def __getattribute__(self, name):
        return super().__getattribute__(name)


SLOTS = SlotConfig()


class FieldsBlock(torch.nn.Module):
    gain = 2.0  # a class attribute read through the instance

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.config = OwnLookupConfig()

    def forward(self, x):
        y = _SHIFTED(_scaled(self.lin(x))) ** SLOTS.power
        return y * self.gain + self.config.__dict__["bias"] + self.config.bias


class WithFieldsBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.block = FieldsBlock()

    def forward(self, x):
        return self.block(x) - 1


FIELD_CHANGES = {
    "defaults": lambda m: setattr(_scaled, "__defaults__", (3.0,)),
    "code": lambda m: setattr(_SHIFTED, "__code__", _make_shifted_down(1.0).__code__),
    "cell": lambda m: setattr(_SHIFTED.__closure__[0], "cell_contents", 5.0),
    "slot": lambda m: setattr(SLOTS, "power", 3),
    "class attribute": lambda m: setattr(FieldsBlock, "gain", 4.0),
    "instance shadows class attribute": lambda m: setattr(m.block, "gain", 5.0),
    "dict of an object with its own lookup": lambda m: setattr(m.block.config, "bias", -1.0),
    "none": lambda m: None,
}


@pytest.mark.parametrize("skip_unchanged", [True, False])
@pytest.mark.parametrize("change", list(FIELD_CHANGES))
def test_what_inlined_code_reads_from_fields_and_classes_is_seen_changing(monkeypatch, skip_unchanged, change):
    # A function's defaults, a closure's code and cell contents, a slot, a class attribute read
    # through an instance, the instance dict of an object whose class has its own
    # __getattribute__: the snapshot covers each by the field or version it lives in (no anchor
    # fetched again), and each change must still be seen.
    for obj, name in ((_scaled, "__defaults__"), (_SHIFTED, "__code__"), (SLOTS, "power"), (FieldsBlock, "gain")):
        monkeypatch.setattr(obj, name, getattr(obj, name))
    cell = _SHIFTED.__closure__[0]
    monkeypatch.setattr(cell, "cell_contents", cell.cell_contents)
    model, opt, counter, x = _warmed_up(WithFieldsBlock, monkeypatch, skip_unchanged, calls=2)
    if skip_unchanged:
        assert not any(anchors for _, _, _, anchors, *_ in _entry_guards(WithFieldsBlock).snapshots())
    FIELD_CHANGES[change](model)
    for _ in range(2):
        torch.testing.assert_close(opt(x), model(x))
    assert counter.compiles == (1 if change == "none" else 2)


def _entry_guards(cls):
    return _C.get_cache_entries(cls.forward.__code__)[0].guards


ALLOWED = {"relu", "tanh"}


def activation_if_allowed(x, name):
    if name in ALLOWED:
        return getattr(torch, name)(x)
    return x * 0


def test_a_global_set_is_guarded_by_its_contents(monkeypatch):
    counter = Counter()
    opt = pyframe.optimize(counter)(activation_if_allowed)
    x = torch.randn(4)
    torch.testing.assert_close(opt(x, "relu"), torch.relu(x))
    opt(x, "relu")
    assert counter.compiles == 1
    ALLOWED.discard("relu")
    try:
        torch.testing.assert_close(opt(x, "relu"), x * 0)
        assert counter.compiles == 2
    finally:
        ALLOWED.add("relu")


def add_to_global_set(x):
    ALLOWED.add("sigmoid")
    return x + len(ALLOWED)


def test_mutating_a_global_set_is_left_to_python():
    try:
        out = pyframe.optimize("eager")(add_to_global_set)(torch.zeros(2))
        assert "sigmoid" in ALLOWED
        torch.testing.assert_close(out, torch.full((2,), 3.0))
    finally:
        ALLOWED.discard("sigmoid")


def test_a_numpy_scalar_is_a_constant_guarded_by_value_and_type():
    import numpy as np

    counter = Counter()
    compiled = pyframe.optimize(counter, fullgraph=True)(scaled)
    x = torch.ones(3, dtype=torch.float16)
    for k in (np.float32(0.5), np.float32(0.5), np.float32(2.0), np.int64(2), np.int32(2)):
        out = compiled(x, k)
        expected = scaled(x, k)
        assert out.dtype == expected.dtype
        torch.testing.assert_close(out, expected)
    assert counter.compiles == 4  # every new value, and 2 of another NumPy type, recompiles
    guards = [guard for entry in pyframe.debug.cache_entries(scaled) for guard in entry.guards]
    assert "L['k'] == np.float32(0.5)" in guards and "L['k'] == np.int32(2)" in guards


def test_numpy_scalars_fold_with_numpy_rules_and_break_where_torch_reads_their_dtype():
    import numpy as np

    def fn(x, n):
        return x * (n // 3), n + 1

    counter = Counter()
    out, m = pyframe.optimize(counter, fullgraph=True)(fn)(torch.ones(2), np.int64(8))
    torch.testing.assert_close(out, torch.full((2,), 2.0))
    assert type(m) is np.int64 and m == 9

    def full(x, n, flag):
        return torch.full((2,), n) + x, x + flag  # the fill's dtype is n's; np.bool_ is a float to torch

    x = torch.ones(2, dtype=torch.int32)
    args = (np.float64(0.5), np.bool_(True))
    for actual, expected in zip(pyframe.optimize(Counter())(full)(x, *args), full(x, *args)):
        assert actual.dtype == expected.dtype
        torch.testing.assert_close(actual, expected)


def mutates_both(x, y):
    x.mul_(2)
    y.mul_(3)
    return x + y


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_the_same_tensor_passed_twice_recompiles_for_a_functionalizing_backend(backend):
    """A graph traced with distinct inputs means something else when one tensor is passed as both
    (aot_autograd dedupes inputs by identity): which inputs alias is guarded, as torch._dynamo
    guards it, so each arrangement has its own entry and the results are eager's."""
    compiled = pyframe.optimize(backend)(mutates_both)
    for arrangement in ("distinct", "same", "distinct", "same"):
        args = [torch.ones(3), torch.full((3,), 2.0)]
        eager_args = [a.clone() for a in args]
        if arrangement == "same":
            args[1], eager_args[1] = args[0], eager_args[0]
        torch.testing.assert_close(compiled(*args), mutates_both(*eager_args))
        torch.testing.assert_close(args, eager_args)
    counter = Counter()
    pyframe.reset()
    counted = pyframe.optimize(counter)(mutates_both)
    for arrangement in ("distinct", "same", "distinct", "same"):
        x = torch.ones(3)
        counted(x, x if arrangement == "same" else torch.ones(3))
    assert counter.compiles == 2


def test_parameters_are_left_out_of_the_aliasing_guard():
    model = torch.nn.Linear(3, 3)
    compiled = pyframe.optimize(Counter())(model)
    compiled(torch.ones(3))
    [entry] = pyframe.debug.cache_entries(model.forward)
    aliasing = [t for t in entry.guards if t.startswith("aliasing(")]
    assert aliasing == []


@pytest.mark.parametrize("count", [3, 16, 17, 40])
def test_aliasing_among_many_inputs_is_seen_wherever_it_is(count):
    """The no-aliasing check compares a few inputs pairwise and many by sorting (csrc/guard_aliasing.h,
    AliasingMatch): on either side of that line, two inputs made one object recompile."""
    def total(*xs):
        xs[0].add_(1)  # in place: aliasing changes the result
        return sum(x.sum() for x in xs)

    counter = Counter()
    compiled = pyframe.optimize(counter)(total)
    distinct = [torch.ones(2) for _ in range(count)]
    torch.testing.assert_close(compiled(*[t.clone() for t in distinct]), total(*[t.clone() for t in distinct]))
    for i, j in ((0, count - 1), (count // 2, count - 1)):
        same = [torch.ones(2) for _ in range(count)]
        same[j] = same[i]
        eager = [torch.ones(2) for _ in range(count)]
        eager[j] = eager[i]
        torch.testing.assert_close(compiled(*same), total(*eager))
    assert counter.compiles >= 2  # the aliased arrangements did not reuse the distinct one's entry


def test_list_items_the_trace_only_replaces_are_not_guarded():
    """YOLOv5's Detect head with `dynamic=True`: `self.grid[i] = make_grid(...)` replaces cached
    tensors the trace never reads. A frame list's items are wrapped (and guarded) when first read,
    as torch._dynamo's lazy trackers are; they were all guarded when the list was read, so the
    second call, with the new grids, compiled again (torch._dynamo compiles once)."""
    from pyframe.debug.compare import CountingBackend

    class Head(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.grid = [torch.empty(0), torch.empty(0)]

        def forward(self, xs):
            out = []
            for i in range(2):
                self.grid[i] = torch.zeros(xs[i].shape)
                out.append(xs[i] + self.grid[i])
            return out

    backend = CountingBackend()
    compiled = pyframe.optimize(backend)(Head())
    for _ in range(2):
        out = compiled([torch.ones(2), torch.ones(3)])
        torch.testing.assert_close(out, [torch.ones(2), torch.ones(3)])
    assert len(backend.graphs) == 1


class _BreakingItems:
    @property
    def items(self):
        torch._dynamo.graph_break()
        return [1.0, 2.0]


def _comprehension_over_a_breaking_read(x, holder):
    return x[:2] * torch.stack([torch.tensor(t) for t in holder.items])  # MAKE_FUNCTION, then the break


def _lambda_over_a_breaking_read(x, holder):
    scale = lambda v, k=2.0: v * k  # noqa: E731
    items = holder.items
    return scale(x) + items[0]


@pytest.mark.parametrize("fn", [_comprehension_over_a_breaking_read, _lambda_over_a_breaking_read])
def test_a_function_made_by_each_call_is_guarded_by_its_code_not_its_identity(fn):
    """A comprehension or nested function without cells, alive across a graph break (the resume
    function takes it as an argument), is a new object on every call: guarded by identity, every
    call recompiled (up to accumulated_recompile_limit). Its code, and the defaults the trace reads,
    say what it computes."""
    counter = Counter()
    opt = pyframe.optimize(counter)(fn)
    holder = _BreakingItems()
    for _ in range(4):
        torch.testing.assert_close(opt(torch.ones(3), holder), fn(torch.ones(3), holder))
    first = counter.compiles
    for _ in range(3):
        torch.testing.assert_close(opt(torch.ones(3), holder), fn(torch.ones(3), holder))
    assert counter.compiles == first


def test_a_nested_function_with_other_code_recompiles():
    counter = Counter()

    def apply(f, x):
        return f(x) + 1

    opt = pyframe.optimize(counter)(apply)
    x = torch.ones(3)
    for k in (2.0, 3.0):  # same code, a default changed: the default is guarded where it is read
        def scale(v, k=k):
            return v * k
        torch.testing.assert_close(opt(scale, x), apply(scale, x))
    torch.testing.assert_close(opt(lambda v: v - 5, x), x - 4)
    assert counter.compiles == 3


# -- facts the trace folds that TENSOR_MATCH, == and the globals' guards did not cover (issue 19) --

def offset_scaled(x):
    return x * x.storage_offset()


def offset_of_a_view(x):
    return x[1:] + x[1:].storage_offset()


def offset_in_a_branch(x, y):
    if x.storage_offset() > 0:
        return x + y
    return x - y


@pytest.mark.parametrize("fn", [offset_scaled, offset_of_a_view, offset_in_a_branch])
def test_a_storage_offset_read_is_guarded(fn):
    counter = Counter()
    compiled = pyframe.optimize(counter)(fn)
    base = torch.arange(10.0)
    views = [base[0:4], base[2:6], base[0:4], base[3:7], base[3:7]]
    for view in views:
        args = [view] + [torch.ones(4)] * (fn.__code__.co_argcount - 1)
        torch.testing.assert_close(compiled(*args), fn(*args))
    assert counter.compiles == 3  # offsets 0, 2, 3: one entry each


def test_offsets_are_not_guarded_when_no_trace_reads_them():
    counter = Counter()
    compiled = pyframe.optimize(counter)(scaled)
    base = torch.arange(10.0)
    for view in (base[0:4], base[2:6], base[3:7]):
        torch.testing.assert_close(compiled(view, 2), scaled(view, 2))
    assert counter.compiles == 1


def copysign_of(x, y):
    return x * math.copysign(1.0, y)


def text_of(x, y):
    return x + len(str(y))


def angle_of(x, y):
    return x + math.atan2(y, -1.0)


def nan_test(x, y):
    return x + (1.0 if y != y else 2.0)


def tuple_of_floats(x, ys):
    return x * math.copysign(1.0, ys[1])


@pytest.mark.parametrize("fn", [copysign_of, text_of, angle_of])
def test_a_float_argument_minus_zero_is_not_zero(fn):
    counter = Counter()
    compiled = pyframe.optimize(counter)(fn)
    x = torch.ones(2)
    for y in (0.0, -0.0, 0.0, -0.0):
        torch.testing.assert_close(compiled(x, y), fn(x, y))
    assert counter.compiles == 2


def test_a_float_inside_a_tuple_constant_tells_minus_zero_apart():
    counter = Counter()
    compiled = pyframe.optimize(counter)(tuple_of_floats)
    x = torch.ones(2)
    for ys in ((1.0, 0.0), (1.0, -0.0), (1.0, 0.0)):
        torch.testing.assert_close(compiled(x, ys), tuple_of_floats(x, ys))


def test_a_nan_argument_matches_a_nan():
    counter = Counter()
    compiled = pyframe.optimize(counter)(nan_test)
    x = torch.ones(2)
    for y in (float("nan"), float("nan"), 1.5, float("nan")):
        torch.testing.assert_close(compiled(x, y), nan_test(x, y))
    assert counter.compiles == 2


def uses_len(x):
    return x * len([1, 2])


def uses_abs_after_break(x):
    x = x + 1
    torch._dynamo.graph_break()
    return x * abs(-2)


def uses_max_in_a_helper(x):
    return _helper_using_max(x)


def _helper_using_max(x):
    return x * max(1, 2)


@pytest.mark.parametrize("fn, name, shadow", [
    (uses_len, "len", lambda seq: 10),
    (uses_abs_after_break, "abs", lambda v: 7),
    (uses_max_in_a_helper, "max", lambda *a: 5),
])
def test_a_global_that_later_shadows_a_builtin_recompiles(fn, name, shadow, monkeypatch):
    counter = Counter()
    compiled = pyframe.optimize(counter)(fn)
    x = torch.ones(2)
    torch.testing.assert_close(compiled(x), fn(x))
    monkeypatch.setitem(globals(), name, shadow)
    torch.testing.assert_close(compiled(x), fn(x))
    monkeypatch.delitem(globals(), name)
    torch.testing.assert_close(compiled(x), fn(x))


def _breaks_then_calls_helper(x):
    x = x * 2
    torch._dynamo.graph_break()
    return _helper_using_max(x)


def test_one_code_under_other_globals_gets_its_own_resume_function():
    """An entry's resume function is made with the frame's globals: the same code object run
    with other globals (types.FunctionType(f.__code__, g)) does not reuse it."""
    other = types.FunctionType(_breaks_then_calls_helper.__code__,
                               {"torch": torch, "_helper_using_max": lambda x: x + 100}, "other")
    x = torch.ones(2)
    for fn in (_breaks_then_calls_helper, other, _breaks_then_calls_helper, other):
        torch.testing.assert_close(pyframe.optimize(Counter())(fn)(x), fn(x))


def add_into_first(a, b):
    a.add_(1)
    return a + b


def scale_both(a, b):
    a.mul_(2)
    b.mul_(3)
    return a + b


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("fn", [add_into_first, scale_both])
def test_overlapping_views_of_one_base_are_guarded_by_storage(backend, fn):
    """Two distinct tensors can share memory: the aliasing guard compares storages, not only
    objects, and inputs traced on one storage keep their offsets and the storage's size."""
    compiled = pyframe.optimize(backend)(fn)
    arrangements = [
        lambda base: (base[0:4], base[4:8]),      # one storage, apart
        lambda base: (base[0:4], base[2:6]),      # overlapping
        lambda base: (torch.zeros(4), torch.zeros(4)),
        lambda base: (base[1:5], base[3:7]),      # overlapping, other offsets
        lambda base: (base[0:4], base[0:4]),      # the same memory twice
        lambda base: (base[0:4], base[2:6]),
    ]
    for make in arrangements:
        base, eager_base = torch.zeros(8), torch.zeros(8)
        args, eager_args = make(base), make(eager_base)
        torch.testing.assert_close(compiled(*args), fn(*eager_args))
        torch.testing.assert_close(base, eager_base)


# -- attribute facts: where obj.name was found (issue 19, items 2 and 6) ---------------------------
# Each program: compile, change the fact, call again. The entry must not be reused for the new
# fact (results equal eager's), and each change recompiles once.

def _compiled_twice(fn, change, *args, compiles: int = 2):
    """Call the compiled fn, `change()`, call it twice more: each result equals eager's."""
    pyframe.reset()
    counter = Counter()
    opt = pyframe.optimize(counter)(fn)
    torch.testing.assert_close(opt(*args), fn(*args))
    change()
    torch.testing.assert_close(opt(*args), fn(*args))
    torch.testing.assert_close(opt(*args), fn(*args))
    assert counter.compiles == compiles
    return counter


class _Act:
    def act(self, x):
        return x + 1


class _ActModule(torch.nn.Module):
    def act(self, x):
        return x + 1

    def forward(self, x):
        return self.act(x) * 2


def _call_act(o, x):
    return o.act(x)


def test_an_instance_attribute_shadowing_a_method_recompiles():
    x = torch.randn(3)
    o = _Act()
    _compiled_twice(_call_act, lambda: setattr(o, "act", lambda t: t * 10), o, x)
    m = _ActModule()
    _compiled_twice(m, lambda: setattr(m, "act", lambda t: t * 10), x)
    other = _Act()  # a bound method of another object put on the instance
    p = _Act()
    _compiled_twice(_call_act, lambda: setattr(p, "act", types.MethodType(lambda self, t: t - 5, other)), p, x)


def test_a_method_or_property_replaced_on_the_class_or_a_base_recompiles():
    x = torch.randn(3)

    def classes():
        class Base:
            def g(self, t):
                return t + 1

            @property
            def k(self):
                return 2

        class C(Base):
            pass

        return Base, C

    def uses(o, t):
        return o.g(t) * o.k

    for on_base, name, value in ((False, "g", lambda self, t: t * 10), (True, "g", lambda self, t: t - 3),
                                 (True, "k", property(lambda self: 7)), (False, "k", property(lambda self: 5))):
        base, cls = classes()
        o = cls()
        _compiled_twice(uses, lambda: setattr(base if on_base else cls, name, value), o, x)

    class BaseModule(torch.nn.Module):
        def g(self, t):
            return t + 1

    class M(BaseModule):
        @property
        def k(self):
            return 2

        def forward(self, t):
            return self.g(t) * self.k

    m = M()
    _compiled_twice(m, lambda: setattr(BaseModule, "g", lambda self, t: t * 10), x)
    _compiled_twice(m, lambda: setattr(M, "k", property(lambda self: 5)), x)


def test_a_method_of_a_class_whose_instance_the_frame_makes_is_guarded():
    class Point:
        def __init__(self, t):
            self.t = t

        def scaled(self):
            return self.t * 2

    def make(t):
        return Point(t).scaled()

    _compiled_twice(make, lambda: setattr(Point, "scaled", lambda self: self.t * 3), torch.randn(3))


def test_hasattr_and_getattr_with_a_default_on_a_module_see_attributes_added_later():
    x = torch.randn(3)

    class HasExtra(torch.nn.Module):
        def forward(self, t):
            if hasattr(self, "extra"):
                return t + self.extra
            return t * 1.5

    class GetExtra(torch.nn.Module):
        def forward(self, t):
            extra = getattr(self, "extra", None)
            return t * 1.5 if extra is None else t * extra

    for cls in (HasExtra, GetExtra):
        m = cls()
        _compiled_twice(m, lambda: setattr(m, "extra", 5.0), x)
        m = cls()  # registered as a buffer: not in the instance dict, found by __getattr__
        _compiled_twice(m, lambda: m.register_buffer("extra", torch.full((3,), 2.0)), x)
        m = cls()  # or on the class
        _compiled_twice(m, lambda: setattr(cls, "extra", 3.0), x)
        del cls.extra


def test_a_python_attribute_set_later_on_a_tensor_or_parameter_recompiles():
    def scaled(t):
        return t * getattr(t, "scale", 1.0)

    def tagged(t):
        return t * 2 if hasattr(t, "tag") else t * 1.5

    for fn, name in ((scaled, "scale"), (tagged, "tag")):
        y = torch.randn(3)
        _compiled_twice(fn, lambda: setattr(y, name, 3.0), y)
    lin = torch.nn.Linear(3, 3)

    def through_parameter(t):
        return lin(t) * getattr(lin.weight, "scale", 1.0)

    _compiled_twice(through_parameter, lambda: setattr(lin.weight, "scale", 3.0), torch.randn(3))
    y = torch.randn(3)
    y.scale = 2.0  # present, then changed
    _compiled_twice(scaled, lambda: setattr(y, "scale", 4.0), y)


def test_function_attributes_and_int_attributes_of_modules_are_guarded():
    x = torch.randn(3)

    def pred():
        pass

    pred.flag = True

    def reads_flag(fn, t):
        return t + 1 if fn.flag else t - 1

    _compiled_twice(reads_flag, lambda: setattr(pred, "flag", False), pred, x)

    class Repeat(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.n = 2

        def forward(self, t):
            for _ in range(self.n):
                t = t * 2
            return t

    m = Repeat()
    _compiled_twice(m, lambda: setattr(m, "n", 3), x)


def _move_to_end(table: dict, key: str) -> None:
    table[key] = table.pop(key)


def test_the_order_of_parameters_buffers_and_submodules_is_guarded():
    x = torch.randn(3)

    class Tree(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Parameter(torch.ones(3))
            self.b = torch.nn.Parameter(torch.full((3,), 2.0))
            self.register_buffer("p", torch.full((3,), 3.0))
            self.register_buffer("q", torch.full((3,), 4.0))
            self.first = torch.nn.Linear(3, 3)
            self.second = torch.nn.Tanh()

        def forward(self, t):
            for _, p in self.named_parameters(recurse=False):
                t = t * p - 1
            for b in self.buffers():
                t = t / b + 1
            for child in self.children():
                t = child(t)
            return t

    for table, key in (("_parameters", "a"), ("_buffers", "p"), ("_modules", "first")):
        m = Tree()
        _compiled_twice(m, lambda: _move_to_end(getattr(m, table), key), x)

    class Seq(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Sigmoid())

        def forward(self, t):
            return self.layers(t)

    s = Seq()
    _compiled_twice(s, lambda: _move_to_end(s.layers._modules, "0"), x)


def test_forward_or_call_replaced_after_compiling_recompiles():
    x = torch.randn(3)

    class Inner(torch.nn.Module):
        def forward(self, t):
            return t + 1

    inner = Inner()

    def calls_module(t):
        return inner(t)

    _compiled_twice(calls_module, lambda: setattr(inner, "forward", lambda t: t * 10), x)

    class Inner2(torch.nn.Module):
        def forward(self, t):
            return t + 1

    inner2 = Inner2()

    def calls_module2(t):
        return inner2(t)

    _compiled_twice(calls_module2, lambda: setattr(Inner2, "__call__", lambda self, t: t * 10), x)

    class Callable_:
        def __call__(self, t):
            return t + 1

    c = Callable_()

    def calls_object(t):
        return c(t)

    _compiled_twice(calls_object, lambda: setattr(Callable_, "__call__", lambda self, t: t * 10), x)
    # an instance's __call__ is not what `c(t)` calls (special methods are looked up on the type)
    counter = _compiled_twice(calls_object, lambda: setattr(c, "__call__", lambda t: t * 99), x, compiles=1)
    assert counter.compiles == 1


def test_a_module_method_is_guarded_by_its_class_lookup():
    """One CLASS_ATTR_MATCH on the module: it reads only the module's type and instance dict, so
    with the module pinned the cache hit skips it with the subtree while neither changes."""
    m = _ActModule()
    opt = pyframe.optimize(Counter())(m)
    x = torch.randn(3)
    opt(x)
    texts = pyframe.debug.cache_entries(_ActModule.forward)[0].guards
    assert any(t.startswith("type(L['self']).act is function") and "not in L['self'].__dict__" in t for t in texts)
    torch.testing.assert_close(opt(x), m(x))


class _Settings:
    def __init__(self):
        self.scale = 2.0


class CopiesItsSettings(torch.nn.Module):
    """copy.copy of an object of the frame: the copy protocol reads the class's special methods
    (`__reduce_ex__`, `__getnewargs__`, `__setstate__`, `__new__`) and each must be guarded where
    it lives, the class, so that the module's subtree can still be skipped while unchanged."""

    def __init__(self):
        super().__init__()
        self.settings = _Settings()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        settings = copy.copy(self.settings)
        settings.scale = settings.scale + 1
        return self.lin(x) * settings.scale


def test_copying_an_object_keeps_its_module_subtree_skippable(monkeypatch):
    _warmed_up(CopiesItsSettings, monkeypatch, skip_unchanged=True, calls=3)
    states = {source: state for source, state, *_ in _entry_guards(CopiesItsSettings).snapshots()}
    assert states["L['self']"] == "valid", states

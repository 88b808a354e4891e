"""The memo of FakeTensor propagation (pyframe/fake/memo.py): a hit must give every node exactly the
metadata the real propagation gives, and what it may not stand for is never remembered.

Compared for every node: its shape, stride, storage offset, dtype, device, requires_grad, whether it
is a leaf and has a grad_fn, and which earlier nodes' values share its storage. Not compared: whether
a value no other graph value aliases is itself a view (F.linear of a batch is a view of its own
addmm's output, a temporary nothing else can reach; a hit rebuilds it as a fresh tensor)."""
from __future__ import annotations

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensor

import pyframe
from pyframe import config
from pyframe.debug.cases import Case, load_cases
from pyframe.graph import propagation_memo
from tests.cases import ALL


@pytest.fixture(autouse=True)
def _fresh():
    pyframe.reset()
    yield
    pyframe.reset()


def _rebuilt(memo, key):
    """The output remembered for `key`, built anew as graph.py builds it; None on a miss."""
    out = memo.entry(key)
    return None if out is None else out.build(memo.mode)


def _meta(value):
    if isinstance(value, torch.Tensor):
        return (type(value).__name__, tuple(value.shape), value.stride(), value.storage_offset(), value.dtype,
                str(value.device), value.requires_grad, value.is_leaf, value.grad_fn is None)
    if isinstance(value, (tuple, list)):
        return tuple(_meta(v) for v in value)
    return repr(value) if isinstance(value, (int, float, bool, type(None))) else type(value).__name__


class RecordingBackend:
    """Keeps, for every graph, each node's op, target and the metadata of its example value."""

    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(_describe(gm))
        return gm.forward


def _describe(gm) -> list:
    """Each node's op, target, example value's metadata and the earlier nodes it aliases."""
    described, seen = [], []
    for n in gm.graph.nodes:
        value = n.meta.get("example_value")
        aliases = tuple(name for name, earlier in seen
                        if isinstance(value, torch.Tensor) and torch._C._is_alias_of(value, earlier))
        described.append((n.op, str(n.target), _meta(value), aliases))
        if isinstance(value, torch.Tensor):
            seen.append((n.name, value))
    return described


def _trace(case: Case, memo: bool, monkeypatch) -> list:
    monkeypatch.setattr(config, "fast_fake_propagation", memo)
    pyframe.reset()
    backend = RecordingBackend()
    inputs = case.make_inputs()
    try:
        pyframe.optimize(backend)(case.make_fn())(*inputs.args, **inputs.kwargs)
    except Exception as e:  # a case may raise, as eager does: the graphs before it still count
        backend.graphs.append(type(e).__name__)
    return backend.graphs


CASES = load_cases(ALL)


@pytest.mark.parametrize("case", [pytest.param(c, id=c.qualname) for c in CASES])
def test_memo_gives_the_metadata_of_real_propagation(case, monkeypatch):
    real = _trace(case, False, monkeypatch)
    filled = _trace(case, True, monkeypatch)
    replayed = _trace(case, True, monkeypatch)  # the same trace again: every remembered op hits
    assert filled == real
    assert replayed == real


def test_repeated_ops_hit_the_memo(monkeypatch):
    monkeypatch.setattr(config, "fast_fake_propagation", True)
    memo = propagation_memo()

    def repeated(x):
        for _ in range(10):
            x = torch.sin(x) * 1.5
        return x

    x = torch.randn(4, 5)
    hits = memo.hits
    torch.testing.assert_close(pyframe.optimize("eager")(repeated)(x), repeated(x))
    assert memo.hits - hits >= 18  # the first sin and mul may miss; the other 18 ops hit


@pytest.mark.parametrize("program", [
    lambda x: x.add_(1) * 2,                      # in place: returns its input
    lambda x: x.view(20) + 1,                     # a view of its input
    lambda x: x.t().sin(),                        # strided input: its strides are in the key
    lambda x: torch.add(x, 1, out=torch.empty(4, 5)),
    lambda x: (x * 2).requires_grad_().sin(),      # a leaf that requires grad, then an op on it
    lambda x: torch.zeros(4, 5, requires_grad=True) * x,  # a leaf made in the graph
    lambda x: torch.nn.functional.linear(x.expand(2, 4, 5), torch.ones(3, 5, requires_grad=True)).sin(),
    lambda x: x.int() * 2 + x.int() * 2.0,        # int and float constants promote differently
    lambda x: x[1:3].sin() + x[0:2].sin(),
])
def test_memo_never_stands_for_what_it_cannot_rebuild(program, monkeypatch):
    class Recorded:
        graphs = None

    def recording(gm, example_inputs):
        Recorded.graphs = _describe(gm)
        return gm.forward

    results = {}
    for memo in (False, True, True):
        monkeypatch.setattr(config, "fast_fake_propagation", memo)
        pyframe.reset()
        x = torch.arange(20.0).reshape(4, 5)
        out = pyframe.optimize(recording)(program)(x)
        torch.testing.assert_close(out, program(torch.arange(20.0).reshape(4, 5)))
        results.setdefault(memo, []).append(Recorded.graphs)
    assert results[True] == [results[False][0]] * 2


def test_views_and_in_place_ops_are_not_remembered():
    memo = propagation_memo()
    mode = memo.mode
    with mode:
        x = torch.empty(4, 5)
    key = ("k",)
    size = len(memo._entries)
    with mode:
        memo.remember(key, [x], [x._version], x.view(20))
        memo.remember(key, [x], [x._version], x.add_(1))
        assert len(memo._entries) == size
        memo.remember(key, [x], [x._version], x * 2)
    assert len(memo._entries) == size + 1
    with mode:
        rebuilt = _rebuilt(memo, key)
    assert type(rebuilt).__name__ == "FakeTensor" and rebuilt.shape == (4, 5) and rebuilt.device.type == "cpu"
    assert not torch._C._is_alias_of(rebuilt, x)


def test_outputs_that_require_grad_are_rebuilt_with_a_grad_fn():
    memo = propagation_memo()
    mode = memo.mode
    with mode:
        p = torch.empty(4, 5, requires_grad=True)
        memo.remember(("rg",), [p], [p._version], p * 2)
        memo.remember(("leaf",), [], [], torch.zeros(3, requires_grad=True))
    out, leaf = _rebuilt(memo, ("rg",)), _rebuilt(memo, ("leaf",))
    assert out.requires_grad and not out.is_leaf and out.grad_fn is not None
    assert leaf.requires_grad and leaf.is_leaf and leaf.grad_fn is None
    with mode:
        out.add_(1)  # in place on a non-leaf: allowed, as on the real output
        with pytest.raises(RuntimeError, match="leaf Variable"):
            leaf.add_(1)  # as on the real leaf


def test_cat_onto_an_empty_constant_is_remembered(monkeypatch):
    # `torch.tensor([])` is a constant FakeTensor (FakeTensorMode keeps its values); an empty one
    # has none to decide anything, so an op on it is keyed by its metadata, apart from a plain
    # tensor's: a cache's `torch.cat([empty, x])` hits the memo the second time, with the
    # metadata the real propagation gives. One with values is not keyed.
    def program(x):
        keys = torch.tensor([], dtype=x.dtype)
        return torch.cat([keys, x], dim=-2).sin(), torch.cat([torch.tensor([1.0]), x.flatten()])

    results = {}
    memo = propagation_memo()
    for fast in (False, True, True):
        monkeypatch.setattr(config, "fast_fake_propagation", fast)
        pyframe.reset()
        backend = RecordingBackend()
        x = torch.randn(2, 3, 4)
        hits = memo.hits
        out = pyframe.optimize(backend)(program)(x)
        torch.testing.assert_close(out, program(x))
        results.setdefault(fast, []).append((backend.graphs, memo.hits - hits))
    (real, _), = results[False]
    (filled, _), (replayed, replay_hits) = results[True]
    assert filled == real and replayed == real
    assert replay_hits >= 2  # the cat onto the empty constant and the sin after it

    state = memo.global_state()
    nodes = {}
    for value, keyed in ((torch.tensor([]), True), (torch.tensor([2.0]), False)):
        with memo.mode:
            fake = torch.tensor(value.tolist())
        node = torch.fx.Graph().placeholder("x")
        node.meta["example_value"] = fake
        nodes[keyed] = memo.key("call_function", torch.cat, ([node],), {}, (True,), state, {})
    assert nodes[True] is not None and nodes[False] is None


def test_unkeyable_arguments_are_not_memoized():
    memo = propagation_memo()
    state = memo.global_state()

    def key(target, args, kwargs=None):
        return memo.key("call_function", target, args, kwargs or {}, (True,), state, {})

    assert key(torch.add, (object(),)) is None
    assert key(torch.add, (1, 2.0, (3, None), slice(1, 2)), {"alpha": 2}) is not None
    assert key(torch.mul, (1,)) != key(torch.mul, (1.0,))


def _fake_meta(f):
    return (type(f).__name__, isinstance(f, torch.nn.Parameter), tuple(f.shape), f.stride(), f.dtype, f.device,
            f.requires_grad, f.is_leaf, f.grad_fn is None, f.storage_offset(), f.untyped_storage().nbytes(),
            f._is_view())


@pytest.mark.parametrize("make", [
    lambda: torch.nn.Parameter(torch.randn(3, 4)),
    lambda: torch.randn(3, 4),
    lambda: torch.randn(2, 3, requires_grad=True),
    lambda: torch.zeros(2, dtype=torch.int64),
    lambda: torch.randn(1, 3, 4, 4).to(memory_format=torch.channels_last),
    lambda: torch.randn(4, 3).t(),                    # a view: from_tensor's path
    lambda: torch.randn(6)[2:],                       # an offset into shared memory: from_tensor's path
    lambda: torch.randn(2, 3, requires_grad=True) * 2,  # not a leaf: from_tensor's path
])
def test_plain_fake_equals_from_tensor(make):
    from pyframe.fake.memo import plain_fake
    from pyframe.graph import fake_mode

    t = make()
    fast = plain_fake(fake_mode(), t)
    reference = fake_mode().from_tensor(t, static_shapes=True)
    if t._is_view() or not t.is_leaf:
        assert fast is None
    else:
        assert fast is not None and fast.fake_mode is fake_mode()
        assert _fake_meta(fast) == _fake_meta(reference)


def test_one_tensor_under_two_sources_is_one_fake_tensor():
    shared = torch.nn.Linear(3, 3)

    class Tied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = shared, shared

        def forward(self, x):
            return self.a(x) + self.b.weight.sum()

    seen = []

    def backend(gm, example_inputs):
        seen.append({n.name: n.meta["example_value"] for n in gm.graph.nodes if n.op == "placeholder"})
        return gm.forward

    m, x = Tied(), torch.randn(2, 3)
    torch.testing.assert_close(pyframe.optimize(backend)(m)(x), m(x))
    # one placeholder for the tensor under both sources, as torch._dynamo 2.13 makes it
    # (l_self_modules_a_parameters_weight_, ..._bias_, l_x_), with the one FakeTensor
    weights = [(name, v) for name, v in seen[0].items() if name.endswith("weight_")]
    assert [name for name, _ in weights] == ["l_self_modules_a_parameters_weight_"]
    assert isinstance(weights[0][1], FakeTensor) and weights[0][1].shape == shared.weight.shape


def test_inference_mode_and_inference_tensors_take_the_real_paths():
    memo = propagation_memo()

    def f(x):
        return torch.sin(x) * 2 + 1

    with torch.inference_mode():
        x = torch.randn(3)
        assert memo.global_state() is None  # nothing is memoized under inference mode
        torch.testing.assert_close(pyframe.optimize("eager")(f)(x), f(x))
    torch.testing.assert_close(pyframe.optimize("eager")(f)(x), f(x))  # an inference tensor, outside


@pytest.mark.parametrize("shape, stride, dtype", [((2, 3), (3, 1), torch.float32), ((4, 1, 5), (1, 20, 4), torch.int64),
                                                  ((), (), torch.bool)])
def test_new_fake_equals_the_constructor(shape, stride, dtype):
    from torch._subclasses.fake_tensor import FakeTensor

    from pyframe.fake.memo import new_fake
    from pyframe.graph import fake_mode

    def meta():
        return torch.empty_strided(shape, stride, dtype=dtype, device="meta")

    cpu = torch.device("cpu")
    fast, reference = new_fake(fake_mode(), meta(), cpu), FakeTensor(fake_mode(), meta(), cpu)
    assert fast.__dict__ == reference.__dict__
    assert _fake_meta(fast) == _fake_meta(reference)
    assert fast.fake_mode is fake_mode() and repr(fast) == repr(reference)
    with fake_mode():
        assert _fake_meta(fast + 1) == _fake_meta(reference + 1)
    outcomes = []
    for fake in (fast, reference):  # reading its data: as the constructor's (torch raises on a fake's storage)
        try:
            outcomes.append(("returned", fake.untyped_storage().data_ptr()))
        except Exception as e:
            outcomes.append(("raised", type(e).__name__))
    assert outcomes[0] == outcomes[1]


def test_tuples_of_fresh_tensors_are_remembered():
    """`(out, None)` from F.multi_head_attention_forward, two outputs of torch.max: rebuilt item by
    item; a tuple whose items share memory (torch.split) is not remembered."""
    memo = propagation_memo()
    mode = memo.mode
    with mode:
        x = torch.empty(4, 6, requires_grad=True)
        memo.remember(("pair",), [x], [x._version], (x * 2, None))
        memo.remember(("split",), [x], [x._version], tuple((x * 2).split(3, dim=1)))
    pair = _rebuilt(memo, ("pair",))
    assert type(pair) is tuple and pair[1] is None and pair[0].shape == (4, 6)
    assert pair[0].requires_grad and pair[0].grad_fn is not None
    assert _rebuilt(memo, ("split",)) is None


def test_a_user_dispatch_mode_turns_the_memo_off():
    """Hits build tensors with torch calls a user's dispatch mode would see (and could change)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Passthrough(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    def f(x):
        return torch.sin(x) * 2 + torch.sin(x) * 2

    x = torch.randn(3)
    with Passthrough():
        assert propagation_memo().global_state() is None
        torch.testing.assert_close(pyframe.optimize("eager")(f)(x), f(x))
    assert propagation_memo().global_state() is not None


def test_rules_decline_under_autocast_around_the_call():
    """F.linear under `torch.autocast("cpu")` gives bfloat16: no shape rule may answer float32."""
    seen = []

    def backend(gm, example_inputs):
        seen.extend(n.meta["example_value"].dtype for n in gm.graph.nodes if n.op == "call_function")
        return gm.forward

    def f(x, w):
        return torch.nn.functional.linear(x, w) + 1

    x, w = torch.randn(4, 3), torch.randn(2, 3)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = pyframe.optimize(backend)(f)(x, w)
        expected = f(x, w)
    torch.testing.assert_close(out, expected)
    assert seen and seen[0] == torch.bfloat16 == expected.dtype


@pytest.mark.parametrize("make", [
    lambda: torch.empty(4, 5) * 2,                              # contiguous
    lambda: torch.empty(5, 4).t() + 1,                          # strided as its input
    lambda: torch.empty(4, 5, requires_grad=True) * 2,          # a non-leaf with a grad_fn
    lambda: torch.zeros(3, requires_grad=True),                 # a leaf that requires grad
    lambda: torch.empty(()) + 1,                                # 0-d
])
def test_value_key_of_a_hit_is_the_key_of_what_it_builds(make):
    """A node made from a hit takes its memo key from the record (no reading back): the record's
    value_key must be what _tensor_key reads from the tensor the record builds."""
    from pyframe.fake.memo import _Output, _tensor_key

    memo = propagation_memo()
    with memo.mode:
        real = make()
    out = _Output.of(real)
    with memo.mode:
        built = out.build(memo.mode)
    assert out.value_key == _tensor_key(built) == _tensor_key(real)
    assert hash(out.value_key) == hash(_tensor_key(built))


@pytest.mark.parametrize("args, kwargs", [
    (([],), {"dtype": torch.float32, "device": torch.device("cpu")}),  # a cache's empty start
    ((0.5,), {}), ((True,), {}), ((3,), {"device": "cpu"}),              # one element: kept as a constant
    (([1, 2, 3],), {}), (([[1.0], [2.0]],), {"dtype": torch.float16}),   # more: no constant
])
def test_constant_tensor_equals_the_lift(args, kwargs):
    from pyframe.fake.memo import constant_tensor
    from pyframe.graph import fake_mode

    fast = constant_tensor(fake_mode(), args, kwargs)
    with fake_mode():
        reference = torch.tensor(*args, **kwargs)
    assert fast is not None and fast.fake_mode is fake_mode()
    assert _fake_meta(fast) == _fake_meta(reference)
    assert set(fast.__dict__) == set(reference.__dict__)
    if reference.constant is None:
        assert fast.constant is None
    else:
        torch.testing.assert_close(fast.constant, reference.constant, rtol=0, atol=0)


@pytest.mark.parametrize("args, kwargs", [
    ((torch.ones(2),), {}),                    # a tensor: FakeTensorMode's path
    ((0.5,), {"requires_grad": True}),         # another keyword
    (("a",), {}),                              # data torch.tensor rejects: the real error is raised there
])
def test_constant_tensor_leaves_the_rest_to_fake_tensor_mode(args, kwargs):
    from pyframe.fake.memo import constant_tensor
    from pyframe.graph import fake_mode

    assert constant_tensor(fake_mode(), args, kwargs) is None


def test_a_constant_made_in_the_trace_keeps_its_value():
    def f(x):
        scale = torch.tensor(2.0)
        empty = torch.tensor([], dtype=x.dtype)
        return torch.cat([empty, x * scale]) + torch.tensor([1.0, 2.0, 3.0])

    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    x = torch.randn(3)
    torch.testing.assert_close(pyframe.optimize(backend)(f)(x), f(x))
    assert len(graphs) == 1
    made = [n.meta["example_value"] for n in graphs[0].graph.nodes if n.target is torch.tensor]
    assert [t.constant is not None for t in made] == [True, True, False]  # as FakeTensorMode keeps them
    assert made[0].constant.item() == 2.0

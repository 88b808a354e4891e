"""Fast FakeTensor propagation over symbolic sizes (pyframe/fake/sym_rules.py, and the memo of a
trace with dynamic shapes, pyframe/fake/memo.py), against FakeTensorMode over a ShapeEnv.

A rule either declines or gives exactly what the real propagation gives (sizes and strides as the
same expressions, dtype, grad flags), and it answers only where the real propagation leaves the
ShapeEnv as it was: no guard, no replacement, no narrowed range. Where the real propagation does
decide something about a symbol (`s0` broadcast with `s1` or with 5), the rule declines.

End to end, a trace with fast propagation on and one with it off give the same graphs (every node's
metadata, symbolic sizes included) and leave the same knowledge in the ShapeEnv (its guards,
replacements and ranges, and the guards lowered for C++), and the memo of a transformer's trace is
hit by its second block. And the ShapeEnv of each symbolic compile knows what torch._dynamo's knows
(the same guards, replacements and ranges), on the transformers models and the dynamic shape cases.
"""
from __future__ import annotations

import operator
from typing import Any

import pytest
import torch
import torch.fx
import torch._dynamo
import torch.nn.functional as F
from torch._dispatch.python import enable_python_dispatcher
from torch._subclasses.fake_tensor import FakeTensor

import pyframe
from pyframe import config, convert_frame, graph
from pyframe.fake import sym_rules
from pyframe.fake.memo import PropagationMemo, _Output, _symbolic_tensor_key, by_empty
from pyframe.fake.rules import contiguous_strides
from pyframe.fake.shapes import new_symbolic_mode, symbolic_fake
from pyframe.source import LocalSource
from tests.test_dynamic_shapes import CASES as SHAPE_CASES


def _meta(t: torch.Tensor) -> tuple:
    return (tuple(str(s) for s in t.shape), tuple(str(s) for s in t.stride()), str(t.storage_offset()),
            t.dtype, t.device, t.requires_grad, t.is_leaf)


def _knowledge(shape_env) -> tuple:
    """What a ShapeEnv has decided about its symbols."""
    return ([str(g.expr) for g in shape_env.guards], dict(shape_env.replacements),
            {k: (v.lower, v.upper) for k, v in shape_env.var_to_range.items()})


def real_propagation(mode: Any, op: str, target: Any, args: tuple, kwargs: dict, grad: bool,
                     answer: Any) -> tuple[Any, list]:
    """(the output FakeTensorMode gives for the call on the nodes' FakeTensors, those tensors);
    None for an op that raises, where the rule must not have answered (`answer` None)."""
    fake_args = torch.fx.node.map_arg(args, lambda n: n.meta["example_value"])
    fake_kwargs = torch.fx.node.map_arg(kwargs, lambda n: n.meta["example_value"])
    tensors = [a for a in fake_args if isinstance(a, torch.Tensor)]
    try:
        with mode, torch.set_grad_enabled(grad), enable_python_dispatcher():
            return (getattr(fake_args[0], target)(*fake_args[1:], **fake_kwargs) if op == "call_method"
                    else target(*fake_args, **fake_kwargs)), tensors
    except Exception as e:  # noqa: BLE001
        assert answer is None, f"{target} answered where the op raises {type(e).__name__}: {e}"
        return None, tensors


class Harness:
    """FakeTensors over one ShapeEnv as fx nodes (what a rule reads), and the real propagation."""

    def __init__(self) -> None:
        self.mode = new_symbolic_mode()
        self.graph = torch.fx.Graph()

    def tensor(self, shape: tuple, dynamic: tuple = (), requires_grad: bool = False,
               name: str | None = None) -> torch.fx.Node:
        """A tensor of `shape`, the dimensions `dynamic` symbolic (each a symbol of its own: the
        source names it, so two tensors' dimensions share a symbol only when named alike)."""
        name = name or f"t{len(self.graph.nodes)}"
        real = torch.randn(shape, requires_grad=requires_grad)
        if dynamic:
            fake = symbolic_fake(self.mode, real, LocalSource(name), dynamic, duck=False)
        else:
            fake = self.mode.from_tensor(real, static_shapes=True)
        node = self.graph.placeholder(name)
        node.meta["example_value"] = fake
        return node

    def node_of(self, fake: Any) -> torch.fx.Node:
        node = self.graph.placeholder(f"t{len(self.graph.nodes)}")
        node.meta["example_value"] = fake
        return node

    def same_symbols(self, shape: tuple, like: torch.fx.Node) -> torch.fx.Node:
        """A tensor of `shape` whose sizes equal to `like`'s symbolic ones are those SymInts."""
        fake = like.meta["example_value"]
        sizes = [next((s for s in fake.shape if type(s) is not int and s.node.hint == n), n) for n in shape]
        node = self.graph.placeholder(f"t{len(self.graph.nodes)}")
        with self.mode:
            node.meta["example_value"] = torch.empty(sizes)
        return node

    def check(self, op: str, target: Any, args: tuple, kwargs: dict | None = None, grad: bool = True) -> bool:
        """Whether the rule answered; when it did, its output is the real one and the real
        propagation decided nothing."""
        kwargs = kwargs or {}
        out = sym_rules.infer(op, target, args, kwargs, grad, autocast=False)
        before = _knowledge(self.mode.shape_env)
        real, _ = real_propagation(self.mode, op, target, args, kwargs, grad, out)
        if out is None or real is None:
            return False
        assert _knowledge(self.mode.shape_env) == before, f"{target}: the real propagation decided something"
        assert _meta(out.build(self.mode)) == _meta(real), (target, args, kwargs)
        assert _knowledge(self.mode.shape_env) == before, f"{target}: building the answer decided something"
        assert out.value_key == _symbolic_tensor_key(real)
        return True


def test_rules_give_the_real_output_and_leave_the_shape_env_as_it_was():
    h = Harness()
    x = h.tensor((2, 9, 32), dynamic=(1,), name="x")
    x_grad = h.tensor((2, 9, 32), dynamic=(1,), requires_grad=True, name="xg")
    w, b = h.tensor((64, 32)), h.tensor((64,))
    ln_w, ln_b = h.tensor((32,)), h.tensor((32,))
    row = h.tensor((1, 1, 32))
    same = h.same_symbols((2, 9, 32), x)
    square = h.same_symbols((2, 7, 7), h.tensor((2, 7), dynamic=(1,), name="sq"))  # (2, s, s)
    flat = h.node_of(x.meta["example_value"].view(-1, 32))  # (2*s, 32)
    ids = h.node_of(h.tensor((2, 9), dynamic=(1,), name="ids").meta["example_value"].long())
    answered = [
        h.check("call_function", F.linear, (x, w, b)),
        h.check("call_function", F.linear, (x, w)),
        h.check("call_function", torch._C._nn.linear, (x_grad, w, b)),
        h.check("call_function", torch._C._nn.linear, (x_grad, w, b), grad=False),
        h.check("call_function", operator.add, (x, same)),
        h.check("call_function", operator.mul, (x, row)),  # s with 1: s, without a guard
        h.check("call_function", operator.truediv, (x, 8.0)),
        h.check("call_method", "__radd__", (x_grad, 1)),
        h.check("call_function", torch.tanh, (x,)),
        h.check("call_method", "sigmoid", (x_grad,)),
        h.check("call_function", F.gelu, (x,), {"approximate": "tanh"}),
        h.check("call_function", F.silu, (x, False)),
        h.check("call_function", F.layer_norm, (x, (32,), ln_w, ln_b, 1e-5)),
        h.check("call_function", F.layer_norm, (x_grad, (32,))),
        h.check("call_method", "softmax", (x, -1)),
        h.check("call_method", "log_softmax", (x,), {"dim": 1}),
        h.check("call_function", torch.matmul, (x, h.tensor((32, 5)))),
        h.check("call_function", operator.matmul, (square, square)),  # (s with itself)
        h.check("call_function", torch.addmm, (h.tensor((96,)), flat, h.tensor((32, 96)))),
        h.check("call_function", F.linear, (flat, w, b)),
        h.check("call_function", torch.tanh, (flat,)),
        h.check("call_function", torch.pow, (x, 3.0)),
        h.check("call_method", "pow", (x_grad, 2)),
        h.check("call_method", "mean", (x, -1), {"keepdim": True}),
        h.check("call_function", torch.cat, ([x, same, x],), {"dim": -1}),
        h.check("call_function", torch.cat, ((x, h.same_symbols((2, 9, 8), x)), 2)),
        h.check("call_function", F.embedding, (ids, h.tensor((256, 32)))),
        h.check("call_function", F.embedding, (ids, h.tensor((256, 32), requires_grad=True), 0, None)),
        h.check("call_function", F.embedding, (ids, h.tensor((256, 32), requires_grad=True)), grad=False),
    ]
    assert all(answered), [i for i, a in enumerate(answered) if not a]


def test_dropout_outside_training_is_the_clone_the_python_dispatcher_makes():
    """Over a ShapeEnv, F.dropout(x, p, training=False) is torch/_decomp's `input.clone()`: a new
    tensor, requiring grad as a clone does. The rule answers for dense, contiguous inputs of every
    floating dtype and the ways nn.Dropout and user code call it, and declines elsewhere."""
    h = Harness()
    answered, declined = [], []
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        for shape, dynamic in [((2, 9, 32), (1,)), ((3, 5), (0, 1)), ((7,), (0,)), ((2, 6, 4, 8), (1, 2)),
                               ((4, 8), ())]:
            for requires_grad in (False, True):
                node = h.tensor(shape, dynamic=dynamic, requires_grad=requires_grad)
                if dtype is not torch.float32:  # (of a tensor that requires grad: a non-leaf that does)
                    node = h.node_of(node.meta["example_value"].to(dtype))
                for grad in (True, False):
                    for args, kwargs in [((node, 0.1, False), {}), ((node,), {"p": 0.5, "training": False}),
                                         ((node, 0.0, False, False), {}), ((node, 1), {"training": False})]:
                        answered.append(h.check("call_function", F.dropout, args, kwargs, grad=grad))
        x = h.node_of(h.tensor((2, 9, 32), dynamic=(1,)).meta["example_value"].to(dtype))
        transposed = h.node_of(x.meta["example_value"].transpose(1, 2))
        sliced = h.node_of(x.meta["example_value"][:, 1:])
        for args, kwargs in [((transposed, 0.1, False), {}), ((sliced, 0.1, False), {}),
                             ((x, 0.1, False, True), {}), ((x, 0.1), {}), ((x,), {"p": 0.1, "training": True}),
                             ((x, 1.5, False), {}), ((x, -0.5, False), {}), ((x, 0.1, False), {"bogus": 1})]:
            declined.append(sym_rules.infer("call_function", F.dropout, args, kwargs, True, autocast=False))
            h.check("call_function", F.dropout, args, kwargs)  # (wherever it answers, it is right)
    assert all(answered), [i for i, a in enumerate(answered) if not a]
    assert all(d is None for d in declined), [i for i, d in enumerate(declined) if d is not None]


def test_integer_and_comparison_rules_give_the_real_output():
    """+, -, *, comparisons, where, min/max, abs and dtype conversions over symbolic sizes, on
    tensors of integer, bool and floating dtypes (T5's relative position buckets), broadcast and
    with Python numbers: each answer is FakeTensorMode's, and the ShapeEnv learns nothing."""
    h = Harness()
    base = h.tensor((9, 9), dynamic=(0, 1), name="sq").meta["example_value"]  # (s0, s1)
    x = h.tensor((2, 9, 32), dynamic=(1,), name="x").meta["example_value"]    # (2, s2, 32)
    answered = []
    for dtype in (torch.int64, torch.int32, torch.float32, torch.float16, torch.bool):
        square, col, row = (h.node_of(t.to(dtype)) for t in (base, base[:, :1].contiguous(), base[:1].contiguous()))
        batch = h.node_of(x.to(dtype))
        other = h.node_of(x.to(torch.int64 if dtype is not torch.int64 else torch.float32))
        numeric = dtype is not torch.bool
        calls = [
            (operator.lt, (square, square)), (torch.ge, (col, row)), (operator.eq, (batch, 3)),
            (operator.ne, (square, 2.5)), ("__gt__", (row, 0)), ("le", (col, col)), (operator.gt, (batch, batch)),
            (torch.where, (h.node_of(base.to(torch.bool)), square, square)),
            (torch.where, (h.node_of(base[:1].contiguous().to(torch.bool)), col, row)),
            ("to", (square, torch.float64)), ("to", (batch, torch.int64 if dtype is not torch.int64 else torch.bool)),
        ]
        if dtype is not torch.float32:
            calls.append(("float", (square,)))
        if numeric:
            calls += [(operator.add, (square, square)), (operator.sub, (col, row)), (torch.mul, (batch, 7)),
                      ("__radd__", (square, 1)), (operator.mul, (col, square)), (torch.min, (square, square)),
                      (torch.maximum, (col, row)), (torch.max, (batch, batch)), (torch.abs, (square,)),
                      ("abs", (batch,))]
        for target, args in calls:
            op = "call_method" if type(target) is str else "call_function"
            answered.append(h.check(op, target, args))
        # (what the rules leave to the real propagation: each declines, wherever it answers it is right)
        for target, args in [(operator.add, (square, other)), (operator.lt, (batch, other)),
                             (torch.where, (square, square, square)), (torch.min, (square, 1)),
                             ("to", (square, dtype)), (operator.truediv, (square, 2))]:
            op = "call_method" if type(target) is str else "call_function"
            if dtype in (torch.int64, torch.int32) or target != "to":
                h.check(op, target, args)
        assert sym_rules.infer("call_method", "to", (square, dtype), {}, True, autocast=False) is None
        if dtype in (torch.int64, torch.int32):
            assert sym_rules.infer("call_function", operator.add, (square, 2.5), {}, True, autocast=False) is None
            assert sym_rules.infer("call_function", operator.truediv, (square, 2), {}, True, autocast=False) is None
            assert sym_rules.infer("call_method", "to", (square, dtype), {}, True, autocast=False) is None
    assert all(answered), [i for i, a in enumerate(answered) if not a]
    # a conversion of a tensor that requires grad is left to the real propagation
    grad = h.tensor((2, 9, 32), dynamic=(1,), requires_grad=True, name="g")
    assert sym_rules.infer("call_method", "to", (grad, torch.float64), {}, True, autocast=False) is None


def test_arange_of_a_symbolic_size_is_fake_tensor_modes():
    h = Harness()
    x = h.tensor((2, 9, 32), dynamic=(1,), name="x").meta["example_value"]
    n = h.graph.placeholder("n")
    n.meta["example_value"] = x.shape[1]
    flat = h.graph.placeholder("flat")
    flat.meta["example_value"] = x.shape[1] * 2
    assert h.check("call_function", torch.arange, (n,), {"device": torch.device("cpu")})
    assert h.check("call_function", torch.arange, (n,))
    assert h.check("call_function", torch.arange, (flat,))
    for args, kwargs in [((n,), {"dtype": torch.float32}), ((n,), {"device": "meta"}), ((0, n), {}),
                         ((h.graph.placeholder("k"),), {})]:
        if isinstance(args[0], torch.fx.Node) and "example_value" not in args[0].meta:
            args[0].meta["example_value"] = x.shape[1] - 1  # (not a plain size: may be 1 or less)
        assert sym_rules.infer("call_function", torch.arange, args, kwargs, True, autocast=False) is None


def test_rules_decline_what_would_decide_something_about_a_symbol():
    h = Harness()
    x = h.tensor((2, 9, 32), dynamic=(1,), name="x")
    y = h.tensor((2, 9, 32), dynamic=(1,), name="y")       # another symbol (of the same size now)
    five = h.tensor((2, 5, 32))                              # a static size other than 1
    last = h.tensor((2, 9, 6), dynamic=(1, 2), name="z")    # a symbolic hidden size
    w = h.tensor((64, 32))
    for op, target, args, *kwargs in [
        ("call_function", operator.add, (x, y)),       # Eq(s0, s1)
        ("call_function", operator.mul, (x, five)),    # s0 == 5
        ("call_function", F.linear, (last, w)),        # s2 == 32
        ("call_function", torch.matmul, (x, x)),       # 32 == s0
        ("call_method", "transpose", (x, 1, 2)),       # a view: never rebuilt
        ("call_function", torch.cat, ([x, x], 1)),     # s0 + s0: a symbolic sum
        ("call_function", torch.cat, ([x, y], 2)),     # s0 == s1
        ("call_method", "mean", (x, 1), {"keepdim": True}),  # over a symbolic size
        ("call_function", F.embedding, (x, w)),        # floating indices
    ]:
        assert sym_rules.infer(op, target, args, kwargs[0] if kwargs else {}, True, autocast=False) is None, target
    # ... where the real propagation does decide something (so a rule answering there would be wrong)
    before = _knowledge(h.mode.shape_env)
    with h.mode, enable_python_dispatcher():
        x.meta["example_value"] + y.meta["example_value"]
    assert _knowledge(h.mode.shape_env) != before


def test_a_symbolic_output_is_built_as_empty_strided_builds_it():
    """_Output.fresh over a ShapeEnv makes a contiguous tensor of at most one symbolic size by
    torch.empty (fewer SymInt operations): the same sizes, strides, storage offset and storage size
    as expressions, as torch.empty_strided's, for every dtype; the ShapeEnv learns nothing."""
    h = Harness()
    x = h.tensor((2, 7, 5, 3), dynamic=(1, 2), name="x").meta["example_value"]
    s, t = x.shape[1], x.shape[2]
    shapes = [(2, s, 64), (s,), (s, 1), (1, s), (2, 1, s, 3), (s * t, 4), (2 * s, 32), (3, s, 1, 1), (0, s),
              (s, 0), (2, s, t), (s, 1, t, 3), (s, t), (4, 5), ()]
    built_by_empty = 0
    for shape in shapes:
        strides = contiguous_strides(shape)
        for dtype in (torch.float32, torch.float16, torch.float64, torch.int64, torch.bool):
            out = _Output(shape, strides, dtype, torch.device("cpu"), False, True)
            before = _knowledge(h.mode.shape_env)
            fake = out.fresh(h.mode)
            assert _knowledge(h.mode.shape_env) == before
            with h.mode.shape_env.suppress_guards():
                real = torch.empty_strided(shape, strides, dtype=dtype, device="meta")
            assert _meta(fake) == (*_meta(real)[:4], torch.device("cpu"), False, True), shape
            assert str(fake.untyped_storage().nbytes()) == str(real.untyped_storage().nbytes()), (shape, dtype)
            assert type(fake) is FakeTensor and fake.fake_device == torch.device("cpu")
            built_by_empty += out._by_empty
    assert 0 < built_by_empty < len(shapes) * 5
    assert by_empty((2, s, 64), (64 * s, 64, 1)) and not by_empty((2, s, t), contiguous_strides((2, s, t)))
    assert not by_empty((2, s, 64), (64, 2 * 64, 1))  # (not the contiguous strides)


def test_a_symbolic_memo_keys_sizes_by_expression():
    h = Harness()
    x = h.tensor((2, 9, 32), dynamic=(1,), name="x")
    y = h.tensor((2, 11, 32), dynamic=(1,), name="y")
    memo = PropagationMemo(h.mode)
    state = memo.global_state()
    key_x = memo.key("call_function", torch.sin, (x,), {}, (True,), state, {})
    key_y = memo.key("call_function", torch.sin, (y,), {}, (True,), state, {})
    assert key_x is not None and key_x != key_y
    assert key_x == memo.key("call_function", torch.sin, (h.same_symbols((2, 9, 32), x),), {}, (True,), state, {})
    # a symbolic size is keyed apart from an int of its value
    assert ("sym", x.meta["example_value"].shape[1].node.expr) in key_x[2][0][0]


_LOWER_GUARDS = convert_frame.lower_guards


def _describe(gm: torch.fx.GraphModule) -> list:
    """Each node's op, target, example value's metadata (symbolic sizes as text) and the earlier
    nodes whose values share its storage. (Not whether a value no other graph value aliases is a
    view: F.linear of a batch is a view of its own addmm's output, which a rule builds fresh; see
    tests/test_fake_memo.py.)"""
    described, seen = [], []
    for n in gm.graph.nodes:
        value = n.meta.get("example_value")
        if not isinstance(value, torch.Tensor):
            described.append((n.op, str(n.target), str(value)))
            continue
        aliases = tuple(name for name, earlier in seen if torch._C._is_alias_of(value, earlier))
        described.append((n.op, str(n.target), _meta(value), aliases))
        seen.append((n.name, value))
    return described


def _guards_and_graphs(fn: Any, calls: list[tuple[tuple, dict]], fast: bool, monkeypatch) -> tuple[list, list]:
    """Each compile's ShapeEnv knowledge and lowered guards, and each graph's nodes with their
    example values' metadata (symbolic sizes as text)."""
    monkeypatch.setattr(config, "fast_fake_propagation", fast)
    lowered: list = []
    graphs: list = []
    def recording_lower(shape_env, tensors, ints=()):
        guards = _LOWER_GUARDS(shape_env, list(tensors), list(ints))
        lowered.append((_knowledge(shape_env), [g.text() for g in guards]))
        return guards

    def backend(gm: torch.fx.GraphModule, example_inputs: list) -> Any:
        graphs.append(_describe(gm))
        return gm.forward

    monkeypatch.setattr(convert_frame, "lower_guards", recording_lower)
    pyframe.reset()
    compiled = pyframe.optimize(backend)(fn)
    with torch.no_grad():
        for args, kwargs in calls:
            compiled(*args, **kwargs)
    pyframe.reset()
    return lowered, graphs


def _dynamos_knowledge(fn: Any, calls: list[tuple[tuple, dict]]) -> list:
    """What the ShapeEnv of each of torch._dynamo's symbolic compiles knows, read by its backend."""
    found: list = []

    def backend(gm: torch.fx.GraphModule, example_inputs: list) -> Any:
        if any(isinstance(e, torch.SymInt) for e in example_inputs):
            found.append(_sorted_knowledge(torch._guards.TracingContext.try_get().fake_mode.shape_env))
        return gm.forward

    torch._dynamo.reset()
    compiled = torch.compile(fn, backend=backend)
    with torch.no_grad():
        for args, kwargs in calls:
            compiled(*args, **kwargs)
    torch._dynamo.reset()
    return found


def _pyframes_knowledge(fn: Any, calls: list[tuple[tuple, dict]], monkeypatch) -> list:
    found: list = []

    def recording_lower(shape_env, tensors, ints=()):
        found.append(_sorted_knowledge(shape_env))
        return _LOWER_GUARDS(shape_env, tensors, ints)

    monkeypatch.setattr(convert_frame, "lower_guards", recording_lower)
    pyframe.reset()
    compiled = pyframe.optimize("eager")(fn)
    with torch.no_grad():
        for args, kwargs in calls:
            compiled(*args, **kwargs)
    pyframe.reset()
    return found


def _sorted_knowledge(shape_env) -> tuple:
    """_knowledge in an order of its own (the two engines may record guards in another order)."""
    guards, replacements, ranges = _knowledge(shape_env)
    return (sorted(guards), sorted((str(k), str(v)) for k, v in replacements.items()),
            sorted((str(k), str(v)) for k, v in ranges.items()))


@pytest.mark.parametrize("name", list(SHAPE_CASES))
def test_the_shape_env_knows_what_dynamos_knows_on_the_dynamic_shape_cases(name, monkeypatch):
    make, calls = SHAPE_CASES[name]
    ours = _pyframes_knowledge(make(), [(args, {}) for args in calls], monkeypatch)
    assert ours == _dynamos_knowledge(make(), [(args, {}) for args in calls])


@pytest.mark.parametrize("name", list(SHAPE_CASES))
def test_fast_propagation_on_the_dynamic_shape_cases_is_the_real_one(name, monkeypatch):
    make, calls = SHAPE_CASES[name]
    fast = _guards_and_graphs(make(), [(args, {}) for args in calls], True, monkeypatch)
    real = _guards_and_graphs(make(), [(args, {}) for args in calls], False, monkeypatch)
    assert fast == real


transformers = pytest.importorskip("transformers")
from tests.cases.transformers_models import ARCHITECTURES  # noqa: E402


def _model_and_calls(name):
    """A tiny model of the architecture, and calls at three sequence lengths (the second recompiles
    with symbolic sizes, the third hits)."""
    torch.manual_seed(0)
    model = ARCHITECTURES[name][0]().eval()
    calls = []
    for n in (12, 16, 9):
        kwargs = dict(ARCHITECTURES[name][1]().kwargs)
        kwargs["input_ids"] = torch.randint(0, 256, (2, n))
        calls.append(((), kwargs))
    return model, calls


@pytest.mark.parametrize("name", ["BertModel", "GPT2LMHeadModel", "LlamaForCausalLM", "T5Model"])
def test_fast_propagation_leaves_the_shape_env_and_graphs_as_the_real_one(name, monkeypatch):
    model, calls = _model_and_calls(name)
    fast = _guards_and_graphs(model, calls, True, monkeypatch)
    real = _guards_and_graphs(model, calls, False, monkeypatch)
    assert fast[0], "the recompile traced with symbolic sizes"
    assert fast == real


@pytest.mark.parametrize("name", ["BertModel", "GPT2LMHeadModel", "LlamaForCausalLM", "T5Model"])
def test_the_shape_env_knows_what_dynamos_knows_on_the_transformers_models(name, monkeypatch):
    model, calls = _model_and_calls(name)
    ours = _pyframes_knowledge(model, calls, monkeypatch)
    assert ours and ours == _dynamos_knowledge(model, calls)


def test_a_transformers_second_block_hits_the_first_blocks_memo_entries(monkeypatch):
    memos: list[PropagationMemo] = []

    class Recorded(PropagationMemo):
        def __init__(self, mode):
            super().__init__(mode)
            memos.append(self)

    monkeypatch.setattr(graph, "PropagationMemo", Recorded)
    monkeypatch.setattr(config, "fast_fake_propagation", True)
    torch.manual_seed(0)
    model = ARCHITECTURES["BertModel"][0]().eval()
    compiled = pyframe.optimize("eager")(model)
    pyframe.reset()
    with torch.no_grad():
        for n in (12, 16):
            compiled(input_ids=torch.randint(0, 256, (2, n)))
    pyframe.reset()
    assert len(memos) == 1 and memos[0].symbolic
    # each of the block's linears, layer norms, adds and activations, met again in the second block
    assert memos[0].hits >= 10, (memos[0].hits, memos[0].misses)

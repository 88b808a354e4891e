"""Weak references in traced code (pyframe/translator/variables/weakrefs.py) and their guards.

A weakref read from the frame is guarded by its type, and its call by what the referent is now, on
the source `<weakref>()` (a WeakRefCall node of the C tree: the referent without calling Python,
None once dead). The compiled code must compile again when the referent changes or dies, never run
for a call its guards reject, and give eager's result; weakrefs made in the frame behave as
Python's do. The corpus (tests/cases/weak_references.py) compares the graphs with torch._dynamo's;
the cases here are those torch._dynamo does not trace, and the guards' behaviour.
"""
from __future__ import annotations

import gc
import weakref

import pytest
import torch
import torch.nn as nn

import pyframe
from pyframe import _C
from pyframe.debug.compare import CountingBackend, count_breaks


class Holder:
    def __init__(self, **attrs):
        self.__dict__.update(attrs)


class Scale:
    def __init__(self, factor: float):
        self.factor = factor


def _check(root, f_locals):
    return root.check(f_locals, {}, {}, None)


# ---- the guard tree's WeakRefCall node ----------------------------------------------------------


def test_weakref_call_node_reads_the_referent_and_none_once_dead():
    target = Scale(1.0)
    alive = _C.RootGuardManager()
    alive.local("r", 0).add_type_match(weakref.ref, "type(r) is weakref.ref")
    alive.local("r", 0).weakref_call().add_id_match(target, "r() is target")
    dead = _C.RootGuardManager()
    dead.local("r", 0).weakref_call().add_none_match()
    ref = weakref.ref(target)
    assert _check(alive, {"r": ref}) and not _check(dead, {"r": ref})
    assert alive.texts()[-1] == "r() is target" and dead.texts() == ["L['r']() is None"]
    del target
    gc.collect()
    assert ref() is None
    assert not _check(alive, {"r": ref}) and _check(dead, {"r": ref})
    assert alive.first_failure({"r": ref}, {}, {}) == "r() is target"


def test_weakref_call_of_what_is_no_weakref_fails_the_check_and_raises_nothing():
    target = Scale(1.0)
    root = _C.RootGuardManager()
    root.local("r", 0).weakref_call().add_none_match()
    for value in (None, 3, lambda: None, weakref.proxy(target), [weakref.ref(target)]):
        assert not _check(root, {"r": value})
    assert _check(root, {"r": weakref.ref(Scale(2.0))})  # (dead as soon as made)
    assert _C.weakref_referent(weakref.ref(target)) is target
    with pytest.raises(TypeError):
        _C.weakref_referent(weakref.proxy(target))


def test_a_pinned_node_holding_a_weakref_is_checked_again_when_the_referent_dies():
    """A referent dies without any dict changing: a snapshot of the pinned object never skips the
    weakref's subtree."""
    target = Scale(1.0)
    obj = Holder(ref=weakref.ref(target))
    root = _C.RootGuardManager(True)
    node = root.local("o", 0)
    node.add_id_match(obj, "o is obj")
    node.attr("ref").weakref_call().add_id_match(target, "o.ref() is target")
    assert _check(root, {"o": obj}) and _check(root, {"o": obj}) and _check(root, {"o": obj})
    del target
    gc.collect()
    assert not _check(root, {"o": obj})
    assert [s[:2] for s in root.snapshots()] == [("L['o']", "never safe")]


# ---- traced: guards on a referent read from the frame ---------------------------------------------


class WeakParams(nn.Module):
    """Weak references to its own parameters, called in forward (nn.LSTM's _flat_weight_refs)."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(4, 3))
        self._refs = [weakref.ref(self.weight)]

    def forward(self, x):
        return x @ self._refs[0]()


def _recording_backend(runs: list[int]):
    """A backend whose n-th graph appends n to `runs` each time it runs."""
    counting = CountingBackend()

    def backend(gm, example_inputs):
        index = len(counting.graphs)
        compiled = counting(gm, example_inputs)

        def run(*args):
            runs.append(index)
            return compiled(*args)
        return run
    backend.graphs = counting.graphs
    return backend


def test_module_weakrefs_are_guarded_on_their_referents_and_recompile_when_one_changes():
    m = WeakParams()
    reasons, runs = [], []
    backend = _recording_backend(runs)
    compiled = pyframe.optimize(backend, guard_fail_fn=lambda fail: reasons.append(fail.reason))(m)
    x = torch.randn(2, 4)
    torch.testing.assert_close(compiled(x), m(x))
    torch.testing.assert_close(compiled(x), m(x))
    assert len(backend.graphs) == 1 and runs == [0, 0] and count_breaks("pyframe") == 0

    same_shape = nn.Parameter(torch.randn(4, 3))
    m._refs[0] = weakref.ref(same_shape)  # the same metadata: the graph reads the new referent
    torch.testing.assert_close(compiled(x), x @ same_shape)
    assert len(backend.graphs) == 1 and runs == [0, 0, 0]

    wider = nn.Parameter(torch.randn(4, 5))
    m._refs[0] = weakref.ref(wider)
    torch.testing.assert_close(compiled(x), m(x))
    assert len(backend.graphs) == 2 and runs == [0, 0, 0, 1]
    assert any("L['self']._refs[0]()" in r for r in reasons), reasons


def _scaled(x, holder):
    scale = holder.ref()
    if scale is None:
        return x + 1
    return x * scale


def test_a_dead_referent_recompiles_and_the_code_for_a_live_one_never_runs():
    reasons, runs = [], []
    backend = _recording_backend(runs)
    compiled = pyframe.optimize(backend, guard_fail_fn=lambda fail: reasons.append(fail.reason))(_scaled)
    x, scale = torch.randn(3), torch.randn(3)
    holder = Holder(ref=weakref.ref(scale))
    torch.testing.assert_close(compiled(x, holder), _scaled(x, holder))
    assert runs == [0]
    del scale
    gc.collect()
    assert holder.ref() is None
    torch.testing.assert_close(compiled(x, holder), x + 1)
    assert runs == [0, 1] and len(backend.graphs) == 2
    assert reasons == ["check_tensor(L['holder'].ref(), torch.Tensor, torch.float32, device='cpu', size=[3], "
                       "stride=[1], requires_grad=False) (L['holder'].ref() is now a NoneType)"]
    live = torch.randn(3)
    alive_holder = Holder(ref=weakref.ref(live))
    torch.testing.assert_close(compiled(x, alive_holder), x * live)  # the first entry again
    torch.testing.assert_close(compiled(x, holder), x + 1)
    assert runs == [0, 1, 0, 1] and len(backend.graphs) == 2


def test_a_dead_referent_first_is_guarded_to_stay_none():
    runs = []
    backend = _recording_backend(runs)
    compiled = pyframe.optimize(backend)(_scaled)
    x = torch.randn(3)
    dead = Holder(ref=weakref.ref(Scale(2.0)))
    torch.testing.assert_close(compiled(x, dead), x + 1)
    live = torch.randn(3)
    torch.testing.assert_close(compiled(x, Holder(ref=weakref.ref(live))), x * live)
    torch.testing.assert_close(compiled(x, dead), x + 1)
    assert runs == [0, 1, 0]


def test_something_else_than_a_weakref_at_the_source_fails_the_type_guard():
    runs = []
    backend = _recording_backend(runs)
    compiled = pyframe.optimize(backend)(_scaled)
    x, scale = torch.randn(3), torch.randn(3)
    torch.testing.assert_close(compiled(x, Holder(ref=weakref.ref(scale))), x * scale)
    impostor = Holder(ref=lambda: scale * 2)  # called like a weakref: a function, inlined
    torch.testing.assert_close(compiled(x, impostor), _scaled(x, impostor))
    assert runs == [0, 1]


# ---- traced: weakrefs made in the frame ---------------------------------------------------------


def _compile_and_compare(fn, *args, graphs=1, breaks=0):
    backend = CountingBackend()
    result = pyframe.optimize(backend)(fn)(*args)
    expected = fn(*args)
    assert len(backend.graphs) == graphs and count_breaks("pyframe") == breaks
    return result, expected


def test_a_weakref_made_here_is_the_one_without_callback_the_frame_holds():
    """CPython keeps one weakref without a callback per object: `weakref.ref(obj)` is it, and no
    weakref with a callback. (torch._dynamo gives up on this frame.)"""
    target = Scale(3.0)
    holder = Holder(ref=weakref.ref(target), with_callback=weakref.ref(target, lambda r: None),
                    other=weakref.ref(Scale(1.0)), target=target)

    def f(x, h):
        mine = weakref.ref(h.target)
        return x * ((mine is h.ref) + 2 * (mine is not h.with_callback) + 4 * (mine is h.other)
                    + 8 * (mine is weakref.ref(h.target)) + 16 * (mine() is h.target))

    x = torch.randn(3)
    result, expected = _compile_and_compare(f, x, holder)
    torch.testing.assert_close(result, expected)
    torch.testing.assert_close(result, x * 27)


def test_weakref_of_an_object_without_weak_references_raises_type_error_as_python():
    def f(x, n):
        try:
            weakref.ref(n)
        except TypeError as e:
            return x + 2, str(e)
        return x, ""

    x = torch.randn(3)
    for n in (3, (1, 2)):
        result, expected = _compile_and_compare(f, x, n)
        torch.testing.assert_close(result[0], expected[0])
        assert result[1] == expected[1]
        pyframe.reset()


def test_weakref_with_a_callback_breaks_cleanly_and_its_callback_still_runs():
    called = []

    def f(x, obj):
        r = weakref.ref(obj, lambda ref: called.append(ref))
        return x.sin() + 1, r

    x, obj = torch.randn(3), Scale(1.0)
    compiled = pyframe.optimize(CountingBackend())(f)
    result, r = compiled(x, obj)
    torch.testing.assert_close(result, x.sin() + 1)
    assert r() is obj and count_breaks("pyframe") == 1
    del obj
    gc.collect()
    assert called == [r]


def test_weakref_of_a_tensor_the_graph_makes_breaks_cleanly():
    def f(x):
        y = x * 2
        r = weakref.ref(y)
        return r() is y, y + 1

    x = torch.randn(3)
    result = pyframe.optimize(CountingBackend())(f)(x)
    assert result[0] is True and count_breaks("pyframe") == 1
    torch.testing.assert_close(result[1], f(x)[1])


def test_returned_weakrefs_refer_to_what_eager_s_do():
    """A weakref to an object of the frame is alive after the call; one to an object made in the
    frame is dead once the frame is done, in pyframe as in eager."""
    keep = Scale(2.0)

    def f(x, obj):
        made = Scale(3.0)
        return x * made.factor, weakref.ref(obj), weakref.ref(made), weakref.ref(x)

    x = torch.randn(3)
    result, expected = _compile_and_compare(f, x, keep)
    torch.testing.assert_close(result[0], expected[0])
    assert result[1]() is keep and result[3]() is x
    assert type(result[2]) is weakref.ref and result[2]() is None and expected[2]() is None


def test_weakrefs_stored_on_objects_of_the_frame_are_made_again_after_the_graph():
    holder = Holder(obj=Scale(1.0), items=[])

    def f(x, h):
        h.ref = weakref.ref(h.obj)
        h.items.append(weakref.ref(x))
        return x + 1

    x = torch.randn(3)
    backend = CountingBackend()
    torch.testing.assert_close(pyframe.optimize(backend)(f)(x, holder), x + 1)
    assert holder.ref() is holder.obj and holder.items[0]() is x
    assert len(backend.graphs) == 1 and count_breaks("pyframe") == 0


def test_a_weakref_read_from_the_frame_and_passed_on():
    """A weakref of the frame returned, its callback read, isinstance: the same object back."""
    target = Scale(1.5)
    callback = print  # (a builtin: never called here, the referent outlives the test)
    ref = weakref.ref(target, callback)

    def f(x, r):
        assert isinstance(r, weakref.ref) and callable(r) and r.__callback__ is callback
        return x * r().factor, r

    x = torch.randn(3)
    result, expected = _compile_and_compare(f, x, ref)
    torch.testing.assert_close(result[0], expected[0])
    assert result[1] is ref


def test_weakrefs_compare_by_their_referents_while_both_live_else_by_identity():
    a, b = Scale(1.0), Scale(1.0)
    dead = weakref.ref(Scale(2.0))
    holder = Holder(a=weakref.ref(a), a_again=weakref.ref(a, lambda r: None), b=weakref.ref(b), dead=dead,
                    dead_too=weakref.ref(Scale(3.0)))

    def f(x, y, h):
        flags = [h.a == h.a_again, h.a != h.b, h.dead == h.dead, h.dead != h.dead_too, h.a == h.dead,
                 weakref.ref(x) == weakref.ref(x)]
        return x + sum(flags), weakref.ref(x) == weakref.ref(y)  # (tensors: an elementwise ==)

    x, y = torch.randn(3), torch.randn(3)
    result, expected = _compile_and_compare(f, x, y, holder)
    torch.testing.assert_close(result, expected)
    torch.testing.assert_close(result[0], x + 5)


# ---- nn.LSTM --------------------------------------------------------------------------------------


def test_lstm_in_a_compiled_function_is_one_graph_as_torch_dynamo_makes_it():
    """nn.LSTM's forward calls its `_flat_weight_refs` (`_weights_have_changed`): one graph, the
    same as torch._dynamo's with its RNN support on (by default torch._dynamo purposely breaks at
    an RNN, GRU or LSTM module: allow_rnn=False)."""
    torch.manual_seed(0)
    lstm = nn.LSTM(4, 8, num_layers=2, batch_first=True)

    def f(x):
        out, (h, c) = lstm(x)
        return out.sum(1) + h[-1]

    x = torch.randn(2, 5, 4)
    ours = CountingBackend()
    torch.testing.assert_close(pyframe.optimize(ours)(f)(x), f(x))
    assert count_breaks("pyframe") == 0
    theirs = CountingBackend()
    with torch._dynamo.config.patch(allow_rnn=True):
        torch.testing.assert_close(torch.compile(f, backend=theirs)(x), f(x))
    assert len(ours.graphs) == len(theirs.graphs) == 1
    assert ours.graphs[0].ops == theirs.graphs[0].ops
    assert ours.graphs[0].code == theirs.graphs[0].code

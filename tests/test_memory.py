"""What compiling keeps alive, and what dropping a function and `pyframe.reset()` give back."""
from __future__ import annotations

import gc
import os
import weakref

import pytest
import torch

import pyframe
from pyframe import resume


def _compile_a_new_function_with_a_break(i: int) -> "weakref.ref":
    namespace = {"torch": torch}
    source = f"def f(x):\n    y = x + {i}\n    torch._dynamo.graph_break()\n    return y * 2\n"
    exec(compile(source, f"dropped_{i}.py", "exec"), namespace)
    f = namespace.pop("f")
    torch.testing.assert_close(pyframe.optimize("eager")(f)(torch.ones(2)), (torch.ones(2) + i) * 2)
    return weakref.ref(f.__code__)


def test_code_with_a_graph_break_dies_with_its_function():
    """resume.py remembered each resume code under its original (weak key) and each original in the
    resume code's info (weak key, strong value): the two kept each other alive for good."""
    pyframe.reset()
    gc.collect()  # resume codes of earlier tests' dead functions go now, not in the count below
    before = len(resume.origins)
    codes = [_compile_a_new_function_with_a_break(i) for i in range(10)]
    pyframe.reset()
    gc.collect()
    assert [c for c in codes if c() is not None] == []
    assert len(resume.origins) == before


def _compile_and_drop(i: int, source: str) -> "weakref.ref":
    namespace = {"torch": torch}
    exec(compile(source, f"dropped_plain_{i}.py", "exec"), namespace)
    f = namespace.pop("f")
    pyframe.optimize("eager")(f)(torch.ones(2))
    pyframe.optimize("eager")(f)(torch.ones(2))  # a cache hit too
    return weakref.ref(f.__code__)


def test_a_dropped_compiled_function_dies_without_reset():
    """Nothing the transformed code or the code's record holds refers back to the code it was made
    for: the code's cache entry lives in its co_extra slot, which the garbage collector cannot see
    through, so such a reference (the handler that reruns a frame whose graph raised, rerun.Rerun;
    the traceback of a recorded graph break) keeps the function's code, its entries and graphs alive
    for good."""
    sources = ["def f(x):\n    return x.sin() + 1\n",
               "def f(x):\n    return x.cos().index_select(0, torch.tensor([0]))\n",
               "def f(x):\n    x.add_(1)\n    return x * 2\n",  # (no rerun handler: mutates its input)
               # a graph break: the break's reason, kept in the code's record (a weak-key dict whose
               # value must not refer to its key), held the translator's frames, and the code, in
               # its traceback
               "def f(x):\n    y = x.cos()\n    torch._dynamo.graph_break()\n    return y + 1\n"]
    codes = [_compile_and_drop(i, source) for i, source in enumerate(sources)]
    gc.collect()
    gc.collect()
    assert [c for c in codes if c() is not None] == []


def test_graph_modules_of_dropped_functions_go_with_one_gc_after_reset():
    """An Unsupported kept in a record (the graph break's reason, a frame's reason to run as Python)
    held its traceback, whose frames held the trace (OutputGraph, FakeTensors, the graph and its
    GraphModule) in a cycle with the exception: after reset() they took a second gc.collect() to go.
    reset() itself does not collect (0.17 s a call)."""
    graphs: list[weakref.ref] = []

    def backend(gm, example_inputs):
        graphs.append(weakref.ref(gm))
        return gm.forward

    sources = [
        "def f(x):\n    y = x.sin() + 1\n    torch._dynamo.graph_break()\n    return y * 2\n",
        "def f(x):\n    y = x.cos()\n    if y.sum() > 0:\n        return y + 1\n    return y - 1\n",
        "def f(x):\n    return x.tanh() * 3\n",
    ]
    for i, source in enumerate(sources * 2):
        namespace = {"torch": torch}
        exec(compile(source, f"one_gc_{i}.py", "exec"), namespace)
        f = namespace.pop("f")
        pyframe.optimize(backend)(f)(torch.ones(2))
        del f, namespace
    assert len(graphs) >= 8
    pyframe.reset()
    gc.collect()
    assert [g for g in graphs if g() is not None] == []


class _UserOptimizer:
    def __init__(self, params):
        self.params, self.state = list(params), {}

    def step(self):
        for p in self.params:
            state = self.state.setdefault(p, {})
            if "buf" not in state:
                state["buf"] = torch.zeros_like(p)
            state["buf"].mul_(0.9).add_(p.grad)
            p.data.add_(state["buf"], alpha=-0.1)


def _step(opt):
    opt.step()


def test_an_optimizers_state_dies_with_the_optimizer(monkeypatch):
    """The cache entries of a traced step() stay with its code; what they hold of the optimizer (ids,
    snapshots, graph inputs) must not keep the optimizer or its state tensors alive."""
    model = torch.nn.Linear(4, 4)
    model(torch.ones(4)).sum().backward()
    monkeypatch.setattr(pyframe.config, "trace_modules", ["torch.optim"])
    for make in (_UserOptimizer, lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9)):
        opt = make(model.parameters())
        step = pyframe.optimize("eager")(_step)
        for _ in range(3):
            step(opt)
        assert pyframe.debug.cache_entries(_step)
        state = [weakref.ref(v) for s in opt.state.values() for v in s.values() if isinstance(v, torch.Tensor)]
        dropped = weakref.ref(opt)
        assert state
        del opt
        gc.collect()
        assert dropped() is None and [s for s in state if s() is not None] == []
    pyframe.reset()


class _Target:
    pass


def test_the_target_of_a_weakref_the_compiled_code_read_dies_and_its_callback_fires():
    fired = []

    def through_argument(ref, x):
        obj = ref()
        return x + obj.t if obj is not None else x

    def through_attribute(holder, x):
        return x - holder.ref().t

    for fn in (through_argument, through_attribute):
        target = _Target()
        target.t = torch.ones(3)
        ref = weakref.ref(target, lambda _, name=fn.__name__: fired.append(name))
        holder = _Target()
        holder.ref = ref
        arg = ref if fn is through_argument else holder
        compiled = pyframe.optimize("eager")(fn)
        compiled(arg, torch.ones(3))
        compiled(arg, torch.ones(3))
        del target
        gc.collect()
        assert fired[-1:] == [fn.__name__]
    pyframe.reset()


class _SubclassParameter(torch.nn.Parameter):
    pass


def test_a_parameter_replaced_by_a_dtype_change_dies(monkeypatch):
    """`module.to(dtype)` that makes new parameters (here a Parameter subclass, with
    overwrite_module_params_on_conversion): the entry compiled for the old ones must not keep them."""
    monkeypatch.setattr(torch.__future__, "_overwrite_module_params_on_conversion", True)
    model = torch.nn.Linear(3, 3)
    model.weight = _SubclassParameter(torch.randn(3, 3))
    old = weakref.ref(model.weight)

    def forward(x):
        return model(x) * 2

    compiled = pyframe.optimize("eager")(forward)
    compiled(torch.ones(3))
    compiled(torch.ones(3))
    model.to(torch.float64)
    torch.testing.assert_close(compiled(torch.ones(3, dtype=torch.float64)), forward(torch.ones(3, dtype=torch.float64)))
    gc.collect()
    assert old() is None
    pyframe.reset()


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.slow
def test_compiling_new_functions_with_breaks_does_not_grow_without_bound():
    """200 functions with a graph break, each compiled once and dropped (no reset): measured ~18 MB
    of growth when each code's recorded break kept its translator frames (and the code) alive,
    ~5 MB since (allocator and interning noise)."""
    def compile_one(i: int) -> None:
        namespace = {"torch": torch}
        source = f"def f(x):\n    y = x.cos() + {i}\n    torch._dynamo.graph_break()\n    return y * 2\n"
        exec(compile(source, f"rss_{i}.py", "exec"), namespace)
        pyframe.optimize("eager")(namespace.pop("f"))(torch.ones(2))

    for i in range(50):  # the allocator and torch's caches warm up
        compile_one(i)
    gc.collect()
    before = _rss_bytes()
    for i in range(50, 250):
        compile_one(i)
    gc.collect()
    assert _rss_bytes() - before < 10e6
    pyframe.reset()


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        y = self.lin(x).relu()
        if y.sum() > 1e9:  # data dependent: a graph break and a resume function
            return y * 2
        return _helper(y)


def _helper(y):
    return y + 1


@pytest.mark.parametrize("make", [lambda: (lambda x, y: x * 2 + y), lambda: _Net()])
def test_arguments_die_with_the_callers_last_reference_as_in_eager(make):
    """With the garbage collector off, the arguments of a call that compiled (a frame, its inlined
    calls, a graph break and its resume function) die when the caller drops them, their weakref
    callbacks run then, as in eager; the module compiled dies with its last reference. Until the
    trace released its root translator (which referred to itself), the trace kept them until the
    next collection."""
    fn = make()
    compiled = pyframe.optimize("eager")(fn)
    enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(2):  # the compiling call, then a cache hit
            args = [torch.randn(2, 3), torch.randn(2, 3)][: 2 if not isinstance(fn, torch.nn.Module) else 1]
            fired = []
            refs = [weakref.ref(a, lambda _: fired.append(1)) for a in args]
            torch.testing.assert_close(compiled(*args), fn(*args))
            del args
            assert [r() for r in refs] == [None] * len(refs) and len(fired) == len(refs)
        if isinstance(fn, torch.nn.Module):
            module = weakref.ref(fn)
            del fn, compiled
            assert module() is None
    finally:
        if enabled:
            gc.enable()

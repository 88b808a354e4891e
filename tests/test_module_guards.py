"""Modules guarded by their type, as torch._dynamo 2.13 guards its unspecialized modules: another
instance of the same structure runs the same entry (its parameters are graph inputs), and every
fact the trace took from one instance is guarded, so an instance that differs recompiles. What
the trace decides from a module's identity (`id(m)`, `m is other`, a dict keyed by modules, the
walk of a tree with shared submodules) pins or compares identities."""
from __future__ import annotations

import pytest
import torch

import pyframe
from pyframe.debug.compare import CountingBackend, engine_unavailable_reason, optimize_with, reset_engines


class Block(torch.nn.Module):
    def __init__(self, width: int = 8) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(width, width)
        self.scale = 2.0

    def forward(self, x):
        return torch.relu(self.lin(x)) * self.scale


def _graphs(engine, fn, *calls):
    backend = CountingBackend()
    compiled = optimize_with(engine, fn, backend)
    outputs = [compiled(*args) for args in calls]
    reset_engines()
    return outputs, backend.graphs


def test_regional_compilation_compiles_each_kind_of_block_once_as_torch_dynamo():
    """`block.compile()` for each block of a stack (regional compilation): ten blocks, two graphs."""
    torch.manual_seed(0)
    blocks = [Block() for _ in range(10)]
    x = torch.randn(4, 8)
    counts = {}
    for engine in ("pyframe", "dynamo"):
        if engine == "dynamo" and engine_unavailable_reason("dynamo") is not None:
            continue
        backend = CountingBackend()
        compiled = [optimize_with(engine, b, backend) for b in blocks]
        y, expected = x, x
        for c, b in zip(compiled, blocks):
            y, expected = c(y), b(expected)
        torch.testing.assert_close(y, expected)
        counts[engine] = len(backend.graphs)
        reset_engines()
    assert counts["pyframe"] == 2  # the first block's input has no grad, the others' have
    assert counts.get("dynamo", 2) == counts["pyframe"]


def test_an_instance_that_differs_recompiles():
    """Each fact read from the first instance is guarded: another scale, a submodule of another
    type, a hook on one instance only, a parameter that is None."""
    torch.manual_seed(0)
    x = torch.randn(4, 8)
    variants = [Block(), Block(), Block(), Block(), Block()]
    variants[1].scale = 3.0
    variants[2].lin = torch.nn.Sequential(torch.nn.Linear(8, 8))
    variants[3].lin.register_forward_hook(lambda mod, args, out: out + 1)
    variants[4].lin.bias = None
    backend = CountingBackend()
    apply = pyframe.optimize(backend)(lambda m, x: m(x) - 1)
    for _ in range(2):
        for m in variants:
            torch.testing.assert_close(apply(m, x), m(x) - 1)
    assert len(backend.graphs) == 5
    pyframe.reset()


def _block_applied_once():
    """A Block called once through a compiled lambda: (block, x, backend, the compiled lambda, its entry)."""
    torch.manual_seed(0)
    block, x = Block(), torch.randn(4, 8)
    backend = CountingBackend()
    apply = pyframe.optimize(backend)(lambda m, x: m(x) - 1)
    apply(block, x)
    (entry,) = pyframe.debug.cache_entries(apply)
    return block, x, backend, apply, entry


def test_a_modules_four_hook_tables_are_one_guard():
    """Each module called has one ATTRS_LEN_MATCH on its hook tables (not four LEN_MATCHes), and a
    hook registered later fails it."""
    block, x, backend, apply, entry = _block_applied_once()
    hooks = [g for g in entry.guards if "hooks" in g and "_global_" not in g]
    assert hooks == [f"[len(getattr({m}, a)) for a in ('_forward_pre_hooks', '_forward_hooks', '_backward_hooks', "
                     f"'_backward_pre_hooks')] == [0, 0, 0, 0]" for m in ("L['m']", "L['m']._modules['lin']")]
    block.lin.register_forward_hook(lambda mod, args, out: out + 1)
    torch.testing.assert_close(apply(block, x), block(x) - 1)
    assert len(backend.graphs) == 2
    pyframe.reset()


def test_a_global_module_hook_registered_later_recompiles_and_runs():
    """nn.Module's global hook tables are guarded empty (global state, one check however many
    modules the trace calls): a hook registered with register_module_forward_hook after the
    compile fails it, and the recompile runs the hook for every module call, as eager does.
    (torch.compile runs it for the outer module only.)"""
    block, x, backend, apply, entry = _block_applied_once()
    assert sum("torch.nn.modules.module._global_" in g for g in entry.guards) == 1
    for engine in ("pyframe", "eager"):
        seen = []
        handle = torch.nn.modules.module.register_module_forward_hook(
            lambda mod, args, out: seen.append(type(mod).__name__))
        try:
            out = apply(block, x) if engine == "pyframe" else block(x) - 1
        finally:
            handle.remove()
        if engine == "pyframe":
            ours = (seen, out)
    assert ours[0] == seen == ["Linear", "Block"]
    torch.testing.assert_close(ours[1], out)
    compiled = len(backend.graphs)
    assert compiled > 1  # (the module call breaks the graph: a global hook is not traced)
    torch.testing.assert_close(apply(block, x), block(x) - 1)  # the hook gone: the first entry again
    assert len(backend.graphs) == compiled
    pyframe.reset()


class Pair(torch.nn.Module):
    def __init__(self, share: bool) -> None:
        super().__init__()
        self.a = torch.nn.Linear(2, 2)
        self.b = self.a if share else torch.nn.Linear(2, 2)

    def forward(self, x):
        return x * len(list(self.modules())) + sum(p.sum() for p in self.parameters())


@pytest.mark.parametrize("order", [(True, False, True), (False, True, False)])
def test_a_walk_of_a_tree_with_shared_submodules_is_guarded_on_their_aliasing(order):
    """modules() and parameters() give a shared submodule once: which paths lead to one module is
    what the walk decided, guarded as such (a fresh instance that shares differently recompiles)."""
    apply = pyframe.optimize(CountingBackend())(lambda m, x: m(x))
    for share in order:
        torch.manual_seed(0)
        m, x = Pair(share), torch.randn(2)
        torch.testing.assert_close(apply(m, x), m(x))
    pyframe.reset()


REGISTRY: dict = {}


class Keyed(torch.nn.Module):
    def __init__(self, k: float) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(2, 2)
        REGISTRY[self] = k

    def forward(self, x):
        return self.lin(x) * REGISTRY[self]


def test_what_the_trace_takes_from_a_modules_identity_is_pinned():
    """A module as a dict key, `m is other`, id(m): answers that hold for that object only."""
    torch.manual_seed(0)
    first, second = Keyed(2.0), Keyed(5.0)
    x = torch.randn(2)
    apply = pyframe.optimize(CountingBackend())(lambda m, x: m(x))
    for m in (first, second, first, second):
        torch.testing.assert_close(apply(m, x), m(x))

    def same(m, other, x):
        return x + 1 if m is other else x - 1

    compare = pyframe.optimize(CountingBackend())(same)
    for m, other in ((first, first), (second, first), (first, second), (second, second)):
        torch.testing.assert_close(compare(m, other, x), same(m, other, x))

    def by_id(m, x):
        return x + id(m) % 1000

    ids = pyframe.optimize(CountingBackend())(by_id)
    for m in (first, second):
        torch.testing.assert_close(ids(m, x), by_id(m, x))
    pyframe.reset()


def test_a_fresh_model_of_the_same_structure_runs_the_same_entry_as_under_torch_dynamo():
    torch.manual_seed(0)
    x = torch.randn(4, 8)
    models = [torch.nn.Sequential(Block(), torch.nn.GELU(), Block()) for _ in range(3)]

    def apply(m, x):
        return m(x).sum(-1)

    outputs, graphs = _graphs("pyframe", apply, *[(m, x) for m in models])
    for out, m in zip(outputs, models):
        torch.testing.assert_close(out, m(x).sum(-1))
    assert len(graphs) == 1
    if engine_unavailable_reason("dynamo") is None:
        _, dynamo_graphs = _graphs("dynamo", apply, *[(m, x) for m in models])
        assert [g.ops for g in graphs] == [g.ops for g in dynamo_graphs]

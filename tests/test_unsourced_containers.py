"""A list or dict the trace reads where no source reaches it (a global of torch's own code, read
unguarded) has one tracker per object, as a sourced one has: its items are wrapped once however
often it is read (variables/builder.py's wrap, SideEffects.track_unsourced)."""
from __future__ import annotations

import torch
import torch._dynamo
import torch.utils._pytree as pytree

import pyframe
from pyframe.debug.compare import CountingBackend, reset_engines
from pyframe.translator.variables import wrap_containers


def many_flattens(x, y):
    # each flatten looks up every node's type in pytree's table of node types (SUPPORTED_NODES)
    pair = (x, [y, {"k": x}])
    for _ in range(20):
        leaves, spec = pytree.tree_flatten(pair)
        pair = pytree.tree_unflatten([t * 1.01 for t in leaves], spec)
    return pair[0] + pair[1][0] + pair[1][1]["k"]


def test_a_table_torchs_code_reads_on_every_call_is_wrapped_once(monkeypatch):
    calls = []
    original = wrap_containers._wrap_dict

    def counting(tx, value, source, guard, guards):
        if value is pytree.SUPPORTED_NODES:
            calls.append(source)
        return original(tx, value, source, guard, guards)

    monkeypatch.setattr(wrap_containers, "_wrap_dict", counting)
    x, y = torch.randn(3), torch.randn(3)
    reset_engines()
    mine, theirs = CountingBackend(), CountingBackend()
    torch.testing.assert_close(pyframe.optimize(mine)(many_flattens)(x, y), many_flattens(x, y))
    assert calls == [None]  # read unguarded, wrapped once (it was once per node flattened)
    torch.testing.assert_close(torch._dynamo.optimize(theirs)(many_flattens)(x, y), many_flattens(x, y))
    assert [g.ops for g in mine.graphs] == [g.ops for g in theirs.graphs]
    reset_engines()

"""A graph's inputs, ordered and merged as torch._dynamo 2.13 makes its placeholders.

torch._dynamo makes a placeholder when it realizes a value (a module's parameter where the trace
reads it, anything else where it is first used), binds each symbol of the inputs' sizes just
before the first tensor whose sizes hold it, and gives one tensor read under two sources one
placeholder. OutputGraph records when each input was read and first looked at (`_made_after`,
`_realized`); once the graph is finished, `order_inputs_as_dynamo` and `merge_twin_inputs` put
its placeholders, and `OutputGraph.inputs` (the order the compiled graph takes them), in that order.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.fx

from .source import Source, TensorPropertySource


@dataclass
class GraphInput:
    source: Source
    node: torch.fx.Node
    example: torch.Tensor



def _symbols_of(output: Any, value: Any) -> list:
    """The symbols of a FakeTensor's sizes, in order (none for a static one)."""
    if not isinstance(value, torch.Tensor):
        return []
    found = [output.canonical_symbol(n) for n in value.shape if type(n) is not int]
    return [e for e in found if e.is_Symbol]

def _with_symbols_bound(output: Any, tensors: list[GraphInput], symbols: list[GraphInput]) -> list[GraphInput]:
    """The inputs in order, with each symbol of the tensors' sizes bound by one placeholder
    just before the first tensor whose sizes hold it, as torch._dynamo creates it: that tensor's
    own (symbols the trace found equal, `s77 == s17` for `x + y`, are one, named after the first
    tensor's). A symbol's other placeholders are dropped, their uses given to the one kept; one
    the graph uses whose tensors were all dropped stays, first. (As torch._dynamo keeps them: a
    backend binds the symbols of its inputs' sizes.)"""
    by_symbol: dict[Any, list[GraphInput]] = {}
    for inp in symbols:
        by_symbol.setdefault(output.canonical_symbol(inp.node.meta["example_value"]), []).append(inp)
    out: list[GraphInput] = []
    bound: dict[Any, GraphInput] = {}
    for tensor in tensors:
        for symbol in _symbols_of(output, tensor.node.meta["example_value"]):
            if symbol in bound or symbol not in by_symbol:
                continue
            candidates = by_symbol[symbol]
            own = [c for c in candidates if c.source.base == tensor.source]
            bound[symbol] = (own or candidates)[0]
            out.append(bound[symbol])
        out.append(tensor)
    for symbol, candidates in by_symbol.items():
        for inp in candidates:
            keep = bound.get(symbol)
            if keep is inp:
                continue
            if keep is None and inp.node.users:
                keep = bound[symbol] = inp
                out.insert(0, inp)
                continue
            if keep is not None:
                inp.node.replace_all_uses_with(keep.node)
            output.graph.erase_node(inp.node)
            del output.inputs[inp.source]
    return out

def merge_twin_inputs(output: Any) -> None:
    """One placeholder per tensor, as torch._dynamo makes them: the same tensor read under two
    sources (tied weights, a tensor passed twice) is the first one's placeholder (in the final
    order), and the sources are guarded to stay one object (the aliasing guard: equal numbers).
    Done once the graph is finished, so a source read only for its metadata (whose placeholder
    was dropped unused) does not lend its name; one compared by identity with its twin (`x is y`,
    `ref() is weight`: compared_twins) does, as torch._dynamo made the second one the first's
    placeholder when the comparison realized it, used or not."""
    first: dict[int, GraphInput] = {}
    for source, inp in list(output.inputs.items()):
        if not isinstance(inp.example, torch.Tensor):  # (symbols and int inputs: by value, not identity)
            continue
        twin = first.setdefault(id(inp.example), inp)
        if twin is inp:
            continue
        inp.node.replace_all_uses_with(twin.node)
        output.graph.erase_node(inp.node)
        del output.inputs[source]
        output.guards.add_aliasing(twin.source, twin.example)
        output.guards.add_aliasing(source, inp.example)

def order_inputs_as_dynamo(output: Any, recorded_at: dict[torch.fx.Node, int]) -> None:
    """Order the placeholders (and `output.inputs`, the order the compiled graph takes them) as
    torch._dynamo 2.13 creates them.

    torch._dynamo makes a placeholder when it *realizes* a value. A module's parameter or buffer
    is realized where the trace reads it (`output.weight`); anything else read from the frame (an
    argument, an item of one, a global) is a LazyVariableTracker, realized only when first used
    (the op or call that takes it). So `F.linear(x, output.weight, output.bias)` gives `weight, bias,
    x`. Here: a module's tensor stands where it was read (after the call recorded before it),
    another where the trace first looks at it (`x.shape`, `x.size()`, its type, a step of
    torch._dynamo's that tests whether a container holding it is a constant) or else just
    before its first user, after the module tensors read before that user; inputs first used
    by one call are realized in the order of its arguments (`x * p`: x, then p), whichever was
    read first."""
    def at(moment: tuple[torch.fx.Node | None, int]) -> tuple[int, float]:
        after, event = moment
        return (recorded_at[after] if after is not None else -1, event)

    def realized(item: tuple[int, GraphInput]) -> tuple[int, float, int, int]:
        read_order, inp = item
        read = at(output._made_after[inp.node])
        if is_module_state(inp.source):
            return (*read, 0, read_order)
        users = sorted(inp.node.users, key=lambda user: recorded_at.get(user, len(recorded_at)))
        first_use = recorded_at.get(users[0], len(recorded_at)) if users else None
        # used by a call: realized just before it, after every read since the call before it,
        # in the order of that call's arguments
        used = (first_use - 1, float("inf")) if first_use is not None else (len(recorded_at), 0)
        looked_at = output._realized.get(inp.node)
        moment = max(read, min(used, at(looked_at) if looked_at is not None else used))
        position = users[0].all_input_nodes.index(inp.node) if moment == used and users else 0
        return (*moment, position, read_order)

    tensors = [(i, inp) for i, inp in enumerate(output.inputs.values()) if not is_symbol(inp)]
    ordered = _with_symbols_bound(output, [inp for _, inp in sorted(tensors, key=realized)],
                                       [inp for inp in output.inputs.values() if is_symbol(inp)])
    if ordered == list(output.inputs.values()):
        return
    output.inputs = {inp.source: inp for inp in ordered}
    anchor = ordered[0].node
    anchor.graph._root.append(anchor)  # first node of the graph
    for inp in ordered[1:]:
        anchor.append(inp.node)
        anchor = inp.node
    output._last_placeholder = anchor


def is_symbol(inp: GraphInput) -> bool:
    """A symbol's graph input (`s77`), not a tensor's."""
    return isinstance(inp.source, TensorPropertySource)


def is_module_state(source: Source) -> bool:
    """A parameter or buffer of a module: torch._dynamo realizes it where it is read."""
    name = source.name()
    return "._parameters[" in name or "._buffers[" in name

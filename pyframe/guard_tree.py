"""A GuardSet lowered to the C++ tree the eval-frame hook checks on every call (pyframe._C).

`build_tree` makes one node per Source, fetched once per call however many checks read it (a root
source from the frame's locals, globals, builtins or closure; a child from its base's node), and
one leaf per guard on the node it checks, the cheapest kinds first; then the aliasing and shape
guards, which read several nodes, and the exports (values the transformed code takes from the
check instead of evaluating their paths again: `fetched_sources` says which it may).
"""
from __future__ import annotations

import operator
import types
from typing import Any, Optional

from . import _C, config
from .guards import Guard, GuardKind, GuardSet, TensorMeta, dict_entry
from .source import (
    AttrSource, BaseItemSource, BuiltinSource, CellContentsSource, ChildSource, ClosureSource, DictItemSource, DictKeySource,
    DictValueSource, GenericAttrSource, GlobalSource, GlobalsDictSource, ItemSource, LocalSource, Source,
    TensorPropertySource, TupleIteratorRestSource, WeakRefCallSource,
)


def build_tree(guards: GuardSet, code: types.CodeType, exports: list[Source] = (), grouped_inputs: int = 0,
               root: Any = None) -> "_C.RootGuardManager":
    """`guards` lowered to the C++ tree checked by the eval-frame hook on every call of `code`. The
    values of `exports` (the first graph's inputs, then what the code reads through long
    paths: PyCodegen.exports) are handed to the transformed code, in order; the first
    `grouped_inputs` of them in a tuple of their own (PyCodegen.grouped_inputs). `root`: a
    new C++ root by default, or what stands for one (warm/tree.py records the calls)."""
    guards.storage_facts()
    if root is None:
        root = _C.RootGuardManager(config.skip_guards_on_unchanged_objects)
    for g in guards.global_state:
        root.add_torch_state_match(g.state, g.expected, g.text())
    nodes: dict[Source, Any] = {}
    for guard in sorted(guards, key=_KIND):  # stable: cheap kinds first
        _add_leaf(_node_for(_checked_at(guard), root, nodes, code), guard)
    aliasing = guards.aliasing_guard()
    if aliasing is not None:
        root.add_aliasing_match([_node_for(s, root, nodes, code) for s in aliasing.sources],
                                list(aliasing.classes), aliasing.text(), list(aliasing.storage_classes))
    for shape in guards.shape_guards:
        inputs, reads = [], []
        for s in shape.sources:
            if isinstance(s, TensorPropertySource):  # read from the tensor's own node, no node of its own
                inputs.append(_node_for(s.base, root, nodes, code))
                reads.append((s.prop, s.dim))
            else:
                inputs.append(_node_for(s, root, nodes, code))
                reads.append(("value", 0))
        root.add_shape_match(inputs, list(shape.program), shape.text(), reads)
    for i, source in enumerate(exports):
        if root.export(_node_for(source, root, nodes, code)) != i:
            raise ValueError(f"{source.name()} is exported twice")
    if grouped_inputs:
        root.group_exports(grouped_inputs)
    return root



def fetched_sources(guards: GuardSet) -> frozenset[Source]:
    """The sources the lowered tree of `guards` fetches on every check that passes: each guard's node and
    the nodes on the way to it. The transformed code may take these values from the guards'
    exports (the objects the frame held at entry, which every Source names) instead of
    evaluating their paths again; nothing else, as an exported node that cannot be fetched
    would fail the guards."""
    fetched: set[Source] = set()
    aliasing = guards.aliasing_guard()
    shapes = [s for shape in guards.shape_guards for s in shape.sources]
    for source in [*map(_checked_at, guards), *(aliasing.sources if aliasing is not None else ()), *shapes]:
        while source not in fetched:
            fetched.add(source)
            if not isinstance(source, ChildSource):
                break
            source = source.base
    return frozenset(fetched)


_KIND = operator.attrgetter("kind")


def _checked_at(guard: Guard) -> Source:
    """The node a guard's check runs on: its source's, but the object's for HASATTR_MATCH and
    CLASS_ATTR_MATCH and the dict's for DICT_CONTAINS_MATCH (the attribute or entry itself may
    not exist)."""
    kind = guard.kind
    if kind in _CHECKED_ON_BASE:
        return guard.source.base
    if kind == _DICT_CONTAINS_MATCH:
        return dict_entry(guard.source)[1]
    return guard.source


_CHECKED_ON_BASE = frozenset({GuardKind.HASATTR_MATCH, GuardKind.CLASS_ATTR_MATCH})
_DICT_CONTAINS_MATCH = GuardKind.DICT_CONTAINS_MATCH  # (read once: see _TEXTS)


def _node_for(source: Source, root: Any, nodes: dict[Source, Any], code: types.CodeType) -> Any:
    node = nodes.get(source)
    if node is not None:
        return node
    lower = _LOWERINGS.get(type(source)) or next(
        (_LOWERINGS[kind] for kind in type(source).__mro__ if kind in _LOWERINGS), None)  # (a subclass)
    if lower is None:
        raise TypeError(f"no guard lowering for source {source!r}")
    if isinstance(source, ChildSource):
        node = lower(_node_for(source.base, root, nodes, code), source)
    else:
        node = lower(root, source, code)
    nodes[source] = node
    return node


# How each kind of source becomes a node of the C++ tree: a root source from the root (and the
# code, whose co_varnames give a local's slot: at frame entry only arguments are bound, in that
# order), a child source from its base's node. Looked up by the source's exact class, as a tree
# of hundreds of guards lowers every node through here.
_LOWERINGS: dict[type, Any] = {
    LocalSource: lambda root, s, code: root.local(s.local_name, code.co_varnames.index(s.local_name)),
    CellContentsSource: lambda root, s, code: root.local(s.local_name, code.co_varnames.index(s.local_name))
    .attr("cell_contents"),
    GlobalSource: lambda root, s, code: root.global_(s.global_name),
    GlobalsDictSource: lambda root, s, code: root.globals_dict(),
    BuiltinSource: lambda root, s, code: root.builtin(s.builtin_name),
    ClosureSource: lambda root, s, code: root.closure(s.index),
    GenericAttrSource: lambda base, s: base.generic_attr(s.attr),
    AttrSource: lambda base, s: base.attr(s.attr),
    ItemSource: lambda base, s: base.item(s.key),
    DictItemSource: lambda base, s: base.item(s.key),
    BaseItemSource: lambda base, s: base.item(s.key),
    DictKeySource: lambda base, s: base.dict_key(s.index),
    DictValueSource: lambda base, s: base.dict_value(s.index),
    TupleIteratorRestSource: lambda base, s: base.tuple_iterator_rest(),
    WeakRefCallSource: lambda base, s: base.weakref_call(),
    TensorPropertySource: lambda base, s: base.tensor_property(s.prop, s.dim),
}


def _add_leaf(node: Any, guard: Guard) -> None:
    _LEAVES[guard.kind](node, guard, guard.value, guard.text())


def _add_tensor_match(node: Any, guard: Guard, m: TensorMeta, text: str) -> None:
    node.add_tensor_match(m.type, m.dtype, m.device, _dynamic_as_unchecked(m.sizes), _dynamic_as_unchecked(m.strides),
                          m.requires_grad, text, _or_unchecked(m.storage_offset), _or_unchecked(m.storage_nbytes))


# The C++ leaf of each guard kind: (node, guard, guard.value, guard.text()) -> None.
_LEAVES: dict[GuardKind, Any] = {
    GuardKind.ID_MATCH: lambda node, g, value, text: node.add_id_match(value, text),
    GuardKind.TYPE_MATCH: lambda node, g, value, text: node.add_type_match(value, text),
    GuardKind.NONE_MATCH: lambda node, g, value, text: node.add_none_match(text),
    GuardKind.NOT_NONE_MATCH: lambda node, g, value, text: node.add_not_none_match(text),
    GuardKind.EQUALS_MATCH: lambda node, g, value, text: node.add_equals_match(value, text),
    GuardKind.LEN_MATCH: lambda node, g, value, text: node.add_len_match(value, text),
    GuardKind.DICT_KEYS_MATCH: lambda node, g, value, text: node.add_dict_keys_match(tuple(value), text),
    GuardKind.DICT_KEYS_ID_MATCH: lambda node, g, value, text: node.add_dict_keys_id_match(value.keys, list(value.by_id),
                                                                                         text),
    GuardKind.HASATTR_MATCH: lambda node, g, value, text: node.add_hasattr_match(g.source.attr, value, text),
    GuardKind.CLASS_ATTR_MATCH: lambda node, g, value, text: node.add_class_attr_match(g.source.attr, value.value,
                                                                                       value.check_instance, text),
    GuardKind.DICT_CONTAINS_MATCH: lambda node, g, value, text: node.add_dict_contains_match(dict_entry(g.source)[0],
                                                                                             value, text),
    GuardKind.ATTRS_LEN_MATCH: lambda node, g, value, text: node.add_attrs_len_match([a for a, _ in value],
                                                                                     [n for _, n in value], text),
    GuardKind.TENSOR_MATCH: _add_tensor_match,
}


def _dynamic_as_unchecked(values: tuple[Optional[int], ...]) -> list[int]:
    """TENSOR_MATCH's sizes or strides for C++: -1 where symbolic (not checked there)."""
    return [-1 if n is None else n for n in values]


def _or_unchecked(n: Optional[int]) -> int:
    return -1 if n is None else n

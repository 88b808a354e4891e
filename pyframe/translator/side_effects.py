"""Side effects: mutations of objects that outlive the frame, replayed after the graph runs.

A list, dict or object the frame read (it has a Source) may be mutated by the traced code:
`results.append(y)`, `cache["k"] = y`, `self.calls += 1`, `setattr(config, "last", y)`. While tracing,
the mutation is applied to the symbolic value only, and recorded here; every later read in the same
trace goes through the same tracker (`known`), so it sees the mutation. The transformed code then
performs all of them for real, after the graph call, in one go:

    <graph call>
    ___effect_0 = [<new items>]; ...           every new value is built first (an item may be read
                                               from another mutated object: it must be the old one)
    object.__delattr__(obj, "tmp")             an attribute deleted (`del obj.tmp`; never one the
                                               replay also stores)
    results[:] = ___effect_0                   a list keeps its identity, its items are replaced
    cache.clear(); cache.update(___effect_1)   so does a dict (a dict subclass's instance: through
                                               its base's own methods, dict_subclass.refill)
    self.calls = ___effect_2                   an attribute store (object.__setattr__, where the
                                               class's own __setattr__ was inlined)
    <cell>.cell_contents = ___effect_3         a closure cell assigned (`nonlocal out; out = y`)
    STORE_GLOBAL counter (___effect_4)         a global assigned (`global counter; counter += 1`);
                                               fn.__globals__[name] for another module's function
    <return, or the unsupported step and the resume call>

A closure cell is one tracker per cell object, however many functions share it (a setter and a
getter made by the same call): a store through one is what a read through any other sees. The
frame's own free variables are cells too (`FreeCellSource`, loaded with LOAD_CLOSURE).

One real object reachable from two sources in the same trace (a dict that is a module's attribute
and also in a forward hook's closure, a list passed in and also a global) has one tracker, the one
made for the first source read, so a mutation through either is seen through both; the trace then
relies on the two sources holding one object, which an aliasing guard checks (torch._dynamo's
DUPLICATE_INPUT guard). A module keeps one tracker per source: assigning an attribute of a module
reached two ways is Unsupported.
Objects made while tracing (NewObjectVariable, lists and dicts built in the frame) need no replay:
they are built with their final contents if they outlive the trace.
"""
from __future__ import annotations

import collections
import sys
import types
from typing import TYPE_CHECKING, Any, NamedTuple

import torch

from ..exc import Unsupported
from ..guards import GuardKind, GuardSet
from ..source import FreeCellSource, GlobalSource, ItemSource, Source
from .variables.base import VariableTracker
from .variables.base import class_attribute
from .variables.container_subclass import ContainerSubclassMixin
from .variables.dict_subclass import DictSubclassMixin, refill
from .variables.frame_objects import UserObjectVariable
from .variables.objects import PythonObjectVariable
from .variables.functions import UserFunctionVariable
from .variables.tensor import TensorVariable
from .variables.dicts import build_dict_items
from .variables.dict_keys import made_keys

if TYPE_CHECKING:
    from ..codegen.pycodegen import PyCodegen


class SideEffects:
    def __init__(self) -> None:
        self._by_source: dict[Source, VariableTracker] = {}
        self._sources_of: dict[int, list[Source]] = {}  # id of a real object -> where it was read from
        self._objects: list[Any] = []                   # keeps those ids valid for the trace
        self._values: dict[int, Any] = {}                # id of a tracker -> the object it stands for
        self.mutated: dict[int, VariableTracker] = {}   # containers whose items changed, by tracker id
        self.stores: dict[int, tuple[VariableTracker, dict[str, VariableTracker]]] = {}  # attributes set
        self.deletions: dict[int, tuple[VariableTracker, set[str]]] = {}  # attributes deleted (same keys)
        self.hooks: list[tuple[VariableTracker, VariableTracker]] = []  # (input tensor, fn) registered
        self._cells: dict[int, VariableTracker] = {}    # id of a closure cell -> its one tracker
        # globals assigned, per globals dict: (where the transformed code finds the dict, None for
        # the frame's own, which STORE_GLOBAL writes; {name: value})
        self.global_stores: dict[int, tuple[Source | None, dict[str, VariableTracker]]] = {}
        self._modules_tracked: dict[int, Any] = {}      # id of a module's tracker -> the module
        self._unsourced: dict[int, tuple[Any, VariableTracker]] = {}  # id of a list or dict no source reaches
        self.effects = 0  # mutations traced so far, of any object (made here or not): see `note`
        # Of those, the ones the replay makes: stores, mutations and deletions on objects that
        # existed before the frame, globals and hooks (not an iterator of the frame moved on).
        # While it is unchanged, what a read of those objects finds in them is what it found.
        self.replayed = 0
        # Reads answered from this record (a stored attribute or global, a deletion, a tracker of
        # an object the trace mutated): a read that made none found only what the objects held
        # at frame entry, and no object made while tracing, whose changes `replayed` does not count.
        self.record_reads = 0

    # -- reading ----------------------------------------------------------------------------------
    def known(self, source: Source) -> VariableTracker | None:
        """The tracker already made for the mutable object at `source` in this trace."""
        tracker = self._by_source.get(source)
        if tracker is not None and (self.mutated or self.stores) and \
                (id(tracker) in self.mutated or _store_key(tracker) in self.stores):
            self.record_reads += 1
        return tracker

    def track(self, source: Source, value: Any, tracker: VariableTracker, guards: GuardSet) -> VariableTracker:
        """Remember the tracker of a mutable object read from `source`; an object read before
        through another source keeps the tracker it has (`tracker` is dropped), guarded to be the
        object that source holds (unless both are pinned by identity already)."""
        sources = self._sources_of.setdefault(id(value), [])
        if not sources:
            self._objects.append(value)
        if isinstance(value, torch.nn.Module):
            # A module keeps a tracker per source (each pinned by identity; its parameters lifted
            # once per source, as torch._dynamo lifts them); an attribute assigned through one is
            # not seen through another, so that is Unsupported (here and in store_attr).
            if any(id(self._by_source[s]) in self.stores for s in sources):
                raise Unsupported(f"{source.name()} is {sources[0].name()}, which the trace has mutated")
            self._modules_tracked[id(tracker)] = value
        elif sources:
            first = sources[0]
            tracker = self._by_source[first]
            if not (guards.has(first, GuardKind.ID_MATCH) and guards.has(source, GuardKind.ID_MATCH)):
                guards.add_aliasing(first, value)
                guards.add_aliasing(source, value)
        self._by_source[source] = tracker
        self._values[id(tracker)] = value
        sources.append(source)
        return tracker

    def known_unsourced(self, value: Any) -> VariableTracker | None:
        """The tracker already made for the list or dict `value`, read where no source reaches it."""
        known = self._unsourced.get(id(value))
        return known[1] if known is not None else None

    def track_unsourced(self, value: Any, tracker: VariableTracker) -> VariableTracker:
        """Remember the tracker of a list or dict read without a source (the pair keeps the object,
        and so its id, alive for the trace)."""
        self._unsourced[id(value)] = (value, tracker)
        return tracker

    def real_value(self, tracker: VariableTracker, default: Any) -> Any:
        """The real object behind the tracker of a mutable object read from the frame (its
        identity: `id(d)`), or `default`."""
        return self._values.get(id(tracker), default)

    def known_cell(self, cell: Any) -> VariableTracker | None:
        """The tracker of the closure cell `cell`, if the trace reached it before (by any function)."""
        tracker = self._cells.get(id(cell))
        if tracker is not None and _store_key(tracker) in self.stores:
            self.record_reads += 1
        return tracker

    def track_cell(self, cell: Any, tracker: VariableTracker) -> VariableTracker:
        """Remember the tracker of a closure cell (`tracker.source` loads the cell object itself)."""
        self._cells[id(cell)] = tracker
        self._objects.append(cell)
        return tracker

    def load_attr(self, obj: VariableTracker, name: str) -> VariableTracker | None:
        """The value the trace stored in `obj.name`, if it did."""
        entry = self.stores.get(_store_key(obj))
        found = entry[1].get(name) if entry is not None else None
        if found is not None:
            self.record_reads += 1
        return found

    def load_class_attr(self, cls: type, name: str) -> VariableTracker | None:
        """What `cls.name` (and an instance's `obj.name` that reaches the class) finds of what the
        trace stored in a class attribute (`Cls.count += 1` on cls or a base): the first class of
        cls's MRO that was stored to or that really holds `name` decides, as the lookup does."""
        for klass in cls.__mro__:
            entry = self.stores.get(id(klass))
            if entry is not None and name in entry[1]:
                self.record_reads += 1
                return entry[1][name]
            if name in _type_dict(klass):
                return None
        return None

    def is_deleted(self, obj: VariableTracker, name: str) -> bool:
        """The trace deleted `obj.name` (`del obj.name`) and has not stored it again."""
        entry = self.deletions.get(_store_key(obj))
        deleted = entry is not None and name in entry[1]
        self.record_reads += deleted
        return deleted

    def deleted_names(self, obj: VariableTracker) -> set[str]:
        entry = self.deletions.get(_store_key(obj))
        self.record_reads += bool(entry and entry[1])
        return set(entry[1]) if entry is not None else set()

    def stores_to(self, obj: VariableTracker) -> bool:
        """The trace assigned some attribute of `obj`."""
        stored = _store_key(obj) in self.stores
        self.record_reads += stored
        return stored

    def load_global(self, f_globals: dict, name: str) -> VariableTracker | None:
        """The value the trace assigned to the global `name` of `f_globals`, if it did."""
        entry = self.global_stores.get(id(f_globals))
        found = entry[1].get(name) if entry is not None else None
        if found is not None:
            self.record_reads += 1
        return found

    # -- repeating reads ----------------------------------------------------------------------------
    def start_read(self) -> tuple[int, int, int]:
        """Before a read that may be repeated (`remember_read`): the counts now."""
        return self.effects, self.replayed, self.record_reads

    def remember_read(self, reads: dict, key: Any, start: tuple[int, int, int], result: Any) -> None:
        """Keep `result` of a read that began at `start` (start_read) under `key` in `reads`, if it
        changed nothing. One that found only what objects from before the frame held at entry
        (it read nothing of this record) reads the same while `replayed` is unchanged; any other
        while nothing at all has changed (`effects`)."""
        effects, replayed, record_reads = start
        if self.effects != effects:
            return
        if self.record_reads == record_reads:
            reads[key] = (True, replayed, result)
        else:
            reads[key] = (False, effects, result)

    def repeat_read(self, reads: dict, key: Any) -> Any:
        """What the read under `key` gave (remember_read), if it would give the same now; else None."""
        entry = reads.get(key)
        if entry is None:
            return None
        by_replayed, count, result = entry
        return result if count == (self.replayed if by_replayed else self.effects) else None

    # -- writing ----------------------------------------------------------------------------------
    def store_global(self, f_globals: dict, dict_source: Source | None, name: str, value: VariableTracker) -> None:
        """`global name; name = value` in code whose globals are `f_globals` (read by the
        transformed code from `dict_source`, or the frame's own when None)."""
        self.effects += 1
        self.replayed += 1
        if id(f_globals) not in self.global_stores:
            self._objects.append(f_globals)  # keeps the id valid for the trace
        self.global_stores.setdefault(id(f_globals), (dict_source, {}))[1][name] = value

    def note(self) -> None:
        """Count a mutation the trace made (a lazy iterator's items must not be made early if
        making them mutates anything: see output.realize_lazy_iterators)."""
        self.effects += 1

    def mutate(self, container: VariableTracker) -> None:
        """`container` (a ListVariable or DictVariable) is about to change its items."""
        self.effects += 1
        if container.source is None:
            return  # built in the frame: rebuilt with its final items if it outlives the trace
        self.replayed += 1
        real = self._values.get(id(container))
        if _is_module_globals(real):
            # (`globals()[name] = v` reaching the trace as a dict): a later LOAD_GLOBAL of name
            # reads the module, not this tracker, so the store is left to Python
            raise Unsupported(f"a store into the globals of module {real['__name__']}")
        self.mutated[id(container)] = container

    def store_attr(self, obj: VariableTracker, name: str, value: VariableTracker) -> None:
        """`obj.name = value` on an object read from the frame, or on a tensor (a graph output
        then, if the graph made it: the replay stores the attribute on the very tensor returned)."""
        self.effects += 1
        self.replayed += 1
        if obj.source is None and not isinstance(obj, (TensorVariable, UserFunctionVariable)) \
                and not _is_class(obj) \
                and getattr(obj, "made_by", None) is None:  # (a class found without a source is loaded
            # as a constant; a torch module made in the frame is made again where it is rebuilt)
            raise Unsupported(f"assignment to attribute {name!r} of {obj}, which has no source")
        module = self._modules_tracked.get(id(obj))
        if module is not None and len(self._sources_of[id(module)]) > 1:
            names = " and ".join(s.name() for s in self._sources_of[id(module)])
            raise Unsupported(f"assignment to an attribute of a module reachable as {names}")
        self.stores.setdefault(_store_key(obj), (obj, {}))[1][name] = value
        deleted = self.deletions.get(_store_key(obj))
        if deleted is not None:  # (deleted, then stored again: the store is the whole effect)
            deleted[1].discard(name)

    def register_hook(self, tensor: VariableTracker, fn: VariableTracker) -> None:
        """`x.register_hook(fn)` on a tensor passed in: replayed after the graph (backward, where
        the hook fires, runs after the frame)."""
        self.effects += 1
        self.replayed += 1
        self.hooks.append((tensor, fn))

    def delete_attr(self, obj: VariableTracker, name: str, in_real_object: bool) -> None:
        """`del obj.name` on an object read from the frame: replayed as object.__delattr__ if the
        real object has the attribute (`in_real_object`, guarded by the caller); an attribute the
        trace stored first and then deleted leaves nothing to replay."""
        self.effects += 1
        self.replayed += 1
        if obj.source is None:
            raise Unsupported(f"deletion of attribute {name!r} of {obj}, which has no source")
        entry = self.stores.get(_store_key(obj))
        if entry is not None:
            entry[1].pop(name, None)
        if in_real_object:
            self.deletions.setdefault(_store_key(obj), (obj, set()))[1].add(name)

    def advanced_iterators(self) -> list[VariableTracker]:
        """Iterators read from the frame that the trace took items from (ListIteratorVariable)."""
        return [vt for vt in self._by_source.values() if getattr(vt, "kind", None) is _TUPLE_ITERATOR
                and vt.index > 0]

    def changed_sources(self) -> set[Source]:
        """Where the objects the replay changes are read from."""
        return {c.source for c in self.mutated.values()} | \
            {obj.source for obj, _ in self.stores.values() if obj.source is not None} | \
            {obj.source for obj, _ in self.deletions.values()} | \
            {it.source for it in self.advanced_iterators()}

    def replaced_sources(self) -> set[Source]:
        """Sources whose value the replay replaces without changing an object read through them:
        the contents of the frame's own closure cells (ClosureSource reads the cell, not a child
        of FreeCellSource)."""
        cells = {obj.source.contents() for obj, attrs in self.stores.values()
                 if isinstance(obj.source, FreeCellSource) and "cell_contents" in attrs}
        return cells | {GlobalSource(name) if dict_source is None else ItemSource(dict_source, name)
                        for dict_source, names in self.global_stores.values() for name in names}

    # -- replaying ----------------------------------------------------------------------------------
    def is_empty(self) -> bool:
        """Nothing to replay after the graph."""
        return not (self.mutated or self.stores or self.global_stores or self.advanced_iterators())

    def live_values(self) -> list[VariableTracker]:
        """What the replay reads: its tensors must come out of the graph."""
        values: list[VariableTracker] = [*self.mutated.values()]
        for obj, attrs in self.stores.values():
            values.extend(attrs.values())
            if obj.source is None:  # a tensor the graph made: loaded from the graph's outputs
                values.append(obj)
        for _, names in self.global_stores.values():
            values.extend(names.values())
        values.extend(fn for _, fn in self.hooks)
        return [item for value in values for item in _contents(value)]

    def codegen(self, cg: "PyCodegen") -> None:
        """Emit the replay (see the module docstring)."""
        effects: list[tuple[str, Any]] = []
        for container in self.mutated.values():
            effects.append((cg.new_temp("___effect"), container))
            _build_contents(cg, container)
            cg.store_local(effects[-1][0])
        for obj, attrs in self.stores.values():
            for name, value in attrs.items():
                effects.append((cg.new_temp("___effect"), (obj, name)))
                value.reconstruct(cg)
                cg.store_local(effects[-1][0])
        for dict_source, names in self.global_stores.values():
            for name, value in names.items():
                effects.append((cg.new_temp("___effect"), _GlobalTarget(dict_source, name)))
                value.reconstruct(cg)
                cg.store_local(effects[-1][0])
        for tensor, fn in self.hooks:  # x.register_hook(fn)
            cg.load_source(tensor.source)
            cg.emit("LOAD_METHOD", "register_hook")
            fn.reconstruct(cg)
            cg.call(1)
            cg.emit("POP_TOP")
        for obj, names in self.deletions.values():  # object.__delattr__(obj, name)
            for name in sorted(names):
                cg.push_null()
                cg.load_const(object.__delattr__)
                cg.load_source(obj.source)
                cg.load_const(name)
                cg.call(2)
                cg.emit("POP_TOP")
        for iterator in self.advanced_iterators():  # it.__setstate__(its position + items taken)
            cg.push_null()
            cg.load_const(advance_tuple_iterator)
            cg.load_source(iterator.source)
            cg.load_const(iterator.index)
            cg.call(2)
            cg.emit("POP_TOP")
        for temp, target in effects:
            if isinstance(target, _GlobalTarget):
                cg.load_local(temp)
                if target.dict_source is None:  # the frame's own globals
                    cg.emit("STORE_GLOBAL", target.name)
                else:  # fn.__globals__[name] = temp
                    cg.load_source(target.dict_source)
                    cg.load_const(target.name)
                    cg.emit("STORE_SUBSCR")
            elif isinstance(target, tuple) and _raw_setattr(target[0]) is not None:
                # object.__setattr__(obj, "name", temp) (type.__setattr__ for a class): what the
                # trace recorded is the store itself, the class's own __setattr__ (or its
                # metaclass's) having run (inlined) already
                obj, name = target
                cg.push_null()
                cg.load_const(_raw_setattr(obj))
                cg.load_source(obj.source)
                cg.load_const(name)
                cg.load_local(temp)
                cg.call(3)
                cg.emit("POP_TOP")
            elif isinstance(target, tuple):  # obj.name = temp
                obj, name = target
                cg.load_local(temp)
                obj.reconstruct(cg)  # (its source, or a tensor among the graph's outputs)
                cg.emit("STORE_ATTR", name)
            elif isinstance(target, DictSubclassMixin):  # refill(target, temp), not its own methods
                cg.push_null()
                cg.load_const(refill)
                cg.load_source(target.source)
                cg.load_local(temp)
                cg.call(2)
                cg.emit("POP_TOP")
            elif isinstance(target, ContainerSubclassMixin):  # list.__setitem__(target, slice(None), temp)
                cg.push_null()                                  # (list's own: not the subclass's)
                cg.load_const(list.__setitem__)
                cg.load_source(target.source)
                cg.load_const(slice(None))
                cg.load_local(temp)
                cg.call(3)
                cg.emit("POP_TOP")
            elif target.python_type() is list:  # target[:] = temp
                cg.load_local(temp)
                cg.load_source(target.source)
                cg.load_const(None)
                cg.load_const(None)
                cg.emit("BUILD_SLICE", 2)
                cg.emit("STORE_SUBSCR")
            else:  # target.clear(); target.update(temp) (a deque: extend)
                refill_with = "extend" if target.python_type() is collections.deque else "update"
                for method, args in (("clear", ()), (refill_with, (temp,))):
                    cg.load_source(target.source)
                    cg.emit("LOAD_METHOD", method)
                    for arg in args:
                        cg.load_local(arg)
                    cg.call(len(args))
                    cg.emit("POP_TOP")


_TUPLE_ITERATOR = type(iter(()))


def advance_tuple_iterator(it: Any, taken: int) -> None:
    """Move a tuple iterator on by the `taken` items the trace took from it."""
    for _ in range(taken):
        next(it)


class _GlobalTarget(NamedTuple):
    dict_source: Source | None
    name: str


def _contents(value: VariableTracker) -> list[VariableTracker]:
    """What the replay of a change to `value` reads, in the order it reads it (_build_contents)."""
    if isinstance(value, DictSubclassMixin):  # its items, then (made here) its attributes
        items = value.dict_var.items
        return [*made_keys(items), *items.values(), *getattr(value, "attrs", {}).values()]
    if isinstance(value, ContainerSubclassMixin):  # a list subclass's instance read from the frame
        return list(value.base_var.items)
    items = getattr(value, "items", None)
    if isinstance(items, dict):  # a dict: its values, and the keys that are values of the trace
        return [*made_keys(items), *items.values()]
    if isinstance(items, list):
        return list(items)
    return [value]


def _build_contents(cg: "PyCodegen", container: VariableTracker) -> None:
    """A new list or dict holding the tracker's items (not the frame's object: that is the target)."""
    if isinstance(container, ContainerSubclassMixin):  # (a list subclass's: its items)
        container = container.base_var
    items = container.dict_var.items if isinstance(container, DictSubclassMixin) else container.items
    if isinstance(items, dict):
        build_dict_items(cg, items)
    else:
        for item in container.items:
            item.reconstruct(cg)
        cg.emit("BUILD_LIST", len(container.items))


def _store_key(obj: VariableTracker) -> int:
    """The key of `obj`'s attribute stores: one tracker per mutable object read from the frame
    (SideEffects.track), but a tensor may have several (read through two sources, or given back
    unchanged by an in-place op), all sharing its FakeTensor, and a function one per read."""
    if isinstance(obj, TensorVariable):
        return id(obj.example)
    if _is_class(obj):  # one class, however it was reached (`C`, `type(obj)`, `obj.__class__`)
        return id(obj.value)
    return id(obj.fn) if isinstance(obj, UserFunctionVariable) else id(obj)


def _is_module_globals(value: Any) -> bool:
    """A module's globals dict (`globals()`, `mod.__dict__`, `fn.__globals__`)."""
    if type(value) is not dict or not isinstance(value.get("__name__"), str):
        return False
    return getattr(sys.modules.get(value["__name__"]), "__dict__", None) is value


def _is_class(obj: VariableTracker) -> bool:
    return type(obj) is PythonObjectVariable and isinstance(obj.value, type)


_type_dict = type.__dict__["__dict__"].__get__


def _raw_setattr(obj: VariableTracker) -> Any:
    """The store the trace recorded for `obj`, when it is the builtin one beneath a Python
    `__setattr__` that was inlined (replaying through that would run it twice: a mapped name
    mapped again): `object.__setattr__` for a dict-subclass instance or an object whose class
    defines `__setattr__`, `type.__setattr__` for a class whose metaclass does. None: a plain
    `obj.name = value`."""
    if isinstance(obj, DictSubclassMixin):
        return object.__setattr__
    value = getattr(obj, "value", None)
    if isinstance(obj, UserObjectVariable) or isinstance(value, type):
        if isinstance(class_attribute(type(value), "__setattr__", None), types.FunctionType):
            return type.__setattr__ if isinstance(value, type) else object.__setattr__
    return None

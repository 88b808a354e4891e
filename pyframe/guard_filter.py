"""`guard_filter_fn`: the user's say over which guards an entry keeps, as torch.compile's.

`pyframe.compile(options={"guard_filter_fn": fn})` (or `optimize(..., guard_filter_fn=fn)`) calls
`fn` once per compiled entry with one `GuardFilterEntry` per guard on a value of the frame, in the
order the guards are checked, and keeps the guards `fn` answers True for. The entries carry what
torch._dynamo's carry (`name`, `has_value`, `value`, `guard_type`, `derived_guard_types`,
`is_global`, `orig_guard`), so torch.compiler's helpers work on them unchanged:
`skip_guard_on_globals_unsafe`, `keep_tensor_guards_unsafe`, `skip_all_guards_unsafe`, and
`skip_guard_on_all_nn_modules_unsafe` / `skip_guard_on_inbuilt_nn_modules_unsafe`, which ask
`orig_guard.source` whether the value was reached through a module (torch's own module classes,
for the second).

Dropping a guard is the user's bet that what it checked will not change (the helpers' names say
"unsafe"): an entry then runs for inputs its dropped guards would have rejected. The guards on
torch's global state (grad mode, autocast...), on how inputs alias and on symbolic sizes are
not offered, and stay.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

import torch

from .exc import InvalidCompileOption
from .guards import Guard, GuardKind, GuardSet
from .source import ChildSource, GlobalSource, GlobalsDictSource, Source

_MISSING = object()


class FilteredSource:
    """What a filter sees of a guard's source: its name, and whether the value was reached through
    an nn.Module (torch._dynamo's unspecialized module sources: a module's attributes, its
    parameters, buffers and submodules)."""

    def __init__(self, source: Source, through_module: type | None):
        self.source = source
        self._module_class = through_module

    def name(self) -> str:
        return self.source.name()

    def is_unspecialized_nn_module(self) -> bool:
        return self._module_class is not None

    def is_unspecialized_builtin_nn_module(self) -> bool:
        return self._module_class is not None and self._module_class.__module__.startswith("torch.nn.")

    def __repr__(self) -> str:
        return f"FilteredSource({self.name()})"


@dataclasses.dataclass(frozen=True)
class FilteredGuard:
    """`orig_guard` of an entry: pyframe's guard, with its source as a filter sees it."""

    source: FilteredSource
    guard: Guard

    @property
    def name(self) -> str:
        return self.source.name()


@dataclasses.dataclass(frozen=True)
class GuardFilterEntry:
    name: str
    has_value: bool
    value: object
    guard_type: str
    derived_guard_types: tuple[str, ...]
    is_global: bool
    orig_guard: FilteredGuard


def apply_guard_filter(guards: GuardSet, filter_fn: Callable[[Sequence[GuardFilterEntry]], Sequence[bool]],
                       f_locals: dict[str, Any], f_globals: dict[str, Any]) -> None:
    """Keep the guards of `guards` that `filter_fn` keeps (the frame's values read for the entries)."""
    reader = _Reader(f_locals, f_globals)
    offered = list(guards)
    entries = [reader.entry(g) for g in offered]
    answers = list(filter_fn(entries))
    if len(answers) != len(entries) or not all(type(a) is bool for a in answers):
        raise InvalidCompileOption(f"guard_filter_fn must return one bool per entry ({len(entries)} entries), "
                                   f"got {answers!r:.200}")
    dropped = {id(g) for g, keep in zip(offered, answers) if not keep}
    if dropped:
        guards.keep_only(lambda g: id(g) not in dropped)


class _Reader:
    """The frame's values behind sources, read by their names (`L['x'].weight`), each once."""

    def __init__(self, f_locals: dict[str, Any], f_globals: dict[str, Any]):
        self.scope = {"L": f_locals, "G": f_globals, "__builtins__": {}}
        self.values: dict[Source, Any] = {}

    def value(self, source: Source) -> Any:
        if source not in self.values:
            try:
                self.values[source] = eval(source.name(), self.scope)  # noqa: S307 (a source's own name)
            except Exception:  # noqa: BLE001 (a name that is not Python over L and G: no value)
                self.values[source] = _MISSING
        return self.values[source]

    def entry(self, guard: Guard) -> GuardFilterEntry:
        source = guard.source
        value = self.value(source)
        root, module_class = source, None
        if guard.kind == GuardKind.ATTRS_LEN_MATCH and isinstance(value, torch.nn.Module):
            module_class = type(value)  # (what it checks is reached through the module: its hook tables)
        while isinstance(root, ChildSource):
            root = root.base
            if module_class is None and isinstance(self.value(root), torch.nn.Module):
                module_class = type(self.value(root))
        return GuardFilterEntry(
            name=source.name(), has_value=value is not _MISSING, value=None if value is _MISSING else value,
            guard_type=guard.kind.name, derived_guard_types=(),
            is_global=isinstance(root, (GlobalSource, GlobalsDictSource)),
            orig_guard=FilteredGuard(FilteredSource(source, module_class), guard))

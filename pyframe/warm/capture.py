"""What the miss path keeps of each entry's guards for a later `pyframe.save`, the GuardSet the save
rebuilds from it (and lowers onto tree.py's recorder), and a loaded entry's guards as read.

The C++ guard tree cannot be read back, so the miss path keeps the form it was built from: the
GuardSet's guards, its global state, its aliasing and shape guards, and the values the tree hands
the transformed code (its exports). Objects a guard compares by identity are held weakly where they
can be (the C++ leaf holds them so: an `nn.Module` pinned as `self` must be free to die), and the
input tensors the GuardSet held to compute its aliasing are let go once that guard is computed.
"""
from __future__ import annotations

from dataclasses import dataclass
from ..guards import AliasingGuard, GlobalStateGuard, Guard, GuardKind, GuardSet, KeysById, ShapeGuard
from ..source import Source
from .refs import held


@dataclass
class CapturedGuards:
    """One entry's guards, as guard_tree.build_tree lowers them."""

    module: str | None                    # the frame's globals' `__name__`: the code's module
    guards: list[Guard]
    global_state: list[GlobalStateGuard]
    aliasing: AliasingGuard | None
    shape_guards: list[ShapeGuard]
    exports: list[Source]
    grouped_inputs: int


def capture(guards: GuardSet, exports: list[Source], grouped_inputs: int, f_globals: dict) -> CapturedGuards:
    guards.storage_facts()
    kept = [_held_guard(g) for g in guards]
    module = f_globals.get("__name__")
    return CapturedGuards(module if isinstance(module, str) else None, kept, list(guards.global_state),
                          guards.aliasing_guard(), list(guards.shape_guards), list(exports), grouped_inputs)


def _held_guard(g: Guard) -> Guard:
    if g.kind == GuardKind.ID_MATCH:
        return g.with_value(held(g.value))
    if g.kind == GuardKind.DICT_KEYS_ID_MATCH:
        keys = tuple(held(k) if by_id else k for k, by_id in zip(g.value.keys, g.value.by_id))
        return g.with_value(KeysById(keys, g.value.by_id))
    return g


class RebuiltGuards(GuardSet):
    """A GuardSet rebuilt from what the miss path kept: it lowers to the C++ tree the entry was
    given (guard_tree.build_tree), as a save records it."""

    def __init__(self, guards: list[Guard], global_state: list[GlobalStateGuard], aliasing: AliasingGuard | None,
                 shape_guards: list[ShapeGuard]) -> None:
        super().__init__()
        self._guards = {(g.source, g.kind): g for g in guards}
        self.global_state = list(global_state)
        self._aliasing = aliasing
        self.shape_guards = list(shape_guards)

    def aliasing_guard(self) -> AliasingGuard | None:
        return self._aliasing

    def storage_facts(self) -> None:
        pass  # applied before the save: the TENSOR_MATCH guards hold them


@dataclass
class LoadedGuardPart:
    """The guards of an entry this process loaded, as its file held them (save.py's guard part):
    a later `pyframe.save` writes them again as they are."""

    module: str | None
    part: dict

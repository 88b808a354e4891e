"""functools.partial objects, read from the frame or made in it (`functools.partial(f, a)`, and a
class's partialmethod read through an instance): calls pass the stored arguments first; `.func`,
`.args`, `.keywords` and what functools.wraps copies from one are read as Python gives them; one made
in the frame is one object (rebuilt once, compared by identity).
"""
from __future__ import annotations

import functools
from typing import Any

from ...exc import Unsupported
from ...guards import GuardKind
from ...source import AttrSource, Source
from .base import VariableTracker
from .constant import ConstantVariable
from .dicts import DictVariable
from .exceptions import raise_symbolic
from .lists import TupleVariable

_A_PARTIAL = functools.partial(print)  # (asked which attributes a partial object has)


class PartialVariable(VariableTracker):
    """functools.partial(func, *args, **keywords), read from the frame or made in it: a call passes
    the stored arguments first, as partial does."""

    def __init__(self, func: VariableTracker, args: list[VariableTracker],
                 keywords: dict[str, VariableTracker], source: Source | None = None,
                 real_keywords: dict | None = None, value: functools.partial | None = None):
        super().__init__(source)
        self.value = value  # the partial read from the frame (None: made in the trace)
        self.func, self.args = func, args
        self._keywords = keywords
        self.real_keywords = real_keywords  # the real `keywords` dict of a partial read from the frame
        self.keywords_var: VariableTracker | None = None  # `p.keywords`, once read: the dict calls use

    @property
    def keywords(self) -> dict[str, VariableTracker]:
        """The stored keyword arguments: `p.keywords`'s items once the trace has read that dict (a
        store into it changes what a later call passes, as in Python)."""
        if self.keywords_var is None:
            return self._keywords
        if not all(type(k) is str for k in self.keywords_var.items):
            raise Unsupported("a functools.partial whose keywords dict was given a key that is not a string")
        return dict(self.keywords_var.items)

    def python_type(self) -> type:
        return functools.partial

    def pinned_identity(self, tx) -> Any:
        """A partial hashes and compares by identity: one read from the frame (guarded by its
        fields until now) is pinned by identity as a dict key; one made in the trace is its tracker."""
        if self.value is None:
            return self
        tx.output.guards.add(self.source, GuardKind.ID_MATCH, self.value)
        return self.value

    def call(self, tx, args, kwargs) -> VariableTracker:
        return self.func.call(tx, [*self.args, *args], {**self.keywords, **kwargs})

    def var_getattr(self, tx, name: str) -> VariableTracker:
        """`.func`, `.args` and `.keywords`: what the partial was made with (read from the frame, each
        was wrapped and guarded through the partial's source when the partial was)."""
        if name == "func":
            return self.func
        if name == "args":
            return TupleVariable(list(self.args))
        if name == "keywords":
            if self.keywords_var is None:
                keywords = self._keywords
                # (one read from the frame: the real dict, so a store into it is replayed)
                self.keywords_var = tx.wrap(self.real_keywords, AttrSource(self.source, "keywords")) \
                    if self.source is not None else DictVariable(dict(keywords))
            return self.keywords_var
        if not hasattr(_A_PARTIAL, name):  # (`__name__`: the class has one, its instances none)
            raise_symbolic(AttributeError, f"'functools.partial' object has no attribute '{name}'")
        if name in ("__module__", "__doc__"):  # the class's (what functools.wraps copies from a partial)
            return ConstantVariable(getattr(functools.partial, name))
        if name == "__dict__" and self.source is None:  # (one made in the frame has no attributes)
            return DictVariable({})
        return super().var_getattr(tx, name)

    def rebuilt_from(self) -> list[VariableTracker]:
        return [] if self.source is not None else [self.func, *self.args, *self.keywords.values()]

    def real_object(self) -> Any:
        return self.value if self.value is not None else super().real_object()

    def identity(self) -> Any:
        # one made in the frame has this one tracker (`wrapper.__wrapped__ is p`)
        return self if self.source is None else super().identity()

    def reconstruct(self, cg) -> None:
        if self.source is not None:
            cg.load_source(self.source)
            return

        def build() -> None:  # once: each use is the same partial object
            keywords = self.keywords
            cg.push_null()
            cg.load_const(functools.partial)
            for value in (self.func, *self.args, *keywords.values()):
                value.reconstruct(cg)
            if keywords:
                cg.emit("KW_NAMES", tuple(keywords))
            cg.call(1 + len(self.args) + len(keywords))

        cg.rebuild_once(self, build)

    def __repr__(self) -> str:
        return f"PartialVariable({self.func!r})"

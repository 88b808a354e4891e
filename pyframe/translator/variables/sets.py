"""Sets of constants, built in the frame or read from it (guarded by their value)."""
from __future__ import annotations

from typing import Any

from ...exc import Unsupported
from ...source import Source
from .base import BoundMethodVariable, VariableTracker, constant_args
from .constant import ConstantVariable


class SetVariable(VariableTracker):
    """A set of constants (ints, strings, ...) built in the frame: a real set, so iteration has
    Python's own order."""

    def __init__(self, values: set, source: Source | None = None):
        super().__init__(source)
        self.values = values  # a copy, when read from the frame (with `source`): never mutated

    @classmethod
    def of(cls, items: list[VariableTracker]) -> "SetVariable":
        if not all(item.is_python_constant() for item in items):
            raise Unsupported("a set of values unknown while tracing (tensors hash by identity)")
        return cls({item.as_python_constant() for item in items})

    @property
    def items(self) -> list[VariableTracker]:
        return [ConstantVariable(v) for v in self.values]

    def python_type(self) -> type:
        return set

    def as_python_constant(self) -> Any:
        return set(self.values)

    def truth(self) -> bool:
        return bool(self.values)

    def unpack(self, tx) -> list[VariableTracker]:
        return self.items

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if callable(getattr(set, name, None)):
            return BoundMethodVariable(self, name)
        raise Unsupported(f"attribute {name!r} of a set")

    def call_method(self, tx, name, args, kwargs) -> VariableTracker:
        if name in ("add", "discard", "remove", "update", "clear", "difference_update",
                    "intersection_update"):
            if self.source is not None:
                raise Unsupported(f"set.{name}() on a set that outlives the frame")
            others = [SetVariable.of(a.unpack(tx)).values if name.endswith("update") else a.as_python_constant()
                      for a in args]
            getattr(self.values, name)(*others)
            return ConstantVariable(None)
        pargs, pkwargs = constant_args(args, kwargs, f"set.{name}()")
        result = getattr(self.values, name)(*pargs, **pkwargs)
        return SetVariable(result) if isinstance(result, set) else ConstantVariable(result)

    def reconstruct(self, cg) -> None:
        if self.source is not None:
            cg.load_source(self.source)
            return

        def build() -> None:
            for value in self.values:
                cg.load_const(value)
            cg.emit("BUILD_SET", len(self.values))

        cg.rebuild_once(self, build)

    def __repr__(self) -> str:
        return f"SetVariable({self.values!r})"

"""User Python functions: calls are inlined into the caller's trace."""
from __future__ import annotations

import types
from typing import Any

from ...source import Source
from .base import VariableTracker


class UserFunctionVariable(VariableTracker):
    def __init__(self, fn: types.FunctionType, source: Source | None = None):
        super().__init__(source)
        self.fn = fn

    def python_type(self) -> type:
        return types.FunctionType

    def as_python_constant(self) -> Any:
        return self.fn

    def call(self, tx, args, kwargs) -> VariableTracker:
        return tx.inline_call(self.fn, list(args), kwargs, fn_source=self.source)

    def __repr__(self) -> str:
        return f"UserFunctionVariable({self.fn.__qualname__})"

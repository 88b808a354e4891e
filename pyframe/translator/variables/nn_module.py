"""nn.Modules: attribute reads with torch._dynamo's sources, and calls inlined into the graph.

`self.linear.weight` is the graph input `L['self']._modules['linear']._parameters['weight']` (the
placeholder `L_self_modules_linear_parameters_weight_`, as in torch._dynamo 2.13). A call
`self.relu(x)` on a module without hooks inlines `type(module).forward`, so torch.nn's own modules
record the torch / torch.nn.functional calls their forward makes (ReLU records `relu`).
"""
from __future__ import annotations

import inspect
import types
from typing import Any

import torch

from ...exc import Unsupported
from ...guards import GuardKind
from ...source import AttrSource, ItemSource, Source
from .base import BoundMethodVariable, VariableTracker
from .constant import ConstantVariable
from .containers import ListIteratorVariable, TupleVariable

_TREE_PARAMETERS = {
    "children": (), "named_children": (), "modules": (), "named_modules": ("memo", "prefix", "remove_duplicate"),
    "parameters": ("recurse",), "buffers": ("recurse",),
    "named_parameters": ("prefix", "recurse", "remove_duplicate"),
    "named_buffers": ("prefix", "recurse", "remove_duplicate"),
}
_TREE_METHODS = set(_TREE_PARAMETERS)


def _has_hooks(module: torch.nn.Module) -> bool:
    hooks = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")
    global_hooks = torch.nn.modules.module
    return any(getattr(module, h, None) for h in hooks) or any(
        getattr(global_hooks, h, None) for h in ("_global_forward_hooks", "_global_forward_pre_hooks",
                                                 "_global_backward_hooks", "_global_backward_pre_hooks"))


class NNModuleVariable(VariableTracker):
    def __init__(self, module: torch.nn.Module, source: Source | None):
        super().__init__(source)
        self.module = module

    def real_object(self) -> Any:
        return self.module

    def python_type(self) -> type:
        return type(self.module)

    def as_python_constant(self) -> torch.nn.Module:
        return self.module

    def _child_source(self, table: str, name: str) -> Source | None:
        return ItemSource(AttrSource(self.source, table), name) if self.source is not None else None

    def var_getattr(self, tx, name: str) -> VariableTracker:
        stored = tx.side_effects.load_attr(self, name)
        if stored is not None:
            return stored
        module = self.module
        for table in ("_parameters", "_buffers", "_modules"):
            entries = module.__dict__.get(table)
            if entries is not None and name in entries:
                return tx.wrap(entries[name], self._child_source(table, name))
        if name in module.__dict__:
            return tx.wrap(module.__dict__[name], AttrSource(self.source, name) if self.source else None)
        try:
            static = inspect.getattr_static(type(module), name)
        except AttributeError as e:
            raise Unsupported(f"{type(module).__name__} has no attribute {name!r}") from e
        if isinstance(static, (types.FunctionType, staticmethod, classmethod)):
            return BoundMethodVariable(self, name)
        if isinstance(static, property):
            return tx.inline_call(static.fget, [self], {})
        return tx.wrap(getattr(module, name), AttrSource(self.source, name) if self.source else None)

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        """A plain attribute (a counter, a cached value); parameters, buffers and submodules are
        registered by Module.__setattr__ and are not replaced while tracing."""
        module = self.module
        if any(name in module.__dict__.get(t, ()) for t in ("_parameters", "_buffers", "_modules")):
            raise Unsupported(f"assignment to {type(module).__name__}.{name}, a parameter, buffer or submodule")
        if isinstance(value, NNModuleVariable) or type(module).__setattr__ is not torch.nn.Module.__setattr__:
            raise Unsupported(f"assignment to attribute {name!r} of {type(module).__name__}")
        tx.side_effects.store_attr(self, name, value)

    def call(self, tx, args, kwargs) -> VariableTracker:
        if _has_hooks(self.module):
            raise Unsupported(f"call of {type(self.module).__name__} with hooks")
        return self.call_method(tx, "forward", args, kwargs)

    def call_method(self, tx, name, args, kwargs) -> VariableTracker:
        if name in _TREE_METHODS and getattr(type(self.module), name) is getattr(torch.nn.Module, name):
            return self._tree(tx, name, args, kwargs)
        static = inspect.getattr_static(type(self.module), name, None)
        if isinstance(static, staticmethod):
            return tx.inline_call(static.__func__, list(args), kwargs)
        if isinstance(static, classmethod):
            return tx.inline_call(static.__func__, [tx.wrap(type(self.module), None, guard=False), *args], kwargs)
        if isinstance(static, types.FunctionType):
            return tx.inline_call(static, [self, *args], kwargs)
        raise Unsupported(f"method {type(self.module).__name__}.{name}")

    def unpack(self, tx) -> list[VariableTracker]:
        if isinstance(self.module, (torch.nn.Sequential, torch.nn.ModuleList)):
            self._guard_len(tx)
            return [self.var_getattr(tx, key) for key in self.module._modules]
        if isinstance(self.module, torch.nn.ModuleDict):
            self._guard_len(tx)
            return [tx.wrap_constant(key) for key in self.module._modules]
        raise Unsupported(f"iteration over {type(self.module).__name__}")

    def getitem(self, tx, key: VariableTracker) -> VariableTracker:
        index = key.as_python_constant()
        if isinstance(self.module, torch.nn.ModuleDict):
            return self.var_getattr(tx, index)
        if isinstance(self.module, (torch.nn.Sequential, torch.nn.ModuleList)) and isinstance(index, int):
            self._guard_len(tx)
            keys = list(self.module._modules)
            return self.var_getattr(tx, keys[index])
        raise Unsupported(f"{type(self.module).__name__}[{index!r}]")

    def _tree(self, tx, name: str, args, kwargs) -> VariableTracker:
        """modules(), named_children(), parameters()...: walked on the real module tree, each item
        read through its own source (guarded), each `_modules` guarded by length."""
        named = name.startswith("named_")
        kind = name.removeprefix("named_")
        positional = _TREE_PARAMETERS[name]  # torch.nn.Module's signatures, in order
        options = dict(zip(positional, (a.as_python_constant() for a in args)))
        options.update({k: v.as_python_constant() for k, v in kwargs.items()})
        if len(args) > len(positional) or set(options) - set(positional) or options.get("memo") is not None:
            raise Unsupported(f"{type(self.module).__name__}.{name}() with these arguments")
        recurse, dedupe = options.get("recurse", True), options.get("remove_duplicate", True)
        if kind == "children":
            self._guard_len(tx)
            found = [(key, self.var_getattr(tx, key)) for key, sub in self.module._modules.items() if sub is not None]
        elif kind == "modules":
            found = self._walk(tx, dedupe)
        else:  # parameters, buffers
            table = "_parameters" if kind == "parameters" else "_buffers"
            owners = self._walk(tx, dedupe) if recurse else [("", self)]
            found, seen = [], set()
            for prefix, owner in owners:
                for key, value in getattr(owner.module, table).items():
                    if value is not None and not (dedupe and id(value) in seen):
                        seen.add(id(value))
                        found.append((f"{prefix}.{key}" if prefix else key, owner.var_getattr(tx, key)))
        prefix = options.get("prefix", "")
        if prefix:
            found = [(f"{prefix}.{key}" if key else prefix, value) for key, value in found]
        items = [TupleVariable([ConstantVariable(k), v]) if named else v for k, v in found]
        return ListIteratorVariable(items)

    def _walk(self, tx, dedupe: bool = True) -> list[tuple[str, "NNModuleVariable"]]:
        """Every module of the tree, depth first, with its qualified name (as named_modules): each
        once, or with `dedupe` False once per path to it."""
        seen: set[int] = set()
        found: list[tuple[str, NNModuleVariable]] = []

        def visit(prefix: str, node: NNModuleVariable) -> None:
            if dedupe and id(node.module) in seen:
                return
            seen.add(id(node.module))
            found.append((prefix, node))
            node._guard_len(tx)
            for key, sub in node.module._modules.items():
                if sub is not None:
                    visit(f"{prefix}.{key}" if prefix else key, node.var_getattr(tx, key))

        visit("", self)
        return found

    def _guard_len(self, tx) -> None:
        if self.source is not None:
            tx.output.guards.add(AttrSource(self.source, "_modules"), GuardKind.LEN_MATCH, len(self.module._modules))

    def __repr__(self) -> str:
        return f"NNModuleVariable({type(self.module).__name__})"

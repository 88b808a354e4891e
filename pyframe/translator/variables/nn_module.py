"""nn.Modules: attribute reads with torch._dynamo's sources, and calls inlined into the graph.

`self.linear.weight` is the graph input `L['self']._modules['linear']._parameters['weight']` (the
placeholder `L_self_modules_linear_parameters_weight_`, as in torch._dynamo 2.13). A call
`self.relu(x)` on a module without hooks inlines `type(module).forward`, so torch.nn's own modules
record the torch / torch.nn.functional calls their forward makes (ReLU records `relu`).
"""
from __future__ import annotations

import types
from typing import Any

import torch

from ...exc import Unsupported
from ...guards import GuardKind
from ...source import AttrSource, ItemSource, Source
from .base import BoundMethodVariable, VariableTracker, class_attribute, guard_class_attribute, mro_lookup
from .attribute_protocol import descriptor_get, descriptor_set, property_setter, python_descriptor
from .constant import ConstantVariable
from .descriptions import describe_class
from .iterators import ListIteratorVariable
from .lists import BaseListVariable, TupleVariable
from .mappingproxy import InstanceDictViewVariable
from .exceptions import raise_symbolic
from .realize import realize_as_a_constant_test
from .static_lookup import is_data_descriptor
from .tensor import call_in_graph

_TREE_PARAMETERS = {
    "children": (), "named_children": (), "modules": (), "named_modules": ("memo", "prefix", "remove_duplicate"),
    "parameters": ("recurse",), "buffers": ("recurse",),
    "named_parameters": ("prefix", "recurse", "remove_duplicate"),
    "named_buffers": ("prefix", "recurse", "remove_duplicate"),
}
_TREE_METHODS = set(_TREE_PARAMETERS)


# A module's hook tables: a call is traced with its forward (pre-)hooks inlined; the tables are
# guarded by length (one ATTRS_LEN_MATCH for the four), so a hook registered or removed later
# recompiles.
_HOOK_TABLES = ("_forward_pre_hooks", "_forward_hooks", "_backward_hooks", "_backward_pre_hooks")
_GLOBAL_HOOKS = ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
                 "_global_backward_pre_hooks")


_MISSING = object()


class NNModuleVariable(VariableTracker):
    def __init__(self, module: torch.nn.Module, source: Source | None):
        super().__init__(source)
        self.module = module
        # A parameter-free torch module the frame made (objects.py, `nn.ReLU()`): the call that
        # makes another like it, where it outlives the trace; None for a module read from a source
        self.made_by: Any = None

    def reconstruct(self, cg) -> None:
        if self.source is not None or self.made_by is None:
            super().reconstruct(cg)
            return

        def build() -> None:
            cg.push_null()
            cg.load_const(self.made_by)
            cg.call(0)

        cg.rebuild_once(self, build)  # one object, however many places hold it

    def real_object(self) -> Any:
        return self.module

    def python_type(self) -> type:
        return type(self.module)

    def as_python_constant(self) -> torch.nn.Module:
        return self.module

    def _child_source(self, table: str, name: str, through_dict: bool = False) -> Source | None:
        """`L['self']._modules['lin']`, as torch._dynamo names a module's own lookup; through the
        instance dict (`L['self'].__dict__['_modules']['lin']`) when the trace runs
        nn.Module.__getattr__ as Python does, reading `self.__dict__[table]` (see module_getattr)."""
        if self.source is None:
            return None
        base = ItemSource(AttrSource(self.source, "__dict__"), table) if through_dict else AttrSource(self.source, table)
        return ItemSource(base, name)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        stored = tx.side_effects.load_attr(self, name)
        if stored is not None:
            return stored
        # Python's order: a data descriptor of the class, the instance's __dict__, the class's other
        # attributes (methods), and only then nn.Module.__getattr__'s parameters, buffers, modules.
        module = self.module
        static = class_attribute(type(module), name, _MISSING)
        if isinstance(static, property):
            if static.fget is None:
                raise Unsupported(f"write-only property {name!r} of {type(module).__name__}")
            guard_class_attribute(tx, self, name)  # `M.prop = property(...)` later
            return tx.inline_call(static.fget, [self], {})
        if name == "__dict__" and type(static) is types.GetSetDescriptorType and self.source is not None \
                and all(type(k) is str for k in module.__dict__):
            return self.instance_dict_view(tx)
        if static is not _MISSING and hasattr(type(static), "__set__"):
            descriptor = python_descriptor(type(module), name, static=static)
            if descriptor is None:
                raise Unsupported(f"descriptor {name!r} of {type(module).__name__}")
            guard_class_attribute(tx, self, name)  # a data descriptor: read before the instance dict
            return descriptor_get(tx, self, self._class_tracker(tx), name, descriptor)
        if name in module.__dict__:
            return tx.wrap(module.__dict__[name], AttrSource(self.source, name) if self.source else None)
        if isinstance(static, (types.FunctionType, staticmethod, classmethod)):
            guard_class_attribute(tx, self, name)  # `m.act = fn` or `M.act = ...` later
            return BoundMethodVariable(self, name)
        if static is not _MISSING:
            return tx.wrap(getattr(module, name), AttrSource(self.source, name) if self.source else None)
        fallback = type(module).__getattr__
        if fallback is not torch.nn.Module.__getattr__:
            # Neither the class nor the instance dict has it: an attribute set later would be
            # found before the class's __getattr__ runs
            guard_class_attribute(tx, self, name)
            # A class's own __getattr__ (a wrapper forwarding to the model it wraps), called as
            # Python calls it: when the normal lookup fails. Its `super().__getattr__(name)` is
            # module_getattr (InstructionTranslator.inline_call).
            if not isinstance(fallback, types.FunctionType):
                raise Unsupported(f"{type(module).__name__} defines its own __getattr__")
            source = AttrSource(AttrSource(self.source, "__class__"), "__getattr__") if self.source else None
            return tx.inline_call(fallback, [self, ConstantVariable(name)], {}, fn_source=source)
        return self.module_getattr(tx, name)

    def instance_dict_view(self, tx) -> VariableTracker:
        """`self.__dict__` (in a class's own `__getattr__`): a read-only view, its keys guarded."""
        source = AttrSource(self.source, "__dict__")
        tx.output.guards.add(source, GuardKind.DICT_KEYS_MATCH, tuple(self.module.__dict__))
        return InstanceDictViewVariable(self.module.__dict__, source, self)

    def module_getattr(self, tx, name: str, through_dict: bool = False) -> VariableTracker:
        """nn.Module.__getattr__: a parameter, buffer or submodule; else AttributeError, raised in
        the traced program (a wrapper's __getattr__ may catch it). `through_dict`: called by the
        program itself (`super().__getattr__(name)` in a class's own __getattr__), which
        torch._dynamo traces as Python, its sources reading `self.__dict__["_modules"]`."""
        module = self.module
        for table in ("_parameters", "_buffers", "_modules"):
            changed = self._changed_table(tx, table)
            if changed is not None:  # (torch.func.functional_call swaps `_parameters[name]`)
                if name in changed.items:
                    return changed.items[name]
                continue
            entries = module.__dict__.get(table)
            if entries is not None and name in entries:
                return tx.wrap(entries[name], self._child_source(table, name, through_dict))
        # Missing everywhere: neither the class, nor the instance dict (`m.extra = 5.0` later), nor
        # the tables (a parameter, buffer or submodule of that name registered later) may gain it.
        # (A name found in a table is not guarded against a class or instance attribute of the
        # same name: Module.__setattr__ keeps those apart, and the guard would run on every call.)
        guard_class_attribute(tx, self, name)
        if self.source is not None:
            for table in ("_parameters", "_buffers", "_modules"):
                if isinstance(module.__dict__.get(table), dict):
                    tx.output.guards.add(self._child_source(table, name, through_dict),
                                         GuardKind.DICT_CONTAINS_MATCH, False)
        raise_symbolic(AttributeError, f"'{type(module).__name__}' object has no attribute '{name}'")

    def _changed_table(self, tx, table: str) -> VariableTracker | None:
        """The module's `_parameters`, `_buffers` or `_modules` dict as the trace changed it
        (`module._parameters[name] = t`: what a lookup finds from then on), or None while the trace
        has not changed it."""
        if self.source is None:
            return None
        tracker = tx.side_effects.known(AttrSource(self.source, table))
        return tracker if tracker is not None and id(tracker) in tx.side_effects.mutated else None

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        """A plain attribute (a counter, a cached value); parameters, buffers and submodules are
        registered by Module.__setattr__ and are not replaced while tracing."""
        module = self.module
        registered = [t for t in ("_parameters", "_buffers", "_modules") if name in module.__dict__.get(t, ())]
        if registered and registered[0] != "_modules" and getattr(value, "node", None) is not None and \
                getattr(self.module_getattr(tx, name), "example", None) is value.example:
            # `self.steps += 1` on a buffer: the in-place op changed the tensor, and the store puts
            # the same tensor back (Module.__setattr__ of the same object changes nothing). Replayed
            # all the same, as torch._dynamo replays it: later reads see the in-place op's result
            # (`linear * iadd`), and the graph returns it for the store.
            tx.side_effects.store_attr(self, name, value)
            return
        if registered:
            raise Unsupported(f"assignment to {type(module).__name__}.{name}, a parameter, buffer or submodule")
        if isinstance(value, NNModuleVariable) or type(module).__setattr__ is not torch.nn.Module.__setattr__:
            raise Unsupported(f"assignment to attribute {name!r} of {type(module).__name__}")
        # Module.__setattr__ stores any other value with object.__setattr__: a data descriptor of the
        # class (a property's setter, a descriptor's __set__, a __slots__ member) takes it, not the
        # instance dict, and later reads go through the descriptor too.
        cls = type(module)
        setter = property_setter(cls, name)
        if setter is not None:
            guard_class_attribute(tx, self, name, check_instance=False)
            tx.inline_call(setter, [self, value], {})
            return
        descriptor = python_descriptor(cls, name, setter=True)
        if descriptor is not None:
            guard_class_attribute(tx, self, name)
            descriptor_set(tx, self, self._class_tracker(tx), name, descriptor, value)
            return
        if is_data_descriptor(class_attribute(cls, name, None)):
            raise Unsupported(f"assignment to attribute {name!r} of {cls.__name__} through a descriptor")
        tx.side_effects.store_attr(self, name, value)

    def _class_tracker(self, tx) -> VariableTracker:
        return tx.wrap(type(self.module), AttrSource(self.source, "__class__") if self.source is not None else None)

    def call(self, tx, args, kwargs) -> VariableTracker:
        """module(*args): its forward, with its forward pre-hooks and hooks around it, as
        nn.Module.__call__ runs them."""
        module, name = self.module, type(self.module).__name__
        # `module(...)` is type(module).__call__ (a special method: the instance is not asked)
        guard_class_attribute(tx, self, "__call__", check_instance=False)
        own_call = mro_lookup(type(module), "__call__")
        if own_call is not torch.nn.Module.__call__:
            if not isinstance(own_call, types.FunctionType):
                raise Unsupported(f"call of {name}, whose __call__ is a {type(own_call).__name__}")
            return tx.inline_call(own_call, [self, *args], kwargs,
                                  fn_source=AttrSource(AttrSource(self.source, "__class__"), "__call__") if self.source else None)
        if self.source is not None:
            tx.output.guards.add(self.source, GuardKind.ATTRS_LEN_MATCH,
                                 tuple((table, len(getattr(module, table))) for table in _HOOK_TABLES))
        hooks_module = torch.nn.modules.module
        if module._backward_hooks or module._backward_pre_hooks or any(
                getattr(hooks_module, table) for table in _GLOBAL_HOOKS):
            raise Unsupported(f"call of {name} with backward or global hooks")
        # (and none registered later: nn.Module's global tables are global state, checked empty in
        # C++ with grad mode and the rest; a hook registered after this compile recompiles)
        tx.output.guards.add_module_hooks(False)
        args = list(args)
        if module._forward_pre_hooks or module._forward_hooks:
            # torch._dynamo traces nn.Module._call_impl when there are hooks, and before inlining
            # its nested `inner` tries to make it a real function: its first cell, the positional
            # arguments, walked up to the first that is not a constant (see realize.py)
            realize_as_a_constant_test(tx, TupleVariable(list(args)))
        for key, hook in module._forward_pre_hooks.items():
            if key in module._forward_pre_hooks_with_kwargs:
                raise Unsupported(f"call of {name} with a forward pre-hook taking kwargs")
            result = self._hook(tx, "_forward_pre_hooks", key, hook).call(tx, [self, TupleVariable(list(args))], {})
            result.set_name_hint("args_result")  # nn.Module._call_impl's local (torch._dynamo traces it)
            if not (result.is_python_constant() and result.as_python_constant() is None):
                args = result.unpack(tx) if isinstance(result, TupleVariable) else [result]
        if "forward" in module.__dict__:  # `m.forward = fn`: what nn.Module.__call__ calls
            output = self.var_getattr(tx, "forward").call(tx, args, kwargs)
        else:
            output = self.call_method(tx, "forward", args, kwargs)
        for key, hook in module._forward_hooks.items():
            if key in module._forward_hooks_with_kwargs or key in module._forward_hooks_always_called:
                raise Unsupported(f"call of {name} with a forward hook taking kwargs or always called")
            result = self._hook(tx, "_forward_hooks", key, hook).call(tx, [self, TupleVariable(list(args)), output], {})
            result.set_name_hint("hook_result")  # (forward's output is `result`, a cell: never a name)
            if not (result.is_python_constant() and result.as_python_constant() is None):
                output = result
        return output

    def _hook(self, tx, table: str, key: Any, hook: Any) -> VariableTracker:
        return tx.wrap(hook, ItemSource(AttrSource(self.source, table), key) if self.source is not None else None)

    def call_method(self, tx, name, args, kwargs) -> VariableTracker:
        guard_class_attribute(tx, self, name)  # the class's method, as long as it stays the class's
        if name in _TREE_METHODS and getattr(type(self.module), name) is getattr(torch.nn.Module, name):
            return self._tree(tx, name, args, kwargs)
        static = class_attribute(type(self.module), name, None)
        # the function read through the module's class (its closure cells are read through it)
        fn_source = AttrSource(AttrSource(self.source, "__class__"), name) if self.source is not None else None
        if isinstance(static, staticmethod):
            return tx.inline_call(static.__func__, list(args), kwargs, fn_source=fn_source)
        if isinstance(static, classmethod):
            fn_source = AttrSource(fn_source, "__func__") if fn_source is not None else None
            cls = tx.wrap(type(self.module), AttrSource(self.source, "__class__") if self.source else None, guard=False)
            return tx.inline_call(static.__func__, [cls, *args], kwargs, fn_source=fn_source)
        if isinstance(static, types.FunctionType):
            return tx.inline_call(static, [self, *args], kwargs, fn_source=fn_source)
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
        if isinstance(self.module, (torch.nn.Sequential, torch.nn.ModuleList)) and isinstance(index, (int, slice)):
            self._guard_len(tx)
            keys = list(self.module._modules)
            if isinstance(index, slice):  # `self.layers[::-1]`: the modules it selects, in order
                record_module_init(tx)  # (the slice is a new Sequential or ModuleList)
                return ModuleSliceVariable(self, index, [self.var_getattr(tx, key) for key in keys[index]])
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
            self._guard_none_children(tx)
        elif kind == "modules":
            found = self._walk(tx, dedupe)
        else:  # parameters, buffers
            table = "_parameters" if kind == "parameters" else "_buffers"
            owners = self._walk(tx, dedupe) if recurse else [("", self)]
            entries, seen = [], set()
            for prefix, owner in owners:
                owner._guard_keys(tx, table)
                for key, value in getattr(owner.module, table).items():
                    if value is None and owner.source is not None:  # (`bias=None`: set later, it counts)
                        tx.output.guards.add(owner._child_source(table, key), GuardKind.NONE_MATCH)
                    if value is not None and not (dedupe and id(value) in seen):
                        seen.add(id(value))
                        entries.append((f"{prefix}.{key}" if prefix else key, owner, key))
            # Each tensor read as the iterator gives it: torch._dynamo traces these generators, so
            # a loop that stops at the first parameter (a `dtype` property) reads no other
            found = ((name, owner.var_getattr(tx, key)) for name, owner, key in entries)
        prefix = options.get("prefix", "")
        if prefix:
            found = ((f"{prefix}.{key}" if key else prefix, value) for key, value in found)
        items = (TupleVariable([ConstantVariable(k), v]) if named else v for k, v in found)
        return ListIteratorVariable([], pending=items)

    def _walk(self, tx, dedupe: bool = True) -> list[tuple[str, "NNModuleVariable"]]:
        """Every module of the tree, depth first, with its qualified name (as named_modules): each
        once, or with `dedupe` False once per path to it."""
        seen: set[int] = set()
        found: list[tuple[str, NNModuleVariable]] = []

        def visit(prefix: str, node: NNModuleVariable) -> None:
            if dedupe and node.source is not None:
                # (which paths lead to one module decides what the walk gives: modules are
                # guarded by type, so the aliasing of those paths is guarded too)
                tx.output.guards.add_aliasing(node.source, node.module)
            if dedupe and id(node.module) in seen:
                return
            seen.add(id(node.module))
            found.append((prefix, node))
            node._guard_len(tx)
            node._guard_none_children(tx)
            for key, sub in node.module._modules.items():
                if sub is not None:
                    visit(f"{prefix}.{key}" if prefix else key, node.var_getattr(tx, key))

        visit("", self)
        return found

    def _guard_len(self, tx) -> None:
        """The submodules, in order: what iterating them, indexing a Sequential and walking the
        tree rely on (a submodule popped and added back moves to the end)."""
        self._guard_keys(tx, "_modules")

    def _guard_keys(self, tx, table: str) -> None:
        """The names in `_parameters`, `_buffers` or `_modules`, in order (iteration order)."""
        entries = self.module.__dict__.get(table)
        if self.source is not None and type(entries) is dict and all(type(k) is str for k in entries):
            tx.output.guards.add(AttrSource(self.source, table), GuardKind.DICT_KEYS_MATCH, tuple(entries))
        elif self.source is not None:
            raise Unsupported(f"{type(self.module).__name__}.{table} is a {type(entries).__name__} with keys not guardable")

    def _guard_none_children(self, tx) -> None:
        """A submodule slot that is None (skipped by the walk) stays None."""
        if self.source is not None:
            for key, sub in self.module._modules.items():
                if sub is None:
                    tx.output.guards.add(self._child_source("_modules", key), GuardKind.NONE_MATCH)

    def describe(self) -> str:
        return "module " + describe_class(type(self.module))[len("class "):]

    def __repr__(self) -> str:
        return f"NNModuleVariable({type(self.module).__name__})"


def record_module_init(tx) -> None:
    """A new nn.Module made while tracing (a torch module class called, a Sequential sliced):
    nn.Module.__init__ logs the module's creation with `torch._C._log_api_usage_once`, a call
    torch._dynamo traces into its graph (it inlines __init__), so the graph records it too."""
    call_in_graph(tx, "call_function", torch._C._log_api_usage_once, [ConstantVariable("python.nn_module")], {})


class MadeCrossEntropyLossVariable(NNModuleVariable):
    """`nn.CrossEntropyLoss(...)` made in the frame (Hugging Face's `loss_fct = CrossEntropyLoss()`).
    torch._dynamo never runs its forward: a call `loss_fct(input, target)` is recorded as
    `F.cross_entropy(input, target, weight, size_average, ignore_index, reduce, reduction,
    label_smoothing)`, the constructor's arguments given positionally with their defaults
    (UserDefinedClassVariable._call_cross_entropy_loss). pyframe records the same call; the module
    it made stands for the object anywhere else (it owns no tensors)."""

    def __init__(self, module: torch.nn.CrossEntropyLoss, constructor_args: list[VariableTracker]):
        super().__init__(module, None)
        self.constructor_args = constructor_args

    def call(self, tx, args, kwargs) -> VariableTracker:
        if len(args) != 2 or kwargs:
            return super().call(tx, args, kwargs)
        return call_in_graph(tx, "call_function", torch.nn.functional.cross_entropy,
                             [*args, *self.constructor_args], {})


class ModuleSliceVariable(BaseListVariable):
    """`self.layers[1:3]` of an nn.Sequential or nn.ModuleList: in Python a new container of the same
    type. Traced as the modules it selects (iteration, len, indexing; calling a Sequential's slice
    runs them in turn, as Sequential.forward does); in the transformed code it is the real slice,
    taken again from the container."""

    def __init__(self, container: NNModuleVariable, index: slice, items: list[VariableTracker]):
        super().__init__(items)
        self.container, self.index = container, index

    def python_type(self) -> type:
        return type(self.container.module)

    def as_python_constant(self) -> Any:
        raise Unsupported(f"{self.describe()} is not a Python constant")

    def getitem(self, tx, key: VariableTracker) -> VariableTracker:
        index = key.as_python_constant()
        if not isinstance(index, int):
            raise Unsupported(f"a slice of a slice of {type(self.container.module).__name__}")
        return self.items[index]

    def call(self, tx, args, kwargs) -> VariableTracker:
        if not issubclass(self.python_type(), torch.nn.Sequential) or len(args) != 1 or kwargs:
            raise Unsupported(f"call of a slice of {self.python_type().__name__}")
        value = args[0]
        for module in self.items:  # Sequential.forward: `for module in self: input = module(input)`
            value = module.call(tx, [value], {})
            value.set_name_hint("input")
        return value

    def call_method(self, tx, name, args, kwargs) -> VariableTracker:
        if name == "forward":
            return self.call(tx, args, kwargs)
        return super().call_method(tx, name, args, kwargs)

    def rebuilt_from(self) -> list[VariableTracker]:
        return [self.container]

    def reconstruct(self, cg) -> None:
        self.container.reconstruct(cg)
        cg.load_const(self.index)
        cg.emit("BINARY_SUBSCR")

    def __repr__(self) -> str:
        return f"ModuleSliceVariable({self.container!r}[{self.index!r}])"

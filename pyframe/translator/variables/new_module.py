"""Instances of a user's nn.Module subclass made while tracing: `m = Block(2.0)` in the frame,
its class defined there or anywhere, then `m(x)`.

torch._dynamo inlines the class's __init__ on a new module object and, at the call, its forward
(an UnspecializedNNModuleVariable), so one graph holds what comes before, the construction and the
forward. pyframe models the object as it models a plain class's instance (NewObjectVariable): its
attributes are trackers stored in the trace. What nn.Module itself keeps is not modelled:

- `super().__init__()` reaching nn.Module.__init__ is not inlined (ModuleInitVariable): it logs
  the module's creation (`torch._C._log_api_usage_once`, which torch._dynamo's graph records too)
  and sets `training`;
- a call runs the class's forward (a module made in the frame has no hooks of its own; global
  hooks are a graph break), or the class's own __call__;
- reading anything else nn.Module keeps (`_parameters`, `_modules`, hooks: what register_buffer,
  parameters() or children() read) and storing a Parameter are graph breaks, before the object is
  made, so the constructor runs as Python.

Where the object outlives the trace (returned, kept in a local at a break) the transformed code
builds it as `object.__new__(cls)`, `nn.Module.__init__(obj)`, then each attribute stored through
Module.__setattr__ (a submodule lands in `_modules`, as the constructor put it).
"""
from __future__ import annotations

import inspect
import types

import torch

from ...exc import Unsupported
from ...source import AttrSource
from .base import BoundMethodVariable, VariableTracker, class_attribute, mro_lookup
from .constant import ConstantVariable
from .nn_module import _GLOBAL_HOOKS, NNModuleVariable, record_module_init
from .iterators import ListIteratorVariable, iterate
from .lists import TupleVariable
from .objects import NewObjectVariable, register_constructor, register_module_container

_MISSING = object()
_MODELLED = ("train", "eval", "register_buffer")
_TREE = ("children", "named_children", "parameters", "named_parameters", "buffers", "named_buffers")


def is_constructible(cls: type) -> bool:
    """A user's nn.Module subclass whose instances object.__new__ makes, attributes read and
    stored by nn.Module's own protocol, with an __init__ written in Python. torch's own module
    classes (parameter-free ones are made for real, objects.py) are left out."""
    return (issubclass(cls, torch.nn.Module) and not cls.__module__.startswith("torch.")
            and type(cls) is type and mro_lookup(cls, "__new__") is object.__new__
            and cls.__getattribute__ is object.__getattribute__
            and cls.__setattr__ is torch.nn.Module.__setattr__
            and cls.__getattr__ is torch.nn.Module.__getattr__
            and cls.__delattr__ is torch.nn.Module.__delattr__
            and isinstance(class_attribute(cls, "__init__", None), types.FunctionType))


class NewModuleVariable(NewObjectVariable):
    """An instance of a user's nn.Module subclass made while tracing (see the module docstring)."""

    def __init__(self, cls: type, cls_source):
        super().__init__(cls, cls_source)
        self.initialized = False  # nn.Module.__init__ has run (a submodule may be stored)
        self.buffers: dict[str, bool] = {}  # register_buffer's names, each with `persistent`

    @classmethod
    def make(cls, tx, module_cls: type, cls_source, args, kwargs) -> "NewModuleVariable":
        obj = cls(module_cls, cls_source)
        obj.init_args = list(args)
        if next(k for k in module_cls.__mro__ if "__init__" in vars(k)) is torch.nn.Module:
            obj.module_init(tx, args, kwargs)  # a class without an __init__ of its own
            return obj
        fn_source = AttrSource(cls_source, "__init__") if cls_source is not None else None
        tx.inline_call(class_attribute(module_cls, "__init__", None), [obj, *args], kwargs, fn_source=fn_source)
        return obj

    def module_init(self, tx, args, kwargs) -> VariableTracker:
        """nn.Module.__init__(self): its creation logged, `training` set; no state of its own."""
        if args or kwargs:
            raise Unsupported(f"nn.Module.__init__() called with arguments in {self.cls.__qualname__}")
        record_module_init(tx)
        tx.side_effects.note()
        self.attrs["training"] = ConstantVariable(True)
        self.initialized = True
        return ConstantVariable(None)

    def generic_getattr(self, tx, name: str) -> VariableTracker:
        if name not in self.attrs and class_attribute(self.cls, name, _MISSING) is _MISSING:
            # nn.Module's own state (`_modules`, hooks...), or a name nn.Module.__getattr__ looks for
            raise Unsupported(f"attribute {name!r} of a module {self.cls.__qualname__} made while tracing")
        return super().generic_getattr(tx, name)

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        """Module.__setattr__: a plain value or a tensor goes in the instance dict, a submodule in
        `_modules` (modelled alike); a Parameter would be registered: not modelled."""
        try:
            kind = value.python_type()
        except Exception:
            kind = None
        if kind is not None and issubclass(kind, torch.nn.Parameter):
            raise Unsupported(f"a Parameter stored on a module {self.cls.__qualname__} made while tracing")
        if kind is not None and issubclass(kind, torch.nn.Module) and not self.initialized:
            raise Unsupported(f"a submodule stored before nn.Module.__init__() ran in {self.cls.__qualname__}")
        super().generic_setattr(tx, name, value)

    def call_method(self, tx, name, args, kwargs) -> VariableTracker:
        """nn.Module's own train()/eval() and register_buffer() are modelled; any other method is
        the class's, inlined (nn.Module's own read its tables: a graph break)."""
        if name not in self.attrs and name in _MODELLED and \
                class_attribute(self.cls, name, None) is vars(torch.nn.Module)[name]:
            bound = inspect.signature(vars(torch.nn.Module)[name]).bind(self, *args, **kwargs)
            bound.apply_defaults()
            options = dict(bound.arguments)
            del options["self"]
            if name == "register_buffer":
                return self._register_buffer(tx, **options)
            mode = options.get("mode", False)  # (eval() is train(False))
            if isinstance(mode, VariableTracker):
                mode = mode.as_python_constant() if mode.is_python_constant() else None
            if not isinstance(mode, bool):  # (nn.Module.train raises ValueError for any other value)
                raise Unsupported(f"{self.cls.__qualname__}.{name}() with a mode not a bool known while tracing")
            return self.set_training(tx, mode)
        if name in _TREE and not args and not kwargs and name not in self.attrs \
                and class_attribute(self.cls, name, None) is vars(torch.nn.Module)[name]:
            return ListIteratorVariable(self._tree(tx, name))
        if name not in self.attrs and class_attribute(self.cls, name, None) is vars(torch.nn.Module).get(name, _MISSING):
            # state_dict(), apply(), to()...: they read nn.Module's tables, not modelled;
            # the break is here, at the call, not inside nn.Module's code (a generator of it)
            raise Unsupported(f"nn.Module.{name}() of a module {self.cls.__qualname__} made while tracing")
        return super().call_method(tx, name, args, kwargs)

    def _tree(self, tx, name: str) -> list[VariableTracker]:
        """children(), parameters(), buffers() and their named_ forms, with their defaults: the
        submodules in the order they were stored; no parameter (a module made here holds none of
        its own, and the torch modules made here hold none); the buffers of this module, then of
        each submodule made here in turn (a torch module made here holds none)."""
        named = name.startswith("named_")
        children = [(key, value) for key, value in self.attrs.items() if _is_module(value)]
        if name.removeprefix("named_") == "children":
            found = children
        else:
            found = self._buffers_in_tree(tx, "", name)
        return [TupleVariable([ConstantVariable(key), value]) if named else value for key, value in found]

    def _buffers_in_tree(self, tx, prefix: str, name: str) -> list[tuple[str, VariableTracker]]:
        found = [] if name.removeprefix("named_") == "parameters" else \
            [(prefix + key, self.attrs[key]) for key in self.buffers if not _is_none(self.attrs[key])]
        for key, value in self.attrs.items():
            if isinstance(value, NewModuleVariable):
                found += value._buffers_in_tree(tx, f"{prefix}{key}.", name)
            elif _is_module(value) and not (isinstance(value, NNModuleVariable) and value.made_by is not None):
                raise Unsupported(f"nn.Module.{name}() of a module made while tracing holding {value!r}")
        return found

    def set_training(self, tx, mode: bool) -> VariableTracker:
        """`m.train(mode)` / `m.eval()`: `training` of this module and of each submodule."""
        self.attrs["training"] = ConstantVariable(mode)
        tx.side_effects.note()
        for value in list(self.attrs.values()):
            if isinstance(value, NewModuleVariable):
                value.set_training(tx, mode)
            elif isinstance(value, NNModuleVariable):
                value.call_method(tx, "train", [ConstantVariable(mode)], {})
        return self

    def _register_buffer(self, tx, name: VariableTracker, tensor: VariableTracker,
                         persistent: VariableTracker | bool) -> VariableTracker:
        if not self.initialized or not name.is_python_constant() or name.as_python_constant() in self.attrs:
            raise Unsupported(f"register_buffer on a module {self.cls.__qualname__} made while tracing")
        key = name.as_python_constant()
        if isinstance(persistent, VariableTracker):
            if not persistent.is_python_constant():
                raise Unsupported("register_buffer with `persistent` not known while tracing")
            persistent = persistent.as_python_constant()
        if not isinstance(key, str) or not key or "." in key or \
                not (tensor.is_python_constant() and tensor.as_python_constant() is None
                     or issubclass(tensor.python_type(), torch.Tensor)):
            raise Unsupported(f"register_buffer({key!r}, ...) on a module {self.cls.__qualname__} made while tracing")
        super().generic_setattr(tx, key, tensor)
        self.buffers[key] = bool(persistent)
        return ConstantVariable(None)

    def delete_attr(self, tx, name: str) -> None:
        raise Unsupported(f"deletion of attribute {name!r} of a module {self.cls.__qualname__} made while tracing")

    def call(self, tx, args, kwargs) -> VariableTracker:
        """`m(...)`: the class's own __call__, or forward (as nn.Module.__call__ runs it without hooks)."""
        own_call = mro_lookup(self.cls, "__call__")
        if own_call is not torch.nn.Module.__call__:
            if not isinstance(own_call, types.FunctionType):
                raise Unsupported(f"call of {self.cls.__qualname__}, whose __call__ is a {type(own_call).__name__}")
            return tx.inline_call(own_call, [self, *args], kwargs)
        if any(getattr(torch.nn.modules.module, table) for table in _GLOBAL_HOOKS):
            raise Unsupported(f"call of {self.cls.__qualname__} with global module hooks")
        if "forward" in self.attrs:  # `m.forward = fn`: what nn.Module.__call__ calls
            return self.attrs["forward"].call(tx, args, kwargs)
        return self.call_method(tx, "forward", args, kwargs)

    def reconstruct(self, cg) -> None:
        if self._building:
            raise Unsupported(f"a {self.cls.__qualname__} made while tracing refers to itself")

        def build() -> None:
            self._building = True
            cg.push_null()
            cg.load_const(object.__new__)
            cg.load_const(self.cls) if self.cls_source is None else cg.load_source(self.cls_source)
            cg.call(1)
            cg.push_null()
            cg.load_const(torch.nn.Module.__init__)
            cg.emit("COPY", 3)  # the new object, below the NULL and the function
            cg.call(1)
            cg.emit("POP_TOP")
            for name, value in self.attrs.items():  # through Module.__setattr__, as __init__ stored them
                if name in self.buffers:  # nn.Module.register_buffer(obj, name, value, persistent)
                    cg.push_null()
                    cg.load_const(torch.nn.Module.register_buffer)
                    cg.emit("COPY", 3)
                    cg.load_const(name)
                    value.reconstruct(cg)
                    cg.load_const(self.buffers[name])
                    cg.call(4)
                    cg.emit("POP_TOP")
                    continue
                value.reconstruct(cg)
                cg.emit("COPY", 2)
                cg.emit("STORE_ATTR", name)
            self._building = False

        cg.rebuild_once(self, build)

    def __repr__(self) -> str:
        return f"NewModuleVariable({self.cls.__qualname__})"


class ModuleInitVariable(VariableTracker):
    """nn.Module.__init__ bound to a module made while tracing, reached through super()."""

    def __init__(self, obj: NewModuleVariable):
        super().__init__()
        self.obj = obj

    def call(self, tx, args, kwargs) -> VariableTracker:
        return self.obj.module_init(tx, args, kwargs)


class NewModuleContainerVariable(VariableTracker):
    """`nn.Sequential(*modules)` or `nn.ModuleList(modules)` made in the frame holding modules made
    there (NewModuleVariable): its items, called in turn (Sequential), iterated, indexed, counted
    or appended to (ModuleList); rebuilt as the class called on its items."""

    def __init__(self, cls: type, items: list[VariableTracker]):
        super().__init__()
        self.cls, self.items = cls, items

    @staticmethod
    def make(tx, cls: type, args, kwargs) -> "NewModuleContainerVariable":
        if kwargs:
            raise Unsupported(f"{cls.__name__}() with keyword arguments")
        if cls is torch.nn.ModuleList:
            if len(args) > 1:
                raise Unsupported("nn.ModuleList() with more than one argument")
            items = list(iterate(tx, args[0])) if args else []
        else:
            items = list(args)
        if not all(_is_module(item) for item in items):
            raise Unsupported(f"{cls.__name__}() of values that are not modules")
        record_module_init(tx)  # (nn.Module.__init__ of the container, as torch._dynamo records it)
        return NewModuleContainerVariable(cls, items)

    def python_type(self) -> type:
        return self.cls

    def unpack(self, tx) -> list[VariableTracker]:
        return list(self.items)

    def getitem(self, tx, key: VariableTracker) -> VariableTracker:
        index = key.as_python_constant() if key.is_python_constant() else None
        if type(index) is not int or not -len(self.items) <= index < len(self.items):
            raise Unsupported(f"{self.cls.__name__}[{index!r}] of a container made while tracing")
        return self.items[index]

    def call(self, tx, args, kwargs) -> VariableTracker:
        if self.cls is not torch.nn.Sequential or len(args) != 1 or kwargs:
            raise Unsupported(f"call of a {self.cls.__name__} made while tracing")
        value = args[0]
        for item in self.items:  # Sequential.forward: each module on what the last one gave
            value = item.call(tx, [value], {})
            value.set_name_hint("input")  # (its local, `input = module(input)`: the node's name)
        return value

    def call_method(self, tx, name, args, kwargs) -> VariableTracker:
        if name == "__len__" and not args and not kwargs:
            return ConstantVariable(len(self.items))
        if name == "__getitem__" and len(args) == 1 and not kwargs:
            return self.getitem(tx, args[0])
        if name == "__iter__" and not args and not kwargs:
            return ListIteratorVariable(list(self.items))
        if name == "append" and self.cls is torch.nn.ModuleList and len(args) == 1 and not kwargs \
                and _is_module(args[0]):
            tx.side_effects.note()
            self.items.append(args[0])
            return self
        if name == "forward" and self.cls is torch.nn.Sequential:
            return self.call(tx, args, kwargs)
        raise Unsupported(f"{self.cls.__name__}.{name}() of a container made while tracing")

    def var_getattr(self, tx, name: str) -> VariableTracker:
        from_class = class_attribute(self.cls, name, None)
        if isinstance(from_class, types.FunctionType) and name in ("append", "forward", "__len__", "__getitem__",
                                                                   "__iter__"):
            return BoundMethodVariable(self, name)
        raise Unsupported(f"attribute {name!r} of a {self.cls.__name__} made while tracing")

    def rebuilt_from(self) -> list[VariableTracker]:
        return list(self.items)

    def reconstruct(self, cg) -> None:
        def build() -> None:
            cg.push_null()
            cg.load_const(self.cls)
            for item in self.items:
                item.reconstruct(cg)
            if self.cls is torch.nn.ModuleList:
                cg.emit("BUILD_LIST", len(self.items))
                cg.call(1)
            else:
                cg.call(len(self.items))

        cg.rebuild_once(self, build)

    def __repr__(self) -> str:
        return f"NewModuleContainerVariable({self.cls.__name__}, {len(self.items)})"


def _is_none(vt: VariableTracker) -> bool:
    return vt.is_python_constant() and vt.as_python_constant() is None


def _is_module(vt: VariableTracker) -> bool:
    try:
        return issubclass(vt.python_type(), torch.nn.Module)
    except Unsupported:
        return False


register_constructor(is_constructible, NewModuleVariable.make)
register_module_container(torch.nn.Sequential, NewModuleContainerVariable.make)
register_module_container(torch.nn.ModuleList, NewModuleContainerVariable.make)

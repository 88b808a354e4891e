"""`super()`: attribute reads that start after a class in an object's MRO.

What it finds is inlined as Python would run it: a method bound to the object, a classmethod, a
property's getter; a builtin's own method (object's, dict's, list's, int's...) is bound to the
object as builtin_descriptors.py models it.
"""
from __future__ import annotations

import inspect
import types

import torch

from ...exc import Unsupported
from .attribute_protocol import TypeSetattrVariable
from .autograd_function import AutogradApplyVariable, AutogradFunctionVariable, is_function_apply
from .base import VariableTracker
from .builtin_descriptors import BuiltinDescriptorVariable, is_builtin_descriptor
from .container_subclass import BaseNewVariable, container_base
from .new_module import ModuleInitVariable, NewModuleVariable
from .methods import InlinedMethodVariable, TypeCallVariable


class SuperVariable(VariableTracker):
    """`super()` inside a method: attribute reads start after `cls` in type(obj)'s MRO."""

    def __init__(self, cls: type, obj: VariableTracker):
        super().__init__()
        self.cls, self.obj = cls, obj

    def var_getattr(self, tx, name: str) -> VariableTracker:
        # super() in a classmethod has the class as its second argument: its own MRO is searched
        # (in a metaclass's method, the class is the instance: its metaclass's MRO is)
        of_class = issubclass(self.obj.python_type(), type) and issubclass(self.obj.as_python_constant(), self.cls)
        owner = self.obj.as_python_constant() if of_class else self.obj.python_type()
        mro = owner.__mro__
        if self.cls not in mro:
            raise Unsupported(f"super({self.cls.__qualname__}, ...) of an unrelated object")
        for klass in mro[mro.index(self.cls) + 1:]:
            if name in klass.__dict__:
                attr = klass.__dict__[name]
                if isinstance(attr, classmethod):
                    cls_vt = self.obj if of_class else tx.wrap(owner, None, guard=False)
                    if is_function_apply(attr) and isinstance(cls_vt, AutogradFunctionVariable):
                        # `super().apply(*args)` in an autograd.Function's own `apply`
                        return AutogradApplyVariable(cls_vt)
                    return InlinedMethodVariable(attr.__func__, cls_vt)
                if isinstance(attr, staticmethod):
                    return tx.wrap(attr.__func__, None, guard=False)
                if klass is torch.nn.Module and name == "__init__" and isinstance(self.obj, NewModuleVariable) \
                        and not of_class:
                    # `super().__init__()` in a module made in the frame (by the class, not the
                    # function: torch._dynamo replaces nn.Module.__init__ with a wrapper of its own)
                    return ModuleInitVariable(self.obj)
                if isinstance(attr, types.FunctionType):
                    if of_class:  # a plain function read through the class: not bound
                        return tx.wrap(attr, None, guard=False)
                    return InlinedMethodVariable(attr, self.obj)
                if isinstance(attr, property) and attr.fget is not None and not of_class:
                    return tx.inline_call(attr.fget, [self.obj], {})
                if is_builtin_descriptor(attr) and not of_class:
                    # `super().__setitem__(k, v)` in a dict subclass, `super().append(x)` in a list
                    # subclass, `super().__setattr__(k, v)`, `super().__init__()` at the top: the
                    # builtin's own method, bound to the object
                    return BuiltinDescriptorVariable(attr, self.obj)
                if name == "__new__" and of_class and klass is container_base(owner):
                    return BaseNewVariable(klass)  # `super().__new__(cls, ...)` in a tuple subclass's
                if attr is type.__dict__["__setattr__"] and not of_class \
                        and isinstance(self.obj.as_python_constant(), type):
                    return TypeSetattrVariable(self.obj)  # `super().__setattr__(...)` in a metaclass's
                if attr is type.__dict__["__call__"] and not of_class and hasattr(self.obj, "construct"):
                    return TypeCallVariable(self.obj)  # `super().__call__(...)` in a metaclass's

                raise Unsupported(f"super().{name} is a {type(attr).__name__}")
        raise Unsupported(f"super() has no attribute {name!r}")

    def rebuilt_from(self) -> list[VariableTracker]:
        return [self.obj]

    def reconstruct(self, cg) -> None:
        """`super(cls, obj)` (at a graph break with it on the stack)."""
        cg.push_null()
        cg.load_const(super)
        cg.load_const(self.cls)
        self.obj.reconstruct(cg)
        cg.call(2)


def zero_arg_super(tx) -> SuperVariable:
    """super() with no arguments: the `__class__` cell and the first argument of the method."""
    code = tx.code
    if "__class__" not in code.co_freevars or code.co_argcount == 0:
        raise Unsupported("super() outside a method")
    cls = tx.super_class()
    if not inspect.isclass(cls):
        raise Unsupported("super(): __class__ is not a class")
    return SuperVariable(cls, tx.read_local(code.co_varnames[0]))

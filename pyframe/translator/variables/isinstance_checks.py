"""isinstance(), as PyObject_IsInstance decides it, on what the trace knows: an object's type
(guarded where it was read), typing's bare aliases by the classes they stand for, legacy tensor
types by dtype and device, and a metaclass's own `__instancecheck__` (inlined where it is Python,
asked of the real object where it is C)."""
from __future__ import annotations

import types
import typing
from typing import Any

from ...exc import Unsupported
from ...guards import GuardKind
from ...trace_rules import file_skip_reason
from .base import UNKNOWN_OBJECT, VariableTracker, mro_lookup
from .constant import ConstantVariable
from .lists import TupleVariable
from .static_lookup import checks_by_type, flatten_classinfo, is_legacy_tensor_type
from .tensor import TensorVariable


def _without_typing_aliases(classinfo: Any) -> Any:
    """classinfo with typing's bare aliases (`typing.Sequence`, `typing.List`, `typing.Callable`)
    replaced by the classes they stand for: their __instancecheck__ is issubclass(type(obj),
    alias.__origin__)."""
    if isinstance(classinfo, tuple):
        return tuple(_without_typing_aliases(k) for k in classinfo)
    if isinstance(classinfo, typing._SpecialGenericAlias) and isinstance(classinfo.__origin__, type):
        return classinfo.__origin__
    return classinfo


def _classinfo_value(classinfo: VariableTracker) -> Any:
    """The classes isinstance() is asked about: constants (classes, typing's aliases: see
    constant.TYPE_EXPRESSION_TYPES), or a tuple of them."""
    if isinstance(classinfo, TupleVariable) and not classinfo.is_python_constant():
        return tuple(_classinfo_value(item) for item in classinfo.items)
    return classinfo.as_python_constant()  # (Unsupported, naming it, for another value)


def isinstance_of(tx, obj: VariableTracker, classinfo: VariableTracker) -> VariableTracker:
    """isinstance(obj, classinfo), decided from what the trace knows of obj's type."""
    if isinstance(obj, TensorVariable):
        obj.realize(tx)  # (torch._dynamo realizes a lazy input whose type is asked: type() too)
    cls = _without_typing_aliases(_classinfo_value(classinfo))
    kinds = cls if isinstance(cls, tuple) else (cls,)
    if isinstance(obj, TensorVariable) and any(is_legacy_tensor_type(k) for k in kinds):
        # torch.FloatTensor and the like match a tensor by its dtype and device (static here)
        return ConstantVariable(any(isinstance(obj.example, k) if is_legacy_tensor_type(k)
                                    else issubclass(obj.python_type(), k) for k in kinds))
    if not all(checks_by_type(k) for k in flatten_classinfo(kinds)):
        if all(checks_by_type(k) or isinstance(_python_instancecheck(k), types.FunctionType)
               for k in flatten_classinfo(kinds)):
            return ConstantVariable(any(_isinstance_of_one(tx, obj, k) for k in flatten_classinfo(kinds)))
        # A metaclass's own __instancecheck__ in C (torch's legacy storages) may look at the
        # object itself: asked of the real object, which the guards keep the same one.
        known = obj.real_object()
        if known is UNKNOWN_OBJECT or (obj.source is None and not isinstance(obj, ConstantVariable)):
            raise Unsupported(f"isinstance() against a class with its own __instancecheck__ ({cls!r})")
        if obj.source is not None and not isinstance(obj, ConstantVariable):
            tx.output.guards.add(obj.source, GuardKind.ID_MATCH, known)
        return ConstantVariable(isinstance(known, cls))
    return ConstantVariable(issubclass(obj.python_type(), cls))


def _python_instancecheck(cls: Any) -> Any:
    """The `__instancecheck__` of cls's metaclass, as isinstance() looks it up (on the type), when
    it is a Python function of user code (inlined); None for a C one, and for one of the standard
    library's or torch's (typing's Protocol, asked of the real object as before)."""
    check = mro_lookup(type(cls), "__instancecheck__")
    if not isinstance(check, types.FunctionType) or file_skip_reason(check.__code__.co_filename) is not None:
        return None
    return check


def _isinstance_of_one(tx, obj: VariableTracker, cls: type) -> bool:
    """isinstance(obj, cls) for one class, as PyObject_IsInstance decides it: true when obj's type
    is cls itself; a class whose metaclass defines `__instancecheck__` in Python asks it (inlined,
    its answer's truth taken); else obj's type is a subclass."""
    if obj.python_type() is cls:
        return True
    check = _python_instancecheck(cls)
    if not isinstance(check, types.FunctionType):
        return issubclass(obj.python_type(), cls)
    answer = tx.inline_call(check, [tx.wrap(cls, None, guard=False), obj], {})
    truth = answer.as_python_constant() if answer.is_python_constant() else None
    if truth is None and not answer.is_python_constant():
        raise Unsupported(f"{type(cls).__qualname__}.__instancecheck__ gave a value unknown while tracing")
    return bool(truth)

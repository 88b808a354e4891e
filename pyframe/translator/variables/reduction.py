"""object's side of the pickle protocol, which copy.copy and copy.deepcopy use to copy an instance no
table of theirs names: `object.__reduce_ex__(obj, protocol)`, `object.__reduce__(obj)` and
`object.__getstate__(obj)`, as CPython 3.11 defines them (Objects/typeobject.c), on the trackers of
user objects (read from the frame, or made while tracing).

`object.__reduce_ex__(obj, protocol)`:
  * if the class's `__reduce__` (`type(obj).__reduce__`) is not object's, `obj.__reduce__()` (a
    class's own, inlined; a builtin's, such as a set's, as its tracker models it);
  * protocols 2 and up (copy asks for 4), `reduce_newobj`: `cls.__new__`'s arguments are what the
    class's `__getnewargs_ex__` or `__getnewargs__` gives (inlined), if it has one, else none; the
    result is `(copyreg.__newobj__, (cls, *args), state, None, None)`, or with keyword arguments
    `(copyreg.__newobj_ex__, (cls, args, kwargs), state, None, None)`;
  * protocols 0 and 1: `copyreg._reduce_ex(obj, protocol)`, Python, inlined (object.__reduce__ is
    this with protocol 0).
The state is `obj.__getstate__()`, or, where that is object's own: the instance's `__dict__` itself
(None when it is empty or absent), paired with a dict of the `__slots__` values the object has,
`(dict_or_None, slots)`, when any is set. `copy._reconstruct` (copying.py) then makes the copy with
`cls.__new__(cls, *args)` and puts the state in it: `y.__setstate__(state)` if it has one, else
`y.__dict__.update(state)` and `setattr(y, name, value)` for each slot.

Everything the protocol asks of the object is asked as Python asks it, through the trace: the
instance's attribute lookup (a class's `__getattribute__` runs), its class's (guarded like any read
of the class). An instance with C fields besides object's (a base written in C: the protocol may
refuse to pickle it) and instances of list and dict subclasses (whose reduce carries their items)
are a graph break that names them.
"""
from __future__ import annotations

import copyreg

from ...exc import Unsupported
from ...guards import GuardKind
from ...source import AttrSource
from .base import UNKNOWN_OBJECT, VariableTracker, guard_class_attribute, mro_lookup, plain_getattr
from .builtin_descriptors import BuiltinDescriptorVariable, register_object_method
from .object_builtins import class_of, lookup_attr
from .constant import ConstantVariable
from .dicts import DictVariable
from .lists import TupleVariable
from .frame_objects import UserObjectVariable
from .objects import InstanceDictVariable, NewObjectVariable
from .static_lookup import instance_dict_of

_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement


def _user_object(obj: VariableTracker) -> bool:
    return isinstance(obj, (UserObjectVariable, NewObjectVariable))


def object_method(tx, obj: VariableTracker, name: str) -> VariableTracker | None:
    """`getattr(obj, name, None)`, for one of object's methods that copy and the protocol ask of
    an object (`__reduce_ex__`, `__reduce__`, `__getstate__`). Where the lookup is object's (no
    `__getattribute__` or `__getattr__` of the class's own), the instance holds no attribute of that
    name and the class's MRO finds object's method: that method bound to obj, the lookup guarded to
    keep finding it (CLASS_ATTR_MATCH; for an object made while tracing, its class's attribute).
    Anything else is the instance's lookup as Python makes it, through the trace (None for an
    AttributeError)."""
    method = getattr(object, name)
    cls = obj.python_type()
    if _user_object(obj) and plain_getattr(cls) and mro_lookup(cls, name) is method and not _in_instance(tx, obj, name):
        if isinstance(obj, UserObjectVariable):
            guard_class_attribute(tx, obj, name)
        elif obj.cls_source is not None:  # (`Cls.__reduce_ex__` is object's method itself)
            tx.output.guards.add(AttrSource(obj.cls_source, name), GuardKind.ID_MATCH, method)
        return BuiltinDescriptorVariable(method, obj)
    return lookup_attr(tx, obj, name)


def _in_instance(tx, obj: VariableTracker, name: str) -> bool:
    """The instance may hold an attribute `name` (stored by the trace, or in its real __dict__)."""
    if isinstance(obj, NewObjectVariable):
        return name in obj.attrs
    return tx.side_effects.load_attr(obj, name) is not None or name in instance_dict_of(obj.value)


def _check_layout(obj: VariableTracker, what: str) -> None:
    """Unsupported unless the object's fields are object's, its slots and its __dict__: every class
    of the MRO but object made by a class statement, none a list or dict (object's reduce of those
    adds their items)."""
    cls = obj.python_type()
    if any(base is not object and not base.__flags__ & _HEAPTYPE for base in cls.__mro__):
        raise Unsupported(f"{what} on {obj.describe()}, whose class has a base written in C")
    if issubclass(cls, (list, dict)):
        raise Unsupported(f"{what} on {obj.describe()}, an instance of a {cls.__mro__[-2].__name__} subclass")


def reduce_ex(tx, obj: VariableTracker, args: list[VariableTracker], kwargs: dict) -> VariableTracker:
    """`object.__reduce_ex__(obj, protocol)`."""
    if kwargs or len(args) != 1 or not args[0].is_python_constant() or type(args[0].as_python_constant()) is not int:
        raise Unsupported("object.__reduce_ex__() with other arguments than a protocol number")
    protocol = args[0].as_python_constant()
    if not _user_object(obj):
        cls = obj.python_type()
        if mro_lookup(cls, "__reduce__") is not object.__reduce__:  # (a builtin's own: a set's)
            return obj.call_method(tx, "__reduce__", [], {})
        raise Unsupported(f"object.__reduce_ex__() on {obj.describe()}")
    # the instance's `__reduce__` looked up (an AttributeError: none), the class's compared with object's
    reduce = object_method(tx, obj, "__reduce__")
    if reduce is not None and not _is_objects(reduce, "__reduce__", obj):
        cls_reduce = tx.load_attr(class_of(tx, obj), "__reduce__")
        if cls_reduce.real_object() is not object.__reduce__:
            return reduce.call(tx, [], {})
    return _common_reduce(tx, obj, protocol)


def reduce(tx, obj: VariableTracker, args: list[VariableTracker], kwargs: dict) -> VariableTracker:
    """`object.__reduce__(obj)`: the reduce of protocol 0."""
    if args or kwargs:
        raise Unsupported("object.__reduce__() with arguments")
    if not _user_object(obj):
        raise Unsupported(f"object.__reduce__() on {obj.describe()}")
    return _common_reduce(tx, obj, 0)


def getstate(tx, obj: VariableTracker, args: list[VariableTracker], kwargs: dict) -> VariableTracker:
    """`object.__getstate__(obj)` (a class's own `__getstate__` calling object's, through super())."""
    if args or kwargs:
        raise Unsupported("object.__getstate__() with arguments")
    if not _user_object(obj):
        raise Unsupported(f"object.__getstate__() on {obj.describe()}")
    _check_layout(obj, "object.__getstate__()")
    return default_state(tx, obj)


def _common_reduce(tx, obj: VariableTracker, protocol: int) -> VariableTracker:
    """typeobject.c's _common_reduce: reduce_newobj from protocol 2 on, copyreg's before."""
    what = f"object.__reduce_ex__({protocol})"
    if protocol < 2:
        return tx.inline_call(copyreg._reduce_ex, [obj, ConstantVariable(protocol)], {})
    _check_layout(obj, what)
    cls_var = class_of(tx, obj)
    args, kwargs = _new_arguments(tx, obj, cls_var, what)
    state = object_getstate(tx, obj)
    if kwargs is None or not kwargs.items:
        newobj = tx.wrap(copyreg.__newobj__, None, guard=False)
        newargs = TupleVariable([cls_var, *(args.unpack(tx) if args is not None else [])])
    else:
        newobj = tx.wrap(copyreg.__newobj_ex__, None, guard=False)
        newargs = TupleVariable([cls_var, args, kwargs])
    none = ConstantVariable(None)
    return TupleVariable([newobj, newargs, state, none, none])


def _new_arguments(tx, obj: VariableTracker, cls_var: VariableTracker,
                   what: str) -> tuple[VariableTracker | None, DictVariable | None]:
    """_PyObject_GetNewArguments: `obj.__getnewargs_ex__()` (a tuple of args and a dict of
    keyword arguments) or `obj.__getnewargs__()` (a tuple of args), each looked up on the class
    and inlined; (None, None) when the class has neither."""
    for name in ("__getnewargs_ex__", "__getnewargs__"):
        method = lookup_attr(tx, cls_var, name)
        if method is None:
            continue
        result = method.call(tx, [obj], {})
        if name == "__getnewargs__":
            args, kwargs = result, None
        elif result.python_type() is tuple and len(result.unpack(tx)) == 2:
            args, kwargs = result.unpack(tx)
            if not isinstance(kwargs, DictVariable) or kwargs.python_type() is not dict:
                raise Unsupported(f"{what}: {name} gave keyword arguments that are not a dict")
        else:
            raise Unsupported(f"{what}: {name} gave another value than a pair")
        if args.python_type() is not tuple:
            raise Unsupported(f"{what}: {name} gave arguments that are not a tuple")
        return args, kwargs
    return None, None


def object_getstate(tx, obj: VariableTracker) -> VariableTracker:
    """typeobject.c's object_getstate: `obj.__getstate__()`, or, where the lookup finds object's
    own bound to obj, its default state."""
    method = object_method(tx, obj, "__getstate__")
    if method is None:
        raise Unsupported(f"object.__reduce_ex__() on {obj.describe()}, which has no __getstate__")
    if _is_objects(method, "__getstate__", obj):
        return default_state(tx, obj)
    return method.call(tx, [], {})


def _is_objects(method: VariableTracker, name: str, obj: VariableTracker) -> bool:
    """method is object's method `name` bound to obj (the tracker of the method's `__self__`, where
    a class's `__getattribute__` gave it, is another tracker of the same object)."""
    if not isinstance(method, BuiltinDescriptorVariable) or method.descriptor is not getattr(object, name):
        return False
    bound = method.obj
    return bound is obj or (bound is not None and obj.identity() is not UNKNOWN_OBJECT
                            and bound.identity() is obj.identity())


def default_state(tx, obj: VariableTracker) -> VariableTracker:
    """object's `__getstate__` (object_getstate_default): the instance dict itself, or None when it
    is empty or absent; with `__slots__`, the pair `(dict_or_None, {slot: value})` of the slots that
    are set (each read as `getattr(obj, name)` reads it), if any is."""
    cls = obj.python_type()
    names = slot_names(cls)
    state: VariableTracker = ConstantVariable(None)
    if isinstance(obj, NewObjectVariable):
        own = {name: value for name, value in obj.attrs.items() if name not in names}
        if own:  # (the live view of its attributes, where they are all in the dict)
            state = InstanceDictVariable(obj) if len(own) == len(obj.attrs) else DictVariable(own)
    elif cls.__dictoffset__:
        instance_dict = obj.instance_dict_tracker(tx)
        if instance_dict.items:
            state = instance_dict
    slots = {}
    for name in names:
        if isinstance(obj, NewObjectVariable) and name not in obj.attrs:
            continue  # (never set: object's lookup raises AttributeError)
        value = lookup_attr(tx, obj, name)
        if value is not None:
            slots[name] = value
    if slots:
        state = TupleVariable([state, DictVariable(slots)])
    return state


def slot_names(cls: type) -> list[str]:
    """The names of the slots of cls's instances (`__dict__` and `__weakref__` left out, private
    names mangled), as `copyreg._slotnames(cls)` gives them, without its cache on the class."""
    cached = vars(cls).get("__slotnames__")
    if isinstance(cached, list):
        return cached
    names = []
    for klass in cls.__mro__:
        slots = vars(klass).get("__slots__")
        if slots is None:
            continue
        for name in ((slots,) if isinstance(slots, str) else slots):
            if name in ("__dict__", "__weakref__"):
                continue
            if name.startswith("__") and not name.endswith("__"):
                stripped = klass.__name__.lstrip("_")
                name = f"_{stripped}{name}" if stripped else name
            names.append(name)
    return names


register_object_method("__reduce_ex__", reduce_ex)
register_object_method("__reduce__", reduce)
register_object_method("__getstate__", getstate)

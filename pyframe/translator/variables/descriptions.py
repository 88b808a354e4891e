"""Values named as their user would name them, for graph-break reasons.

A break reason says what the user's code did to what: `calling an instance of Foo (defined at
foo.py:12), which has no __call__ pyframe can trace`, `iteration over a generator`, never a
tracker's class name. Trackers describe themselves (`VariableTracker.describe`) with these helpers.
Everything here is cheap: reasons are built on every Unsupported, also the ones the trace catches.
"""
from __future__ import annotations

import linecache
import os
import re
import types
import weakref
from typing import Any

# Where each class was defined, found once (see class_location).
_LOCATIONS: "weakref.WeakKeyDictionary[type, str]" = weakref.WeakKeyDictionary()


def article(noun: str) -> str:
    return f"an {noun}" if noun[:1].lower() in "aeiou" else f"a {noun}"


def class_location(cls: type) -> str:
    """`foo.py:12`, the file and line of `cls`'s class statement, or "" when not found: the file of
    its first Python method, searched up from that method for `class <name>` (linecache's lines)."""
    try:
        return _LOCATIONS[cls]
    except (KeyError, TypeError):
        pass
    found = ""
    code = next((v.__code__ for v in vars(cls).values() if isinstance(v, types.FunctionType)), None)
    if code is not None:
        pattern = re.compile(rf"\s*class\s+{re.escape(cls.__name__)}\b")
        lines = linecache.getlines(code.co_filename)
        for lineno in range(min(code.co_firstlineno, len(lines)), 0, -1):
            if pattern.match(lines[lineno - 1]):
                found = f"{os.path.basename(code.co_filename)}:{lineno}"
                break
    try:
        _LOCATIONS[cls] = found
    except TypeError:
        pass
    return found


def describe_class(cls: type) -> str:
    """`class Foo (defined at foo.py:12)`, `class list`, `class torch.nn.Linear`."""
    if cls.__module__ == "builtins":
        return f"class {cls.__name__}"
    if cls.__module__.split(".")[0] == "torch":
        return f"class {cls.__module__.split('.')[0]}.{cls.__qualname__}"
    where = class_location(cls)
    return f"class {cls.__qualname__}" + (f" (defined at {where})" if where else f" (module {cls.__module__})")


def describe_instance(cls: type) -> str:
    """`a list`, `a generator`, `a torch.Tensor`, `an instance of Foo (defined at foo.py:12)`."""
    if cls.__module__ == "builtins":
        return article(cls.__name__)
    if cls.__module__.split(".")[0] == "torch":
        return article(f"torch.{cls.__qualname__}" if cls.__module__ == "torch" else cls.__qualname__)
    return "an instance of " + describe_class(cls)[len("class "):]


def describe_value(value: Any) -> str:
    """A real object: a class by its name and place, a module by its name, anything else by its type."""
    if isinstance(value, type):
        return describe_class(value)
    if isinstance(value, types.ModuleType):
        return f"module {value.__name__}"
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType)):
        return f"function {getattr(value, '__qualname__', value.__name__)}"
    return describe_instance(type(value))

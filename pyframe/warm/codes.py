"""A code object's identity across processes: its module, qualified name and a hash of its bytecode.

Two processes running the same source make equal code objects, but not the same one. A saved
entry is found again by (module, qualified name), and used only if the code met has the hash the
saved one had: any change of its bytecode, names or constants (nested functions' code included)
means the saved entries describe other code. Line numbers are left out: a comment added above a
function changes none of what its entries do.
"""
from __future__ import annotations

import hashlib
import os
import sys
import types
import weakref
from typing import Any

_hashes: "weakref.WeakKeyDictionary[types.CodeType, str]" = weakref.WeakKeyDictionary()


def code_hash(code: types.CodeType) -> str:
    digest = _hashes.get(code)
    if digest is None:
        h = hashlib.sha256()
        _feed(h, code)
        digest = _hashes[code] = h.hexdigest()[:32]
    return digest


def _feed(h: Any, code: types.CodeType) -> None:
    h.update(code.co_code)
    for part in (code.co_qualname, code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars,
                 code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount, code.co_flags):
        h.update(repr(part).encode())
    h.update(code.co_exceptiontable)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            h.update(b"code:")
            _feed(h, const)
        else:
            h.update(_const_text(const).encode())


def _const_text(const: Any) -> str:
    """A constant as text that does not depend on the process (a frozenset's order does: hashing)."""
    if isinstance(const, frozenset):
        return "frozenset(" + ",".join(sorted(_const_text(c) for c in const)) + ")"
    if isinstance(const, tuple):
        return "(" + ",".join(_const_text(c) for c in const) + ")"
    return f"{type(const).__name__}:{const!r}"


_module_by_file: dict[str, str] = {}


def module_of_code(code: types.CodeType) -> str | None:
    """The name of the module whose file `code` was compiled from (None: no module in sys.modules)."""
    if code.co_filename.startswith("<frozen ") and code.co_filename.endswith(">"):  # a frozen module's
        name = code.co_filename[len("<frozen "):-1]
        return name if name in sys.modules else None
    filename = os.path.abspath(code.co_filename)
    name = _module_by_file.get(filename)
    if name is not None and _file_of(sys.modules.get(name)) == filename:
        return name
    for name, module in list(sys.modules.items()):
        path = _file_of(module)
        if path is not None:
            _module_by_file[path] = name
    name = _module_by_file.get(filename)
    return name if name is not None and _file_of(sys.modules.get(name)) == filename else None


def _file_of(module: Any) -> str | None:
    path = getattr(module, "__file__", None)
    return os.path.abspath(path) if isinstance(path, str) else None

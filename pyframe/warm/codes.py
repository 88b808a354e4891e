"""A code object's identity across processes: its module, qualified name and a hash of its bytecode.

Two processes running the same source make equal code objects, but not the same one. A saved
entry is found again by (module, qualified name), and used only if the code met has the hash the
saved one had: any change of its bytecode, names or constants (nested functions' code included)
means the saved entries describe other code. Line numbers are left out: a comment added above a
function changes none of what its entries do.
"""
from __future__ import annotations

import hashlib
import marshal
import os
import sys
import types
import weakref
from typing import Any

# Each code's hash, by identity: code objects compare equal by value but for their qualified
# names (`A.tell` and `B.tell` of the same body and lines), which the hash includes.
_hashes: dict[int, tuple["weakref.ref[types.CodeType]", str]] = {}


def code_hash(code: types.CodeType) -> str:
    known = _hashes.get(id(code))
    if known is not None and known[0]() is code:
        return known[1]
    consts = code.co_consts
    if not _REWRITTEN.isdisjoint(map(type, consts)):  # (most codes hold plain constants only)
        consts = tuple(_const(c) for c in consts)
    fields = (code.co_code, code.co_qualname, code.co_names, code.co_varnames, code.co_freevars,
              code.co_cellvars, code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount,
              code.co_flags, code.co_exceptiontable, consts)
    # (marshal's version 2 writes no back-references: versions 3 and up refer back to an object
    # met twice when its reference count says it may be shared, which varies between processes)
    digest = hashlib.sha256(marshal.dumps(fields, 2)).hexdigest()[:32]
    _hashes[id(code)] = (weakref.ref(code), digest)
    return digest


_REWRITTEN = frozenset({types.CodeType, tuple, frozenset})  # the constants _const writes otherwise


def _const(const: Any) -> Any:
    """A constant as marshal writes the same bytes for in any process: a nested code object by its
    hash, a frozenset's items in sorted order (its own order follows the strings' hashes)."""
    kind = type(const)
    if kind is types.CodeType:
        return ("code", code_hash(const))
    if kind is tuple:
        return tuple(_const(c) for c in const)
    if kind is frozenset:
        return ("frozenset", *sorted(repr(_const(c)) for c in const))
    return const


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

"""Opcode handlers: loads and stores of locals, cells, globals, attributes and constants."""
from __future__ import annotations

import importlib.util
import sys

from bytecode import FreeVar, Instr

from ..exc import Unsupported
from ..source import BuiltinSource
from .variables import NullVariable, TensorVariable, VariableTracker
from .variables.base import DeferredMethodVariable, class_attribute
from .variables.object_builtins import class_of
from .variables.constant import ConstantVariable
from .variables.torch import PythonModuleVariable

_OBJECT_CLASS = object.__dict__["__class__"]
_PLAIN_CONSTANTS = frozenset({type(None), bool, int, float, complex, str, bytes})


class LoadStoreOps:
    # (The three most frequent opcodes use the stack list itself, not push() and pop(): a tenth of
    # a trace's Python calls.)
    def LOAD_FAST(self, inst: Instr) -> None:
        name = inst.arg
        value = self.locals.get(name)
        self.stack.append(value if value is not None else self.read_local(name))

    LOAD_FAST_CHECK = LOAD_FAST

    def STORE_FAST(self, inst: Instr) -> None:
        value = self.stack.pop()
        if isinstance(value, TensorVariable):
            value.set_name_hint(inst.arg)
        self.bind_local(inst.arg, value)

    def DELETE_FAST(self, inst: Instr) -> None:
        self.read_local(inst.arg)  # UnboundLocalError eagerly: leave it to Python
        del self.locals[inst.arg]

    def LOAD_CONST(self, inst: Instr) -> None:
        value = inst.arg
        if type(value) in _PLAIN_CONSTANTS:  # what wrap() makes of them, without its dispatch
            self.stack.append(ConstantVariable(value))
        else:
            self.stack.append(self.wrap_constant(value))

    def IMPORT_NAME(self, inst: Instr) -> None:
        """`import a.b` / `from a import b` of a module already imported: no import runs while
        tracing (importing may run arbitrary code), the module object is looked up."""
        fromlist, level = self.pop(), self.pop()
        level, fromlist = level.as_python_constant(), fromlist.as_python_constant()
        name = inst.arg
        if level:  # `from . import x` / `from ..a import b`: relative to the frame's package
            package = self.f_globals.get("__package__")
            try:
                name = importlib.util.resolve_name("." * level + name, package)
            except (ImportError, ValueError, TypeError) as e:
                raise Unsupported(f"relative import of {inst.arg!r}: {e}") from e
        if name not in sys.modules:
            raise Unsupported(f"import of {name!r} (not imported yet)")
        module = sys.modules[name] if fromlist or level else sys.modules[name.partition(".")[0]]
        self.push(PythonModuleVariable(module))

    def IMPORT_FROM(self, inst: Instr) -> None:
        self.push(self.stack[-1].var_getattr(self, inst.arg))

    def LOAD_GLOBAL(self, inst: Instr) -> None:
        push_null, name = inst.arg
        if push_null:
            self.push(NullVariable())
        self.push(self.read_global(name))

    def LOAD_BUILD_CLASS(self, inst: Instr) -> None:
        """`class C: ...` in the frame: the builtin that makes a class, read as torch._dynamo reads it
        (the call to it is then the one graph break of the class statement). CPython reads it from
        the builtins, never from the module's globals."""
        if "__build_class__" not in self.f_builtins:
            raise Unsupported("__build_class__ not found")
        self.push(self.wrap(self.f_builtins["__build_class__"], BuiltinSource("__build_class__"), not self.trusted))

    def LOAD_NAME(self, inst: Instr) -> None:
        raise Unsupported("LOAD_NAME (module or class body code)")

    def STORE_GLOBAL(self, inst: Instr) -> None:
        """`global g; g = value`: recorded, replayed after the graph (side_effects.py); later reads
        of `g` in this trace see the value."""
        value = self.pop()
        if self.f_globals is self.root.f_globals:
            dict_source = None
        elif not self.trusted:
            dict_source = self.globals_dict_source()
        else:
            raise Unsupported(f"assignment to global {inst.arg!r} of a function from another module")
        self.side_effects.store_global(self.f_globals, dict_source, inst.arg, value)

    def LOAD_ATTR(self, inst: Instr) -> None:
        obj = self.pop()
        self.push(self.load_attr(obj, inst.arg))

    def load_attr(self, obj: VariableTracker, name: str) -> VariableTracker:
        """`obj.name`; `obj.__class__` is type(obj) (unless a class overrides `__class__`)."""
        if name == "__class__":
            try:
                cls = obj.python_type()
            except Unsupported:
                cls = None
            if cls is not None and class_attribute(cls, "__class__", None) is _OBJECT_CLASS:
                return class_of(self, obj)
        return obj.var_getattr(self, name)

    def LOAD_METHOD(self, inst: Instr) -> None:
        obj = self.pop()
        self.push(NullVariable())
        index = self.ip - 1
        deferred = self.deferred_methods.get(index) if self.parent is None else None
        if deferred is not None:  # this trace leaves the lookup to the call
            self.push(DeferredMethodVariable(obj, inst.arg, deferred))
            return
        try:
            self.push(self.load_attr(obj, inst.arg))
        except Unsupported as e:
            if self.parent is None and e.break_index is None:  # (else: it knows where to break)
                e.deferred_method_at = index  # trace again, deferring it (see translate_frame)
            raise

    def STORE_ATTR(self, inst: Instr) -> None:
        obj, value = self.pop(), self.pop()
        if isinstance(value, TensorVariable):
            # torch._dynamo's setattr looks at the value it stores, realizing a lazy graph input
            # there (`self.val = val` in an inlined __init__): its placeholder comes this early
            value.realize(self)
        elif type(value) is ConstantVariable:  # (torch._dynamo's setattr realizes a lazy number too)
            value.realize_for_dispatch()
        obj.store_attr(self, inst.arg, value)

    def DELETE_ATTR(self, inst: Instr) -> None:
        self.pop().delete_attr(self, inst.arg)

    # -- cells and free variables --------------------------------------------------------------
    # 3.11: MAKE_CELL and COPY_FREE_VARS run before RESUME. Symbolically a cell variable of this
    # frame is just a local, and a free variable is read through the function's closure.
    def MAKE_CELL(self, inst: Instr) -> None:
        pass

    def COPY_FREE_VARS(self, inst: Instr) -> None:
        pass

    def LOAD_DEREF(self, inst: Instr) -> None:
        var = inst.arg
        if isinstance(var, FreeVar):
            self.push(self.read_free_var(var.name))
        else:
            self.push(self.read_local(var.name))

    LOAD_CLASSDEREF = LOAD_DEREF

    def STORE_DEREF(self, inst: Instr) -> None:
        var = inst.arg
        value = self.pop()
        name = self.frame_cell_name(var.name, isinstance(var, FreeVar))
        if name is not None:  # as torch._dynamo names it: after the compiled frame's cell it lands in
            value.set_name_hint(name)
        if isinstance(var, FreeVar):
            self.store_free_var(var.name, value)
            return
        self.bind_local(var.name, value)

    def frame_cell_name(self, name: str, free: bool) -> str | None:
        """The compiled frame's own name for the cell this function's variable `name` lives in,
        when it is one of that frame's cell or free variables (an inlined call's cell has none)."""
        root = self.root
        if self is root:
            return name
        if not free:
            return None
        if name in self.closure_refs:  # a function made while tracing: whose variable it is
            ref = self.closure_refs[name].target()
            return ref.name if ref.owner is root else None
        cell = self.closure[self.code.co_freevars.index(name)]
        for root_name, root_cell in zip(root.code.co_freevars, root.closure):
            if root_cell is cell:
                return root_name
        return root.passed_cell_name(cell)

    def LOAD_CLOSURE(self, inst: Instr) -> None:
        self.push(self.cell_reference(inst.arg.name, free=isinstance(inst.arg, FreeVar)))

"""InstructionTranslator: symbolic execution of one frame's 3.11 bytecode.

The translator walks the frame's instructions (the `bytecode` library's, see decode.py) keeping a stack
and locals of VariableTrackers. Each opcode has a handler named like the opcode, looked up once per
translator class; the handlers live in mixins, one file per family: ops_load_store.py (loads and
stores), ops_calls.py, ops_stack.py (shuffles), ops_operators.py (operators, subscripts),
ops_build.py (building and unpacking containers), ops_with.py, ops_jumps.py (branches, loops,
return), ops_generators.py, ops_exceptions.py, ops_match.py; closure cells are cells.py's. An
opcode without a handler, or any operation a value does not support, raises Unsupported. Calls to
Python functions are inlined by running a child translator over the callee's code with the same
OutputGraph; an inlined generator function runs lazily, to its next yield each time its consumer
asks for an item.
"""
from __future__ import annotations

import inspect
import sys
import types
from typing import Any

import torch
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

from bytecode import Instr, Label

from .. import config, trace_rules
from ..exc import Unsupported, UserLocation
from ..guards import GuardKind
from ..graph import OutputGraph
from ..source import AttrSource, BuiltinSource, CellContentsSource, GlobalSource, ItemSource, LocalSource, Source
from .analysis import reaches_a_handler
from .binding import bind_arguments
from .code_cache import _NOT_AN_INSTRUCTION, decoded, first_body_index, handler_table
from .hooks import TranslatorHooks
from .cells import CellOps
from .ops_build import BuildOps
from .ops_calls import CallOps
from .ops_exceptions import ExceptionOps
from .ops_generators import GeneratorOps
from .ops_jumps import JumpOps
from .ops_load_store import LoadStoreOps
from .ops_match import MatchOps
from .ops_operators import OperatorOps
from .ops_stack import StackOps
from .ops_with import WithOps
from .side_effects import SideEffects
from .variables import VariableTracker, wrap
from .variables.builder import is_immutable_tracker
from .variables.builtin_descriptors import BuiltinDescriptorVariable, is_builtin_descriptor
from .variables.constant import ConstantVariable
from .variables.dicts import DictVariable
from .variables.generators import GeneratorVariable
from .variables.lists import TupleVariable
from .variables.exceptions import ExceptionVariable, RaisedException
from .variables.functions import CellReference, NestedFunctionVariable
from .variables.nn_module import NNModuleVariable
from .variables.frame_objects import UserObjectVariable
from .variables.realize import realize_as_a_function

_MODULE_GETATTR = torch.nn.Module.__getattr__

_MAX_STEPS = 1_000_000  # a `while True` whose exit is never reached while tracing


class InstructionTranslator(LoadStoreOps, CellOps, CallOps, StackOps, OperatorOps, BuildOps, WithOps, JumpOps,
                            GeneratorOps, ExceptionOps, MatchOps):
    # Slots: a translator has more attributes than CPython 3.11 keeps in an instance's shared-key
    # layout (30), past which every `self.stack` and `self.ip` of the interpreter loop is a dict
    # lookup the interpreter cannot specialize.
    __slots__ = ("code", "f_globals", "f_builtins", "closure", "output", "parent", "fn_source", "fn", "depth",
                 "facts", "trusted", "instructions", "label_index", "handlers", "ip", "stack", "locals",
                 "frame_values", "unchanged_locals", "kw_names", "current_inst", "return_value", "steps",
                 "break_at", "deferred_methods", "pure_calls", "is_generator", "suspended", "yielded_value",
                 "thrown", "closure_refs", "cell_references", "exception_stack", "passed_cells", "cell_objects",
                 "super_classes", "locals_dict", "side_effects", "root", "generators", "hooks", "took_compiled_path",
                 "_immutable_globals", "immutable_globals")

    def __init__(self, code: types.CodeType, f_globals: dict, f_builtins: dict, closure: tuple | None,
                 output: OutputGraph, *, frame_values: dict[str, Any] | None = None,
                 parent: "InstructionTranslator | None" = None, fn_source: Source | None = None,
                 break_at: int | None = None, deferred_methods: dict[int, str] | None = None,
                 pure_calls: set[int] | None = None, hooks: TranslatorHooks | None = None):
        self.code = code
        self.f_globals = f_globals
        self.f_builtins = f_builtins
        self.closure = closure or ()
        self.output = output
        self.parent = parent
        self.fn_source = fn_source
        self.fn: types.FunctionType | None = None  # the real function inlined (see function_source)
        self.depth = 0 if parent is None else parent.depth + 1
        # Code of trusted libraries (torch's own modules) reads its globals without guards.
        facts = self.facts = decoded(code)
        self.trusted = facts.trusted
        self.instructions, self.label_index = facts.instructions, facts.label_index
        handlers = facts.handler_tables.get(type(self))
        self.handlers = handlers if handlers is not None else handler_table(type(self), self.instructions,
                                                                            facts.handler_tables)
        self.ip = 0
        self.stack: list[VariableTracker] = []
        self.locals: dict[str, VariableTracker] = {}
        self.frame_values = frame_values or {}  # real argument values, wrapped on first read
        self.unchanged_locals: set[str] = set()  # locals read from their slot and never rebound
        self.kw_names: tuple[str, ...] = ()
        self.current_inst: Instr | None = None
        self.return_value: VariableTracker | None = None
        self.steps = 0
        self.break_at = break_at  # root frame: stop before this instruction (a graph break)
        self.deferred_methods = deferred_methods or {}  # root frame: LOAD_METHOD index -> why
        # root frame: ids of functions allowed in the graph found side-effect free (one node each)
        self.pure_calls = pure_calls if pure_calls is not None else set()
        self.is_generator = False  # an inlined generator function (see run_call)
        self.suspended = False     # stopped at a yield, whose value is `yielded_value`
        self.yielded_value: VariableTracker | None = None
        self.thrown: ExceptionVariable | None = None  # generator.throw(): raised at the paused yield
        self.closure_refs: dict[str, Any] = {}  # free variables of a function made while tracing
        self.cell_references: dict[tuple[str, bool], CellReference] = {}  # what LOAD_CLOSURE pushed
        self.exception_stack: list[VariableTracker] = []  # exceptions being handled (PUSH_EXC_INFO)
        # Cell variables whose MAKE_CELL the prologue skips: resume functions receive the cell.
        self.passed_cells = facts.passed_cells
        self.cell_objects: dict[str, Any] = {}  # passed cells already read, by local name
        # root frame: classes a `__class__` cell gave super() unwrapped (CellOps.super_class), by id
        self.super_classes: dict[int, type] = {}
        self.locals_dict: DictVariable | None = None  # what locals() returned (one dict per frame)
        # Mutations of objects that outlive the frame: one record for the whole trace.
        self.side_effects = parent.side_effects if parent is not None else SideEffects()
        self.root: InstructionTranslator = self if parent is None else parent.root  # the compiled frame's
        self.took_compiled_path = False  # root frame: see catch()
        # root frame: the generators inlined generator functions made (finish.py checks that none is
        # left paused where dropping it would run a handler: `finally`, `except`, `with`)
        self.generators: list[GeneratorVariable] = []
        # What convert_frame hands the trace (hooks.py): one record for the root and its inlined calls.
        self.hooks: TranslatorHooks = hooks if parent is None else parent.hooks
        # Modules and functions read from this code's globals, by name: one table per globals dict
        # for the whole trace (every inlined function of a module reads `torch` again).
        tables = self._immutable_globals = {} if parent is None else None
        self.immutable_globals: dict[str, VariableTracker] = \
            (tables if tables is not None else self.root._immutable_globals).setdefault(id(f_globals), {})

    # -- the interpreter loop ------------------------------------------------------------------
    def release(self) -> None:
        """The trace is over: drop the root's reference to itself, the one cycle that would keep
        the trace (the frame's values, the graph's inputs) alive until the next garbage collection,
        where eager drops the caller's arguments with its last reference to them."""
        self.root = None

    def run(self) -> VariableTracker | None:
        """Execute until RETURN_VALUE (the symbolic return value), the break point or, in an inlined
        generator, a yield (None for both)."""
        instructions, handlers = self.instructions, self.handlers
        while self.return_value is None and not self.suspended:
            index = self.ip
            handler = handlers[index]
            self.ip = index + 1
            if handler is _NOT_AN_INSTRUCTION:  # Label, TryBegin, TryEnd: no effect on a straight run
                continue
            inst = self.current_inst = instructions[index]
            if index == self.break_at:
                return None
            self.steps += 1
            if self.steps > _MAX_STEPS:
                raise Unsupported("loop that does not finish while tracing")
            try:
                if handler is None:
                    raise Unsupported(f"opcode {inst.name} is not supported")
                try:
                    handler(self, inst)
                except RaisedException as raised:
                    self.catch(index, raised)
                except GuardOnDataDependentSymNode as e:  # (iterating `x.nonzero()`, `range(n)` of one)
                    raise Unsupported(f"a decision on a value read from a tensor ({e.cond})") from e
            except Unsupported as e:
                if not self.trusted:
                    e.with_location(self.location())
                if self.parent is None and e.break_index is None and not e.whole_frame:
                    e.break_index = index  # where the root frame can break (the call, for inlined code)
                raise
        return self.return_value

    def catch(self, index: int, raised: RaisedException) -> None:
        """An exception raised by instruction `index`: jump to its handler as CPython does (stack cut
        to the try's depth, the offset if the range asks for it, then the exception), or let it
        leave this frame; leaving the compiled frame is a graph break at the raising instruction
        (the whole frame runs as Python instead if the trace took is_compiling()'s path)."""
        exc = raised.value
        if not exc.context_known:  # where it is first seen raised: chained to the one being handled
            context = self.handled_exception()
            exc.context, exc.context_known = (context if context is not exc else None), True
        entry = self.facts.innermost_handlers()[index]
        if entry is None:
            if self.parent is not None:
                raise raised
            if self.took_compiled_path:
                # Its values may be ones eager never makes (`if not is_compiling(): mask = ...` left
                # None): a break would run the raising step for real on them. Eager's path instead,
                # as torch._dynamo runs every frame an exception leaves while tracing.
                whole = Unsupported(f"{raised.value.exc_type.__name__} raised while tracing on the path "
                                    f"is_compiling() chose, so the frame runs as Python")
                whole.whole_frame = whole.by_rule = True
                raise whole from None
            raise Unsupported(f"{raised.value.exc_type.__name__} raised while tracing and not caught "
                              f"in the frame") from None
        del self.stack[entry.stack_depth:]
        if entry.push_lasti:
            self.push(ConstantVariable(index))
        self.push(raised.value)
        self.jump_to(entry.target)

    def handled_exception(self) -> ExceptionVariable | None:
        """What sys.exc_info() would give: the exception an enclosing except block is handling."""
        if self.exception_stack:
            return self.exception_stack[-1]
        return self.parent.handled_exception() if self.parent is not None else None

    def location(self) -> UserLocation:
        inst = self.current_inst
        lineno = inst.lineno if inst is not None and inst.lineno is not None else self.code.co_firstlineno
        return UserLocation(self.code.co_filename, lineno, self.code.co_name)

    # -- the stack -----------------------------------------------------------------------------
    def push(self, value: VariableTracker) -> None:
        self.stack.append(value)

    def pop(self) -> VariableTracker:
        return self.stack.pop()

    def popn(self, n: int) -> list[VariableTracker]:
        if n == 0:
            return []
        values = self.stack[-n:]
        del self.stack[-n:]
        return values

    def jump_to(self, label: Label) -> None:
        self.ip = self.label_index[label]

    # -- values --------------------------------------------------------------------------------
    def wrap(self, value: Any, source: Source | None, guard: bool = True) -> VariableTracker:
        return wrap(self, value, source, guard)

    def wrap_constant(self, value: Any) -> VariableTracker:
        """A value computed while tracing from constants (no source, nothing to guard)."""
        return wrap(self, value, None, guard=False)

    def make_tuple(self, items: list[VariableTracker]) -> VariableTracker:
        """A tuple made while tracing, for trackers below the tuples' module (an exception's args)."""
        return TupleVariable(items)

    def bind_builtin_descriptor(self, descriptor: Any, obj: VariableTracker) -> VariableTracker | None:
        """A modelled builtin's method found on obj's class (`object.__reduce_ex__`), bound to obj,
        for trackers below builtin_descriptors.py; None for another descriptor."""
        return BuiltinDescriptorVariable(descriptor, obj) if is_builtin_descriptor(descriptor) else None

    def raise_error(self, exc_type: type, *args: Any) -> None:
        """Raise `exc_type(*args)` in the traced program, for trackers below the exceptions' module."""
        raise RaisedException(ExceptionVariable(exc_type, [ConstantVariable(a) for a in args]))

    def prologue(self) -> list[Instr]:
        """MAKE_CELL / COPY_FREE_VARS / RESUME 0: what the transformed code must start with too."""
        return [i for i in self.instructions[:self.first_body_index()] if isinstance(i, Instr)]

    def first_body_index(self) -> int:
        """Index just past the prologue's RESUME."""
        return first_body_index(self.instructions)

    def read_local(self, name: str) -> VariableTracker:
        value = self.locals.get(name)
        if value is None:
            if name not in self.frame_values:
                raise Unsupported(f"local {name!r} is read before it is bound")
            raw = self.frame_values.pop(name)
            if name in self.passed_cells:
                self.cell_objects[name] = raw
                value = self.wrap(raw.cell_contents, CellContentsSource(name))
            else:
                value = self.wrap(raw, LocalSource(name))
            self.locals[name] = value
            self.unchanged_locals.add(name)
        return value

    def locals_snapshot(self) -> DictVariable:
        """`locals()` (and `vars()`): CPython 3.11 returns the frame's one f_locals dict, refreshed
        at each call (PyFrame_FastToLocals): every bound local, cell and free variable with its
        value now, in the frame's slot order (co_varnames, the other cell variables, the free
        variables); an unbound one's key removed; keys the code added itself kept. Writes made
        after the call are not in it until the next call, as in Python."""
        code = self.code
        names = [*code.co_varnames, *(n for n in code.co_cellvars if n not in code.co_varnames),
                 *code.co_freevars]
        if self.locals_dict is None:
            self.locals_dict = DictVariable({})
        items = self.locals_dict.items
        for name in names:
            if name in code.co_freevars:
                items[name] = self.read_free_var(name)
            elif name in self.locals or name in self.frame_values:
                items[name] = self.read_local(name)
            else:
                items.pop(name, None)
        return self.locals_dict

    def bind_local(self, name: str, value: VariableTracker) -> None:
        """A store to local `name` (STORE_FAST, STORE_DEREF, a closure's `nonlocal` write). The
        frame's entry value is forgotten, except a cell a resume function received: closures made
        before the break hold that very cell, and passed_cell_name must still know it."""
        self.locals[name] = value
        self.unchanged_locals.discard(name)
        raw = self.frame_values.pop(name, None)
        if raw is not None and name in self.passed_cells:
            self.cell_objects.setdefault(name, raw)

    def global_source(self, name: str) -> tuple[Source | None, bool]:
        """Where a global of this code is read from, and whether reading it must be guarded."""
        if self.f_globals is self.root.f_globals:
            return GlobalSource(name), True
        if self.trusted:
            return None, False
        return ItemSource(self.globals_dict_source(), name), True

    def globals_dict_source(self) -> Source:
        """Where the transformed code (and its guards) find this code's globals dict, when it is
        not the compiled frame's own: the function's `__globals__` when the function has a source;
        else its module, found by name in sys.modules (torch._dynamo's import source), or the dict
        itself (a scope that is no module's), made a global of the compiled frame."""
        if self.fn_source is not None:
            return AttrSource(self.fn_source, "__globals__")
        module = sys.modules.get(self.f_globals.get("__name__"))
        if isinstance(module, types.ModuleType) and module.__dict__ is self.f_globals:
            return AttrSource(self.root.install_global(module), "__dict__")
        return self.root.install_global(self.f_globals)

    def install_global(self, value: Any) -> GlobalSource:
        """A global of the compiled frame holding `value`, so that guards and the transformed code
        reach an object the frame itself cannot name (a module another function reads its globals
        from, a function reached without a source): a module under its own name
        (`___pyframe_module_transformers_dot_cache_utils`), anything else by id. Only this trace's
        own code reads these names; the global keeps `value` alive, so its id stays its own."""
        if isinstance(value, types.ModuleType):
            name = "___pyframe_module_" + value.__name__.replace(".", "_dot_")
            if self.f_globals.get(name, value) is not value:  # (another module of that name: reloaded)
                name += f"_{id(value):x}"
        else:
            name = f"___pyframe_{type(value).__name__}_{id(value):x}"
        self.f_globals[name] = value
        return GlobalSource(name)

    def function_source(self) -> Source | None:
        """The source of the function this translator inlines, made when first needed: one reached
        without a source is made a global of the compiled frame (its closure cells, defaults and
        attributes are then read, and guarded, through it). None for the compiled frame and for
        functions made while tracing (their cells are known otherwise)."""
        if self.fn_source is None and self.fn is not None:
            self.fn_source = self.root.install_global(self.fn)
        return self.fn_source

    def read_global(self, name: str) -> VariableTracker:
        stored = self.side_effects.load_global(self.f_globals, name)
        if stored is not None:  # assigned earlier in this trace (before any tracker read earlier)
            return stored
        tracker = self.immutable_globals.get(name)
        if tracker is not None:  # `torch` on every line: what wrap() gives again, without its lookups
            return tracker
        if name in self.f_globals:
            source, guard = self.global_source(name)
            tracker = self.wrap(self.f_globals[name], source, guard)
            if source is None and isinstance(tracker, UserObjectVariable):
                # An object torch's own code keeps in a global (pytree's _LEAF_SPEC): read without
                # a guard, but from where the transformed code finds it, should it outlive the trace
                tracker = self.wrap(self.f_globals[name], ItemSource(self.globals_dict_source(), name), False)
        elif name in self.f_builtins:
            tracker = self.wrap(self.f_builtins[name], BuiltinSource(name), not self.trusted)
            if not self.trusted:  # `len = my_len` in the module later shadows the builtin
                self.output.guards.add(self.global_source(name)[0], GuardKind.DICT_CONTAINS_MATCH, False)
        else:
            raise Unsupported(f"name {name!r} is not defined")
        if is_immutable_tracker(tracker):
            self.immutable_globals[name] = tracker
        return tracker

    # -- inlining ------------------------------------------------------------------------------
    def inline_call(self, fn: types.FunctionType, args: list[VariableTracker],
                    kwargs: dict[str, VariableTracker], fn_source: Source | None = None,
                    output: OutputGraph | None = None) -> VariableTracker:
        """Trace a call to a Python function into this frame's graph (or into `output`, a graph of
        its own: an autograd.Function's forward or backward, and every call made from it)."""
        if fn is _MODULE_GETATTR and len(args) == 2 and not kwargs and isinstance(args[0], NNModuleVariable) \
                and args[1].is_python_constant():
            # `super().__getattr__(name)` in a module's own __getattr__: what it finds is modelled
            return args[0].module_getattr(self, args[1].as_python_constant(), through_dict=True)
        if fn.__dict__.get("_dynamo_marked_constant") is True:
            return self.call_marked_constant(fn, args, kwargs)
        if self.depth >= config.inline_depth_limit:
            raise Unsupported(f"inlining deeper than {config.inline_depth_limit} calls ({fn.__qualname__})")
        check_inlinable(fn.__code__)
        skipped = trace_rules.call_skip_reason(fn.__code__)
        if skipped is not None:
            raise Unsupported(skipped)
        if fn_source is not None:  # `fn.__code__ = other.__code__` keeps the function's identity
            (output or self.output).guards.add_code(fn_source, fn.__code__)
        child = InstructionTranslator(fn.__code__, fn.__globals__, self.f_builtins, fn.__closure__,
                                      output or self.output, parent=self, fn_source=fn_source)
        child.fn = fn
        child.locals = bind_arguments(self, fn, args, kwargs, fn_source)
        return child.run_call()

    def call_marked_constant(self, fn: types.FunctionType, args: list[VariableTracker],
                             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        """A function marked by torch._dynamo.assume_constant_result (its `_dynamo_marked_constant`,
        which libraries set without importing torch: transformers' install probes): called for real
        while tracing, on constant arguments, its result a constant of the trace, as torch._dynamo
        does. Its code is not traced (an install probe reads importlib's metadata)."""
        if not all(a.is_python_constant() for a in (*args, *kwargs.values())):
            raise Unsupported(f"{fn.__qualname__}, marked a constant result, called with values unknown while tracing")
        pargs = [a.as_python_constant() for a in args]
        pkwargs = {k: v.as_python_constant() for k, v in kwargs.items()}
        try:
            result = fn(*pargs, **pkwargs)
        except Exception as e:  # raised again when the frame runs as Python
            raise Unsupported(f"{fn.__qualname__}, marked a constant result, raises {type(e).__name__}: {e}") from e
        return self.wrap_constant(result)

    def inline_nested(self, fn: NestedFunctionVariable, args: list[VariableTracker],
                      kwargs: dict[str, VariableTracker]) -> VariableTracker:
        """Trace a call to a function made while tracing (a nested def, lambda or comprehension)."""
        if self.depth >= config.inline_depth_limit:
            raise Unsupported(f"inlining deeper than {config.inline_depth_limit} calls ({fn.code.co_name})")
        check_inlinable(fn.code)
        if not fn.code.co_flags & inspect.CO_GENERATOR:  # (a generator function is not converted)
            realize_as_a_function(self, fn)  # as torch._dynamo's check before inlining it does
        child = InstructionTranslator(fn.code, fn.f_globals, self.f_builtins, None, self.output,
                                      parent=self, fn_source=fn.fn_source)
        child.closure_refs = dict(zip(fn.code.co_freevars, fn.closure))
        child.locals = bind_arguments(self, fn.signature_function(), args, kwargs)
        return child.run_call()

    def run_call(self) -> VariableTracker:
        """Run an inlined call: its return value; for a generator function, the generator, whose
        body runs as its consumer asks for items (GeneratorVariable)."""
        if self.code.co_flags & inspect.CO_GENERATOR:
            self.is_generator = True
            generator = GeneratorVariable(self)
            self.root.generators.append(generator)
            return generator
        return self.run()

    def paused_in_a_try(self) -> bool:
        """An inlined generator paused at a yield where GeneratorExit would run its code (a
        `finally`, an `except` that catches it, a `with`): closing it, as CPython does when the
        generator is dropped, would run that handler."""
        if not self.suspended:
            return False
        builtins_dict = self.f_builtins

        def resolve(name: str) -> Any:
            return self.f_globals[name] if name in self.f_globals else builtins_dict.get(name)

        return reaches_a_handler(self.instructions, self.ip - 1, GeneratorExit, resolve)




def check_inlinable(code: types.CodeType) -> None:
    """Generator functions are inlined (their generator runs lazily, to the next yield each time its
    consumer asks: run_call, ops_generators.py); coroutines and async generators are not."""
    if code.co_flags & (inspect.CO_COROUTINE | inspect.CO_ITERABLE_COROUTINE | inspect.CO_ASYNC_GENERATOR):
        raise Unsupported(f"call to coroutine function {code.co_qualname}")

"""Weak references: `weakref.ref` objects read from the frame, and made by the traced code.

A weak reference is a small immutable object: calling it (`r()`) gives its referent while that
object lives and None once it died; `r.__callback__` is the function (or None) Python calls with
the weakref when the referent dies. A module may keep weak references to its own state (nn.LSTM's
`_flat_weight_refs`, one per parameter, called in every forward to see whether the parameters
were replaced), so a trace meets them as values of the frame.

Read from the frame, a weakref is guarded by its type (TYPE_MATCH, as torch._dynamo guards it);
its referent is read when the trace first calls it, on a source of its own (WeakRefCallSource:
`L['self']._flat_weight_refs[0]()`, whose guard node reads the referent without calling Python),
and wrapped there like any value of the frame: a tensor becomes a graph input with its
TENSOR_MATCH, a module is pinned by identity, and a referent found dead is the constant None,
guarded to be None (NONE_MATCH) so that the code compiled for a live one never runs for a dead
one, nor the reverse.

Made in the traced code (`weakref.ref(obj)`), a weakref stands for its referent's tracker, and a
call gives that tracker back. If it outlives the frame (returned, stored on an object), the
transformed code makes it again as `weakref.ref(obj)`, which in CPython also gives the very
object the frame would have made: a weakref without a callback is shared, one per referent (the
"basic ref", reused by every `weakref.ref(obj)` while it lives). `weakref.ref` of an object whose
type takes no weak references (an int, a tuple, a list...) raises TypeError as Python does; of a
tensor the graph makes, or with a callback, the graph breaks (Python makes it).

`r1 is r2` and `r1 == r2` follow CPython: two weakrefs without a callback to one live object are
one object (same_weakref), and `==` compares the referents while both live, else the weakrefs'
identity (weakref_comparisons).

What the trace cannot see is CPython's reference counting: an object made in the traced code and
held by nothing but a weakref (`weakref.ref(Point())()`) is gone at once in Python, while the trace
still holds its tracker and gives it back (as torch._dynamo does).

Only the exact type `weakref.ref` is modelled: a subclass (weakref.KeyedRef, WeakMethod, whose
call is Python code) stays a user object.
"""
from __future__ import annotations

import operator
import weakref
from typing import Any, Callable

from ...exc import Unsupported
from ...guards import GuardKind
from ...source import AttrSource, Source, WeakRefCallSource
from .base import UNKNOWN_OBJECT, VariableTracker
from .constant import ConstantVariable
from .exceptions import raise_symbolic
from .objects import register_constructor
from .tensor import SymNodeVariable, TensorVariable


class WeakRefVariable(VariableTracker):
    """A `weakref.ref`: read from the frame (`value` is the real weakref, its referent wrapped
    when first called), or made while tracing (`value` is None, `referent` the tracker of the
    object it refers to)."""

    def __init__(self, value: weakref.ref | None = None, referent: VariableTracker | None = None,
                 source: Source | None = None, guard: bool = True):
        super().__init__(source)
        self.value = value
        self._referent = referent
        self.guard = guard  # (read from the frame: whether the referent is guarded too)

    @property
    def made_here(self) -> bool:
        return self.value is None

    def python_type(self) -> type:
        return weakref.ref

    def real_object(self) -> Any:
        return self.value if self.value is not None else UNKNOWN_OBJECT

    def truth(self) -> bool:
        return True  # (no __bool__ nor __len__: every weakref is true, dead or alive)

    def referent(self, tx) -> VariableTracker:
        """What `r()` gives: read from the frame, the referent as it is now, wrapped on the source
        `r()` (its guards, and the constant None if it died); made here, the referent's tracker."""
        if self._referent is None:
            source = WeakRefCallSource(self.source) if self.source is not None else None
            self._referent = tx.wrap(self.value(), source, self.guard and source is not None)
        return self._referent

    def is_dead(self, tx) -> bool:
        found = self.referent(tx)
        return isinstance(found, ConstantVariable) and found.value is None

    def callback(self, tx) -> VariableTracker:
        """`r.__callback__`: read (and guarded) through the frame's weakref; None for one made here
        (a callback is left to Python: make_weakref)."""
        if self.made_here:
            return ConstantVariable(None)
        source = AttrSource(self.source, "__callback__") if self.source is not None else None
        return tx.wrap(self.value.__callback__, source, self.guard and source is not None)

    def call(self, tx, args, kwargs) -> VariableTracker:
        if kwargs:
            raise_symbolic(TypeError, "weakref() takes no keyword arguments")
        if args:
            raise_symbolic(TypeError, f"weakref expected 0 arguments, got {len(args)}")
        return self.referent(tx)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name == "__callback__":
            return self.callback(tx)
        if name == "__class__":
            return tx.wrap(weakref.ref, None, guard=False)
        return super().var_getattr(tx, name)

    def rebuilt_from(self) -> list[VariableTracker]:
        return [self._referent] if self.made_here else []

    def reconstruct(self, cg: Any) -> None:
        """Read from the frame: loaded from its source. Made here: `weakref.ref(obj)`, the basic
        ref of obj (the one the frame would have made)."""
        if not self.made_here:
            super().reconstruct(cg)
            return
        cg.push_null()
        cg.load_const(weakref.ref)
        self._referent.reconstruct(cg)
        cg.call(1)

    def describe(self) -> str:
        if self.made_here:
            return f"a weakref.ref made in the frame to {self._referent.describe()}"
        where = f" read from {self.source.name()}" if self.source is not None else ""
        return f"a weakref.ref{where}"

    def __repr__(self) -> str:
        if self.made_here:
            return f"WeakRefVariable(to {self._referent!r})"
        return super().__repr__()


def wrap_weakref(tx, value: Any, source: Source | None, guard: bool, guards: Any) -> VariableTracker | None:
    """A `weakref.ref` read from the frame (variables/builder.py's kinds): guarded by its type,
    its referent read when it is called."""
    if type(value) is not weakref.ref:
        return None
    if guards is not None:
        guards.add(source, GuardKind.TYPE_MATCH, weakref.ref)
    return WeakRefVariable(value, source=source, guard=guard)


def make_weakref(tx, cls: type, cls_source: Source | None, args, kwargs) -> VariableTracker:
    """`weakref.ref(obj)` called in the traced code (objects.py's constructors): the new weakref's
    tracker, its call giving back obj's. Python's errors where Python raises them; a callback, or
    a tensor the graph makes, is left to Python (a graph break)."""
    if kwargs:
        raise_symbolic(TypeError, "ref() takes no keyword arguments")
    if not 1 <= len(args) <= 2:
        raise_symbolic(TypeError, f"__new__ expected at {'least 1 argument' if not args else 'most 2 arguments'}, "
                                  f"got {len(args)}")
    if len(args) == 2 and not (isinstance(args[1], ConstantVariable) and args[1].value is None):
        raise Unsupported("weakref.ref with a callback (the callback runs when the referent dies)")
    obj = args[0]
    if isinstance(obj, TensorVariable) and (obj.source is None or obj.node.op != "placeholder"):
        raise Unsupported("weakref.ref of a tensor the graph makes")
    if isinstance(obj, SymNodeVariable):
        raise_symbolic(TypeError, f"cannot create weak reference to {obj.python_type().__name__!r} object")
    kind = obj.python_type()
    if not kind.__weakrefoffset__:
        raise_symbolic(TypeError, f"cannot create weak reference to {kind.__name__!r} object")
    if isinstance(obj, WeakRefVariable):  # (a weakref takes no weak references: caught above)
        raise Unsupported("weakref.ref of a weakref")
    return WeakRefVariable(referent=obj)


def same_weakref(tx, a: VariableTracker, b: VariableTracker,
                 same_object: Callable[[Any, VariableTracker, VariableTracker], bool]) -> bool | None:
    """`a is b` where one is a weakref made in the traced code; None where the real objects decide
    (both read from the frame, or no weakref made here). A weakref made here without a callback is
    the referent's basic ref: the same object as any other weakref.ref without a callback to the
    same live object (read from the frame, or made here), and no other object. `same_object`
    decides `x is y` for the referents (special_methods.identity's rules, with their guards)."""
    made = [vt for vt in (a, b) if isinstance(vt, WeakRefVariable) and vt.made_here]
    if not made:
        return None
    mine = made[0]
    other = b if mine is a else a
    if not isinstance(other, WeakRefVariable):
        return False  # (another type, or a weakref subclass: never a basic ref)
    other_callback = other.callback(tx)
    if not (isinstance(other_callback, ConstantVariable) and other_callback.value is None):
        return False  # a weakref with a callback is never shared
    if other.is_dead(tx):
        return False  # (mine's referent lives: the trace holds it)
    return same_object(tx, mine.referent(tx), other.referent(tx))


def weakref_comparisons(compare: Callable[[Any, Callable, VariableTracker, VariableTracker], VariableTracker],
                        identity: Callable[[bool], Callable]) -> dict[Callable, Callable]:
    """Handlers of `r1 == r2` and `r1 != r2` on two weakrefs (builtins.py's table), as weakref's
    rich comparison decides them: while both referents live, the referents compared (`compare(tx,
    op, a, b)` runs the operator as Python does: tensors give a tensor); once either died, the
    weakrefs' identity (`identity(negate)`, special_methods.py's `is` / `is not`)."""
    def handler_of(op: Callable, negate: bool) -> Callable:
        def handler(tx, a: VariableTracker, b: VariableTracker) -> VariableTracker | None:
            if not (isinstance(a, WeakRefVariable) and isinstance(b, WeakRefVariable)):
                return None
            if a.is_dead(tx) or b.is_dead(tx):
                return identity(negate)(tx, a, b)
            return compare(tx, op, a.referent(tx), b.referent(tx))
        return handler
    return {operator.eq: handler_of(operator.eq, False), operator.ne: handler_of(operator.ne, True)}


register_constructor(lambda cls: cls is weakref.ref, make_weakref)

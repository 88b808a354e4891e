"""Opcode handlers: structural pattern matching (`match` statements), CPython 3.11's semantics.

The compiler lowers each `case` to a few tests on the subject, then to ordinary loads, compares,
subscripts and unpacking (which the other mixins handle):

  sequence pattern  MATCH_SEQUENCE (is the subject's type flagged a sequence?), GET_LEN, then
                    UNPACK_SEQUENCE / UNPACK_EX or BINARY_SUBSCR with constant indices
  mapping pattern   MATCH_MAPPING, GET_LEN, MATCH_KEYS (a tuple of the values, or None), and for
                    `**rest` a copy of the subject with DELETE_SUBSCR of the matched keys
  class pattern     MATCH_CLASS (isinstance, then attributes named by `__match_args__` and by
                    the keyword sub-patterns: a tuple of them, or None)

Every answer is decided while tracing from what the trackers know: a value's type (guarded, or
fixed for values made in the trace), a dict's constant keys, attributes read as any other read.
Whatever cannot be decided raises Unsupported, so the frame breaks there and Python decides.
"""
from __future__ import annotations

from bytecode import Instr

from ..exc import Unsupported
from .variables import BuiltinVariable, ConstantVariable, DictVariable, TupleVariable, VariableTracker
from .variables.dict_keys import is_constant_key
from .variables.base import UNKNOWN_OBJECT
from .variables.object_builtins import lookup_attr
from .variables.exceptions import raise_symbolic
from .variables.realize import realize_as_a_constant_test

# Type flags (CPython's Include/object.h): what MATCH_SEQUENCE / MATCH_MAPPING test, and the flag
# of the builtin types whose single positional sub-pattern matches the subject itself (`int(x)`).
_TPFLAGS_SEQUENCE = 1 << 5
_TPFLAGS_MAPPING = 1 << 6
_TPFLAGS_MATCH_SELF = 1 << 22
_MISSING = object()  # MATCH_KEYS's default for `get`: a missing key


class MatchOps:
    def MATCH_SEQUENCE(self, inst: Instr) -> None:
        # The type's flag alone decides: list, tuple, range, deque, torch.Size, namedtuples and
        # collections.abc.Sequence subclasses have it; str, bytes, bytearray and tensors do not.
        self.push(ConstantVariable(bool(self.stack[-1].python_type().__flags__ & _TPFLAGS_SEQUENCE)))

    def MATCH_MAPPING(self, inst: Instr) -> None:
        self.push(ConstantVariable(bool(self.stack[-1].python_type().__flags__ & _TPFLAGS_MAPPING)))

    def GET_LEN(self, inst: Instr) -> None:
        subject = self.stack[-1]
        # torch._dynamo's GET_LEN first asks whether the subject is a constant, which realizes its
        # items in order up to the first that is not (a tensor, its graph input then)
        realize_as_a_constant_test(self, subject)
        self.push(BuiltinVariable(len).call(self, [subject], {}))

    def MATCH_KEYS(self, inst: Instr) -> None:
        """Push the values of the subject (TOS1) under the keys of the tuple TOS, or None when
        one is missing. CPython looks them up with the subject's `get` (a defaultdict makes no
        value for a missing key), and a key given twice raises ValueError."""
        keys_var, subject = self.stack[-1], self.stack[-2]
        if not keys_var.is_python_constant():
            raise Unsupported("mapping pattern with a key unknown while tracing")
        keys = keys_var.as_python_constant()
        values: list[VariableTracker] = []
        seen = set()
        for key in keys:  # in CPython's order: a duplicate after a missing key goes unnoticed
            if key in seen:
                raise_symbolic(ValueError, f"mapping pattern checks duplicate key ({key!r})")
            seen.add(key)
            value = self._mapping_get(subject, key)
            if value is None:
                self.push(ConstantVariable(None))
                return
            values.append(value)
        self.push(TupleVariable(values))

    def _mapping_get(self, subject: VariableTracker, key) -> VariableTracker | None:
        """`subject.get(key, <missing>)`: the value, or None for a missing key."""
        if isinstance(subject, DictVariable):
            if not is_constant_key(key):  # a class, a function... (a value pattern): by identity
                key = subject._key(self, self.wrap_constant(key))
            return subject.items.get(key)
        # a user Mapping: its `get` inlined, with a default that no value of the mapping can be
        default = ConstantVariable(_MISSING)
        value = subject.call_method(self, "get", [self.wrap_constant(key), default], {})
        if value is default or value.real_object() is _MISSING:  # (a `get` folded on constants)
            return None
        return value

    def MATCH_CLASS(self, inst: Instr) -> None:
        """`case cls(p0, p1, k=p2)`: pops the keyword names, the class and the subject; pushes
        the attributes to match the sub-patterns against (a tuple), or None if the subject is not
        an instance of cls or lacks one of them (an AttributeError is a failed match)."""
        names_var, cls_var, subject = self.pop(), self.pop(), self.pop()
        cls = cls_var.real_object()
        if cls is UNKNOWN_OBJECT:
            raise Unsupported(f"class pattern on {cls_var}")
        if not isinstance(cls, type):
            raise_symbolic(TypeError, "called match pattern must be a type")
        attrs = None
        if BuiltinVariable(isinstance).call(self, [subject, cls_var], {}).as_python_constant():
            # (the keyword names are a constant tuple of str)
            attrs = self._match_class_attrs(subject, cls, cls_var, inst.arg, names_var.as_python_constant())
        self.push(ConstantVariable(None) if attrs is None else TupleVariable(attrs))

    def _match_class_attrs(self, subject: VariableTracker, cls: type, cls_var: VariableTracker, count: int,
                           keywords: tuple[str, ...]) -> list[VariableTracker] | None:
        """The attributes of `subject`, an instance of cls, for `count` positional sub-patterns and
        the keyword ones, in CPython's order (a missing one stops the match: None)."""
        names: list[str] = []
        match_self = False
        if count:
            match_args = self._match_args(cls, cls_var)
            # A builtin type without __match_args__ (int, str, tuple, dict...) matches its one
            # positional sub-pattern against the subject itself.
            match_self = match_args is None and bool(cls.__flags__ & _TPFLAGS_MATCH_SELF)
            match_args = match_args or ()
            allowed = 1 if match_self else len(match_args)
            if allowed < count:
                plural = "" if allowed == 1 else "s"
                raise_symbolic(TypeError, f"{cls.__name__}() accepts {allowed} positional sub-pattern{plural} "
                                          f"({count} given)")
            if not match_self:
                names.extend(match_args[:count])
        attrs = [subject] if match_self else []
        names.extend(keywords)
        seen: set[str] = set()
        for name in names:
            if type(name) is not str:  # (only __match_args__ can hold one)
                raise_symbolic(TypeError, f"__match_args__ elements must be strings (got {type(name).__name__})")
            if name in seen:
                raise_symbolic(TypeError, f"{cls.__name__}() got multiple sub-patterns for attribute {name!r}")
            seen.add(name)
            value = lookup_attr(self, subject, name)
            if value is None:
                return None
            attrs.append(value)
        return attrs

    def _match_args(self, cls: type, cls_var: VariableTracker) -> tuple | None:
        """`cls.__match_args__` (read through the class's tracker, so guarded with it), or None
        when the class has none; a value that is not a tuple raises TypeError as CPython does."""
        present = lookup_attr(self, cls_var, "__match_args__")
        if present is None:
            return None
        if not present.is_python_constant():
            raise Unsupported(f"{cls.__name__}.__match_args__ unknown while tracing")
        match_args = present.as_python_constant()
        if type(match_args) is not tuple:
            raise_symbolic(TypeError, f"{cls.__name__}.__match_args__ must be a tuple "
                                      f"(got {type(match_args).__name__})")
        return match_args

"""Opcode handlers: building and unpacking containers and strings (BUILD_*, LIST_APPEND,
DICT_UPDATE, UNPACK_*, FORMAT_VALUE)."""
from __future__ import annotations

from bytecode import Instr

from ..exc import Unsupported
from .variables import ConstantVariable, DictVariable, ListVariable, TupleVariable, VariableTracker
from .variables.dict_subclass import DictSubclassMixin, mapping_or_pairs
from .variables.sets import SetVariable

_FORMAT_CONVERSIONS = {0: None, 1: str, 2: repr, 3: ascii}


class BuildOps:
    """Tuples, lists, sets, dicts and f-strings made in the frame; sequences unpacked."""

    def BUILD_TUPLE(self, inst: Instr) -> None:
        self.push(TupleVariable(self.popn(inst.arg)))

    def BUILD_LIST(self, inst: Instr) -> None:
        self.push(ListVariable(self.popn(inst.arg)))

    def BUILD_SET(self, inst: Instr) -> None:
        self.push(SetVariable.of(self, self.popn(inst.arg)))

    def SET_ADD(self, inst: Instr) -> None:
        value = self.pop()
        self.stack[-inst.arg].call_method(self, "add", [value], {})

    def SET_UPDATE(self, inst: Instr) -> None:
        values = self.pop()
        self.stack[-inst.arg].call_method(self, "update", [values], {})

    def BUILD_MAP(self, inst: Instr) -> None:
        flat = self.popn(2 * inst.arg)
        built = DictVariable({})
        for i in range(0, len(flat), 2):  # in order: a later equal key keeps the first key object
            built.store(self, flat[i], flat[i + 1])
        self.push(built)

    def BUILD_CONST_KEY_MAP(self, inst: Instr) -> None:
        keys = self.pop().as_python_constant()
        self.push(DictVariable(dict(zip(keys, self.popn(inst.arg)))))

    def _growing(self, depth: int) -> VariableTracker:
        """The container LIST_APPEND, LIST_EXTEND, MAP_ADD or DICT_UPDATE adds to. It is one the
        code is building, but in a resume function it may be a frame value (`{**create()}` broken
        at `create()`: the empty dict is passed in on the stack): then its growth is a mutation,
        replayed on the real one."""
        target = self.stack[-depth]
        if target.source is not None:
            self.side_effects.mutate(target)
        return target

    def LIST_APPEND(self, inst: Instr) -> None:
        value = self.pop()
        self._growing(inst.arg).items.append(value)

    def LIST_EXTEND(self, inst: Instr) -> None:
        values = self.pop()
        self._growing(inst.arg).items.extend(values.unpack(self))

    def LIST_TO_TUPLE(self, inst: Instr) -> None:
        self.push(TupleVariable(self.pop().unpack(self)))

    def MAP_ADD(self, inst: Instr) -> None:
        value, key = self.pop(), self.pop()
        self._growing(inst.arg).store(self, key, value)

    def DICT_UPDATE(self, inst: Instr) -> None:
        other = self.pop()
        if isinstance(other, DictSubclassMixin):  # `{**obj}`, `f(**obj)`: read as dict.update reads it
            self._growing(inst.arg).items.update(mapping_or_pairs(self, other, dict_merge=True))
            return
        if not isinstance(other, DictVariable):
            raise Unsupported(f"dict update from {other}")
        self._growing(inst.arg).update(self, other)

    DICT_MERGE = DICT_UPDATE

    def FORMAT_VALUE(self, inst: Instr) -> None:
        flags = inst.arg
        spec = self.pop().as_python_constant() if flags & 0x04 else ""
        value = self.pop()
        # (an instance of an int, float or str subclass that formats as its base: its value)
        value = value.builtin_scalar() if not value.is_python_constant() and value.builtin_scalar() is not None \
            else value.as_python_constant()
        conversion = _FORMAT_CONVERSIONS[flags & 0x03]
        if conversion is not None:
            value = conversion(value)
        self.push(ConstantVariable(format(value, spec)))

    def BUILD_STRING(self, inst: Instr) -> None:
        self.push(ConstantVariable("".join(p.as_python_constant() for p in self.popn(inst.arg))))

    def UNPACK_SEQUENCE(self, inst: Instr) -> None:
        items = self.pop().unpack(self)
        if len(items) != inst.arg:
            raise Unsupported(f"unpacking {len(items)} values into {inst.arg}")
        self.stack.extend(reversed(items))

    def UNPACK_EX(self, inst: Instr) -> None:
        before, after = inst.arg & 0xFF, inst.arg >> 8
        items = self.pop().unpack(self)
        if len(items) < before + after:
            raise Unsupported(f"unpacking {len(items)} values into {before + after} or more")
        middle = ListVariable(items[before:len(items) - after])
        self.stack.extend(reversed([*items[:before], middle, *items[len(items) - after:]]))

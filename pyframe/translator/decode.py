"""A fast reader of CPython 3.11 code objects into the `bytecode` library's instructions.

`fast_decode(code)` returns what `list(Bytecode.from_code(code, conserve_exception_block_stackdepth=True))`
returns: the same sequence of Instr, Label, TryBegin and TryEnd objects, with the same names, arguments
(constants, names, `(push_null, name)` for LOAD_GLOBAL, CellVar/FreeVar, Compare, BinaryOp, the Label
placed at each jump's target), locations and try ranges. The library builds a ConcreteBytecode first,
then converts it, validating every argument on the way; this walks `co_code` once, with per-opcode
tables, and makes the objects without their constructors' checks (what the constructors would set is
set directly: the values come from a valid code object).

Setting the objects' fields directly means setting their private attributes (`_name`, `_arg`,
`_location`...), which the library may change in any release: pyproject.toml pins `bytecode` to the
version this was checked against (0.19.1), and tests/test_decode.py compares the two decoders on
every code object of the corpus and the standard library, so a new version is checked before the pin
moves.

What the library does, and what is reproduced here (bytecode 0.19.1, CPython 3.11):

- one instruction per code unit; EXTENDED_ARG units are folded into the next instruction's argument
  (the instruction then starts, for jumps and labels, at its first EXTENDED_ARG); CACHE units are
  dropped, but they still count as positions where a label, a TryBegin or a TryEnd may be placed;
- each instruction's location is its own unit's `co_positions()` entry;
- a Label is placed before the instruction (or cache unit) at each offset some jump or exception
  handler targets; a TryBegin before the unit where an exception table entry starts (after the
  label), a TryEnd after the unit where it stops (its last unit, often a CACHE); an entry whose end
  comes before its start gets both at its end.

Anything outside that model (an opcode it does not know, EXTENDED_ARG before an instruction without
an argument or at the end of the code, an index out of range, a jump into an EXTENDED_ARG prefix or
past the end, try ranges that would nest) raises `_NotModelled`: `decode()` then asks the library,
which gives its answer or its error.
"""
from __future__ import annotations

import dis
import itertools
import opcode as _opcode
import re
import sys
import types
from typing import Any

from bytecode import BinaryOp, CellVar, Compare, FreeVar, Instr, Label, TryBegin, TryEnd
from bytecode.instr import HAS_JUMP, UNSET, InstrLocation

__all__ = ["fast_decode"]


class _NotModelled(Exception):
    """The fast decoder met something it does not reproduce: use the library."""


# The decoder is written for the 3.11 instruction set (LOAD_GLOBAL's low bit, relative jumps only,
# COMPARE_OP's plain argument, inline CACHE units); other versions go to the library.
supported = sys.version_info[:2] == (3, 11)

_EXTENDED_ARG = _opcode.EXTENDED_ARG
_NOP = _opcode.opmap["NOP"]
_HAVE_ARGUMENT = _opcode.HAVE_ARGUMENT

# What each opcode's argument becomes.
(_NOARG, _INT, _CONST, _LOCAL, _NAME, _GLOBAL, _FREE, _COMPARE, _BINOP, _FORWARD, _BACKWARD,
 _UNKNOWN) = range(12)


def _kinds() -> list[int]:
    kinds = [_UNKNOWN] * 256
    for op in range(256):
        name = _opcode.opname[op]
        if name.startswith("<") or op == 0:  # (CACHE units never reach the table: they are skipped)
            continue
        kinds[op] = _NOARG if op < _HAVE_ARGUMENT else _INT
    for op in _opcode.hasconst:
        kinds[op] = _CONST
    for op in _opcode.haslocal:
        kinds[op] = _LOCAL
    for op in _opcode.hasname:
        kinds[op] = _NAME
    kinds[_opcode.opmap["LOAD_GLOBAL"]] = _GLOBAL
    for op in _opcode.hasfree:
        kinds[op] = _FREE
    for op in _opcode.hascompare:
        kinds[op] = _COMPARE
    kinds[_opcode.opmap["BINARY_OP"]] = _BINOP
    for op in _opcode.hasjrel:
        kinds[op] = _BACKWARD if "BACKWARD" in _opcode.opname[op] else _FORWARD
    kinds[_EXTENDED_ARG] = _UNKNOWN  # handled before the table is read
    return kinds


if supported:
    _KIND = _kinds()
    _CACHES = list(dis._inline_cache_entries)  # CACHE units after each opcode
    _OPNAME = list(_opcode.opname)
    _IS_JUMP = [op in HAS_JUMP for op in range(256)]
    # Any jump opcode, found in the opcode bytes (`co_code[::2]`) without walking them in Python.
    _JUMP_RE = re.compile(b"[" + b"".join(re.escape(bytes([op])) for op in _opcode.hasjrel) + b"]")
    # (these tables only hold what the instruction set defines; an argument past them is _NotModelled)
    _COMPARES = tuple(Compare(i) for i in range(len(_opcode.cmp_op)))
    _BINOPS = tuple(BinaryOp(i) for i in range(len(_opcode._nb_ops)))
    assert _COMPARES == tuple(Compare) and _BINOPS == tuple(BinaryOp)
    assert not _opcode.hasjabs

_new = object.__new__
_set_lineno = InstrLocation.__dict__["lineno"].__set__
_set_end_lineno = InstrLocation.__dict__["end_lineno"].__set__
_set_col_offset = InstrLocation.__dict__["col_offset"].__set__
_set_end_col_offset = InstrLocation.__dict__["end_col_offset"].__set__
_MAX_ARG = 2147483647  # what ConcreteInstr accepts for an argument rebuilt from EXTENDED_ARGs
_END = 1 << 62  # past any event offset


def _exception_table(table: bytes) -> list[tuple[int, int, int, int, bool]]:
    """(start, stop (inclusive), target, stack depth, push_lasti) of each complete entry, in code units."""
    entries = []
    values: list[int] = []
    i, n = 0, len(table)
    while i < n:
        b = table[i]
        i += 1
        value = b & 63
        while b & 64:
            if i >= n:  # an incomplete varint: the library stops there too
                return entries
            b = table[i]
            i += 1
            value = (value << 6) | (b & 63)
        values.append(value)
        if len(values) == 4:
            start, length, target, depth_lasti = values
            entries.append((start, start + length - 1, target, depth_lasti >> 1, bool(depth_lasti & 1)))
            values = []
    return entries


def fast_decode(code: types.CodeType) -> list[Any]:
    """`list(Bytecode.from_code(code, conserve_exception_block_stackdepth=True))`, built directly.
    Raises _NotModelled for what it does not reproduce."""
    if not supported:
        raise _NotModelled("not CPython 3.11")
    try:
        return _decode(code)
    except (IndexError, KeyError) as e:  # an argument out of its table's range
        raise _NotModelled(f"{type(e).__name__}: {e}") from None


def _decode(code: types.CodeType) -> list[Any]:
    """The decoder itself: the labels of jump and handler targets, the try ranges' events, then one
    walk over the opcode units making each instruction (and placing the events met on the way)."""
    raw = code.co_code
    ops = raw[::2]
    args = raw[1::2]
    nbytes = len(raw)
    kinds = _KIND
    labels, jump_labels = _jump_labels(ops, args)
    entries, starts, stops, events = _try_events(code, labels)
    next_event = events[0]
    event_index = 0
    began: dict[int, TryBegin] = {}
    placed = 0  # labels placed
    in_try = False  # a TryBegin without its TryEnd yet (two would make the library's iteration fail)

    consts = code.co_consts
    names = code.co_names
    varnames = code.co_varnames
    freevars = code.co_freevars
    cells = list(varnames) + [CellVar(name) for name in code.co_cellvars if name not in varnames]
    ncells = len(cells)
    compares = _COMPARES
    binops = _BINOPS
    opnames = _OPNAME
    is_jump = _IS_JUMP
    new = _new
    set_lineno, set_end_lineno = _set_lineno, _set_end_lineno
    set_col_offset, set_end_col_offset = _set_col_offset, _set_end_col_offset
    instr_cls = Instr
    loc_cls = InstrLocation
    locations: dict[tuple, InstrLocation] = {}
    out: list[Any] = []
    append = out.append

    # The opcode units only (CACHE is opcode 0): (byte offset, opcode, raw argument, position).
    # (a line table shorter than the code, an empty one for instance, gives None past its end)
    positions = itertools.chain(code.co_positions(), itertools.repeat(None))
    units = itertools.compress(zip(range(0, nbytes, 2), ops, args, positions), ops)
    for offset, op, arg, pos in units:
        first = offset  # where the instruction starts, its EXTENDED_ARGs included
        if op == _EXTENDED_ARG:
            offset, op, arg, pos = _fold_extended_args(offset, ops, args, units)
        if next_event <= offset:
            # Events since the previous instruction's opcode unit (after it, around its CACHE units),
            # then the one before this instruction; none inside its EXTENDED_ARG prefix.
            while next_event <= offset:
                key = next_event
                event_index += 1
                next_event = events[event_index]
                if first < key:
                    continue  # inside the EXTENDED_ARG prefix: the library never looks there
                placed, in_try = _place(key, out, labels, starts, stops, entries, began, placed, in_try)

        # The argument as the library gives it (one test per kind of argument, the commonest first).
        kind = kinds[op]
        if kind == _LOCAL:
            value = varnames[arg]
        elif kind == _CONST:
            value = consts[arg]
        elif kind == _NAME:
            value = names[arg]
        elif kind == _INT:
            value = arg
        elif kind == _NOARG:
            value = UNSET
        elif kind == _GLOBAL:
            value = (bool(arg & 1), names[arg >> 1])
        elif kind == _FORWARD or kind == _BACKWARD:
            value = jump_labels[offset]
        elif kind == _BINOP:
            value = binops[arg]
        elif kind == _COMPARE:
            value = compares[arg]
        elif kind == _FREE:
            if arg < ncells:
                value = cells[arg]
                if type(value) is str:
                    value = CellVar(value)
            else:
                value = FreeVar(freevars[arg - ncells])
        else:
            raise _NotModelled(f"opcode {op} ({opnames[op]})")

        location = locations.get(pos)
        if location is None:  # (most instructions have a position of their own: made inline)
            location = locations[pos] = new(loc_cls)
            if pos is None:
                pos = _missing_position(code, ops)
            set_lineno(location, pos[0])
            set_end_lineno(location, pos[1])
            set_col_offset(location, pos[2])
            set_end_col_offset(location, pos[3])
        # The fields Instr's constructor would set after its checks (private: see the module's
        # docstring on the pinned version).
        instr = new(instr_cls)
        instr._name = opnames[op]
        instr._opcode = op
        instr._is_jump = is_jump[op]
        instr._arg = value
        instr._location = location
        append(instr)

    # Events after the last instruction's opcode unit, up to the end of the code.
    while next_event < nbytes:
        placed, in_try = _place(next_event, out, labels, starts, stops, entries, began, placed, in_try)
        event_index += 1
        next_event = events[event_index]

    if placed != len(labels):
        raise _NotModelled("a jump or handler target is not the start of an instruction")
    return out


def _jump_labels(ops: bytes, args: bytes) -> tuple[dict[int, Label], dict[int, Label]]:
    """A label per offset a jump targets (offsets are bytes: 2 * code unit), and each jump's label by
    the offset of its opcode unit."""
    kinds, caches = _KIND, _CACHES
    labels: dict[int, Label] = {}      # target offset -> its label
    jump_labels: dict[int, Label] = {}  # offset of a jump's opcode unit -> its target's label
    for match in _JUMP_RE.finditer(ops):
        u = match.start()
        op = ops[u]
        arg = args[u]
        j, shift = u - 1, 8
        while j >= 0 and ops[j] == _EXTENDED_ARG:
            arg |= args[j] << shift
            shift += 8
            j -= 1
        step = u + 1 + caches[op]
        target = 2 * (step + arg if kinds[op] == _FORWARD else step - arg)
        label = labels.get(target)
        if label is None:
            label = labels[target] = Label()
        jump_labels[2 * u] = label
    return labels, jump_labels


def _try_events(code: types.CodeType, labels: dict[int, Label]) -> tuple[list, dict[int, int], dict[int, list[int]],
                                                                         list[int]]:
    """The exception table's entries; where each starts and stops; a label added at each handler;
    and the events in the order the library meets them: "before unit u" (a label, then a
    TryBegin) has key 2u, "after unit u" (TryEnds) 2u + 1, ending with _END."""
    entries = _exception_table(code.co_exceptiontable)
    starts: dict[int, int] = {}       # offset -> entry index (the last entry starting there, as the library)
    stops: dict[int, list[int]] = {}  # offset + 1 -> indices of the entries whose last unit is there
    for index, (start, stop, target, _, _) in enumerate(entries):
        starts[2 * start] = index
        stops.setdefault(2 * stop + 1, []).append(index)
        if 2 * target not in labels:
            labels[2 * target] = Label()
    events = sorted(key for key in set(labels).union(starts, stops) if key >= 0)
    events.append(_END)
    return entries, starts, stops, events


def _fold_extended_args(offset: int, ops: bytes, args: bytes, units: Any) -> tuple[int, int, int, Any]:
    """The instruction an EXTENDED_ARG prefix at `offset` belongs to: (its offset, opcode, full
    argument, position), the prefix's units consumed from `units`."""
    u = offset >> 1
    arg = 0
    while u < len(ops) and ops[u] == _EXTENDED_ARG:
        arg = (arg << 8) | args[u]
        u += 1
    if u >= len(ops):
        raise _NotModelled("EXTENDED_ARG at the end of the code")
    for _ in range(u - (offset >> 1)):
        offset, op, _, pos = next(units)
    if offset != 2 * u:  # (a CACHE unit, skipped by `units`)
        raise _NotModelled("EXTENDED_ARG before CACHE")
    if op == _NOP:
        arg = 0
    elif op < _HAVE_ARGUMENT:
        raise _NotModelled(f"EXTENDED_ARG before {_OPNAME[op]}")
    else:
        arg = (arg << 8) | args[u]
        if arg > _MAX_ARG:
            raise _NotModelled("argument out of range")
    return offset, op, arg, pos


def _missing_position(code: types.CodeType, ops: bytes) -> tuple:
    """The location the library gives the instructions past the end of the line table: the line of
    the last unit before them that has one (EXTENDED_ARG units aside), else the first line."""
    known = list(code.co_positions())
    lineno = code.co_firstlineno
    for unit in range(len(known) - 1, -1, -1):
        if ops[unit] != _EXTENDED_ARG and known[unit][0] is not None:
            lineno = known[unit][0]
            break
    return (lineno, None, None, None)


def _place(key: int, out: list, labels: dict, starts: dict, stops: dict, entries: list, began: dict,
           placed: int, in_try: bool) -> tuple[int, bool]:
    """Append the pseudo-instructions of one event: before unit key // 2 (even key: its label, then
    the TryBegin of the entry starting there) or after it (odd key: the TryEnds of the entries
    stopping there, last first)."""
    if not key & 1:
        label = labels.get(key)
        if label is not None:
            out.append(label)
            placed += 1
        index = starts.get(key)
        if index is not None and index not in began:
            if in_try:
                raise _NotModelled("nested try ranges")
            out.append(_begin(index, entries, labels, began))
            in_try = True
        return placed, in_try
    for index in reversed(stops.get(key, ())):
        begin = began.get(index)
        if begin is None:  # stops before it starts: both here
            if in_try:
                raise _NotModelled("nested try ranges")
            begin = _begin(index, entries, labels, began)
            out.append(begin)
        out.append(TryEnd(begin))
        in_try = False
    return placed, in_try


def _begin(index: int, entries: list, labels: dict, began: dict) -> TryBegin:
    _, _, target, depth, lasti = entries[index]
    begin = began[index] = TryBegin(labels[2 * target], lasti, depth)
    return begin

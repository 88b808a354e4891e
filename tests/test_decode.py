"""The fast decoder (pyframe/translator/decode.py) against the `bytecode` library it stands in for.

For every code object of many modules (the standard library's, torch.nn's, pyframe's own, the test
corpus), of generated sources exercising each construct (generators, coroutines, async generators,
comprehensions, match, try/except/finally, with, closures, EXTENDED_ARG) and of variants without
line numbers or assembled by the library, `fast_decode(code)` must equal
`list(Bytecode.from_code(code, conserve_exception_block_stackdepth=True))` element by element.
Hand-made malformed code must make it give up (and the library then answers, or fails) rather than
return something else.
"""
from __future__ import annotations

import glob
import importlib.util
import opcode
import os
import sys
import types

import pytest
import torch
from bytecode import Bytecode, Instr, Label, TryBegin, TryEnd
from bytecode.instr import InstrLocation

from pyframe.translator import decode as decode_module
from pyframe.translator import code_cache
from pyframe.translator.decode import _NotModelled, fast_decode

pytestmark = pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="the fast decoder reads 3.11 bytecode")

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TORCH = os.path.dirname(torch.__file__)

STDLIB_MODULES = [
    "json.decoder", "json.encoder", "json.scanner", "argparse", "asyncio.base_events", "asyncio.tasks",
    "asyncio.streams", "asyncio.locks", "asyncio.queues", "asyncio.taskgroups", "asyncio.timeouts",
    "typing", "dataclasses", "inspect", "collections", "re._parser", "re._compiler", "email.message",
    "email._header_value_parser", "email.utils", "email.feedparser", "http.client", "http.server",
    "http.cookiejar", "unittest.case", "unittest.mock", "unittest.loader", "contextlib", "functools",
    "enum", "pathlib", "tarfile", "zipfile", "_pydecimal", "difflib", "ast", "traceback", "logging",
    "concurrent.futures._base", "concurrent.futures.thread", "importlib.metadata", "pprint",
    "string", "textwrap", "tokenize", "shutil", "subprocess", "statistics", "fractions",
]

# Constructs the library represents in its own way: each a few functions of one source.
CONSTRUCTS = '''
import contextlib

def gen(n):
    for i in range(n):
        x = yield i
        if x:
            yield from gen(x)
    return n

async def coro(a, lock):
    async with lock:
        await a
    async for item in a:
        try:
            await item
        except* ValueError as eg:
            pass
    return [await x async for x in a if x]

async def agen(a):
    try:
        async for x in a:
            yield x
    finally:
        await a.aclose()

def comprehensions(xs):
    return ([x for x in xs if x], {x: y for x, y in xs}, {x for x in xs}, (x for x in xs),
            [[y for y in x] for x in xs])

def matching(command):
    match command:
        case ["go", direction] if direction in "nesw":
            return 1
        case {"x": x, **rest}:
            return x, rest
        case Point(x=0, y=yy) | Point(x=yy, y=0):
            return yy
        case [1, 2, *others]:
            return others
        case str() | bytes() as s:
            return s
        case None:
            return None
        case _:
            return 0

def exceptions(f):
    try:
        f()
    except (ValueError, TypeError) as e:
        return e
    except Exception:
        raise
    else:
        f()
    finally:
        f()
    try:
        try:
            return f()
        finally:
            del f
    except BaseException:
        pass

def withs(path, lock):
    with open(path) as a, lock:
        with contextlib.suppress(OSError):
            return a.read()

def closures(x):
    y = 1
    def inner(z):
        nonlocal y
        y += z
        def deeper():
            return x + y + z
        return deeper
    class K:
        def m(self):
            return __class__, super().m()
    return inner, K, lambda: x

def loops(xs):
    total = 0
    for x in xs:
        while x > 0:
            x -= 1
            if x == 3:
                continue
            if x == 7:
                break
        else:
            total += x
    return total

def operators(a, b):
    return (a + b, a - b, a * b, a / b, a // b, a % b, a ** b, a @ b, a << b, a >> b, a & b, a | b,
            a ^ b, -a, ~a, not a, a < b, a <= b, a == b, a != b, a > b, a >= b, a is b, a in b,
            a if b else b, f"{a!r:>{b}}", a[1:2], a[::b])

def calls(f, *args, key=None, **kwargs):
    global G
    G = f(*args, key=key, **kwargs)
    del G
    import os.path as p
    from os import sep
    return f(1, 2, x=3), f.attr.method(p, sep), print(*args)
'''


def huge_source() -> str:
    """A function over the one-byte limits: > 256 constants, names, locals and cells, long jumps."""
    lines = ["def huge(x):"]
    lines += [f"    v{i} = x + {i}.5 + g{i}.a{i}" for i in range(300)]
    lines += ["    if x:"] + [f"        x = x * {i}.25" for i in range(300)]
    lines += ["    while x:"] + [f"        x = x - v{i}" for i in range(300)]
    lines += ["    try:"] + [f"        x = g{i}(x)" for i in range(100)]
    lines += ["    except ValueError:", "        pass"]
    lines += [f"    c{i} = x" for i in range(40)]  # cells, numbered after the 300 locals
    lines += ["    def inner():"] + [f"        return c{i}" for i in range(40)]
    lines += ["    return x, inner"]
    return "\n".join(lines) + "\n"


def chain_source(n: int = 1000) -> str:
    return "def chain(x):\n" + "".join("    x = torch.sin(x)\n" for _ in range(n)) + "    return x\n"


def nested_codes(code: types.CodeType, seen: set) -> list[types.CodeType]:
    found = []
    stack = [code]
    while stack:
        code = stack.pop()
        if code in seen:
            continue
        seen.add(code)
        found.append(code)
        stack.extend(c for c in reversed(code.co_consts) if isinstance(c, types.CodeType))
    return found


def source_codes(path: str, seen: set) -> list[types.CodeType]:
    with open(path, encoding="utf-8") as f:
        source = f.read()
    return nested_codes(compile(source, path, "exec"), seen)


# -- the comparison ----------------------------------------------------------------------------
def _arg_key(arg, positions: dict[int, int]):
    """What an Instr's argument is: labels by their index in the list, constants by identity, the
    rest by type and value (tuples element by element)."""
    if isinstance(arg, Label):
        return ("label", positions[id(arg)])
    if isinstance(arg, tuple):
        return ("tuple", tuple((type(a), a) for a in arg))
    return (type(arg), arg)


def assert_same(code: types.CodeType, expected: list, got: list) -> None:
    where = f"{code.co_filename}:{code.co_firstlineno} {code.co_qualname}"
    assert isinstance(got, list), where
    assert len(got) == len(expected), f"{where}: {len(got)} items, the library gives {len(expected)}"
    positions_e = {id(x): i for i, x in enumerate(expected) if isinstance(x, (Label, TryBegin))}
    positions_g = {id(x): i for i, x in enumerate(got) if isinstance(x, (Label, TryBegin))}
    assert len(positions_g) == sum(isinstance(x, (Label, TryBegin)) for x in got), f"{where}: a label placed twice"
    for i, (e, g) in enumerate(zip(expected, got)):
        item = f"{where} item {i}: {g!r}, the library gives {e!r}"
        assert type(g) is type(e), item
        if isinstance(e, Instr):
            assert (g.name, g.opcode, g.has_jump()) == (e.name, e.opcode, e.has_jump()), item
            assert type(g.location) is InstrLocation and g.location == e.location, item
            assert g.lineno == e.lineno, item
            if e.opcode in opcode.hasconst:
                assert g.arg is e.arg, item
            else:
                assert _arg_key(g.arg, positions_g) == _arg_key(e.arg, positions_e), item
        elif isinstance(e, TryBegin):
            assert positions_g[id(g.target)] == positions_e[id(e.target)], item
            assert type(g.push_lasti) is bool and g.push_lasti == e.push_lasti, item
            assert g.stack_depth == e.stack_depth, item
        elif isinstance(e, TryEnd):
            assert positions_g[id(g.entry)] == positions_e[id(e.entry)], item
        else:
            assert isinstance(e, Label), item


def check(code: types.CodeType) -> None:
    expected = list(Bytecode.from_code(code, conserve_exception_block_stackdepth=True))
    assert_same(code, expected, fast_decode(code))


def check_all(codes: list[types.CodeType]) -> None:
    assert codes
    for code in codes:
        check(code)


# -- real code ---------------------------------------------------------------------------------
@pytest.mark.parametrize("module", STDLIB_MODULES)
def test_stdlib_module(module):
    check_all(source_codes(importlib.util.find_spec(module).origin, set()))


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(TORCH, "nn", "modules", "*.py")))
                         + [os.path.join(TORCH, "nn", "functional.py")], ids=os.path.basename)
def test_torch_nn(path):
    check_all(source_codes(path, set()))


def test_pyframe_and_corpus():
    seen: set = set()
    paths = glob.glob(os.path.join(REPO, "pyframe", "**", "*.py"), recursive=True)
    paths += glob.glob(os.path.join(REPO, "tests", "cases", "*.py"))
    codes = [c for path in sorted(paths) for c in source_codes(path, seen)]
    assert len(codes) > 1000
    check_all(codes)


def _construct_codes() -> list[types.CodeType]:
    seen: set = set()
    codes = nested_codes(compile(CONSTRUCTS, os.path.join(REPO, "constructs.py"), "exec"), seen)
    codes += nested_codes(compile(huge_source(), os.path.join(REPO, "huge.py"), "exec"), seen)
    codes += nested_codes(compile(chain_source(), os.path.join(REPO, "chain.py"), "exec"), seen)
    return codes


def test_constructs():
    codes = _construct_codes()
    names = {c.co_name for c in codes}
    assert {"gen", "coro", "agen", "<listcomp>", "<genexpr>", "matching", "exceptions", "withs",
            "inner", "deeper", "huge", "chain"} <= names
    huge = next(c for c in codes if c.co_name == "huge")
    assert len(huge.co_consts) > 256 and len(huge.co_names) > 256 and len(huge.co_varnames) > 256
    assert len(huge.co_cellvars) == 40
    assert opcode.EXTENDED_ARG in huge.co_code[::2]
    check_all(codes)


def test_without_line_numbers():
    """An empty line table (no positions at all) and tables cut short after each entry: the
    instructions past the table get the line of the last one before them."""
    codes = [c for c in _construct_codes() if c.co_name in ("exceptions", "matching", "huge", "gen")]
    for code in codes:
        table = code.co_linetable
        check(code.replace(co_linetable=b""))
        cuts = [i for i in range(len(table)) if table[i] & 128]  # where each entry starts
        for cut in cuts[:: max(1, len(cuts) // 8)]:
            check(code.replace(co_linetable=table[:cut]))


def test_assembled_by_the_library():
    """Code as pyframe's code generation makes it: assembled by the library (its own line table and
    EXTENDED_ARG choices)."""
    codes = _construct_codes()
    codes += source_codes(importlib.util.find_spec("argparse").origin, set())[:80]
    check_all([Bytecode.from_code(c).to_code() for c in codes])


# -- hand-made code ----------------------------------------------------------------------------
def _base(a, b):
    try:
        x = a + b
    except ValueError:
        x = 0
    return x


OP = opcode.opmap
RESUME = (OP["RESUME"], 0)
EXT = OP["EXTENDED_ARG"]
CACHE = (0, 0)


def _code(units, exceptiontable=b"", linetable=None) -> types.CodeType:
    changes = dict(co_code=bytes(b for unit in units for b in unit), co_exceptiontable=exceptiontable)
    if linetable is not None:
        changes["co_linetable"] = linetable
    return _base.__code__.replace(**changes)


def _table(*entries) -> bytes:
    """An exception table of (start, length, target, depth << 1 | lasti) entries, in code units."""
    out = bytearray()
    for entry in entries:
        for i, value in enumerate(entry):
            chunks = []
            while True:
                chunks.append(value & 63)
                value >>= 6
                if not value:
                    break
            chunks.reverse()
            encoded = [c | (64 if j < len(chunks) - 1 else 0) for j, c in enumerate(chunks)]
            if i == 0:
                encoded[0] |= 128
            out += bytes(encoded)
    return bytes(out)


_LOAD_RETURN = [(OP["LOAD_CONST"], 0), (OP["RETURN_VALUE"], 0)]
_TRY_BODY = [RESUME, (OP["NOP"], 0), (OP["LOAD_GLOBAL"], 1), CACHE, CACHE, CACHE, CACHE, CACHE,
             (OP["POP_TOP"], 0), *_LOAD_RETURN, (OP["PUSH_EXC_INFO"], 0), (OP["POP_TOP"], 0), *_LOAD_RETURN]

HAND_MADE = {
    # the library reads these
    "extended_arg_nop": [RESUME, (EXT, 1), (OP["NOP"], 0), *_LOAD_RETURN],
    "extended_arg_zero": [RESUME, (EXT, 0), (OP["LOAD_CONST"], 0), (OP["RETURN_VALUE"], 0)],
    "extended_arg_large_int": [RESUME, (EXT, 127), (EXT, 255), (EXT, 255), (OP["BUILD_TUPLE"], 255),
                               (OP["RETURN_VALUE"], 0)],
    "jump_to_extended_arg": [RESUME, (OP["JUMP_FORWARD"], 0), (EXT, 0), *_LOAD_RETURN],
    "jump_with_extended_arg": [RESUME, (EXT, 0), (OP["JUMP_FORWARD"], 0), *_LOAD_RETURN],
    "jump_back_with_extended_arg": [RESUME, (OP["LOAD_CONST"], 0), (EXT, 0), (OP["JUMP_BACKWARD"], 3),
                                    (OP["RETURN_VALUE"], 0)],
    "jump_to_cache": [RESUME, (OP["JUMP_FORWARD"], 1), (OP["LOAD_GLOBAL"], 0), *[CACHE] * 5,
                      (OP["RETURN_VALUE"], 0)],
    "deref_of_local": [RESUME, (OP["LOAD_DEREF"], 0), (OP["RETURN_VALUE"], 0)],
    "missing_caches": [RESUME, (OP["LOAD_GLOBAL"], 1), (OP["RETURN_VALUE"], 0)],
    "trailing_caches": [RESUME, *_LOAD_RETURN, CACHE, CACHE],
    "empty": [],
    # the library fails on these
    "extended_arg_before_no_arg": [RESUME, (EXT, 1), (OP["POP_TOP"], 0), *_LOAD_RETURN],
    "extended_arg_at_end": [RESUME, *_LOAD_RETURN, (EXT, 0)],
    "argument_over_2**31": [RESUME, (EXT, 128), (EXT, 0), (EXT, 0), (OP["BUILD_TUPLE"], 0),
                            (OP["RETURN_VALUE"], 0)],
    "constant_out_of_range": [RESUME, (EXT, 1), *_LOAD_RETURN],
    "jump_into_extended_arg": [RESUME, (OP["JUMP_FORWARD"], 1), (EXT, 0), *_LOAD_RETURN],
    "jump_before_start": [RESUME, (OP["JUMP_BACKWARD"], 5), *_LOAD_RETURN],
    "jump_past_end": [RESUME, (OP["JUMP_FORWARD"], 5), *_LOAD_RETURN],
    "jump_to_end": [RESUME, (OP["JUMP_FORWARD"], 2), *_LOAD_RETURN],
    "compare_out_of_range": [RESUME, (OP["LOAD_CONST"], 0), (OP["LOAD_CONST"], 0), (OP["COMPARE_OP"], 9),
                             CACHE, CACHE, (OP["RETURN_VALUE"], 0)],
    "binary_op_out_of_range": [RESUME, (OP["LOAD_CONST"], 0), (OP["LOAD_CONST"], 0), (OP["BINARY_OP"], 40),
                               CACHE, (OP["RETURN_VALUE"], 0)],
    "free_out_of_range": [RESUME, (OP["LOAD_DEREF"], 40), (OP["RETURN_VALUE"], 0)],
    "global_out_of_range": [RESUME, (OP["LOAD_GLOBAL"], 99), *[CACHE] * 5, (OP["RETURN_VALUE"], 0)],
    # the library reads these, the fast decoder leaves them to it
    "extended_arg_before_cache": [RESUME, (EXT, 0), CACHE, *_LOAD_RETURN],
}
# (no unknown opcode: a 3.11 code object's co_code never shows one)

HAND_MADE_TABLES = {
    "plain": _table((2, 7, 11, 0)),
    "push_lasti": _table((2, 7, 11, 3)),
    "stops_on_cache": _table((2, 6, 11, 1)),
    "starts_and_stops_on_caches": _table((4, 2, 11, 1)),
    "two_ranges": _table((1, 2, 11, 0), (3, 6, 11, 0)),
    "handler_on_cache": _table((2, 7, 4, 0)),
    "empty_range": _table((2, 0, 11, 0)),
    "incomplete_entry": _table((2, 7, 11, 0), (9, 1, 11, 0))[:-1],
    "range_past_end": _table((2, 7, 11, 0), (30, 2, 11, 0)),
    "deep_stack": _table((2, 7, 11, (5000 << 1) | 1)),
    "to_the_end": _table((2, 13, 11, 0)),
    # the library fails on these (nested TryBegin, handler past the end)
    "same_start": _table((2, 3, 11, 0), (2, 6, 11, 0)),
    "nested": _table((1, 8, 11, 0), (2, 3, 11, 0)),
    "stops_before_it_starts": _table((5, 1, 11, 0), (2, 5, 11, 0)),
    "handler_past_end": _table((2, 7, 99, 0)),
}

_EXT_BODY = [RESUME, (EXT, 0), (OP["LOAD_CONST"], 0), (OP["POP_TOP"], 0), *_LOAD_RETURN, (OP["PUSH_EXC_INFO"], 0),
             *_LOAD_RETURN]
HAND_MADE_EXT_TABLES = {
    "starts_inside_extended_arg": _table((2, 3, 6, 0)),
    "starts_on_extended_arg": _table((1, 3, 6, 0)),
    "stops_inside_extended_arg": _table((0, 2, 6, 0)),
    "stops_after_extended_arg": _table((0, 3, 6, 0)),
    "handler_inside_extended_arg": _table((3, 1, 2, 0)),
}


def _hand_made_codes():
    for name, units in HAND_MADE.items():
        yield name, _code(units)
        yield name + "/no_lines", _code(units, linetable=b"")
    for name, table in HAND_MADE_TABLES.items():
        yield "table_" + name, _code(_TRY_BODY, table)
        yield "table_" + name + "/no_lines", _code(_TRY_BODY, table, linetable=b"")
    for name, table in HAND_MADE_EXT_TABLES.items():
        yield "table_" + name, _code(_EXT_BODY, table)


@pytest.mark.parametrize("name,code", list(_hand_made_codes()), ids=[name for name, _ in _hand_made_codes()])
def test_hand_made(name, code):
    """Equal when the library reads the code; when it fails, the fast decoder gives up too (and
    decode() then raises the library's error)."""
    try:
        expected = list(Bytecode.from_code(code, conserve_exception_block_stackdepth=True))
    except Exception as error:  # noqa: BLE001 (whatever the library raises)
        with pytest.raises(_NotModelled):
            fast_decode(code)
        with pytest.raises(type(error)):
            code_cache.decode(code)
        return
    try:
        got = fast_decode(code)
    except _NotModelled:  # allowed (the library then reads it), but only where expected
        assert name.split("/")[0] == "extended_arg_before_cache"
        return
    assert_same(code, expected, got)


# -- decode() ----------------------------------------------------------------------------------
def test_decode_uses_fast_decoder_and_falls_back(monkeypatch):
    code = next(c for c in _construct_codes() if c.co_name == "exceptions")
    calls = []
    real = decode_module.fast_decode

    def spy(c):
        calls.append(c)
        return real(c)

    monkeypatch.setattr(code_cache, "fast_decode", spy)
    code_cache._decoded.pop(code, None)
    listed, labels = code_cache.decode(code)
    assert calls == [code]
    assert_same(code, list(Bytecode.from_code(code, conserve_exception_block_stackdepth=True)), listed)
    assert labels == {x: i for i, x in enumerate(listed) if isinstance(x, Label)}
    assert code_cache.decode(code)[0] is listed and calls == [code]  # cached

    # what the fast decoder does not model is read by the library
    odd = _code(HAND_MADE["extended_arg_before_cache"])
    with pytest.raises(_NotModelled):
        real(odd)
    listed, _ = code_cache.decode(odd)
    assert [x.name for x in listed] == ["RESUME", "LOAD_CONST", "RETURN_VALUE"]


def test_bytecode_is_the_version_the_decoder_was_checked_against():
    """decode.py sets private fields of the library's objects: pyproject.toml pins the version it
    was checked against, and the one installed is that one (a new version is checked by this file's
    tests before the pin moves)."""
    import importlib.metadata
    import re
    from pathlib import Path

    pyproject = (Path(__file__).resolve().parent.parent / "pyproject.toml").read_text()
    pinned = re.search(r'"bytecode==([0-9.]+)"', pyproject)
    assert pinned is not None, "pyproject.toml pins bytecode exactly"
    assert importlib.metadata.version("bytecode") == pinned.group(1)

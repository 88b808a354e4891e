"""The warm-start file: a stamp of the versions that wrote it, a checksum, and the saved units.

    b"PYFRAME-WARM\\n"                      magic
    8 bytes, big-endian: header length      then the header, JSON: format, pyframe, torch, python
    8 bytes, big-endian: payload length     then 4 bytes, big-endian: the payload's CRC-32
    payload                                 pickle of {"units": [...], "artifacts": {...} | None}

The artifacts are the backends' own: torch's cache artifacts (`"torch"`: inductor's FX graph cache,
AOTAutograd's) and inductor's compiled kernels with the fingerprint of the machine that built them
(`"kernels"`: kernels.py).

A unit is one code object's saved entries (`SavedUnit`); each entry is its own pickle (bytes), so
one that cannot be read in the loading process (a function gone) costs that entry only. A file
too short for what its lengths announce is truncated, one whose payload does not match its
checksum is corrupted: both are a `WarmStartError` naming the file, never a crash. A file from
another pyframe, torch or Python version is read (its header and the units' names are plain) but
none of its entries is used.
"""
from __future__ import annotations

import json
import os
import pickle
import sys
import tempfile
import zlib
from dataclasses import dataclass, field
from typing import Any

import torch

from ..exc import PyframeError

MAGIC = b"PYFRAME-WARM\n"
FORMAT_VERSION = 3
PYFRAME_VERSION = "0.1.0"  # pyproject.toml's version (tests/test_warm_start.py checks they agree)


class WarmStartError(PyframeError):
    """A warm-start file that cannot be read: truncated, corrupted, or not such a file."""


@dataclass
class SavedResume:
    """A resume function made by one of the unit's entries: its code (a pickle: refs.py) and what
    it continues (resume.ResumeInfo's fields but the original), and its own entries."""

    code: bytes
    info: bytes
    entries: list["SavedEntry"] = field(default_factory=list)


@dataclass
class SavedEntry:
    """One cache entry: which backend compiled it, and the pickle of its guards, code and graphs."""

    backend: str
    name: str                       # the code's name, for messages
    data: bytes


@dataclass
class SavedUnit:
    """The entries of one code object, found again by (module, qualname) and used only for code
    of the same hash (codes.py)."""

    module: str
    qualname: str
    digest: str
    entries: list[SavedEntry]
    resumes: dict[int, SavedResume]   # by the ids the entries' pickles name them with

    @property
    def key(self) -> tuple[str, str]:
        return (self.module, self.qualname)


def stamp() -> dict[str, Any]:
    """What must be equal for saved entries to be used: the format, pyframe, torch and Python."""
    return {"format": FORMAT_VERSION, "pyframe": PYFRAME_VERSION, "torch": torch.__version__,
            "python": sys.version.split()[0], "implementation": sys.implementation.cache_tag}


def mismatch(header: dict[str, Any]) -> str | None:
    """Why a file's entries cannot be used here (None: they can)."""
    here = stamp()
    different = [f"{key} {header.get(key)!r} (this process: {value!r})" for key, value in here.items()
                 if header.get(key) != value]
    return "saved by " + ", ".join(different) if different else None


def write(path: str | os.PathLike, units: list[SavedUnit], artifacts: dict | None, header: dict | None = None) -> int:
    """Write the file (atomically: a temporary file renamed), giving its size in bytes."""
    payload = pickle.dumps({"units": units, "artifacts": artifacts}, protocol=pickle.HIGHEST_PROTOCOL)
    head = json.dumps(header if header is not None else stamp()).encode()
    data = b"".join([MAGIC, len(head).to_bytes(8, "big"), head, len(payload).to_bytes(8, "big"),
                     _checksum(payload), payload])
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".pyframe-warm-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return len(data)


def read(path: str | os.PathLike) -> tuple[dict[str, Any], list[SavedUnit], dict | None]:
    """(header, units, artifacts) of a file; WarmStartError when it is not a whole warm-start file."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        data = f.read()
    if not data.startswith(MAGIC):
        if MAGIC.startswith(data):
            raise WarmStartError(f"{path}: truncated warm-start file ({len(data)} bytes)")
        raise WarmStartError(f"{path} is not a pyframe warm-start file (no {MAGIC!r} at its start)")
    at = len(MAGIC)
    head_len, at = _length(data, at, path, "header length")
    head_bytes = _take(data, at, head_len, path, "header")
    at += head_len
    payload_len, at = _length(data, at, path, "payload length")
    checksum = _take(data, at, 4, path, "checksum")
    at += 4
    payload = _take(memoryview(data), at, payload_len, path, "payload")  # (read only: not copied)
    if len(data) > at + payload_len:
        raise WarmStartError(f"{path}: corrupted warm-start file ({len(data) - at - payload_len} bytes past its end)")
    if _checksum(payload) != checksum:
        raise WarmStartError(f"{path}: corrupted warm-start file (its checksum does not match its contents)")
    try:
        header = json.loads(head_bytes)
    except ValueError as e:
        raise WarmStartError(f"{path}: corrupted warm-start file (header: {e})") from e
    try:
        content = pickle.loads(payload)
    except Exception as e:  # noqa: BLE001 (a payload the checksum matched but this Python cannot read)
        reason = mismatch(header) or f"{type(e).__name__}: {e}"
        raise WarmStartError(f"{path}: cannot read its entries ({reason})") from e
    return header, content["units"], content["artifacts"]


def _checksum(payload: bytes | memoryview) -> bytes:
    """A CRC-32, as zip and PNG files carry: it finds the corruption of a file on disk or on its way
    (it is no signature), at a fifth of a SHA-256's cost on a load."""
    return zlib.crc32(payload).to_bytes(4, "big")


def _length(data: bytes, at: int, path: str, what: str) -> tuple[int, int]:
    return int.from_bytes(_take(data, at, 8, path, what), "big"), at + 8


def _take(data: bytes | memoryview, at: int, n: int, path: str, what: str) -> bytes | memoryview:
    if len(data) < at + n:
        raise WarmStartError(f"{path}: truncated warm-start file ({len(data)} bytes; its {what} needs "
                             f"{at + n})")
    return data[at:at + n]

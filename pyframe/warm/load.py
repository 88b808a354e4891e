"""`pyframe.load(path)`: read a warm-start file; its entries are installed when their code is met.

Nothing runs at load but reading the file (and loading torch's cache artifacts it holds): the
entries wait in store.py until the eval-frame hook misses on their code, which asks there before
translating (convert_frame.Compiler). A file from another pyframe, torch or Python version is read
but none of its entries is used: the report says why, and a warning names each function met.
"""
from __future__ import annotations

import os

from .store import LoadReport, install


def load(path: str | os.PathLike) -> LoadReport:
    """Read `path`, written by `pyframe.save`: its entries are used from the first call of each
    function whose code, pyframe, torch and Python are those that saved it. A truncated or
    corrupted file raises `WarmStartError`."""
    return install(path)

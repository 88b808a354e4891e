"""`pyframe.config.warm_cache_dir`: warm start without a call of pyframe.save or pyframe.load.

While the setting names a directory, the first `optimize()` or `compile()` loads the file an earlier
process saved there (if any; one that cannot be read is warned about and ignored), and this
process's entries are saved there at exit (the loaded entries it never met included: save.py). The
file's name holds the torch and Python versions, so processes of other versions keep files of
their own instead of replacing each other's.
"""
from __future__ import annotations

import atexit
import os
import sys
import warnings

import torch

from .. import config
from .format import WarmStartError
from .load import load
from .save import save

_prepared: str | None = None
_registered = False


def file_in(directory: str | os.PathLike) -> str:
    python = "".join(map(str, sys.version_info[:2]))
    return os.path.join(os.fspath(directory), f"pyframe-torch{torch.__version__}-py{python}.pfw")


def prepare() -> None:
    """Load the cache directory's file, once per directory setting; save there at exit."""
    global _prepared, _registered
    directory = config.warm_cache_dir
    if directory is None or os.fspath(directory) == _prepared:
        return
    _prepared = os.fspath(directory)
    path = file_in(directory)
    if os.path.exists(path):
        try:
            load(path)
        except (WarmStartError, OSError) as e:
            warnings.warn(f"pyframe: config.warm_cache_dir: {e}; compiling from scratch", stacklevel=3)
    if not _registered:
        _registered = True
        atexit.register(_save_at_exit)


def _save_at_exit() -> None:
    directory = config.warm_cache_dir
    if directory is None:
        return
    try:
        save(file_in(directory))
    except Exception as e:  # noqa: BLE001 (exiting: a warning, never a traceback)
        warnings.warn(f"pyframe: config.warm_cache_dir: could not save to {directory}: {type(e).__name__}: {e}")

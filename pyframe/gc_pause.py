"""The cyclic garbage collector paused while pyframe compiles or loads, and on while a backend runs.

A compile allocates tens of thousands of short-lived objects (variable trackers, sources, guards,
fx nodes; a warm start's unpickled entries), and CPython's collector runs a generation-0 pass every
700 net allocations and older ones every ten of those: about a tenth of a warm start's work, a few
hundredths of a trace's, spent finding no garbage (what a compile makes stays alive until it ends,
then most of it is freed by reference counting). The collector is paused for that work and on again
when it ends; any cyclic garbage made meanwhile is found by its next pass.

Around a call to the backend (user code: inductor allocates freely) it runs as usual (`resumed`).
Only a pause this module started is ended by it: a collector the user turned off stays off, and a
user's backend that turns it off leaves it off.
"""
from __future__ import annotations

import contextlib
import gc
import threading
from typing import Iterator

_owner: int | None = None  # the thread whose pause holds the collector off, None when none does


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """The collector off for the block, when it is on (nested and concurrent pauses: the first
    one's thread owns it, and turns it on again when its block ends)."""
    global _owner
    if _owner is not None or not gc.isenabled():
        yield
        return
    me = threading.get_ident()
    gc.disable()
    _owner = me
    try:
        yield
    finally:
        if _owner == me:
            _owner = None
            gc.enable()


@contextlib.contextmanager
def resumed() -> Iterator[None]:
    """The collector on for the block, if this thread's pause holds it off."""
    global _owner
    me = threading.get_ident()
    if _owner != me:
        yield
        return
    _owner = None
    gc.enable()
    try:
        yield
    finally:
        if gc.isenabled() and _owner is None:  # (off now: the block turned it off, and it stays so)
            gc.disable()
            _owner = me

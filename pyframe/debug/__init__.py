"""Seeing inside pyframe: cache entries, bytecode and graphs, explain, the shared case corpus and
the side-by-side comparison with torch._dynamo.

    pyframe.debug.cache_entries(fn)   # list[CacheEntryInfo]: guards, transformed code, graphs, hits, reason
    pyframe.debug.show(fn)            # original | transformed bytecode, resume functions, gm.code, depyf
    pyframe.explain(fn)(*args)        # graphs, breaks and guards of one run
    @pyframe.debug.case(inputs=...)   # register a program for `python -m pyframe compare --cases`

docs/debugging.md describes each view; logs are in pyframe/logs.py (`pyframe.set_logs`).
"""
from .cases import Inputs, case
from .entries import CacheEntryInfo, cache_entries
from .show import show

__all__ = ["CacheEntryInfo", "Inputs", "cache_entries", "case", "show"]

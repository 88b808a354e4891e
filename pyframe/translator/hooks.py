"""What the translator is handed by the layer above it (convert_frame.py), instead of importing it.

The translator knows neither the C extension nor the public API: the few things of theirs a trace
needs (making a function that runs with pyframe off, recognizing a function pyframe already
wrapped, reading what a tuple iterator has still to give, a class's version) come in one record, built once by
convert_frame and shared by the root translator and every translator it inlines with.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class TranslatorHooks:
    make_output: Callable[[], Any]                # a fresh OutputGraph for each attempt at a trace
    wrap_compiled: Callable[[Callable], Any]      # a compiled graph as the transformed code calls it
    disable: Callable[[Callable], Any]            # `pyframe.disable(fn)`: fn run with pyframe off
    is_pyframe_wrapper: Callable[[Any], bool]     # a function wrapped by optimize / disable / run
    tuple_iterator_rest: Callable[[Any], tuple]   # the items a tuple iterator has still to give
    class_version: Callable[[type], int]          # changes when the class, its MRO or metaclass does

"""Warm start: `pyframe.save(path)` writes the cache entries this process compiled, and
`pyframe.load(path)` lets another process run them without tracing its frames again.

The package's modules, in the order a save meets them:

- capture.py: what the miss path keeps of each entry's guards (the form the C++ tree is built
  from, objects held weakly), and the GuardSet rebuilt from it in another process;
- refs.py:    objects named so another process can find them again (a module, a function by its
  module, qualified name and bytecode hash...), and the pickler that uses those names;
- codes.py:   a code object's identity across processes, and code objects with constants marshal
  cannot hold;
- format.py:  the file: versions, checksum, clear errors for a truncated or corrupted one;
- save.py, load.py: `pyframe.save` and `pyframe.load` (load installs entries when their code is
  first met, on the hook's miss path; convert_frame.py asks it through `warm_lookup`).

This package's `__init__` imports nothing: convert_frame.py imports capture.py, below it.
"""

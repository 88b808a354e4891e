"""Warm start: `pyframe.save(path)` writes the cache entries this process compiled, and
`pyframe.load(path)` lets another process run them without tracing its frames again.

The package's modules, in the order a save meets them:

- capture.py:   what the miss path keeps of each entry's guards (the form the C++ tree is built
  from, identity values held weakly), and the GuardSet a save lowers from it;
- tree.py:      the C++ tree as data: the calls guard_tree.build_tree makes, recorded by a save and
  replayed by a load;
- codes.py:     a code object's identity across processes (module, qualified name, hash);
- refs.py:      objects named so another process finds them again (a module, a function by its
  qualified name and code hash...), and the pickler that writes nothing else where identity counts;
- graphs.py:    a captured graph node by node, and back;
- format.py:    the file: versions, checksum, clear errors for a truncated or corrupted one;
- save.py:      `pyframe.save`;
- store.py, load.py: `pyframe.load`, whose entries wait until their code is first met: the miss
  path (convert_frame.Compiler) asks `store.lookup` before translating;
- cache_dir.py: `pyframe.config.warm_cache_dir`, both by themselves.

The modules below convert_frame (capture, codes, refs, tree, graphs, format, store) import nothing above
it; save, load and cache_dir sit beside it (tests/test_layering.py). This `__init__` imports nothing.
"""

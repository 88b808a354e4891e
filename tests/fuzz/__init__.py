"""The differential fuzzer: random small programs run eagerly and under pyframe, compared.

- ``generator.py`` writes a program from a seed (its types and records in ``program.py``, its
  expressions in ``expressions.py``, its generators, set tests, keyword-only parameters and dict
  passed in in ``protocols.py``): module-level helper functions and an entry
  function ``fuzz_main`` over tensors, Python numbers, lists and tuples, with branches on tensor
  values (graph breaks) and on Python values, ``for`` loops, in-place ops and appends to a ``log``
  list that outlives the call. Every expression is typed while it is written, so shapes agree.
- ``runner.py`` loads a program's source into a fresh module (filename ``fuzz_<seed>.py``, lines in
  ``linecache``), runs it eagerly and under ``pyframe.optimize`` on the same seeded inputs, and
  compares results, the log, the inputs after the call (in-place updates) and which tensors are
  the same object.
- ``minimize.py`` shrinks a failing program statement by statement while it keeps failing the same way.
- ``python -m tests.fuzz`` runs seeds from the command line (``--help``).

tests/test_fuzz.py runs it under pytest: 300 programs by default, 10,000 with ``-m slow``.
"""

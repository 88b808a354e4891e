"""Emitting bytecode with the `bytecode` library: everything pyframe writes into a code object.

`pycodegen.py`: `PyCodegen`, which collects the transformed code's instructions (loads of Sources,
constants, container builds, the compiled graph's call), and `make_code` / `code_header`, the one
place a code object's header (name, file, flags, arguments, cells) is filled. `graph_break.py`: the
instructions around a graph break that do not depend on the trace: entering again and leaving the
`with` blocks the break sits in, and the calls of the resume functions. resume.py builds the resume
functions themselves. This package knows nothing of the translator: symbolic values rebuild
themselves through `PyCodegen` (`vt.reconstruct(cg)`).
"""

"""Settings read by the translator and the miss path (`convert_frame.py`).

Change them as attributes: `pyframe.config.recompile_limit = 4`.
"""
from __future__ import annotations

# Most cache entries one code object may hold (torch._dynamo's default is 8). Past the limit the
# frame runs eagerly, with one warning that names the guard that failed.
recompile_limit: int = 8

# When a backend fails: True warns and runs the graph eagerly; False raises BackendCompilerFailed.
suppress_errors: bool = True

# Deepest chain of inlined user calls before the call is left to Python.
inline_depth_limit: int = 32

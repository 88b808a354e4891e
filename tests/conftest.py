"""Shared pytest setup: every test starts and ends with empty caches in both JIT engines.

pyframe and torch._dynamo keep compiled entries on code objects for the life of the process, so a
test that compiles a function shared with another test (the corpus cases, the seeds) would otherwise
see the other test's cache entries and graph counts.
"""

import pytest

from pyframe.debug.compare import reset_engines


@pytest.fixture(autouse=True)
def _fresh_jit_caches():
    reset_engines()
    yield
    reset_engines()

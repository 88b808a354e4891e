"""Shared pytest setup: every test starts and ends with empty caches in both JIT engines.

pyframe and torch._dynamo keep compiled entries on code objects for the life of the process, so a
test that compiles a function shared with another test (the corpus cases, the seeds) would otherwise
see the other test's cache entries and graph counts.

Once collection is over, what it imported and made (torch, transformers, the corpus: millions of
objects) is moved to the garbage collector's permanent generation, so the full collections that
tests make to see an object die walk only what the tests made since.
"""

import gc

import pytest

from pyframe.debug.compare import reset_engines


@pytest.fixture(autouse=True)
def _fresh_jit_caches():
    reset_engines()
    yield
    reset_engines()


def pytest_collection_finish(session):
    gc.collect()
    gc.freeze()

"""The garbage collector is off while pyframe compiles, on while a backend runs, and the user's
setting is what it was after the compile (pyframe/gc_pause.py)."""
from __future__ import annotations

import gc

import pytest
import torch

import pyframe
from pyframe import gc_pause
from pyframe.translator import translate


@pytest.fixture(autouse=True)
def _collector_on():
    was = gc.isenabled()
    gc.enable()
    pyframe.reset()
    yield
    pyframe.reset()
    if was:
        gc.enable()
    else:
        gc.disable()


def _spy_on_translation(monkeypatch) -> list[bool]:
    """gc.isenabled() at each translation of a frame."""
    seen: list[bool] = []
    original = translate.translate_frame

    def spy(*args, **kwargs):
        seen.append(gc.isenabled())
        return original(*args, **kwargs)

    monkeypatch.setattr("pyframe.convert_frame.translate_frame", spy)
    return seen


def test_the_collector_is_off_while_tracing_and_on_in_the_backend_and_after(monkeypatch):
    in_translator = _spy_on_translation(monkeypatch)
    in_backend: list[bool] = []

    def backend(gm, example_inputs):
        in_backend.append(gc.isenabled())
        return gm.forward

    def fn(x):
        return torch.sin(x) + 1

    x = torch.randn(4)
    torch.testing.assert_close(pyframe.optimize(backend)(fn)(x), fn(x))
    assert in_translator == [False]
    assert in_backend == [True]
    assert gc.isenabled()


def test_a_collector_the_user_turned_off_stays_off(monkeypatch):
    in_backend: list[bool] = []

    def backend(gm, example_inputs):
        in_backend.append(gc.isenabled())
        return gm.forward

    def fn(x):
        return x * 2

    gc.disable()
    pyframe.optimize(backend)(fn)(torch.ones(2))
    assert in_backend == [False]  # (not turned on for the backend: it was never ours)
    assert not gc.isenabled()


def test_a_backend_that_turns_the_collector_off_leaves_it_off():
    def backend(gm, example_inputs):
        gc.disable()
        return gm.forward

    def fn(x):
        return x - 1

    pyframe.optimize(backend)(fn)(torch.ones(2))
    assert not gc.isenabled()


def test_the_collector_comes_back_when_the_translator_fails(monkeypatch):
    def broken(*args, **kwargs):
        assert not gc.isenabled()
        raise RuntimeError("a bug in the translator")

    monkeypatch.setattr("pyframe.convert_frame.translate_frame", broken)

    def fn(x):
        return x + 3

    x = torch.ones(2)
    torch.testing.assert_close(pyframe.optimize("eager")(fn)(x), x + 3)  # (run as Python)
    assert gc.isenabled()


def test_nested_pauses_end_with_the_outermost():
    with gc_pause.paused():
        assert not gc.isenabled()
        with gc_pause.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
        with gc_pause.resumed():
            assert gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()

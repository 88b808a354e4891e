"""The shared corpus registry: small programs run eagerly, under pyframe and under torch._dynamo.

A *case* is a program plus the inputs to call it with. Corpus modules (``tests/cases/*.py``) declare
cases with the ``@case`` decorator, on a plain function or on an ``nn.Module`` subclass::

    from pyframe.debug.cases import case

    @case(inputs=lambda: (torch.randn(10), torch.randn(10)))
    def cos_plus_sin(x, y):
        return torch.cos(x) + torch.sin(y)

    @case(inputs=lambda: (torch.randn(4, 10),), tags={"nn"})
    class LinearRelu(torch.nn.Module):
        ...

Your own programs work the same way: decorate them with ``@pyframe.debug.case(inputs=...)`` in a
module of yours and run ``python -m pyframe compare --cases mymodule`` (a module name importable from
the current directory, or a path to a ``.py`` file).

Tags that change how a case is run (``pyframe.debug.compare.run_case``): ``"no_grad"`` calls it
inside ``with torch.no_grad()``, as inference code is called; ``"rng"`` starts each measured call
from the case's seed, so a case drawing random numbers (dropout in training) draws the same ones
under every engine.

``load_cases(["tests.cases.elementwise", ...])`` imports the modules and returns their cases. The
same list feeds the differential test (tests/test_corpus.py), ``python -m pyframe compare`` and the
benchmarks; running a case is the job of ``pyframe.debug.compare``.

This module sits beside the translator, not on top of it: it imports torch and the standard library
only, so the corpus can be loaded (and run under eager or torch._dynamo) whatever state pyframe is in.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import inspect
import os
import sys
import types
from typing import Any, Callable, Iterable, Mapping

import torch

__all__ = ["Case", "Inputs", "case", "load_cases", "registered_cases", "import_user_module", "seeded", "DEFAULT_SEED"]

#: Seed used for module construction and input generation unless a case sets its own.
DEFAULT_SEED = 0


@dataclasses.dataclass(frozen=True)
class Inputs:
    """The arguments of one call: ``fn(*args, **kwargs)``."""

    args: tuple = ()
    kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @classmethod
    def coerce(cls, value: Any) -> "Inputs":
        """Accept what an inputs factory may return: an ``Inputs``, a tuple of args, or one value."""
        if isinstance(value, Inputs):
            return value
        if isinstance(value, tuple):
            return cls(value)
        return cls((value,))


@dataclasses.dataclass(frozen=True)
class Case:
    """One program of the corpus.

    ``make_fn`` builds the callable: the function itself, or a fresh module built under ``seed``
    (so its parameters are the same every time). ``make_inputs`` gives fresh, deterministic inputs,
    also drawn under ``seed``. ``difference`` documents a reasoned, deliberate difference between
    pyframe and torch._dynamo on this case (graph count or op sequences, or only the graphs' code);
    the differential test then checks the difference still exists, so the note cannot silently go
    stale.
    """

    name: str
    module: str
    make_fn: Callable[[], Callable[..., Any]]
    make_inputs: Callable[[], Inputs]
    tags: frozenset[str] = frozenset()
    difference: str | None = None
    seed: int = DEFAULT_SEED
    target: Any = None  # the decorated function or class, for reports
    doc: str = ""

    @property
    def is_module(self) -> bool:
        return "module" in self.tags

    @property
    def qualname(self) -> str:
        """``topic.name``: the case's test id and table row."""
        return f"{self.module.rsplit('.', 1)[-1]}.{self.name}"

    def source(self) -> str:
        """The case's source text, for reports."""
        try:
            return inspect.getsource(self.target)
        except (OSError, TypeError):
            return "<source unavailable>"


# module name -> {case name -> Case}. Keyed by name so re-importing a module replaces, never doubles.
_REGISTRY: dict[str, dict[str, Case]] = {}


def seeded(factory: Callable[[], Any], seed: int) -> Callable[[], Any]:
    """Wrap ``factory`` so it runs under ``torch.manual_seed(seed)`` without disturbing the global RNG."""

    def run() -> Any:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return factory()

    return run


def case(
    inputs: Callable[[], Any],
    *,
    name: str | None = None,
    tags: Iterable[str] = (),
    difference: str | None = None,
    seed: int = DEFAULT_SEED,
) -> Callable[[Any], Any]:
    """Register the decorated function or ``nn.Module`` subclass as a corpus case.

    ``inputs`` is a zero-argument factory returning the call's arguments (an ``Inputs``, a tuple, or a
    single value); it runs under ``torch.manual_seed(seed)``, so two calls give equal tensors. The
    decorated object is returned unchanged. Every case is tagged with its corpus module's short name,
    and module cases with ``"module"``.
    """

    def register(target: Any) -> Any:
        module = target.__module__
        topic = module.rsplit(".", 1)[-1]
        all_tags = {topic, *tags}
        if isinstance(target, type):
            if not issubclass(target, torch.nn.Module):
                raise TypeError(f"@case on a class needs an nn.Module subclass, got {target!r}")
            make_fn = seeded(target, seed)
            all_tags.add("module")
        elif callable(target):
            make_fn = lambda: target  # noqa: E731  (the function itself: engines wrap it)
        else:
            raise TypeError(f"@case decorates a function or an nn.Module subclass, got {target!r}")
        make_inputs = seeded(lambda: Inputs.coerce(inputs()), seed)
        entry = Case(
            name=name or target.__name__,
            module=module,
            make_fn=make_fn,
            make_inputs=make_inputs,
            tags=frozenset(all_tags),
            difference=difference,
            seed=seed,
            target=target,
            doc=inspect.cleandoc(target.__doc__ or ""),
        )
        _REGISTRY.setdefault(module, {})[entry.name] = entry
        return target

    return register


def registered_cases(module_name: str) -> list[Case]:
    """Cases already registered by ``module_name`` (in definition order), without importing it."""
    return list(_REGISTRY.get(module_name, {}).values())


def load_cases(module_names: Iterable[str]) -> list[Case]:
    """Import each corpus module and return all their cases, in module then definition order.

    Case names must be unique across the modules given: they are test ids and table rows.
    """
    cases: list[Case] = []
    seen: dict[str, str] = {}
    for module_name in module_names:
        importlib.import_module(module_name)
        for entry in registered_cases(module_name):
            if entry.name in seen:
                raise ValueError(
                    f"duplicate case name {entry.name!r} in {module_name} and {seen[entry.name]}"
                )
            seen[entry.name] = module_name
            cases.append(entry)
    return cases


def import_user_module(spec: str) -> types.ModuleType:
    """Import a user's module: a dotted name (found from the current directory too, as
    ``python -m`` does) or the path of a ``.py`` file (imported under its file name)."""
    if spec.endswith(".py") or os.sep in spec:
        path = os.path.abspath(spec)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"no such file: {spec}")
        name = os.path.splitext(os.path.basename(path))[0]
        module_spec = importlib.util.spec_from_file_location(name, path)
        if module_spec is None or module_spec.loader is None:
            raise ImportError(f"cannot import {spec}: not a Python file")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module  # before running it: dataclasses and pickling look it up
        try:
            module_spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(name, None)
            raise
        return module
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    return importlib.import_module(spec)

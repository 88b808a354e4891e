"""`mode` and `options` of `pyframe.compile(...)`: handed to the backend as torch.compile hands them.

torch.compile (torch/__init__.py) does two different things with them:

- for "inductor" it checks them when compile() is called and turns them into inductor config patches:
  a mode is a named set of options (`torch._inductor.list_mode_options()`: "default", "lite",
  "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"); an option is the name of an
  inductor config entry ("-" read as "_": `triton.cudagraphs`, `max_autotune`...) with a value of
  its type; every graph is compiled by `compile_fx(gm, inputs, config_patches=...)`;
- for any other backend it passes `mode=` and `options=` as keyword arguments of each call, when
  they are not the default.

pyframe does the same, with one difference: a backend whose signature takes neither `mode`/`options`
nor `**kwargs` ("eager", "print", most user backends) cannot honour them, so asking for them is an
error when compile() is called, not a warning per graph. Mode and options together are refused, as
torch refuses them.
"""
from __future__ import annotations

import inspect
import typing
from typing import Any, Callable

import torch

from ..exc import InvalidCompileOption
from .registry import backend_name, lookup_backend


def with_settings(backend: str | Callable, mode: str | None, options: dict[str, Any] | None,
                  dynamic: bool | None) -> str | Callable:
    """The backend `pyframe.compile(backend=..., mode=..., options=...)` compiles with: the backend
    itself when mode and options are the defaults, else a BackendWithSettings (checked now)."""
    if mode is not None and options is not None:
        raise InvalidCompileOption("pyframe.compile takes a mode or options, not both (as torch.compile): "
                                   "a mode is a named set of options")
    if mode is not None and not isinstance(mode, str):
        raise InvalidCompileOption(f"pyframe.compile(mode=...) takes a str, not {mode!r}")
    if options is not None and not isinstance(options, dict):
        raise InvalidCompileOption(f"pyframe.compile(options=...) takes a dict, not {type(options).__name__}")
    if (mode is None or mode == "default") and not options:
        return backend
    return BackendWithSettings(backend, mode, options, dynamic)


class BackendWithSettings:
    """A backend called with a mode or options: inductor's config patches, or keyword arguments."""

    def __init__(self, backend: str | Callable, mode: str | None, options: dict[str, Any] | None,
                 dynamic: bool | None):
        self.backend, self.mode, self.options, self.dynamic = backend, mode, dict(options or {}), dynamic
        self.fn = lookup_backend(backend)
        self.__name__ = backend_name(backend)
        self.is_inductor = self.fn is _torch_inductor()
        if self.is_inductor:
            self.config_patches = _inductor_patches(mode, self.options, dynamic)
            self.kwargs: dict[str, Any] = {}
        else:
            self.kwargs = {"mode": mode} if mode not in (None, "default") else {}
            if self.options:
                self.kwargs["options"] = self.options
            _check_takes(self.fn, self.__name__, self.kwargs)

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable:
        if self.is_inductor:
            return self.fn(gm, example_inputs, config_patches=self.config_patches)
        return self.fn(gm, example_inputs, **self.kwargs)

    def __reduce__(self) -> tuple:
        # The recipe, not what was derived from it (nor the compilers pyframe attaches to a backend).
        return (BackendWithSettings, (self.backend, self.mode, self.options or None, self.dynamic))

    def __repr__(self) -> str:
        what = f"mode={self.mode!r}" if self.mode is not None else f"options={self.options!r}"
        return f"BackendWithSettings({self.__name__!r}, {what})"


def _torch_inductor() -> Callable | None:
    from torch._dynamo.backends.registry import lookup_backend as torch_lookup
    return torch_lookup("inductor")


def _inductor_patches(mode: str | None, options: dict[str, Any], dynamic: bool | None) -> dict[str, Any]:
    """torch.compile's `_TorchCompileInductorWrapper`: a mode's options, then the options given."""
    import torch._inductor
    import torch._inductor.config as inductor_config

    patches: dict[str, Any] = {}
    if mode is not None and mode != "default":
        modes = torch._inductor.list_mode_options(None, dynamic)
        if mode not in modes:
            raise InvalidCompileOption(f"unknown mode {mode!r} for backend 'inductor'; the modes are: "
                                       f"{', '.join(modes)}")
        patches.update(modes[mode])
    known = inductor_config.get_config_copy()
    for key, value in options.items():
        name = key.replace("-", "_")
        if name not in known:
            raise InvalidCompileOption(f"unknown option {key!r} for backend 'inductor' (its config entries, "
                                       f"torch._inductor.list_options(), are the options)")
        expected = inductor_config.get_type(name)
        if typing.get_origin(expected) is None and not isinstance(value, expected):
            raise InvalidCompileOption(f"option {key!r} of backend 'inductor' takes a "
                                       f"{type(known[name]).__name__}, not {type(value).__name__}: {value!r}")
        patches[name] = value
    return patches


def _check_takes(fn: Callable, name: str, kwargs: dict[str, Any]) -> None:
    """The backend's signature accepts these keyword arguments (or we cannot tell: a builtin)."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return
    names = {p.name for p in parameters if p.kind is not inspect.Parameter.POSITIONAL_ONLY}
    for key in kwargs:
        if key not in names:
            raise InvalidCompileOption(f"backend {name!r} takes no {key} (its signature is {name}"
                                       f"{inspect.signature(fn)}); modes and options are for backends that "
                                       f"take them, such as 'inductor'")

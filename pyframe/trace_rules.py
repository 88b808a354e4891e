"""Which code is user code: traced when the eval-frame hook meets its frame, inlined when called.

The rules are torch._dynamo 2.13's (`torch/_dynamo/trace_rules.py`), stated by place:

- The standard library is skipped: its directory, without the `site-packages` / `dist-packages`
  folders that lie inside it on a normal install (everything pip installs is user code).
- torch is skipped, except its model code (`TORCH_TRACED`: torch.nn's modules and torch.nn.functional's
  Python helpers, torch.distributions, and what torch._dynamo traces as user code), inlined when
  traced code calls it. As a frame the hook meets, only a module's `forward` is compiled (a
  DistributedDataParallel's forward, a torch.nn module called from a frame that runs as Python);
  a module's `__init__`, its `reset_parameters` or a functional helper run as Python, as
  torch._dynamo skips torch.nn's frames (`frame_skip_reason`). nn.Module's calling machinery
  (`_call_impl`) is not traced as a frame of its own: the hook meets the `forward` it calls.
- pyframe is skipped (the seed programs the demo runs, pyframe/seeds.py, excepted: they are user code).
- Third-party libraries torch._dynamo skips (numpy, tqdm, onnx, ...; `THIRDPARTY_SKIPPED`) are
  skipped; every other installed package is traced.
- `config.skip_modules` and `config.trace_modules` extend both lists by module name (a package
  covers everything under it); a name in `trace_modules` wins over every skip rule.

A call from traced code into a skipped third-party or configured module is a graph break: the
function runs as Python, as torch._dynamo runs a SkipFunctionVariable (standard library and torch
functions are handled by the translator's own models, not by this rule).

Decisions are per file and remembered; the C cache remembers a code object marked SKIP, so a
change to `config` applies to code the hook has not yet met (`pyframe.reset()` forgets the rest).
"""
from __future__ import annotations

import functools
import importlib.util
import os
import sysconfig
import types

import torch

from . import config

# torch modules whose frames are traced where the hook meets them: model code (torch.nn's modules
# and functional helpers, torch.ao.nn's, torch.distributions'), and the modules torch._dynamo traces
# as if they were user code (its LEGACY_MOD_INLINELIST). The rest of torch is skipped as a frame;
# called from traced code, a torch function is recorded or inlined by the translator's own models.
TORCH_TRACED = (
    "torch.nn", "torch.ao.nn", "torch.distributions",
    "torch._dynamo.external_utils", "torch._functorch.apis", "torch._functorch.deprecated",
    "torch.utils._typing_utils", "torch.ao.quantization.stubs", "torch.export.unflatten",
    "torch.distributed.algorithms._checkpoint.checkpoint_wrapper",
)
# Under torch.nn, but nn's machinery rather than model code: Module.__call__ (the hook meets the
# forward it calls), Parameter's metaclass (isinstance checks), the learning-rate schedulers.
TORCH_SKIPPED_FILES = ("torch/nn/modules/module.py", "torch/nn/parameter.py", "torch/optim/lr_scheduler.py")

# Third-party packages torch._dynamo skips (its THIRDPARTY_SKIPLIST), and pyframe's own
# dependencies that only run while compiling.
THIRDPARTY_SKIPPED = (
    "fx2trt_oss", "hypothesis", "networkx", "numpy", "onnx", "onnxruntime", "onnx_tf", "pandas", "sklearn",
    "tabulate", "tensorflow", "tensorrt", "torch2trt", "tqdm", "tree", "tvm", "xarray", "bytecode",
)

_GENERATED = ("<frozen ", "<__array_function__ internals>")
_INSTALLED = (f"{os.sep}site-packages{os.sep}", f"{os.sep}dist-packages{os.sep}")


def _dir(path: str) -> str:
    return os.path.join(os.path.realpath(path), "")


_PYFRAME_DIR = _dir(os.path.dirname(__file__))
_TORCH_DIR = _dir(os.path.dirname(torch.__file__))
_STDLIB_DIRS = tuple({_dir(sysconfig.get_paths()[k]) for k in ("stdlib", "platstdlib")})
# pyframe's own files are machinery, except the seed programs the demo runs: they are user code.
_OWN_USER_CODE = (os.path.join(_PYFRAME_DIR, "seeds.py"),)


def module_prefix(name: str) -> str | None:
    """The path a module name covers: a package's directory, a module's file (None: not found).
    Found without importing the module itself (its parent packages are imported, as by import)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError, AttributeError):
        return None
    if spec is None or not spec.origin or spec.origin in ("built-in", "frozen"):
        return None
    origin = os.path.realpath(spec.origin)
    if spec.submodule_search_locations is not None:  # a package: everything under its directory
        return _dir(os.path.dirname(origin))
    return origin


@functools.lru_cache(maxsize=None)
def _prefixes(names: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(p for p in map(module_prefix, names) if p is not None)


def _torch_prefixes() -> tuple[str, ...]:
    return tuple(_TORCH_DIR + name[len("torch."):].replace(".", os.sep) for name in TORCH_TRACED)


_TORCH_TRACED_PREFIXES = _torch_prefixes()
# (the model code among them: torch.nn's, torch.ao.nn's and torch.distributions' modules; of
# those, flex_attention is traced as a frame by torch._dynamo too: its LEGACY_MOD_INLINELIST)
_TORCH_ROOT_TRACED_PREFIXES = (_TORCH_DIR + os.path.join("nn", "attention", "flex_attention"),)
_TORCH_TRACED_MODEL_PREFIXES = tuple(p for p, name in zip(_TORCH_TRACED_PREFIXES, TORCH_TRACED)
                                     if name in ("torch.nn", "torch.ao.nn", "torch.distributions"))
_TORCH_SKIPPED_FILES = tuple(_TORCH_DIR + name[len("torch/"):].replace("/", os.sep) for name in TORCH_SKIPPED_FILES)


def _under(path: str, prefixes: tuple[str, ...]) -> bool:
    """`path` is one of `prefixes` or inside one (a prefix without a separator is a module's
    file, or a module path matched as torch._dynamo matches it: `torch/nn` covers `torch/nn.py`
    and `torch/nn/...`)."""
    return any(path == p or path.startswith(p if p.endswith(os.sep) else (p + os.sep, p + ".py"))
               for p in prefixes)


def _is_stdlib(path: str) -> bool:
    return path.startswith(_STDLIB_DIRS) and not any(part in path for part in _INSTALLED)


_CONFIGURED_SKIP = "a module config.skip_modules lists"
_THIRD_PARTY_SKIP = "a third-party library torch._dynamo skips"


@functools.lru_cache(maxsize=4096)
def _file_rule(filename: str, skip: tuple[str, ...], trace: tuple[str, ...]) -> str | None:
    path = os.path.realpath(filename)
    if trace and _under(path, _prefixes(trace)):
        return None
    if skip and _under(path, _prefixes(skip)):
        return _CONFIGURED_SKIP
    if path.startswith(_PYFRAME_DIR):
        return None if path in _OWN_USER_CODE else "pyframe's own code"
    if path.startswith(_TORCH_DIR):
        if _under(path, _TORCH_TRACED_PREFIXES) and path not in _TORCH_SKIPPED_FILES:
            return None
        return "torch's internals"
    if _is_stdlib(path):
        return "the standard library"
    if _under(path, _prefixes(THIRDPARTY_SKIPPED)):
        return _THIRD_PARTY_SKIP
    return None


def _names(setting: str) -> tuple[str, ...]:
    """config.skip_modules / config.trace_modules as a tuple of module names (one name alone is
    taken as a list of one)."""
    value = getattr(config, setting)
    if not value and type(value) in (list, tuple):  # (the default, asked at every inlined call)
        return ()
    names = (value,) if isinstance(value, str) else tuple(value)
    if not all(isinstance(n, str) for n in names):
        raise TypeError(f"pyframe.config.{setting} takes module names (str), not {value!r}")
    return names


def file_skip_reason(filename: str) -> str | None:
    """Why the code of `filename` is not user code, or None: it is traced."""
    if filename.startswith(_GENERATED):
        return f"generated code {filename}"
    if filename.startswith("<"):  # exec/eval (`<string>`): user code, as for torch._dynamo
        return None
    reason = _file_rule(filename, _names("skip_modules"), _names("trace_modules"))
    return None if reason is None else f"{reason} ({filename})"


def frame_skip_reason(code: types.CodeType) -> str | None:
    """Why a frame of `code` the hook meets is not compiled, or None. The file's rule, and: of
    torch's model code, only a module's `forward` is compiled where the hook meets it (the entry
    into a module called from Python, as a DDP wrapper calls it); its other functions (a module's
    `__init__` and `reset_parameters`, a functional helper) are only inlined when traced code calls
    them, as torch._dynamo 2.13 treats torch.nn (MOD_INLINELIST: skipped as frames)."""
    reason = file_skip_reason(code.co_filename)
    if reason is None and code.co_name != "forward" and _is_torch_model_code(code.co_filename) \
            and not _under(os.path.realpath(code.co_filename), _prefixes(_names("trace_modules"))):
        return f"torch's model code outside a forward ({code.co_qualname} in {code.co_filename})"
    return reason


@functools.lru_cache(maxsize=4096)
def _is_torch_model_code(filename: str) -> bool:
    path = os.path.realpath(filename)
    return _under(path, _TORCH_TRACED_MODEL_PREFIXES) and not _under(path, _TORCH_ROOT_TRACED_PREFIXES)


def call_skip_reason(code: types.CodeType) -> str | None:
    """Why a call from traced code into `code` is left to Python (a graph break), or None: it is
    inlined. Only third-party and configured skips apply: the standard library and torch are
    modelled by the translator itself. (Asked at every inlined call: decided once per file.)"""
    filename = code.co_filename
    if filename.startswith("<"):
        return None
    reason = _file_rule(filename, _names("skip_modules"), _names("trace_modules"))
    if reason not in (_CONFIGURED_SKIP, _THIRD_PARTY_SKIP):
        return None
    return f"a call into {reason} ({code.co_qualname} in {filename})"

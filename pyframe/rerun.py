"""When a compiled graph raises: run the frame again as plain Python, so the error is eager's.

The transformed code runs the graph first and replays the Python side effects the trace recorded
(`log.append(...)`, attribute and cell stores) after it. A graph that raises at run time (an index
out of range in `index_select`, a singular matrix in `cholesky`: errors that depend on values, which
the guards do not check) would skip that replay, and `log.append("before"); return x.index_select(0,
i)` would leave the log empty where eager leaves it with its entry.

So the graph call is inside a try range of the transformed code (codegen.PyCodegen.call_graph),
whose handler calls `run_as_python` with the frame's own code (the original function, or the resume
function whose graph raised), globals, closure and arguments: the frame runs again from its start as
CPython runs it, with the eval-frame hook off for the call (the cache is not consulted: compiled code
is never re-entered), and its side effects and its exception (or its result, if it does not raise)
are eager's. This is sound because the graph call is the first thing the transformed code does (its
arguments still hold their entry values) and the graph changed nothing Python can see, which
`can_run_again` checks when the code is made:

- the graph mutates no tensor that shares a storage with one of its inputs (a rerun would apply the
  mutation twice);
- a graph that draws random numbers gets its generator's state put back before the rerun
  (`RestoresRngOnError`: the rerun draws what eager drew).

A graph that mutates an input in place gets no handler: its exception reaches the caller as the graph
raised it, with the mutations made before the failing op applied, and the Python side effects the
trace recorded (before and after the failing op in program order) not replayed (docs/debugging.md,
"When a graph raises").
"""
from __future__ import annotations

import inspect
import types
import warnings
import weakref
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.fx
from torch.multiprocessing.reductions import StorageWeakRef

from . import _C, config
from .exc import BackendCompilerFailed, PyframeError


@dataclass(frozen=True)
class Rerun:
    """What the handler of one graph call knows: the frame's code, and the graph's names for messages.

    The code is held weakly: the transformed code holds this record among its constants, and the
    code's cache entry (in its co_extra slot, which the garbage collector does not see) holds the
    transformed code, so a strong reference would keep a dropped function's code alive for good.
    While the frame runs, its function holds the code."""

    code_ref: "weakref.ref[types.CodeType]"
    graph_name: str
    backend_name: str

    @property
    def code(self) -> types.CodeType:
        code = self.code_ref()
        assert code is not None, "a frame of this code is running"
        return code


def run_as_python(error: BaseException, rerun: Rerun, f_globals: dict, closure: tuple | None,
                  args: tuple) -> Any:
    """The handler of a graph call that raised `error`: run `rerun.code` (the frame's own, whose
    transformed code raised) as plain Python on the frame's arguments, in this frame's order
    (positional, keyword-only, *args, **kwargs). pyframe's own errors and non-Exceptions
    (KeyboardInterrupt) propagate.

    The rerun's exception is the one the caller gets. When the rerun does not raise, the error was the
    compiled graph's, not the program's (a backend's kernel failing): as for a backend that fails to
    compile, pyframe warns, naming it, and returns eager's result (`config.suppress_errors = False`:
    BackendCompilerFailed, the graph's error chained, after the frame ran)."""
    if isinstance(error, PyframeError) or not isinstance(error, Exception):
        raise error
    code = rerun.code
    fn = types.FunctionType(code, f_globals, code.co_name, None, closure)
    npos, nkw = code.co_argcount, code.co_kwonlyargcount
    positional = args[:npos]
    keywords = dict(zip(code.co_varnames[npos:npos + nkw], args[npos:npos + nkw]))
    rest = npos + nkw
    if code.co_flags & inspect.CO_VARARGS:
        positional += tuple(args[rest])
        rest += 1
    if code.co_flags & inspect.CO_VARKEYWORDS:
        keywords.update(args[rest])
    # A CallbackScope with no callback: the hook ignores every frame of the call (this one's
    # cached entries included); a region nested in it (pyframe.optimize) turns its own back on.
    result = _C.CallbackScope(fn, None)(*positional, **keywords)
    if not config.suppress_errors:
        raise BackendCompilerFailed(rerun.backend_name, error) from error
    warnings.warn(f"pyframe: {rerun.graph_name} of {code.co_name} (backend {rerun.backend_name!r}) raised "
                  f"{type(error).__name__}: {error}, where the frame run as Python does not; returning "
                  f"the result of the frame run as Python", stacklevel=2)
    return result


class RestoresRngOnError:
    """A graph that draws random numbers, called so that when it raises the default generator's
    state is what it was before the call: the rerun then draws what eager draws."""

    def __init__(self, fn: Callable):
        self.fn = fn

    def __call__(self, *args: Any) -> Any:
        state = torch.default_generator.get_state()
        try:
            return self.fn(*args)
        except BaseException:
            torch.default_generator.set_state(state)
            raise


def can_run_again(gm: torch.fx.GraphModule) -> bool:
    """The graph changes nothing its frame could see again if it raised part way: no in-place op on a
    tensor sharing a storage with an input (an op whose example value is not known counts as one)."""
    inputs = set()
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            storage = _storage(node.meta.get("example_value"))
            if storage is None:
                return False
            inputs.add(storage)
    for node in gm.graph.nodes:
        for target in _mutated(node):
            storage = _storage(target.meta.get("example_value")) if isinstance(target, torch.fx.Node) else None
            if storage is None or storage in inputs:
                return False
    return True


def draws_random_numbers(gm: torch.fx.GraphModule) -> bool:
    """Some op of the graph is one of aten's `nondeterministic_seeded` ops (rand, dropout, normal_...)."""
    return any(_is_random(node) for node in gm.graph.nodes)


_MUTATING_OPERATORS = {"setitem", "iadd", "isub", "imul", "itruediv", "ifloordiv", "imod", "ipow", "iand",
                       "ior", "ixor", "ilshift", "irshift", "imatmul"}


def _name(node: torch.fx.Node) -> str:
    return _target_name(node.op, node.target)


def _target_name(op: str, target: Any) -> str:
    if op == "call_method":
        return str(target)
    if op == "call_function":
        return getattr(target, "__name__", "") or ""
    return ""


def _mutated(node: torch.fx.Node) -> list[Any]:
    """The tensors an in-place op writes (its first argument, `out=`): [] for any other node. A
    submodule call (an autograd.Function's graphs) counts as writing all its tensor arguments."""
    op = node.op
    if op == "call_module":
        return [a for a in node.all_input_nodes]
    if op != "call_function" and op != "call_method":
        return []
    written = []
    kwargs = node.kwargs
    if "out" in kwargs:
        out = kwargs["out"]
        written.extend(out if isinstance(out, (tuple, list)) else [out])
    if (kwargs.get("inplace") is True or _writes_first_argument(op, node.target)) and node.args:
        written.append(node.args[0])
    return written


def _writes_first_argument(op: str, target: Any) -> bool:
    """By its name, the op writes its first argument (`add_`, `Tensor.__iadd__`, `operator.setitem`):
    decided once per target, as every node of a graph is asked. A callable that says it itself
    (`mutates_first_argument`: the NumPy wrappers, `wrapped_iadd`, made one per node) is asked
    each time, and not remembered."""
    try:
        return _in_place_targets[(op, target)]
    except KeyError:
        pass
    except TypeError:  # an unhashable target
        return _in_place_name(_target_name(op, target))
    says = getattr(target, "mutates_first_argument", None)
    if says is not None:
        return bool(says)
    found = _in_place_targets[(op, target)] = _in_place_name(_target_name(op, target))
    return found


def _in_place_name(name: str) -> bool:
    if name.startswith("__") and name.endswith("__"):  # Tensor.__setitem__, __iadd__...
        name = name[2:-2] if name[2:-2] in _MUTATING_OPERATORS else name
    return (name.endswith("_") and not name.endswith("__")) or name in _MUTATING_OPERATORS


_in_place_targets: dict[tuple[str, Any], bool] = {}


def _storage(value: Any) -> StorageWeakRef | None:
    if not isinstance(value, torch.Tensor):
        return None
    try:
        return StorageWeakRef(value.untyped_storage())
    except Exception:  # a tensor with no storage (sparse): not known
        return None


_random_names: dict[str, bool] = {}


def _is_random(node: torch.fx.Node) -> bool:
    if node.op == "call_module":
        return True  # not looked into: assume it draws
    name = _name(node)
    if not name:
        return False
    known = _random_names.get(name)
    if known is None:
        known = _random_names[name] = any(_seeded(candidate) for candidate in {name, name.rstrip("_")})
    return known and not _draws_nothing(node, name)


def _draws_nothing(node: torch.fx.Node, name: str) -> bool:
    """A seeded op told not to draw: a dropout not training (`F.dropout(x, p, training=False)`, what
    an nn.Dropout in eval mode calls; `torch.dropout(x, p, train=False)`) or with p=0, and
    attention with dropout_p=0 (`F.scaled_dot_product_attention`): each returns without drawing."""
    args, kwargs = node.args, node.kwargs
    if "dropout" in name:
        training = kwargs.get("training", kwargs.get("train", args[2] if len(args) > 2 else True))
        return training is False or _is_zero(kwargs.get("p", args[1] if len(args) > 1 else 0.5))
    if "scaled_dot_product_attention" in name:
        return _is_zero(kwargs.get("dropout_p", args[4] if len(args) > 4 else 0.0))
    return False


def _is_zero(p: Any) -> bool:
    return isinstance(p, (int, float)) and p == 0


def _seeded(name: str) -> bool:
    try:
        packet = getattr(torch.ops.aten, name)
    except (AttributeError, RuntimeError):
        return False
    return isinstance(packet, torch._ops.OpOverloadPacket) and any(
        torch.Tag.nondeterministic_seeded in getattr(packet, overload).tags for overload in packet.overloads())

"""The "onnxrt" backend: each graph exported to ONNX and run by ONNX Runtime on the CPU.

One graph pyframe hands to "onnxrt" goes:

    pyframe's graph --aot_autograd--> an ATen forward graph (and a backward graph, when something
    requires grad) --onnx_graph_compiler--> torch.onnx.export (torch.export, then onnxscript's
    translation of ATen ops) --> onnxruntime.InferenceSession(CPUExecutionProvider)

Every graph goes through torch's `aot_autograd`, not only those that need a backward: it also turns
in-place updates of inputs (BatchNorm's running statistics in training mode) into graph outputs that
it copies back after the call. ONNX has no in-place update, and `torch.onnx.export` leaves such an
update out of the model, so `compile_onnx` refuses a graph that has one rather than run it wrong.

The pieces are public, to build other backends the way the seed does:

    compile_onnx(gm, example_inputs)         -> OnnxGraph, called like gm.forward (a backend by
                                                itself, for graphs that update no input in place)
    onnx_graph_compiler(gm, example_inputs)  -> the same as a boxed function, for aot_autograd:
    my_backend = aot_autograd(fw_compiler=onnx_graph_compiler, decompositions=my_table)

Shapes are static for this backend (`onnxrt.static_shapes`, which pyframe.optimize honours): a call
with a new shape (the smaller last batch of an epoch) compiles and exports a new entry; `dynamic`
changes nothing.

Needs the `onnx` extra (`pip install -e ".[onnx]"`: onnx, onnxruntime, onnxscript). Without it,
`pyframe.optimize("onnxrt")` raises `MissingDependency` naming that command: a missing package is
not a property of one graph, so it is not left to the per-graph fallback (a warning, then eager).
"""
from __future__ import annotations

import contextlib
import importlib
import logging
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import torch

from ..exc import PyframeError
from .compile import compile_with_backend
from .decompositions import onnx_decompositions
from .registry import register_backend

#: What the backend imports; the `onnx` extra of pyproject.toml installs them.
ONNX_PACKAGES = ("onnx", "onnxruntime", "onnxscript")
INSTALL_HINT = 'pip install -e ".[onnx]"'


class MissingDependency(PyframeError, ImportError):
    """A package a backend needs is not installed."""


def check_requirements() -> None:
    """Raise MissingDependency, naming the install command, unless every ONNX package imports."""
    missing = [name for name in ONNX_PACKAGES if not _imports(name)]
    if missing:
        raise MissingDependency(
            f"the 'onnxrt' backend needs {', '.join(missing)} (not installed): run {INSTALL_HINT} in "
            f"pyframe's checkout, or pip install {' '.join(ONNX_PACKAGES)}")


def _imports(name: str) -> bool:
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


# --------------------------------------------------------------------------------------------------
# One graph as an ONNX Runtime session


@dataclass
class OnnxGraph:
    """A graph exported to ONNX and loaded in ONNX Runtime; called with the graph's inputs."""

    session: Any                # onnxruntime.InferenceSession
    model: Any                  # the onnx.ModelProto it runs (onnx.printer.to_text(model) shows it)
    input_names: list[str]      # the session's inputs, in the graph's placeholder order
    outputs: list[int | None]   # per graph output: its index among the session's outputs; None: a None
    single: bool                # the graph returns one value, not a tuple
    calls: int = field(default=0, compare=False)

    def __call__(self, *args: torch.Tensor) -> Any:
        # ONNX Runtime reads dense row-major buffers: .contiguous() is a no-op for most inputs.
        feed = {name: arg.detach().contiguous().numpy() for name, arg in zip(self.input_names, args)}
        produced = self.session.run(None, feed)
        self.calls += 1
        results = tuple(None if i is None else torch.from_numpy(produced[i]) for i in self.outputs)
        return results[0] if self.single else results


class _TensorOutputsOnly(torch.nn.Module):
    """`gm` returning only its tensor outputs: an ONNX graph has no None output (the backward graph
    of aot_autograd returns None as the gradient of every input that does not require grad)."""

    def __init__(self, gm: torch.fx.GraphModule, positions: list[int], single: bool):
        super().__init__()
        self.gm = gm
        self.positions = positions
        self.single = single

    def forward(self, *args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out = self.gm(*args)
        if self.single:
            out = (out,)
        return tuple(out[i] for i in self.positions)


def compile_onnx(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> OnnxGraph:
    """Export `gm` to ONNX and open it in ONNX Runtime's CPU provider (torch.compile's contract)."""
    check_requirements()
    import onnxruntime  # an optional dependency, checked just above

    for i, example in enumerate(example_inputs):
        if not isinstance(example, torch.Tensor):
            raise TypeError(f"onnxrt compiles graphs of tensors; input {i} is a {type(example).__name__}")
        if example.device.type != "cpu":
            raise ValueError(f"onnxrt runs on the CPU; input {i} is on {example.device}")
    returned = _output_values(gm)
    single = not isinstance(returned, (tuple, list))
    values = [returned] if single else list(returned)
    positions = [i for i, value in enumerate(values) if isinstance(value, torch.fx.Node)]
    if len(positions) + sum(value is None for value in values) != len(values):
        raise TypeError(f"onnxrt compiles graphs returning tensors (or None); this one returns {returned!r}")

    program = _export(_TensorOutputsOnly(gm, positions, single), tuple(example_inputs))
    updated = [spec.target for spec in program.exported_program.graph_signature.output_specs
               if spec.kind == torch.export.graph_signature.OutputKind.USER_INPUT_MUTATION]
    if updated:
        raise NotImplementedError(
            f"the graph updates its input(s) {', '.join(map(str, updated))} in place, which ONNX cannot "
            f"express; compile through aot_autograd (the 'onnxrt' backend does), which makes updates outputs")

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = torch.get_num_threads()  # as many threads as eager torch uses
    options.log_severity_level = 3  # errors only
    model = program.model_proto
    session = onnxruntime.InferenceSession(model.SerializeToString(), options,
                                           providers=["CPUExecutionProvider"])
    input_names = [arg.name for arg in session.get_inputs()]
    if len(input_names) != len(example_inputs) or len(session.get_outputs()) != len(positions):
        raise RuntimeError(f"the ONNX model has {len(input_names)} inputs and {len(session.get_outputs())} "
                           f"outputs; the graph has {len(example_inputs)} and {len(positions)}")
    index = {position: k for k, position in enumerate(positions)}
    return OnnxGraph(session, model, input_names, [index.get(i) for i in range(len(values))], single)


def onnx_graph_compiler(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> Callable:
    """`compile_onnx` as aot_autograd's compilers want it: a boxed function (one list argument)."""
    graph = compile_onnx(gm, example_inputs)
    run = _boxed(graph)
    run.onnx_graph = graph  # type: ignore[attr-defined]
    return run


def _boxed(fn: Callable) -> Callable:
    """`fn(*args)` as `run(args)`, aot_autograd's calling convention for compiled graphs."""
    def run_boxed(args: list[torch.Tensor]) -> Any:
        inputs = list(args)
        args.clear()  # boxed convention: the callee empties the list, so inputs can be freed early
        return fn(*inputs)

    run_boxed._boxed_call = True  # type: ignore[attr-defined]  (how aot_autograd recognizes it)
    return run_boxed


@register_backend
def onnxrt(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> Callable:
    """Forward (and backward, when training) in ONNX Runtime, through torch's aot_autograd."""
    check_requirements()
    # torch._dynamo takes seconds to import; pyframe imports it only for a backend that needs it.
    from torch._dynamo.backends.common import aot_autograd

    name = gm.meta.get("pyframe_name", "a graph")

    def backward_compiler(bw_gm: torch.fx.GraphModule, bw_inputs: list[torch.Tensor]) -> Callable:
        # aot_autograd compiles the backward graph at the first backward call, outside
        # compile_with_backend's reach: apply the same policy (warn and run eagerly, or raise) here.
        compiled = compile_with_backend(onnx_graph_compiler, "onnxrt", bw_gm, bw_inputs,
                                        f"the backward graph of {name}")
        return compiled.fn if compiled.error is None else _boxed(compiled.fn)

    aot = aot_autograd(fw_compiler=onnx_graph_compiler, bw_compiler=backward_compiler,
                       decompositions=onnx_decompositions())
    return aot(gm, example_inputs)


onnxrt.check_requirements = check_requirements  # type: ignore[attr-defined]  (see registry.py)
# ONNX Runtime sessions are made for the sizes exported: frames compiled for it keep static shapes
# (a new size compiles a new entry), whatever `dynamic` says (see eval_frame.optimize).
onnxrt.static_shapes = True  # type: ignore[attr-defined]


# --------------------------------------------------------------------------------------------------


def _output_values(gm: torch.fx.GraphModule) -> Any:
    for node in gm.graph.nodes:
        if node.op == "output":
            return node.args[0]
    raise ValueError("the graph has no output node")


def _export(module: torch.nn.Module, args: tuple) -> Any:
    """torch.onnx.export's dynamo exporter, without its chatter (a failure still raises)."""
    with warnings.catch_warnings(), _quiet("torch.onnx"), _quiet("onnxscript"):
        warnings.simplefilter("ignore")  # "exporting a model in training mode", deprecations
        try:
            return torch.onnx.export(module, args, dynamo=True, verbose=False, optimize=True)
        except Exception as e:
            # The exporter's message is a page of advice; the innermost cause says what went wrong
            # ("No ONNX function found for aten.xxx"), and stays chained for the full story.
            root = e
            while root.__cause__ is not None:
                root = root.__cause__
            lines = str(root).strip().splitlines()
            raise RuntimeError(f"torch.onnx.export failed: {type(root).__name__}: "
                               f"{lines[0] if lines else ''}") from e


@contextlib.contextmanager
def _quiet(logger_name: str) -> Iterator[None]:
    logger = logging.getLogger(logger_name)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)

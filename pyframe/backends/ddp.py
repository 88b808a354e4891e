"""Graphs of a module under DistributedDataParallel, split at its gradient buckets.

DDP all-reduces gradients in buckets: a bucket's all-reduce starts when autograd has made every
gradient in it. A graph compiled by an AOT backend is one autograd node, whose backward makes all
its gradients at once, at its very end: no all-reduce could overlap the backward's compute. So,
as torch._dynamo's DDPOptimizer does (torch/_dynamo/backends/distributed.py), a graph captured
while DDP's forward runs is cut into pieces whose parameters fill one bucket each, and each piece
goes to the backend on its own: the backward of the last piece runs first, and its bucket's
all-reduce starts while the earlier pieces' backward still computes.

The plan (`plan_buckets`) walks the graph backwards, the order its gradients become ready,
adding each parameter's bytes to the current bucket; a bucket that has reached DDP's cap (the
first one: DDP's first-bucket cap) is closed as soon as one of its nodes feeds a later piece.
`DDPSplitBackend` is a backend: it splits the graph with `torch.fx.passes.split_module`, hands
each piece to the user's backend with example inputs made by running the pieces on FakeTensors,
and returns the split module, which calls the compiled pieces in order. convert_frame.py puts it
in front of the user's backend for a frame compiled inside DDP's forward, unless
`pyframe.config.optimize_ddp` is False.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.fx.passes.split_module import split_module
from torch.nn.parallel import DistributedDataParallel


@dataclass
class Bucket:
    """The nodes of one piece (in reverse graph order) and the parameters whose gradients it makes."""

    size: int = 0                                         # bytes of those parameters
    params: list[str] = field(default_factory=list)       # their placeholders' names
    nodes: list[torch.fx.Node] = field(default_factory=list)


def active_ddp_module() -> Optional[torch.nn.Module]:
    """The DistributedDataParallel whose forward is running now (it calls the module it wraps
    inside `_inside_ddp_forward`), or None."""
    return DistributedDataParallel._get_active_ddp_module()


def bucket_caps(ddp: torch.nn.Module) -> tuple[int, int]:
    """(the first bucket's cap, every other bucket's cap) in bytes. The others are DDP's own; the
    first is torch.distributed's default first bucket (1 MiB), as torch._dynamo's DDPOptimizer
    takes it whatever DDP was given, so the pieces are Dynamo's (never above the others' cap,
    where Dynamo raises)."""
    cap = ddp.bucket_bytes_cap
    return min(getattr(torch.distributed, "_DEFAULT_FIRST_BUCKET_BYTES", cap), cap), cap


def _is_reduced(value: Any) -> bool:
    """A parameter whose gradient DDP all-reduces: requires grad and not in DDP's ignore list."""
    return isinstance(value, torch.nn.Parameter) and value.requires_grad and not getattr(value, "_ddp_ignored", False)


def _feeds_outside(bucket: Bucket) -> bool:
    """Some node of the bucket is used by a node not in it (a later piece, or the output): the
    bucket can end here and still be a piece with an output."""
    inside: set[torch.fx.Node] = set()
    for node in bucket.nodes:  # (reverse graph order: a node's users come before it)
        inside.add(node)
        if any(user not in inside for user in node.users):
            return True
    return False


def plan_buckets(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], first_cap: int, cap: int) -> list[Bucket]:
    """The graph's nodes in pieces, first piece first, each piece's parameters about one bucket."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    params = {node: value for node, value in zip(placeholders, example_inputs) if _is_reduced(value)}
    counted: set[torch.fx.Node] = set()
    buckets = [Bucket()]
    for node in reversed(gm.graph.nodes):
        if node.op in ("placeholder", "output"):
            continue
        current = buckets[0]
        limit = first_cap if len(buckets) == 1 else cap
        if current.size >= limit and _feeds_outside(current):
            current = Bucket()
            buckets.insert(0, current)
        if node.op in ("call_function", "call_method"):
            for arg in node.args:
                if isinstance(arg, torch.fx.Node) and arg in params and arg not in counted:
                    counted.add(arg)
                    current.size += params[arg].untyped_storage().nbytes()
                    current.params.append(arg.name)
        current.nodes.append(node)
    if len(buckets) > 1 and buckets[0].size == 0:
        # the graph's first ops touch no parameter: they join the first bucket's piece
        buckets[1].nodes.extend(buckets[0].nodes)
        del buckets[0]
    return buckets


class _Piece(torch.nn.Module):
    """A compiled piece in the split module: the backend's callable, given back as the piece's
    graph returned it (AOT backends need a tuple of outputs; a single one is unwrapped)."""

    def __init__(self, compiled: Callable, single: bool) -> None:
        super().__init__()
        self.compiled, self.single = compiled, single

    def forward(self, *args: Any) -> Any:
        out = self.compiled(*args)
        return out[0] if self.single and isinstance(out, (tuple, list)) else out


class _PieceCompiler(torch.fx.Interpreter):
    """Runs the split module on FakeTensors; each piece it meets goes to the backend with the
    fake values that reach it, and is replaced by what the backend made of it."""

    def __init__(self, split: torch.fx.GraphModule, backend: Callable, fake_mode: FakeTensorMode) -> None:
        super().__init__(split)
        self.backend, self.fake_mode = backend, fake_mode

    def run_node(self, n: torch.fx.Node) -> Any:
        if n.op != "call_module":
            with self.fake_mode:
                return super().run_node(n)
        args, kwargs = self.fetch_args_kwargs_from_env(n)
        piece: torch.fx.GraphModule = self.fetch_attr(str(n.target))
        with self.fake_mode:
            out = piece(*args, **kwargs)
        output = next(node for node in reversed(piece.graph.nodes) if node.op == "output")
        single = not isinstance(output.args[0], tuple)
        if single:
            output.args = ((output.args[0],),)
            piece.recompile()
        with torch._guards.tracing(torch._guards.TracingContext(self.fake_mode)):
            compiled = self.backend(piece, list(args))
        setattr(self.module, str(n.target), _Piece(compiled, single))
        return out


class DDPSplitBackend:
    """A backend that splits each graph at DDP's buckets and hands every piece to `backend`."""

    def __init__(self, backend: Callable, first_cap: int, cap: int) -> None:
        self.backend, self.first_cap, self.cap = backend, first_cap, cap
        self.buckets: list[Bucket] = []  # the plan of the last graph it split (to study it)

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Callable:
        buckets = self.buckets = plan_buckets(gm, example_inputs, self.first_cap, self.cap)
        if len(buckets) == 1:
            return self.backend(gm, example_inputs)
        piece_of = {node: i for i, bucket in enumerate(buckets) for node in bucket.nodes}
        split = split_module(gm, None, lambda node: piece_of[node])
        fake_mode = torch._guards.detect_fake_mode(example_inputs) or FakeTensorMode(allow_non_fake_inputs=True)
        fakes = [fake_mode.from_tensor(x, static_shapes=True)
                 if isinstance(x, torch.Tensor) and not isinstance(x, FakeTensor) else x for x in example_inputs]
        _PieceCompiler(split, self.backend, fake_mode).run(*fakes)
        split.recompile()
        return split

"""Training on many processes, compiled as torch._dynamo compiles it.

- DistributedDataParallel (pyframe/backends/ddp.py): the graph of a module DDP runs is split at
  DDP's gradient buckets, each piece compiled on its own, the same pieces as torch._dynamo's
  DDPOptimizer makes.
- FSDP2 (`fully_shard` on each block and on the net): the blocks' forwards, between the hooks
  FSDP installs, compile as frames of their own, one entry for all blocks (modules are guarded by
  type), the graphs torch._dynamo compiles.

Losses and gradients equal eager's. Most tests run in this process on a one-rank gloo group (the
split depends on the bucket caps and the graph, not on the number of ranks);
`test_ranks_train_as_eager_does` starts two (and, marked slow, four)."""
from __future__ import annotations

import datetime
import os
import socket
import tempfile

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel as DDP

import pyframe
from pyframe.debug.compare import CountingBackend, engine_unavailable_reason, optimize_with, reset_engines, \
    resolve_backend
from tests.cases.models import ResidualNet

pytestmark = pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                                reason="torch.distributed with gloo is not available")


@pytest.fixture(scope="module")
def one_rank():
    if dist.is_initialized():
        pytest.skip("a process group is already initialized in this process")
    with tempfile.TemporaryDirectory() as tmp:
        dist.init_process_group("gloo", init_method=f"file://{tmp}/store", rank=0, world_size=1)
        try:
            yield
        finally:
            dist.destroy_process_group()


def _train(engine, inner, cap_mb, width, compile_outside=True, steps=2):
    """Losses, final gradients and the graphs the backend saw, for SGD steps on DDP(ResidualNet)."""
    torch.manual_seed(0)
    net = ResidualNet(width)
    backend = CountingBackend(resolve_backend(inner))
    if engine is None:
        model = DDP(net, bucket_cap_mb=cap_mb)
    elif compile_outside:  # compile(DDP(net))
        model = optimize_with(engine, DDP(net, bucket_cap_mb=cap_mb), backend)
    else:  # DDP(compile(net))
        model = DDP(optimize_with(engine, net, backend), bucket_cap_mb=cap_mb)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for step in range(steps):
        torch.manual_seed(100 + step)
        x, y = torch.randn(8, width), torch.randn(8, 10)
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        losses.append(loss.detach())
        grads = [p.grad.clone() for p in net.parameters()]
        opt.step()
    reset_engines()
    return torch.stack(losses), grads, backend.graphs


@pytest.mark.parametrize("inner, cap_mb, width, compile_outside", [
    ("eager", 1, 256, True),       # two pieces
    ("eager", 2, 384, True),       # three: the first bucket is capped at 1 MiB
    ("aot_eager", 1, 256, False),  # DDP(compile(net)); each piece an autograd function of its own
    pytest.param("inductor", 1, 256, True, marks=pytest.mark.slow),
])
def test_graphs_are_split_at_ddps_buckets_as_torch_dynamo_splits_them(one_rank, inner, cap_mb, width, compile_outside):
    if (why := engine_unavailable_reason("dynamo")) is not None:
        pytest.skip(why)
    eager_losses, eager_grads, _ = _train(None, inner, cap_mb, width)
    losses, grads, graphs = _train("pyframe", inner, cap_mb, width, compile_outside)
    _, _, dynamo_graphs = _train("dynamo", inner, cap_mb, width, compile_outside)
    torch.testing.assert_close(losses, eager_losses)
    for got, want in zip(grads, eager_grads):
        torch.testing.assert_close(got, want)
    assert len(graphs) > 1
    assert [g.ops for g in graphs] == [g.ops for g in dynamo_graphs]
    assert [g.code for g in graphs] == [g.code for g in dynamo_graphs]


def test_each_piece_is_a_node_of_its_own_in_the_backward(one_rank):
    """The point of the split: with an AOT backend the backward is one autograd node per piece,
    so the gradients of the last piece are made (and their bucket all-reduced) before the earlier
    pieces' backward runs; unsplit, it is one node that makes every gradient at its end."""
    def compiled_nodes(optimize_ddp):
        torch.manual_seed(0)
        pyframe.config.optimize_ddp = optimize_ddp
        try:
            model = pyframe.optimize("aot_eager")(DDP(ResidualNet(256), bucket_cap_mb=1))
            loss = model(torch.randn(8, 256)).sum()
        finally:
            pyframe.config.optimize_ddp = True
            pyframe.reset()
        seen, todo, found = set(), [loss.grad_fn], 0
        while todo:
            fn = todo.pop()
            if fn is None or fn in seen:
                continue
            seen.add(fn)
            found += "CompiledFunction" in type(fn).__name__
            todo.extend(next_fn for next_fn, _ in fn.next_functions)
        return found

    assert compiled_nodes(True) == 2
    assert compiled_nodes(False) == 1


def test_optimize_ddp_off_gives_one_graph_as_torch_dynamos_switch_does(one_rank):
    pyframe.config.optimize_ddp = False
    try:
        losses, _, graphs = _train("pyframe", "eager", 1, 256)
    finally:
        pyframe.config.optimize_ddp = True
    eager_losses, _, _ = _train(None, "eager", 1, 256)
    torch.testing.assert_close(losses, eager_losses)
    assert len(graphs) == 1
    if engine_unavailable_reason("dynamo") is None:
        with torch._dynamo.config.patch(optimize_ddp=False):
            _, _, dynamo_graphs = _train("dynamo", "eager", 1, 256)
        assert [g.ops for g in graphs] == [g.ops for g in dynamo_graphs]


def test_a_module_outside_ddp_is_not_split(one_rank):
    _, _, graphs = _train("pyframe", "eager", 1, 256, compile_outside=True, steps=1)
    torch.manual_seed(0)
    backend = CountingBackend()
    pyframe.optimize(backend)(ResidualNet(256))(torch.randn(8, 256))
    pyframe.reset()
    assert len(graphs) == 2 and len(backend.graphs) == 1


def _fully_sharded(width: int = 64) -> ResidualNet:
    net = ResidualNet(width)
    for block in net.blocks:
        fully_shard(block)
    fully_shard(net)
    return net


def _train_fsdp(engine, inner, steps=2):
    torch.manual_seed(0)
    net = _fully_sharded()
    backend = CountingBackend(resolve_backend(inner))
    model = net if engine is None else optimize_with(engine, net, backend)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    losses = []
    for step in range(steps):
        torch.manual_seed(step)
        loss = model(torch.randn(8, 64)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    reset_engines()
    return torch.stack(losses), backend.graphs


@pytest.mark.parametrize("inner", ["eager", "aot_eager"])
def test_fully_sharded_blocks_compile_torch_dynamos_graphs(one_rank, inner):
    if (why := engine_unavailable_reason("dynamo")) is not None:
        pytest.skip(why)
    eager_losses, _ = _train_fsdp(None, inner)
    losses, graphs = _train_fsdp("pyframe", inner)
    _, dynamo_graphs = _train_fsdp("dynamo", inner)
    torch.testing.assert_close(losses, eager_losses)
    # a block's forward (its input without grad, then with), and the head
    assert len(graphs) == 3
    assert [g.ops for g in graphs] == [g.ops for g in dynamo_graphs]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_main(rank: int, world_size: int, port: int, results) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world_size, timeout=datetime.timedelta(seconds=60))
    try:
        torch.set_num_threads(1)
        out = {}
        for engine in (None, "pyframe", "dynamo"):
            torch.manual_seed(0)
            net = ResidualNet(256)
            backend = CountingBackend()
            model = DDP(net, bucket_cap_mb=1)
            if engine is not None:
                model = optimize_with(engine, model, backend)
            opt = torch.optim.SGD(model.parameters(), lr=0.05)
            losses = []
            for step in range(2):
                torch.manual_seed(100 * rank + step)  # each rank its own data: the all-reduce matters
                x, y = torch.randn(8, 256), torch.randn(8, 10)
                loss = ((model(x) - y) ** 2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(loss.item())
            out[engine] = (losses, [p.detach().clone() for p in net.parameters()], [g.ops for g in backend.graphs])
            reset_engines()
            fsdp_losses, fsdp_graphs = _train_fsdp(engine, "eager")
            out["fsdp", engine] = (fsdp_losses.tolist(), [g.ops for g in fsdp_graphs])
        results[rank] = out
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("world_size", [2, pytest.param(4, marks=pytest.mark.slow)])
def test_ranks_train_as_eager_does(world_size):
    """DDP and FSDP2 on two (and four) gloo ranks, each rank its own data: eager's losses and
    parameters on every rank, torch._dynamo's graphs. A rank that fails or hangs fails the test."""
    if (why := engine_unavailable_reason("dynamo")) is not None:
        pytest.skip(why)
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager:
        results, port = manager.dict(), _free_port()
        procs = [ctx.Process(target=_rank_main, args=(rank, world_size, port, results)) for rank in range(world_size)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout=120 * world_size)
        hung = [p for p in procs if p.is_alive()]
        for p in hung:
            p.kill()
        assert not hung, "a rank did not finish in time"
        assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
        results = dict(results)
    for rank in range(world_size):
        eager_losses, eager_params, _ = results[rank][None]
        losses, params, graphs = results[rank]["pyframe"]
        _, _, dynamo_graphs = results[rank]["dynamo"]
        torch.testing.assert_close(torch.tensor(losses), torch.tensor(eager_losses))
        for got, want in zip(params, eager_params):
            torch.testing.assert_close(got, want)
        assert len(graphs) == 2 and graphs == dynamo_graphs
        torch.testing.assert_close(torch.tensor(results[rank]["fsdp", "pyframe"][0]),
                                   torch.tensor(results[rank]["fsdp", None][0]))
        assert results[rank]["fsdp", "pyframe"][1] == results[rank]["fsdp", "dynamo"][1]
    # the ranks saw different data; the all-reduced gradients leave them with the same parameters
    for rank in range(1, world_size):
        for got, want in zip(results[0]["pyframe"][1], results[rank]["pyframe"][1]):
            torch.testing.assert_close(got, want)

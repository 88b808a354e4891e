"""Training on two processes with DistributedDataParallel, compiled by pyframe.

Each rank trains DDP(ResidualNet) compiled with `pyframe.compile(..., backend="aot_eager")` on its
own data; DDP all-reduces the gradients, so the ranks end with the same parameters. pyframe splits
the captured graph at DDP's gradient buckets, as torch._dynamo's DDPOptimizer does: the backward of
each piece is an autograd node of its own, and a bucket's all-reduce starts as soon as its piece's
backward is done (`pyframe.config.optimize_ddp = False` keeps one graph). The script prints, on
rank 0, the pieces the backend compiled and each step's loss.

Run:  python examples/ddp_training.py          (two ranks on gloo, CPU; or under torchrun:
      torchrun --nproc-per-node 2 examples/ddp_training.py)
"""

from __future__ import annotations

import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP

import pyframe


class ResidualNet(torch.nn.Module):
    def __init__(self, width: int = 256, blocks: int = 4) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, width))
            for _ in range(blocks))
        self.head = torch.nn.Linear(width, 10)

    def forward(self, x):
        for block in self.blocks:
            x = x + block(x)
        return self.head(x)


def train(rank: int, world_size: int) -> None:
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    torch.manual_seed(0)  # the same initial parameters on every rank
    pieces = []

    def counting_aot_eager(gm, example_inputs):
        pieces.append(len([n for n in gm.graph.nodes if n.op == "call_function"]))
        return pyframe.backends.lookup_backend("aot_eager")(gm, example_inputs)

    model = pyframe.compile(DDP(ResidualNet(), bucket_cap_mb=1), backend=counting_aot_eager)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(4):
        torch.manual_seed(1000 * rank + step)  # each rank its own batch
        x, y = torch.randn(32, 256), torch.randn(32, 10)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0:
            print(f"step {step}: loss {loss.item():.4f}")
    if rank == 0:
        print(f"graph pieces compiled (ops in each): {pieces}")
    dist.destroy_process_group()


def _spawned(rank: int, world_size: int, port: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    train(rank, world_size)


if __name__ == "__main__":
    if "RANK" in os.environ:  # under torchrun
        train(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))
    else:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            free_port = s.getsockname()[1]
        mp.spawn(_spawned, args=(2, free_port), nprocs=2)

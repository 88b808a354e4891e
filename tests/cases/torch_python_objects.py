"""Corpus: torch objects in Python positions. A Parameter made in the frame, grad mode switched with
torch._C._set_grad_enabled, dtypes compared and passed around, and tensor methods that return
Python values (dim(), is_contiguous(), dtype, layout) deciding branches."""

import torch

from pyframe.debug.cases import case


@case(inputs=lambda: torch.randn(4))
def parameter_made_in_the_frame(x):
    """nn.Parameter(t) made while tracing: a leaf that requires grad, used in ops."""
    p = torch.nn.Parameter(torch.ones(4) * 2)
    y = x * p
    return y.sum() if p.requires_grad else y


@case(inputs=lambda: torch.randn(4, requires_grad=True))
def set_grad_enabled_through_torch_c(x):
    """torch._C._set_grad_enabled toggles grad mode between ops and restores it."""
    prev = torch.is_grad_enabled()
    torch._C._set_grad_enabled(False)
    y = x * 2
    torch._C._set_grad_enabled(prev)
    return y + x, y.requires_grad


def _cast(t, dtype):
    return t.to(dtype) if t.dtype != dtype else t


@case(inputs=lambda: (torch.randn(4), torch.arange(4)))
def dtypes_compared_and_passed(x, idx):
    """dtypes compared with == and `is`, kept in a list, passed to a helper, read as attributes."""
    target = x.dtype
    kinds = [idx.dtype, torch.float16]
    y = _cast(idx, target)
    if kinds[0] is torch.int64 and target.is_floating_point and not kinds[0].is_floating_point:
        y = y + x.to(kinds[1]).to(target)
    return y * target.itemsize


@case(inputs=lambda: (torch.randn(2, 3), torch.randn(3, 2).t()))
def tensor_methods_deciding_branches(a, b):
    """dim(), ndim, is_contiguous(), layout, is_floating_point(), element_size(), device.type."""
    y = a
    if a.dim() == 2 and b.ndim == 2:
        y = y + b.contiguous() if not b.is_contiguous() else y + b
    if a.layout == torch.strided and a.is_floating_point():
        y = y * a.element_size()
    if a.device.type == "cpu" and a.dtype == torch.float32:
        y = y - 1
    return y


@case(inputs=lambda: torch.randn(2, 3, requires_grad=True))
def tensor_attributes_read_as_values(x):
    """is_leaf, is_cpu, is_meta, itemsize, nbytes: known while tracing (torch._dynamo records a read
    of each in its graph, used by nothing) and deciding what the frame computes."""
    y = x * 2
    scale = x.itemsize + y.nbytes / 24
    if x.is_leaf and not y.is_leaf and x.is_cpu and not y.is_meta:
        y = y + scale
    return y


@case(inputs=lambda: torch.randn(4))
def dtype_table_lookup(x):
    """A dtype as a dict key and as a default argument."""
    eps = {torch.float32: 1e-6, torch.float64: 1e-12}

    def stable_log(t, dtype=torch.float64):
        return (t.to(dtype).abs() + eps[dtype]).log()

    return stable_log(x) + stable_log(x, x.dtype)


@case(inputs=lambda: (torch.randn(3), torch.randn(3, requires_grad=True)))
def requires_grad_already_set(x, w):
    """`y.requires_grad_(True)` on a tensor that requires grad already (transformers' hook on the
    input embeddings under gradient checkpointing): nothing to do, and no node, as torch._dynamo."""
    y = x * w
    y.requires_grad_(True)
    return y.sin()


@case(inputs=lambda: (torch.randn(4), (torch.randn(4),)))
def is_tensor_of_containers_of_tensors(x, pair):
    """torch.is_tensor of a tuple or list holding tensors is answered by the type (False)."""
    n = 0
    for item in [x, 1.0, pair, [x]]:
        if torch.is_tensor(item):
            n += item.numel()
        elif isinstance(item, (tuple, list)):
            n += len(item)
    return x * n


@case(inputs=lambda: torch.randn(4))
def torch_version_compared_and_split(x):
    """torch.__version__ (a TorchVersion, a str compared as a version) as a constant."""
    if torch.__version__ >= "2.0":
        x = x + 1
    major = int(torch.__version__.split(".")[0])
    return x * major


@case(inputs=lambda: torch.randn(4, requires_grad=True))
def grad_mode_decorators_on_local_functions(x):
    """`@torch.no_grad()` / `@torch.enable_grad()` on functions defined in the frame: each call runs
    in that mode and puts the mode found back."""
    @torch.no_grad()
    def frozen(t):
        return t * 2

    @torch.enable_grad()
    def tracked(t):
        return t * 3

    return frozen(x) + tracked(x), torch.is_grad_enabled()


@case(inputs=lambda: torch.randn(4))
def grad_of_a_leaf_the_graph_made(x):
    """`.grad` of a tensor the graph made with no history: None (no backward ran since)."""
    y = x.clone()
    w = torch.zeros(4).detach()
    return y * (y.grad is None) + (w.grad is None) + y.is_leaf


@case(inputs=lambda: torch.randn(4))
def promoted_dtype_chosen_in_python(x):
    """torch.promote_types of two dtypes is a constant of the trace, then used as an argument."""
    dt = torch.promote_types(x.dtype, torch.float64)
    return x.to(dt) * torch.finfo(dt).bits


@case(inputs=lambda: torch.randn(4))
def random_generator_made_in_the_frame(x):
    """`torch.Generator().manual_seed(s)` and draws from it: a generator holds RNG state of its own,
    so it is made when the frame runs (torch._dynamo leaves it to Python too), never once while
    tracing for every call to share; the ops around it stay in one graph."""
    y = x.sin()
    g = torch.Generator().manual_seed(7)
    noise = torch.rand(4, generator=g)
    return y + noise * 2


class _Scaled(torch.nn.Module):
    def __init__(self, k, name):
        super().__init__()
        self.k = k
        self.name = name
        self.act = torch.nn.GELU()

    def forward(self, t):
        return self.act(t) * self.k + len(self.name)


@case(inputs=lambda: torch.randn(4))
def module_made_and_called_after_ops(x):
    """A user nn.Module made in the frame after tensor ops, with Python attributes and a submodule,
    then called: its __init__ (nn.Module.__init__ through super()) and forward are traced into the
    graph of the ops before them, as torch._dynamo does."""
    y = x.cos()
    m = _Scaled(2.0, "ab")
    return m(y) + m.k


class _Noisy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.full((4,), 2.0))
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, t):
        return self.drop(t) * self.scale


@case(inputs=lambda: torch.randn(4))
def module_with_a_buffer_made_and_switched_to_eval(x):
    """A user module made in the frame that registers a buffer and holds a Dropout, switched to
    eval (its Dropout too), then called: one graph, as in torch._dynamo."""
    m = _Noisy()
    m.eval()
    return m(x), m.training, m.drop.training


@case(inputs=lambda: torch.randn(4))
def requires_grad_on_a_tensor_the_graph_made(x):
    """`w.requires_grad_()` on a tensor the graph made, then its flags read and w used: recorded in
    the graph as torch._dynamo 2.13 records it (between two set_inplace_requires_grad_allowed
    calls); what is returned is detached, so nothing that requires grad leaves the graph."""
    w = torch.ones(4)
    w.requires_grad_()
    y = (w * x).sum()
    return y.detach() + (w.requires_grad and w.is_leaf), y.requires_grad, y.is_leaf


@case(inputs=lambda: torch.randn(4))
def sequential_and_module_list_of_modules_made_in_the_frame(x):
    """nn.Sequential and nn.ModuleList made in the frame around user modules also made there:
    called, iterated, indexed and appended to, all in one graph as in torch._dynamo."""
    chain = torch.nn.Sequential(_Scaled(2.0, "a"), torch.nn.ReLU(), _Scaled(0.5, "bc"))
    blocks = torch.nn.ModuleList([_Scaled(1.0, "")])
    blocks.append(_Scaled(3.0, "d"))
    y = chain(x)
    for block in blocks:
        y = block(y)
    return y + len(blocks) + blocks[1].k

"""Corpus: nn.Module cases (built under a fixed seed): leaf modules, parameters, buffers, attributes."""

import torch
import torch.nn as nn
import torch.nn.functional as F

from pyframe.debug.cases import case


@case(inputs=lambda: torch.randn(10))
class MockModule(nn.Module):
    """The seed's debugging-backend module: ReLU of cos."""

    def __init__(self):
        super().__init__()
        self.relu = torch.nn.ReLU()

    def forward(self, x):
        return self.relu(torch.cos(x))


@case(inputs=lambda: torch.randn(8, 10))
class LinearRelu(nn.Module):
    """The seed's `MyModule` for fullgraph=True: relu of a Linear(10, 2)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(10, 2)

    def forward(self, x):
        return torch.nn.functional.relu(self.lin(x))


@case(inputs=lambda: torch.randn(10, 100))
class LinearDropoutEval(nn.Module):
    """The seed's dropout-rewrite `MyModule`, in eval mode so its result is deterministic."""

    def __init__(self):
        super().__init__()
        self._linear = nn.Linear(100, 3)
        self._dropout = nn.Dropout(p=0.3)
        self.eval()

    def forward(self, x):
        out = self._linear(x)
        out = self._dropout(out)
        return out


@case(inputs=lambda: torch.randn(3, 10), tags={"inline"})
class SequentialMLP(nn.Module):
    """The seed's onnxruntime MLP: Sequential(Linear, ReLU, Linear) (needs nn.Sequential's loop)."""

    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, x):
        return self.layers(x)


@case(inputs=lambda: torch.randn(2, 4))
class ParameterAndBuffer(nn.Module):
    """Parameters and buffers used directly, plus a float attribute that is a constant."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(4))
        self.register_buffer("offset", torch.arange(4.0))
        self.scale = 0.5

    def forward(self, x):
        return x * self.weight * self.scale + self.offset


@case(inputs=lambda: torch.randn(2, 5, 8))
class NormThenProject(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(8)
        self.proj = nn.Linear(8, 4, bias=False)
        self.act = nn.GELU()

    def forward(self, x):
        return self.act(self.proj(self.norm(x)))


@case(inputs=lambda: torch.randn(2, 3, 8, 8))
class ConvBatchNormEval(nn.Module):
    """Conv2d + BatchNorm2d in eval mode (running statistics are read, not updated)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, kernel_size=3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.eval()

    def forward(self, x):
        return F.relu(self.bn(self.conv(x))).flatten(1)


@case(inputs=lambda: torch.randint(0, 20, (2, 5)))
class EmbeddingMean(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(20, 6)

    def forward(self, tokens):
        return self.embed(tokens).mean(dim=1)


@case(inputs=lambda: torch.randn(2, 4))
class TreeMethodsWithArguments(nn.Module):
    """named_parameters(prefix, recurse), named_modules(prefix=...), parameters(recurse=False) on a
    tree where one Linear is registered twice (remove_duplicate=False sees it twice)."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
        self.again = self.body[0]
        self.scale = nn.Parameter(torch.ones(4))

    def forward(self, x):
        names = [name for name, _ in self.named_parameters("m", True, False)]
        modules = [name for name, _ in self.named_modules(prefix="root")]
        own = list(self.parameters(recurse=False))
        y = self.body(x) * own[0]
        return y * len(names) + len(modules), names


@case(inputs=lambda: torch.randn(2, 4))
class ForwardHooksInlined(nn.Module):
    """A forward pre-hook that rewrites the input and a forward hook that rewrites the output,
    traced into the graph as nn.Module.__call__ runs them."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.lin.register_forward_pre_hook(lambda module, args: (args[0] + 1,))
        self.lin.register_forward_hook(lambda module, args, output: output * 2)

    def forward(self, x):
        return self.lin(x).relu()


@case(inputs=lambda: torch.randn(2, 4))
class SequentialAndModuleListSlices(nn.Module):
    """`self.layers[1:3]` iterated and `self.head[:2](x)` called: slices are new containers of the
    same type in Python (a slice of an nn.Sequential is callable)."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(4)])
        self.head = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4))

    def forward(self, x):
        for layer in self.layers[1:3]:
            x = layer(x)
        x = self.layers[-1](x)
        assert isinstance(self.head[:2], nn.Sequential) and len(self.layers[::2]) == 2
        return self.head[:2](x) + self.head[-1](x)


class _Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.scale = 3.0

    def forward(self, x):
        return self.lin(x)


@case(inputs=lambda: torch.randn(2, 4))
class WrapperForwardingGetattr(nn.Module):
    """A wrapper whose own `__getattr__` tries nn.Module's lookup and falls back to the wrapped
    model's attributes (`self.scale`, `self.lin` live on the backbone), as adapter wrappers do."""

    def __init__(self):
        super().__init__()
        self.model = _Backbone()
        self.head = nn.Linear(4, 2)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self.model, name)

    def forward(self, x):
        return self.head(self.model(x) * self.scale + self.lin(x))


@case(inputs=lambda: torch.randn(2, 4))
class GetattrRenamingSubmodules(nn.Module):
    """`__getattr__` that maps `my_<name>` to a submodule through `nn.Module.__getattr__` called
    explicitly, and a missing name whose AttributeError the forward catches."""

    def __init__(self):
        super().__init__()
        self.inner = _Backbone()

    def __getattr__(self, name):
        if name.startswith("my_"):
            return nn.Module.__getattr__(self, name[3:])
        return nn.Module.__getattr__(self, name)

    def forward(self, x):
        try:
            missing = self.nothing
        except AttributeError:
            missing = 1.0
        return self.my_inner(x) + self.inner.lin.bias * missing


@case(inputs=lambda: torch.randn(3, 4))
class BufferAugmentedAssignment(nn.Module):
    """`self.steps += 1` on a buffer: an in-place add, then Module.__setattr__ of the same tensor
    (a no-op for the trace)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("steps", torch.zeros(()))
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        self.steps += 1
        return self.lin(x) * self.steps


class _ConfigMixin(nn.Module):
    """Answers attributes from a config dict kept on the module, looking in `self.__dict__` first
    (a library's config mixin): a missing name falls back to nn.Module.__getattr__ via super()."""

    def __getattr__(self, name):
        in_config = "_internal" in self.__dict__ and name in self.__dict__["_internal"]
        if in_config and name not in self.__dict__:
            return self._internal[name]
        return super().__getattr__(name)


@case(inputs=lambda: torch.randn(2, 4))
class GetattrReadsTheModulesDict(_ConfigMixin):
    def __init__(self):
        super().__init__()
        self._internal = dict(scale=2, shift=0.5)
        self.l1 = nn.Linear(4, 4)
        self.l2 = nn.Linear(4, 4)

    def forward(self, x):
        names = [k for k in self.__dict__ if not k.startswith("_")]
        return self.l2(self.l1(x).relu()) * self.scale + self.shift, len(names), "training" in names


class _FrozenTags:
    """A data descriptor keeping a frozen copy of the set it is given, with a marker added."""

    def __set_name__(self, owner, name):
        self.slot = "_" + name

    def __get__(self, obj, objtype=None):
        return self if obj is None else getattr(obj, self.slot)

    def __set__(self, obj, value):
        setattr(obj, self.slot, frozenset(value) | {"set"})


@case(inputs=lambda: torch.randn(2, 4))
class SetValuedAttributesThroughDescriptors(nn.Module):
    """`self.tags = {...}` on a module whose class has a data descriptor (or a property with a
    setter) of that name: Module.__setattr__ stores it with object.__setattr__, so the descriptor's
    __set__ (the setter) takes the set, and `self.tags` reads through its __get__, not the value
    stored."""

    tags = _FrozenTags()

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.tags = ()
        self._names = frozenset()

    @property
    def names(self):
        return self._names

    @names.setter
    def names(self, value):
        self._names = frozenset(value)

    def forward(self, x):
        y = self.lin(x)  # (read before the stores: torch._dynamo names it through __dict__ after one)
        self.tags = {"a"}
        self.tags |= {"b"}
        self.names = {"n"}
        self.names = self.names | {"m"}
        return (y * len(self.tags), sorted(self.tags), type(self.tags).__name__,
                sorted(self.names), type(self.names).__name__)

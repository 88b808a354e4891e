"""Corpus: weak references (`weakref.ref`) read from the frame and made in the traced code.

A module may keep weak references to its own parameters and call them in forward, as nn.LSTM
does with `_flat_weight_refs` (to see whether `functional_call` swapped its weights). torch._dynamo
2.13 reads the referent of each one called on a source of its own, `L['self']._refs[0]()`, a graph
input named `L_self_refs_0_`, guarded as any tensor there; a dead one is the constant None. A
weakref made in the frame stands for its referent: calling it gives that object back, and one
that outlives the frame is made again as `weakref.ref(obj)`.
"""

import weakref

import torch
import torch.nn as nn

from pyframe.debug.cases import case


class _Scale:
    """An object that takes weak references (its instances have a `__weakref__` slot)."""

    def __init__(self, factor: float) -> None:
        self.factor = factor


_PROJECTION = nn.Linear(4, 4)
_LIVE_SCALE = _Scale(2.0)
_DEAD_REF = weakref.ref(_Scale(3.0))  # (its referent died as the line ran)
_REFS_TO_A_TENSOR = [weakref.ref(_PROJECTION.bias)]


class _SeesSwappedWeights(nn.Module):
    """nn.LSTM's `_weights_have_changed`: a weakref to its weight, checked against the weight read
    by name, which torch.func.functional_call swaps (`_parameters['weight'] = w`) for the call."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(4, 3))
        self._refs = [weakref.ref(self.weight)]

    def forward(self, x):
        weight = self._refs[0]()
        if weight is not self.weight:
            weight = self.weight
        return x @ weight


_SWAPPED = _SeesSwappedWeights()


@case(inputs=lambda: (torch.randn(2, 4),), tags={"nn"})
class WeakParameterRefs(nn.Module):
    """Weak references to its own parameters, called in forward, as nn.LSTM keeps its
    `_flat_weight_refs`: each referent a graph input on the source `L['self']._refs[i]()`."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(4, 3))
        self.bias = nn.Parameter(torch.randn(3))
        self._refs = [weakref.ref(self.weight), weakref.ref(self.bias)]

    def forward(self, x):
        weight, bias = [r() for r in self._refs]
        return torch.addmm(bias, x, weight).relu()


@case(inputs=lambda: (torch.randn(2, 4),), tags={"nn"})
class WeakRefsCheckedAgainstTheParameters(nn.Module):
    """nn.LSTM's `_weights_have_changed`: each weakref's referent compared by identity with the
    parameter read by name, then used."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(4, 4))
        self._names = ["weight"]
        self._refs = [weakref.ref(self.weight)]

    def forward(self, x):
        for ref, name in zip(self._refs, self._names):
            if ref() is not getattr(self, name):
                raise RuntimeError("the weights changed")
        return x @ self._refs[0]() + 1


@case(inputs=lambda: (torch.randn(4),))
def weakref_made_in_the_frame_and_called(x):
    """`weakref.ref(obj)` of a tensor argument and of a global object: a call gives the object
    back, `r() is obj`, and the weakref is a weakref.ref."""
    r = weakref.ref(x)
    s = weakref.ref(_LIVE_SCALE)
    assert isinstance(r, weakref.ref) and r() is x and s() is _LIVE_SCALE
    return r() * s().factor + 1


@case(inputs=lambda: (torch.randn(4),))
def weakref_of_a_global_module_called(x):
    """A weakref to a global module made in the frame: its call is the module, called in turn."""
    return weakref.ref(_PROJECTION)()(x).sigmoid()


@case(inputs=lambda: (torch.randn(4),))
def weakref_returned_from_the_frame(x):
    """A weakref that outlives the frame is made again by the transformed code: `weakref.ref(obj)`,
    the same object the frame would have made (a weakref without a callback is shared)."""
    return x + 1, weakref.ref(_LIVE_SCALE)


@case(inputs=lambda: (torch.randn(4),))
def dead_weakref_read_from_the_frame(x):
    """A weakref whose referent died: its call is None, a constant guarded to stay None."""
    scale = _DEAD_REF()
    if scale is None:
        return x.cos()
    return x * scale.factor


@case(inputs=lambda: (torch.randn(4),))
def weakref_to_a_tensor_in_a_global_list(x):
    """A global list of weakrefs to a module's parameter: the referent a graph input on the source
    `G['_REFS_TO_A_TENSOR'][0]()`."""
    return x * _REFS_TO_A_TENSOR[0]() - 1



@case(inputs=lambda: (torch.randn(2, 4), torch.randn(4, 3)))
def weakref_checked_against_a_parameter_functional_call_swaps(x, w):
    """torch.func.functional_call swaps the parameters for one call: the module's weakref still
    refers to its own weight, the weight read by name is the one passed (as for nn.Linear)."""
    return torch.func.functional_call(_SWAPPED, {"weight": w}, (x,)) + \
        torch.func.functional_call(_PROJECTION, {"weight": w.t(), "bias": w[0]}, (x,))

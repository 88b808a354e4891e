"""Corpus: torch.cond inside a compiled function or module.

torch._dynamo 2.13 records a call with a tensor predicate as one `cond` higher-order op on two
subgraphs (`cond_true_0`, `cond_false_0`) that take the same tensors: those both branches use, then
those only one uses, an operand neither uses left out; then a `getitem` per output. A predicate
known while tracing picks its branch, inlined. Eager runs torch.cond by compiling it with
torch._dynamo, so the results compared here are also torch.cond's own.
"""

import torch
import torch.nn as nn

from pyframe.debug.cases import Inputs, case

_SCALE = torch.tensor(2.0)
_PROJECTION = nn.Linear(4, 4)


@case(inputs=lambda: torch.randn(4))
def cond_on_a_tensor_predicate(x):
    """Two nested functions of the operand, one output each."""
    def positive(a):
        return a.sin()

    def negative(a):
        return a.cos()

    return torch.cond(x.sum() > 0, positive, negative, (x,))


@case(inputs=lambda: torch.randn(4))
def cond_branches_reading_tensors_of_the_frame(x):
    """Each branch reads a tensor of the frame the other does not: both subgraphs take both, each
    named for the branch that uses it; the result is used after the op."""
    y, z = x + 1, x * 3
    return torch.cond(x.sum() < 0, lambda a: a * y, lambda a: a - z, (x,)) + y


@case(inputs=lambda: torch.randn(4))
def cond_with_two_outputs_and_two_operands(x):
    """Branches returning a tuple: one getitem per output, unpacked in the frame."""
    def plus(a, b):
        return a + b, a * b

    def minus(a, b):
        return a - b, b.cos()

    p, q = torch.cond(x.mean() > 0, plus, minus, (x, x.sin()))
    return p * q


@case(inputs=lambda: torch.randn(4))
def cond_reading_a_module_and_a_global(x):
    """A global module's parameters and a global tensor, read in one branch, lifted in as inputs."""
    return torch.cond(x[0] > 0, lambda a: _PROJECTION(a) * _SCALE, lambda a: a.relu() + 1, [x]).sum()


@case(inputs=lambda: torch.randn(4))
def cond_twice_with_keywords_and_a_list_result(x):
    """Two ops in one graph (cond_true_0, cond_true_1), arguments by keyword, lists returned."""
    x = torch.cond(pred=x.sum() > 0, true_fn=lambda a: a + 1, false_fn=lambda a: a - 1, operands=(x,))
    r = torch.cond(x.sum() > 1, lambda a: [a * 2, a + 1], lambda a: [a / 2, a - 1], (x,))
    return r[0] + r[1]


@case(inputs=lambda: torch.randn(4))
def cond_with_an_operand_no_branch_uses(x):
    """An operand neither branch reads is not passed to the op."""
    y = x * 2
    return torch.cond(x.sum() > 0, lambda a, b: a + 1, lambda a, b: a - 1, (x, y))


@case(inputs=lambda: torch.randn(5))
def cond_on_a_predicate_known_while_tracing(x):
    """A static size compared, and a Python bool: the branch is picked and inlined."""
    y = torch.cond(x.shape[0] > 2, lambda a: a + 1, lambda a: a - 1, (x,))
    return torch.cond(True, lambda a: a.exp(), lambda a: a - 1, [y])


@case(inputs=lambda: torch.randn(4, requires_grad=True), tags={"train"})
def cond_on_a_tensor_that_requires_grad(x):
    """In training: the op carries the gradient (cond's autograd), as in eager."""
    return torch.cond(x.sum() > 0, lambda a: (a * 2).sin(), lambda a: a.cos() * 3, (x,))


@case(inputs=lambda: torch.randn(2, 4))
class CondBetweenTwoSubmodules(nn.Module):
    """A module choosing between two of its submodules, passed as the branches."""

    def __init__(self) -> None:
        super().__init__()
        self.wide = nn.Linear(4, 4)
        self.narrow = nn.Linear(4, 4)

    def forward(self, x):
        return torch.cond(x.sum() > 0, self.wide, self.narrow, (x,))

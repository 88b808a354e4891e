"""Corpus: programs that need graph breaks. Tag ``"break"``.

torch._dynamo compiles each into several graphs joined by resume functions (DESIGN.md section 4).
The cases are grouped by what causes the break and by what must survive it:

- every conditional-jump opcode of 3.11 on a tensor-derived value (``if``, ``if not``, ``and`` /
  ``or`` in a condition and as a value, the ternary, ``assert``, ``while``, chained comparisons);
- calls that cannot be traced: ``print``, ``.item()`` / ``.tolist()``, NumPy values read into Python, a C function
  outside torch (``os.getpid``), and an opcode the translator does not model (``import``);
- several breaks in one frame, breaks in inlined helpers (one and two calls deep), breaks inside
  unrolled ``for`` loops;
- state live across the break: containers half built on the value stack, cells and free
  variables (a free variable assigned before the break, a closure over an inlined call's variable), ``*args`` / ``**kwargs`` / defaults / keyword-only parameters, in-place tensor updates,
  names and stack slots that alias one tensor (``y = x`` then ``x`` rebound), lists mutated after
  the break (a local one, and the caller's), a ``torch.return_types`` value, a ``no_grad`` block.

Each case has inputs that make the program take a known path; where the path matters the docstring
says which. A case whose graphs differ from torch._dynamo's on purpose says why in ``difference=``.
"""

import contextlib
import os

import numpy as np
import torch
import torch.nn as nn

from pyframe.debug.cases import Inputs, case


# --------------------------------------------------------------------------------------------------
# The seeds' programs


@case(inputs=lambda: (torch.randn(10), torch.randn(10).abs()), tags={"break"})
def toy_example(a, b):
    """The seed's control-flow example on the positive branch: a graph, the break, the `x * b` resume."""
    x = a / (torch.abs(a) + 1)
    if b.sum() < 0:
        b = b * -1
    return x * b


@case(inputs=lambda: (torch.randn(10), -torch.randn(10).abs()), tags={"break"})
def toy_example_negative(a, b):
    """toy_example on the other branch (b.sum() < 0): the resume that multiplies by -1."""
    x = a / (torch.abs(a) + 1)
    if b.sum() < 0:
        b = b * -1
    return x * b


@case(inputs=lambda: torch.randn(10).abs(), tags={"break"})
class DynamicModule(nn.Module):
    """The seed's DynamicModule: returns early on a branch on `x.sum() > 0`."""

    def forward(self, x: torch.Tensor):
        if x.sum() > 0:
            return x * x
        return 3 * x


# --------------------------------------------------------------------------------------------------
# Conditional jumps on tensor-derived values


@case(inputs=lambda: torch.randn(8).abs(), tags={"break"})
def if_else_join(x):
    """POP_JUMP_FORWARD_IF_FALSE with an else arm; both arms join before the return (the if arm runs)."""
    y = x.cos()
    if y.sum() > 0:
        y = y + 1
    else:
        y = y - 1
    return y * 2


@case(inputs=lambda: torch.randn(8), tags={"break"})
def if_not_any(x):
    """`if not t`: POP_JUMP_FORWARD_IF_TRUE on a bool tensor (no value of sin exceeds 2: the body runs)."""
    y = x.sin()
    if not (y > 2).any():
        y = y.relu()
    return y + x


@case(inputs=lambda: torch.randn(6).abs() + 0.1, tags={"break"})
def if_scalar_tensor_truthiness(x):
    """`if t:` straight on a one-element tensor, no comparison: its truth value is its data."""
    total = x.sum()
    if total:
        return x / total
    return x


@case(inputs=lambda: (torch.ones(5), -torch.ones(5)), tags={"break"})
def and_of_tensor_conditions(a, b):
    """`if c1 and c2`: two POP_JUMP_FORWARD_IF_FALSE; c1 holds, so c2 is decided in the first resume."""
    a = a * 2
    if a.sum() > 0 and b.sum() > 0:
        return a + b
    return a - b


@case(inputs=lambda: (torch.zeros(5), torch.ones(5) * 3), tags={"break"})
def or_of_tensor_conditions(a, b):
    """`if c1 or c2`: POP_JUMP_FORWARD_IF_TRUE then IF_FALSE; c1 fails, c2 fails, the fall-through runs."""
    a = a + 0.5
    if a.mean() > 1 or b.mean() < 1:
        return a * b
    return a + b


@case(inputs=lambda: (torch.randn(4).abs(), torch.randn(4)), tags={"break"})
def and_or_as_values(a, b):
    """`c = t and b` / `d = t or a`: JUMP_IF_FALSE_OR_POP and JUMP_IF_TRUE_OR_POP keep a tensor on the stack."""
    c = (a.sum() > 0) and b
    d = (b.sum() > 100) or a
    return c * 2, d + 1


@case(inputs=lambda: (torch.randn(5), torch.randn(5)), tags={"break"})
def ternary_on_tensor(x, y):
    """`a if cond else b`: the branch picks which tensor flows on into the resume's graph."""
    z = x if x.sum() > y.sum() else y
    return z * 3 + x


@case(inputs=lambda: torch.randn(6), tags={"break"})
def chained_comparison(x):
    """`lo < t < hi`: COPY / SWAP keep the middle operand on the stack across the first jump."""
    s = x.abs().sum()
    if 0 < s < 100:
        return x * s
    return x


@case(inputs=lambda: torch.randn(6), tags={"break"})
def assert_on_tensor(x):
    """`assert (t > 0).all()`: a jump to LOAD_ASSERTION_ERROR on a tensor condition that holds,
    rewritten into torch._assert_async in the one graph (torch._dynamo's rewrite_assert_with_torch_assert)."""
    y = x.abs() + 1
    assert (y > 0).all(), "abs() + 1 is positive"
    return y.log()


@case(inputs=lambda: (torch.rand(3) + 0.5, 2.0), tags={"break"})
def asserts_with_and_without_message(x, scale):
    """Two asserts on tensors, one with a message: each a torch._assert_async in the one graph."""
    assert (x > 0).all()
    assert (x < 100).all(), "below 100"
    return x * scale


@case(inputs=lambda: torch.rand(3) + 0.5, tags={"break"})
def assert_with_a_formatted_message(x):
    """An assert whose message is made at run time is not rewritten (nor by torch._dynamo): a
    data-dependent branch, so a graph break."""
    assert (x > 0).all(), f"{x.shape} not positive"
    return x + 1


@case(inputs=lambda: torch.rand(8) + 1, tags={"break"})
def while_tensor_condition(x):
    """`while t.sum() > 1`: the loop test at the bottom is POP_JUMP_BACKWARD_IF_TRUE; 2 iterations
    (the sum starts in [8, 16) and is divided by 4 each time).

    The iteration count `n` is a Python int live across every break, so each resume is specialized
    on its value (a recompile per iteration in both engines).
    """
    n = 0
    while x.sum() > 1:
        x = x / 4
        n += 1
    return x, n


@case(inputs=lambda: torch.full((8,), 2.0), tags={"break"})
def while_loop_reuses_its_resume(x):
    """`while t.sum() > 1: t = t * 0.5`, four iterations with nothing else changing: every
    iteration breaks at the same bytecode offset with the same live state, so one resume function
    (and one graph for it) serves them all; a graph per iteration would grow with the trip count."""
    while x.sum() > 1:
        x = x * 0.5
    return x


# --------------------------------------------------------------------------------------------------
# Calls that cannot be traced


@case(inputs=lambda: torch.randn(5), tags={"break"})
def print_in_middle(x):
    """print() is a side effect on stdout: the graph before it, print for real, the graph after it."""
    y = x * 2
    print("pyframe corpus: print_in_middle sees", y.numel(), "elements")
    return y + 1


@case(inputs=lambda: torch.randn(5), tags={"break"})
def item_to_python_float(x):
    """`.item()` reads data into Python; the float is then a constant of the resume's graph."""
    s = x.abs().sum().item()
    return x * s, s + 1


@case(inputs=lambda: torch.randn(5), tags={"break"})
def item_in_python_branch(x):
    """A branch on the float `.item()` returned is plain Python, decided while tracing the resume."""
    m = x.max().item()
    if m > 0:
        return x - m
    return x + m


@case(inputs=lambda: torch.randn(4), tags={"break"})
def tolist_then_python_sum(x):
    """`.tolist()`: a list of floats summed in Python after the break."""
    values = (x * 10).round().tolist()
    return x + sum(values), len(values)


@case(inputs=lambda: torch.randn(3, 4), tags={"break"})
def numpy_value_read_into_python(x):
    """NumPy code on `x.numpy()` is in the graph (tests/cases/numpy_arrays.py); float() of its
    result, a NumPy scalar, reads it into Python: the break, as in torch._dynamo."""
    a = x.numpy()
    return x * float(a.sum())


@case(inputs=lambda: torch.randn(3, 4), tags={"break"})
def numpy_branch_on_an_array(x):
    """A branch on an array's data (`(a > 0).any()`): the graph computes it, the branch breaks."""
    a = x.numpy()
    if (a > 0).any():
        return x + 1
    return x - 1


@case(inputs=lambda: torch.randn(3, 4), tags={"break"})
def numpy_index_read_into_python(x):
    """`int(np.argmax(a))`: an index read into Python; the argmax is in the first graph."""
    a = x.numpy()
    i = np.argmax(a)
    return x.flatten()[int(i)]


@case(inputs=lambda: torch.randn(3, 4), tags={"break"})
def numpy_boolean_mask(x):
    """`a[a > 0]` has a size that depends on the data: the indexing runs in Python."""
    a = x.numpy()
    return torch.from_numpy(a[a > 0])


@case(inputs=lambda: torch.randn(3, 4), tags={"break"})
def numpy_array_live_across_a_break(x):
    """`a.tolist()` breaks; the array, live after it, is a graph output made an array again."""
    a = np.exp(x.numpy())
    values = a.tolist()
    return torch.from_numpy(a * len(values))


@case(inputs=lambda: torch.randn(5), tags={"break"})
def c_function_outside_torch(x):
    """os.getpid() is a C builtin of the os module, unknown to both engines: a break at the call."""
    y = x.relu()
    pid = os.getpid()
    return y + (pid > 0)


# --------------------------------------------------------------------------------------------------
# Several breaks, breaks in helpers, breaks in loops


@case(inputs=lambda: torch.randn(6), tags={"break"})
def several_breaks(x):
    """Three breaks of three kinds in one frame: print, a tensor branch, `.item()`."""
    x = x + 1
    print("pyframe corpus: several_breaks")
    x = x * 2
    if x.sum() > 0:
        x = x - 3
    s = x.max().item()
    return x / (abs(s) + 1)


def _double_then_print(t):
    t = t * 2
    print("pyframe corpus: in _double_then_print")
    return t + 1


@case(inputs=lambda: torch.randn(5), tags={"break"})
def break_in_helper(x):
    """A break inside an inlined helper breaks the caller at the call; the helper is its own frame."""
    y = x.cos()
    z = _double_then_print(y)
    return z.sum()


def _print_then_scale(t, scale=1.0):
    print("pyframe corpus: in _print_then_scale")
    return t * scale


def _sign_scale(t):
    if t.mean() > 0:
        return t * 2
    return t * -2


def _shift_then_scale(t):
    u = t + 1
    return _sign_scale(u) - 1


@case(inputs=lambda: torch.randn(5), tags={"break"})
def break_in_helper_called_with_keywords(x):
    """The caller breaks at a CALL with KW_NAMES; the helper's default is overridden by keyword."""
    y = x.sin()
    return _print_then_scale(y, scale=3.0) + 1


@case(inputs=lambda: torch.randn(5), tags={"break"})
def break_in_helper_of_helper(x):
    """A data-dependent branch two inlined calls deep: each caller breaks at its call site."""
    y = x.sin()
    return _shift_then_scale(y) * 3


# A graph break inside a loop makes torch._dynamo (and pyframe) skip the whole frame of the loop
# (no graph at all), so each loop sits in a helper between two tensor ops of the case: the case
# compiles around the call (two graphs) and the helper runs as a skipped frame of its own.


def _shift_and_halve_positive(x):
    for i in range(3):
        x = x + i
        if x.sum() > 0:
            x = x * 0.5
    return x


@case(inputs=lambda: torch.randn(5), tags={"break"})
def break_in_for_range(x):
    """A tensor branch in each of three iterations of an unrolled `for i in range(3)` (in a helper)."""
    return _shift_and_halve_positive(x.cos()) + 1


def _double_and_print(acc):
    for i in range(3):
        acc = acc * 2 + i
        print("pyframe corpus: print_in_for_range iteration", i)
    return acc


@case(inputs=lambda: torch.randn(5), tags={"break"})
def print_in_for_range(x):
    """print() in each iteration; the loop variable and the accumulator live across every break."""
    return _double_and_print(x - 1) * 3


def _double_until_large(x):
    i = 0
    for i in range(6):
        x = x * 2
        if x.max() > 3:
            break
    return x, i


@case(inputs=lambda: torch.randn(5), tags={"break"})
def break_statement_on_tensor(x):
    """`break` out of a for loop on a tensor condition, which holds on the third iteration."""
    y, steps = _double_until_large(x.abs() / x.abs().max())
    return y - 1, steps


def _signed_row_sum(x):
    acc = torch.zeros(x.shape[1])
    for row in x:
        if row.sum() > 0:
            acc = acc + row
        else:
            acc = acc - row
    return acc


@case(inputs=lambda: torch.randn(3, 4), tags={"break"})
def branch_per_row(x):
    """`for row in x` unrolls over a tensor's rows; a branch on each row keeps the rest of the
    iterator (tensors still to come) live across the break."""
    return _signed_row_sum(x * 2).relu()


# --------------------------------------------------------------------------------------------------
# Values on the stack and in locals across a break


@case(inputs=lambda: (torch.randn(3), -torch.ones(3)), tags={"break"})
def ternary_inside_list_display(x, y):
    """`torch.cat([x, y if ... else -y])`: NULL, torch.cat and x are on the stack at the jump."""
    return torch.cat([x, y if y.sum() > 0 else -y])


def _combine(a, b):
    return a * 2 + b


@case(inputs=lambda: (torch.randn(4), torch.randn(4)), tags={"break"})
def print_inside_call_arguments(a, b):
    """`f(a, print(...) or b)`: the print call breaks with f and a already pushed; `or` picks b."""
    return _combine(a, print("pyframe corpus: argument", tuple(b.shape)) or b)


@case(inputs=lambda: torch.randn(4), tags={"break"})
def containers_live_across_break(x):
    """A list, a tuple and a dict built before the break, read after it."""
    items = [x, x * 2]
    pair = (x + 1, 3)
    named = {"a": x.sin(), "k": 2}
    print("pyframe corpus: containers_live_across_break")
    return torch.stack(items).sum(0) * named["k"] + named["a"] + pair[0], pair[1]


@case(
    inputs=lambda: torch.randn(4),
    tags={"break"},
)
def list_mutated_after_break(x):
    """A list built before the break and appended to after it (in the resume, it is an argument)."""
    items = [x, x * 2]
    print("pyframe corpus: list_mutated_after_break")
    items.append(x * 3)
    return torch.stack(items).sum(0)


@case(
    inputs=lambda: (torch.randn(4), []),
    tags={"break"},
)
def append_to_list_argument(x, log):
    """Side effects on the caller's list on both sides of a break; the list is returned to compare."""
    y = x.cos()
    log.append(y.shape[0])
    log.append(y)
    print("pyframe corpus: append_to_list_argument")
    log.append(y * 2)
    return y + 1, log


@case(inputs=lambda: torch.randn(4), tags={"break"})
def aliased_locals_across_break(x):
    """Two locals naming one tensor: after the break they must still be one object (`is`, in-place)."""
    y = x * 2
    z = y
    print("pyframe corpus: aliased_locals_across_break")
    z.add_(1)
    return y, y is z


@case(inputs=lambda: (torch.zeros(3), 2), tags={"break"})
def rebound_alias_across_break(x, n):
    """`y, m = x, n` then `x, n` rebound before the break: y and m keep the old values, so the
    resume's locals must be rebuilt from the values before any of them is stored."""
    y, m = x, n
    x, n = x + 1, n + 1
    print("pyframe corpus: rebound_alias_across_break")
    return x, y, n, m


@case(inputs=lambda: torch.zeros(3), tags={"break"})
def rebound_alias_on_stack_at_break(x):
    """`y = x; x = x + 1`, then `y` is a pending argument (on the value stack) of a call that
    breaks inside the callee: the call must still get the old tensor, not the rebound local."""
    y = x
    x = x + 1
    return _print_then_scale(y, 2.0), x


@case(inputs=lambda: torch.zeros(3), tags={"break"})
def rebound_alias_in_list_display_at_break(x):
    """As above with the break at a ternary inside a list display: `y` waits on the stack."""
    y = x
    x = x + 1
    return torch.stack([y, x if x.sum() > 0 else -x])


@case(inputs=lambda: torch.randn(3, 4), tags={"break"})
def return_types_across_break(x):
    """`torch.max(x, dim)` returns a named tuple (torch.return_types.max), live across the break. The
    resume function holds no tensor torch._dynamo's test finds (it does not look inside a structseq),
    so it runs as Python: `m.values * 2` makes no graph."""
    m = x.max(dim=0)
    print("pyframe corpus: return_types_across_break")
    return m.values * 2, m.indices


@case(inputs=lambda: torch.randn(5), tags={"break"})
def closure_cell_across_break(x):
    """A cell made before the break, rebound after it: the closure must see the new value."""
    scale = x.abs().sum()

    def apply(t):
        return t * scale

    if scale > 0:
        scale = scale + 1
    return apply(x)


def _make_free_var_case():
    offset = 0.5
    weights = [1.0, 2.0]

    def free_vars_across_break(x):
        """A closure's free variables (a float and a list), read on both sides of a break."""
        y = x + offset
        print("pyframe corpus: free_vars_across_break")
        return y * weights[1] - offset

    return free_vars_across_break


free_vars_across_break = case(inputs=lambda: torch.randn(4), tags={"break"})(_make_free_var_case())


def _make_cos_keeper():
    kept = None

    def nonlocal_store_before_break(x):
        """The compiled closure assigns its own cell, then breaks: the store is replayed before
        the break, and the resume function reads the new value through the same cell."""
        nonlocal kept
        kept = x.cos()
        torch._dynamo.graph_break()
        return kept + 1

    return nonlocal_store_before_break


nonlocal_store_before_break = case(inputs=lambda: torch.randn(4), tags={"break"})(_make_cos_keeper())


def _make_scaler(x):
    y = x + 1

    def scaled():
        return y * 2

    return scaled


@case(inputs=lambda: torch.randn(4), tags={"break"})
def closure_over_inlined_call_across_break(x):
    """`scaled` closes over a variable of an inlined call and is live at the break: the resume
    function receives it with a real cell holding the traced value."""
    scaled = _make_scaler(x)
    torch._dynamo.graph_break()
    return scaled() + 1


@case(inputs=lambda: Inputs((torch.randn(5),), {"shift": 0.25}), tags={"break"})
def defaults_and_keyword_only(x, scale=2.0, *, shift=1.0):
    """A default and a keyword-only parameter (passed by keyword), both read after the break."""
    y = x.abs() * scale
    if y.sum() > 0:
        y = y + shift
    return y * scale - shift


@case(
    inputs=lambda: Inputs((torch.randn(3), torch.randn(3), torch.randn(3)), {"alpha": 2.0, "beta": 0.5}),
    tags={"break"},
)
def varargs_and_kwargs(x, *rest, **options):
    """`*rest` and `**options` are plain locals of the resume function (passed positionally)."""
    total = x
    for t in rest:
        total = total + t
    print("pyframe corpus: options", sorted(options))
    return total * options["alpha"] + options.get("beta", 0.0) + len(rest)


@case(inputs=lambda: torch.randn(5), tags={"break"})
def inplace_on_local_across_break(x):
    """In-place ops on a fresh tensor before the break, in the branch, and after it."""
    y = x.clone()
    y.add_(1)
    if y.sum() > 0:
        y.mul_(2)
    else:
        y.mul_(-2)
    y.sub_(0.5)
    return y


@case(inputs=lambda: (torch.randn(5), torch.randn(5)), tags={"break"})
def inplace_on_inputs_across_break(x, y):
    """In-place updates of the caller's tensors (`mul_`, `+=`) on both sides of a print."""
    x.mul_(2)
    y += x
    print("pyframe corpus: inplace_on_inputs_across_break")
    x.add_(1)
    y -= 1
    return x + y


@case(inputs=lambda: torch.randn(4, 6, requires_grad=True), tags={"break"})
def break_inside_no_grad(x):
    """A print under `with torch.no_grad()`: the grad mode must hold on both sides of the break."""
    y = x * 2
    with torch.no_grad():
        z = y * 3
        print("pyframe corpus: break_inside_no_grad")
        z = z + 1
    return y + z, z.requires_grad


@case(inputs=lambda: torch.randn(4, 6), tags={"break"})
class GatedModule(nn.Module):
    """A module whose forward branches on its activations and prints; parameters live across."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(6, 3)
        self.scale = 0.5

    def forward(self, x: torch.Tensor):
        h = self.linear(x)
        if h.mean() > 0:
            h = h.relu()
        else:
            h = h.tanh()
        print("pyframe corpus: GatedModule")
        return h * self.scale


@case(inputs=lambda: torch.randn(4, requires_grad=True), tags={"break"})
def break_inside_nested_grad_mode_blocks(x):
    """A call break two blocks deep: the graph leaves both, the call runs inside both entered
    again, and the resume function enters both once more."""
    with torch.no_grad():
        y = x * 2
        with torch.enable_grad():
            z = y.sin() + x
            print("pyframe corpus: break_inside_nested_grad_mode_blocks")
            z = z * y
        w = z.cos()
    return w + x, z.requires_grad, w.requires_grad


@case(inputs=lambda: torch.randn(4, 4), tags={"break"})
def branch_inside_autocast_region(x):
    """A data-dependent branch inside an autocast region: both ways on run in the region."""
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ x
        if y.sum() > 0:
            y = y * 2
        z = y @ x
    return z.float()


@case(inputs=lambda: torch.randn(3), tags={"break"})
def requires_grad_turned_on(x):
    """`y.requires_grad_()` on a tensor of the graph that does not require grad: a graph break, as
    torch._dynamo breaks there; the rest is traced with y requiring grad."""
    y = x * 2
    y.requires_grad_()
    return y.sin()


@case(inputs=lambda: torch.randn(4), tags=["break"])
def resume_with_the_tensor_in_a_cell(x):
    """x is a cell variable (the generator expression reads it): the resume function after the
    break gets the cell, whose tensor makes the frame worth compiling, as in the original frame."""
    print("pyframe corpus: resume_with_the_tensor_in_a_cell")
    return sum(x * k for k in range(3))


class _Holder:
    def __init__(self, t):
        self.t = t


@case(inputs=lambda: torch.randn(4), tags=["break"])
def vars_of_an_object_after_a_graph_break(x):
    """vars(obj) reads obj, not the frame: a graph break before it still resumes (only vars() and
    locals() without an argument must see the frame's own variables)."""
    h = _Holder(x + 1)
    print("pyframe corpus: vars_of_an_object_after_a_graph_break")
    return vars(h)["t"] * 2


@case(inputs=lambda: torch.randn(4), tags={"break"})
def requires_grad_on_a_tensor_the_graph_returns(x):
    """`w.requires_grad_()` on a tensor the graph made that then leaves it (w * x requires grad):
    compiling would drop the flag from the output, so the graph breaks at the call, as
    torch._dynamo does, and the rest runs in a graph of its own."""
    y = x.sin()
    w = torch.ones(4)
    w.requires_grad_()
    return y + 1, w * x


class _Scale(nn.Module):
    """A user module: its forward, met as a frame, is compiled by both engines."""

    def forward(self, h):
        return h * 2 + 1


_embed = nn.Embedding(16, 4)
_project = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
_scale = _Scale()


@case(
    inputs=lambda: torch.tensor([1, 5, 7]),
    tags={"break"},
    difference=(
        "a frame that runs as Python (a break in a loop) calls torch.nn modules: torch._dynamo skips "
        "their forward frames (torch.nn is inlined only, MOD_INLINELIST, unless a module has hooks), "
        "pyframe compiles each module's forward it meets there (Embedding, Sequential: a graph each; "
        "the user's module is compiled by both), so it makes more graphs; the results are eager's "
        "either way"
    ),
)
def torch_modules_called_from_a_frame_run_as_python(ids):
    """A graph break inside a loop runs the frame as Python; the torch.nn modules it calls are met
    by the hook as frames of their own (LongT5's and SwitchTransformers' layers, where an earlier
    exception or break leaves their callers to Python)."""
    h = None
    for _ in range(2):
        h = _embed(ids)
        print("", end="")
        h = _scale(_project(h))
    return h.sum(-1)


# --------------------------------------------------------------------------------------------------
# Values read from tensors, by default (torch._dynamo.config's capture flags off: a break at the
# read; captured, they are tests/test_data_dependent.py's)


@case(inputs=lambda: torch.tensor([1.0, 3.0, 2.0]), tags={"break"})
def item_checked_as_a_size(x):
    """`.item()` breaks; the resume states the int is a size (`torch._check_is_size`, which
    torch._dynamo records in the graph, constant and all) and makes a tensor of that size."""
    n = x.max().to(torch.int64).item()
    torch._check_is_size(n)
    return torch.ones(n) * 2


@case(inputs=lambda: torch.randn(4, 3), tags={"break"})
def checks_of_known_conditions(x):
    """`torch._check` of conditions known while tracing, with and without a message: nothing
    recorded; `.item()` then breaks, and the resume checks the int it read."""
    torch._check(x.shape[0] == 4, lambda: "four rows")
    torch._check(x.dim() == 2)
    k = (x > 0).sum().item()
    torch._check(k >= 0)
    return x * 2 + k


class _Stepper:
    def step(self, x):
        x = x + 1
        torch._dynamo.graph_break()
        return x * 2


@case(inputs=lambda: torch.randn(6), tags={"break"})
def method_of_an_object_made_in_the_frame_breaks(x):
    """The call breaks inside a method bound to an object the frame made, which torch._dynamo
    cannot rebuild at the break: the frame runs as Python, by rule, and the method's own frame is
    compiled (two graphs) when Python calls it; `.sin()` after it runs eagerly."""
    return _Stepper().step(x).sin()


@case(inputs=lambda: torch.randn(6), tags={"break"})
def break_inside_a_nullcontext(x):
    """A break inside `with contextlib.nullcontext():` resumes inside a new nullcontext."""
    with contextlib.nullcontext():
        x = x + 1
        torch._dynamo.graph_break()
        x = x * 2
    return x.sin()

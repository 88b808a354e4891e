"""torch.utils.checkpoint.checkpoint as the tag_activation_checkpoint higher-order op
(pyframe/translator/variables/checkpoint.py): gradients as eager's through the backends that train,
the op's arguments as torch._dynamo 2.13 records them, and eager's behaviour where the op cannot
express the call."""
from __future__ import annotations

import functools

import pytest
import torch
import torch._dynamo
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

import pyframe
from pyframe.debug.cases import load_cases
from pyframe.debug.compare import CountingBackend

CASES = load_cases(["tests.cases.activation_checkpoint"])


def _grads(fn, inputs, params):
    for t in [*inputs, *params]:
        t.grad = None
    out = fn(*inputs)
    out.sum().backward() if out.dim() else out.backward()
    return out.detach(), [t.grad.clone() for t in [*inputs, *params]]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_gradients_equal_eager(case, backend):
    fn, inputs = case.make_fn(), case.make_inputs()
    params = list(fn.parameters()) if isinstance(fn, nn.Module) else []
    expected, expected_grads = _grads(fn, inputs.args, params)
    compiled = pyframe.optimize(backend)(fn)
    out, grads = _grads(compiled, inputs.args, params)
    torch.testing.assert_close(out, expected)
    for got, want in zip(grads, expected_grads):
        torch.testing.assert_close(got, want)


def test_the_op_takes_the_options_as_given_and_the_body_is_a_subgraph():
    block = nn.Linear(4, 4)

    def f(x):
        return checkpoint(block, x, use_reentrant=False, preserve_rng_state=False).relu()

    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    x = torch.randn(2, 4, requires_grad=True)
    torch.testing.assert_close(pyframe.optimize(backend)(f)(x), f(x))
    (gm,) = graphs
    (op,) = [n for n in gm.graph.nodes if n.target is torch.ops.higher_order.tag_activation_checkpoint]
    assert op.kwargs == {"use_reentrant": False, "preserve_rng_state": False}
    body = getattr(gm, op.args[0].target)
    assert [n.op for n in body.graph.nodes].count("placeholder") == 3  # x, then the weight and bias read
    assert [str(a) for a in op.args[1:]] == ["l_x_", "l_block_parameters_weight_", "l_block_parameters_bias_"]


def test_a_body_changing_the_frames_objects_runs_as_eager_runs_it():
    seen = []

    def body(x):
        seen.append(1)  # an effect on the frame's list: the op could not express it
        return x.sin()

    def f(x):
        return checkpoint(body, x, use_reentrant=False) * 2

    x = torch.randn(3, requires_grad=True)
    expected = f(x)
    seen.clear()
    torch.testing.assert_close(pyframe.optimize(CountingBackend())(f)(x), expected)
    assert seen == [1]  # (once: the call ran as Python, as eager runs it)


def test_a_context_fn_is_left_to_eager():
    from torch.utils.checkpoint import create_selective_checkpoint_contexts

    def policy(ctx, op, *args, **kwargs):
        return torch.utils.checkpoint.CheckpointPolicy.PREFER_RECOMPUTE

    context_fn = functools.partial(create_selective_checkpoint_contexts, policy)

    def f(x):
        return checkpoint(torch.sin, x, use_reentrant=False, context_fn=context_fn) + 1

    x = torch.randn(3, requires_grad=True)
    expected, (grad,) = _grads(f, (x,), [])
    out, (compiled_grad,) = _grads(pyframe.optimize("eager")(f), (x,), [])
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(compiled_grad, grad)


def test_graph_and_placeholders_equal_dynamo_for_a_module_stack():
    (case,) = [c for c in CASES if c.name == "CheckpointedBlocks"]
    ours, theirs = CountingBackend(), CountingBackend()
    fn, inputs = case.make_fn(), case.make_inputs()
    pyframe.optimize(ours)(fn)(*inputs.args)
    torch._dynamo.reset()
    torch._dynamo.optimize(theirs)(fn)(*inputs.args)
    assert [g.code for g in ours.graphs] == [g.code for g in theirs.graphs]

"""Hugging Face transformers models (tests/cases/transformers_models.py) trained through pyframe.

tests/test_corpus.py compares each case's forward with eager and its graphs with torch._dynamo's;
here each training case's loss goes through `backward()` with the "aot_eager" backend (AOTAutograd
traces the graphs' backward), and every parameter's gradient must equal eager's.
"""
from __future__ import annotations

import pytest
import torch
import torch._dynamo

import pyframe
from pyframe.debug.cases import load_cases

pytest.importorskip("transformers")

TRAIN_CASES = [c for c in load_cases(["tests.cases.transformers_models"]) if "train" in c.tags]


def _loss_and_grads(model: torch.nn.Module, fn, inputs, seed: int):
    model.zero_grad(set_to_none=True)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        loss = fn(*inputs.args, **inputs.kwargs)
    loss.backward()
    return loss.detach(), {name: p.grad for name, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in TRAIN_CASES])
def test_training_step_through_aot_eager_gives_eager_gradients(case):
    pyframe.reset()
    model = case.make_fn()
    inputs = case.make_inputs()
    expected_loss, expected_grads = _loss_and_grads(model, model, inputs, case.seed)
    assert expected_grads, "the case trains no parameter"

    compiled = pyframe.optimize("aot_eager")(model)
    try:
        for _ in range(2):  # the first call compiles, the second hits the cache
            loss, grads = _loss_and_grads(model, compiled, inputs, case.seed)
            torch.testing.assert_close(loss, expected_loss)
            assert grads.keys() >= expected_grads.keys()
            for name, grad in expected_grads.items():
                torch.testing.assert_close(grads[name], grad, msg=lambda m, n=name: f"{n}: {m}")
            extra = grads.keys() - expected_grads.keys()
            # A parameter the loss does not reach has no gradient in eager; aot_autograd gives one of
            # zeros to the parameters a checkpointed body reads (the pooler of a checkpointed BERT),
            # under torch._dynamo as under pyframe.
            assert all(not grads[name].any() for name in extra)
    finally:
        pyframe.reset()
    if extra:
        torch._dynamo.reset()
        try:
            _, dynamo_grads = _loss_and_grads(model, torch._dynamo.optimize("aot_eager")(model), inputs, case.seed)
        finally:
            torch._dynamo.reset()
        assert dynamo_grads.keys() == grads.keys()

"""Dynamic shapes on Hugging Face transformers models (tests/cases/transformers_models.py), side by side
with torch._dynamo 2.13 with its default automatic dynamic shapes.

- A sweep of sequence lengths (language models) or batch sizes (vision models): every result equals
  eager's, and pyframe hands the backend as many graphs as Dynamo does (the first static, then one
  whose sizes are symbolic), each with as many SymInt inputs as Dynamo's.
- Greedy decoding with a `DynamicCache` (the cache grows by one position per step): the tokens equal
  eager's and the graph count equals Dynamo's.

The four models of issue 18's figures run in the default suite; the others are marked slow.
"""
from __future__ import annotations

from typing import Any, Callable

import pytest
import torch
import torch._dynamo

import pyframe

transformers = pytest.importorskip("transformers")

from tests.cases.transformers_models import ARCHITECTURES, greedy_decode  # noqa: E402  (after the importorskip)

MAIN = ("BertModel", "GPT2LMHeadModel", "LlamaForCausalLM", "T5Model")
LENGTHS = (4, 7, 9, 12, 15, 18)


def _inputs(name: str, n: int) -> dict[str, Any]:
    kwargs = dict(ARCHITECTURES[name][1]().kwargs)
    if "input_ids" in kwargs:
        kwargs["input_ids"] = torch.randint(0, 256, (2, n))
    if "pixel_values" in kwargs:  # (images: the batch size changes)
        size = kwargs["pixel_values"].shape[-1]
        kwargs["pixel_values"] = torch.randn(n // 3 + 1, 3, size, size)
    return kwargs


def _optimize(engine: str, model: Any, backend: Callable) -> Any:
    return pyframe.optimize(backend)(model) if engine == "pyframe" else torch.compile(model, backend=backend)


def _fresh(name: str) -> tuple[torch.nn.Module, list[torch.fx.GraphModule], Callable]:
    """Both engines reset; the model in eval mode; the graphs a recording backend is handed."""
    pyframe.reset()
    torch._dynamo.reset()
    torch.manual_seed(0)
    graphs: list[torch.fx.GraphModule] = []

    def backend(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        graphs.append(gm)
        return gm.forward

    return ARCHITECTURES[name][0]().eval(), graphs, backend


def _sweep(name: str, engine: str) -> list[int]:
    """The SymInt inputs of each graph handed to the backend over the sweep."""
    model, graphs, backend = _fresh(name)
    compiled = _optimize(engine, model, backend)
    torch.manual_seed(1)
    with torch.no_grad():
        for n in LENGTHS:
            kwargs = _inputs(name, n)
            torch.testing.assert_close(compiled(**kwargs)[0], model(**kwargs)[0])
    return [sum(1 for node in gm.graph.nodes if node.op == "placeholder" and node.type is torch.SymInt)
            for gm in graphs]


def _params(names) -> list:
    return [pytest.param(n, id=n, marks=() if n in MAIN else pytest.mark.slow) for n in names]


@pytest.mark.parametrize("name", _params(ARCHITECTURES))
def test_a_sweep_of_sizes_gives_dynamos_graphs(name: str) -> None:
    ours = _sweep(name, "pyframe")
    theirs = _sweep(name, "dynamo")
    assert ours == theirs
    assert len(ours) == 2 and ours[1] > 0  # one static graph, then one with symbolic sizes


def _decode(engine: str, name: str, steps: int) -> tuple[torch.Tensor, int]:
    model, graphs, backend = _fresh(name)
    step = model if engine == "eager" else _optimize(engine, model, backend)
    return greedy_decode(step, model, steps), len(graphs)


@pytest.mark.parametrize("name", ["GPT2LMHeadModel", "LlamaForCausalLM"])
def test_greedy_decoding_with_a_dynamic_cache_gives_dynamos_graph_count(name: str) -> None:
    expected, _ = _decode("eager", name, 20)
    ours, our_graphs = _decode("pyframe", name, 20)
    _, their_graphs = _decode("dynamo", name, 20)
    assert torch.equal(ours, expected)
    assert our_graphs == their_graphs == 3

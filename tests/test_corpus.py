"""The differential test over the shared corpus (tests/cases/): pyframe against eager and torch._dynamo.

For every case: pyframe's results (first call and cache hit) equal eager's, and pyframe compiles the
same number of graphs with the same op sequences as torch._dynamo under the same counting backend,
breaking the graph as often (or as BREAKS_DIFFER lists). A case with a documented ``difference`` must still differ from torch._dynamo, so the note cannot rot.

The engine under test is pyframe; ``PYFRAME_CORPUS_SUBJECT=dynamo`` runs torch._dynamo against itself,
a self-test of the harness and the corpus. Cases tagged ``"break"`` exercise graph breaks and resume
functions. The harness tests at the bottom run whatever state pyframe is in.
"""

from __future__ import annotations

import dataclasses
import os

import pytest
import torch

from pyframe.debug.cases import Case, Inputs, load_cases
from pyframe.debug.compare import (
    CountingBackend,
    assert_same_result,
    engine_unavailable_reason,
    graphs_mismatch,
    normalize_ops,
    run_case,
)
from tests.cases import ALL, GRAPH_BREAKS, STRAIGHT_LINE
from tests.test_graph_code import check_graph_code

SUBJECT = os.environ.get("PYFRAME_CORPUS_SUBJECT", "pyframe")
REFERENCE = "dynamo"

CASES = load_cases(ALL)


def _param(case: Case):
    return pytest.param(case, id=case.qualname)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_case_matches_eager_and_dynamo(case: Case) -> None:
    reason = engine_unavailable_reason(SUBJECT)
    if reason is not None:
        pytest.skip(reason)
    eager = run_case(case, "eager", timing=False)
    reference = run_case(case, REFERENCE, timing=False)
    subject = run_case(case, SUBJECT, timing=False)

    # The reference must itself be right and non-trivial, or agreeing with it proves nothing.
    assert_same_result(reference.result, eager.result, f"{REFERENCE} result")
    if "nograph" in case.tags:
        assert reference.graph_count == 0, f"{REFERENCE} made graphs for a constants-only case"
    else:
        assert reference.graph_count > 0, f"{REFERENCE} made no graph for a case with tensor ops"
        assert all(g.ops for g in reference.graphs), reference.op_sequences

    assert_same_result(subject.result, eager.result, f"{SUBJECT} result")
    assert_same_result(subject.cached_result, eager.cached_result, f"{SUBJECT} cache-hit result")
    assert subject.graphs_on_hits == 0, f"{SUBJECT} recompiled on a call with equal inputs"

    mismatch = graphs_mismatch(subject, reference)
    codes = [g.code for g in subject.graphs], [g.code for g in reference.graphs]
    if case.difference is None or mismatch is None:
        # compiled every frame: no frame run as plain Python, no internal error (compare's FELL BACK)
        assert not subject.fallbacks, subject.fallbacks
    if case.difference is None:
        assert mismatch is None, mismatch
    else:  # (the same graphs and ops, documented to differ in their code: see tests/test_graph_code.py)
        assert mismatch is not None or codes[0] != codes[1], (
            f"documented difference no longer holds, remove it from the case: {case.difference}"
        )
    # the graphs' code (placeholders, names, annotations, nodes): torch._dynamo's, or as listed
    check_graph_code(case.qualname, *codes)
    # where torch._dynamo captures the program with so many breaks, so does pyframe, or as listed
    check_break_count(case.qualname, subject.breaks, reference.breaks)


# Cases where pyframe reports another number of graph breaks than torch._dynamo on the same
# backend (RunRecord.breaks: torch._dynamo's graph_break_reasons; pyframe's frame records that carry
# an Unsupported), by reason. Like the listings of tests/test_graph_code.py, each must stay true: a
# case that comes to break as often as torch._dynamo fails until it is removed.
_MATERIALIZE_GRADS = "Dynamo traces set_materialize_grads(False); pyframe breaks at the apply and in forward's frame"
_FUNC_TRANSFORM = "torch.func.grad of a nested function is not traced: the frame and functorch's wrapped calls run as Python"
_DYNAMO_SKIPS_UNITTEST = "Dynamo breaks at each call of unittest's assert methods (marked skipped); pyframe inlines them"
_DYNAMO_CLASS_GETITEM = "Dynamo breaks calling the class __class_getitem__ returned; pyframe traces it (the case's difference)"
_OUTPUT_CAPTURING_DICTCOMP = ("pyframe breaks in transformers' output-capturing dict comprehension (a loop "
                              "over an iterator handed in); torch._dynamo traces it")
BREAKS_DIFFER: dict[str, str] = {
    "transformers_models.SwitchTransformersModelEval": _OUTPUT_CAPTURING_DICTCOMP,
    "stdlib_calls.testcase_assert_equal": _DYNAMO_SKIPS_UNITTEST,
    "function_objects.function_transform_of_a_nested_function": _FUNC_TRANSFORM,
    "class_protocols.class_getitem_picks_a_dtype": _DYNAMO_CLASS_GETITEM,
    "autograd_function_breaks.set_materialize_grads_false": _MATERIALIZE_GRADS,
}


def check_break_count(qualname: str, ours: int, theirs: int) -> None:
    """pyframe broke the graph as often as torch._dynamo on a corpus case, or differs as listed."""
    if qualname in BREAKS_DIFFER:
        assert ours != theirs, (f"break count now matches torch._dynamo's ({ours}): "
                                f"remove {qualname} from BREAKS_DIFFER")
    else:
        assert ours == theirs, f"pyframe broke the graph {ours} time(s), torch._dynamo {theirs}"


# ------------------------------------------------------------------------------------------------
# The harness and the corpus themselves (no pyframe needed)


def test_every_case_listed_for_its_break_count_is_in_the_corpus() -> None:
    assert not set(BREAKS_DIFFER) - {c.qualname for c in CASES}


def test_corpus_shape() -> None:
    straight = load_cases(STRAIGHT_LINE)
    breaks = load_cases(GRAPH_BREAKS)
    assert len(straight) >= 40
    assert not [c.name for c in straight if "break" in c.tags]
    assert breaks and all("break" in c.tags for c in breaks)
    assert {"toy_example", "DynamicModule", "MockModule"} <= {c.name for c in CASES}
    assert len(CASES) >= 150
    topics = {c.qualname.split(".")[0] for c in CASES}
    assert {"inlining", "containers", "control_flow", "builtins_calls", "side_effects", "models"} <= topics
    assert len({c.qualname for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", [pytest.param(c, id=c.qualname) for c in CASES])
def test_case_factories_are_fresh_and_deterministic(case: Case) -> None:
    first, second = case.make_inputs(), case.make_inputs()
    assert_same_result(second.args, first.args)
    assert_same_result(dict(second.kwargs), dict(first.kwargs))
    fresh = [a is not b for a, b in zip(first.args, second.args) if isinstance(a, torch.Tensor)]
    assert all(fresh), "inputs must be new tensors on every call (a case may mutate them)"
    fn_a, fn_b = case.make_fn(), case.make_fn()
    if case.is_module:
        assert fn_a is not fn_b
        assert_same_result(fn_b.state_dict(), fn_a.state_dict())


def test_normalize_ops_names_functions_methods_and_modules() -> None:
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.relu = torch.nn.ReLU()

        def forward(self, x):
            return self.relu(torch.cos(x)).sum() + 1

    # symbolic_trace keeps the ReLU as call_module, unlike torch._dynamo, so all three kinds appear.
    gm = torch.fx.symbolic_trace(Net())
    assert normalize_ops(gm) == ("cos", "ReLU", "sum", "add")
    backend = CountingBackend()
    forward = backend(gm, [torch.randn(3)])
    assert backend.graphs[0].ops == ("cos", "ReLU", "sum", "add")
    assert backend.graphs[0].num_inputs == 1
    x = torch.randn(3)
    torch.testing.assert_close(forward(x), torch.relu(torch.cos(x)).sum() + 1)


def test_dynamo_reference_on_the_seed_examples() -> None:
    """The harness sees what the seed docs show torch._dynamo producing for `fn` and toy_example."""
    by_name = {c.name: c for c in CASES}
    fn = run_case(by_name["cos_plus_sin"], REFERENCE, timing=False)
    assert fn.op_sequences == [("cos", "sin", "add")]
    toy = run_case(by_name["toy_example"], REFERENCE, timing=False)
    assert toy.op_sequences == [("abs", "add", "truediv", "sum", "lt"), ("mul",)]
    eager = run_case(by_name["toy_example"], "eager", timing=False)
    assert eager.graph_count == 0
    assert_same_result(toy.result, eager.result)


@dataclasses.dataclass
class _Out:
    logits: torch.Tensor
    n: int


@pytest.mark.parametrize(
    "actual, expected",
    [
        ((torch.ones(2), [1, "a"]), (torch.ones(2), [1, "b"])),
        ((torch.ones(2),), [torch.ones(2)]),
        ({"a": torch.zeros(1)}, {"a": torch.ones(1)}),
        ({"a": 1}, {"b": 1}),
        (torch.float32, torch.float64),
        (torch.ones(2, dtype=torch.float64), torch.ones(2)),
        ([torch.ones(2)], [torch.ones(2), torch.ones(2)]),
        ({"a": torch.ones(1)}.values(), {"a": torch.zeros(1)}.values()),
        (_Out(torch.ones(2), 1), _Out(torch.ones(2), 2)),
        (_Out(torch.ones(2), 1), _Out(torch.zeros(2), 1)),
    ],
)
def test_assert_same_result_catches_differences(actual, expected) -> None:
    with pytest.raises(AssertionError):
        assert_same_result(actual, expected)


def test_assert_same_result_compares_dict_views_and_dataclasses_item_by_item() -> None:
    assert_same_result({"a": torch.ones(2)}.items(), {"a": torch.ones(2)}.items())
    assert_same_result(_Out(torch.ones(2), 1), _Out(torch.ones(2), 1))


def test_graphs_mismatch_reports_count_and_ops() -> None:
    by_name = {c.name: c for c in CASES}
    add = run_case(by_name["add"], REFERENCE, timing=False)
    mock = run_case(by_name["MockModule"], REFERENCE, timing=False)
    eager = run_case(by_name["add"], "eager", timing=False)
    assert graphs_mismatch(add, add) is None
    assert "ops differ" in graphs_mismatch(add, mock)
    assert "graph(s)" in graphs_mismatch(add, eager)


def _harness_case(fn, tags) -> Case:
    return Case(name=fn.__name__, module=__name__, make_fn=lambda: fn, make_inputs=lambda: Inputs((torch.ones(3),)),
                tags=frozenset(tags), target=fn)


def test_no_grad_tag_calls_the_case_under_no_grad() -> None:
    def grad_mode(x):
        return torch.is_grad_enabled(), x + 1

    for engine in ("eager", REFERENCE):
        assert run_case(_harness_case(grad_mode, {"no_grad"}), engine, timing=False).result[0] is False
        assert run_case(_harness_case(grad_mode, set()), engine, timing=False).result[0] is True


def test_rng_tag_seeds_each_call_and_leaves_the_callers_rng_alone() -> None:
    def noisy(x):
        return x + torch.rand(3)

    torch.manual_seed(1)
    expected_next = torch.rand(3)
    torch.manual_seed(1)
    seeded = _harness_case(noisy, {"rng"})
    eager, reference = run_case(seeded, "eager", timing=False), run_case(seeded, REFERENCE, timing=False)
    torch.testing.assert_close(torch.rand(3), expected_next)
    assert_same_result(reference.result, eager.result)
    assert_same_result(eager.cached_result, eager.result)  # both calls start from the seed
    unseeded = run_case(_harness_case(noisy, set()), "eager", timing=False)
    assert not torch.equal(unseeded.result, unseeded.cached_result)

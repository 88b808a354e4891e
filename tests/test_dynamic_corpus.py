"""The shared corpus under automatic dynamic shapes: each case called three times, with its inputs
and then with the first dimension of its floating-point tensor inputs grown by one and by two, so
that the recompile makes those sizes symbolic; every result must equal eager's, and no frame may
meet an internal error.

Eager and pyframe each make the case's function and inputs once and call it three times, so state
one call leaves behind (a counter in an argument) is the same for both.
"""
from __future__ import annotations

from typing import Any

import pytest
import torch

import pyframe
from pyframe import convert_frame
from pyframe.debug.cases import Case, load_cases
from pyframe.debug.compare import assert_same_result
from tests.cases import ALL

CASES = [c for c in load_cases(ALL) if "rng" not in c.tags]


def _grown(value: Any, extra: int) -> Any:
    """`value` with the first dimension of every floating-point tensor in it grown by `extra` rows."""
    if isinstance(value, torch.Tensor) and value.dim() > 0 and value.shape[0] > 1 and value.dtype.is_floating_point:
        grown = torch.cat([value.detach(), value.detach()[:1].expand(extra, *value.shape[1:]).clone()], 0)
        return grown.requires_grad_(value.requires_grad)
    if type(value) in (list, tuple):
        return type(value)(_grown(v, extra) for v in value)
    if type(value) is dict:
        return {k: _grown(v, extra) for k, v in value.items()}
    return value


def _run(case: Case, compile_it: bool) -> list[Any]:
    """The case's three calls, on one function made for them (compiled or not), with inputs made
    for this run: what one run leaves behind (a counter in an argument) is the same for both."""
    torch.manual_seed(case.seed)
    first = case.make_inputs()
    calls = [first] + [type(first)(_grown(first.args, k), _grown(first.kwargs, k)) for k in (1, 2)]
    torch.manual_seed(case.seed)
    fn = case.make_fn()
    if compile_it:
        fn = pyframe.optimize("eager")(fn)
    results = []
    for inputs in calls:
        torch.manual_seed(case.seed)
        results.append(fn(*inputs.args, **inputs.kwargs))
    return results


@pytest.mark.parametrize("case", [pytest.param(c, id=c.qualname) for c in CASES])
def test_growing_sizes_give_eagers_results(case: Case) -> None:
    try:
        expected = _run(case, compile_it=False)
    except Exception:  # noqa: BLE001 (eager itself fails on the grown sizes)
        pytest.skip("eager fails on the grown inputs")
    pyframe.reset()
    try:
        for got, want in zip(_run(case, compile_it=True), expected):
            assert_same_result(got, want)
        errors = [r.reason for records in convert_frame.records.values() for r in records
                  if "internal error" in r.reason]
        assert not errors, errors
    finally:
        pyframe.reset()

"""The differential fuzzer (tests/fuzz/) under pytest: random programs, eager against pyframe.

Default run: seeds 0..299 in batches of 25, so a failing batch names few seeds. ``-m slow``: seeds
0..9,999 in batches of 250, and the campaign of issue 19, seeds 100,000..109,999. A batch fails on any wrong result, exception or internal error of
pyframe, and prints each failure with its seed, how to rerun it and the program's source.

Seeds that fail because of an engine bug already reported are listed in ``KNOWN_FAILURES`` with
the bug: they still run, and each batch reports them (and any that now pass, to be removed from
the list) as a warning, so they stay in sight. The list covers the default seeds only.

The tests above the batches check the fuzzer itself: that it is deterministic, that its programs use
every feature, and that its comparison catches each kind of difference (with sabotaged engines).
"""
from __future__ import annotations

import dataclasses
import linecache
import logging
import warnings

import pytest

from tests.fuzz.generator import FEATURES, FLOAT, INT, DictT, Param, Program, TensorT, generate_program
from tests.fuzz.minimize import minimize
from tests.fuzz.runner import Outcome, check_seed, forget_program, load_program, run_program

DEFAULT_SEEDS = range(0, 300)
DEFAULT_BATCH = 25
SLOW_SEEDS = range(0, 10_000)
SLOW_BATCH = 250

#: seed -> the engine bug it fails on, e.g. ``{328: "wrong result: alias of a rebound local at a
#: break (report B3)"}``. Only for seeds of DEFAULT_SEEDS; a seed listed here that passes is reported
#: as such. Empty: every default seed passes on the engine this was last run against.
KNOWN_FAILURES: dict[int, str] = {}


# ------------------------------------------------------------------------------------------------
# The fuzzer itself

# A hand-written program in the generator's calling convention: fuzz_main(t0, n0, f0, log).
_PARAMS = (Param("t0", TensorT((3,))), Param("n0", INT), Param("f0", FLOAT))


def _program(body: str, seed: int = -1) -> Program:
    source = "import torch\n\n\ndef fuzz_main(t0, n0, f0, log):\n" + body
    return Program(seed, source, _PARAMS, frozenset())


def test_generator_is_deterministic() -> None:
    assert generate_program(7).source == generate_program(7).source
    assert generate_program(7, attempt=1).source != generate_program(7).source
    assert generate_program(7).source != generate_program(8).source


def test_generated_programs_compile_and_use_every_feature() -> None:
    used: set[str] = set()
    for seed in range(200):
        program = generate_program(seed)
        compile(program.source, program.filename, "exec")
        assert program.features <= FEATURES
        used |= program.features
    assert used == FEATURES, f"never generated: {sorted(FEATURES - used)}"


def test_programs_are_loaded_under_a_real_filename_with_lines_in_linecache() -> None:
    program = _program("    y = t0 * 2\n    return y\n", seed=12345)
    module = load_program(program)
    try:
        code = module.fuzz_main.__code__
        assert code.co_filename == "fuzz_12345.py"  # not `<...>`: pyframe traces it
        assert linecache.getline(code.co_filename, 5).strip() == "y = t0 * 2"
    finally:
        forget_program(program)
    assert not linecache.getline("fuzz_12345.py", 5)


def test_clean_program_passes_under_pyframe() -> None:
    program = _program(
        "    y = t0.sin() * f0\n"
        "    if y.sum() > 0:\n"
        "        log.append(n0)\n"
        "    t0.add_(1)\n"
        "    return y, [t0, n0 + 1]\n")
    outcome = run_program(program)
    assert outcome.status == "ok", outcome.report()
    assert outcome.graphs >= 2  # the branch on y.sum() is a graph break


def test_finalized_generators_and_set_tests_over_generators_pass_under_pyframe() -> None:
    """The shapes protocols.py writes: a generator closed part way (its finally block appends to
    the log), and set tests that stop taking a generator's items at the one that decides; compiled
    (a generator dropped paused in its try block would run the frame as Python)."""
    program = _program(
        "    def gen(a, out):\n"
        "        try:\n"
        "            for k in range(3):\n"
        "                yield a * k + 1\n"
        "        finally:\n"
        "            out.append(a.sum())\n"
        "    g = gen(t0, log)\n"
        "    first = next(g)\n"
        "    c = g.close()\n"
        "    seen = []\n"
        "    def items(values, seen):\n"
        "        for v in values:\n"
        "            seen.append(v)\n"
        "            yield v\n"
        "    s = items((n0, 2, n0 + 5, 3), seen)\n"
        "    n = int({2, n0}.isdisjoint(s)) + 10 * len(seen) + 100 * len(list(s))\n"
        "    s = items((1, 9, n0), seen)\n"
        "    n += int(frozenset({1, 2, 3}).issuperset(s)) + 10 * len(seen) + 100 * len(list(s))\n"
        "    return first, c, n\n")
    outcome = run_program(program)
    assert outcome.status == "ok", outcome.report()
    assert outcome.graphs >= 1


def test_a_dict_passed_in_is_made_for_each_call_and_compared_after_it() -> None:
    params = (Param("t0", TensorT((3,))), Param("d0", DictT((("k", INT), ("s", FLOAT), ("w", TensorT((2,)))))))
    source = ("import torch\n\n\ndef fuzz_main(t0, d0, log, *, m_opt=None):\n"
              "    if m_opt is None:\n"
              "        m_opt = t0 * 2\n"
              "    torch._dynamo.graph_break()\n"
              '    d0["k"] += 1\n'
              '    d0["w"].add_(d0.pop("s"))\n'
              '    d0["s"] = d0.setdefault("z", 0.5)\n'
              '    return m_opt, d0["k"]\n')
    program = Program(-2, source, params, frozenset())
    assert run_program(program).status == "ok"

    def engine(fn):  # changes an entry of the dict passed in
        return lambda t0, d0, log: (lambda r: (d0.update(k=d0["k"] + 1), r)[1])(fn(t0, d0, log))

    outcome = run_program(program, engine=engine)
    assert outcome.status == "wrong" and "inputs after the call" in outcome.detail, outcome.detail


def test_nan_or_raising_programs_are_invalid_not_failures() -> None:
    assert run_program(_program("    return t0 / 0.0 * 0.0\n")).status == "invalid"
    assert run_program(_program("    return t0 @ torch.ones(4)\n")).status == "invalid"


# Returns its input tensor (updated in place) and an int, and logs a tensor.
_RETURNS_INPUT = _program("    log.append(t0.sum())\n    t0.mul_(2)\n    return t0, n0\n")


# Sabotaged engines: each runs the program eagerly and changes one thing the comparison must notice.
def _shifted_result(fn):
    return lambda *args: (lambda r: (r[0] + 1e-3, r[1]))(fn(*args))


def _int_becomes_float(fn):
    return lambda *args: (lambda r: (r[0], float(r[1])))(fn(*args))


def _drops_log(fn):
    return lambda *args: fn(*args[:-1], [])


def _copies_inputs(fn):
    return lambda *args: fn(args[0].clone(), *args[1:])


def _copies_result(fn):
    return lambda *args: (lambda r: (r[0].clone(), r[1]))(fn(*args))


@pytest.mark.parametrize(
    "engine, what",
    [
        (_shifted_result, "result[0]: Tensor-likes are not close"),
        (_int_becomes_float, "result[1]: type float != expected int"),
        (_drops_log, "log: length 0 != expected 1"),
        (_copies_inputs, "inputs after the call[0]"),
        (_copies_result, "tensor identity differs"),
    ],
)
def test_comparison_catches_each_kind_of_difference(engine, what: str) -> None:
    assert run_program(_RETURNS_INPUT).status == "ok"  # the program itself is fine under pyframe
    outcome = run_program(_RETURNS_INPUT, engine=engine)
    assert outcome.status == "wrong"
    assert what in outcome.detail, outcome.detail


def test_exceptions_are_failures_with_seed_and_source_in_the_report() -> None:
    def engine(fn):
        def run(*args):
            raise RuntimeError("boom")
        return run

    outcome = run_program(dataclasses.replace(_RETURNS_INPUT, seed=99), engine=engine)
    assert outcome.status == "exception" and outcome.failed
    report = outcome.report()
    assert "seed 99" in report and "RuntimeError: boom" in report and "t0.mul_(2)" in report
    assert "python -m tests.fuzz --seed 99" in report


def test_internal_errors_logged_by_pyframe_are_failures() -> None:
    def engine(fn):
        def run(*args):
            try:
                raise RuntimeError("tensor add_1 is neither a graph output nor an input")
            except RuntimeError:
                logging.getLogger("pyframe").warning(
                    "pyframe: internal error compiling %s, running it normally", "fuzz_main", exc_info=True)
            return fn(*args)
        return run

    outcome = run_program(_RETURNS_INPUT, engine=engine)
    assert outcome.status == "internal_error" and outcome.failed
    assert outcome.signature() == "internal_error: RuntimeError: tensor T is neither a graph output nor an input"


def test_minimize_keeps_the_failing_statement_and_drops_the_rest() -> None:
    program = _program(
        "    a = t0.cos()\n"
        "    b = [a, t0 * 2]\n"
        "    for i in range(2):\n"
        "        log.append(i)\n"
        "    c = b[1] + n0\n"
        "    c.mul_(f0)\n"
        "    if c.sum() > 0:\n"
        "        a = a + 1\n"
        "    return a, c\n")

    def engine(fn):  # wrong exactly when the program still calls mul_
        if "mul_" not in fn.__code__.co_names:
            return fn
        return lambda *args: (lambda r: (r[0] + 1, *r[1:]))(fn(*args))

    small, outcome = minimize(program, engine=engine)
    assert outcome.status == "wrong"
    assert "mul_" in small.source
    assert "log.append" not in small.source and "range" not in small.source
    assert len(small.source.splitlines()) < len(program.source.splitlines()) - 3


# ------------------------------------------------------------------------------------------------
# The batches


def _run_batch(seeds: range, known: dict[int, str]) -> None:
    outcomes: list[Outcome] = [check_seed(seed) for seed in seeds]
    invalid = [o.seed for o in outcomes if o.status == "invalid"]
    assert not invalid, f"seeds with no clean program (a generator problem): {invalid}"
    # Agreeing with eager proves nothing if pyframe ran everything eagerly: most programs must have
    # been compiled, and graph breaks (more than one graph) must have happened.
    compiled = sum(o.graphs > 0 for o in outcomes)
    assert compiled >= 0.7 * len(outcomes), f"only {compiled} of {len(outcomes)} programs made a graph"
    assert any(o.graphs >= 2 for o in outcomes), "no program broke its graph"

    seen_known = [o for o in outcomes if o.seed in known]
    if seen_known:
        lines = [f"seed {o.seed}: {o.status}" + (" (now passes: remove it)" if not o.failed else "")
                 + f" -- {known[o.seed]}" for o in seen_known]
        warnings.warn("known fuzz failures (KNOWN_FAILURES in tests/test_fuzz.py):\n" + "\n".join(lines),
                      stacklevel=2)

    new = [o for o in outcomes if o.failed and o.seed not in known]
    assert not new, (f"{len(new)} of {len(outcomes)} fuzz programs fail under pyframe "
                     f"(seeds {[o.seed for o in new]}):\n\n" + "\n\n".join(o.report() for o in new))


def _batches(seeds: range, size: int) -> list:
    batches = [range(start, min(start + size, seeds.stop)) for start in range(seeds.start, seeds.stop, size)]
    return [pytest.param(b, id=f"seeds{b.start}-{b.stop - 1}") for b in batches]


@pytest.mark.parametrize("seeds", _batches(DEFAULT_SEEDS, DEFAULT_BATCH))
def test_fuzz(seeds: range) -> None:
    _run_batch(seeds, KNOWN_FAILURES)


@pytest.mark.slow
@pytest.mark.parametrize("seeds", _batches(SLOW_SEEDS, SLOW_BATCH))
def test_fuzz_slow(seeds: range) -> None:
    _run_batch(seeds, KNOWN_FAILURES)


#: The campaign of issue 19: 10,000 programs of seeds the default and slow runs above do not use.
CAMPAIGN_SEEDS = range(100_000, 110_000)


@pytest.mark.slow
@pytest.mark.parametrize("seeds", _batches(CAMPAIGN_SEEDS, SLOW_BATCH))
def test_fuzz_campaign(seeds: range) -> None:
    _run_batch(seeds, {})

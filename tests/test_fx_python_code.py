"""pyframe/fx_python_code.py: the graph's Python source written directly must be fx's own, character for
character (source, globals, line map), on every graph the corpus makes and on graphs built by hand
to reach each kind of node and argument; what it does not model goes to fx's generator. Its
namespace names nodes as fx's does."""
from __future__ import annotations

import collections
import operator

import pytest
import torch
import torch.fx

import pyframe
from pyframe.debug.cases import load_cases
from pyframe.debug.compare import reset_engines
from pyframe.fx_python_code import PyframeGraph, _Fallback, _Namespace, fast_python_code
from tests.cases import GRAPH_BREAKS, LIBRARIES, STRAIGHT_LINE


def fx_python_code(graph: torch.fx.Graph) -> torch.fx.graph.PythonCode:
    return torch.fx.Graph.python_code(graph, root_module="self")


def assert_same_code(graph: torch.fx.Graph) -> bool:
    """fast_python_code(graph) equals fx's; False if it declined (fx's generator then runs)."""
    expected = fx_python_code(graph)
    try:
        got = fast_python_code(graph, "self")
    except _Fallback:
        return False
    assert got.src == expected.src
    assert got.globals == expected.globals
    assert got._lineno_map == expected._lineno_map
    assert got._prologue_start == expected._prologue_start
    return True


@pytest.mark.parametrize("modules, at_least", [
    pytest.param(STRAIGHT_LINE + GRAPH_BREAKS, 250, id="programs"),
    # (the models of installed libraries: a compile of a second or so each, outside the default suite)
    pytest.param(LIBRARIES, 20, id="libraries", marks=pytest.mark.slow),
])
def test_every_corpus_graph_is_written_as_fx_writes_it(modules: list[str], at_least: int) -> None:
    graphs: list[torch.fx.GraphModule] = []

    def record(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    for case in load_cases(modules):
        reset_engines()
        try:
            inputs = case.make_inputs()
            pyframe.optimize(record)(case.make_fn())(*inputs.args, **inputs.kwargs)
        finally:
            reset_engines()
    assert len(graphs) > at_least
    written = [assert_same_code(gm.graph) for gm in graphs]
    # The writer exists for the common graph; it must not quietly decline most of them.
    assert sum(written) > 0.9 * len(written), f"{sum(written)} of {len(written)} graphs written directly"


def _graph_with(build) -> PyframeGraph:
    graph = PyframeGraph()
    x = graph.placeholder("L_x_")
    out = build(graph, x)
    graph.output(out if isinstance(out, tuple) else (out,))
    return graph


@pytest.mark.parametrize("build", [
    # operators, printed as Python operators, with constants of every printed kind
    lambda g, x: g.call_function(operator.add, (x, 1.5)),
    lambda g, x: g.call_function(operator.neg, (x,)),
    lambda g, x: g.call_function(operator.getitem, (x, (slice(1, None, None), None, Ellipsis))),
    lambda g, x: g.call_function(operator.getitem, (x, [0, 2])),
    lambda g, x: g.call_function(operator.iadd, (x, 2)),
    lambda g, x: g.call_function(operator.setitem, (x, 0, 1.0)),
    # torch callables by their qualified names, keyword arguments, dtypes, devices, layouts
    lambda g, x: g.call_function(torch.sum, (x,), {"dim": (0,), "keepdim": True, "dtype": torch.float64}),
    lambda g, x: g.call_function(torch.nn.functional.linear, (x, x)),
    lambda g, x: g.call_function(torch.zeros, ((2, 3),), {"device": torch.device("cpu"), "layout": torch.strided}),
    lambda g, x: g.call_function(torch.full, ((1,), float("inf"))),
    # methods, attributes and modules of the root
    lambda g, x: g.call_method("to", (x, torch.float16), {"memory_format": torch.contiguous_format}),
    lambda g, x: g.call_method("view", (x, -1, "a\nb")),
    lambda g, x: g.call_module("layers.0", (x,)),
    lambda g, x: g.get_attr("weight"),
    # a node nobody uses is freed where it is made
    lambda g, x: (g.call_function(torch.sin, (x,)), g.call_function(torch.cos, (x,)))[1],
])
def test_hand_built_graphs_match_fx(build) -> None:
    assert assert_same_code(_graph_with(build))


def test_declines_what_it_does_not_model() -> None:
    import enum

    class Mode(enum.Enum):
        A = 1

    Pair = collections.namedtuple("Pair", "a b")
    declined = [
        _graph_with(lambda g, x: g.call_function(max, (x, x))),                 # global for `max`
        _graph_with(lambda g, x: g.call_function(torch.Tensor.add, (x, x))),    # a method descriptor
        _graph_with(lambda g, x: g.call_function(torch.add, (x, Mode.A))),      # an enum argument
        _graph_with(lambda g, x: g.call_function(torch.add, (x, Pair(1, 2)))),  # a namedtuple
    ]
    typed = _graph_with(lambda g, x: g.call_function(torch.sin, (x,)))
    next(iter(typed.nodes)).type = int                                          # an annotation it does not model
    declined.append(typed)
    typed_call = _graph_with(lambda g, x: g.call_function(torch.sin, (x,)))
    list(typed_call.nodes)[1].type = torch.Tensor                               # an annotated call
    declined.append(typed_call)
    for graph in declined:
        with pytest.raises(_Fallback):
            fast_python_code(graph, "self")
        # ... and the graph's own python_code is then fx's
        assert PyframeGraph.python_code(graph, "self").src == fx_python_code(graph).src


def test_placeholder_annotations_are_written_as_fx_writes_them() -> None:
    # torch._dynamo annotates each graph input with its value's type: `L_x_ : torch.Tensor`.
    for annotation in (torch.Tensor, torch.nn.Parameter):
        graph = _graph_with(lambda g, x: g.call_function(torch.sin, (x,)))
        next(iter(graph.nodes)).type = annotation
        code = fast_python_code(graph, "self")
        assert code.src == fx_python_code(graph).src
        assert " : torch." in code.src.splitlines()[3]


def test_printing_options_go_to_fx() -> None:
    graph = _graph_with(lambda g, x: g.call_function(torch.sin, (x,)))
    next(iter(graph.nodes)).meta["example_value"] = torch.randn(2)
    verbose = graph.python_code("self", verbose=True)
    assert verbose.src == torch.fx.Graph.python_code(graph, "self", verbose=True).src


def test_graph_module_runs_the_written_code() -> None:
    graph = _graph_with(lambda g, x: g.call_function(operator.mul, (g.call_function(torch.sin, (x,)), 2.0)))
    gm = torch.fx.GraphModule(torch.nn.Module(), graph)
    x = torch.randn(4)
    torch.testing.assert_close(gm(x)[0], torch.sin(x) * 2.0)
    assert gm.code == fx_python_code(graph).src


# Names fx's namespace splits at a boundary its regular expression decides: a `_` first or doubled,
# digits with no `_`, with leading zeros, `_` last, keywords and builtins, not identifiers, non-ASCII
# (letters and digits), a newline last (`$` matches before it), and names met again.
_NAMES = ["x", "_", "__", "_1", "__1", "_1_", "a_1", "a__1", "a_1_", "a_1_2", "a_01", "a_0", "a1", "a_1a",
          "a_", "A_10", "add", "add_1", "add_1", "add", "add_2", "add_1_1", "list", "list_1", "list", "max",
          "class", "class_1", "None", "self", "torch", "inf", "nan", "1a", "1_2", "", "a b", "a-1", "a.b_3",
          "é", "aé_1", "a_١", "a_1\n", "a\n", "_unnamed", "L_self_modules_layer_modules_0_parameters_weight_",
          "L_self_modules_layer_modules_0_parameters_weight_" + "_1" * 30, "x" * 300 + "_7"]


@pytest.mark.parametrize("with_objects", [False, True])
def test_namespace_names_as_fx_names(with_objects: bool) -> None:
    ours, fxs = _Namespace(), torch.fx.graph._Namespace()
    for round in range(3):
        for i, name in enumerate(_NAMES):
            # (an object named once keeps its name; a builtin of that name may be named by it)
            obj = (list if name == "list" and round == 1 else object()) if with_objects else None
            assert ours.create_name(name, obj) == fxs.create_name(name, obj), name
            if obj is not None:
                assert ours.create_name("other", obj) == fxs.create_name("other", obj)
    assert ours._used_names == fxs._used_names
    assert ours._base_count == fxs._base_count


def test_graph_nodes_are_named_by_the_namespace() -> None:
    graph, fx_graph = PyframeGraph(), torch.fx.Graph()
    assert type(graph._graph_namespace) is _Namespace
    for g in (graph, fx_graph):
        for name in ("L_x_", "sin", "sin", "sin_1", "list", "a__2", "1bad"):
            g.create_node("call_function", torch.sin, name=name)
    assert [n.name for n in graph.nodes] == [n.name for n in fx_graph.nodes]

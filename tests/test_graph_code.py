"""The same graphs as torch._dynamo: each corpus case's GraphModules, as a backend receives them, are
written (`gm.code`) as torch._dynamo 2.13 writes them on the same backend.

Two checks per case, both on the text fx generates, compared verbatim (no normalisation: nothing in
`gm.code` legitimately differs between the engines; the graph's class name and `__compiled_fn_N`
numbering are not part of it):

- the placeholders: the `def forward(self, ...)` line of every graph, so their names, their order
  (Dynamo's: where it realizes each input, see graph_inputs.order_inputs_as_dynamo) and their type
  annotations (`L_x_ : torch.Tensor`, `... : torch.nn.parameter.Parameter`);
- the whole code of every graph.

A case that still differs is listed below with what differs; like the corpus's documented
differences, the listing must stay true (a case that comes to match fails until it is removed).
The check runs in tests/test_corpus.py, on the runs it makes of every case anyway.
"""
from __future__ import annotations

import collections
import itertools
from typing import Any

import pytest
import torch
import torch._dynamo
import torch.utils._pytree as pytree

import pyframe
from pyframe.debug.cases import Case, Inputs, load_cases
from pyframe.debug.compare import graphs_mismatch, run_case
from tests.cases import ALL

CASES = load_cases(ALL)

# Placeholders that still differ from torch._dynamo's, by kind:
_NUMPY = "the case's `difference`: numpy scalar globals are graph inputs (G_STEPS_) in Dynamo, constants in pyframe"
_DICT_KEY = ("a tensor that is also a key of a global dict: Dynamo makes a dict's tensor keys graph inputs when it "
             "first uses the dict, and, one tracker per tensor, names _Q after the key (list_dict_keys_G_PARAM_STATE_1_); "
             "pyframe makes a key's tracker only when the key is used as a value, so _Q is named after its global")
_OUTER_FELL_BACK = "torch._dynamo runs the frame as Python; its one graph is an inlined function's, compiled alone"
SIGNATURE_DIFFERS: dict[str, str] = {
    "constants.numpy_scalar_constants": _NUMPY,
    "containers.global_param_keyed_state_mutated": _DICT_KEY,
    "function_objects.closure_cells_of_a_nested_function": _OUTER_FELL_BACK,
}

# Cases whose placeholders match but whose graphs do not, each for a reason the case documents
# (its `difference`): torch._dynamo and pyframe split the frame into different graphs, so the code
# of the graphs cannot be the same.
_MATERIALIZE = "Dynamo traces an autograd.Function with set_materialize_grads(False); pyframe breaks at its apply"
_NN_MODULE_FRAMES = ("the case's `difference`: pyframe compiles the torch.nn modules' frames (Embedding, Dropout) "
                     "a frame run as Python calls, one-op graphs torch._dynamo does not make")
CODE_DIFFERS: dict[str, str] = {
    "transformers_models.LongT5ModelEval": _NN_MODULE_FRAMES,
    "transformers_models.SwitchTransformersModelEval": _NN_MODULE_FRAMES,
    "graph_breaks.torch_modules_called_from_a_frame_run_as_python": _NN_MODULE_FRAMES,
    "autograd_function_breaks.set_materialize_grads_false": _MATERIALIZE,
}


# Cases whose graph code differs from torch._dynamo's for another reason the case documents.
_DOCUMENTED = "the case's own `difference` says why: a break in one engine where the other traces on"
NAMES_DIFFER: dict[str, str] = {
    "function_objects.function_transform_of_a_nested_function": _DOCUMENTED,
    "class_protocols.class_getitem_picks_a_dtype": _DOCUMENTED,
}


class Recorder:
    """A backend that keeps the code of every graph and runs it as it is."""

    def __init__(self) -> None:
        self.codes: list[str] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        self.codes.append(gm.code)
        return gm.forward


def graph_codes(case: Case, engine: str) -> list[str]:
    recorder = Recorder()
    run_case(case, engine, timing=False, backend=recorder)
    return recorder.codes


def signatures(codes: list[str]) -> list[str]:
    """The `def forward(self, ...)` line of each graph: its placeholders."""
    return [next(line for line in code.splitlines() if line.startswith("def forward")) for code in codes]


def check_graph_code(qualname: str, ours: list[str], theirs: list[str]) -> None:
    """The graphs' code of a corpus case under pyframe (`ours`) is torch._dynamo's (`theirs`), or
    differs as listed above. tests/test_corpus.py calls this on the runs it makes of every case."""
    if qualname in SIGNATURE_DIFFERS:
        assert signatures(ours) != signatures(theirs), (
            f"placeholders now match torch._dynamo's: remove {qualname} from SIGNATURE_DIFFERS")
        return
    if len(ours) == len(theirs):  # (a different graph count is the corpus test's concern)
        assert signatures(ours) == signatures(theirs)
    if qualname in CODE_DIFFERS:  # (each differs in its number of graphs)
        assert len(ours) != len(theirs), (
            f"graph count now matches torch._dynamo's: check {qualname}'s entry in CODE_DIFFERS")
    elif qualname in NAMES_DIFFER:
        assert ours != theirs, f"graph code now matches torch._dynamo's: remove {qualname} from NAMES_DIFFER"
    else:
        assert ours == theirs


def test_every_listed_case_is_in_the_corpus() -> None:
    names = {c.qualname for c in CASES}
    listed = [set(SIGNATURE_DIFFERS), set(CODE_DIFFERS), set(NAMES_DIFFER)]
    assert not set().union(*listed) - names
    assert sum(map(len, listed)) == len(set().union(*listed))  # each in one listing


def test_placeholders_of_a_module_as_dynamo_orders_and_annotates_them() -> None:
    # The seed's dropout-removal example: torch._dynamo 2.13 realizes the parameters where
    # F.linear's arguments are read, the input x when the call uses it.
    class LinearDropout(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(4, 4)
            self.dropout = torch.nn.Dropout(0.1)

        def forward(self, x):
            return self.dropout(self.linear(x))

    case = Case(name="LinearDropout", module="test_graph_code", make_fn=lambda: LinearDropout().eval(),
                make_inputs=lambda: Inputs((torch.randn(2, 4),)), tags=frozenset({"module"}))
    ours, theirs = graph_codes(case, "pyframe"), graph_codes(case, "dynamo")
    assert signatures(ours) == [
        "def forward(self, L_self_modules_linear_parameters_weight_ : torch.nn.parameter.Parameter, "
        "L_self_modules_linear_parameters_bias_ : torch.nn.parameter.Parameter, L_x_ : torch.Tensor):"]
    assert ours == theirs


class _Holder:
    def __init__(self, v=None):
        self.v = v


def _stored_on_an_object(a, b):
    o = _Holder()
    o.v = a  # realized here by torch._dynamo: its placeholder comes first
    return b * o.v


def _passed_to_a_constructor(a, b):
    return b * _Holder(a).v


def _kept_in_a_list(a, b):
    kept = [a]  # still lazy: realized at the multiplication, after b
    return b * kept[0]


def _aliased_by_a_local(a, b):
    c = a
    return b * c


def test_inputs_first_used_by_one_call_are_ordered_by_its_arguments_as_dynamo() -> None:
    """torch._dynamo realizes lazy inputs at their first use in the order of that call's
    arguments, except one stored as an object's attribute, realized at the store."""
    for fn in (_stored_on_an_object, _passed_to_a_constructor, _kept_in_a_list, _aliased_by_a_local):
        case = Case(name=fn.__name__, module="test_graph_code", make_fn=lambda fn=fn: fn,
                    make_inputs=lambda: Inputs((torch.randn(3), torch.randn(3))), tags=frozenset())
        assert signatures(graph_codes(case, "pyframe")) == signatures(graph_codes(case, "dynamo")), fn.__name__


class Tied(torch.nn.Module):
    """An embedding whose output projection shares its weight (GPT-2's, T5's lm_head)."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(10, 4)
        self.head = torch.nn.Linear(4, 10, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids):
        return self.head(self.embed(ids))


def test_one_tensor_under_two_sources_is_one_placeholder_guarded_to_stay_one() -> None:
    torch.manual_seed(0)
    model, ids = Tied().eval(), torch.tensor([[1, 2, 3]])
    ours, theirs = Recorder(), Recorder()
    torch._dynamo.reset()
    torch.testing.assert_close(torch._dynamo.optimize(theirs)(model)(ids), model(ids))
    compiled = pyframe.optimize(ours)(model)
    torch.testing.assert_close(compiled(ids), model(ids))
    assert signatures(ours.codes) == signatures(theirs.codes)
    assert signatures(ours.codes)[0].count("Parameter") == 1
    torch.testing.assert_close(compiled(ids), model(ids))
    assert len(ours.codes) == 1
    model.head.weight = torch.nn.Parameter(torch.randn(10, 4))  # untied: two tensors, a new graph
    torch.testing.assert_close(compiled(ids), model(ids))
    assert len(ours.codes) == 2 and signatures(ours.codes)[1].count("Parameter") == 2

    def twice(a, b):
        return a * 2 + b

    x, y = torch.randn(3), torch.randn(3)
    recorder = Recorder()
    compiled_twice = pyframe.optimize(recorder)(twice)
    torch.testing.assert_close(compiled_twice(x, x), twice(x, x))
    assert signatures(recorder.codes) == ["def forward(self, L_a_ : torch.Tensor):"]
    torch.testing.assert_close(compiled_twice(x, y), twice(x, y))  # two tensors: traced again
    assert signatures(recorder.codes)[1] == "def forward(self, L_a_ : torch.Tensor, L_b_ : torch.Tensor):"


def _islice_without_and_with_a_stop(x):
    unbounded = itertools.islice([x + 1, x * 2, x - 3], 1, None, 2)
    bounded = itertools.islice([x - 1, x / 2, x * 3, x + 4], 0, 3, 2)
    return sum(unbounded) + sum(bounded)


def test_items_taken_by_islice_are_named_as_dynamo_names_them() -> None:
    # A node is named after the first local its tensor is stored in: torch._dynamo's islice stores
    # the items it reads in enumerate's `x` without a stop, in `element` with one.
    case = Case(name="islice", module="test_graph_code", make_fn=lambda: _islice_without_and_with_a_stop,
                make_inputs=lambda: Inputs((torch.randn(3),)), tags=frozenset())
    ours, theirs = graph_codes(case, "pyframe"), graph_codes(case, "dynamo")
    assert "x_1 = l_x_ * 2" in ours[0] and "element_1 = l_x_ / 2" in ours[0]
    assert ours == theirs


def test_modules_found_by_a_getattr_calling_nn_module_getattr_are_named_through_dict() -> None:
    # torch._dynamo traces nn.Module.__getattr__, called by the program, as Python: what it finds
    # is read from `self.__dict__["_modules"]`, and the placeholders say so.
    case = next(c for c in CASES if c.qualname == "modules.WrapperForwardingGetattr")
    ours, theirs = graph_codes(case, "pyframe"), graph_codes(case, "dynamo")
    assert "L_self_dict_modules_model_modules_lin_parameters_weight_" in signatures(ours)[0]
    assert ours == theirs


class _Bag(dict):
    pass


def _items_of_dicts(bag, table, x):
    key = next(iter(table))
    return bag["w"] * x + table[key]


def test_items_of_dict_subclasses_and_of_tensor_keys_are_named_by_position_as_dynamo() -> None:
    # torch._dynamo reads an item of a dict subclass, and the value of a key that is not a
    # constant, by the key's position: `dict.__getitem__(L['bag'], list(dict.keys(L['bag']))[1])`.
    k = torch.randn(3)
    case = Case(name="items_of_dicts", module="test_graph_code", make_fn=lambda: _items_of_dicts,
                make_inputs=lambda: Inputs((_Bag(n=2, w=torch.randn(3)), {k: torch.randn(3)}, torch.randn(3))),
                tags=frozenset())
    ours, theirs = graph_codes(case, "pyframe"), graph_codes(case, "dynamo")
    assert "dict_getitem_L_bag_list_dict_keys_L_bag_1_" in signatures(ours)[0]
    assert "L_table_list_dict_keys_L_table_0_" in signatures(ours)[0]
    assert ours == theirs


class _AddsItsKeyword(torch.nn.Linear):
    def forward(self, x, y=None):
        return super().forward(x) + y


class _Hooked(torch.nn.Module):
    def __init__(self, pre: bool):
        super().__init__()
        self.lin = _AddsItsKeyword(4, 4)
        if pre:
            self.lin.register_forward_pre_hook(lambda module, args: None)
        else:
            self.lin.register_forward_hook(lambda module, args, output: None)

    def forward(self, x, y):
        return self.lin(x, y=y)


@pytest.mark.parametrize("pre", [True, False], ids=["pre_hook", "hook"])
def test_a_hooked_module_call_realizes_its_positional_inputs_first_as_dynamo(pre: bool) -> None:
    # torch._dynamo traces nn.Module._call_impl for a module with hooks: the tensors passed
    # positionally become inputs before the module's parameters, those passed by keyword at use.
    case = Case(name="Hooked", module="test_graph_code", make_fn=lambda: _Hooked(pre),
                make_inputs=lambda: Inputs((torch.randn(2, 4), torch.randn(2, 4))), tags=frozenset({"module"}))
    ours, theirs = graph_codes(case, "pyframe"), graph_codes(case, "dynamo")
    assert signatures(ours)[0].startswith("def forward(self, L_x_ : torch.Tensor, L_self_modules_lin_parameters_weight_")
    assert signatures(ours)[0].endswith("L_y_ : torch.Tensor):")
    assert ours == theirs


class _TakesAList(torch.nn.Linear):
    def forward(self, xs, scale):
        return super().forward(xs[0]) + xs[1] * scale


class _HookedWithAList(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = _TakesAList(4, 4)
        self.lin.register_forward_pre_hook(lambda module, args: None)

    def forward(self, x, y, scale):
        return self.lin([x, y], scale)


def test_a_hooked_module_call_realizes_its_arguments_up_to_the_first_tensor_as_dynamo() -> None:
    # (_call_impl's `inner` closes over `args`: walked as a constant test, it stops at x)
    case = Case(name="HookedWithAList", module="test_graph_code", make_fn=_HookedWithAList,
                make_inputs=lambda: Inputs((torch.randn(2, 4), torch.randn(2, 4), torch.randn(2, 4))),
                tags=frozenset({"module"}))
    ours, theirs = graph_codes(case, "pyframe"), graph_codes(case, "dynamo")
    assert signatures(ours)[0].startswith("def forward(self, L_x_ : torch.Tensor, L_self_modules_lin_parameters_weight_")
    assert signatures(ours)[0].endswith("L_y_ : torch.Tensor, L_scale_ : torch.Tensor):")
    assert ours == theirs


def _type_asked(x, t):
    return x if isinstance(t, float) or type(t) is int else x + t


def _sequence_pattern(x, blocks):
    match blocks:
        case [first, second]:  # GET_LEN: blocks[0] realized, blocks[1] at its use
            return x @ first @ second


def _mapping_pattern(x, d):
    match d:
        case {"a": [a, b]}:
            return x @ a @ b


def _comprehension_closing_over_a_dict(x, **kwargs):
    wanted = {name: kwargs.get(name) is not None for name in ("t", "u")}
    return x + kwargs["t"] if wanted["t"] else x


_REALIZING = [(_type_asked, lambda: (torch.randn(3), torch.randn(3))),
              (_sequence_pattern, lambda: (torch.randn(2, 4), [torch.randn(4, 4), torch.randn(4, 4)])),
              (_mapping_pattern, lambda: (torch.randn(2, 4), {"a": [torch.randn(4, 4), torch.randn(4, 4)]}))]


@pytest.mark.parametrize("fn, inputs", _REALIZING, ids=[fn.__name__ for fn, _ in _REALIZING])
def test_inputs_realized_by_a_type_test_or_a_constant_test_come_first_as_in_dynamo(fn, inputs) -> None:
    # torch._dynamo makes a lazy input a graph input when its type is asked (isinstance, type),
    # and when a step asks whether a container is a constant: GET_LEN of a match statement's
    # subject walks its items up to the first that is not one.
    case = Case(name=fn.__name__, module="test_graph_code", make_fn=lambda: fn,
                make_inputs=lambda: Inputs(inputs()), tags=frozenset())
    ours, theirs = graph_codes(case, "pyframe"), graph_codes(case, "dynamo")
    assert "L_x_" not in signatures(ours)[0].split(",")[1]  # (not the first input)
    assert ours == theirs


def test_inlining_a_closure_realizes_the_inputs_its_cells_hold_as_dynamo() -> None:
    # Before inlining a function made in the frame (here a dict comprehension closing over
    # `kwargs`), torch._dynamo tries to make it a real function from its cells' contents.
    case = Case(name="closure", module="test_graph_code", make_fn=lambda: _comprehension_closing_over_a_dict,
                make_inputs=lambda: Inputs((torch.randn(3),), {"t": torch.randn(3)}), tags=frozenset())
    ours, theirs = graph_codes(case, "pyframe"), graph_codes(case, "dynamo")
    assert signatures(ours) == ["def forward(self, L_kwargs_t_ : torch.Tensor, L_x_ : torch.Tensor):"]
    assert ours == theirs


class _AddmmFirstDtype(torch.nn.Module):
    """A Conv1D (GPT-2's: addmm(bias, x, weight)) behind a `dtype` read off the first parameter."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Parameter(torch.randn(4))
        self.weight = torch.nn.Parameter(torch.randn(4, 4))
        self.bias = torch.nn.Parameter(torch.randn(4))

    def forward(self, x):
        dtype = next(p.dtype for p in self.parameters() if p.is_floating_point())
        return torch.addmm(self.bias, x.to(dtype), self.weight) + self.embed


def test_parameters_are_read_as_the_iterator_gives_them_as_in_dynamo() -> None:
    # parameters() is a generator torch._dynamo traces: stopping at the first parameter reads no
    # other, so the bias (read first by addmm) comes before the weight.
    case = Case(name="AddmmFirstDtype", module="test_graph_code", make_fn=_AddmmFirstDtype,
                make_inputs=lambda: Inputs((torch.randn(2, 4),)), tags=frozenset({"module"}))
    ours, theirs = graph_codes(case, "pyframe"), graph_codes(case, "dynamo")
    assert signatures(ours) == [
        "def forward(self, L_self_parameters_embed_ : torch.nn.parameter.Parameter, "
        "L_self_parameters_bias_ : torch.nn.parameter.Parameter, L_x_ : torch.Tensor, "
        "L_self_parameters_weight_ : torch.nn.parameter.Parameter):"]
    assert ours == theirs


_Pair = collections.namedtuple("_Pair", "a b")


def _tree_mapped(x, y):
    tree = [x, (x + 1, {"k": x * 2, "n": None}), 3]
    out = pytree.tree_map(lambda t, u: t if t is None or isinstance(t, int) else t.sin() + u,
                          tree, [y, (y, {"k": y, "n": 1}), 4])
    pair = pytree.tree_map(torch.cos, _Pair(x, [y]))  # a namedtuple: the real tree_map, inlined
    return out[1][1]["k"] + out[0], out[2], pair.b[0]


def test_tree_map_calls_the_function_on_each_leaf_as_dynamo_does() -> None:
    # torch._dynamo maps lists, tuples and dicts itself (no pytree local names a leaf's node).
    x, y = torch.randn(3), torch.randn(3)
    torch.testing.assert_close(pyframe.optimize(Recorder())(_tree_mapped)(x, y), _tree_mapped(x, y))
    case = Case(name="tree_mapped", module="test_graph_code", make_fn=lambda: _tree_mapped,
                make_inputs=lambda: Inputs((torch.randn(3), torch.randn(3))), tags=frozenset())
    ours, theirs = graph_codes(case, "pyframe"), graph_codes(case, "dynamo")
    assert "add = l_x_ + 1" in ours[0]
    assert ours == theirs


def test_numpy_scalars_are_constants_where_dynamo_makes_them_inputs() -> None:
    # constants.numpy_scalar_constants documents this difference; the graphs are otherwise alike.
    case = next(c for c in CASES if c.qualname == "constants.numpy_scalar_constants")
    subject, reference = run_case(case, "pyframe", timing=False), run_case(case, "dynamo", timing=False)
    assert graphs_mismatch(subject, reference) is None and not subject.fallbacks
    assert signatures([g.code for g in subject.graphs]) == ["def forward(self, L_x_ : torch.Tensor):"]
    assert signatures([g.code for g in reference.graphs]) == [
        "def forward(self, L_x_ : torch.Tensor, G_STEPS_ : torch.Tensor, G_RATE_ : torch.Tensor):"]


def _recursive_helper(x):
    def helper(n):  # closes over itself: converting it to a real function cannot finish
        return x.sin() if n == 0 else helper(n - 1) * 2
    return helper(2)


def test_a_nested_function_closing_over_itself_is_inlined_as_dynamo_does() -> None:
    case = Case(name="recursive_helper", module="test_graph_code", make_fn=lambda: _recursive_helper,
                make_inputs=lambda: Inputs((torch.arange(3.0),)), tags=frozenset())
    subject, reference = run_case(case, "pyframe", timing=False), run_case(case, "dynamo", timing=False)
    assert not subject.fallbacks and graphs_mismatch(subject, reference) is None
    torch.testing.assert_close(subject.result, _recursive_helper(torch.arange(3.0)))
    assert [g.code for g in subject.graphs] == [g.code for g in reference.graphs]

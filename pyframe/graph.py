"""OutputGraph: the torch.fx graph one frame's trace records, and its hand-off to the backend.

The translator adds graph inputs (real tensors read from the frame, named after their Source as
torch._dynamo names them: `L['x']` -> placeholder `L_x_`) and call nodes. Every node is run on
FakeTensors as it is created, so shapes and dtypes are known while tracing and each node carries
`meta["example_value"]`. At the end, `compile()` closes the graph with a tuple output and gives it,
with the real example inputs, to the backend. This module knows nothing of bytecode.
"""
from __future__ import annotations

import contextlib
import itertools
import operator
from typing import Any, Callable

import torch
import torch.fx
from torch._dispatch.python import enable_python_dispatcher
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

from . import config
from .backends import CompiledGraph, compile_with_backend
from .exc import Unsupported
from .fake import inplace_rules
from .fake import rules as fake_rules
from .fake import sym_rules, sym_strides
from .fake.memo import PropagationMemo, constant_tensor, plain_fake, tensor_inputs
from .fake.mode import PyframeFakeTensorMode
from .fake.shapes import (
    STATIC, NeedsSymbolicTrace, ShapePolicy, has_symbolic_sizes, new_symbolic_mode, symbolic_fake, symbolic_int,
)
from .fake.unbacked import CHECKS, bind_fresh_symbols, data_dependent_break, insert_runtime_asserts, is_data_dependent_error
from .fx_python_code import PyframeGraph
from .graph_passes import (check_own_nodes, drop_cancelling_grad_mode_pairs, drop_unused_bookkeeping,
                          drop_unused_size_arithmetic, has_size_arithmetic)
from .graph_inputs import GraphInput, is_symbol, merge_twin_inputs, order_inputs_as_dynamo
from .guards import GuardSet
from .source import Source, TensorPropertySource


_fake_mode: FakeTensorMode | None = None
_memo: PropagationMemo | None = None


def fake_mode() -> FakeTensorMode:
    """One shared FakeTensorMode (static shapes): creating one costs far more than a trace."""
    global _fake_mode, _memo
    if _fake_mode is None:
        _fake_mode = PyframeFakeTensorMode(allow_non_fake_inputs=False)
        _memo = PropagationMemo(_fake_mode)
    return _fake_mode


def propagation_memo() -> PropagationMemo:
    """The memo of FakeTensor propagation shared by every trace (fake/memo.py)."""
    fake_mode()
    return _memo


class OutputGraph:
    """`symbolic`: the trace has tensors with dynamic dimensions (fake/shapes.py): it runs on a
    FakeTensorMode over a ShapeEnv of its own, with a memo of its own (keyed by the sizes'
    expressions: fake/memo.py) and the shape rules for symbolic sizes (fake/sym_rules.py) besides
    the static ones, and each symbol of an input's sizes is a graph input of its own (`s77: Sym(s77)`,
    before the tensor's placeholder, handed the size on each call) as in torch._dynamo's graphs."""

    # (slots: more attributes than CPython 3.11's shared-key instance layout holds, 30, past which
    # each attribute read is an unspecialized dict lookup; the trace reads them at every op)
    __slots__ = ("_autocast_around", "_dispatch_cache", "_events", "_fake_inputs", "_inputs_by_fake",
                 "_last_placeholder", "_made_after", "_memo_state", "_node_keys", "_realized", "_sym_exprs", "data_dependent",
                 "autocast_stack", "backend", "backend_name", "class_reads", "compared_twins", "fake_mode", "fast_propagation",
                 "attribute_reads", "getattribute_reads", "grad_enabled", "graph", "guards", "immutable_trackers",
                 "initial_grad_enabled", "inputs", "memo", "requires_grad_taints", "shape_env", "shapes",
                 "subgraphs", "symbol_nodes", "symbolic", "symbolic_ints", "symbolic_tensors", "torch_function_modes", "vmap_levels", "__weakref__")

    def __init__(self, backend: Callable, backend_name: str, symbolic: bool = False,
                 shapes: ShapePolicy = STATIC):
        self.backend = backend
        self.backend_name = backend_name
        self.graph = PyframeGraph()
        self.inputs: dict[Source, GraphInput] = {}
        self.guards = GuardSet()
        self.initial_grad_enabled = torch.is_grad_enabled()
        self.grad_enabled = self.initial_grad_enabled  # as traced: `with torch.no_grad()` changes it
        self.autocast_stack: list[tuple] = []  # the traced `with torch.autocast(...)` regions we are in
        # Tensors the graph made that `requires_grad_()` turned into leaves requiring grad, each with
        # the frame's instruction that did it: none may reach an output (translator/finish.py)
        self.requires_grad_taints: list[tuple[torch.fx.Node, int]] = []
        self._last_placeholder: torch.fx.Node | None = None
        # When each placeholder was read, and when a lazily realized one was first looked at (its
        # metadata, a method): (the call recorded before, the event's number). See graph_inputs.py.
        self._made_after: dict[torch.fx.Node, tuple[torch.fx.Node | None, int]] = {}
        self._realized: dict[torch.fx.Node, tuple[torch.fx.Node | None, int]] = {}
        self._events = itertools.count()
        self.symbolic = symbolic
        self.shapes = shapes
        self.fake_mode = new_symbolic_mode(shapes) if symbolic else fake_mode()
        self.shape_env = self.fake_mode.shape_env
        if symbolic:
            # While tracing, FakeTensorMode's dispatch cache is off: what repeats is answered before
            # it (the memo, fake/views.py), and over a ShapeEnv each entry it makes is checked by
            # building its output a second time. The backend gets the mode as torch made it (compile()).
            self._dispatch_cache = self.fake_mode.cache_enabled
            self.fake_mode.cache_enabled = False
            self.fake_mode.remember_views = True
        self.fast_propagation = config.fast_fake_propagation
        # Symbolic: every tensor read with symbolic sizes (source, FakeTensor), in order, and the
        # placeholder of each symbol of their sizes.
        self.symbolic_tensors: list[tuple[Source, torch.Tensor]] = []
        self.symbolic_ints: list[tuple[Source, Any]] = []  # int arguments made SymInt inputs
        self.symbol_nodes: dict[Any, torch.fx.Node] = {}
        self._sym_exprs: dict[Any, list[torch.fx.Node]] = {}  # see sym_node
        # Symbolic: the nodes that made unbacked symbols (`item`, `nonzero`) or state facts about
        # symbols (`torch._check`): the finished graph gets the ShapeEnv's runtime asserts if any
        # (fake/unbacked.py). Shared with the graphs of higher-order ops traced inside.
        self.data_dependent: list[torch.fx.Node] = []
        # (a symbolic trace's memo holds what its own ShapeEnv decided: it serves that trace only)
        self.memo = PropagationMemo(self.fake_mode) if symbolic else propagation_memo()
        self._memo_state = self.memo.global_state()
        # An autocast region around the whole call (the memo's state holds its dtypes): rules decline.
        self._autocast_around = self._memo_state is not None and any(d is not None for d in self._memo_state[1:])
        self._node_keys: dict[torch.fx.Node, tuple] = {}  # memo keys of the nodes' values (fake/memo.py)
        self._fake_inputs: dict[int, torch.Tensor] = {}  # id of a real input -> its FakeTensor
        self._inputs_by_fake: dict[int, GraphInput] = {}  # id of an input's FakeTensor -> its first input
        # Inputs the trace compared by identity with another (`x is y`): see graph_inputs.merge_twin_inputs.
        self.compared_twins: set[Source] = set()
        # Graphs called by higher-order ops (an autograd.Function's `fwd_body_0`, `bwd_body_0`),
        # by the name of the get_attr node that reads each: attributes of the compiled GraphModule.
        self.subgraphs: dict[str, torch.fx.GraphModule] = {}
        # Trackers of modules and functions the trace read, by (source, guarded): see builder.wrap.
        self.immutable_trackers: dict[tuple, Any] = {}
        # Reads through a class's own __getattribute__, to repeat: see variables/methods.py, inline_getattribute.
        self.getattribute_reads: dict[tuple, tuple] = {}
        # Plain attribute values of the frame's objects, to repeat: see variables/objects.py, generic_getattr.
        self.attribute_reads: dict[tuple, tuple] = {}
        # Calls that read only their argument's class, to repeat: see variables/class_reads.py.
        self.class_reads: dict[tuple, tuple] = {}
        # The vmap levels the trace pushed onto functorch's stack and has not popped (variables/functorch.py).
        self.vmap_levels: list[int] = []
        # The torch function modes the trace entered, innermost last (variables/torch_function_modes.py).
        self.torch_function_modes: list[Any] = []
    # -- building -----------------------------------------------------------------------------
    def add_input(self, source: Source, value: torch.Tensor, module_state: bool = False) -> torch.fx.Node:
        """The placeholder for a tensor read from the frame (one per source while tracing; one per
        tensor in the compiled graph, see graph_inputs.merge_twin_inputs). The dimensions the shape policy
        makes dynamic are symbolic (fake/shapes.py): a static trace that meets one stops
        (NeedsSymbolicTrace) to be traced again symbolically."""
        existing = self.inputs.get(source)
        if existing is not None:
            return existing.node
        dynamic, duck = self.shapes.dims(source, value, module_state)
        if dynamic and not self.symbolic:
            raise NeedsSymbolicTrace(source.name())
        if dynamic and id(value) not in self._fake_inputs:
            fake = symbolic_fake(self.fake_mode, value, source, dynamic, duck)
            if has_symbolic_sizes(fake):
                self.symbolic_tensors.append((source, fake))
                self._add_symbols(source, value, fake)
            self._fake_inputs[id(value)] = fake
        node = self._new_placeholder(source.placeholder_name(), type(value))
        fake = self._fake_inputs.get(id(value))
        if fake is None:  # the same tensor under two sources is one FakeTensor, as from_tensor makes it
            fake = plain_fake(self.fake_mode, value)  # (static sizes, whatever the mode)
            if fake is None:
                fake = self.fake_mode.from_tensor(value, static_shapes=True)
            self._fake_inputs[id(value)] = fake
        node.meta["example_value"] = fake
        node.meta["source"] = source
        self.inputs[source] = GraphInput(source, node, value)
        self._inputs_by_fake.setdefault(id(fake), self.inputs[source])
        return node

    def _new_placeholder(self, name: str, type_expr: Any) -> torch.fx.Node:
        """A placeholder after the others: they stay first, in the order the trace met them."""
        last = self._last_placeholder
        with self.graph.inserting_after(last) if last is not None else self.graph.inserting_before(None):
            node = self.graph.create_node("placeholder", name, type_expr=type_expr,
                                          name=_placeholder_candidate(self.graph, name))
        self._last_placeholder = node
        self._made_after[node] = self._moment()
        return node

    def add_int_input(self, source: Source, value: int) -> torch.fx.Node | None:
        """An int argument the shape policy makes symbolic: a SymInt input (`L_n_: torch.SymInt`),
        as torch._dynamo makes one; a static trace that meets one stops (NeedsSymbolicTrace). None
        when the ShapeEnv specializes the value (0 and 1) or the policy keeps it static."""
        existing = self.inputs.get(source)
        if existing is not None:
            return existing.node
        if not self.shapes.int_is_dynamic(source, value):
            return None
        if not self.symbolic:
            raise NeedsSymbolicTrace(source.name())
        example = symbolic_int(self.fake_mode, value, source)
        if not isinstance(example, torch.SymInt):
            return None
        node = self._new_placeholder(source.placeholder_name(), torch.SymInt)
        node.meta["example_value"] = example
        node.meta["source"] = source
        self.inputs[source] = GraphInput(source, node, value)
        self.symbolic_ints.append((source, example))
        self.remember_sym(node)
        return node

    def _add_symbols(self, source: Source, value: torch.Tensor, fake: torch.Tensor) -> None:
        """A placeholder for each new symbol among `fake`'s sizes, named after it (`s77`), handed
        the real size on each call (the guards export `L['x'].size()[0]`)."""
        for dim, size in enumerate(fake.shape):
            if type(size) is int:
                continue
            symbol = size.node.expr
            if not symbol.is_Symbol or symbol in self.symbol_nodes:
                continue
            node = self._new_placeholder(str(symbol), torch.SymInt)
            node.meta["example_value"] = size
            size_source = TensorPropertySource(source, "size", dim)
            node.meta["source"] = size_source
            self.symbol_nodes[symbol] = node
            self.remember_sym(node)
            self.inputs[size_source] = GraphInput(size_source, node, value.size(dim))

    def sym_node(self, value: Any) -> torch.fx.Node | None:
        """The node that already computes a symbolic value, by its expression, as torch._dynamo
        finds it: `x.shape[0]` is the placeholder `s77` (or that of a symbol found equal to it),
        `x.view(-1).shape[0]` the `numel` computed before."""
        for node in self._sym_exprs.get(self.canonical_symbol(value), ()):
            if not node._erased:
                return node
        return None

    def remember_sym(self, node: torch.fx.Node) -> None:
        """`node` computes a symbolic value: found by sym_node from now on."""
        self._sym_exprs.setdefault(self.canonical_symbol(node.meta["example_value"]), []).append(node)

    def _moment(self) -> tuple[torch.fx.Node | None, int]:
        tail = self.graph._root._prev  # the last call recorded so far (a placeholder: none yet)
        return (tail if tail.op != "placeholder" else None, next(self._events))

    def realize(self, node: torch.fx.Node) -> None:
        """The trace looks at a graph input beyond passing it on (`x.shape`, `x.size()`, a method):
        where torch._dynamo realizes a lazy input, making its placeholder."""
        if node not in self._realized:
            self._realized[node] = self._moment()

    def input_of(self, fake: torch.Tensor) -> GraphInput | None:
        """The graph input (the first source read) whose FakeTensor `fake` is: the real tensor a
        traced tensor is, when it is one of the frame's (an input, or what an op gives back of it
        unchanged, `x.to(x.dtype)`); None for a tensor the graph makes."""
        return self._inputs_by_fake.get(id(fake))

    def create_node(self, op: str, target: Any, args: tuple, kwargs: dict) -> torch.fx.Node:
        """Record a call and propagate FakeTensors through it (`op` is call_function/call_method)."""
        modes = (self.grad_enabled, *self.autocast_stack)
        memo_key = (self.memo.key(op, target, args, kwargs, modes, self._memo_state, self._node_keys)
                    if self.fast_propagation and type(target) not in PER_NODE_CALLABLES else None)
        try:
            example, value_key = (self._known_example(op, target, args, kwargs, memo_key, modes)
                                  if memo_key is not None else (None, None))
        except GuardOnDataDependentSymNode:  # (a shape rule's question on a size read from a tensor:
            example, value_key = None, None  # FakeTensorMode answers without guarding, as torch does)
        if example is None:
            example = self._propagate(op, target, args, kwargs, memo_key)
        # Created bare, then given its arguments in one step (what the `args` and `kwargs` setters
        # each do): Graph.create_node scans every argument for raw SymInts (a warning; shapes here
        # are static), which costs more than the rest of the node.
        node = self.graph.create_node(op, target, name=_name_candidate(self.graph, target))
        node._update_args_kwargs(args, kwargs)
        node.meta["example_value"] = example
        if value_key is not None:
            self._node_keys[node] = value_key
        if self.symbolic and (self.shape_env.pending_fresh_unbacked_symbols or target in CHECKS):
            if bind_fresh_symbols(self.shape_env, node) or target in CHECKS:
                self.data_dependent.append(node)
        return node

    def _known_example(self, op: str, target: Any, args: tuple, kwargs: dict, memo_key: tuple,
                       modes: tuple) -> tuple[Any, tuple | None]:
        """The call's output where it is known without FakeTensorMode (remembered from an earlier
        propagation, given by a shape rule, or an in-place op's own tensor), else None; and the
        output's memo key when the output was built from remembered metadata."""
        out = self.memo.entry(memo_key)
        if out is None:
            autocast = len(modes) > 1 or self._autocast_around  # (modes: grad mode, then the trace's regions)
            out = fake_rules.infer(op, target, args, kwargs, self.grad_enabled, autocast)
            if out is None and self.symbolic:
                out = sym_rules.infer(op, target, args, kwargs, self.grad_enabled, autocast)
            if out is None:  # (strided inputs, static sizes too: torch's stride logic on ints)
                out = sym_strides.infer(op, target, args, kwargs, self.grad_enabled, autocast)
            if out is None:
                return inplace_rules.infer_inplace(op, target, args, kwargs, self.grad_enabled, autocast,
                                                   self.symbolic), None
            self.memo.store(memo_key, out)
        return out.build(self.fake_mode), getattr(out, "value_key", None)

    def _propagate(self, op: str, target: Any, args: tuple, kwargs: dict, memo_key: tuple | None) -> Any:
        """Run the call on the arguments' FakeTensors; remember the output's metadata if it may be."""
        if target is torch.tensor and memo_key is not None:  # (no mode of the user's active)
            example = constant_tensor(self.fake_mode, args, kwargs)
            if example is not None:
                return example
        self._node_keys.clear()  # a real propagation may change an input's metadata (`x.t_()`)
        fake_args = torch.fx.node.map_arg(args, _example_value)
        fake_kwargs = torch.fx.node.map_arg(kwargs, _example_value)
        if memo_key is not None:
            fake_inputs = tensor_inputs(fake_args, fake_kwargs)
            versions = [t._version for t in fake_inputs]
        try:
            with self.fake_mode, torch.set_grad_enabled(self.grad_enabled), self._autocast_regions(), \
                    self._symbolic_dispatch():
                if op == "call_method":
                    example = getattr(fake_args[0], target)(*fake_args[1:], **fake_kwargs)
                else:
                    example = target(*fake_args, **fake_kwargs)
        except Unsupported:
            raise
        except Exception as e:  # the eager run will raise it again, with the user's traceback
            if is_data_dependent_error(e):  # (nonzero, a static trace's item: captured, or a break)
                raise Unsupported(data_dependent_break(e, self.shapes, self.symbolic)) from e
            raise Unsupported(f"{_describe(op, target)} fails on these inputs ({type(e).__name__}: {e})") from e
        if memo_key is not None and not (self.symbolic and self.shape_env.pending_fresh_unbacked_symbols):
            self.memo.remember(memo_key, fake_inputs, versions, example)  # (never what makes fresh symbols)
        return example

    def _symbolic_dispatch(self) -> contextlib.AbstractContextManager:
        """Over a ShapeEnv, ops run with the Python dispatcher on, as torch._dynamo runs them: a
        composite kernel written in C++ takes concrete sizes only (baddbmm's refuses SymInts), and
        the Python dispatcher sends it to its decomposition instead."""
        return enable_python_dispatcher() if self.symbolic else contextlib.nullcontext()

    def _autocast_regions(self) -> contextlib.AbstractContextManager:
        if not self.autocast_stack:
            return contextlib.nullcontext()
        regions = contextlib.ExitStack()
        for device, dtype, enabled, cache_enabled in self.autocast_stack:
            regions.enter_context(torch.autocast(device, dtype, enabled, cache_enabled))
        return regions

    def push_vmap_level(self, batch_size: int, randomness: str) -> int:
        """Enter a vmap level for the ops traced next (variables/functorch.py): on functorch's stack
        for real, popped by pop_vmap_level or, when the trace ends without, pop_vmap_levels. The
        memo and the shape rules know nothing of batched tensors: every op inside is propagated."""
        level = torch._C._functorch._vmap_increment_nesting(batch_size, randomness)
        self.vmap_levels.append(level)
        self._memo_state = None
        return level

    def pop_vmap_level(self) -> int:
        self.vmap_levels.pop()
        level = torch._C._functorch._vmap_decrement_nesting()
        if not self.vmap_levels:
            self._memo_state = self.memo.global_state()
        return level

    def pop_vmap_levels(self) -> None:
        """The trace is over (returned, broke or failed): leave functorch's stack as it found it."""
        while self.vmap_levels:
            self.pop_vmap_level()

    def record_effect(self, target: Any, args: tuple) -> torch.fx.Node:
        """A call made for its effect on global state (`torch._C._set_grad_enabled`): not run now."""
        node = self.graph.create_node("call_function", target, args, {})
        node.meta["example_value"] = None
        return node

    def record_metadata_read(self, node: torch.fx.Node, name: str, value: Any) -> None:
        """`getattr(x, name)` of a tensor attribute whose value is known while tracing (`x.is_leaf`),
        recorded where torch._dynamo records it (it has no rule for the attribute), and kept though
        nothing uses it, as in Dynamo's graph."""
        read = self.graph.create_node("call_function", getattr, (node, name), {})
        read.meta["example_value"] = value
        read.meta["kept_unused"] = True

    def install_subgraph(self, prefix: str, gm: torch.fx.GraphModule) -> torch.fx.Node:
        """Make `gm` an attribute of the graph's module (`fwd_body_0`, numbered per prefix as
        torch._dynamo numbers them) and return the get_attr node that reads it; its example value
        is the GraphModule itself, so a higher-order op taking it propagates FakeTensors through it."""
        index = sum(1 for name in self.subgraphs if name.rsplit("_", 1)[0] == prefix)
        name = f"{prefix}_{index}"
        self.subgraphs[name] = gm
        node = self.graph.get_attr(name)
        node.meta["example_value"] = gm
        return node

    def getitem(self, node: torch.fx.Node, index: int) -> torch.fx.Node:
        """One element of a node whose value is a tuple (torch.split, max with dim, ...)."""
        item = self.graph.call_function(operator.getitem, (node, index))
        item.meta["example_value"] = node.meta["example_value"][index]
        return item

    @property
    def op_count(self) -> int:
        return sum(1 for n in self.graph.nodes if n.op in ("call_function", "call_method", "call_module"))

    # -- finishing ------------------------------------------------------------------------------
    def compile(self, outputs: list[torch.fx.Node]) -> CompiledGraph | None:
        """Close the graph with `outputs` and compile it; the result takes `self.inputs` in order.

        Every call traced stays, used or not, as in torch._dynamo 2.13 (which leaves dead code to the
        backend), except what it never records (see `drop_unused_bookkeeping`); inputs nothing
        reads are dropped. None when the graph recorded no call at all (one whose only calls were
        size arithmetic nothing uses is compiled empty, as torch._dynamo counts calls before its
        dead-code pass).
        """
        self.graph.output(tuple(outputs))
        recorded_at = {node: index for index, node in enumerate(self.graph.nodes)}  # before any drop
        sized = self.symbolic and has_size_arithmetic(self.graph)
        drop_unused_bookkeeping(self.graph)
        drop_cancelling_grad_mode_pairs(self.graph, self.initial_grad_enabled)
        if self.symbolic:
            drop_unused_size_arithmetic(self.graph)
        used = {id(inp.example) for inp in self.inputs.values() if inp.node.users} if self.compared_twins else ()
        for source, inp in list(self.inputs.items()):  # read for their metadata only (x.shape)
            if not inp.node.users and not is_symbol(inp) and not (source in self.compared_twins and id(inp.example) in used):
                self.graph.erase_node(inp.node)
                del self.inputs[source]
        if self.op_count == 0 and not sized:
            return None
        order_inputs_as_dynamo(self, recorded_at)
        merge_twin_inputs(self)
        if self.subgraphs:
            check_own_nodes(self.graph)
        name = _next_graph_name()
        root = dict(self.subgraphs) if self.subgraphs else torch.nn.Module()
        gm = torch.fx.GraphModule(root, self.graph, class_name="GraphModule")
        if self.data_dependent:
            insert_runtime_asserts(gm, self.shape_env, name)
        gm.meta["pyframe_name"] = name
        # (a symbol's example is its SymInt, as torch._dynamo hands it; the backend finds the trace's
        # FakeTensorMode, with its ShapeEnv, in the tracing context, as under torch._dynamo)
        examples = [inp.node.meta["example_value"] if not isinstance(inp.example, torch.Tensor) else inp.example
                    for inp in self.inputs.values()]
        if self.symbolic:
            self.fake_mode.cache_enabled = self._dispatch_cache
            self.fake_mode.remember_views = False
        return compile_with_backend(self.backend, self.backend_name, gm, examples, name,
                                    self.fake_mode if self.symbolic else None)


    def canonical_symbol(self, size: Any) -> Any:
        """The symbol a symbolic size stands for now (equalities found while tracing applied)."""
        return self.shape_env.replace(size.node.expr)


_graph_counter = itertools.count(1)
_name_candidates: dict[Any, str] = {}

# Classes of callables made for one node each (the NumPy wrappers of translator/variables/numpy_ops.py):
# no memo entry nor remembered name is kept for them, as none would be asked for again.
PER_NODE_CALLABLES: set[type] = set()


def _name_candidate(graph: torch.fx.Graph, target: Any) -> str:
    """The name fx gives a node of `target` before numbering it (`torch.sin` -> "sin"), computed
    once per target: fx derives it with regular expressions for every node."""
    if type(target) in PER_NODE_CALLABLES:
        return graph._target_to_str(target)
    try:
        return _name_candidates[target]
    except KeyError:
        name = _name_candidates[target] = graph._target_to_str(target)
        return name
    except TypeError:  # an unhashable target
        return graph._target_to_str(target)


def _placeholder_candidate(graph: torch.fx.Graph, target: str) -> str:
    """The name `graph.placeholder(target)` gives its node before numbering it: fx snake-cases
    the target (`L_self_modules_LayerNorm_` -> `l_self_modules_layer_norm_`) with a regular
    expression whose look-behind tries every character of a deep module path. A target with no
    capital after its first character (most) is only lowered, which costs a tenth of that."""
    rest = target[1:]
    if target.isascii() and rest == rest.lower() and not (target.startswith("__") and target.endswith("__")):
        return target.lower()
    return graph._target_to_str(target)


def rename_node(node: torch.fx.Node, candidate: str) -> None:
    """`node._rename(candidate)`: the node takes the namespace's next free name for `candidate`.

    fx's rename assigns `node.name` through Node.__setattr__, which for a node of a graph held by
    a module runs the module's replace hooks, and for every node takes it out of the graph's
    find_nodes table and puts it back. A trace's graph has no module yet and that table is keyed
    by op and target, not name, so here the name is set directly (a third of the cost)."""
    if candidate == node.name:
        return
    graph = node.graph
    if graph.owning_module is not None:
        node._rename(candidate)
        return
    namespace = graph._graph_namespace
    name = namespace.create_name(candidate, None)
    object.__setattr__(node, "name", name)
    namespace._rename_object(node, name)


def _next_graph_name() -> str:
    """`__compiled_fn_N`, numbered across the process as torch._dynamo numbers its graphs."""
    return f"__compiled_fn_{next(_graph_counter)}"


def _example_value(node: torch.fx.Node) -> Any:
    return node.meta["example_value"]


def _describe(op: str, target: Any) -> str:
    if op == "call_method":
        return f"Tensor.{target}()"
    return getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or repr(target)

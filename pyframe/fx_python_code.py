"""The Python source of a traced graph, exactly as torch.fx writes it, in a fraction of its time.

Every graph handed to a backend becomes a GraphModule, whose `forward` is Python source that
torch.fx generates from the nodes (`Graph.python_code`). fx's generator is general (type
annotations, stack-trace comments, pytree and boxed calling conventions, custom builtins, names
re-derived in a fresh namespace) and pays for that generality on every node: it swaps a repr
function into each node through `Node.__setattr__`, renames each node again, and tags each line
with a `# COUNTER` comment it parses back out with a regular expression. On a 1000-op graph that is
about a fifth of a whole trace.

`PyframeGraph.python_code` writes the same text directly for the graphs a trace records: nodes
whose names are already valid and unique (fx's own namespace made them), targets that are torch
callables or Python operators, and arguments that are nodes, numbers, strings, dtypes, devices and
containers of them. Anything else (an annotation, a user function as a target, an enum argument,
any printing option) goes to fx's generator unchanged, so the result is always fx's: same source,
same globals, same line map (tests/test_fx_python_code.py compares the two on every graph of the corpus).

Its namespace (`_Namespace`) names each node as fx's does, without fx's regular expression: that
expression's lazy base is quadratic in the length of a name, and a trace's placeholder names are
long paths (`L_self_modules_encoder_modules_layer_modules_0_..._weight_`).
"""
from __future__ import annotations

import os
from typing import Any

import torch
import torch.fx
from torch.fx.graph import (
    CodeGen,
    PythonCode,
    _custom_builtins,
    _Namespace as _FxNamespace,
    _format_target,
    _get_qualified_name,
    _illegal_names,
    _is_from_torch,
    inplace_methods,
    magic_methods,
)

# Argument types fx prints with plain repr() (its last case), each repr valid in the generated
# module: dtypes print as `torch.float32` and devices as `device(type='cpu')` (both fx globals).
_REPR_TYPES = frozenset({int, float, bool, complex, str, type(None), type(Ellipsis), torch.dtype,
                         torch.device, torch.layout, torch.memory_format})

# How fx writes the type of an annotated placeholder (torch._dynamo annotates each graph input
# with the type of its value): the names are torch's, already among the code's globals.
_ANNOTATIONS = {torch.Tensor: "torch.Tensor", torch.nn.Parameter: "torch.nn.parameter.Parameter",
                torch.SymInt: "torch.SymInt"}
_GLOBALS = {name: builtin.obj for name, builtin in _custom_builtins.items()}
_SHOW_ENV = ("FX_GRAPH_SHOW_STRIDE", "FX_GRAPH_SHOW_DEVICE", "FX_GRAPH_SHOW_META")


class _Fallback(Exception):
    """Something this writer does not model: fx's own generator writes the graph."""


class _Namespace(_FxNamespace):
    """fx's namespace of a graph's node names, the same names made faster: a candidate that is an
    ASCII identifier (every name a trace makes) is split into its base and number by `_split`;
    any other goes to fx's `create_name`, which rewrites it first."""

    def create_name(self, candidate: str, obj: object | None) -> str:
        if obj is not None and obj in self._obj_to_name:
            return self._obj_to_name[obj]
        if not (candidate.isascii() and candidate.isidentifier()):
            return super().create_name(candidate, obj)
        # (what follows is fx's create_name after its regular expression's match)
        base, num = _split(candidate)
        if num is None or candidate in self._used_names:
            num = self._base_count.get(base, 0)
            if _illegal_names.get(candidate, obj) is not obj:
                num += 1
                candidate = f"{base}_{num}"
        else:
            num = int(num)
        while candidate in self._used_names:
            num += 1
            candidate = f"{base}_{num}"
        self._used_names.add(candidate)
        self._base_count[base] = num
        if obj is not None:
            self._obj_to_name[obj] = candidate
        return candidate


def _split(name: str) -> tuple[str, str | None]:
    """fx's `_name_regex` (`^([a-zA-Z_][0-9a-zA-Z_]*?)(?:_(\\d+))?$`) on an ASCII identifier: the
    number is the digits ending the name after a `_` that is not its first character, the base
    what precedes that `_`; a name ending otherwise is all base."""
    head = name.rstrip("0123456789")
    if len(head) < len(name) and len(head) >= 2 and head[-1] == "_":
        return head[:-1], name[len(head):]
    return name, None


class PyframeGraph(torch.fx.Graph):
    """A torch.fx.Graph whose plain `python_code` (the one GraphModule.recompile asks for) is
    written by `fast_python_code`, and whose nodes are named by `_Namespace`; everything else is fx's."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._graph_namespace = _Namespace()

    def python_code(self, root_module: str, **options: Any) -> PythonCode:
        if not any(options.values()) and type(self._codegen) is CodeGen \
                and not any(os.environ.get(name, "0") == "1" for name in _SHOW_ENV):
            try:
                return fast_python_code(self, root_module)
            except _Fallback:
                pass
        return super().python_code(root_module, **options)


def fast_python_code(graph: torch.fx.Graph, root_module: str) -> PythonCode:
    """What `CodeGen._gen_python_code` returns for `graph` with default options, or _Fallback."""
    codegen = graph._codegen
    if codegen._body_transformer is not None or codegen.additional_globals():
        raise _Fallback
    nodes = list(graph.nodes)
    if not nodes or nodes[-1].op != "output":
        raise _Fallback

    # A node's last use, where fx frees it (`x = None`): the first user met walking backwards.
    # fx prints a node under a name it derives again in a fresh namespace; that name is the node's
    # own when it is unique, not a keyword, builtin or fx global, and the node is not annotated.
    last_uses: dict[torch.fx.Node, list[torch.fx.Node]] = {}
    seen: set[torch.fx.Node] = set()
    names: set[str] = set()
    for node in reversed(nodes):
        name = node.name
        if name in names or name in _illegal_names:
            raise _Fallback
        if node.type is not None and (node.op != "placeholder" or node.type not in _ANNOTATIONS):
            raise _Fallback
        names.add(name)
        for used in node._input_nodes:
            if used not in seen:
                seen.add(used)
                uses = last_uses.get(node)
                if uses is None:
                    last_uses[node] = [used]
                else:
                    uses.append(used)

    free_vars: list[str] = []
    lines: list[str] = []       # the body, one statement a line
    line_nodes: list[int] = []  # the index of the node each line belongs to (fx's line map)
    for index, node in enumerate(nodes):
        op = node.op
        if op == "placeholder":
            target = node.target
            if node._args or "*" in target:
                raise _Fallback
            annotation = node.type
            free_vars.append(target if annotation is None else f"{target} : {_ANNOTATIONS[annotation]}")
            if target != node.name:
                lines.append(f"{node.name} = {target}")
                line_nodes.append(index)
            continue
        if op == "output":
            lines.append(f"return {_repr(node._args[0])}")
            lines.append("")  # the text ends with a newline: the last (empty) line maps here too
            line_nodes += (index, index)
            continue
        statement = _statement(node, op, root_module)
        dead = last_uses.get(node)
        if not node.users:
            dead = [*dead, node] if dead else [node]
        if dead:
            statement += ";  " + " = ".join([n.name for n in dead]) + " = None"
        lines.append(statement)
        line_nodes.append(index)

    if free_vars and free_vars[0] == "self":
        raise _Fallback  # gen_fn_def would not add another `self`: not a trace's graph
    prologue = f"def {codegen._func_name}({', '.join(['self', *free_vars])}):"
    lineno_map = dict(enumerate(line_nodes, start=1))  # (the prologue is line 0)
    body = "\n    ".join(lines)  # (no line is empty but the last: fx's lstrip of the body is a no-op)
    return PythonCode(f"\n\n\n{prologue}\n    {body}", dict(_GLOBALS), _lineno_map=lineno_map,
                      _prologue_start=4)


# How a call_function target is printed: an operator's template, an in-place operator's template,
# or a torch callable's qualified name (None: fx's generator).
_MAGIC, _INPLACE, _TORCH = range(3)
_call_formats: dict[Any, tuple[int, str]] = {}  # (operators and torch's callables only: no user object is kept)


def _call_format(target: Any) -> tuple[int, str]:
    try:
        return _call_formats[target]
    except KeyError:
        found = _find_call_format(target)
        if found is None:
            raise _Fallback from None
        _call_formats[target] = found
        return found
    except TypeError:  # unhashable
        raise _Fallback from None


def _find_call_format(target: Any) -> tuple[int, str] | None:
    if getattr(target, "__module__", "") == "_operator":
        if target.__name__ in magic_methods:
            return _MAGIC, magic_methods[target.__name__]
        if target.__name__ in inplace_methods:
            return _INPLACE, inplace_methods[target.__name__]
    # torch's own callables are printed by qualified name (`torch.sin`, `torch._C._nn.linear`);
    # anything else gets a global of the generated module's own: fx's generator.
    if _is_from_torch(target) and target is not torch.device:
        return _TORCH, _get_qualified_name(target)
    return None


def _statement(node: torch.fx.Node, op: str, root_module: str) -> str:
    name = node.name
    args = node._args
    if op == "call_function":
        kind, text = _call_format(node.target)
        if kind == _TORCH:
            if node.meta.get("is_wrapped", False):
                raise _Fallback
            return f"{name} = {text}({_format_args(args, node._kwargs)})"
        if kind == _MAGIC:
            return f"{name} = {text.format(*map(_repr, args))}"
        return f"{text.format(*map(_repr, args))};  {name} = {_repr(args[0])}"
    if op == "call_method":
        return f"{name} = {_format_target(_repr(args[0]), node.target)}({_format_args(args[1:], node._kwargs)})"
    if op == "call_module":
        return f"{name} = {_format_target(root_module, node.target)}({_format_args(args, node._kwargs)})"
    if op == "get_attr":
        return f"{name} = {_format_target(root_module, node.target)}"
    raise _Fallback


def _format_args(args: tuple, kwargs: dict) -> str:
    parts = [_repr(a) for a in args]
    if kwargs:
        parts += [f"{k} = {_repr(v)}" for k, v in kwargs.items()]
    return ", ".join(parts)


def _repr(arg: Any) -> str:
    """An argument as fx prints it (`CodeGen._gen_python_code`'s `_get_repr`), for the kinds of
    argument a trace records."""
    kind = type(arg)
    if kind is torch.fx.Node:
        return arg.name
    if kind in _REPR_TYPES:
        return repr(arg)
    if isinstance(arg, tuple):
        if hasattr(arg, "_fields"):  # a namedtuple: fx adds its type as a global
            raise _Fallback
        if len(arg) == 1:
            return f"({_repr(arg[0])},)"
        return "(" + ", ".join(map(_repr, arg)) + ")"
    if isinstance(arg, list):  # (fx keeps lists as its immutable_list)
        return "[" + ", ".join(map(_repr, arg)) + "]"
    if kind is slice:
        return f"slice({_repr(arg.start)}, {_repr(arg.stop)}, {_repr(arg.step)})"
    raise _Fallback

